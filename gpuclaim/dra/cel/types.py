"""Static CEL types of the DRA environment, printed as cel-go prints them in error messages."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Type:
    name: str
    params: tuple[Type, ...] = ()
    # a declaration's type parameter (`_A`) or a checker's type variable (`_var3`)
    is_param: bool = field(init=False, compare=False, repr=False)
    # The attribute value type is apiserver's AnyType ("any"); the checker treats it as dyn.
    is_dyn: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_param", self.name.startswith("_"))
        object.__setattr__(self, "is_dyn", self.name in ("dyn", "any"))

    def __str__(self) -> str:
        if self.params:
            return f"{self.name}({', '.join(str(p) for p in self.params)})"
        return self.name


INT, UINT, DOUBLE = Type("int"), Type("uint"), Type("double")
BOOL, STRING, BYTES = Type("bool"), Type("string"), Type("bytes")
NULL, DYN, ANY, ERROR = Type("null_type"), Type("dyn"), Type("any"), Type("*error*")
QUANTITY, SEMVER = Type("kubernetes.Quantity"), Type("kubernetes.Semver")
URL, IP, CIDR = Type("kubernetes.URL"), Type("net.IP"), Type("net.CIDR")
DEVICE = Type("kubernetes.DRADevice")
A, B = Type("_A"), Type("_B")


# cel-go isLegacyNullable: object and opaque types accept null
_NULLABLE = frozenset({"kubernetes.Quantity", "kubernetes.Semver", "kubernetes.URL", "net.IP", "net.CIDR",
                       "optional_type", "kubernetes.DRADevice", "google.protobuf.Timestamp",
                       "google.protobuf.Duration"})
# cel-go's standard timestamp and duration types: declared for overload resolution (null and free type variables
# bind to them as upstream); gpuclaim has no functions that make such values (docs/dev/upstream-oracle.md)
TIMESTAMP, DURATION = Type("google.protobuf.Timestamp"), Type("google.protobuf.Duration")


# cel-go checker/format.go FormatCELType names these kinds by their short names in messages
_DISPLAY = {"null_type": "null", "google.protobuf.Timestamp": "timestamp", "google.protobuf.Duration": "duration"}


def display(t: Type) -> str:
    """A type as cel-go's checker messages print it (FormatCELType): `null`, `timestamp`, `duration`."""
    if t.params:
        return f"{t.name}({', '.join(display(p) for p in t.params)})"
    return _DISPLAY.get(t.name, t.name)


def list_of(t: Type) -> Type:
    return Type("list", (t,))


def map_of(k: Type, v: Type) -> Type:
    return Type("map", (k, v))


def optional_of(t: Type) -> Type:
    return Type("optional_type", (t,))


def type_of(t: Type) -> Type:
    return Type("type", (t,))


ATTRIBUTES = map_of(STRING, map_of(STRING, ANY))
CAPACITY = map_of(STRING, map_of(STRING, QUANTITY))

#: identifiers that name types (`type(x) == int`)
TYPE_NAMES = {
    "int": INT, "uint": UINT, "double": DOUBLE, "bool": BOOL, "string": STRING, "bytes": BYTES,
    "null_type": NULL, "list": list_of(DYN), "map": map_of(DYN, DYN), "dyn": DYN,
}
TYPE_NAMES["type"] = type_of(DYN)
TYPE_NAMES["google.protobuf.Timestamp"], TYPE_NAMES["google.protobuf.Duration"] = TIMESTAMP, DURATION
TYPE_NAMES["optional_type"] = optional_of(DYN)  # cel.OptionalTypes() declares the type's name (cel/library.go)

#: type variable name -> what it is bound to (cel-go ``checker/mapping.go``)
Mapping = dict[str, Type]

def _dyn_or_error(t: Type) -> bool:
    return t.is_dyn or t == ERROR


def _equal_or_less_specific(t1: Type, t2: Type) -> bool:
    """cel-go ``isEqualOrLessSpecific``: t1 matches t2 through dyn or a type variable."""
    if t1.is_dyn or t1.is_param:
        return True
    if t2.is_dyn or t2.is_param:
        return False
    if t1.name != t2.name or len(t1.params) != len(t2.params):
        return False
    if t1.name == "type":
        return True
    if t1.params:
        return all(_equal_or_less_specific(a, b) for a, b in zip(t1.params, t2.params, strict=True))
    return t1 == t2


def most_general(t1: Type, t2: Type) -> Type:
    """The more general of two types known to unify (cel-go ``mostGeneral``)."""
    return t1 if _equal_or_less_specific(t1, t2) else t2


def _not_referenced_in(m: Mapping, t: Type, within: Type) -> bool:
    """The occurs check (cel-go ``notReferencedIn``)."""
    if t == within:
        return False
    if within.is_param:
        bound = m.get(within.name)
        return True if bound is None else _not_referenced_in(m, t, bound)
    return all(_not_referenced_in(m, t, p) for p in within.params)


def _valid_substitution(m: Mapping, t1: Type, t2: Type) -> tuple[bool, bool]:
    """cel-go ``isValidTypeSubstitution``: whether the variable t2 (or what it is bound to) may stand for t1,
    binding it if it is free; and whether t2 was bound."""
    if t1 == t2:
        return True, True
    bound = m.get(t2.name)
    if bound is not None:
        if t1 == bound:
            return True, True
        if _assignable(m, t1, bound):
            widened = most_general(t1, bound)
            if _not_referenced_in(m, t2, widened):
                m[t2.name] = widened
            return True, True
        return False, True
    if _not_referenced_in(m, t2, t1):
        m[t2.name] = t1
        return True, False
    return False, False


def _nullable(t: Type) -> bool:
    return t.name in _NULLABLE or t == NULL


def _assignable(m: Mapping, t1: Type, t2: Type) -> bool:
    """cel-go ``internalIsAssignable``: t1 is assignable to t2 (either may be a type variable; the mapping is
    extended in place)."""
    if t1 is t2:
        return True
    if t2.is_param:
        valid, bound = _valid_substitution(m, t1, t2)
        if valid:
            return True
        if bound:
            return False
    if t1.is_param:
        return _valid_substitution(m, t2, t1)[0]
    if _dyn_or_error(t1) or _dyn_or_error(t2):
        return True
    if t1 == NULL:
        return _nullable(t2)
    if t2 == NULL:
        return _nullable(t1)
    if t1.name == "type":
        return t2.name == "type"
    if t1.name != t2.name or len(t1.params) != len(t2.params):
        return False
    return all(_assignable(m, a, b) for a, b in zip(t1.params, t2.params, strict=True))


def is_assignable(m: Mapping, t1: Type, t2: Type) -> Mapping | None:
    """The extended mapping if t1 is assignable to t2, else None (m itself is left alone)."""
    copy = dict(m)
    return copy if _assignable(copy, t1, t2) else None


def is_assignable_list(m: Mapping, l1: list[Type], l2: tuple[Type, ...]) -> Mapping | None:
    if len(l1) != len(l2):
        return None
    copy = dict(m)
    return copy if all(_assignable(copy, a, b) for a, b in zip(l1, l2, strict=True)) else None


def substitute(m: Mapping, t: Type, to_dyn: bool) -> Type:
    """Replace bound type variables by their binding (cel-go ``substitute``); free ones by dyn if ``to_dyn``."""
    if t.is_param:
        bound = m.get(t.name)
        if bound is not None:
            return substitute(m, bound, to_dyn)
        return DYN if to_dyn else t
    if t.params:
        return Type(t.name, tuple(substitute(m, p, to_dyn) for p in t.params))
    return t


def has_param(t: Type) -> bool:
    return t.is_param or any(has_param(p) for p in t.params)


def assignable_local(args: list[Type], params: tuple[Type, ...]) -> Mapping | None:
    """Assignability of arguments without type variables: only the declaration's own parameters (`_A`) can be
    bound, in a mapping of their own (what cel-go's fresh instantiation amounts to then)."""
    m: Mapping = {}
    return m if all(_assignable(m, a, p) for a, p in zip(args, params, strict=True)) else None
