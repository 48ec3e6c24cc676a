"""Admission: conversion, validation, AdmissionReview handling, the HTTPS app."""
