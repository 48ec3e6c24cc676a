"""`gpuclaim webhook`: the admission server (HTTPS /mutate, /validate, /healthz, /readyz; HTTP /metrics).

Flags override the config file's `webhook` section. The certificate pair is required (the apiserver only calls
webhooks over HTTPS) and is reloaded when the files change. The cluster view starts when `--kubeconfig` is given
or the process runs in a pod; without either the server runs without a cluster (see docs/operations.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any

from gpuclaim.commands._config import load_config_file
from gpuclaim.commands._serve import add_server_arguments
from gpuclaim.exitstatus import ExitStatus, UsageError

# config key path -> the flag that set it, so an error names what the user typed
_FLAGS = {"webhook.listen": "--listen", "webhook.metricsListen": "--metrics-listen"}


def configure(parser: argparse.ArgumentParser) -> None:
    add_server_arguments(parser, section="webhook", serves="HTTPS")
    parser.add_argument("--kubeconfig", type=Path, metavar="FILE",
                        help="cluster access for the cluster view (default: in-cluster when in a pod, else none)")


def _load(args: argparse.Namespace) -> Any:
    return load_config_file(args.config, overrides=lambda data: _with_flags(args, data), flags=_FLAGS)


def _with_flags(args: argparse.Namespace, data: dict[str, Any]) -> dict[str, Any]:
    section = data.get("webhook") or {}
    if isinstance(section, dict):  # anything else is left for the loader to report with its path
        section = dict(section)
        if args.listen is not None:
            section["listen"] = args.listen
        if args.metrics_listen is not None:
            section["metricsListen"] = args.metrics_listen
        tls = section.get("tls") or {}
        if isinstance(tls, dict) and (args.tls_cert is not None or args.tls_key is not None):
            tls = dict(tls)
            if args.tls_cert is not None:
                tls["certFile"] = str(args.tls_cert)
            if args.tls_key is not None:
                tls["keyFile"] = str(args.tls_key)
            section["tls"] = tls
        data = {**data, "webhook": section}
    return data


def _kube_config(args: argparse.Namespace) -> Any:
    from gpuclaim.kube import config as kube_config

    try:
        if args.kubeconfig is not None:
            return kube_config.from_kubeconfig(args.kubeconfig)
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            return kube_config.in_cluster()
    except kube_config.KubeConfigError as exc:
        raise UsageError(f"--kubeconfig: {exc}") from None
    return None  # a developer's ~/.kube/config is never picked up silently


def run(args: argparse.Namespace) -> int:
    from gpuclaim.certs import files, material
    from gpuclaim.serving import logs
    from gpuclaim.serving import run as serving
    from gpuclaim.webhook import admit, app, keys

    config = _load(args)
    logs.setup(level=config.logging.level, fmt=config.logging.format)
    tls = config.webhook.tls
    if not tls.cert_file or not tls.key_file:
        raise UsageError("--tls-cert and --tls-key (or webhook.tls.certFile/keyFile) are required: "
                         "kube-apiserver calls webhooks over HTTPS only")
    try:
        reloader = files.reloading_server_context(cert_file=Path(tls.cert_file), key_file=Path(tls.key_file),
                                                  min_version=tls.min_version,
                                                  interval=config.certs.reload_interval_seconds)
    except (OSError, material.MaterialError, ValueError) as exc:
        raise UsageError(f"--tls-cert/--tls-key: no usable certificate pair: {exc}") from None
    kube = _kube_config(args)
    # gpuclaim's own namespace is never converted (the chart sets POD_NAMESPACE from the downward API)
    checks = admit.core_checks(own_namespace=os.environ.get("POD_NAMESPACE") or None)
    application = app.create_app(config, checks=checks, reloader=reloader, kube_config=kube,
                                 namespace=os.environ.get("POD_NAMESPACE") or None)
    try:
        asyncio.run(serving.serve(application, listen=config.webhook.listen,
                                  metrics_listen=config.webhook.metrics_listen, registry=application[keys.REGISTRY],
                                  ssl_context=reloader.context, grace_period=config.webhook.grace_period_seconds))
    except OSError as exc:  # the address is taken or not ours to bind
        raise UsageError(f"--listen/--metrics-listen: cannot listen: {exc.strerror or exc}") from None
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    return ExitStatus.OK
