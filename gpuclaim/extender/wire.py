"""The kube-scheduler extender wire format (k8s.io/kube-scheduler/extender/v1), decoded and encoded at the edge.

The Go types carry no json tags, so kube-scheduler sends Go field names (``Pod``, ``Nodes``, ``NodeNames``) and
decodes replies with ``encoding/json``, which matches keys case-insensitively. We do the same on input (an exact
match wins, then a case-insensitive one) and always answer with the exact Go names. The embedded Pod and Node
objects are ordinary Kubernetes JSON (camelCase), read as plain dicts.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from gpuclaim.dra.config import ExtenderConfig
from gpuclaim.serving import chunked_json

MIN_SCORE = 0
MAX_SCORE = 10  # MaxExtenderPriority
DEFAULT_MAX_NODES = ExtenderConfig().max_nodes


class WireError(ValueError):
    """The request body is not an ExtenderArgs; the message names the field. ``node_names``: the candidates that
    could be read all the same (a bad Pod), for the equal scores of a failed /prioritize."""

    def __init__(self, message: str, *, node_names: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.node_names = node_names


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    pod: Mapping[str, Any]
    node_names: tuple[str, ...]  # candidate names, in the order they came
    nodes: tuple[Mapping[str, Any], ...] | None  # the full Node objects when not nodeCacheCapable, else None

    @property
    def node_cache_capable(self) -> bool:
        return self.nodes is None

    def node(self, name: str) -> Mapping[str, Any] | None:
        if self.nodes is None:
            return None
        for node in self.nodes:
            if (node.get("metadata") or {}).get("name") == name:
                return node
        return None


def field(obj: Mapping[str, Any], name: str) -> Any:
    """``obj[name]`` as Go's encoding/json finds it: exact key first, then any key equal ignoring case."""
    if name in obj:
        return obj[name]
    lowered = name.lower()
    for key, value in obj.items():
        if isinstance(key, str) and key.lower() == lowered:
            return value
    return None


def _typename(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def decode_args(body: bytes, *, max_nodes: int = DEFAULT_MAX_NODES) -> ExtenderArgs:
    """Parse an ExtenderArgs body; raise WireError with the field path of the first problem. More than
    ``max_nodes`` candidates is a problem of its own, found before anything is done per node."""
    if not body:
        raise WireError("empty request body: expected an ExtenderArgs JSON object")
    try:
        raw = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise WireError(f"request body is not JSON: {exc}") from None
    return _args(raw, max_nodes)


def decode_args_in_steps(body: bytes, *, max_nodes: int = DEFAULT_MAX_NODES) -> Generator[None, None, ExtenderArgs]:
    """`decode_args` for a big body, as a generator that stops after each bounded step of the JSON decoding
    (``serving.chunked_json``) and returns the ExtenderArgs: the caller runs it on the event loop a slice at a
    time, so other requests and the probes are answered in between."""
    if not body:
        raise WireError("empty request body: expected an ExtenderArgs JSON object")
    try:
        # the candidates, in either form: past max_nodes, refused without decoding the rest
        raw = yield from chunked_json.steps(body, bounded={("NodeNames",): max_nodes, ("Nodes", "items"): max_nodes})
    except orjson.JSONDecodeError as exc:
        raise WireError(f"request body is not JSON: {exc}") from None
    except chunked_json.Overlong as exc:
        raise WireError(f"{'.'.join(exc.path)}: {max_nodes + 1} or more candidate nodes, more than the {max_nodes} "
                        "one request may name (extender.maxNodes)") from None
    return _args(raw, max_nodes)


def _args(raw: Any, max_nodes: int) -> ExtenderArgs:
    if not isinstance(raw, dict):
        raise WireError(f"request body: expected an ExtenderArgs object, got {_typename(raw)}")
    # the names are read first, so a bad Pod still leaves /prioritize every candidate to answer; the Pod's problem
    # is the one reported first all the same
    unreadable: WireError | None = None
    try:
        names, nodes = _candidates(raw, max_nodes)
    except WireError as exc:
        unreadable, names, nodes = exc, (), None
    pod = field(raw, "Pod")
    if not isinstance(pod, dict):
        raise WireError("Pod: required" if pod is None else f"Pod: expected an object, got {_typename(pod)}",
                        node_names=names)
    for key in ("metadata", "spec"):
        if pod.get(key) is not None and not isinstance(pod[key], dict):
            raise WireError(f"Pod.{key}: expected an object, got {_typename(pod[key])}", node_names=names)
    if unreadable is not None:
        raise unreadable
    return ExtenderArgs(pod=pod, node_names=names, nodes=nodes)


def _candidates(raw: Mapping[str, Any], max_nodes: int
                ) -> tuple[tuple[str, ...], tuple[Mapping[str, Any], ...] | None]:
    """The candidate names and, in the ``Nodes`` form, the Node objects."""
    names_raw = field(raw, "NodeNames")
    nodes_raw = field(raw, "Nodes")
    nodes: tuple[Mapping[str, Any], ...] | None = None
    if nodes_raw is not None:
        if not isinstance(nodes_raw, dict):
            raise WireError(f"Nodes: expected a NodeList object, got {_typename(nodes_raw)}")
        items = field(nodes_raw, "items")
        if items is None:
            items = []
        if not isinstance(items, list):
            raise WireError(f"Nodes.items: expected an array, got {_typename(items)}")
        _bound("Nodes.items", len(items), max_nodes)
        for i, node in enumerate(items):
            name = (node.get("metadata") or {}).get("name") if isinstance(node, dict) else None
            if not isinstance(name, str) or not name:
                raise WireError(f"Nodes.items[{i}].metadata.name: required")
        nodes = tuple(items)
    if names_raw is not None:
        if not isinstance(names_raw, list):
            raise WireError(f"NodeNames: expected an array of strings, got {_typename(names_raw)}")
        _bound("NodeNames", len(names_raw), max_nodes)
        if not all(type(name) is str for name in names_raw):  # one C-level pass; find the culprit only on failure
            i, name = next((i, n) for i, n in enumerate(names_raw) if type(n) is not str)
            raise WireError(f"NodeNames[{i}]: expected a string, got {_typename(name)}")
    if nodes is not None:
        # kube-scheduler sends exactly one of the two; with both, the full objects are the richer answer
        return tuple(n["metadata"]["name"] for n in nodes), nodes
    return tuple(names_raw or ()), None


def _bound(path: str, count: int, max_nodes: int) -> None:
    if count > max_nodes:
        raise WireError(f"{path}: {count} candidate nodes, more than the {max_nodes} one request may name "
                        "(extender.maxNodes)")


def encode_priorities(scores: Sequence[tuple[str, int]]) -> bytes:
    """HostPriorityList: ``[{"Host": name, "Score": 0..10}]``."""
    for host, score in scores:
        if not MIN_SCORE <= score <= MAX_SCORE:
            raise ValueError(f"score {score} for {host} outside {MIN_SCORE}..{MAX_SCORE}")
    return orjson.dumps([{"Host": host, "Score": score} for host, score in scores])


def join_arrays(pieces: Sequence[bytes]) -> bytes:
    """One JSON array of the elements of the encoded arrays `pieces`, in order (an answer encoded in turns)."""
    inner = [piece[1:-1] for piece in pieces if piece != b"[]"]
    return b"[" + b",".join(inner) + b"]"


def encode_equal_priorities(names: Sequence[str], score: int = MIN_SCORE) -> bytes:
    """The same score for every node (the pods-without-claims path)."""
    return orjson.dumps([{"Host": n, "Score": score} for n in names])


def encode_filter_result(
    *,
    args: ExtenderArgs | None,
    passed: Sequence[str] = (),
    failed: Mapping[str, str] | None = None,
    unresolvable: Mapping[str, str] | None = None,
    error: str = "",
) -> bytes:
    """ExtenderFilterResult in the form the request used: ``NodeNames`` for nodeCacheCapable, else ``Nodes``.

    kube-scheduler checks that every returned name was a candidate, so only names from ``args`` are returned.
    """
    out: dict[str, Any] = {
        "Nodes": None, "NodeNames": None, "FailedNodes": dict(failed or {}),
        "FailedAndUnresolvableNodes": dict(unresolvable or {}), "Error": error,
    }  # fmt: skip
    if error or args is None:
        out["FailedNodes"] = out["FailedNodes"] or None
        out["FailedAndUnresolvableNodes"] = out["FailedAndUnresolvableNodes"] or None
        return orjson.dumps(out)
    keep = set(passed)
    if args.nodes is not None:
        out["Nodes"] = {"metadata": {}, "items": [n for n in args.nodes if n["metadata"]["name"] in keep]}
    else:
        out["NodeNames"] = [n for n in args.node_names if n in keep]
    return orjson.dumps(out)


def encode_error_priorities() -> bytes:
    """A prioritize failure: kube-scheduler ignores prioritize errors, so an empty list costs nothing."""
    return b"[]"
