"""How both servers (the webhook and the extender) are served: one routine, in a layer both use.

- `run.serve`: the main site over TLS and the metrics site, SIGTERM/SIGINT, a grace period for in-flight requests,
  /readyz 503 while stopping (`run.stopping`), cleanup in `finally`.
- `connections`: the bounds on one connection (TLS handshake, first request head, body read, idle keep-alive).
- `metrics`: the /metrics app and the series every server has (build info, certificate expiry).
- `logs`: JSON or text log lines on stderr, per `logging.format`.
- `offload`: the worker thread that decodes big request bodies off the event loop.

The webhook and the extender import this package, never each other (import-linter checks it).
"""
