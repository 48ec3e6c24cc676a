"""The filter's part in mixed nodes (config ``mixedNodes``, docs/migration.md): with ``avoid``, a converted pod
fails every mixed node, with a reason kube-scheduler shows in the pod's FailedScheduling event. Kept apart from
the topology filter (handlers.filter_nodes calls :func:`avoid` first and :func:`add_failed` last)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import orjson

from gpuclaim.dra import mixed

from . import wire


def avoid(args: wire.ExtenderArgs, tracker: Any) -> tuple[wire.ExtenderArgs, dict[str, str]]:
    """``args`` without the mixed candidate nodes, and the reason for each one taken out; ``args`` unchanged for
    a pod gpuclaim did not convert, with ``mixedNodes: allow``, or without a live cluster view."""
    if tracker is None or not tracker.avoid or not mixed.is_converted(args.pod):
        return args, {}
    found = tracker.nodes()
    if not found:
        return args, {}
    avoided = {name: f"gpuclaim: {mixed.describe(name, found[name])}; a converted pod could get a GPU the device "
               "plugin also hands out (mixedNodes: avoid)" for name in args.node_names if name in found}
    if not avoided:
        return args, {}
    if tracker.avoided is not None:
        tracker.avoided.inc(len(avoided))
    nodes = None if args.nodes is None else tuple(
        n for n in args.nodes if (n.get("metadata") or {}).get("name") not in avoided)
    return dataclasses.replace(args, node_names=tuple(n for n in args.node_names if n not in avoided),
                               nodes=nodes), avoided


def add_failed(body: bytes, avoided: Mapping[str, str]) -> bytes:
    """An ExtenderFilterResult with the mixed nodes added to ``FailedNodes``."""
    if not avoided:
        return body
    result = orjson.loads(body)
    result["FailedNodes"] = {**(result.get("FailedNodes") or {}), **avoided}
    return orjson.dumps(result)
