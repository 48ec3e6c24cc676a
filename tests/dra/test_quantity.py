"""dra.quantity against apimachinery's documented behaviour and an independent parser."""

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity as k8s_python_parse

from gpuclaim.dra.quantity import Quantity, QuantityError, is_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("81559Mi", "81559Mi"),
        ("1.5", "1500m"),
        ("0.5Gi", "512Mi"),
        ("1.5Ki", "1536"),  # BinarySI that is not a whole multiple of 1024 prints plain
        ("1000", "1k"),
        ("1e3", "1e3"),
        ("2e-3", "2e-3"),
        ("0.2G", "200M"),
        ("50.703k", "50703"),
        ("100m", "100m"),
        ("0", "0"),
        ("-1Gi", "-1Gi"),
        ("0.1n", "1n"),  # rounds up to the nano scale
        ("-0.1n", "-1n"),  # away from zero
        ("1.", "1"),
        ("9999999999999999999999999999999999999G", "9999999999999999999999999999999999999G"),
    ],
)
def test_canonical_form_matches_apimachinery(text: str, canonical: str) -> None:
    assert str(parse_quantity(text)) == canonical


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "quantities must match the regular expression"),
        ("10Mo", "quantities must match the regular expression"),
        ("1.2.3", "quantities must match the regular expression"),
        (" 1", "quantities must match the regular expression"),
        ("10Mm", "unable to parse quantity's suffix"),
        ("1e", "unable to parse quantity's suffix"),
        ("1ki", "unable to parse quantity's suffix"),
        ("1e999999", "too large to handle"),
    ],
)
def test_bad_quantities_are_refused_with_apimachinery_messages(text: str, message: str) -> None:
    with pytest.raises(QuantityError, match=message.replace("(", r"\(")):
        parse_quantity(text)
    assert not is_quantity(text)


@pytest.mark.parametrize("text", ["+", "-"])
def test_a_bare_sign_is_zero_as_apimachinery_parses_it(text: str) -> None:
    # found by the 1.36 CEL differential: isQuantity("-3".substring(0, 1)) is true upstream
    assert is_quantity(text)
    assert parse_quantity(text) == parse_quantity("0")


def test_equality_is_by_value_across_formats() -> None:
    assert parse_quantity("1Gi") == parse_quantity("1024Mi")
    assert parse_quantity("200M") == parse_quantity("0.2G")
    assert hash(parse_quantity("2M")) == hash(parse_quantity("2000k"))
    assert parse_quantity("81559Mi").compare(parse_quantity("80Gi")) == -1  # the H100 80GB trap


def test_arithmetic_and_integer_conversion() -> None:
    q = parse_quantity("50k").add(20).sub(parse_quantity("100k"))
    assert q.as_integer() == -49980
    assert q.sign() == -1
    assert parse_quantity("50.703k").as_approximate_float() == 50703.0
    assert not parse_quantity("9999999999999999999999999999999999999G").is_integer()
    with pytest.raises(QuantityError, match="cannot convert value to integer"):
        parse_quantity("1.5").as_integer()
    assert parse_quantity("0").add(parse_quantity("1Ki")).format == "BinarySI"  # zero takes the other's format


def test_binary_si_is_capped_at_int64_max() -> None:
    assert parse_quantity("100000Ei").value == Fraction(2**63 - 1)


_numbers = st.tuples(st.integers(0, 10**12), st.integers(0, 10**6), st.integers(0, 6)).map(
    lambda t: f"{t[0]}.{str(t[1]).zfill(t[2])[: t[2]]}" if t[2] else str(t[0])
)
_suffixes = st.sampled_from(["", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "m", "u", "n"])


@given(sign=st.sampled_from(["", "-", "+"]), number=_numbers, suffix=_suffixes)
def test_values_agree_with_the_kubernetes_python_client(sign: str, number: str, suffix: str) -> None:
    text = f"{sign}{number}{suffix}"
    ours = parse_quantity(text)
    theirs = k8s_python_parse(text)
    exact = Fraction(theirs)
    # the python client neither rounds to the nano scale nor caps BinarySI: compare where that does not matter
    if suffix.endswith("i") and abs(exact) > 2**63 - 1:
        assert abs(ours.value) == 2**63 - 1  # apimachinery caps the magnitude, then restores the sign
    elif (exact * 10**9).denominator == 1:
        assert ours.value == exact
    else:
        assert abs(ours.value) > abs(exact)  # rounded up, away from zero


@given(st.text(max_size=12))
def test_arbitrary_text_parses_or_raises_quantity_error(text: str) -> None:
    try:
        q = parse_quantity(text)
    except QuantityError:
        return
    assert isinstance(q, Quantity)
    # the canonical form parses back to the same value
    assert parse_quantity(str(q)) == q
