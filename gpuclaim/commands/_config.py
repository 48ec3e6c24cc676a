"""The one way every command that takes `--config` reads it (lint, convert, score, webhook, extender), and the one
way the offline commands read `--kubernetes-version`.

One error text per problem, always exit 2 (UsageError): an unreadable file, a file that is not YAML, a document
that is not a mapping at the top level (a YAML list, a bare string), and keys the loader refuses, named by their
full path. Flags that override keys of the file (the servers' `--listen`, ...) are named as the flag.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from gpuclaim.dra import versions
from gpuclaim.dra.config import Config, ConfigError, load_config
from gpuclaim.exitstatus import UsageError

Overrides = Callable[[dict[str, Any]], dict[str, Any]]


def read_config_file(path: Path) -> dict[str, Any]:
    """The top-level mapping of the YAML file at `path` ({} for an empty file); UsageError naming the file."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--config {path}: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise UsageError(f"--config {path}: not YAML: {' '.join(str(exc).split())}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"--config {path}: expected a mapping at the top level, got {_kind(data)}")
    return data


def load_config_file(path: Path | None, *, overrides: Overrides | None = None,
                     flags: Mapping[str, str] | None = None) -> Config:
    """The typed Config from `--config` (None: the defaults), with `overrides` (flags) applied to the parsed file.
    `flags` maps a key path (`webhook.listen`) to the flag that set it, so its error names what the user typed."""
    data = read_config_file(path) if path is not None else {}
    if overrides is not None:
        data = overrides(data)
    try:
        return load_config(data)
    except ConfigError as exc:
        from_flags = [f"{flags[i.path]}: {i.message}" for i in exc.issues if flags and i.path in flags]
        from_file = [str(i) for i in exc.issues if not (flags and i.path in flags)]
        parts = list(from_flags)
        if from_file:
            head = "1 error" if len(from_file) == 1 else f"{len(from_file)} errors"
            where = f"--config {path}" if path is not None else "flags"
            parts.append(f"{where}: {head}: " + "; ".join(from_file))
        raise UsageError("; ".join(parts)) from None


def add_kubernetes_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubernetes-version", metavar="X.Y",
        help=f"the Kubernetes version to model ({versions.SUPPORTED[0]} to {versions.SUPPORTED[-1]}; default: "
             f"kubernetes.version of --config, else {versions.SUPPORTED[-1]})")


def kubernetes_model(args: argparse.Namespace, config: Config | None = None) -> versions.KubernetesModel:
    """`--kubernetes-version`, else the config's pinned version, else the newest; with the config's gates.
    A version gpuclaim does not support or a gate that version lacks is a UsageError; a version newer than the
    newest is modelled as the newest, with a warning on stderr."""
    flag = getattr(args, "kubernetes_version", None)
    kube = config.kubernetes if config is not None else None
    version = flag or (kube.version if kube is not None else None)
    try:
        resolved = versions.resolve(version, feature_gates=kube.feature_gates if kube is not None else None)
    except versions.VersionError as exc:
        raise UsageError(f"--kubernetes-version: {exc}" if flag else f"kubernetes.version: {exc}") from None
    except versions.GateError as exc:
        raise UsageError(f"kubernetes.featureGates: {exc}") from None
    for warning in resolved.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return resolved.model


def _kind(value: object) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), type(value).__name__)
