"""`gpuclaim cel EXPR [--slices FILE [--device NAME]] [-o text|json] [--kubernetes-version X.Y]`: evaluate one CEL
expression as kube-scheduler of that version would (StoredExpressions), against one device of a ResourceSlice file
or none.

Prints the value, or ``compilation failed: ...`` / ``runtime error: ...`` and exits 1. If the
expression compiles for the scheduler but that version's kube-apiserver would refuse it in a new claim
(functions it does not offer yet, the cost limit, a non-bool result), that is reported too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson
import yaml

from gpuclaim.commands._config import add_kubernetes_version, kubernetes_model
from gpuclaim.dra import cel, versions
from gpuclaim.dra.api.documents import flatten_documents
from gpuclaim.dra.api.slices import Device, parse_resource_slice
from gpuclaim.dra.cel.operators import RuntimeDevice
from gpuclaim.dra.cel.values import Optional, TypeValue
from gpuclaim.dra.fieldpath import join_errors
from gpuclaim.exitstatus import ExitStatus, UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("expression", metavar="EXPR", help="a CEL expression over `device`")
    parser.add_argument("--slices", type=Path, metavar="FILE",
                        help="ResourceSlice YAML (multi-document or a `kubectl get -o yaml` List)")
    parser.add_argument("--device", metavar="NAME", help="the device to evaluate against (default: the first)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    add_kubernetes_version(parser)


def _load_device(path: Path, name: str | None) -> Device:
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        documents = flatten_documents(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    devices: list[Device] = []
    for doc in documents:
        if not isinstance(doc, dict) or doc.get("kind") != "ResourceSlice":
            continue
        parsed, errors = parse_resource_slice(doc)
        if errors or parsed is None:
            raise UsageError(f"{path}: invalid ResourceSlice: {join_errors(errors)}")
        devices.extend(parsed.devices)
    if not devices:
        raise UsageError(f"{path}: no ResourceSlice devices found")
    if name is None:
        return devices[0]
    for device in devices:
        if device.name == name:
            return device
    names = ", ".join(dict.fromkeys(d.name for d in devices))
    raise UsageError(f"{path}: no device named {name!r}; devices: {names}")


def to_json(value: Any) -> Any:
    """A CEL value as JSON: quantities, versions, IPs, URLs and types as their canonical strings."""
    if value is None or isinstance(value, bool | int | float | str):
        if value is None or type(value) in (bool, int, float, str):
            return value
        return int(value)  # celpy's IntType/UintType subclass int
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, Optional):
        return {"optional": to_json(value.value)} if value.present else {"optional": None}
    if isinstance(value, RuntimeDevice):
        return {"driver": value.driver, "attributes": to_json(dict(value.attributes)),
                "capacity": to_json(dict(value.capacity))}
    if isinstance(value, TypeValue):
        return str(value)
    return str(value)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    shown = to_json(value)
    if isinstance(shown, str):
        return shown  # strings, quantities, versions: as they are, unquoted
    return orjson.dumps(shown).decode()


def run(args: argparse.Namespace) -> int:
    device = _load_device(args.slices, args.device) if args.slices else None
    if device is None and args.device:
        raise UsageError("--device needs --slices")
    as_json = args.output == "json"
    kubernetes = kubernetes_model(args)
    try:
        compiled = cel.compile_uncached(args.expression, mode=kubernetes.cel_stored, any_result=True)
    except cel.CelCompileError as err:
        return _fail(as_json, "compile", err.message, err.hint)
    apiserver = _apiserver_verdict(args.expression, kubernetes)
    try:
        value = compiled.value(device)
    except cel.CelRuntimeError as err:
        return _fail(as_json, "runtime", err.message, None, apiserver)
    if as_json:
        doc: dict[str, Any] = {"value": to_json(value)}
        if apiserver is not None:
            doc["apiserver"] = apiserver
        sys.stdout.write(orjson.dumps(doc).decode() + "\n")
    else:
        print(_text(value))
        if apiserver is not None:
            print(f"note: a {kubernetes.name} kube-apiserver refuses this in a new selector: {apiserver}",
                  file=sys.stderr)
    return ExitStatus.OK


def _apiserver_verdict(expression: str, kubernetes: versions.KubernetesModel) -> str | None:
    try:
        cel.compile_uncached(expression, mode=kubernetes.cel_new)
    except cel.CelCompileError as err:
        return err.message
    return None


def _fail(as_json: bool, stage: str, message: str, hint: str | None, apiserver: str | None = None) -> int:
    if as_json:
        doc: dict[str, Any] = {"error": message, "stage": stage}
        if hint:
            doc["hint"] = hint
        if apiserver is not None:
            doc["apiserver"] = apiserver
        sys.stdout.write(orjson.dumps(doc).decode() + "\n")
    else:
        text = message if stage == "compile" else f"runtime error: {message}"
        if stage == "compile" and not message.startswith("compilation failed"):
            text = f"compilation failed: {message}"
        print(text)
        if hint:
            print(f"hint: {hint}")
    return ExitStatus.FINDINGS
