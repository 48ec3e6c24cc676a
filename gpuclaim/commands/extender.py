"""`gpuclaim extender [--config FILE] [--listen HOST:PORT] [--tls-cert F --tls-key F] [--metrics-listen HOST:PORT]
[--kubeconfig FILE] [--fleet-listen HOST:PORT]`: the scheduler extender server (POST /prioritize, POST /filter,
/healthz, /readyz; /metrics on the metrics port; the fleet view on the fleet port when one is given).

It needs the cluster: an explicit kubeconfig, the in-cluster service account, or $KUBECONFIG/~/.kube/config.
Without any of them it refuses to start (exit 2 with the reason): a scorer without a cluster view would only
ever answer equal scores. Flags override the config file's ``extender`` section; TLS files from flags or
``extender.tls``; without them it serves plain HTTP.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from gpuclaim.commands._config import load_config_file
from gpuclaim.commands._serve import add_server_arguments
from gpuclaim.exitstatus import ExitStatus, UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    add_server_arguments(parser, section="extender", serves="scheduler-facing")
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: in-cluster, then $KUBECONFIG)")
    parser.add_argument("--fleet-listen", metavar="HOST:PORT",
                        help="also serve the fleet page and API there, TLS with the serving certificate "
                             "(overrides fleet.listen; docs/fleet.md)")


def _listen(value: str, flag: str) -> str:
    _host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"{flag} {value}: expected HOST:PORT")
    return value


def run(args: argparse.Namespace) -> int:
    from gpuclaim.certs import files, material
    from gpuclaim.extender import app, keys
    from gpuclaim.kube import config as kube_config
    from gpuclaim.serving import logs
    from gpuclaim.serving import run as serving

    config = load_config_file(args.config)
    ext = config.extender
    listen = _listen(args.listen or ext.listen, "--listen")
    metrics_listen = _listen(args.metrics_listen or ext.metrics_listen, "--metrics-listen")
    fleet_text = args.fleet_listen or config.fleet.listen
    fleet_listen = _listen(fleet_text, "--fleet-listen") if fleet_text else None
    cert = args.tls_cert or (Path(ext.tls.cert_file) if ext.tls.cert_file else None)
    key = args.tls_key or (Path(ext.tls.key_file) if ext.tls.key_file else None)
    if (cert is None) != (key is None):
        raise UsageError("--tls-cert and --tls-key go together")
    logs.setup(level=config.logging.level, fmt=config.logging.format)
    try:
        api = kube_config.load(args.kubeconfig)
    except kube_config.KubeConfigError as exc:
        raise UsageError(f"no cluster to watch: {exc} (pass --kubeconfig or run in a pod)") from None
    reloader = None
    if cert is not None and key is not None:
        try:
            reloader = files.reloading_server_context(cert_file=cert, key_file=key, min_version=ext.tls.min_version,
                                                      interval=config.certs.reload_interval_seconds)
        except (OSError, material.MaterialError, ValueError) as exc:
            raise UsageError(f"--tls-cert/--tls-key: no usable certificate pair: {exc}") from None
    fleet_reloader = None
    if fleet_listen is not None and cert is not None and key is not None:
        # the fleet port's own context over the same files: never the client-certificate check of the main port
        fleet_reloader = files.reloading_server_context(cert_file=cert, key_file=key, min_version=ext.tls.min_version,
                                                        interval=config.certs.reload_interval_seconds)
    application = app.create_app(config, api=api, reloader=reloader, fleet_listen=fleet_listen,
                                 fleet_reloader=fleet_reloader)
    try:
        asyncio.run(serving.serve(application, listen=listen, metrics_listen=metrics_listen,
                                  registry=application[keys.REGISTRY],
                                  ssl_context=reloader.context if reloader else None,
                                  grace_period=ext.grace_period_seconds))
    except OSError as exc:
        raise UsageError(f"cannot serve: {exc}") from None
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    return ExitStatus.OK
