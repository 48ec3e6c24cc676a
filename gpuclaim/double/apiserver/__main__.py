"""`python -m e2e.apiserver --listen HOST:PORT [--tls-cert F --tls-key F] [--load DIR]
[--webhook-service NS/NAME:PORT=HOST:PORT ...] [--controllers]`.

Prints the kubeconfig path as the first line on stdout, then serves until interrupted. Writes pass the
admission webhook chain (e2e/apiserver/webhooks.py); `--controllers` also runs the resourceclaim controller.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import tempfile
from pathlib import Path

from gpuclaim.double.apiserver import errors, webhooks
from gpuclaim.double.apiserver.app import Settings
from gpuclaim.double.apiserver.server import load_directory, serve
from gpuclaim.double.apiserver.store import Store


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"--listen: expected HOST:PORT, got {text!r}")
    return host or "127.0.0.1", int(port)


async def _main(args: argparse.Namespace) -> int:
    chain = webhooks.WebhookAdmission(services=dict(args.webhook_service))
    store = Store(history_size=args.history, validate=not args.no_validate, admission=chain)
    chain.store = store
    if args.load is not None:
        try:
            count = load_directory(store, args.load)
        except errors.ApiError as exc:
            print(f"e2e.apiserver: --load {args.load}: {exc.message}", file=sys.stderr)
            return 2
        print(f"e2e.apiserver: loaded {count} objects from {args.load}", file=sys.stderr)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gpuclaim-double-"))
    workdir.mkdir(parents=True, exist_ok=True)
    host, port = args.listen
    double = await serve(host=host, port=port, store=store, workdir=workdir, tls=not args.plain_http,
                         tls_cert=args.tls_cert, tls_key=args.tls_key, tls_ca=args.tls_ca,
                         settings=Settings(bookmark_interval=args.bookmark_interval))
    print(double.kubeconfig, flush=True)
    print(f"e2e.apiserver: serving {double.url} (a test double, not a kube-apiserver)", file=sys.stderr, flush=True)
    controller = None
    if args.controllers:
        from gpuclaim.double.controllers import ResourceClaimController
        from gpuclaim.kube import KubeClient, config

        client = KubeClient(config.from_kubeconfig(double.kubeconfig))
        controller = ResourceClaimController(client)
        await controller.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    if controller is not None:
        await controller.stop()
        await controller.client.close()
    await double.close()
    return 0


def _service(text: str) -> tuple[str, str]:
    service, sep, target = text.partition("=")
    if not sep or "/" not in service or not target:
        raise argparse.ArgumentTypeError(f"--webhook-service: expected NS/NAME:PORT=HOST:PORT, got {text!r}")
    if ":" not in service:
        service += ":443"
    return service, target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.apiserver", description=__doc__)
    parser.add_argument("--listen", type=_listen, default=("127.0.0.1", 0), help="HOST:PORT (port 0: any free)")
    parser.add_argument("--tls-cert", type=Path, help="serving certificate (default: a fresh self-signed CA + cert)")
    parser.add_argument("--tls-key", type=Path)
    parser.add_argument("--tls-ca", type=Path, help="CA to put into the kubeconfig (default: --tls-cert itself)")
    parser.add_argument("--plain-http", action="store_true", help="serve plain HTTP (tests of non-TLS paths only)")
    parser.add_argument("--load", type=Path, help="preload the YAML/JSON manifests in DIR")
    parser.add_argument("--workdir", type=Path, help="where kubeconfig and TLS files go (default: a temp dir)")
    parser.add_argument("--history", type=int, default=1000, help="watch events kept before 410 Expired")
    parser.add_argument("--bookmark-interval", type=float, default=60.0)
    parser.add_argument("--no-validate", action="store_true", help="skip schema validation on write")
    parser.add_argument("--webhook-service", type=_service, action="append", default=[],
                        help="where a webhook clientConfig.service is served: NS/NAME[:PORT]=HOST:PORT (repeatable)")
    parser.add_argument("--controllers", action="store_true", help="run the resourceclaim controller")
    args = parser.parse_args(argv)
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    if args.load is not None and not args.load.is_dir():
        parser.error(f"--load: {args.load} is not a directory")
    return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())
