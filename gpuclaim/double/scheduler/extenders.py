"""HTTP scheduler extenders as kube-scheduler 1.34 configures and calls them (pkg/scheduler/extender.go).

Configured with the `extenders[]` entries of a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1):
`urlPrefix`, `filterVerb`, `prioritizeVerb`, `weight`, `nodeCacheCapable`, `ignorable`, `enableHTTPS`,
`tlsConfig` (`caData` base64 / `caFile`, `insecure`, `serverName`, and the client certificate `certData`/`keyData`
base64 or `certFile`/`keyFile`), `httpTimeout` ("5s", "500ms"; default 5s),
`managedResources`. The wire JSON is the real one: PascalCase keys, `Nodes` as a NodeList or `NodeNames`.
"""

from __future__ import annotations

import base64
import binascii
import re
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from gpuclaim.certs import material
from gpuclaim.certs.context import client_context

Obj = dict[str, Any]
MAX_EXTENDER_PRIORITY = 10
MAX_NODE_SCORE = 100
DEFAULT_TIMEOUT = 5.0
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)$")


class ExtenderConfigError(ValueError):
    """A bad `extenders[i]` entry; the message starts with its field path."""


class ExtenderError(Exception):
    """The call failed (transport, non-200, undecodable reply, or `Error` set by the extender)."""


def _duration(value: Any, field: str) -> float:
    if value is None:
        return DEFAULT_TIMEOUT
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise ExtenderConfigError(f'{field}: Invalid value: "{value}": a duration such as "5s" or "500ms"')
    number, unit = float(match.group(1)), match.group(2)
    return number / 1000 if unit == "ms" else number * (60 if unit == "m" else 1)


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    url_prefix: str
    filter_verb: str = ""
    prioritize_verb: str = ""
    weight: int = 0
    node_cache_capable: bool = False
    ignorable: bool = False
    enable_https: bool = False
    ca_pem: bytes | None = None
    insecure: bool = False
    server_name: str | None = None
    #: the client certificate and key (PEM) presented to the extender, as kube-scheduler's tlsConfig certFile/keyFile
    client_pair: tuple[bytes, bytes] | None = None
    http_timeout: float = DEFAULT_TIMEOUT
    managed_resources: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.url_prefix

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], index: int = 0) -> ExtenderConfig:
        """Validate like kube-scheduler's validateExtenders; errors name `extenders[i].<field>`."""
        path = f"extenders[{index}]"
        if not isinstance(raw, Mapping):
            raise ExtenderConfigError(f"{path}: must be an object")
        prefix = raw.get("urlPrefix")
        if not isinstance(prefix, str) or not prefix:
            raise ExtenderConfigError(f"{path}.urlPrefix: Required value")
        weight = raw.get("weight", 0)
        if not isinstance(weight, int) or isinstance(weight, bool):
            raise ExtenderConfigError(f"{path}.weight: Invalid value: {weight!r}: must be an integer")
        if raw.get("prioritizeVerb") and weight <= 0:
            raise ExtenderConfigError(f"{path}.weight: Invalid value: {weight}: must have a positive weight applied "
                                      "to it")
        tls = raw.get("tlsConfig") or {}
        if not isinstance(tls, Mapping):
            raise ExtenderConfigError(f"{path}.tlsConfig: must be an object")
        in_tls = ("ca", "server", "cert", "key")
        for key in ("filterVerb", "prioritizeVerb", "caData", "caFile", "serverName", "certData", "certFile",
                    "keyData", "keyFile"):
            value = (tls if key.startswith(in_tls) else raw).get(key)
            if value is not None and not isinstance(value, str):
                where = f"tlsConfig.{key}" if key.startswith(in_tls) else key
                raise ExtenderConfigError(f"{path}.{where}: Invalid value: {value!r}: must be a string")
        ca_pem = None
        if tls.get("caData"):
            try:
                ca_pem = base64.b64decode(tls["caData"], validate=True)
            except (binascii.Error, ValueError):
                raise ExtenderConfigError(f"{path}.tlsConfig.caData: Invalid value: not base64") from None
        elif tls.get("caFile"):
            try:
                ca_pem = Path(tls["caFile"]).read_bytes()
            except OSError as exc:
                raise ExtenderConfigError(f"{path}.tlsConfig.caFile: {exc}") from None
        client_pair = _client_pair(tls, path)
        managed_raw = raw.get("managedResources") or []
        if not isinstance(managed_raw, list) or not all(isinstance(m, Mapping) and isinstance(m.get("name"), str)
                                                        for m in managed_raw):
            raise ExtenderConfigError(f"{path}.managedResources: must be a list of {{name: string}}")
        managed = tuple(m["name"] for m in managed_raw)
        return cls(url_prefix=prefix, filter_verb=str(raw.get("filterVerb") or ""),
                   prioritize_verb=str(raw.get("prioritizeVerb") or ""), weight=weight,
                   node_cache_capable=bool(raw.get("nodeCacheCapable")), ignorable=bool(raw.get("ignorable")),
                   enable_https=bool(raw.get("enableHTTPS")), ca_pem=ca_pem, insecure=bool(tls.get("insecure")),
                   server_name=tls.get("serverName") or None, client_pair=client_pair,
                   http_timeout=_duration(raw.get("httpTimeout"), f"{path}.httpTimeout"), managed_resources=managed)


def _client_pair(tls: Mapping[str, Any], path: str) -> tuple[bytes, bytes] | None:
    """tlsConfig's client certificate: `certData`/`keyData` (base64 PEM) over `certFile`/`keyFile`, as client-go
    prefers data to files; both halves or neither."""
    halves: list[bytes] = []
    for data_key, file_key in (("certData", "certFile"), ("keyData", "keyFile")):
        if tls.get(data_key):
            try:
                halves.append(base64.b64decode(tls[data_key], validate=True))
            except (binascii.Error, ValueError):
                raise ExtenderConfigError(f"{path}.tlsConfig.{data_key}: Invalid value: not base64") from None
        elif tls.get(file_key):
            try:
                halves.append(Path(tls[file_key]).read_bytes())
            except OSError as exc:
                raise ExtenderConfigError(f"{path}.tlsConfig.{file_key}: {exc}") from None
    if len(halves) == 1:
        raise ExtenderConfigError(f"{path}.tlsConfig: a client certificate needs both certFile/certData and "
                                  "keyFile/keyData")
    if not halves:
        return None
    try:
        material.load_pair(halves[0], halves[1], what="client")
    except material.MaterialError as exc:
        raise ExtenderConfigError(f"{path}.tlsConfig: {exc}") from None
    return halves[0], halves[1]


@dataclass(frozen=True, slots=True)
class FilterResult:
    nodes: list[str]
    failed: dict[str, str]  # node -> reason (FailedNodes and FailedAndUnresolvableNodes)


class HTTPExtender:
    def __init__(self, config: ExtenderConfig, session: aiohttp.ClientSession) -> None:
        self.config = config
        self.session = session
        self._ssl: ssl.SSLContext | bool = False
        if config.enable_https:
            if config.ca_pem is not None and not config.insecure:
                self._ssl = client_context(ca_pem=config.ca_pem)
            else:  # upstream: HTTPS with no CA configured means an insecure transport
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
                self._ssl = context
            if config.client_pair is not None:
                _load_pair(self._ssl, *config.client_pair)

    def interested(self, pod: Obj) -> bool:
        """IsInterested: with managedResources, only pods requesting one of them (requests or limits)."""
        if not self.config.managed_resources:
            return True
        spec = pod.get("spec") or {}
        for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
            resources = container.get("resources") or {}
            names = {*(resources.get("requests") or {}), *(resources.get("limits") or {})}
            if names & set(self.config.managed_resources):
                return True
        return False

    def _args(self, pod: Obj, nodes: Sequence[Obj]) -> Obj:
        if self.config.node_cache_capable:
            return {"Pod": pod, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in nodes]}
        return {"Pod": pod, "Nodes": {"metadata": {}, "items": list(nodes)}, "NodeNames": None}

    async def _send(self, verb: str, args: Obj) -> Any:
        url = self.config.url_prefix.rstrip("/") + "/" + verb
        try:
            async with self.session.post(url, data=orjson.dumps(args), ssl=self._ssl,
                                         server_hostname=self.config.server_name,
                                         headers={"Content-Type": "application/json"},
                                         timeout=aiohttp.ClientTimeout(total=self.config.http_timeout)) as reply:
                raw = await reply.read()
                if reply.status != 200:
                    raise ExtenderError(f"failed {verb} with extender at URL {url}, code {reply.status}")
        except TimeoutError:
            raise ExtenderError(f'Post "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting '
                                "headers)") from None
        except aiohttp.ClientError as exc:
            raise ExtenderError(f'Post "{url}": {exc}') from None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ExtenderError(f"{verb} with extender at URL {url}: undecodable reply: {exc}") from None

    async def filter(self, pod: Obj, nodes: Sequence[Obj]) -> FilterResult:
        reply = await self._send(self.config.filter_verb, self._args(pod, nodes))
        if not isinstance(reply, dict):
            raise ExtenderError(f"{self.config.filter_verb}: the reply is not an ExtenderFilterResult object")
        if reply.get("Error"):
            raise ExtenderError(str(reply["Error"]))
        given = [n["metadata"]["name"] for n in nodes]
        if self.config.node_cache_capable:
            kept = list(reply.get("NodeNames") or [])
            unknown = [n for n in kept if n not in given]
            if unknown:
                raise ExtenderError(f'extender "{self.config.name}" claims a filtered node "{unknown[0]}" which is '
                                    "not found in the input node list")
        else:
            kept = [n["metadata"]["name"] for n in (reply.get("Nodes") or {}).get("items") or ()]
        failed = {**(reply.get("FailedNodes") or {}), **(reply.get("FailedAndUnresolvableNodes") or {})}
        return FilterResult(nodes=kept, failed={str(k): str(v) for k, v in failed.items()})

    async def prioritize(self, pod: Obj, nodes: Sequence[Obj]) -> dict[str, int]:
        """Host -> score * weight (the caller scales by MaxNodeScore / MaxExtenderPriority)."""
        reply = await self._send(self.config.prioritize_verb, self._args(pod, nodes))
        if not isinstance(reply, list):
            raise ExtenderError(f"{self.config.prioritize_verb}: the reply is not a HostPriorityList")
        out: dict[str, int] = {}
        for entry in reply:
            if isinstance(entry, dict) and isinstance(entry.get("Score"), int):
                out[str(entry.get("Host"))] = entry["Score"] * self.config.weight
        return out


def _load_pair(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """`load_cert_chain` reads files only: through a private temporary directory."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gpuclaim-extender-client-") as tmp:
        cert, key = Path(tmp) / "client.crt", Path(tmp) / "client.key"
        cert.write_bytes(cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(key_pem)
        context.load_cert_chain(str(cert), str(key))
