"""Scheduler extender: protocol, scoring, the HTTP app."""
