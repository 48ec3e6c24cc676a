"""A webhook process for the shutdown tests: `python slow_server.py CERT KEY GRACE`, the stand-in checks
(`slow-<seconds>-*` pods sleep), `gpuclaim.serving.run.serve` with its SIGTERM handling; prints its URL when serving."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from server_helpers import StandInChecks, make_config

from gpuclaim.certs.files import reloading_server_context
from gpuclaim.serving import run as serving
from gpuclaim.webhook import app, keys


def main() -> int:
    cert, key, grace = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    reloader = reloading_server_context(cert_file=cert, key_file=key)
    application = app.create_app(make_config(), checks=StandInChecks(), reloader=reloader, time_limit=60.0)

    def started(urls: list[str]) -> None:
        print(urls[0], flush=True)

    asyncio.run(serving.serve(application, listen="127.0.0.1:0", metrics_listen=None,
                              registry=application[keys.REGISTRY], ssl_context=reloader.context, grace_period=grace,
                              on_started=started))
    print("exited", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
