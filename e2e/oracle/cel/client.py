"""Client of the CEL oracle: one long-lived Go process, one JSON line per request each way.

``match`` is what a user meets: kube-apiserver validating a new selector (length, NewExpressions environment,
cost limit), then kube-scheduler evaluating it on a device (StoredExpressions, ``DeviceMatches``). ``eval``
returns the value of any expression in the scheduler's environment, typed (see :func:`render`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2e.oracle import versions
from e2e.oracle.jsonlines import JsonLinesProcess

FOLDER = Path(__file__).resolve().parent


def binary(version: str = versions.NEWEST) -> Path:
    """The oracle's binary for Kubernetes ``version`` ("1.37"; built on first use, cached by source hash)."""
    return versions.build(FOLDER, "cel-oracle", version)


def device_json(device: Any) -> dict[str, Any]:
    """A ``gpuclaim.dra.cel.Device`` as the oracle's resource.k8s.io/v1 device fields."""
    attributes: dict[str, Any] = {}
    for name, value in device.attributes.items():
        if type(value) is bool:
            attributes[name] = {"bool": value}
        elif type(value) is int:
            attributes[name] = {"int": value}
        elif type(value) is str:
            attributes[name] = {"string": value}
        else:
            attributes[name] = {"version": str(value)}
    capacity = {name: {"value": str(q)} for name, q in device.capacity.items()}
    out: dict[str, Any] = {"driver": device.driver, "attributes": attributes, "capacity": capacity}
    multi = getattr(device, "allow_multiple_allocations", None)
    if multi is not None:
        out["allowMultipleAllocations"] = bool(multi)
    return out


class CelOracle(JsonLinesProcess):
    """``match_many`` / ``eval_many`` stream a batch through the same process; replies in request order."""

    name = "CEL oracle"

    def __init__(self, path: Path | None = None, *, version: str = versions.NEWEST) -> None:
        super().__init__(path or binary(version))
        self.version_name = version

    def __enter__(self) -> CelOracle:
        return self

    def _failure(self, reply: Mapping[str, Any]) -> str | None:
        if reply.get("stage") in ("protocol", "panic"):
            return f"{reply['stage']}: {reply.get('error')}"
        return None

    def match(self, expr: str, device: Any, *, env: str = "new") -> dict[str, Any]:
        return self.match_many([(expr, device)], env=env)[0]

    def match_many(self, cases: Sequence[tuple[str, Any]], *, env: str = "new") -> list[dict[str, Any]]:
        return self.exchange([{"op": "match", "expr": e, "env": env, "device": device_json(d)} for e, d in cases])

    def eval(self, expr: str, device: Any) -> dict[str, Any]:
        return self.eval_many([(expr, device)])[0]

    def eval_many(self, cases: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
        return self.exchange([{"op": "eval", "expr": e, "device": device_json(d)} for e, d in cases])

    def about(self) -> dict[str, Any]:
        """The DRA library module, the new-expression environment's compatibility version and the default of
        DRAConsumableCapacity: ``{"version": "k8s.io/dynamic-resource-allocation@v0.37.2", "compatibility":
        "1.36", "consumableCapacity": true}``."""
        return self.exchange([{"op": "version"}])[0]


def render(value: Any) -> Any:
    """A gpuclaim CEL runtime value in the oracle's typed rendering (map entries sorted, as by :func:`canonical`)."""
    from gpuclaim.dra.cel.values import Optional, TypeValue, format_double, type_name

    tn = type_name(value)
    if tn == "bool":
        return {"type": "bool", "value": value}
    if tn in ("int", "uint"):
        return {"type": tn, "value": str(int(value))}
    if tn == "double":
        return {"type": "double", "value": format_double(value)}
    if tn == "string":
        return {"type": "string", "value": value}
    if tn == "bytes":
        return {"type": "bytes", "value": base64.b64encode(value).decode()}
    if tn == "null_type":
        return {"type": "null_type"}
    if type(value) is Optional:
        return {"type": "optional_type", "value": render(value.value)} if value.present else {"type": "optional_type"}
    if type(value) is TypeValue:
        return {"type": "type", "value": str(value)}
    if tn == "list":
        return {"type": "list", "value": [render(x) for x in value]}
    if tn == "map":
        return {"type": "map", "value": [[render(k), render(v)] for k, v in value.items()]}
    return {"type": tn, "value": str(value)}


def canonical(rendered: Any) -> Any:
    """Map entries in a stable order (Go and Python iterate maps differently)."""
    if isinstance(rendered, dict):
        if rendered.get("type") == "map":
            entries = [[canonical(k), canonical(v)] for k, v in rendered.get("value") or []]
            entries.sort(key=lambda kv: json.dumps(kv[0], sort_keys=True))
            return {"type": "map", "value": entries}
        return {k: canonical(v) for k, v in rendered.items()}
    if isinstance(rendered, list):
        return [canonical(x) for x in rendered]
    return rendered
