"""JSON decoding of big request bodies in bounded steps, so the event loop gets the GIL between them.

`orjson.loads` holds the GIL for the whole document: ~15 ms per MB of small keys and values (a 1.4 MB pod
with 50,000 limits: 21 ms). Run in the worker thread for big bodies, it still stops the event loop that long,
since a thread inside one C call never yields the GIL; that stall was the tail of every other admission while
big pods arrived (issue 14, the hostile bench). `loads` walks the containers' structure in Python (an explicit
stack, no recursion) and hands everything else to orjson in pieces: each scalar, object key, and each run of
up to `RUN` consecutive scalar entries of one object or array. Every step holds the GIL for a bounded time, and
the interpreter's switch interval lets the loop in between.

orjson still decides what is valid JSON and what each value is (escapes, UTF-8, numbers, the 64-bit integer
range, duplicate keys): the patterns below only over-approximate where a token ends, and each token or run
is decoded by orjson in the same position of a smaller document. The structure around them (whitespace,
brackets, commas, colons, a depth of at most 1,024 containers) follows orjson's grammar; a differential test
(tests/serving/test_chunked_json.py) checks that both accept the same documents and decode them equally.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Mapping
from typing import Any

import orjson

__all__ = ["RUN", "Overlong", "loads", "steps"]

RUN = 256  # scalar entries decoded by one orjson call
MAX_DEPTH = 1024  # orjson's: 1,024 nested containers decode, 1,025 do not

# possessive quantifiers and atomic groups (Python 3.11): no token can end in two places, so nothing is worth
# backtracking into; measured on the 1.4 MB pod, finding the runs takes 15 ms instead of 23-28 ms
_WS = re.compile(rb"[ \t\n\r]*+")
_STRING = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
# a number is at most this run of characters: JSON lets none of them follow a complete number, so a longer run
# is invalid JSON, and orjson refuses it as a token too
_SCALAR_SOURCE = rb"(?>" + _STRING + rb"|-?[0-9][0-9.eE+-]*+|true|false|null)"
_SCALAR = re.compile(_SCALAR_SOURCE, re.DOTALL)
_KEY = re.compile(_STRING, re.DOTALL)
_OBJECT_RUN = re.compile(rb"(?>[ \t\n\r]*+%s[ \t\n\r]*+:[ \t\n\r]*+%s[ \t\n\r]*+,){1,%d}+"
                         % (_STRING, _SCALAR_SOURCE, RUN), re.DOTALL)  # fmt: skip
_ARRAY_RUN = re.compile(rb"(?>[ \t\n\r]*+%s[ \t\n\r]*+,){1,%d}+" % (_SCALAR_SOURCE, RUN), re.DOTALL)


Bound = tuple[tuple[str, ...], int]  # an array's path of object keys from the top, and its most elements


class Overlong(ValueError):
    """A bounded array of `steps` has more elements than its bound allows: decoding stopped there."""

    def __init__(self, path: tuple[str, ...], bound: int) -> None:
        super().__init__(f"{'.'.join(path)}: more than {bound} elements")
        self.path, self.bound = path, bound


def _ws(data: bytes, pos: int) -> int:
    """The first position at or after `pos` that is not JSON whitespace."""
    blank = _WS.match(data, pos)
    assert blank is not None  # the pattern matches the empty string
    return blank.end()


def _fail(data: bytes, pos: int, what: str) -> orjson.JSONDecodeError:
    return orjson.JSONDecodeError(what, data.decode("utf-8", "replace"), pos)


def loads(data: bytes) -> Any:
    """Decode `data` as orjson.loads does (same values, same documents refused, as orjson.JSONDecodeError),
    in steps that each hold the GIL briefly. About twice orjson's time: for big documents decoded off the event
    loop; a small one is better decoded in one orjson call."""
    decoding = steps(data)
    while True:
        try:
            next(decoding)
        except StopIteration as done:
            return done.value


def steps(data: bytes, *, bounded: Mapping[tuple[str, ...], int] | None = None) -> Generator[None, None, Any]:
    """`loads` as a generator that stops after each bounded step (a run, a scalar, a container's edge) and
    returns the decoded value: for a caller that interleaves the decoding with other work on its own thread.
    `bounded` {path: n}: an array reached from the top-level object through the object keys `path` (and no array
    on the way) may have at most n elements; `Overlong` is raised once more are decoded, whatever the rest of the
    document holds (a request that names 50,000 nodes where 15,000 may be named is refused after 15,001 or at
    most a run more, not after 50,000)."""
    stack: list[dict[str, Any] | list[Any]] = []
    keys: list[str] = []  # the key each open object is waiting to fill
    limits: dict[int, Bound] = {}  # the open bounded arrays (by id: each is kept alive by its parent meanwhile)
    pos = _ws(data, 0)
    end = len(data)
    while True:
        # a value starts at pos
        opener = data[pos : pos + 1]
        value: Any
        if opener == b"{" or opener == b"[":
            if len(stack) >= MAX_DEPTH:
                raise _fail(data, pos, "depth limit exceeded")
            container: dict[str, Any] | list[Any] = {} if opener == b"{" else []
            pos = _ws(data, pos + 1)
            if data[pos : pos + 1] == (b"}" if opener == b"{" else b"]"):
                value, pos = container, pos + 1
            else:
                stack.append(container)
                if isinstance(container, dict):
                    pos = yield from _entries(data, pos, container, keys)
                else:
                    bound = _bound_of(bounded, stack, keys) if bounded else None
                    if bound is not None:
                        limits[id(container)] = bound
                    pos = yield from _elements(data, pos, container, bound)
                continue
        else:
            token = _SCALAR.match(data, pos)
            if token is None:
                raise _fail(data, pos, "unexpected character, expected a JSON value")
            value, pos = orjson.loads(token.group()), token.end()
        # a value ended at pos: put it in its container, then find what comes next
        while True:
            pos = _ws(data, pos)
            if not stack:
                if pos != end:
                    raise _fail(data, pos, "trailing characters after the JSON document")
                return value
            parent = stack[-1]
            separator = data[pos : pos + 1]
            if isinstance(parent, dict):
                parent[keys.pop()] = value
                if separator == b",":
                    pos = yield from _entries(data, _ws(data, pos + 1), parent, keys)
                    break
                if separator != b"}":
                    raise _fail(data, pos, "expected ',' or '}' after an object entry")
            else:
                parent.append(value)
                bound = limits.get(id(parent)) if limits else None
                if bound is not None and len(parent) > bound[1]:
                    raise Overlong(*bound)
                if separator == b",":
                    pos = yield from _elements(data, _ws(data, pos + 1), parent, bound)
                    break
                if separator != b"]":
                    raise _fail(data, pos, "expected ',' or ']' after an array element")
            value, pos = stack.pop(), pos + 1
        yield


def _bound_of(bounded: Mapping[tuple[str, ...], int], stack: list[dict[str, Any] | list[Any]], keys: list[str]
              ) -> Bound | None:
    """The bound of the array just opened (on top of `stack`), if its path is bounded: every container around it
    is an object, so `keys` holds exactly the keys that lead to it."""
    if len(keys) != len(stack) - 1:
        return None  # an array on the way
    path = tuple(keys)
    limit = bounded.get(path)
    return None if limit is None else (path, limit)


def _entries(data: bytes, pos: int, target: dict[str, Any], keys: list[str]) -> Generator[None, None, int]:
    """At the first character of an object entry: decode runs of scalar entries into `target`, then read the
    next entry's key and colon (pushed on `keys`); returns where its value starts."""
    while (run := _OBJECT_RUN.match(data, pos)) is not None:
        target.update(orjson.loads(b"{" + data[pos : run.end() - 1] + b"}"))
        pos = _ws(data, run.end())
        yield
    key = _KEY.match(data, pos)
    if key is None:
        raise _fail(data, pos, "expected a string key")
    colon = _ws(data, key.end())
    if data[colon : colon + 1] != b":":
        raise _fail(data, colon, "expected ':' after an object key")
    keys.append(orjson.loads(key.group()))
    return _ws(data, colon + 1)


def _elements(data: bytes, pos: int, target: list[Any], bounded: Bound | None) -> Generator[None, None, int]:
    """At the first character of an array element: decode runs of scalar elements into `target`; returns where
    the next element starts. `bounded`: `target` is the bounded array of `steps`, checked after each run (the
    caller checks the elements it appends itself)."""
    while (run := _ARRAY_RUN.match(data, pos)) is not None:
        target.extend(orjson.loads(b"[" + data[pos : run.end() - 1] + b"]"))
        pos = _ws(data, run.end())
        if bounded is not None and len(target) > bounded[1]:
            raise Overlong(*bounded)
        yield
    return pos
