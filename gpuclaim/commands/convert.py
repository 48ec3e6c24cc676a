"""`gpuclaim convert -f FILE|- [--config FILE] [--classes FILE] [-o yaml|json] [--kubernetes-version X.Y]`:
what the webhook would make of the Pods and workloads (Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs,
CronJobs) in FILE.

Prints the objects in input order (converted where they carry mapped resources, unchanged otherwise),
then the ResourceClaimTemplates and shared ResourceClaims they reference; `-o json` prints one JSON array
in that order. Multi-document YAML and `kind: List` are read. DeviceClasses found in the input count as
known classes (KEP-5004 coexistence); `--classes FILE` adds the cluster's classes and turns on the
"mapped class must exist" check (`conversion.requireClassesExist`), which is off without it.
`--kubernetes-version` is checked like the other offline commands' (the conversion itself is the same on
every supported version today). Exit 0: done; 1: an object was refused (stderr says which and why); 2: unreadable
input or config.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
import yaml

from gpuclaim.commands._config import add_kubernetes_version, kubernetes_model, load_config_file
from gpuclaim.dra.api import DeviceClass, parse_device_class
from gpuclaim.dra.api.documents import flatten_documents
from gpuclaim.dra.config import Config
from gpuclaim.dra.fieldpath import join_errors
from gpuclaim.exitstatus import ExitStatus, UsageError
from gpuclaim.webhook.convert import convert_object


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-f", "--filename", required=True, metavar="FILE", help="manifests to convert, - for stdin")
    parser.add_argument("--config", type=Path, metavar="FILE", help="the gpuclaim config file (conversion section)")
    parser.add_argument("--classes", type=Path, metavar="FILE",
                        help="the cluster's DeviceClasses (YAML); enables the mapped-class-must-exist check")
    parser.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    add_kubernetes_version(parser)


def _read_documents(source: str) -> list[Any]:
    label = "stdin" if source == "-" else source
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {label}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return [d for d in flatten_documents(yaml.safe_load_all(text)) if d is not None]
    except yaml.YAMLError as exc:
        raise UsageError(f"{label}: not valid YAML: {' '.join(str(exc).split())}") from None


def _config(path: Path | None, with_classes: bool) -> Config:
    config = load_config_file(path)
    if not with_classes:
        config = dataclasses.replace(
            config, conversion=dataclasses.replace(config.conversion, require_classes_exist=False))
    return config


def _classes(documents: Iterable[Any], label: str, *, strict: bool) -> dict[str, DeviceClass]:
    out: dict[str, DeviceClass] = {}
    for n, doc in enumerate(documents):
        if not isinstance(doc, dict) or doc.get("kind") != "DeviceClass":
            continue
        model, errors = parse_device_class(doc)
        if model is None or errors:
            if strict:
                raise UsageError(f"{label}: document {n + 1}: invalid DeviceClass: {join_errors(errors)}")
            continue
        out[model.name] = model
    return out


def _describe(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    namespace = meta.get("namespace")
    return f"{obj.get('kind', '<no kind>')} {namespace + '/' if namespace else ''}{name}"


def run(args: argparse.Namespace) -> int:
    documents = _read_documents(args.filename)
    known = _classes(documents, args.filename, strict=False)
    if args.classes is not None:
        known.update(_classes(_read_documents(str(args.classes)), str(args.classes), strict=True))
    config = _config(args.config, args.classes is not None)
    kubernetes_model(args, config)  # a version gpuclaim cannot model is a usage error here too
    out: list[Any] = []
    extra: dict[tuple[str, str | None, str], dict[str, Any]] = {}
    refused = False
    for n, doc in enumerate(documents):
        if not isinstance(doc, dict):
            raise UsageError(f"{args.filename}: document {n + 1} is not an object (got {type(doc).__name__})")
        result = convert_object(doc, config=config, device_classes=known)
        if result is None:
            out.append(doc)
            continue
        what = _describe(doc)
        for warning in result.conversion.warnings:
            print(f"warning: {what}: {warning}", file=sys.stderr)
        if result.conversion.refused:
            refused = True
            print(f"refused: {what}: {result.conversion.message()}", file=sys.stderr)
            out.append(doc)
            continue
        out.append(result.converted)
        for obj in result.conversion.objects:
            meta = obj["metadata"]
            extra.setdefault((obj["kind"], meta.get("namespace"), meta["name"]), obj)
    out.extend(extra.values())
    if args.output == "json":
        sys.stdout.buffer.write(orjson.dumps(out, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        sys.stdout.write(yaml.safe_dump_all(out, sort_keys=False, explicit_start=True) if out else "")
    return ExitStatus.FINDINGS if refused else ExitStatus.OK
