"""dra.semver: blang/semver v4 parsing and precedence, the CEL library's normalize mode."""

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from gpuclaim.dra.semver import Semver, SemverError, is_semver, parse_semver


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("1.2.3", True),
        ("1.2.3-beta.1+build.1", True),
        ("", False),
        ("v1.0.0", False),
        (" 1.0.0", False),
        ("1. 0.0", False),
        ("1.0.0 ", False),
        ("01.01.01", False),
        ("1", False),
        ("1.1", False),
        ("1.0.0-01", False),
        ("1.0.0-", False),
        ("1.0.0+", False),
        ("550.54.15", True),
    ],
)
def test_strict_parsing(text: str, ok: bool) -> None:
    assert is_semver(text) is ok


@pytest.mark.parametrize(
    ("text", "ok"),
    [("", False), (" 1.0.0", False), ("1. 0.0", False), ("1.0.0 ", False), ("v1.0.0", True), ("01.01.01", True),
     ("1", True), ("1.1", True)],
)
def test_normalize_mode(text: str, ok: bool) -> None:
    assert is_semver(text, normalize=True) is ok


def test_normalize_equals_strict() -> None:
    assert parse_semver("v01.01", normalize=True) == parse_semver("1.1.0")


def test_error_messages_are_blangs() -> None:
    with pytest.raises(SemverError, match=r"No Major\.Minor\.Patch elements found"):
        parse_semver("v1.0")
    with pytest.raises(SemverError, match="Major number must not contain leading zeroes"):
        parse_semver("01.1.1")


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("1.0.0", "1.2.3", -1),
        ("1.2.3", "1.2.3", 0),
        ("1.2.3", "1.0.0", 1),
        ("1.0.0-alpha", "1.0.0", -1),
        ("1.0.0-alpha", "1.0.0-alpha.1", -1),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta", -1),
        ("1.0.0-beta.2", "1.0.0-beta.11", -1),
        ("1.0.0-rc.1", "1.0.0", -1),
        ("1.0.0+a", "1.0.0+b", 0),  # build metadata has no precedence
    ],
)
def test_precedence(a: str, b: str, expected: int) -> None:
    assert parse_semver(a).compare(parse_semver(b)) == expected
    assert parse_semver(b).compare(parse_semver(a)) == -expected


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))
def test_round_trip(major: int, minor: int, patch: int) -> None:
    v = parse_semver(f"{major}.{minor}.{patch}")
    assert v == Semver(major, minor, patch)
    assert str(v) == f"{major}.{minor}.{patch}"


_NUMERIC = st.integers(0, 10**9).map(str)
_ALNUM_ID = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-", min_size=1, max_size=8).map(
    lambda t: "x" + t if t.isdigit() else t)  # an all-digit identifier is numeric (no leading zeroes): _NUMERIC
_PRE = st.lists(st.one_of(_NUMERIC, _ALNUM_ID), max_size=4)
_BUILD = st.lists(st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-", min_size=1, max_size=8),
                  max_size=3)


@st.composite
def semvers(draw: st.DrawFn) -> tuple[str, tuple[int, int, int], list[str], list[str]]:
    """A valid semver text built from its parts (random text almost never is one), and the parts."""
    core = (draw(_NUMERIC.map(int)), draw(_NUMERIC.map(int)), draw(_NUMERIC.map(int)))
    pre, build = draw(_PRE), draw(_BUILD)
    text = ".".join(map(str, core)) + ("-" + ".".join(pre) if pre else "") + ("+" + ".".join(build) if build else "")
    return text, core, pre, build


@given(semvers())
def test_every_valid_semver_parses_to_its_parts_and_prints_back(case: tuple) -> None:
    text, core, pre, build = case
    event("pre-release" if pre else "release")
    event("build metadata" if build else "no build metadata")
    for normalize in (False, True):  # normalize mode leaves a strict semver as it is
        v = parse_semver(text, normalize=normalize)
        assert (v.major, v.minor, v.patch) == core
        assert v.pre == tuple(int(p) if p.isdigit() else p for p in pre)
        assert v.build == tuple(build)
        assert str(v) == text
        assert parse_semver(str(v)) == v


@given(semvers(), st.booleans(), st.integers(0, 2), st.integers(1, 3))
def test_normalize_mode_accepts_a_leading_v_leading_zeroes_and_missing_parts(
    case: tuple, v_prefix: bool, zeroes: int, kept: int
) -> None:
    text, core, _, build = case
    numbers = [("0" * zeroes) + str(n) for n in core[:kept]]
    suffix = text[len(".".join(map(str, core))):]
    loose = ("v" if v_prefix else "") + ".".join(numbers) + suffix
    event(f"{kept} of 3 numbers")
    expected = Semver(*(list(core[:kept]) + [0] * (3 - kept)), pre=parse_semver(text).pre, build=tuple(build))
    if kept < 3 and suffix:
        # k8s.io/apiserver semverlib.go normalizeAndParse refuses a short version with a prerelease or build
        with pytest.raises(SemverError):
            parse_semver(loose, normalize=True)
        return
    assert parse_semver(loose, normalize=True) == expected
    if v_prefix or zeroes or kept < 3:
        assert not is_semver(loose)  # strict mode refuses each of these liberties


@given(st.one_of(st.text(max_size=16), semvers().map(lambda c: c[0]),
                 st.tuples(semvers().map(lambda c: c[0]), st.integers(0, 40), st.characters()).map(
                     lambda t: t[0][: t[1]] + t[2] + t[0][t[1]:])))
def test_arbitrary_text_parses_or_raises_semver_error(text: str) -> None:
    # random text, valid semvers, and valid semvers with one character inserted: both outcomes are reached
    outcomes = []
    for normalize in (False, True):
        try:
            v = parse_semver(text, normalize=normalize)
        except SemverError:
            outcomes.append("refused")
            continue
        outcomes.append("parsed")
        assert parse_semver(str(v)) == v
    event("strict: " + outcomes[0])
