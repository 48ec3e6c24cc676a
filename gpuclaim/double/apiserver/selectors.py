"""Label and field selectors with kube-apiserver's syntax and matching rules."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Matcher = Callable[[Mapping[str, str]], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9._/-]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")
_OP_RE = re.compile(r"^\s*([A-Za-z0-9._/-]+)\s*(==|!=|=)\s*([A-Za-z0-9._-]*)\s*$")


class SelectorError(ValueError):
    pass


def _split_requirements(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p for p in parts if p.strip()]


def _requirement(text: str) -> Matcher:
    op = _OP_RE.match(text)
    if op:
        key, operator, value = op.groups()
        if operator == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    match = _SET_RE.match(text)
    if not match:
        raise SelectorError(f"unable to parse requirement: {text.strip()!r}")
    negate, key, set_op, values_text = match.groups()
    if set_op:
        if negate:
            raise SelectorError(f"unable to parse requirement: {text.strip()!r}")
        values = {v.strip() for v in values_text.split(",") if v.strip()}
        if set_op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if negate:
        return lambda labels: key not in labels
    return lambda labels: key in labels


def parse_label_selector(text: str) -> Matcher:
    """`a=b,c!=d,e in (f,g),!h,i` — every requirement must hold; empty selects everything."""
    requirements = [_requirement(part) for part in _split_requirements(text or "")]
    return lambda labels: all(req(labels) for req in requirements)


_FIELDS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "metadata.name": lambda o: str(o.get("metadata", {}).get("name", "")),
    "metadata.namespace": lambda o: str(o.get("metadata", {}).get("namespace", "")),
    "spec.nodeName": lambda o: str(o.get("spec", {}).get("nodeName", "") or ""),
    "spec.driver": lambda o: str(o.get("spec", {}).get("driver", "") or ""),
}


def _dotted(path: str) -> Callable[[Mapping[str, Any]], str]:
    def get(obj: Mapping[str, Any]) -> str:
        value: Any = obj
        for key in path.split("."):
            value = value.get(key) if isinstance(value, Mapping) else None
        return "" if value is None else str(value)

    return get


# the event fields kube-apiserver indexes: `kubectl describe` finds an object's events by them
_FIELDS.update({f: _dotted(f) for f in (
    "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
    "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
    "reportingComponent", "source", "type")})


def _field_check(getter: Callable[[Mapping[str, Any]], str], value: str, *, negate: bool
                 ) -> Callable[[Mapping[str, Any]], bool]:
    if negate:
        return lambda obj: getter(obj) != value
    return lambda obj: getter(obj) == value


def parse_field_selector(text: str) -> Callable[[Mapping[str, Any]], bool]:
    """Field selectors support `=`, `==`, `!=` on the fields real servers index for these kinds."""
    checks: list[Callable[[Mapping[str, Any]], bool]] = []
    for part in _split_requirements(text or ""):
        op = _OP_RE.match(part)
        if not op:
            raise SelectorError(f"invalid field selector: {part.strip()!r}")
        field, operator, value = op.groups()
        getter = _FIELDS.get(field)
        if getter is None:
            raise SelectorError(f'field label not supported: "{field}"')
        checks.append(_field_check(getter, value, negate=operator == "!="))
    return lambda obj: all(check(obj) for check in checks)
