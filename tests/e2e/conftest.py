"""Fixtures: the API double with the webhook chain, and small real TLS servers (tests/e2e/e2e_servers.py)."""

from e2e_servers import cluster, tls_server

__all__ = ["cluster", "tls_server"]
