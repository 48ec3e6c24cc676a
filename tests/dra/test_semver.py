"""dra.semver: blang/semver v4 parsing and precedence, the CEL library's normalize mode."""

import pytest
from hypothesis import given
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


@given(st.text(max_size=16))
def test_arbitrary_text_parses_or_raises_semver_error(text: str) -> None:
    for normalize in (False, True):
        try:
            v = parse_semver(text, normalize=normalize)
        except SemverError:
            continue
        assert parse_semver(str(v)) == v
