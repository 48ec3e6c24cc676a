"""TLS for the servers: issue a CA and serving certificates, store them in a Secret, inject the
caBundle into the webhook configurations, build SSL contexts and hot-reload certificate files.

Public modules: `selfsigned` (issue), `context` (SSLContexts), `files` (CertReloader, atomic
writes), `rotation` (pure decisions), `secret` (stored form), `api` (the kube-apiserver slice we
need, a Protocol), `reconcile` (drive it against the cluster).
"""

from gpuclaim.certs import api, context, files, material, reconcile, rotation, secret, selfsigned
from gpuclaim.certs.context import client_context, server_context
from gpuclaim.certs.files import CertReloader

__all__ = [
    "CertReloader",
    "api",
    "client_context",
    "context",
    "files",
    "material",
    "reconcile",
    "rotation",
    "secret",
    "selfsigned",
    "server_context",
]
