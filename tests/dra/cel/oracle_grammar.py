"""Hypothesis strategies for the upstream-oracle differential tests: DRA selectors and devices.

Selectors come from a typed grammar of the Kubernetes 1.34 DRA CEL environment: device attributes of every
type (int, bool, string, version) under qualified and unqualified names and unknown domains, capacities,
the quantity and semver libraries, the strings / lists / sets / regex / format extensions, every macro
(one- and two-variable quantifiers, map/filter, transformList/transformMap, sortBy, existsOne), optionals
(``.?``, ``[?]``, optional list and map entries), ``cel.bind``, literals of mixed types and expressions that
fail to compile or at run time. Each production is chosen for the type it must produce, so most generated
expressions type-check and reach evaluation; deliberate mistakes (mixed types, unknown functions, bad
literals) are drawn at a fixed low rate so that both outcomes are exercised.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from gpuclaim.dra import cel
from gpuclaim.dra.quantity import parse_quantity
from gpuclaim.dra.semver import parse_semver

DRIVERS = ["gpu.nvidia.com", "dra.example.com"]
DOMAINS = ["gpu.nvidia.com", "dra.example.com", "resource.kubernetes.io", "nope.io"]
ATTR_NAMES = ["index", "productName", "type", "cc", "mig", "resource.kubernetes.io/pcieRoot",
              "resource.kubernetes.io/numaNode", "dra.example.com/driverVersion"]
CAP_NAMES = ["memory", "cores", "resource.kubernetes.io/slots"]
QUANTITIES = ["80Gi", "81559Mi", "0.5Gi", "1.5Ki", "100m", "1e3", "12", "0", "1k", "2.5G", "-1", "1M", "1Mi",
              "9223372036854775807", "1E", "8Ei", "0.001"]
BAD_QUANTITIES = ["10Mo", "", "1.2.3", "1e400", "--1"]
SEMVERS = ["1.2.3", "0.0.1", "1.2.3-beta.1", "1.2.3+build.7", "10.20.30", "2.0.0-rc.1+b"]
SEMVERS_NORMALIZE = ["v1.2", "1", "01.01.01", "v1.2-beta", "1.2-rc+b", "v10"]
BAD_SEMVERS = ["v1.0", "bad", "1.2.3.4", "", "01.1.1"]
STRINGS = ["", "a", "abc", "NVIDIA A100", "gpu", "mig", "A", "a,b,c", "é", "%s", "aaa!", "x y", "1", "true", "-3",
           "1.5", "0x10", "9223372036854775808", "yes"]
REGEXES = ["^a", "a+", "[[:alpha:]]+", "[[:^alpha:]]", r"\p{Lu}", r"\p{Greek}", "(a+)+$", "a{1001}", "a{2,3}",
           "(?i)abc", r"\d+", "[", "(?P<n>a)", r"\C", "a|b", "^$", "(?=a)", r"\z", ".", r"\bA", "(a)(b)?",
           r"[\x{0}-\x{10FFFF}]", "a{,3}", r"\Q.\E", "(?s).", "x*?", r"\pN", "(?U)a+", r"\1", "a**"]
INTS = ["0", "1", "-1", "2", "3", "5", "7", "100", "9223372036854775807", "-9223372036854775808", "0x10", "-0x1"]
UINTS = ["0u", "1u", "7u", "18446744073709551615u", "0x10u"]
DOUBLES = ["0.0", "1.5", "-2.5", "1e10", "1e308", "0.1", "3.0", "-0.0", "2.5e-3", "123456789.0", "1e-7"]
FORMATS = ["%s", "%d", "%f", "%.2f", "%e", "%x", "%X", "%o", "%b", "%s %s", "%%", "%5", "%.3e", "%q", "a%sb"]

Draw = Callable[[st.SearchStrategy[Any]], Any]
SCALAR_TYPES = ["int", "uint", "double", "string", "bool", "bytes"]
ALL_TYPES = [*SCALAR_TYPES, "quantity", "semver", "list_int", "list_string", "map", "dyn", "opt_int", "null"]


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False) if '"' not in s else "'" + s.replace("'", "\\'") + "'"


class Gen:
    """One expression's worth of draws; ``scope`` maps names bound by macros to their types."""

    def __init__(self, draw: Draw) -> None:
        self.draw = draw
        self.fresh = 0

    def pick(self, options: list[Any]) -> Any:
        return self.draw(st.sampled_from(options))

    def chance(self, p: float) -> bool:
        return bool(self.draw(st.floats(0, 1)) < p)

    def var(self) -> str:
        self.fresh += 1
        return ["x", "y", "k", "v", "i", "e"][self.fresh % 6] + str(self.fresh)

    def of(self, ty: str, depth: int, scope: dict[str, str]) -> str:
        names = [n for n, t in scope.items() if t == ty or (ty == "dyn")]
        if names and self.chance(0.3):
            return str(self.pick(names))
        if depth <= 0 or self.chance(0.25):
            return self.leaf(ty, scope)
        return getattr(self, "g_" + ty)(depth - 1, scope)  # type: ignore[no-any-return]

    def any_type(self) -> str:
        return str(self.pick(ALL_TYPES))

    # -- leaves ---------------------------------------------------------------------------------------
    def attr(self, scope: dict[str, str]) -> str:
        domain = self.pick(DOMAINS)
        name = str(self.pick(ATTR_NAMES)).rsplit("/", 1)[-1]
        if self.chance(0.1):
            name = "nope"
        form = self.pick(["dot", "index", "dot", "opt"])
        base = f"device.attributes[{_q(domain)}]"
        if form == "dot":
            return f"{base}.{name}"
        if form == "index":
            return f"{base}[{_q(name)}]"
        return f"{base}.?{name}.orValue({self.leaf(self.pick(['int', 'string', 'bool']), scope)})"

    def cap(self) -> str:
        domain = self.pick(DOMAINS)
        name = str(self.pick(CAP_NAMES)).rsplit("/", 1)[-1]
        return f"device.capacity[{_q(domain)}].{name}"

    def leaf(self, ty: str, scope: dict[str, str]) -> str:
        if ty == "int":
            return str(self.pick(INTS))
        if ty == "uint":
            return str(self.pick(UINTS))
        if ty == "double":
            return str(self.pick(DOUBLES))
        if ty == "string":
            return _q(self.pick(STRINGS)) if not self.chance(0.2) else "device.driver"
        if ty == "bool":
            return str(self.pick(["true", "false"]))
        if ty == "bytes":
            return str(self.pick(['b"abc"', 'b""', "b'\\xff'", 'b"a"']))
        if ty == "quantity":
            if self.chance(0.4):
                return self.cap()
            lit = self.pick(QUANTITIES if not self.chance(0.05) else BAD_QUANTITIES)
            return f"quantity({_q(lit)})"
        if ty == "semver":
            if self.chance(0.2):
                return f"device.attributes[{_q(self.pick(DOMAINS))}].{self.pick(['cc', 'driverVersion'])}"
            if self.chance(0.3):
                return f"semver({_q(self.pick(SEMVERS_NORMALIZE + SEMVERS))}, {self.pick(['true', 'false'])})"
            return f"semver({_q(self.pick(SEMVERS if not self.chance(0.05) else BAD_SEMVERS))})"
        if ty == "list_int":
            return "[" + ", ".join(self.pick(INTS[:8]) for _ in range(self.draw(st.integers(0, 3)))) + "]"
        if ty == "list_string":
            return "[" + ", ".join(_q(self.pick(STRINGS[:10])) for _ in range(self.draw(st.integers(0, 3)))) + "]"
        if ty == "map":
            n = self.draw(st.integers(0, 3))
            return "{" + ", ".join(f"{_q(self.pick(['a', 'b', 'c']))}: {self.pick(INTS[:6])}" for _ in range(n)) + "}"
        if ty == "dyn":
            return self.attr(scope)
        if ty == "opt_int":
            return str(self.pick(["optional.of(1)", "optional.none()", "optional.ofNonZeroValue(0)"]))
        if ty == "null":
            return "null"
        raise AssertionError(ty)

    # -- productions by type ----------------------------------------------------------------------------
    def g_bool(self, d: int, s: dict[str, str]) -> str:
        p = self.draw(st.integers(0, 27))
        if p <= 3:
            ty = self.pick(["int", "string", "double", "uint", "bool", "dyn", "quantity", "semver", "list_int", "map",
                            "bytes", "null", "opt_int"])
            other = ty if not self.chance(0.08) else self.any_type()  # mixed types: compile or runtime errors
            op = self.pick(["==", "!=", "<", "<=", ">", ">="] if ty not in ("quantity", "semver") or self.chance(0.1)
                           else ["==", "=="])
            return f"{self.of(ty, d, s)} {op} {self.of(other, d, s)}"
        if p <= 6:
            return f"({self.of('bool', d, s)} {self.pick(['&&', '||'])} {self.of('bool', d, s)})"
        if p == 7:
            return f"!{self.of('bool', d, s)}"
        if p == 8:
            domain = _q(self.pick(DOMAINS))
            kind = self.pick(["attributes", "capacity"])
            name = str(self.pick(ATTR_NAMES + CAP_NAMES + ["nope"])).rsplit("/", 1)[-1]
            return self.pick([f"has(device.{kind}[{domain}].{name})", f"{_q(name)} in device.{kind}[{domain}]",
                              f"has(device.{kind}.{self.pick(['nope', 'gpu'])})", f"{domain} in device.{kind}"])
        if p == 9:
            f = self.pick(["startsWith", "endsWith", "contains", "matches"])
            arg = _q(self.pick(REGEXES)) if f == "matches" else self.of("string", d, s)
            return f"{self.of('string', d, s)}.{f}({arg})"
        if p == 10:
            return self.quantifier(d, s)
        if p == 11:
            return self.pick([f"isQuantity({self.of('string', d, s)})", f"isSemver({self.of('string', d, s)})",
                              f"isSemver({self.of('string', d, s)}, {self.of('bool', d, s)})",
                              f"{self.of('quantity', d, s)}.isInteger()"])
        if p == 12:
            ty = self.pick(["quantity", "semver"])
            return f"{self.of(ty, d, s)}.{self.pick(['isGreaterThan', 'isLessThan'])}({self.of(ty, d, s)})"
        if p == 13:
            ty = self.pick(["int", "string"])
            return f"{self.of(ty, d, s)} in {self.of('list_' + ty, d, s)}"
        if p == 14:
            return f"{self.of('opt_int', d, s)}.hasValue()"
        if p == 15:
            return f"sets.{self.pick(['contains', 'equivalent', 'intersects'])}({self.of('list_int', d, s)}, " \
                   f"{self.of('list_int', d, s)})"
        if p == 16:
            return self.bind("bool", d, s)
        if p == 17:
            return f"({self.of('bool', d, s)} ? {self.of('bool', d, s)} : {self.of('bool', d, s)})"
        if p == 18:
            return f"bool({self.of('string', d, s)})"
        if p == 19:
            return f"{self.of('list_int', d, s)}.isSorted()"
        if p == 20:
            return f"{self.of('string', d, s)}.find({_q(self.pick(REGEXES))}) == {self.of('string', d, s)}"
        if p == 21:
            return self.pick([f"{self.of('map', d, s)}.exists(k, v, v > {self.of('int', d, s)})",
                              f"device.attributes[{_q(self.pick(DOMAINS))}].all(k, v, k != 'x')",
                              f"{self.of('list_int', d, s)}.all(i, v, i <= v)",
                              f"{self.of('map', d, s)}.existsOne(k, k == 'a')",
                              f"{self.of('list_int', d, s)}.exists_one(x, x > 1)"])
        if p == 22:
            return f"{self.of('dyn', d, s)}"  # a dyn selector: non-bool values fail at run time
        if p == 23:
            return f"{self.of('map', d, s)}.size() {self.pick(['==', '>'])} {self.pick(['0', '1', '2'])}"
        if p == 24:
            return f"type({self.of(self.any_type(), d, s)}) == {self.pick(['int', 'string', 'bool', 'double', 'list'])}"
        if p == 25:
            return self.pick([f"{self.of('list_int', d, s)}.sortBy(x, -x) == {self.of('list_int', d, s)}",
                              f"{self.of('list_int', d, s)}.transformList(i, v, v + i).size() > 1",
                              f"{self.of('map', d, s)}.transformMap(k, v, v * 2) == {self.of('map', d, s)}",
                              f"[?{self.of('opt_int', d, s)}, 1].size() == 2",
                              f"{{?'a': {self.of('opt_int', d, s)}}}.size() == 1"])
        if p == 26:
            return f"{self.of('string', d, s)}.format([{self.of(self.any_type(), d, s)}]) != ''"
        return f"{self.of('double', d, s)} {self.pick(['<', '>', '=='])} {self.of('int', d, s)}"

    def quantifier(self, d: int, s: dict[str, str]) -> str:
        name = self.var()
        if self.chance(0.5):
            rng, el = self.of("list_int", d, s), "int"
        elif self.chance(0.5):
            rng, el = self.of("list_string", d, s), "string"
        else:
            rng, el = f"device.attributes[{_q(self.pick(DOMAINS))}]", "string"
        macro = self.pick(["all", "exists", "exists_one", "existsOne"])
        if self.chance(0.3):  # the two-variable forms (ext.TwoVarComprehensions): index or key, and value
            key = self.var()
            kt, el = ("string", "dyn") if rng.startswith("device.") else ("int", el)
            inner = self.of("bool", d, {**s, key: kt, name: el})
            return f"{rng}.{macro}({key}, {name}, {inner})"
        return f"{rng}.{macro}({name}, {self.of('bool', d, {**s, name: el})})"

    def bind(self, ty: str, d: int, s: dict[str, str]) -> str:
        name = self.var()
        vt = self.pick(["int", "string", "quantity", "dyn", "list_int"])
        return f"cel.bind({name}, {self.of(vt, d, s)}, {self.of(ty, d, {**s, name: vt})})"

    def g_int(self, d: int, s: dict[str, str]) -> str:
        p = self.draw(st.integers(0, 14))
        if p <= 2:
            return f"({self.of('int', d, s)} {self.pick(['+', '-', '*', '/', '%'])} {self.of('int', d, s)})"
        if p == 3:
            return f"-{self.of('int', d, s)}"
        if p == 4:
            return f"{self.of(self.pick(['string', 'list_int', 'map', 'bytes']), d, s)}.size()"
        if p == 5:
            method = self.pick(["asInteger()", "sign()", 'compareTo(quantity("1"))'])
            return f"{self.of('quantity', d, s)}.{method}"
        if p == 6:
            return f"{self.of('semver', d, s)}.{self.pick(['major()', 'minor()', 'patch()'])}"
        if p == 7:
            a = self.of("string", d, s)
            return self.pick([f"{a}.indexOf({self.of('string', d, s)})",
                              f"{a}.indexOf({self.of('string', d, s)}, {self.of('int', d, s)})",
                              f"{a}.lastIndexOf({self.of('string', d, s)})"])
        if p == 8:
            return f"int({self.of(self.pick(['string', 'double', 'uint', 'int']), d, s)})"
        if p == 9:
            return f"{self.of('list_int', d, s)}.{self.pick(['sum()', 'min()', 'max()'])}"
        if p == 10:
            return f"{self.of('list_int', d, s)}[{self.of('int', d, s)}]"
        if p == 11:
            return f"{self.of('map', d, s)}[{_q(self.pick(['a', 'b', 'z']))}]"
        if p == 12:
            return f"{self.of('opt_int', d, s)}.orValue({self.of('int', d, s)})"
        if p == 13:
            return self.bind("int", d, s)
        return f"({self.of('bool', d, s)} ? {self.of('int', d, s)} : {self.of('int', d, s)})"

    def g_uint(self, d: int, s: dict[str, str]) -> str:
        return self.pick([f"uint({self.of(self.pick(['int', 'string', 'double']), d, s)})",
                          f"({self.of('uint', d, s)} {self.pick(['+', '-', '*', '/', '%'])} {self.of('uint', d, s)})"])

    def g_double(self, d: int, s: dict[str, str]) -> str:
        return self.pick([f"double({self.of(self.pick(['int', 'string', 'uint']), d, s)})",
                          f"{self.of('quantity', d, s)}.asApproximateFloat()",
                          f"({self.of('double', d, s)} {self.pick(['+', '-', '*', '/'])} {self.of('double', d, s)})"])

    def g_string(self, d: int, s: dict[str, str]) -> str:
        p = self.draw(st.integers(0, 11))
        a = self.of("string", d, s)
        if p == 0:
            return f"{a} + {self.of('string', d, s)}"
        if p == 1:
            return f"{a}.{self.pick(['lowerAscii()', 'upperAscii()', 'trim()'])}"
        if p == 2:
            return self.pick([f"{a}.substring({self.of('int', d, s)})",
                              f"{a}.substring({self.pick(INTS[:5])}, {self.pick(INTS[:6])})",
                              f"{a}.charAt({self.of('int', d, s)})"])
        if p == 3:
            return f"{a}.replace({self.of('string', d, s)}, {self.of('string', d, s)})"
        if p == 4:
            return f"string({self.of(self.any_type(), d, s)})"
        if p == 5:
            args = ", ".join(self.of(self.any_type(), d, s) for _ in range(self.draw(st.integers(0, 2))))
            return f"{_q(self.pick(FORMATS))}.format([{args}])"
        if p == 6:
            return f"{self.of('list_string', d, s)}.join({self.pick(['', _q(',')])})"
        if p == 7:
            return f"{a}.find({_q(self.pick(REGEXES))})"
        if p == 8:
            return f"strings.quote({a})"
        if p == 9:
            return self.attr(s)
        if p == 10:
            return self.bind("string", d, s)
        return f"{self.of('list_string', d, s)}[{self.of('int', d, s)}]"

    def g_bytes(self, d: int, s: dict[str, str]) -> str:
        return f"bytes({self.of('string', d, s)})"

    def g_quantity(self, d: int, s: dict[str, str]) -> str:
        op = self.pick(["add", "sub"])
        other = self.of("quantity", d, s) if self.chance(0.6) else self.of("int", d, s)
        return f"{self.of('quantity', d, s)}.{op}({other})"

    def g_semver(self, d: int, s: dict[str, str]) -> str:
        return self.leaf("semver", s)

    def g_list_int(self, d: int, s: dict[str, str]) -> str:
        p = self.draw(st.integers(0, 7))
        if p == 0:
            items = [self.of(self.pick(["int", "int", "int", "double", "string", "uint"]), d, s)
                     for _ in range(self.draw(st.integers(0, 3)))]
            return "[" + ", ".join(items) + "]"
        if p == 1:
            x = self.var()
            return f"{self.of('list_int', d, s)}.map({x}, {self.of('int', d, {**s, x: 'int'})})"
        if p == 2:
            x = self.var()
            return f"{self.of('list_int', d, s)}.filter({x}, {self.of('bool', d, {**s, x: 'int'})})"
        if p == 3:
            return f"{self.of('list_int', d, s)} + {self.of('list_int', d, s)}"
        if p == 4:
            return self.pick([f"lists.range({self.pick(['0', '3'])})", f"{self.of('list_int', d, s)}.distinct()",
                              f"{self.of('list_int', d, s)}.reverse()", f"{self.of('list_int', d, s)}.sort()",
                              f"{self.of('list_int', d, s)}.slice(0, 1)"])
        if p == 5:
            x = self.var()
            return f"{self.of('list_int', d, s)}.sortBy({x}, {self.of('int', d, {**s, x: 'int'})})"
        if p == 6:
            return f"[?{self.of('opt_int', d, s)}, {self.of('int', d, s)}]"
        return f"{self.of('map', d, s)}.map(k, {self.of('map', d, s)}.size())"

    def g_list_string(self, d: int, s: dict[str, str]) -> str:
        a = self.of("string", d, s)
        return self.pick([f"{a}.split({_q(self.pick(['', ',', ' ', 'a']))})",
                          f"{a}.split(',', {self.pick(INTS[:5])})",
                          f"{a}.findAll({_q(self.pick(REGEXES))})",
                          f"device.attributes[{_q(self.pick(DOMAINS))}].map(k, k)",
                          "[" + ", ".join(self.of("string", d, s) for _ in range(self.draw(st.integers(0, 2)))) + "]"])

    def g_map(self, d: int, s: dict[str, str]) -> str:
        p = self.draw(st.integers(0, 3))
        if p == 0:
            kt = self.pick(["string", "string", "int", "bool"])
            entries = [f"{self.of(kt if not self.chance(0.1) else 'int', d, s)}: {self.of('int', d, s)}"
                       for _ in range(self.draw(st.integers(0, 3)))]
            return "{" + ", ".join(entries) + "}"
        if p == 1:
            return f"{{?{_q(self.pick(['a', 'b']))}: {self.of('opt_int', d, s)}, 'c': 1}}"
        if p == 2:
            return f"{self.of('map', d, s)}.transformMap(k, v, v + 1)"
        return f"{self.of('list_int', d, s)}.transformMapEntry(i, v, {{string(v): i}})"

    def g_dyn(self, d: int, s: dict[str, str]) -> str:
        if self.chance(0.5):
            return f"dyn({self.of(self.pick(SCALAR_TYPES), d, s)})"
        return self.attr(s)

    def g_opt_int(self, d: int, s: dict[str, str]) -> str:
        return self.pick([f"optional.of({self.of('int', d, s)})", f"{self.of('map', d, s)}.?a",
                          f"{self.of('list_int', d, s)}[?{self.pick(INTS[:4])}]",
                          f"optional.ofNonZeroValue({self.of('int', d, s)})",
                          f"{self.of('opt_int', d, s)}.or({self.of('opt_int', d, s)})",
                          f"{self.of('map', d, s)}[?{_q(self.pick(['a', 'z']))}]"])

    def g_null(self, d: int, s: dict[str, str]) -> str:
        return "null"


@st.composite
def selectors(draw: Draw, depth: int = 3) -> str:
    """A bool-typed (mostly) selector."""
    return Gen(draw).of("bool", depth, {})


@st.composite
def expressions(draw: Draw, depth: int = 3) -> str:
    """An expression of any type (for value comparisons)."""
    g = Gen(draw)
    return g.of(g.any_type(), depth, {})


_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "int": st.sampled_from([0, 1, 2, 7, -1, 2**63 - 1]),
    "bool": st.booleans(),
    "string": st.sampled_from(["", "NVIDIA A100", "gpu", "mig", "pci0000:55", "abc"]),
    "version": st.sampled_from(SEMVERS),
}


@st.composite
def devices(draw: Draw) -> cel.PlainDevice:
    driver = draw(st.sampled_from(DRIVERS))
    attributes: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(ATTR_NAMES), unique=True, max_size=len(ATTR_NAMES))):
        kind = draw(st.sampled_from(list(_VALUES)))
        value = draw(_VALUES[kind])
        attributes[name] = parse_semver(value) if kind == "version" else value
    capacity = {name: parse_quantity(draw(st.sampled_from(QUANTITIES)))
                for name in draw(st.lists(st.sampled_from(CAP_NAMES), unique=True, max_size=len(CAP_NAMES)))}
    return cel.PlainDevice(driver, attributes, capacity)


# -- free type variables ---------------------------------------------------------------------------------
# cel-go types `[]`, `{}` and `optional.none()` with fresh type variables that later uses bind (a macro body
# using the iteration variable, the first matching overload, a literal's other elements), for the whole
# expression. These selectors put such seeds in exactly those positions, so every one exercises unification.
_FREE_LITS = ["0", "1", "-1", "7", "0u", "1u", "0.1", "1.5", "-0.0", '"a"', '""', 'b"a"', "true", "false", "null",
              "[1]", '["a"]', "[1.5]", '{"a": 1}', "optional.of(1)", "device.driver"]


class FreeGen(Gen):
    def lit(self, *, key: bool = False) -> str:
        # not a list or map as a map key: cel-go keys its map by the Go pointer (docs/dev/upstream-oracle.md)
        return str(self.pick(_FREE_LITS if not key else [x for x in _FREE_LITS if x[0] not in "[{"]))

    def value(self, d: int, *, key: bool = False) -> str:
        """An expression whose type is (or may be) a free type variable."""
        options = ['{}["a"]', "[][0]", "optional.none().value()", f"optional.none().orValue({self.lit(key=key)})",
                   f"{{}}[{self.lit()}]", "[].min()", f"{self.lst(d - 1)}[0]" if d > 0 and not key else "{}.a"]
        return str(self.pick(options))

    def body(self, v: str, d: int) -> str:
        """A bool-typed use of ``v`` that binds its type."""
        op = self.pick(["==", "!=", "<", ">", "<=", "+", "-", "*", "in"])
        other = self.lit() if d <= 0 or self.chance(0.7) else self.value(d - 1)
        if op in ("+", "-", "*"):
            return f"{v} {op} {other} == {self.lit()}"
        return str(self.pick([f"{v} {op} {other}", v, f"!{v}", f"size({v}) == 0", f"{self.lit()} in {v}",
                              f'{v}.contains("a")', f"{v}.orValue(1) == 1", f"int({v}) == 1", f"-{v} == {other}",
                              f"string({v}) == {other}", f"{v}[0] == {other}", f"{v}.exists(z, z == {other})",
                              f"[{v}, {other}].size() == 2", f"{v}.isSorted()"]))

    def expr(self, v: str) -> str:
        """A use of ``v`` of some type."""
        other = self.lit()
        return str(self.pick([v, f"{v} + {other}", f"-{v}", f"{v} * 2", f"[{v}]", f"{{{v}: 1}}", f"string({v})",
                              f"{v}.size()", f"{v} ? 1 : 2", f"[{v}, {other}]"]))

    def lst(self, d: int) -> str:
        """A list (or map) expression whose element type comes from a free variable."""
        x = self.var()
        inner = self.lst(d - 1) if d > 0 and self.chance(0.4) else self.pick(["[]", "[]", "{}"])
        return str(self.pick([
            "[]", "{}", f"{inner}.filter({x}, {self.body(x, d)})", f"{inner}.map({x}, {self.expr(x)})",
            f"{inner}.map({x}, {self.body(x, d)}, {self.expr(x)})",
            f"{inner}.transformList(i, {x}, {self.expr(x)})", f"[{self.value(d)}, {self.lit()}]",
            f"[{self.lit()}, {self.value(d)}]", f"{inner} + {self.lit()}", f"{self.lit()} + {inner}",
            f"(true ? {inner} : {self.lit()})", f"[{inner}, {self.lit()}]",
            f"{{{self.value(d, key=True)}: {self.lit()}}}",
            f"{inner}.transformMap(k, {x}, {self.expr(x)})",
        ]))

    def free_bool(self, d: int) -> str:
        x = self.var()
        lst, val, lit = self.lst(d), self.value(d), self.lit()
        return str(self.pick([
            f"{lit} in {lst}", f"{val} in {lst}", f"{lst}.exists_one({x}, {self.body(x, d)})",
            f"{lst}.all({x}, {self.body(x, d)})", f"{lst}.exists({x}, {self.body(x, d)})",
            f"{lst}.exists(i, {x}, {self.body(x, d)})", f"{lst}.isSorted()", f"{lst}.sum() == {lit}",
            f"{lst}.min() == {lit}", f"sets.intersects({lst}, {lit})", f"sets.contains({lit}, {lst})",
            f"{lst} == {lit}", f"size({lst}) == 0", f"{val} == {lit}", f"-{val} == {lit}",
            f"{val} + {self.value(d)} == {lit}", f"[{val}, {lit}].size() == 2",
            f"{lst}.map({x}, {self.expr(x)})[0] == {lit}",
            f"cel.bind(b, {val}, {self.body('b', d)})", f"optional.none().or(optional.of({lit})).value() == {lit}",
            f"(true ? {val} : {lit}) == {lit}", f"{lst}.indexOf({lit}) == -1", f"{self.body(val, d)}",
            f"[?optional.none(), {lit}].size() == 1", f"{{?\"a\": optional.none(), \"b\": {lit}}}.size() == 1",
        ]))


@st.composite
def free_type_selectors(draw: Draw, depth: int = 2) -> str:
    """A selector whose typing depends on binding a free type variable (see :class:`FreeGen`)."""
    return FreeGen(draw).free_bool(depth)


# -- timestamps and durations (cel-go's standard library) --------------------------------------------------
TIMESTAMPS = ["2024-01-01T00:00:00Z", "2025-06-30T23:59:59.5Z", "1970-01-01T00:00:00Z", "2024-02-29T12:00:00+01:00",
              "2023-12-31T23:30:00-05:30", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z",
              "2024-03-10T07:00:00.123456789Z", "2024-01-01T00:00:00+00:00", "2024-01-01T5:00:00Z",
              "2024-01-01T00:00:00,25Z", "2024-11-03T06:30:00Z"]
BAD_TIMESTAMPS = ["x", "", "2024-01-01", "2023-02-29T00:00:00Z", "2024-01-01T24:00:00Z", "0000-12-31T23:59:59Z",
                  "2024-01-01t00:00:00z", "2024-01-01T00:00:00+24:00", "2024-1-01T00:00:00Z", "2024-01-01T00:00:60Z"]
DURATIONS = ["1h", "30m", "1h2m3.5s", "300ms", "-1.5h", "1us", "1µs", "1μs", "1ns", "0", "0s", "+5s", ".5s", "1.s",
             "2562047h47m16.854775807s", "-2562047h47m16.854775808s", "1.0000000001s", "3723s", "90m", "-1ns",
             "1h1h", "0.333333333333h"]
BAD_DURATIONS = ["x", "", "1", "1d", "-", ".s", "2562048h", "1hh", "1 h", "9223372036854775808ns", "+-1s"]
TIME_ZONES = ["UTC", "", "Europe/Paris", "America/Los_Angeles", "Asia/Kolkata", "Australia/Lord_Howe", "+05:30",
              "-08:00", "+00:00", "-00:30", "Nowhere/X", "x:30", "05:-30", "Local", "../etc", "+1:5",
              "Europe//Paris", "./UTC", "UTC/.", "Europe/", "Etc/GMT+5", "US/Pacific"]
TS_ACCESSORS = ["getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek", "getHours",
                "getMinutes", "getSeconds", "getMilliseconds"]
DUR_ACCESSORS = ["getHours", "getMinutes", "getSeconds", "getMilliseconds"]
TIME_TYPES = ["timestamp", "duration", "int", "string", "bool"]


class TimeGen(Gen):
    """Expressions over timestamps and durations: literals (valid, invalid, at the range limits), arithmetic,
    comparisons, accessors with and without time zones, conversions, and values that reach the functions only
    at run time (through dyn or a device attribute)."""

    def timestamp(self, d: int) -> str:
        r = self.draw(st.integers(0, 9))
        if d <= 0 or r < 4:
            lit = self.pick(TIMESTAMPS if not self.chance(0.1) else BAD_TIMESTAMPS)
            return f"timestamp({_q(lit)})"
        if r == 4:
            return f"timestamp({self.pick(['0', '1', '-62135596800', '253402300799', '253402300800', '1700000000'])})"
        if r == 5:
            return f"{self.timestamp(d - 1)} + {self.duration(d - 1)}"
        if r == 6:
            return f"{self.timestamp(d - 1)} - {self.duration(d - 1)}"
        if r == 7:
            return f"{self.duration(d - 1)} + {self.timestamp(d - 1)}"
        if r == 8:
            return f"timestamp(dyn({self.pick(['1', _q(self.pick(TIMESTAMPS)), _q('x')])}))"
        return f"timestamp({self.timestamp(d - 1)})"

    def duration(self, d: int) -> str:
        r = self.draw(st.integers(0, 9))
        if d <= 0 or r < 4:
            lit = self.pick(DURATIONS if not self.chance(0.1) else BAD_DURATIONS)
            return f"duration({_q(lit)})"
        if r == 4:
            return f"({self.duration(d - 1)} + {self.duration(d - 1)})"
        if r == 5:
            return f"({self.duration(d - 1)} - {self.duration(d - 1)})"
        if r == 6:
            return f"({self.timestamp(d - 1)} - {self.timestamp(d - 1)})"
        if r == 7:
            return f"duration(dyn({self.pick([_q(self.pick(DURATIONS)), '1', _q('bad')])}))"
        if r == 8:
            return f"[{self.duration(d - 1)}, {self.duration(d - 1)}].{self.pick(['sum()', 'max()', 'min()'])}"
        return f"-dyn({self.duration(d - 1)})"

    def time_of(self, ty: str, d: int) -> str:
        if ty == "timestamp":
            return self.timestamp(d)
        if ty == "duration":
            return self.duration(d)
        if ty == "int":
            r = self.draw(st.integers(0, 3))
            if r == 0:
                return f"int({self.pick([self.timestamp(d), self.duration(d)])})"
            if r == 1:
                return f"{self.duration(d)}.{self.pick(DUR_ACCESSORS)}()"
            if r == 2:
                return f"{self.timestamp(d)}.{self.pick(TS_ACCESSORS)}()"
            return f"{self.timestamp(d)}.{self.pick(TS_ACCESSORS)}({_q(self.pick(TIME_ZONES))})"
        if ty == "string":
            return f"string({self.pick([self.timestamp(d), self.duration(d)])})"
        kind = self.pick(["timestamp", "duration"])
        r = self.draw(st.integers(0, 3))
        if r == 0:
            op = self.pick(["<", "<=", ">", ">=", "==", "!="])
            return f"{self.time_of(kind, d)} {op} {self.time_of(kind, d)}"
        if r == 1:
            return f"{self.time_of(kind, d)} in [{self.time_of(kind, d)}, {self.time_of(kind, d)}]"
        if r == 2:
            return f"[{self.time_of(kind, d)}, {self.time_of(kind, d)}].isSorted()"
        if self.chance(0.5):
            name = self.pick(["google.protobuf.Timestamp", "google.protobuf.Duration"])
            return f"type({self.time_of(kind, d)}) {self.pick(['in [' + name + ']', '== ' + name])}"
        return f"type({self.time_of(kind, d)}) == type({self.time_of(self.pick(['timestamp', 'duration']), d)})"


@st.composite
def time_selectors(draw: Draw, depth: int = 2) -> str:
    return TimeGen(draw).time_of("bool", depth)


@st.composite
def time_expressions(draw: Draw, depth: int = 2) -> str:
    g = TimeGen(draw)
    return g.time_of(g.pick(TIME_TYPES), depth)


_FUZZ_ALPHABET = "0123456789.:-+TZhmsunµμ ,tz"


@st.composite
def mutated_time_literals(draw: Draw) -> str:
    """A valid timestamp or duration literal with a few characters replaced, inserted or deleted, converted at
    run time (through dyn: no literal validator) and printed: Go's parsers decide what is valid and the value."""
    kind = draw(st.sampled_from(["timestamp", "duration"]))
    chars = list(draw(st.sampled_from(TIMESTAMPS if kind == "timestamp" else DURATIONS)))
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(chars)))
        op = draw(st.sampled_from(["replace", "insert", "delete"]))
        c = draw(st.sampled_from(_FUZZ_ALPHABET))
        if op == "insert" or not chars:
            chars.insert(i, c)
        elif op == "replace":
            chars[min(i, len(chars) - 1)] = c
        else:
            del chars[min(i, len(chars) - 1)]
    return f'string({kind}(dyn({_q("".join(chars))})))'


# -- optionals and null ------------------------------------------------------------------------------------
# cel-go's optional library meets null and dyn: or()/orValue() on a value that is not an optional (cel-go v0.26
# returns it, v0.29 says "no such overload"), hasValue()/value() dispatched at run time, optional.of(null),
# ofNonZeroValue of every kind of zero, `.?` and `[?]` on values of every type, ==/!=/in on null, dyn and optionals,
# variables holding optionals (v0.26 flattens a nested one when it reads the variable). Quantities and semvers in
# optional variables (v0.26 cannot read them back) are test_cel_optionals.py's explicit cases: gpuclaim refuses
# such an optional entry at once where upstream keeps the error in the list (docs/dev/upstream-oracle.md).
_OPT_LITS = ["0", "1", "-1", "0u", "1u", "0.0", "-0.0", "1.5", '""', '"a"', "true", "false", 'b""', 'b"a"', "null",
             "[]", "[1]", "[null]", "{}", '{"a": 1}', '{"a": null}', 'duration("0s")', 'duration("1s")', "timestamp(0)",
             'timestamp("0001-01-01T00:00:00Z")', "type(1)", "type(null)",
             "optional.none()", "optional.of(1)", "optional.of(null)", "device.driver",
             'device.attributes["gpu.nvidia.com"].productName', 'device.attributes["gpu.nvidia.com"].index']


class OptGen(Gen):
    """Expressions where optionals, null and dyn meet. ``opt`` always has a static optional type: cel-go panics on
    an optional list or map entry of type dyn (``[?dyn(1)]``; kube-apiserver answers 500), which gpuclaim refuses
    at compile time, so these draws never put one in a ``[?]``/``{?}`` entry (test_cel_optionals.py tries it)."""

    def lit(self) -> str:
        return str(self.pick(_OPT_LITS))

    def val(self, d: int) -> str:
        """A value of any static type (dyn and null included)."""
        if d <= 0 or self.chance(0.3):
            return self.lit()
        r = self.draw(st.integers(0, 9))
        if r == 0:
            return f"dyn({self.val(d - 1)})"
        if r == 1:
            return f"{self.recv(d - 1)}.orValue({self.val(d - 1)})"
        if r == 2:
            return f"{self.recv(d - 1)}.value()"
        if r == 3:
            b = self.var()
            return f"cel.bind({b}, {self.val(d - 1)}, {b})"
        if r == 4:
            return f"({self.pick(['true', 'false'])} ? {self.val(d - 1)} : {self.val(d - 1)})"
        if r == 5:
            return f"[{self.val(d - 1)}][0]"
        if r == 6:
            return f'{{"a": {self.val(d - 1)}}}.a'
        if r == 7:
            return f"dyn({self.opt(d - 1)})"
        if r == 8:
            return f"[?{self.opt(d - 1)}, {self.val(d - 1)}][0]"
        return f"{self.opt(d - 1)}.orValue(null)"

    def opt(self, d: int) -> str:
        """An expression of static type optional_type(T)."""
        if d <= 0 or self.chance(0.2):
            return str(self.pick(["optional.none()", "optional.of(1)", "optional.of(null)", 'optional.of("")',
                                  "optional.ofNonZeroValue(0)", f"optional.ofNonZeroValue({self.lit()})",
                                  f"optional.of({self.lit()})"]))
        r = self.draw(st.integers(0, 8))
        if r == 0:
            return f"optional.of({self.val(d - 1)})"
        if r == 1:
            return f"optional.ofNonZeroValue({self.val(d - 1)})"
        if r == 2:
            return f"{self.opt(d - 1)}.or({self.recv(d - 1) if self.chance(0.7) else self.val(d - 1)})"
        if r == 3:
            return f'{{"a": {self.val(d - 1)}}}.?{self.pick(["a", "b"])}'
        if r == 4:
            key = self.pick(['"a"', '"b"', "null", "1"])
            return f'{{"a": {self.val(d - 1)}}}[?{key}]'
        if r == 5:
            return f"[{self.val(d - 1)}][?{self.pick(['0', '1', '-1'])}]"
        if r == 6:
            return f"{self.val(d - 1)}.?{self.pick(['a', 'b'])}"  # map or dyn: typed; anything else: refused
        if r == 7:
            b = self.var()
            return f"cel.bind({b}, {self.opt(d - 1)}, {b})"
        return f"{self.opt(d - 1)}.?a"

    def recv(self, d: int) -> str:
        """A receiver for the optional methods: an optional, or a value (dyn dispatches at run time)."""
        return self.opt(d) if self.chance(0.6) else self.val(d)

    def use(self, b: str, d: int, *, optional: bool) -> str:
        """A bool-typed use of a bound name."""
        v = self.val(d)
        options = [f"{b}.orValue({v}) == {v}", f"{b}.hasValue()", f"{b}.value() == {v}", f"{b} == null",
                   f"{b} != null", f"{b}.or({self.opt(d)}) == {self.opt(d)}", f"{b} in [{v}]", f"[{b}] == [{v}]",
                   f"{b} == {v}", f"{b} != {v}", f"{b}.?a.hasValue()", f"type({b}) == type({v})"]
        if optional:
            options += [f"[?{b}].size() == 1", f'{{?"a": {b}}}.size() == 0', f"{b} == {self.opt(d)}"]
        return str(self.pick(options))

    def boolean(self, d: int) -> str:
        r = self.draw(st.integers(0, 10))
        if r == 0:
            return f"{self.recv(d)}.hasValue()"
        if r == 1:
            return f"{self.val(d)} {self.pick(['==', '!='])} {self.val(d)}"
        if r == 2:
            return f"{self.opt(d)} {self.pick(['==', '!='])} {self.pick([self.opt(d), 'null', self.val(d)])}"
        if r == 3:
            return f"{self.pick(['null', self.val(d)])} {self.pick(['==', '!='])} null"
        if r == 4:
            b, optional = self.var(), self.chance(0.5)
            return f"cel.bind({b}, {self.opt(d) if optional else self.val(d)}, {self.use(b, d, optional=optional)})"
        if r == 5:
            return f"{self.val(d)} in [{self.val(d)}, {self.val(d)}]"
        if r == 6:
            return f"[?{self.opt(d)}, ?{self.opt(d)}].size() == {self.pick(['0', '1', '2'])}"
        if r == 7:
            return f'{{?"a": {self.opt(d)}, "b": {self.val(d)}}}.size() == {self.pick(["1", "2"])}'
        if r == 8:
            return f"type({self.val(d)}) == type({self.val(d)})"
        if r == 9:
            return f"{self.recv(d)}.orValue({self.val(d)}) == {self.val(d)}"
        return f"{self.recv(d)}.or({self.recv(d)}) == {self.recv(d)}"


@st.composite
def optional_selectors(draw: Draw, depth: int = 2) -> str:
    """A selector where optionals, null and dyn meet (see :class:`OptGen`)."""
    return OptGen(draw).boolean(depth)


@st.composite
def optional_expressions(draw: Draw, depth: int = 2) -> str:
    """A value where optionals, null and dyn meet, for value comparisons."""
    g = OptGen(draw)
    return g.opt(depth) if g.chance(0.5) else g.val(depth)
