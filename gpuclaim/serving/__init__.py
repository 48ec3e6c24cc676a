"""How both servers (the webhook and the extender) are served: one routine, in a layer both use.

- `run.serve`: the main site over TLS and the metrics site, SIGTERM/SIGINT, a grace period for in-flight requests,
  /readyz 503 while stopping (`run.stopping`), cleanup in `finally`.
- `connections`: the bounds on one connection (TLS handshake, every request head, body read, unread answers, idle
  keep-alive), and on the connections of a site and of one source.
- `bodies`: the budget for request bodies and answers held at once, per server and per source (429/503).
- `metrics`: the /metrics app, which formats the exposition in a worker thread of its own (`on_loop` for collectors
  that read what the event loop owns), and the series every server has (build info, certificate expiry).
- `logs`: JSON or text log lines on stderr, per `logging.format`.
- `offload`: the worker thread that decodes big request bodies off the event loop.

The webhook and the extender import this package, never each other (import-linter checks it).
"""
