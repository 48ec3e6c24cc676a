"""The one way the commands that read a whole cluster (audit, fleet) read it and learn its version.

Live (`--kubeconfig`, else in-cluster, else ~/.kube/config) through gpuclaim/audit/sources.py, read-only; or a dump
directory (`--cluster DIR`), whose version is `--kubernetes-version` (default: the newest supported). Every problem
is a UsageError (exit 2) naming the flag or the read that failed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuclaim.exitstatus import UsageError

if TYPE_CHECKING:
    from gpuclaim.audit.report import Objects
    from gpuclaim.dra.versions import Resolved


@dataclass(frozen=True, slots=True)
class Read:
    objects: Objects
    version: str  # the dump's --kubernetes-version, a live cluster's gitVersion; "" for the default
    api: Any  # the live cluster's client config; None for a dump


def read(args: argparse.Namespace, **listing: Any) -> Read:
    """The cluster `args.cluster` or `args.kubeconfig` names. `listing` narrows a live read (`sources.from_api`'s
    listed, namespace, namespaced, needs); a dump is read whole."""
    from gpuclaim.audit import sources

    if args.cluster is None and args.kubernetes_version is not None:
        raise UsageError("--kubernetes-version: only for a dump (--cluster); a live cluster's comes from /version")
    try:
        if args.cluster is not None:
            return Read(sources.from_directory(args.cluster), args.kubernetes_version or "", None)
        api = _live_api(args)
        objects, version = asyncio.run(sources.from_api(api, **listing))
    except sources.SourceError as exc:
        raise UsageError(str(exc)) from None
    return Read(objects, version, api)


def _live_api(args: argparse.Namespace) -> Any:
    from gpuclaim.kube import config as kube_config

    try:
        return kube_config.load(args.kubeconfig)
    except kube_config.KubeConfigError as exc:
        raise UsageError(f"--kubeconfig: {exc}") from None


def resolve(args: argparse.Namespace, version: str, *, command: str) -> Resolved:
    """The model of `version` (newest supported for ""), its warnings on stderr as `gpuclaim COMMAND: ...`. An
    unsupported version is the flag's error for a dump and the cluster's for a live read."""
    from gpuclaim.dra import versions

    try:
        resolved = versions.resolve(version or None)
    except versions.VersionError as exc:
        raise UsageError(f"--kubernetes-version: {exc}" if args.cluster is not None else str(exc)) from None
    for warning in resolved.warnings:
        print(f"gpuclaim {command}: {warning}", file=sys.stderr)
    return resolved
