"""Function declarations of the Kubernetes 1.34 DRA CEL environment (the checker's view).

``ext_lists`` marks cel-go's ``ext.Lists(ext.ListsVersion(3))``, which k8s.io/apiserver's base environment
gains at 1.34 (``pkg/cel/environment/base.go``, "List library"): the scheduler's StoredExpressions environment
has it from 1.34, kube-apiserver's NewExpressions environment (compatibility version n-1) from 1.35. Overload ids
follow cel-go's where the cost estimator needs them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from gpuclaim.dra.cel.types import (
    BOOL,
    BYTES,
    CIDR,
    DOUBLE,
    DURATION,
    DYN,
    INT,
    IP,
    QUANTITY,
    SEMVER,
    STRING,
    TIMESTAMP,
    UINT,
    URL,
    A,
    B,
    Type,
    has_param,
    list_of,
    map_of,
    optional_of,
    type_of,
)


@dataclass(frozen=True, slots=True)
class Overload:
    id: str
    name: str
    member: bool
    params: tuple[Type, ...]  # the target first for member overloads
    result: Type
    ext_lists: bool = False
    #: whether it has type parameters (instantiated with fresh type variables at each use)
    generic: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "generic", has_param(self.result) or any(has_param(p) for p in self.params))


_ALL: list[Overload] = []


def _g(name: str, oid: str, params: tuple[Type, ...], result: Type, *, ext_lists: bool = False) -> None:
    _ALL.append(Overload(oid, name, False, params, result, ext_lists))


def _m(name: str, oid: str, params: tuple[Type, ...], result: Type, *, ext_lists: bool = False) -> None:
    _ALL.append(Overload(oid, name, True, params, result, ext_lists))


_NUM = {"int64": INT, "uint64": UINT, "double": DOUBLE}

# -- operators ---------------------------------------------------------------------------------------
_g("_&&_", "logical_and", (BOOL, BOOL), BOOL)
_g("_||_", "logical_or", (BOOL, BOOL), BOOL)
_g("!_", "logical_not", (BOOL,), BOOL)
_g("@not_strictly_false", "not_strictly_false", (BOOL,), BOOL)
_g("_?_:_", "conditional", (BOOL, A, A), A)
_g("_==_", "equals", (A, A), BOOL)
_g("_!=_", "not_equals", (A, A), BOOL)
_g("@in", "in_list", (A, list_of(A)), BOOL)
_g("@in", "in_map", (A, map_of(A, B)), BOOL)
_g("_[_]", "index_list", (list_of(A), INT), A)
_g("_[_]", "index_map", (map_of(A, B), A), B)
# cel-go's optional library indexes optionals too (cel/library.go); null is assignable to an optional, so
# `null[0]` matches both and is dyn
_g("_[_]", "optional_list_index_int", (optional_of(list_of(A)), INT), optional_of(A))
_g("_[_]", "optional_map_index_value", (optional_of(map_of(A, B)), A), optional_of(B))
_g("_[?_]", "list_optindex_optional_int", (list_of(A), INT), optional_of(A))
_g("_[?_]", "optional_list_optindex_optional_int", (optional_of(list_of(A)), INT), optional_of(A))
_g("_[?_]", "map_optindex_optional_value", (map_of(A, B), A), optional_of(B))
_g("_[?_]", "optional_map_optindex_optional_value", (optional_of(map_of(A, B)), A), optional_of(B))
_g("_?._", "select_optional_field", (DYN, STRING), optional_of(DYN))
# cel-go's declaration order (common/stdlib/standard.go): the first overload that matches binds a free type
# variable, so `-{}["a"]` is a double and `{}["a"] + {}["b"]` bytes, as upstream.
_REL_ORDER = (("bool", BOOL, BOOL), ("int64", INT, INT), ("int64_double", INT, DOUBLE), ("int64_uint64", INT, UINT),
              ("uint64", UINT, UINT), ("uint64_double", UINT, DOUBLE), ("uint64_int64", UINT, INT),
              ("double", DOUBLE, DOUBLE), ("double_int64", DOUBLE, INT), ("double_uint64", DOUBLE, UINT),
              ("string", STRING, STRING), ("bytes", BYTES, BYTES), ("timestamp", TIMESTAMP, TIMESTAMP),
              ("duration", DURATION, DURATION))
for _op, _name in (("_<_", "less"), ("_<=_", "less_equals"), ("_>_", "greater"), ("_>=_", "greater_equals")):
    for _sfx, _lt, _rt in _REL_ORDER:
        _g(_op, f"{_name}_{_sfx}", (_lt, _rt), BOOL)
_g("_+_", "add_bytes", (BYTES, BYTES), BYTES)
_g("_+_", "add_double", (DOUBLE, DOUBLE), DOUBLE)
_g("_+_", "add_duration_duration", (DURATION, DURATION), DURATION)
_g("_+_", "add_duration_timestamp", (DURATION, TIMESTAMP), TIMESTAMP)
_g("_+_", "add_timestamp_duration", (TIMESTAMP, DURATION), TIMESTAMP)
_g("_+_", "add_int64", (INT, INT), INT)
_g("_+_", "add_list", (list_of(A), list_of(A)), list_of(A))
_g("_+_", "add_string", (STRING, STRING), STRING)
_g("_+_", "add_uint64", (UINT, UINT), UINT)
_g("_-_", "subtract_double", (DOUBLE, DOUBLE), DOUBLE)
_g("_-_", "subtract_duration_duration", (DURATION, DURATION), DURATION)
_g("_-_", "subtract_int64", (INT, INT), INT)
_g("_-_", "subtract_timestamp_duration", (TIMESTAMP, DURATION), TIMESTAMP)
_g("_-_", "subtract_timestamp_timestamp", (TIMESTAMP, TIMESTAMP), DURATION)
_g("_-_", "subtract_uint64", (UINT, UINT), UINT)
for _op, _name in (("_/_", "divide"), ("_%_", "modulo"), ("_*_", "multiply")):
    for _n, _t in (("double", DOUBLE), ("int64", INT), ("uint64", UINT)):
        if not (_name == "modulo" and _t == DOUBLE):
            _g(_op, f"{_name}_{_n}", (_t, _t), _t)
_g("-_", "negate_double", (DOUBLE,), DOUBLE)
_g("-_", "negate_int64", (INT,), INT)

# -- standard functions ------------------------------------------------------------------------------
for _t, _n in ((BYTES, "bytes"), (list_of(A), "list"), (map_of(A, B), "map"), (STRING, "string")):
    _g("size", f"size_{_n}", (_t,), INT)
    _m("size", f"{_n}_size", (_t,), INT)
_m("contains", "contains_string", (STRING, STRING), BOOL)
_m("endsWith", "ends_with_string", (STRING, STRING), BOOL)
_m("startsWith", "starts_with_string", (STRING, STRING), BOOL)
_g("matches", "matches", (STRING, STRING), BOOL)
_m("matches", "matches_string", (STRING, STRING), BOOL)
_g("bool", "bool_to_bool", (BOOL,), BOOL)
_g("bool", "string_to_bool", (STRING,), BOOL)
_g("bytes", "bytes_to_bytes", (BYTES,), BYTES)
_g("bytes", "string_to_bytes", (STRING,), BYTES)
for _fn, _res, _srcs in (("double", DOUBLE, (DOUBLE, INT, STRING, UINT)),
                         ("int", INT, (INT, DOUBLE, DURATION, STRING, TIMESTAMP, UINT)),
                         ("string", STRING, (STRING, BOOL, BYTES, DOUBLE, DURATION, INT, TIMESTAMP, UINT)),
                         ("uint", UINT, (UINT, DOUBLE, INT, STRING))):
    for _src in _srcs:
        _g(_fn, f"{_src}_to_{ {'int': 'int64', 'uint': 'uint64'}.get(_fn, _fn)}", (_src,), _res)
_g("duration", "duration_to_duration", (DURATION,), DURATION)
_g("duration", "int64_to_duration", (INT,), DURATION)
_g("duration", "string_to_duration", (STRING,), DURATION)
_g("timestamp", "timestamp_to_timestamp", (TIMESTAMP,), TIMESTAMP)
_g("timestamp", "int64_to_timestamp", (INT,), TIMESTAMP)
_g("timestamp", "string_to_timestamp", (STRING,), TIMESTAMP)
_g("dyn", "to_dyn", (A,), DYN)
_g("type", "type", (A,), type_of(A))

# -- ext.Strings v2 (and Format) ---------------------------------------------------------------------
_m("charAt", "string_char_at_int", (STRING, INT), STRING)
_m("indexOf", "string_index_of_string", (STRING, STRING), INT)
_m("indexOf", "string_index_of_string_int", (STRING, STRING, INT), INT)
_m("lastIndexOf", "string_last_index_of_string", (STRING, STRING), INT)
_m("lastIndexOf", "string_last_index_of_string_int", (STRING, STRING, INT), INT)
_m("lowerAscii", "string_lower_ascii", (STRING,), STRING)
_m("upperAscii", "string_upper_ascii", (STRING,), STRING)
_m("replace", "string_replace_string_string", (STRING, STRING, STRING), STRING)
_m("replace", "string_replace_string_string_int", (STRING, STRING, STRING, INT), STRING)
_m("split", "string_split_string", (STRING, STRING), list_of(STRING))
_m("split", "string_split_string_int", (STRING, STRING, INT), list_of(STRING))
_m("substring", "string_substring_int", (STRING, INT), STRING)
_m("substring", "string_substring_int_int", (STRING, INT, INT), STRING)
_m("trim", "string_trim", (STRING,), STRING)
_m("join", "list_join", (list_of(STRING),), STRING)
_m("join", "list_join_string", (list_of(STRING), STRING), STRING)
_g("strings.quote", "strings_quote", (STRING,), STRING)
_m("format", "string_format", (STRING, list_of(DYN)), STRING)

# -- Kubernetes lists, regex, URLs, IP/CIDR ------------------------------------------------------------
# k8s library/lists.go comparableTypes / summableTypes, in their order (the first match binds a free variable)
_ORDERED = (INT, UINT, DOUBLE, BOOL, DURATION, TIMESTAMP, STRING, BYTES)
for _t in _ORDERED:
    _m("isSorted", f"list_{_t}_is_sorted_bool", (list_of(_t),), BOOL)
for _t in (INT, UINT, DOUBLE, DURATION):
    _m("sum", f"list_{_t}_sum", (list_of(_t),), _t)
for _t in _ORDERED:
    _m("max", f"list_{_t}_max", (list_of(_t),), _t)
for _t in _ORDERED:
    _m("min", f"list_{_t}_min", (list_of(_t),), _t)
_m("indexOf", "list_a_index_of_int", (list_of(A), A), INT)
_m("lastIndexOf", "list_a_last_index_of_int", (list_of(A), A), INT)
_m("find", "string_find_string", (STRING, STRING), STRING)
_m("findAll", "string_find_all_string", (STRING, STRING), list_of(STRING))
_m("findAll", "string_find_all_string_int", (STRING, STRING, INT), list_of(STRING))
_g("url", "string_to_url", (STRING,), URL)
_g("isURL", "is_url_string", (STRING,), BOOL)
for _f in ("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath"):
    _m(_f, f"url_{_f}", (URL,), STRING)
_g("ip", "string_to_ip", (STRING,), IP)
_g("isIP", "is_ip", (STRING,), BOOL)
_m("family", "ip_family", (IP,), INT)
for _f in ("isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast"):
    _m(_f, f"ip_{_f}", (IP,), BOOL)
_g("cidr", "string_to_cidr", (STRING,), CIDR)
_g("isCIDR", "is_cidr", (STRING,), BOOL)
_m("containsIP", "cidr_contains_ip_ip", (CIDR, IP), BOOL)
_m("containsIP", "cidr_contains_ip_string", (CIDR, STRING), BOOL)
_m("containsCIDR", "cidr_contains_cidr", (CIDR, CIDR), BOOL)
_m("containsCIDR", "cidr_contains_cidr_string", (CIDR, STRING), BOOL)
_m("ip", "cidr_ip", (CIDR,), IP)
_m("masked", "cidr_masked", (CIDR,), CIDR)
_m("prefixLength", "cidr_prefix_length", (CIDR,), INT)

# -- ext.Sets ----------------------------------------------------------------------------------------
for _f in ("contains", "equivalent", "intersects"):
    _g(f"sets.{_f}", f"list_sets_{_f}_list", (list_of(A), list_of(A)), BOOL)

# -- optional types ----------------------------------------------------------------------------------
_g("optional.of", "optional_of", (A,), optional_of(A))
_g("optional.ofNonZeroValue", "optional_ofNonZeroValue", (A,), optional_of(A))
_g("optional.none", "optional_none", (), optional_of(A))  # A stays free: it unifies with the other side
_m("value", "optional_value", (optional_of(A),), A)
_m("hasValue", "optional_hasValue", (optional_of(A),), BOOL)
_m("orValue", "optional_orValue_value", (optional_of(A), A), A)
_m("or", "optional_or_optional", (optional_of(A), optional_of(A)), optional_of(A))

# -- cel-go's timestamp and duration accessors (common/stdlib/standard.go) -----------------------------
for _f in ("getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek", "getHours",
           "getMinutes", "getSeconds", "getMilliseconds"):
    _m(_f, f"timestamp_to_{_f}", (TIMESTAMP,), INT)
    _m(_f, f"timestamp_to_{_f}_with_tz", (TIMESTAMP, STRING), INT)
    if _f in ("getHours", "getMinutes", "getSeconds", "getMilliseconds"):
        _m(_f, f"duration_to_{_f}", (DURATION,), INT)

# -- Kubernetes quantity and semver libraries --------------------------------------------------------
_g("quantity", "string_to_quantity", (STRING,), QUANTITY)
_g("isQuantity", "is_quantity_string", (STRING,), BOOL)
_g("sign", "quantity_sign", (QUANTITY,), INT)
for _f, _r in (("isGreaterThan", BOOL), ("isLessThan", BOOL), ("compareTo", INT)):
    _m(_f, f"quantity_{_f}", (QUANTITY, QUANTITY), _r)
    _m(_f, f"semver_{_f}", (SEMVER, SEMVER), _r)
for _f in ("add", "sub"):
    _m(_f, f"quantity_{_f}", (QUANTITY, QUANTITY), QUANTITY)
    _m(_f, f"quantity_{_f}_int", (QUANTITY, INT), QUANTITY)
_m("asInteger", "quantity_get_int", (QUANTITY,), INT)
_m("isInteger", "quantity_is_integer", (QUANTITY,), BOOL)
_m("asApproximateFloat", "quantity_get_float", (QUANTITY,), DOUBLE)
_g("semver", "string_to_semver", (STRING,), SEMVER)
_g("semver", "string_bool_to_semver", (STRING, BOOL), SEMVER)
_g("isSemver", "is_semver_string", (STRING,), BOOL)
_g("isSemver", "is_semver_string_bool", (STRING, BOOL), BOOL)
for _f in ("major", "minor", "patch"):
    _m(_f, f"semver_{_f}", (SEMVER,), INT)

# cel-go's optional library, version 2 (cel/library.go): cel.OptionalTypes() with no version option is the
# newest version, so every environment since 1.28 has these (not ext.Lists)
_m("first", "list_first", (list_of(A),), optional_of(A))
_m("last", "list_last", (list_of(A),), optional_of(A))

# -- ext.Lists v3 (cel-go ext/lists.go: slice v0, flatten v1, the rest v2; v3 adds their costs) ---------
_m("distinct", "list_distinct", (list_of(A),), list_of(A), ext_lists=True)
_m("flatten", "list_flatten", (list_of(list_of(A)),), list_of(A), ext_lists=True)
_m("flatten", "list_flatten_int", (list_of(DYN), INT), list_of(DYN), ext_lists=True)
_m("reverse", "list_reverse", (list_of(A),), list_of(A), ext_lists=True)
_m("slice", "list_slice", (list_of(A), INT, INT), list_of(A), ext_lists=True)
for _t in _ORDERED:
    _m("sort", f"list_{_t}_sort", (list_of(_t),), list_of(_t), ext_lists=True)
_g("lists.range", "lists_range", (INT,), list_of(INT), ext_lists=True)


def by_name(*, ext_lists: bool) -> dict[tuple[str, bool], list[Overload]]:
    """(function name, is member) -> overloads visible in an environment with or without ext.Lists v3."""
    table: dict[tuple[str, bool], list[Overload]] = defaultdict(list)
    for o in _ALL:
        if ext_lists or not o.ext_lists:
            table[(o.name, o.member)].append(o)
    return dict(table)


QUALIFIED = frozenset(o.name for o in _ALL if "." in o.name)
