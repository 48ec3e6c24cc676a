"""The patch types the double applies: JSON merge patch (RFC 7386), JSON patch, and strategic merge patch.

`kubectl apply` (client-side) sends a strategic merge patch for every built-in kind, computed from its own types.
Its semantics are k8s.io/apimachinery `util/strategicpatch`: like a merge patch, except that a list whose field
says `x-kubernetes-patch-strategy: merge` is merged element by element on its `x-kubernetes-patch-merge-key`
(containers by `name`), plus the directives kubectl writes: `$patch: replace|delete|merge`, `$retainKeys`,
`$setElementOrder/<list>` and `$deleteFromPrimitiveList/<list>`. The field metadata comes from the same official
schemas the double validates with. Simplified: `$setElementOrder` puts the listed elements first in its order and
the server's others after them, where upstream interleaves the two.
"""

from __future__ import annotations

import copy
from typing import Any

from gpuclaim.double.apiserver import errors, schemas

_DIRECTIVE = "$patch"
_RETAIN = "$retainKeys"
_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = merge_patch(target.get(key), value)
    return target


def strategic_merge_patch(current: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Apply `patch` to a copy of `current`, a stored object whose apiVersion and kind name its schema."""
    schema = schemas.schema_of(str(current.get("apiVersion", "")), str(current.get("kind", "")))
    merged = _merge_map(copy.deepcopy(current), patch, schema, "")
    if merged is None:
        raise errors.ApiError(422, "a strategic merge patch cannot delete the whole object ($patch: delete)")
    return merged


def _fail(path: str, message: str) -> errors.ApiError:
    return errors.ApiError(400, f"the strategic merge patch is invalid at {path or 'the top level'}: {message}")


def _merge_map(original: dict[str, Any], patch: dict[str, Any], schema: schemas.Node, path: str) -> Any:
    directive = patch.get(_DIRECTIVE)
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: v for k, v in patch.items() if k != _DIRECTIVE}
    if directive not in (None, "merge"):
        raise _fail(path, f"unknown {_DIRECTIVE} directive {directive!r} (replace, delete or merge)")
    retain = patch.get(_RETAIN)
    if retain is not None:
        if not isinstance(retain, list):
            raise _fail(path, f"{_RETAIN} must be a list of field names")
        original = {k: v for k, v in original.items() if k in retain}
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        where = f"{path}.{key}" if path else key
        if key in (_DIRECTIVE, _RETAIN):
            continue
        if key.startswith(_ORDER):
            orders[key.removeprefix(_ORDER)] = value if isinstance(value, list) else []
        elif key.startswith(_DELETE_PRIMITIVE):
            field = key.removeprefix(_DELETE_PRIMITIVE)
            if not isinstance(value, list):
                raise _fail(where, "must be a list of the values to delete")
            original[field] = [v for v in original.get(field) or [] if v not in value]
        elif value is None:
            original.pop(key, None)
        else:
            merged = _merge_value(original.get(key), value, schemas.child(schema, key), where)
            if merged is None:
                original.pop(key, None)
            else:
                original[key] = merged
    for field, order in orders.items():
        if isinstance(original.get(field), list):
            original[field] = _reorder(original[field], order, schemas.patch_meta(schemas.child(schema, field))[1])
    return original


def _merge_value(original: Any, value: Any, schema: schemas.Node, path: str) -> Any:
    if isinstance(value, dict):
        return _merge_map(original if isinstance(original, dict) else {}, value, schema, path)
    if isinstance(value, list):
        strategy, key = schemas.patch_meta(schema)
        if "merge" in strategy.split(","):
            return _merge_list(original if isinstance(original, list) else [], value, schemas.items(schema), key,
                               path)
        return [v for v in value if not (isinstance(v, dict) and v.get(_DIRECTIVE) == "replace")]
    return value


def _merge_list(original: list[Any], patch: list[Any], schema: schemas.Node, key: str | None, path: str) -> list[Any]:
    if any(isinstance(v, dict) and v.get(_DIRECTIVE) == "replace" for v in patch):
        return [v for v in patch if not (isinstance(v, dict) and v.get(_DIRECTIVE) == "replace")]
    if key is None:  # a set of primitives
        return original + [v for v in patch if v not in original]
    out = list(original)
    for element in patch:
        if not isinstance(element, dict) or key not in element:
            raise _fail(path, f"every element must be an object with the merge key {key!r}")
        index = next((i for i, o in enumerate(out) if isinstance(o, dict) and o.get(key) == element[key]), None)
        if element.get(_DIRECTIVE) == "delete":
            out = [o for o in out if not (isinstance(o, dict) and o.get(key) == element[key])]
        elif index is None:
            out.append(_merge_map({}, element, schema, f"{path}[{key}={element[key]}]"))
        else:
            out[index] = _merge_map(out[index], element, schema, f"{path}[{key}={element[key]}]")
    return out


def _reorder(values: list[Any], order: list[Any], key: str | None) -> list[Any]:
    def ident(v: Any) -> Any:
        return v.get(key) if key is not None and isinstance(v, dict) else v

    wanted = [ident(o) for o in order]
    first = sorted((v for v in values if ident(v) in wanted), key=lambda v: wanted.index(ident(v)))
    return first + [v for v in values if ident(v) not in wanted]
