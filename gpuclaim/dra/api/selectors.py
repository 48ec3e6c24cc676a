"""CEL device selectors and opaque device configuration, shared by claims and classes.

Only the structure and the length limit are checked here; compiling and costing an expression is the CEL
environment's job (``dra.cel``), and the validator combines both using ``Selector.path``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from gpuclaim.dra.fieldpath import FieldError, Path

from . import names
from ._read import EMPTY_MAP, Reader


@dataclass(frozen=True, slots=True)
class Selector:
    expression: str
    path: Path  # ...selectors[j].cel.expression, where an error about the expression belongs


@dataclass(frozen=True, slots=True)
class DeviceConfiguration:
    """``config[i]``: opaque, driver-specific parameters for some requests (claim) or all of them (class)."""

    driver: str
    parameters: Mapping[str, Any]  # raw JSON object, not interpreted by Kubernetes
    requests: tuple[str, ...] = ()  # claim config only: "<req>" or "<req>/<sub>"; empty = all
    path: Path | None = None


_SELECTOR_FIELDS = frozenset({"cel"})
_CEL_FIELDS = frozenset({"expression"})
_CLASS_CONFIG_FIELDS = frozenset({"opaque"})
_CLAIM_CONFIG_FIELDS = frozenset({"opaque", "requests"})
_OPAQUE_FIELDS = frozenset({"driver", "parameters"})


def parse_selectors(parent: Mapping[str, Any], path: Path, r: Reader) -> tuple[Selector, ...]:
    """``parent.selectors``: at most 32, each with a ``cel.expression`` of at most 10 Ki characters."""
    out = []
    for jpath, raw in r.each_object(parent, "selectors", path, limit=names.DEVICE_SELECTORS_MAX_SIZE):
        if "expression" in raw and "cel" not in raw:
            r.add(
                FieldError.forbidden(
                    jpath.child("expression"), "unknown field: the expression goes under `cel` (cel: {expression: ...})"
                )
            )
            r.add(FieldError.required(jpath.child("cel"), ""))
            continue
        r.unknown_fields(raw, _SELECTOR_FIELDS, jpath)
        cel = r.obj(raw, "cel", jpath, required=True)
        if cel is None:
            continue
        cpath = jpath.child("cel")
        r.unknown_fields(cel, _CEL_FIELDS, cpath)
        expression = r.string(cel, "expression", cpath, required=True)
        if expression is None:
            continue
        epath = cpath.child("expression")
        if len(expression.encode()) > names.CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
            r.add(FieldError.too_long(epath, expression, names.CEL_SELECTOR_EXPRESSION_MAX_LENGTH))
        out.append(Selector(expression=expression, path=epath))
    return tuple(out)


def parse_configs(
    parent: Mapping[str, Any],
    path: Path,
    r: Reader,
    *,
    request_names: Mapping[str, frozenset[str] | None] | None = None,
) -> tuple[DeviceConfiguration, ...]:
    """``parent.config``: class config when ``request_names`` is None, claim config otherwise."""
    out = []
    allowed = _CLASS_CONFIG_FIELDS if request_names is None else _CLAIM_CONFIG_FIELDS
    for ipath, raw in r.each_object(parent, "config", path, limit=names.DEVICE_CONFIG_MAX_SIZE):
        r.unknown_fields(raw, allowed, ipath)
        refs: list[str] = []
        if request_names is not None:
            for j, ref in enumerate(r.seq(raw, "requests", ipath, limit=names.DEVICE_REQUESTS_MAX_SIZE)):
                checked = r.request_ref(ref, ipath.child("requests").index(j), request_names)
                if checked is not None:
                    if checked in refs:
                        r.add(FieldError.duplicate(ipath.child("requests").index(j), checked))
                    refs.append(checked)
        opaque = r.obj(raw, "opaque", ipath, required=True)
        if opaque is None:
            continue
        opath = ipath.child("opaque")
        r.unknown_fields(opaque, _OPAQUE_FIELDS, opath)
        driver = r.name(opaque, "driver", opath, names.check_driver_name)
        parameters = _parameters(opaque, opath, r)
        out.append(DeviceConfiguration(driver=driver, parameters=parameters, requests=tuple(refs), path=ipath))
    return tuple(out)


def _parameters(opaque: Mapping[str, Any], opath: Path, r: Reader) -> Mapping[str, Any]:
    value = opaque.get("parameters")
    ppath = opath.child("parameters")
    if value is None:
        r.add(FieldError.required(ppath, ""))
        return EMPTY_MAP
    if not isinstance(value, Mapping):
        r.add(FieldError.invalid(ppath, "<value omitted>", "must be a valid JSON object"))
        return EMPTY_MAP
    try:
        size = len(json.dumps(value, separators=(",", ":"), default=str))
    except (TypeError, ValueError):
        r.add(FieldError.invalid(ppath, "<value omitted>", "must be a valid JSON object"))
        return EMPTY_MAP
    if size > names.OPAQUE_PARAMETERS_MAX_LENGTH:
        r.add(FieldError.too_long(ppath, "", names.OPAQUE_PARAMETERS_MAX_LENGTH))
    return MappingProxyType(dict(value))
