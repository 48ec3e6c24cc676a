"""`gpuclaim lint FILE... [--slices FILE...] [--namespaces FILE] [--config FILE] [-o text|json] [--strict]
[--kubernetes-version X.Y]`: the validating webhook's checks, offline, for CI pipelines and GitOps repositories,
as a cluster of that Kubernetes version (default: the newest supported) sees them. With no kube-apiserver in
front, what the apiserver itself would refuse (a selector that does not compile there) is an error here.

Reads multi-document YAML and `kubectl get -o yaml` List output. DeviceClasses, ResourceClaimTemplates and
Namespaces found in the linted files count as part of the cluster (a claim can name a class defined next to
it); `--slices` files are the devices to dry-run against (they may hold DeviceClasses too: `kubectl get
resourceslices,deviceclasses -o yaml`). Prints `file:doc: kind/name: field: message` per finding, or with
`-o json` one array of `{file, doc, item, kind, name, field, severity, message}`; an error also carries `stage`:
`admission` (kube-apiserver or gpuclaim's webhook refuses the object) or `scheduling` (admitted, but the scheduler
refuses it: the driver-schema checks). Exit 1 on any error (and on warnings with --strict), 0 otherwise, 2 on
unreadable input.

Selectors, constraints and counts are also checked against the driver attribute schemas shipped with gpuclaim
(docs/driver-schemas.md); with `--slices`, what the devices of a driver publish wins. `--explain` adds, for each
request (and DeviceClass), a finding of severity `info` saying which schema and which devices it was checked
against; in JSON it carries an `explain` object `{field, request, deviceClassName, schemas: [{driver, schema,
releases, deviceTypes, devices, source}], attributes, capacities, inventory}`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from gpuclaim.commands._config import add_kubernetes_version, kubernetes_model, load_config_file
from gpuclaim.dra import api, versions
from gpuclaim.dra.config import Config
from gpuclaim.exitstatus import ExitStatus, UsageError
from gpuclaim.webhook.validate import OfflineInventory, validate_manifest
from gpuclaim.webhook.validate.structure import to_v1


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="manifests to check")
    parser.add_argument("--slices", nargs="+", type=Path, default=[], metavar="FILE",
                        help="ResourceSlices (and DeviceClasses) to dry-run selectors against")
    parser.add_argument("--namespaces", type=Path, metavar="FILE",
                        help="Namespaces with their labels (kubectl get namespaces -o yaml), for the adminAccess rule")
    parser.add_argument("--config", type=Path, metavar="FILE", help="gpuclaim config file (validation modes)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    parser.add_argument("--explain", action="store_true",
                        help="say, for each request, which driver schema and which devices it was checked against")
    add_kubernetes_version(parser)


@dataclass(frozen=True, slots=True)
class _Doc:
    file: str
    doc: int  # 1-based document number in the file
    item: int | None  # index in a List's items
    obj: object


def _read(path: Path) -> list[_Doc]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    return [_Doc(str(path), located.doc + 1, located.item, located.obj) for located in api.iter_objects(documents)]


def _kind(obj: object) -> str:
    return str(obj.get("kind", "")) if isinstance(obj, Mapping) else ""


def _name(obj: object) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return str(meta.get("name") or meta.get("generateName") or "") if isinstance(meta, Mapping) else ""


def _inventory(docs: list[_Doc], slice_docs: list[_Doc], namespace_docs: list[_Doc] | None) -> OfflineInventory:
    slices: list[api.ResourceSlice] = []
    classes: list[api.DeviceClass] = []
    snapshot_classes = 0
    templates: list[api.ResourceClaimTemplate] = []
    for d in slice_docs:
        model, errors = api.parse_object(to_v1(d.obj)[0]) if _kind(d.obj) in api.KINDS else (None, [])
        if isinstance(model, api.ResourceSlice | api.DeviceClass) and errors:
            print(f"{d.file}:{d.doc}: ignoring invalid {_kind(d.obj)}/{_name(d.obj)}: {errors[0]}", file=sys.stderr)
        elif isinstance(model, api.ResourceSlice):
            slices.append(model)
        elif isinstance(model, api.DeviceClass):
            classes.append(model)
            snapshot_classes += 1
    for d in docs:
        if _kind(d.obj) in ("DeviceClass", "ResourceClaimTemplate"):
            model, errors = api.parse_object(to_v1(d.obj)[0])
            if isinstance(model, api.DeviceClass):
                classes.append(model)
            elif isinstance(model, api.ResourceClaimTemplate):
                templates.append(model)
    namespaces: dict[str, Mapping[str, str]] = {}
    for d in [*docs, *(namespace_docs or [])]:
        if _kind(d.obj) == "Namespace" and _name(d.obj):
            meta = d.obj.get("metadata") if isinstance(d.obj, Mapping) else None
            labels = meta.get("labels") if isinstance(meta, Mapping) else None
            namespaces[_name(d.obj)] = {str(k): str(v) for k, v in (labels or {}).items()}
    return OfflineInventory(
        slices=slices if slice_docs else None, classes=classes or None, templates=templates,
        namespaces=namespaces or None, namespaces_complete=namespace_docs is not None,
        classes_complete=snapshot_classes > 0,
    )


def findings_of(docs: list[_Doc], inventory: OfflineInventory, config: Config, *,
                explain: bool = False, kubernetes: versions.KubernetesModel = versions.NEWEST_MODEL,
                ) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for d in docs:
        verdict = validate_manifest(d.obj, inventory=inventory, config=config, kubernetes=kubernetes)
        base = {"file": d.file, "doc": d.doc, "item": d.item, "kind": _kind(d.obj), "name": _name(d.obj)}
        for stage, errors in (("admission", verdict.denials), ("scheduling", verdict.scheduling)):
            for error in errors:
                field = str(error.path)
                text = str(error)
                out.append({**base, "field": field, "severity": "error", "stage": stage,
                            "message": text[len(field) + 2:] if field else text})
        for notice in verdict.notices:
            out.append({**base, "field": str(notice.path), "severity": "warning", "message": notice.message})
        if explain:
            for record in verdict.explained:
                out.append({**base, "field": record["field"], "severity": "info", "message": _explained(record),
                            "explain": record})
    return out


def _explained(record: Mapping[str, Any]) -> str:
    """One line: what a request (or class) was checked against."""
    what = f"request {record['request']}" if record["deviceClassName"] is not None else "selectors"
    parts = []
    for s in record["schemas"]:
        if s["schema"] is None:
            parts.append(f"{s['driver']} (no schema: names not checked)")
        elif s["schema"] == "inventory":
            parts.append(f"{s['driver']} (the {s['devices']} devices of the inventory"
                         + (f"; device types {', '.join(s['deviceTypes'])}" if s["deviceTypes"] else "") + ")")
        else:
            detail = [f"{s['schema']} schema"]
            if s["releases"]:
                detail.append(f"releases {', '.join(s['releases'])}")
            if s["deviceTypes"]:
                detail.append(f"device types {', '.join(s['deviceTypes'])}")
            parts.append(f"{s['driver']} ({'; '.join(detail)})")
    against = "; ".join(parts) if parts else "no driver schema (the selectors name no driver)"
    reads = [*record["attributes"], *record["capacities"]]
    devices = "" if record["inventory"] else "; no inventory (--slices): shipped schemas only"
    return (f"explain: {what} checked against {against}"
            + (f"; reads {', '.join(reads)}" if reads else "") + devices)


def _text(finding: Mapping[str, Any]) -> str:
    item = finding["item"]
    where = f"{finding['file']}:{finding['doc']}" + (f"/items[{item}]" if item is not None else "")
    field = f"{finding['field']}: " if finding["field"] else ""
    message = str(finding["message"]).replace("\n", "\n    ")
    level = {"error": "", "warning": "warning: ", "info": ""}[finding["severity"]]
    return f"{where}: {finding['kind']}/{finding['name']}: {field}{level}{message}"


def run(args: argparse.Namespace) -> int:
    config = load_config_file(args.config)
    kubernetes = kubernetes_model(args, config)
    docs = [d for path in args.files for d in _read(path)]
    slice_docs = [d for path in args.slices for d in _read(path)]
    namespace_docs = None if args.namespaces is None else _read(args.namespaces)
    found = findings_of(docs, _inventory(docs, slice_docs, namespace_docs), config, explain=args.explain,
                        kubernetes=kubernetes)
    if args.output == "json":
        sys.stdout.write(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        for finding in found:
            print(_text(finding))
        errors = sum(f["severity"] == "error" for f in found)
        warnings = sum(f["severity"] == "warning" for f in found)
        print(f"{len(docs)} objects checked: {errors} errors, {warnings} warnings", file=sys.stderr)
    if any(f["severity"] == "error" for f in found) or (args.strict and any(f["severity"] == "warning" for f in found)):
        return ExitStatus.FINDINGS
    return ExitStatus.OK
