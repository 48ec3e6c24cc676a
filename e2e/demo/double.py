"""`python -m e2e.demo.double --load DIR --webhook-service NS/NAME:PORT=HOST:PORT [--workdir DIR]`.

The API double (`e2e.apiserver`) as a process, with its admission webhook chain on: kube-apiserver resolves a
webhook's `clientConfig.service` through the Service's endpoints, the double through `--webhook-service`.
Prints the kubeconfig path as its first line on stdout, serves until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path

from e2e.apiserver import Store, errors, load_directory, serve
from e2e.apiserver.webhooks import WebhookAdmission


def _service(text: str) -> tuple[str, str]:
    key, sep, target = text.partition("=")
    if not sep or "/" not in key or ":" not in key or ":" not in target:
        raise argparse.ArgumentTypeError(f"--webhook-service: expected NS/NAME:PORT=HOST:PORT, got {text!r}")
    return key, target


async def _main(args: argparse.Namespace) -> int:
    chain = WebhookAdmission(services=dict(args.webhook_service))
    store = Store(history_size=args.history, admission=chain)
    chain.store = store
    try:
        count = load_directory(store, args.load)
    except errors.ApiError as exc:
        print(f"e2e.demo.double: --load {args.load}: {exc.message}", file=sys.stderr)
        return 2
    args.workdir.mkdir(parents=True, exist_ok=True)
    double = await serve(host="127.0.0.1", port=args.port, store=store, workdir=args.workdir)
    print(double.kubeconfig, flush=True)
    print(f"e2e.demo.double: {count} objects loaded; serving {double.url} (a test double, not a kube-apiserver)",
          file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await double.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.demo.double", description=__doc__)
    parser.add_argument("--load", type=Path, required=True, help="preload the YAML manifests in DIR")
    parser.add_argument("--webhook-service", type=_service, action="append", default=[],
                        metavar="NS/NAME:PORT=HOST:PORT", help="where a webhook Service's endpoint listens")
    parser.add_argument("--workdir", type=Path, required=True, help="kubeconfig and TLS files go here")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--history", type=int, default=1000, help="watch events kept before 410 Expired")
    args = parser.parse_args(argv)
    if not args.load.is_dir():
        parser.error(f"--load: {args.load} is not a directory")
    return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())
