"""Quantity comparison, rounding, values, constructors, arithmetic and JSON against
apimachinery's tables (pkg/api/resource/quantity_test.go), and properties that hold
for any quantity.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import attrs
import pytest
from _quantity_helpers import BSI, DEX, DSI, MIN_INT64, P, dec, dq
from hypothesis import assume, given
from hypothesis import strategies as st

from kubelet_kit.api.quantity import (
    MAX_INT64,
    Format,
    Quantity,
    Scale,
)
from kubelet_kit.errors import QuantityError

# -- Cmp ---------------------------------------------------------------------------------

CMP_STRING_TABLE = [
    ("0", "0", 0),
    ("100m", "50m", 1),
    ("50m", "100m", -1),
    ("10000T", "100Gi", 1),
    ("1Ki", "1024", 0),
    ("1k", "1Ki", -1),
]

CMP_TABLE: list[tuple[Quantity, Quantity, int]] = [
    (dq(901, -2, DSI), dq(901, -2, DSI), 0),
    (dq(90, -1, DSI), dq(901, -2, DSI), -1),
    (dq(901, -2, DSI), dq(900, -2, DSI), 1),
    (dq(0, 0, DSI), dq(0, 0, DSI), 0),
    (dq(0, 1, DSI), dq(0, -1, DSI), 0),
    (dq(0, -1, DSI), dq(0, 1, DSI), 0),
    (dq(800, -3, DSI), dq(1, 0, DSI), -1),
    (dq(800, -3, DSI), dq(79, -2, DSI), 1),
    (dq(MAX_INT64, 0, DSI), dq(1, -1, DSI), 1),
    (dq(MAX_INT64, 1, DSI), dq(1, 0, DSI), 1),
    (dq(MAX_INT64, 1, DSI), dq(1, 1, DSI), 1),
    (dq(MAX_INT64, 1, DSI), dq(0, 1, DSI), 1),
    (dq(MAX_INT64, -16, DSI), dq(1, 3, DSI), -1),
    (dq(MIN_INT64, 0, DSI), dq(0, 0, DSI), -1),
    (dq(MIN_INT64, -18, DSI), dq(-1, 0, DSI), -1),
    (dq(MIN_INT64, -19, DSI), dq(-1, 0, DSI), 1),
    (dq(10**18, -17, DSI), dq(1, 1, DSI), 0),
    (dq(10**18, -17, DSI), dq(-10, 0, DSI), 1),
    (dq(-(10**18), -17, DSI), dq(-10, 0, DSI), 0),
    (dq(10**18, -17, DSI), dq(1, 0, DSI), 1),
    (dq(10**18 + 1, -17, DSI), dq(1, 1, DSI), 1),
    (dq(10**18 - 1, -17, DSI), dq(1, 1, DSI), -1),
    (Quantity(), dq(10, 0, DSI), -1),
    (Quantity(), dq(-10, 0, DSI), 1),
]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(P(x), P(y), c) for x, y, c in CMP_STRING_TABLE] + CMP_TABLE,
)
def test_cmp(a: Quantity, b: Quantity, expected: int) -> None:
    assert a.cmp(b) == expected
    assert b.cmp(a) == -expected
    assert (a == b) is (expected == 0)
    assert (a < b) is (expected < 0)
    assert (a <= b) is (expected <= 0)
    assert (a > b) is (expected > 0)
    assert (a >= b) is (expected >= 0)
    if expected == 0:
        assert hash(a) == hash(b)


def test_equality_ignores_format_but_str_does_not() -> None:
    a, b = P("1Ki"), P("1024")
    assert a == b
    assert {a, b} == {a}
    assert str(a) != str(b)


def test_comparing_with_other_types() -> None:
    assert P("1") != 1  # type: ignore[comparison-overlap]
    with pytest.raises(TypeError):
        _ = P("1") < 1  # type: ignore[operator]


# -- RoundUp ------------------------------------------------------------------------------

ROUND_UP_TABLE = [
    ("9.01", -3, dq(901, -2, DSI), True),
    ("9.01", -2, dq(901, -2, DSI), True),
    ("9.01", -1, dq(91, -1, DSI), False),
    ("9.01", 0, dq(10, 0, DSI), False),
    ("9.01", 1, dq(10, 0, DSI), False),
    ("9.01", 2, dq(100, 0, DSI), False),
    ("-9.01", -3, dq(-901, -2, DSI), True),
    ("-9.01", -2, dq(-901, -2, DSI), True),
    ("-9.01", -1, dq(-91, -1, DSI), False),
    ("-9.01", 0, dq(-10, 0, DSI), False),
    ("-9.01", 1, dq(-10, 0, DSI), False),
    ("-9.01", 2, dq(-100, 0, DSI), False),
]


@pytest.mark.parametrize(("text", "scale", "expected", "exact"), ROUND_UP_TABLE)
def test_round_up(text: str, scale: int, expected: Quantity, exact: bool) -> None:
    original = P(text)
    rounded, was_exact = original.round_up(scale)
    assert rounded == expected
    assert was_exact is exact
    assert original == P(text)  # the original is untouched


# -- Value, MilliValue, ScaledValue -------------------------------------------------------

# (input, value(), milli_value())
VALUE_TABLE = [
    ("1", 1, 1000),
    ("1.2", 2, 1200),
    ("-1.2", -2, -1200),
    ("100m", 1, 100),
    ("-100m", -1, -100),
    ("1001m", 2, 1001),
    ("0.1m", 1, 1),
    ("-0.1m", -1, -1),
    ("1n", 1, 1),
    ("-1n", -1, -1),
    ("1.1Ki", 1127, 1126400),
    ("-1.1Ki", -1127, -1126400),
    ("1.5Gi", 1610612736, 1610612736000),
    ("1Mi", 1024 * 1024, 1024 * 1024 * 1000),
    ("0", 0, 0),
    ("9Ei", MAX_INT64, MAX_INT64 * 1000),
    # no int64 wrap-around: the exact value
    ("10E", 10**19, 10**22),
]


@pytest.mark.parametrize(("text", "value", "milli"), VALUE_TABLE)
def test_value_rounds_away_from_zero(text: str, value: int, milli: int) -> None:
    q = P(text)
    assert q.value() == value
    assert q.milli_value() == milli


def test_value_of_an_absurd_magnitude_is_refused_not_computed() -> None:
    q = P("1e2000000001")
    assert str(q) == "1e2000000001"
    with pytest.raises(OverflowError):
        q.value()


# TestMilliNewSet: (milli value, format, str(), whether it round-trips exactly)
MILLI_TABLE = [
    (1, DSI, "1m", True),
    (1000, DSI, "1", True),
    (1234000, DSI, "1234", True),
    (1024, BSI, "1024m", False),  # format changes
    (1000000, DEX, "1e3", True),
    (1024 * 1024, BSI, "1048576m", False),  # format changes
]


@pytest.mark.parametrize(("value", "fmt", "expected", "exact"), MILLI_TABLE)
def test_from_milli(value: int, fmt: Format, expected: str, exact: bool) -> None:
    q = Quantity.from_milli(value, fmt)
    assert str(q) == expected
    assert q.milli_value() == value
    if exact:
        assert P(str(q)).milli_value() == value


# TestNewSet
NEW_TABLE = [
    (1, DSI, "1"),
    (1000, DSI, "1k"),
    (1234000, DSI, "1234k"),
    (1024, BSI, "1Ki"),
    (1000000, DEX, "1e6"),
    (1024 * 1024, BSI, "1Mi"),
]


@pytest.mark.parametrize(("value", "fmt", "expected"), NEW_TABLE)
def test_from_int(value: int, fmt: Format, expected: str) -> None:
    q = Quantity.from_int(value, fmt)
    assert str(q) == expected
    assert P(str(q)).value() == value
    assert Quantity(value, fmt) == q


# TestNewScaledSet
SCALED_TABLE = [
    (1, Scale.NANO, "1n"),
    (1000, Scale.NANO, "1u"),
    (1, Scale.MICRO, "1u"),
    (1000, Scale.MICRO, "1m"),
    (1, Scale.MILLI, "1m"),
    (1000, Scale.MILLI, "1"),
    (1, 0, "1"),
    (0, Scale.NANO, "0"),
    (0, Scale.MICRO, "0"),
    (0, Scale.MILLI, "0"),
    (0, 0, "0"),
]


@pytest.mark.parametrize(("value", "scale", "expected"), SCALED_TABLE)
def test_from_scaled(value: int, scale: int, expected: str) -> None:
    q = Quantity.from_scaled(value, scale)
    assert str(q) == expected
    assert P(str(q)).scaled_value(scale) == value


# TestScaledValue: NewScaledQuantity(1, from).ScaledValue(to)
SCALED_VALUE_TABLE = [
    (Scale.NANO, Scale.NANO, 1),
    (Scale.NANO, Scale.MICRO, 1),
    (Scale.NANO, Scale.MILLI, 1),
    (Scale.NANO, 0, 1),
    (Scale.MICRO, Scale.NANO, 1000),
    (Scale.MICRO, Scale.MICRO, 1),
    (Scale.MICRO, Scale.MILLI, 1),
    (Scale.MICRO, 0, 1),
    (Scale.MILLI, Scale.NANO, 1000 * 1000),
    (Scale.MILLI, Scale.MICRO, 1000),
    (Scale.MILLI, Scale.MILLI, 1),
    (Scale.MILLI, 0, 1),
    (0, Scale.NANO, 1000 * 1000 * 1000),
    (0, Scale.MICRO, 1000 * 1000),
    (0, Scale.MILLI, 1000),
    (0, 0, 1),
    (2, -2, 100 * 100),
]


@pytest.mark.parametrize(("source", "target", "expected"), SCALED_VALUE_TABLE)
def test_scaled_value(source: int, target: int, expected: int) -> None:
    assert Quantity.from_scaled(1, source).scaled_value(target) == expected


def test_constructors_reject_inexact_inputs() -> None:
    with pytest.raises(TypeError, match=r"Quantity\.parse"):
        Quantity("1Gi")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Quantity(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Quantity(True)
    with pytest.raises(QuantityError):
        Quantity(Decimal("NaN"))
    with pytest.raises(ValueError):
        Quantity(1, "invalidFormat")
    with pytest.raises(TypeError):
        Quantity.from_int(1.0)  # type: ignore[arg-type]
    assert Quantity(1, "BinarySI").format is BSI
    assert Quantity(Decimal("-0")).sign() == 0


# -- Add, Sub, Neg, Mul ---------------------------------------------------------------------

ZERO = Quantity(0, DSI)

ADD_TABLE = [
    (dq(10, 0, DSI), dq(1, 1, DSI), dq(20, 0, DSI), DSI),
    (dq(10, 0, DSI), dq(1, 0, BSI), dq(11, 0, DSI), DSI),
    (dq(10, 0, BSI), dq(1, 0, DSI), dq(11, 0, BSI), BSI),
    (ZERO, dq(50, 0, DSI), dq(50, 0, DSI), DSI),
    (dq(50, 0, DSI), ZERO, dq(50, 0, DSI), DSI),
    (ZERO, ZERO, dq(0, 0, DSI), DSI),
    (ZERO, dq(1, 0, BSI), dq(1, 0, BSI), BSI),  # a zero takes the other's format
]


@pytest.mark.parametrize(("a", "b", "expected", "fmt"), ADD_TABLE)
def test_add(a: Quantity, b: Quantity, expected: Quantity, fmt: Format) -> None:
    total = a + b
    assert total == expected
    assert total.format is fmt


SUB_TABLE = [
    (dq(10, 0, DSI), dq(1, 1, DSI), dq(0, 0, DSI), DSI),
    (dq(10, 0, DSI), dq(1, 0, BSI), dq(9, 0, DSI), DSI),
    (dq(10, 0, BSI), dq(1, 0, DSI), dq(9, 0, BSI), BSI),
    (ZERO, dq(50, 0, DSI), dq(-50, 0, DSI), DSI),
    (dq(50, 0, DSI), ZERO, dq(50, 0, DSI), DSI),
    (ZERO, ZERO, dq(0, 0, DSI), DSI),
    (ZERO, dq(1, 0, BSI), dq(-1, 0, BSI), BSI),
]


@pytest.mark.parametrize(("a", "b", "expected", "fmt"), SUB_TABLE)
def test_sub(a: Quantity, b: Quantity, expected: Quantity, fmt: Format) -> None:
    difference = a - b
    assert difference == expected
    assert difference.format is fmt


@pytest.mark.parametrize("text", ["100m", "1Gi"])
def test_adding_or_subtracting_zero_keeps_the_suffix(text: str) -> None:
    value, zero = P(text), P("0")
    assert str(value + zero) == text
    assert str(zero + value) == text
    assert str(value - zero) == text
    assert str(zero - value) == str(-value)


def test_a_zero_result_prints_as_zero() -> None:
    assert str(P("1000m") - P("1")) == "0"
    assert str(P("1Ki") - P("1024")) == "0"


NEG_TABLE = [
    (dq(0, 0, DSI), dq(0, 0, DSI)),
    (Quantity(), Quantity()),
    (dq(10, 0, BSI), dq(-10, 0, BSI)),
    (dq(-10, 0, BSI), dq(10, 0, BSI)),
]


@pytest.mark.parametrize(("a", "expected"), NEG_TABLE)
def test_neg(a: Quantity, expected: Quantity) -> None:
    assert -a == expected
    negated = -a
    assert negated.format is a.format
    assert -negated == a


@pytest.mark.parametrize("quantity", [dq(901, -2, DSI), P("9.01")])
def test_neg_prints_exact_value(quantity: Quantity) -> None:
    negated = -quantity
    assert str(negated) == "-9010m"
    assert negated != quantity


MUL_TABLE = [
    (dq(10, 0, DSI), 10, dq(100, 0, DSI)),
    (dq(10, 0, DSI), 1, dq(10, 0, DSI)),
    (dq(10, 0, BSI), 1, dq(10, 0, BSI)),
    (ZERO, 50, dq(0, 0, DSI)),
    (dq(50, 0, DSI), 0, dq(0, 0, DSI)),
    (ZERO, 0, dq(0, 0, DSI)),
    (dq(10, 0, DSI), -10, dq(-100, 0, DSI)),
    (dq(-10, 0, DSI), 1, dq(-10, 0, DSI)),
    (dq(10, 0, BSI), -1, dq(-10, 0, BSI)),
    (dq(-50, 0, DSI), 0, dq(0, 0, DSI)),
    (dq(-50, 0, DSI), -50, dq(2500, 0, DSI)),
    (ZERO, -50, dq(0, 0, DSI)),
    (dq(MAX_INT64, 0, DSI), 0, dq(0, 1, DSI)),
    (dq(MAX_INT64, 0, DSI), 1, dq(MAX_INT64, 0, DSI)),
    (dq(MAX_INT64, 0, DSI), -1, dq(-MAX_INT64, 0, DSI)),
    (dq(MAX_INT64 // 2, 0, DSI), 2, dq((MAX_INT64 // 2) * 2, 0, DSI)),
    (dq(MAX_INT64, 0, DSI), 2, dq(MAX_INT64 * 2, 0, DSI)),
    (dq(MAX_INT64, 0, DSI), 10, dq(MAX_INT64, 1, DSI)),
    (dq(MAX_INT64, 0, DSI), -10, dq(-MAX_INT64, 1, DSI)),
    (dq(MIN_INT64, 0, DSI), 0, dq(0, 1, DSI)),
    (dq(MIN_INT64, 0, DSI), 1, dq(MIN_INT64, 0, DSI)),
    (dq(MIN_INT64, 0, DSI), -1, dq(MAX_INT64 + 1, 0, DSI)),
    (dq(MIN_INT64 // 2, 0, DSI), 2, dq(MIN_INT64, 0, DSI)),
    (dq(MIN_INT64, 0, DSI), 2, dq(MIN_INT64 * 2, 0, DSI)),
    (dq(MIN_INT64, 0, DSI), 10, dq(MIN_INT64, 1, DSI)),
    (dq(MIN_INT64, 0, DSI), -10, dq(MAX_INT64 + 1, 1, DSI)),
]


@pytest.mark.parametrize(("a", "factor", "expected"), MUL_TABLE)
def test_mul(a: Quantity, factor: int, expected: Quantity) -> None:
    assert a * factor == expected
    assert factor * a == expected
    assert (a * factor).format is a.format


def test_add_and_sub_need_quantities() -> None:
    with pytest.raises(TypeError):
        _ = P("1") + 1  # type: ignore[operator]
    with pytest.raises(TypeError):
        _ = P("1") * 1.5  # type: ignore[operator]


# -- AsApproximateFloat64 ---------------------------------------------------------------

M7 = 7 * 1024 * 1024
FLOAT_TABLE: list[tuple[Quantity, float]] = [
    *[(dq(0, 0, f), 0.0) for f in (DSI, DEX, BSI)],
    *[(dq(1, 0, f), 1.0) for f in (DSI, DEX, BSI)],
    (dq(1024, 0, BSI), 1024.0),
    (dq(8 * 1024, 0, BSI), 8.0 * 1024),
    *[
        row
        for f in (BSI, DSI, DEX)
        for row in [
            (dq(M7, 0, f), float(M7)),
            (dq(M7, 1, f), float(M7 * 10)),
            (dq(M7, 4, f), float(M7 * 10000)),
            (dq(M7, 8, f), float(M7 * 100000000)),
            # upstream multiplies by a float power of ten; that rounds like this
            (dq(M7, -1, f), M7 * 0.1),
            (dq(M7, -8, f), M7 / 100000000.0),
        ]
    ],
    (dq(1024, 0, DSI), 1024.0),
    (dq(1024, 0, DEX), 1024.0),
    (Quantity(MAX_INT64, DSI), float(MAX_INT64)),
    (Quantity(MAX_INT64, BSI), float(MAX_INT64)),
    (dq(12, 18, DSI), 1.2e19),
    (dq(12, 500, DSI), math.inf),
    (dq(-12, 500, DSI), -math.inf),
    (P("2Ki"), 2048.0),
    (P("1.1Ki"), 1126.4),
    (P("1Mi"), 1.048576e06),
    (P("2Gi"), 2.147483648e09),
]


@pytest.mark.parametrize(("quantity", "expected"), FLOAT_TABLE)
def test_as_approximate_float(quantity: Quantity, expected: float) -> None:
    assert quantity.as_approximate_float() == expected


# -- JSON --------------------------------------------------------------------------------

JSON_TABLE: list[tuple[str | int | float | None, str]] = [
    (" 1", "1"),
    ("1 ", "1"),
    (1, "1"),
    (10, "10"),
    (-1, "-1"),
    (" -1", "-1"),
    ("\t1Gi\n", "1Gi"),
    (0.5, "500m"),
    (None, "0"),
]


@pytest.mark.parametrize(("value", "expected"), JSON_TABLE)
def test_from_json(value: str | int | float | None, expected: str) -> None:
    q = Quantity.from_json(value)
    assert str(q) == expected
    assert Quantity.from_json(q.to_json()) == q


def test_from_json_rejects() -> None:
    with pytest.raises(QuantityError):
        Quantity.from_json("")
    with pytest.raises(QuantityError):
        Quantity.from_json("1 Gi")
    with pytest.raises(TypeError):
        Quantity.from_json(True)
    with pytest.raises(TypeError):
        Quantity.from_json([1])  # type: ignore[arg-type]


# -- immutability ------------------------------------------------------------------------


def test_quantity_is_immutable_and_hashable() -> None:
    q = P("1Gi")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        q.amount = Decimal(1)  # type: ignore[misc]
    assert {q: "memory"}[P("1024Mi")] == "memory"


# -- properties ----------------------------------------------------------------------------

formats = st.sampled_from(list(Format))


@st.composite
def quantities(draw: st.DrawFn) -> Quantity:
    coefficient = draw(st.integers(min_value=-(10**21), max_value=10**21))
    exponent = draw(st.integers(min_value=-9, max_value=24))
    fmt = draw(formats)
    q = Quantity(dec(coefficient, exponent), fmt)
    # binary values above the int64 cap print with a binary suffix and re-parse capped
    assume(fmt is not BSI or abs(q.amount) <= MAX_INT64)
    return q


SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


@st.composite
def quantity_strings(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(st.text("0123456789", min_size=1, max_size=40))
    fraction = draw(st.none() | st.text("0123456789", max_size=20))
    suffix = draw(
        st.sampled_from(SUFFIXES)
        | st.builds(
            lambda e, sgn, n: f"{e}{sgn}{n}",
            st.sampled_from("eE"),
            st.sampled_from(["", "+", "-"]),
            st.integers(min_value=0, max_value=30),
        )
    )
    return sign + whole + ("" if fraction is None else "." + fraction) + suffix


@given(quantities())
def test_str_round_trips(q: Quantity) -> None:
    assert P(str(q)) == q
    assert Quantity.from_json(q.to_json()) == q


@given(quantity_strings())
def test_parse_then_print_is_stable(text: str) -> None:
    q = P(text)
    printed = str(q)
    # upstream prints the input back only when it already looked canonical
    assert printed in (text, q.canonical())
    again = P(printed)
    assert again == q
    # after one more step the text is a fixed point
    settled = str(again)
    assert str(P(settled)) == settled
    assert P(settled) == q


@given(quantity_strings())
def test_parsed_precision_is_nano_rounded_away_from_zero(text: str) -> None:
    q = P(text)
    exponent = q.amount.as_tuple().exponent
    assert isinstance(exponent, int)
    assert exponent >= -9 or q.is_zero()


@given(quantities(), quantities())
def test_arithmetic_is_exact(a: Quantity, b: Quantity) -> None:
    assert (a + b) - b == a
    assert a - a == Quantity()
    negated = -a
    assert -negated == a
    # (Decimal's own + would round to 28 digits here; Fraction does not)
    assert Fraction((a + b).amount) == Fraction(a.amount) + Fraction(b.amount)
    assert Fraction((a - b).amount) == Fraction(a.amount) - Fraction(b.amount)
    assert a.cmp(b) == (a.amount > b.amount) - (a.amount < b.amount)
    assert (a < b) == (a.amount < b.amount)
    assert a * 3 == a + a + a


@given(quantities(), st.sampled_from([-9, -6, -3, 0, 3]))
def test_scaled_value_is_ceiling_of_magnitude(q: Quantity, scale: int) -> None:
    exact = Fraction(q.amount) / Fraction(10) ** scale
    magnitude = math.ceil(abs(exact))
    assert q.scaled_value(scale) == (magnitude if exact >= 0 else -magnitude)
    assert q.sign() == (exact > 0) - (exact < 0)


def test_all_is_honest() -> None:
    from kubelet_kit.api import quantity

    assert sorted(quantity.__all__) == sorted(set(quantity.__all__))
    for name in quantity.__all__:
        assert hasattr(quantity, name), name
