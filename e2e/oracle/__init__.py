"""Upstream Kubernetes code as test oracles: small Go programs built from Go modules (each folder has its own
go.mod), driven over stdin/stdout with JSON lines by the differential tests. Not installed, never shipped.

``gobuild`` builds a folder's binary once per content hash into the user cache; ``jsonlines`` is the exchange with
the running process that both clients build on; each oracle's Python client lives next to its Go sources.
"""
