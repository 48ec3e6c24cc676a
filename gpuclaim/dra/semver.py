"""Semantic versions as Kubernetes' CEL semver library sees them (blang/semver v4).

Version attributes in ResourceSlices (`driverVersion`, `cudaComputeCapability`, ...) become
these values in CEL. Parsing is strict semver 2.0.0 (no leading `v`, no leading zeros);
`normalize=True` is the library's lenient mode (`v1`, `01.01` accepted). Equality and
ordering ignore build metadata, as blang's Compare does.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Semver", "SemverError", "is_semver", "parse_semver"]

_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_MAX_LEN = 1024  # attribute values are capped at 64; this only bounds work on hostile CEL literals


class SemverError(ValueError):
    """Text that is not a semantic version; the message is blang/semver's."""


@dataclass(frozen=True, slots=True, eq=False)
class Semver:
    major: int
    minor: int
    patch: int
    pre: tuple[str | int, ...] = ()
    build: tuple[str, ...] = ()

    def compare(self, other: Semver) -> int:
        for a, b in ((self.major, other.major), (self.minor, other.minor), (self.patch, other.patch)):
            if a != b:
                return 1 if a > b else -1
        if not self.pre or not other.pre:
            # a release ranks above its pre-releases
            return (not self.pre) - (not other.pre)
        for x, y in zip(self.pre, other.pre, strict=False):
            c = _compare_pre(x, y)
            if c:
                return c
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Semver):
            return self.compare(other) == 0
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self) -> str:
        return f"Semver({str(self)!r})"


def _compare_pre(a: str | int, b: str | int) -> int:
    if isinstance(a, int) and isinstance(b, int):
        return (a > b) - (a < b)
    if isinstance(a, int):  # numeric identifiers have lower precedence than alphanumeric ones
        return -1
    if isinstance(b, int):
        return 1
    return (a > b) - (a < b)


def _number(part: str, what: str) -> int:
    if not set(part) <= _NUMBERS:
        raise SemverError(f'Invalid character(s) found in {what} number "{part}"')
    if len(part) > 1 and part[0] == "0":
        raise SemverError(f'{what.capitalize()} number must not contain leading zeroes "{part}"')
    if not part:
        raise SemverError(f'strconv.ParseUint: parsing "": invalid syntax ({what} number)')
    value = int(part)
    if value >= 1 << 64:
        raise SemverError(f'strconv.ParseUint: parsing "{part}": value out of range')
    return value


def parse_semver(text: str, *, normalize: bool = False) -> Semver:
    if not isinstance(text, str):
        raise SemverError("Version string empty")
    if len(text) > _MAX_LEN:
        raise SemverError(f"version string longer than {_MAX_LEN} characters")
    if normalize:
        text = _normalize(text)
    if not text:
        raise SemverError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    major = _number(parts[0], "major")
    minor = _number(parts[1], "minor")
    rest = parts[2]
    build: tuple[str, ...] = ()
    pre_parts: list[str] = []
    if "+" in rest:
        rest, _, build_text = rest.partition("+")
        build = tuple(build_text.split("."))
    if "-" in rest:
        rest, _, pre_text = rest.partition("-")
        pre_parts = pre_text.split(".")
    patch = _number(rest, "patch")
    pre: list[str | int] = []
    for item in pre_parts:
        if not item:
            raise SemverError("Prerelease is empty")
        if set(item) <= _NUMBERS:
            if len(item) > 1 and item[0] == "0":
                raise SemverError(f'Numeric PreRelease version must not contain leading zeroes "{item}"')
            pre.append(int(item))
        elif set(item) <= _ALPHANUM:
            pre.append(item)
        else:
            raise SemverError(f'Invalid character(s) found in prerelease "{item}"')
    for item in build:
        if not item:
            raise SemverError("Build meta data is empty")
        if not set(item) <= _ALPHANUM:
            raise SemverError(f'Invalid character(s) found in build meta data "{item}"')
    return Semver(major, minor, patch, tuple(pre), build)


def _normalize(text: str) -> str:
    """The library's normalize mode (k8s.io/apiserver ``library/semverlib.go`` ``normalizeAndParse``): drop one
    leading `v`, strip leading zeros of each part, pad a short version, which may not carry a prerelease."""
    parts = text.removeprefix("v").split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            if not part or part[0] not in "0123456789":
                part = "0" + part
            parts[i] = part
    if len(parts) < 3:
        if any(c in "+-" for c in parts[-1]):
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def is_semver(text: str, *, normalize: bool = False) -> bool:
    try:
        parse_semver(text, normalize=normalize)
    except SemverError:
        return False
    return True
