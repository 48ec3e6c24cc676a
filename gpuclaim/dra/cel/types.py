"""Static CEL types of the DRA environment, printed as cel-go prints them in error messages."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Type:
    name: str
    params: tuple[Type, ...] = ()

    def __str__(self) -> str:
        if self.params:
            return f"{self.name}({', '.join(str(p) for p in self.params)})"
        return self.name

    @property
    def is_param(self) -> bool:
        return self.name.startswith("_")

    @property
    def is_dyn(self) -> bool:
        # The attribute value type is apiserver's AnyType ("any"); the checker treats it as dyn.
        return self.name in ("dyn", "any")


INT, UINT, DOUBLE = Type("int"), Type("uint"), Type("double")
BOOL, STRING, BYTES = Type("bool"), Type("string"), Type("bytes")
NULL, DYN, ANY, ERROR = Type("null_type"), Type("dyn"), Type("any"), Type("*error*")
QUANTITY, SEMVER = Type("kubernetes.Quantity"), Type("kubernetes.Semver")
URL, IP, CIDR = Type("kubernetes.URL"), Type("net.IP"), Type("net.CIDR")
DEVICE = Type("kubernetes.DRADevice")
A, B = Type("_A"), Type("_B")


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

Subst = dict[str, Type]


def substitute(t: Type, subst: Subst) -> Type:
    if t.is_param:
        bound = subst.get(t.name)
        return DYN if bound is None else substitute(bound, subst)
    if t.params:
        return Type(t.name, tuple(substitute(p, subst) for p in t.params))
    return t


def assignable(param: Type, arg: Type, subst: Subst) -> bool:
    """Whether a value of type ``arg`` may be passed where ``param`` is declared, binding type params."""
    if param.is_param:
        bound = subst.get(param.name)
        if bound is None:
            subst[param.name] = arg
            return True
        if bound.is_dyn and not arg.is_dyn:
            subst[param.name] = arg
            return True
        return assignable(bound, arg, subst)
    if param.is_dyn or arg.is_dyn or arg == ERROR:
        return True
    if param.name != arg.name or len(param.params) != len(arg.params):
        return False
    if param.name == "type":
        return True  # type values compare across types: `type(x) == string`
    return all(assignable(p, a, subst) for p, a in zip(param.params, arg.params, strict=True))


def common(types: list[Type]) -> Type:
    """The result type of several matching overloads: theirs if they agree, else dyn."""
    first = types[0]
    return first if all(t == first for t in types) else DYN
