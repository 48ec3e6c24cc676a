"""`gpuclaim.serving.chunked_json.loads` against orjson, the decoder it stands in for on big bodies.

Both must accept the same documents and decode them to the same values (type for type: 1, 1.0 and True are
different here), or refuse them both. Documents are drawn as JSON text with random layout, escapes and number
spellings, and then, half of the time, mutated byte by byte, so that refusals of every kind are reached.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, find, given, settings
from hypothesis import strategies as st

from gpuclaim.serving import chunked_json


def canonical(value: Any) -> Any:
    """A comparable form that keeps types and key order apart, without recursion (documents nest 1,024 deep)."""
    out: list[Any] = []
    stack: list[Any] = [value]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            out.append(("{", len(v), tuple(v)))
            stack.extend(reversed(v.values()))
        elif type(v) is list:
            out.append(("[", len(v)))
            stack.extend(reversed(v))
        elif type(v) is float:
            out.append((float, math.copysign(1.0, v), v))
        else:
            out.append((type(v), v))
    return out


def verdict(decode: Any, doc: bytes) -> tuple[str, Any]:
    try:
        return "ok", canonical(decode(doc))
    except orjson.JSONDecodeError:
        return "refused", None


# ---- JSON text with the variety orjson meets on the wire ----------------------------------------------------------

_WS = st.sampled_from(["", "", "", " ", "\n", "\t", "\r\n", "  "])
_NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["-0", "0.0", "-0.0", "1e5", "1E-2", "-1e+2", "0e0", "1.5e308", "1e400", "-1e400", "1e-400",
                     "18446744073709551615", "18446744073709551616", "-9223372036854775808",
                     "-9223372036854775809", "123456789012345678901234567890"]),
)
_CHARS = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_ESCAPES = st.sampled_from(['\\"', "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u00e9", "\\u0000",
                            "\\ud83d\\ude00", "\\uD800", "\\udc00x", "\\q", "\\u12", "\x01", "\x7f"])


@st.composite
def _string(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.one_of(_CHARS.map(lambda s: orjson.dumps(s).decode()[1:-1]), _ESCAPES), max_size=4))
    return '"' + "".join(parts) + '"'


_SCALARS = st.one_of(_NUMBERS, _string(), st.sampled_from(["true", "false", "null"]))


@st.composite
def _document(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.sampled_from(["scalar", "object", "array", "flat"]) if depth < 4 else st.just("scalar"))
    if kind == "scalar":
        return draw(_SCALARS)
    if kind == "flat":  # long runs of scalars: more than one RUN of them, as in a big pod's limits
        n = draw(st.sampled_from([1, 2, chunked_json.RUN - 1, chunked_json.RUN, chunked_json.RUN + 1,
                                  2 * chunked_json.RUN + 3]))
        values = draw(st.lists(_SCALARS, min_size=1, max_size=3))  # cycled: a long run costs few draws
        sep = draw(_WS)
        if draw(st.booleans()):
            return "[" + f",{sep}".join(values[i % len(values)] for i in range(n)) + "]"
        repeat = draw(st.integers(1, n))  # k0 .. k(repeat-1), so some keys come again
        return "{" + f",{sep}".join(f'"k{i % repeat}":{values[i % len(values)]}' for i in range(n)) + "}"
    items = draw(st.lists(_document(depth + 1), max_size=5))
    if kind == "array":
        return "[" + ",".join(draw(_WS) + i + draw(_WS) for i in items) + "]"
    entries = [draw(_WS) + draw(_string()) + draw(_WS) + ":" + draw(_WS) + v + draw(_WS) for v in items]
    return "{" + ",".join(entries) + "}"


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    doc = (draw(_WS) + draw(_document()) + draw(_WS)).encode("utf-8", "surrogatepass")
    for _ in range(draw(st.integers(0, 3)) if draw(st.booleans()) else 0):  # mutations
        at = draw(st.integers(0, len(doc)))
        byte = draw(st.sampled_from(list(b'{}[],:" \\-+.eE0a\x00\xff\xef\xbb\xbf')))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        if action == "insert":
            doc = doc[:at] + bytes([byte]) + doc[at:]
        elif at < len(doc):
            doc = doc[:at] + (bytes([byte]) if action == "replace" else b"") + doc[at + 1 :]
    return doc


@settings(max_examples=1000, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(doc=documents())
@example(doc=b"[1e5, -0, 18446744073709551616]")  # whitespace after a run of scalars
@example(doc=b'{"a": 1,  "b": {}, "a": 3}')  # a duplicate key keeps its first place, as in orjson
@example(doc=b"[1,]")
@example(doc=b'{"a":1,}')
@example(doc=b"\xef\xbb\xbf[]")
@example(doc=b'"\\ud800"')
def test_chunked_decoding_accepts_and_decodes_as_orjson(doc: bytes) -> None:
    assert verdict(chunked_json.loads, doc) == verdict(orjson.loads, doc)


@pytest.mark.parametrize("wanted", ["ok", "refused"])
def test_the_drawn_documents_reach_both_verdicts(wanted: str) -> None:
    """The strategy itself yields long documents (over 2 x RUN bytes) that orjson accepts and ones it refuses, so
    the differential test above compares both verdicts; `find` fails the test if either never comes."""
    found = find(documents(), lambda doc: verdict(orjson.loads, doc)[0] == wanted and len(doc) > 2 * chunked_json.RUN,
                 settings=settings(max_examples=2000, derandomize=True, database=None))  # fmt: skip
    assert verdict(chunked_json.loads, found)[0] == wanted


@pytest.mark.parametrize("depth", [1024, 1025])
@pytest.mark.parametrize("shape", ["array", "object"])
def test_depth_limit_is_orjsons(depth: int, shape: str) -> None:
    doc = b"[" * depth + b"]" * depth if shape == "array" else b'{"a":' * depth + b"1" + b"}" * depth
    assert verdict(chunked_json.loads, doc) == verdict(orjson.loads, doc)
    assert verdict(chunked_json.loads, doc)[0] == ("ok" if depth == 1024 else "refused")


def test_no_single_step_decodes_more_than_a_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """What bounds each hold of the GIL: a 1.4 MB pod of 50,000 limits (the hostile bench's big pod) is decoded
    in orjson calls of at most RUN entries each, and equals orjson's one-call result."""
    limits = {f"example.org/r-{i:06d}": "1" for i in range(50_000)}
    body = orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "object": {"spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}}})
    sizes: list[int] = []

    class Spy:
        JSONDecodeError = orjson.JSONDecodeError

        @staticmethod
        def loads(data: bytes) -> Any:
            value = orjson.loads(data)
            sizes.append(len(value) if isinstance(value, dict | list) else 1)
            return value

    monkeypatch.setattr(chunked_json, "orjson", Spy)
    assert chunked_json.loads(body) == orjson.loads(body)
    assert max(sizes) <= chunked_json.RUN
    assert len(sizes) >= 50_000 // chunked_json.RUN



def _bounded_verdict(doc: bytes, bound: int) -> tuple[str, Any]:
    decoding = chunked_json.steps(doc, bounded={("names",): bound, ("other", "names"): bound})
    try:
        while True:
            next(decoding)
    except StopIteration as done:
        return "ok", canonical(done.value)
    except chunked_json.Overlong:
        return "overlong", None
    except orjson.JSONDecodeError:
        return "refused", None


@st.composite
def _with_names(draw: st.DrawFn) -> tuple[bytes, int]:
    """An object whose "names" array, and the same under "other", have around RUN elements (scalars, some
    containers among them), beside a longer copy inside an array (never bounded: an array on the way); mutated
    byte by byte half of the time. Returned with a bound near the arrays' length."""
    count = draw(st.sampled_from([0, 1, 2, chunked_json.RUN - 1, chunked_json.RUN, chunked_json.RUN + 1,
                                  2 * chunked_json.RUN + 3]))
    odd = draw(st.one_of(_SCALARS, st.sampled_from(["{}", "[1]", '{"a": [2]}'])))
    every = draw(st.sampled_from([1, 7, 10_000]))  # where the odd element sits

    def names(n: int) -> str:
        return "[" + ",".join(odd if i % every == every - 1 else f'"n{i}"' for i in range(n)) + "]"

    entries = draw(st.permutations([f'"names":{names(count)}', f'"Pod":{draw(_document())}',
                                    f'"other":{{"names":{names(count)}}}',
                                    f'"inlist":[{{"names":{names(count + 2)}}}]']))
    doc = ("{" + ",".join(entries) + "}").encode("utf-8", "surrogatepass")
    for _ in range(draw(st.integers(0, 2)) if draw(st.booleans()) else 0):
        at = draw(st.integers(0, len(doc)))
        doc = doc[:at] + bytes([draw(st.sampled_from(list(b'{}[],:" ')))]) + doc[at + 1 :]
    return doc, max(0, count + draw(st.sampled_from([-2, -1, 0, 1])))


def _too_long(decoded: Any, bound: int) -> bool:
    if not isinstance(decoded, dict):
        return False
    other = decoded.get("other")
    arrays = [decoded.get("names"), other.get("names") if isinstance(other, dict) else None]
    return any(isinstance(a, list) and len(a) > bound for a in arrays)


@settings(max_examples=600, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=_with_names())
@example(case=(b'{"names": ["a", "b", "c"]}', 2))  # past the bound only by its last element, after the runs
@example(case=(b'{"names": ["a", "b", {}]}', 2))  # ... by a container
@example(case=(b'{"other": {"names": ["a", "b", "c"]}}', 2))  # a bounded path two keys deep
@example(case=(b'{"inlist": [{"names": ["a", "b", "c"]}], "x": {"other": {"names": [1, 2, 3]}}}', 0))  # off the paths
def test_a_bounded_array_stops_the_decoding_past_its_bound_and_changes_nothing_else(case: tuple[bytes, int]) -> None:
    """With `bounded`, a document decodes as orjson decodes it (same values, same refusals), except that an array
    on a bounded path ("names", "other"."names") longer than the bound stops the decoding there: Overlong,
    whatever follows. Arrays elsewhere, inside arrays included, are never bounded."""
    doc, bound = case
    got = _bounded_verdict(doc, bound)
    expected = verdict(orjson.loads, doc)
    too_long = expected[0] == "ok" and _too_long(orjson.loads(doc), bound)
    if got[0] == "overlong":
        # orjson refuses something after the cut, or agrees that a bounded array is too long
        assert expected[0] == "refused" or too_long, doc
    else:
        assert got == expected and not too_long, doc


def test_a_bounded_array_is_refused_before_the_rest_is_read() -> None:
    """The point of the bound: 50,000 names where 15,000 may be named stop the decoding after the 15,001st, so a
    document broken after them is refused for its length, not for the break; 15,000 decode whole."""
    names = orjson.dumps([f"node-{i:06d}" for i in range(50_000)])
    broken = b'{"Pod": {}, "names": ' + names + b', "tail": [1, 2, !'
    assert _bounded_verdict(broken, 15_000) == ("overlong", None)
    assert verdict(chunked_json.loads, broken) == ("refused", None)
    whole = b'{"Pod": {}, "names": ' + orjson.dumps([f"node-{i}" for i in range(15_000)]) + b"}"
    assert _bounded_verdict(whole, 15_000) == verdict(orjson.loads, whole)
