"""Where the API server is and how to authenticate: in-cluster service account or a kubeconfig.

The `kubernetes` package reads the config (every kubeconfig form it understands, exec plugins
included) into a private `Configuration` object, never its global default; we take the server URL,
CA, client certificate and bearer token from it and do the HTTP ourselves with aiohttp.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException


class KubeConfigError(Exception):
    """The cluster connection could not be configured (message says which file or setting)."""


@dataclass(frozen=True)
class ApiConfig:
    server: str  # https://host:port, no trailing slash
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    token: Callable[[], str | None] = lambda: None  # "Bearer ..." header value, re-read for rotated tokens

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.server.startswith("https://"):
            return None
        context = ssl.create_default_context(cafile=self.ca_file)
        if not self.verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_file and self.key_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context


def _from_configuration(conf: k8s_client.Configuration) -> ApiConfig:
    def token() -> str | None:
        if conf.refresh_api_key_hook is not None:
            conf.refresh_api_key_hook(conf)
        for key in ("BearerToken", "authorization"):
            value = conf.api_key.get(key)
            if value:
                return str(value) if str(value).startswith("Bearer ") else f"Bearer {value}"
        return None

    return ApiConfig(server=str(conf.host).rstrip("/"), ca_file=conf.ssl_ca_cert, cert_file=conf.cert_file,
                     key_file=conf.key_file, verify=bool(conf.verify_ssl), token=token)


def from_kubeconfig(path: str | os.PathLike[str] | None = None, *, context: str | None = None) -> ApiConfig:
    conf = k8s_client.Configuration()
    try:
        k8s_config.load_kube_config(config_file=None if path is None else os.fspath(path), context=context,
                                    client_configuration=conf, persist_config=False)
    except (ConfigException, OSError, TypeError, ValueError) as exc:
        raise KubeConfigError(f"kubeconfig {path or '~/.kube/config'}: {exc}") from None
    return _from_configuration(conf)


def in_cluster() -> ApiConfig:
    conf = k8s_client.Configuration()
    try:
        k8s_config.load_incluster_config(client_configuration=conf)
    except (ConfigException, OSError) as exc:
        raise KubeConfigError(f"in-cluster config: {exc}") from None
    return _from_configuration(conf)


def load(kubeconfig: str | os.PathLike[str] | None = None) -> ApiConfig:
    """An explicit kubeconfig wins; inside a pod the service account; else $KUBECONFIG / ~/.kube/config."""
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster()
    return from_kubeconfig(kubeconfig)
