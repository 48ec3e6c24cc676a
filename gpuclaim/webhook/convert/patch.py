"""RFC 6902 JSONPatch pieces: pointer escaping, the three ops we emit, and a small applier.

The applier exists for the offline command (it turns a pod patch into the converted object without a
test-only dependency); tests check every patch with the independent `jsonpatch` library instead.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

Op = dict[str, Any]


def escape(token: str) -> str:
    """One JSON pointer reference token (RFC 6901: ``~`` → ``~0`` first, then ``/`` → ``~1``)."""
    return token.replace("~", "~0").replace("/", "~1")


def pointer(*tokens: str | int) -> str:
    return "".join("/" + (escape(t) if isinstance(t, str) else str(t)) for t in tokens)


def add(path: str, value: Any) -> Op:
    return {"op": "add", "path": path, "value": value}


def replace(path: str, value: Any) -> Op:
    return {"op": "replace", "path": path, "value": value}


def remove(path: str) -> Op:
    return {"op": "remove", "path": path}


def prefixed(ops: Iterable[Op], prefix: str) -> list[Op]:
    """The same ops against an object nested at ``prefix`` (a pod template inside a workload)."""
    return [{**op, "path": prefix + op["path"]} for op in ops]


class PatchError(ValueError):
    pass


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply(document: Any, ops: Sequence[Op]) -> Any:
    """Apply add/replace/remove ops to a deep copy of ``document`` (the only ops gpuclaim emits)."""
    doc = copy.deepcopy(document)
    for op in ops:
        tokens = [_unescape(t) for t in op["path"].split("/")[1:]]
        if not tokens:
            raise PatchError(f"{op['op']} of the whole document is not supported")
        parent: Any = doc
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        kind = op["op"]
        if isinstance(parent, list):
            if kind == "add":
                parent.insert(len(parent) if last == "-" else int(last), copy.deepcopy(op["value"]))
            elif kind == "replace":
                parent[int(last)] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[int(last)]
            else:
                raise PatchError(f"unsupported op {kind!r}")
        elif isinstance(parent, dict):
            if kind in ("add", "replace"):
                if kind == "replace" and last not in parent:
                    raise PatchError(f"replace of a missing member: {op['path']}")
                parent[last] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[last]
            else:
                raise PatchError(f"unsupported op {kind!r}")
        else:
            raise PatchError(f"{op['path']}: parent is not a container")
    return doc
