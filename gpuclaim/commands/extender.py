"""`gpuclaim extender [--config FILE] [--listen HOST:PORT] [--tls-cert F --tls-key F] [--metrics-listen HOST:PORT]
[--kubeconfig FILE]`: the scheduler extender server (POST /prioritize, POST /filter, /healthz, /readyz; /metrics
on the metrics port).

It needs the cluster: an explicit kubeconfig, the in-cluster service account, or $KUBECONFIG/~/.kube/config.
Without any of them it refuses to start (exit 2 with the reason): a scorer without a cluster view would only
ever answer equal scores. Flags override the config file's ``extender`` section; TLS files from flags or
``extender.tls``; without them it serves plain HTTP.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from gpuclaim.commands._serve import add_server_arguments, load_config_file
from gpuclaim.exitstatus import ExitStatus, UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    add_server_arguments(parser, section="extender", serves="scheduler-facing")
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: in-cluster, then $KUBECONFIG)")


def _listen(value: str, flag: str) -> str:
    _host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"{flag} {value}: expected HOST:PORT")
    return value


def run(args: argparse.Namespace) -> int:
    from gpuclaim.extender import app
    from gpuclaim.kube.config import KubeConfigError

    config = load_config_file(args.config)
    ext = config.extender
    listen = _listen(args.listen or ext.listen, "--listen")
    metrics_listen = _listen(args.metrics_listen or ext.metrics_listen, "--metrics-listen")
    cert = args.tls_cert or (Path(ext.tls.cert_file) if ext.tls.cert_file else None)
    key = args.tls_key or (Path(ext.tls.key_file) if ext.tls.key_file else None)
    if (cert is None) != (key is None):
        raise UsageError("--tls-cert and --tls-key go together")
    logging.basicConfig(level=config.logging.level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        asyncio.run(app.run(config, listen=listen, metrics_listen=metrics_listen, kubeconfig=args.kubeconfig,
                            tls_cert=cert, tls_key=key))
    except KubeConfigError as exc:
        raise UsageError(f"no cluster to watch: {exc} (pass --kubeconfig or run in a pod)") from None
    except OSError as exc:
        raise UsageError(f"cannot serve: {exc}") from None
    return ExitStatus.OK
