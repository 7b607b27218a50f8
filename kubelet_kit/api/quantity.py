"""Kubernetes ``resource.Quantity``: parsing, canonical strings and exact arithmetic.

A quantity is a fixed-point decimal number written with an optional suffix::

    <quantity>        ::= <signedNumber><suffix>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <signedNumber>    ::= <number> | <sign><number>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>

This module follows apimachinery's ``pkg/api/resource`` rule for rule, so a string
means here what it means to the API server and the kubelet:

* Parsing keeps the family of the suffix (:class:`Format`), rounds anything finer
  than a nano-unit up (away from zero), caps binary-suffixed values at 2**63-1 and
  turns a binary value strictly between 0 and 1 into a decimal one.
* ``str(q)`` is the canonical form: the largest suffix of the quantity's family
  that leaves an integer mantissa. A binary value that is not a whole number, or
  whose magnitude is below 1024, is written with decimal suffixes. An input that
  already looked canonical when parsed is printed back verbatim, as upstream does
  (so ``"+1Ki"`` prints as ``"+1Ki"`` and ``"1.500k"`` as ``"1.500k"``).
* Values are held as exact :class:`decimal.Decimal` numbers; no float is ever
  involved except in :meth:`Quantity.as_approximate_float`.

Where upstream changed recently, the newest behaviour is implemented: a decimal
exponent outside the int32 range is rejected, and a value with no suffix for its
magnitude (beyond ``E``/``Ei``, or finer than ``n``) is written in exponent form
instead of silently losing its suffix.

Deliberate differences from the Go type, because Python integers do not overflow:
:meth:`Quantity.value` and friends return the exact result (rounded away from zero)
where Go would wrap an int64, and arithmetic never loses precision.
"""

from __future__ import annotations

import decimal
import enum
import json
from decimal import Decimal
from typing import Final

import attrs

from kubelet_kit.errors import QuantityError

__all__ = [
    "ERR_FORMAT_WRONG",
    "ERR_NUMERIC",
    "ERR_SUFFIX",
    "MAX_INT64",
    "SPLIT_RE",
    "Format",
    "Quantity",
    "Scale",
]

SPLIT_RE: Final = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
"""The regular expression upstream quotes when a string has the wrong shape."""

ERR_FORMAT_WRONG: Final = f"quantities must match the regular expression '{SPLIT_RE}'"
"""Reason given for a string whose shape is not that of a quantity."""
ERR_NUMERIC: Final = "unable to parse numeric part of quantity"
"""Reason given when the number before the suffix has no digits where one is needed."""
ERR_SUFFIX: Final = "unable to parse quantity's suffix"
"""Reason given for a suffix that has the right characters but is not a known suffix."""

MAX_INT64: Final = (1 << 63) - 1
"""Largest int64; binary-suffixed quantities are capped at this when parsed."""

_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
# upstream's fast path handles at most this many digits as an int64
_MAX_INT64_FACTORS: Final = 18
_NANO: Final = -9
_ONE_NANO: Final = Decimal("1e-9")
_MAX_NANO_PADDING: Final = 60
# Refuse to materialise integers longer than this many digits: a quantity such as
# "1e2000000000" parses and prints cheaply, but its integer value would exhaust memory.
_MAX_INTEGER_DIGITS: Final = 100_000

_DIGITS: Final = frozenset("0123456789")
_SUFFIX_CHARS: Final = frozenset("eEinumkKMGTP")

# Exact arithmetic: the precision is large enough that adding or subtracting two
# quantities never rounds, and an inexact result would raise instead of drifting.
_EXACT: Final = decimal.Context(
    prec=decimal.MAX_PREC,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    rounding=decimal.ROUND_UP,
    traps=[decimal.InvalidOperation, decimal.Inexact, decimal.Overflow, decimal.Underflow],
)
# Same limits, but rounding is the point (ROUND_UP is "away from zero").
_ROUNDING: Final = decimal.Context(
    prec=decimal.MAX_PREC,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    rounding=decimal.ROUND_UP,
    traps=[decimal.InvalidOperation, decimal.Overflow],
)


class Format(enum.StrEnum):
    """The three families of suffix a quantity can be written in.

    The values are upstream's ``Format`` strings.
    """

    DECIMAL_EXPONENT = "DecimalExponent"
    """``12e6``: a power-of-ten exponent."""
    BINARY_SI = "BinarySI"
    """``12Mi``: powers of 1024."""
    DECIMAL_SI = "DecimalSI"
    """``12M``: powers of 1000."""


class Scale(enum.IntEnum):
    """Named powers of ten for :meth:`Quantity.scaled_value` and friends.

    Any other int is accepted wherever a scale is asked for.
    """

    NANO = -9
    MICRO = -6
    MILLI = -3
    ONE = 0
    KILO = 3
    MEGA = 6
    GIGA = 9
    TERA = 12
    PETA = 15
    EXA = 18


# suffix -> (base, exponent, format)
_SUFFIXES: Final[dict[str, tuple[int, int, Format]]] = {
    "": (10, 0, Format.DECIMAL_SI),
    "n": (10, -9, Format.DECIMAL_SI),
    "u": (10, -6, Format.DECIMAL_SI),
    "m": (10, -3, Format.DECIMAL_SI),
    "k": (10, 3, Format.DECIMAL_SI),
    "M": (10, 6, Format.DECIMAL_SI),
    "G": (10, 9, Format.DECIMAL_SI),
    "T": (10, 12, Format.DECIMAL_SI),
    "P": (10, 15, Format.DECIMAL_SI),
    "E": (10, 18, Format.DECIMAL_SI),
    "Ki": (2, 10, Format.BINARY_SI),
    "Mi": (2, 20, Format.BINARY_SI),
    "Gi": (2, 30, Format.BINARY_SI),
    "Ti": (2, 40, Format.BINARY_SI),
    "Pi": (2, 50, Format.BINARY_SI),
    "Ei": (2, 60, Format.BINARY_SI),
}
# power of ten -> DecimalSI suffix
_DECIMAL_SUFFIX: Final = {e: s for s, (b, e, _) in _SUFFIXES.items() if b == 10}
# power of 1024 -> BinarySI suffix; 1024**0 prints with no suffix
_BINARY_SUFFIX: Final = {0: ""} | {e // 10: s for s, (b, e, _) in _SUFFIXES.items() if b == 2}


def _to_amount(value: int | Decimal) -> Decimal:
    """attrs converter: accept exact numbers only (never floats or strings)."""
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        hint = " (use Quantity.parse for strings)" if isinstance(value, str) else ""
        raise TypeError(
            f"Quantity amount must be an int or a decimal.Decimal, not {type(value).__name__}{hint}"
        )
    if isinstance(value, int):
        return Decimal(value)
    if not value.is_finite():
        raise QuantityError(f"Quantity amount must be a finite number, not {value}")
    # -0 would print and hash like 0 anyway; keep one zero so the sign never leaks out
    return value.copy_abs() if value.is_zero() else value


@attrs.frozen
class Quantity:
    """An exact, immutable Kubernetes resource quantity.

    Build one with :meth:`parse` (``Quantity.parse("1.5Gi")``), :meth:`from_int`,
    :meth:`from_milli`, :meth:`from_scaled`, or directly from an exact number:
    ``Quantity(Decimal("0.25"), Format.DECIMAL_SI)``.

    Equality, hashing and ordering use the numeric value only, like upstream's
    ``Cmp``: ``Quantity.parse("1Ki") == Quantity.parse("1024")`` although they print
    differently. ``+``, ``-``, unary ``-`` and ``*`` by an int return new quantities.

    Attributes:
        amount: The exact value. For quantities that came from :meth:`parse` its
            coefficient and exponent are those upstream stores, which is what
            :meth:`as_approximate_float` reads.
        format: The suffix family the value is written in by ``str()``.
    """

    amount: Decimal = attrs.field(default=Decimal(0), converter=_to_amount)
    format: Format = attrs.field(default=Format.DECIMAL_SI, converter=Format, eq=False)
    # The parsed text when upstream would print it back unchanged. It is not part of
    # the value and cannot be given to the constructor, so nobody can forge it;
    # parse() sets it once, right after construction.
    _verbatim: str | None = attrs.field(default=None, init=False, eq=False, repr=False)

    # -- construction ---------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Parse a quantity string exactly as upstream ``ParseQuantity`` does.

        No whitespace is allowed (use :meth:`from_json` for JSON values, which trims
        it). Some strings upstream accepts look odd but parse the same here: ``"1."``,
        ``".5"``, ``"1.G"``, and even ``"+"``, ``"-"``, ``"."`` and ``"Ki"`` (all zero).

        Args:
            text: The quantity, e.g. ``"500m"``, ``"1.5Gi"``, ``"1e3"``.

        Returns:
            The quantity, remembering its suffix family.

        Raises:
            QuantityError: ``text`` is empty, not of the quantity shape, has an
                unknown suffix, or an exponent outside the int32 range. The message
                names ``text`` and gives upstream's reason.
        """
        if not isinstance(text, str):
            raise TypeError(f"Quantity.parse needs a str, not {type(text).__name__}")
        if text == "":
            raise _error(text, ERR_FORMAT_WRONG)
        if text == "0":
            return _with_verbatim(cls(Decimal(0), Format.DECIMAL_SI), text)

        positive, number, num, denom, suffix = _scan(text)
        interpreted = _interpret(suffix)
        if interpreted is None:
            raise _error(text, ERR_SUFFIX)
        base, exponent, fmt = interpreted

        # Upstream first tries an int64 fast path; only on that path does it keep
        # the input string for printing, so the same conditions are replayed here.
        mantissa = 1
        if fmt is Format.BINARY_SI:
            scale = 0
            if exponent >= 0 and not denom:
                mantissa = 1 << exponent
                # 1Mi has about 6 decimal digits; exponent*3/10 estimates that.
                precision = 15 - len(num) - exponent * 3 // 10 - 1
            else:
                precision = -1
        else:
            scale = exponent
            precision = _MAX_INT64_FACTORS - (len(num) + len(denom))

        if precision >= 0:
            scale -= len(denom)
            if scale >= _NANO:
                shifted = num + denom
                whole = int(shifted)
                product = whole * mantissa
                if product <= MAX_INT64:
                    signed = product if positive else -product
                    quantity = cls(_decimal(signed, scale), fmt)
                    if fmt is Format.BINARY_SI:
                        looks_canonical = exponent % 10 == 0 and whole & 0x07 != 0
                    else:
                        looks_canonical = (
                            scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
                        )
                    return _with_verbatim(quantity, text) if looks_canonical else quantity

        # The general path: exact decimal arithmetic, then upstream's bounds.
        if not any(c in _DIGITS for c in number):
            raise _error(text, ERR_NUMERIC)
        try:
            coefficient = int(num + denom)
        except ValueError:
            # More digits than Python converts to an int (sys.get_int_max_str_digits,
            # 4300 by default): no resource is that precise, so the numeric part is
            # refused in upstream's words rather than crashing the caller.
            raise _error(text, ERR_NUMERIC) from None
        if base == 2:
            coefficient <<= exponent
            exp = -len(denom)
        else:
            exp = exponent - len(denom)
        amount = _decimal(coefficient, exp)
        if coefficient and exp < _NANO:
            # A non-zero request always gets something: round up to the next nano-unit
            # rather than to the nearest, which could give zero.
            amount = amount.quantize(_ONE_NANO, context=_ROUNDING)
        elif coefficient and exp - _NANO <= _MAX_NANO_PADDING:
            # Upstream's rounding also rescales coarser values to nano-units; the value
            # is unchanged but as_approximate_float reads the coefficient, so do the
            # same (only within reason: padding a huge exponent would exhaust memory).
            amount = amount.quantize(_ONE_NANO, context=_EXACT)
        if fmt is Format.BINARY_SI:
            if amount > MAX_INT64:
                amount = Decimal(MAX_INT64)
            if 0 < amount < 1:
                # avoids rounding a fraction of a binary unit when printing
                fmt = Format.DECIMAL_SI
        if not positive:
            # (plain unary minus would round to the default 28-digit context)
            amount = _EXACT.minus(amount)
        return cls(amount, fmt)

    @classmethod
    def from_int(cls, value: int, format: Format = Format.DECIMAL_SI) -> Quantity:
        """The quantity ``value`` (upstream ``NewQuantity``).

        Args:
            value: Whole units (bytes, cores, ...).
            format: Suffix family for printing.

        Returns:
            The quantity.
        """
        return cls(_decimal(_int_arg(value, "value"), 0), format)

    @classmethod
    def from_milli(cls, value: int, format: Format = Format.DECIMAL_SI) -> Quantity:
        """The quantity ``value / 1000`` (upstream ``NewMilliQuantity``).

        A fractional value asked for in :attr:`Format.BINARY_SI` prints with decimal
        suffixes, as upstream does.

        Args:
            value: Thousandths of a unit (millicores, ...).
            format: Suffix family for printing.

        Returns:
            The quantity.
        """
        return cls(_decimal(_int_arg(value, "value"), -3), format)

    @classmethod
    def from_scaled(cls, value: int, scale: int) -> Quantity:
        """The quantity ``value * 10**scale`` in DecimalSI (upstream ``NewScaledQuantity``).

        Args:
            value: The coefficient.
            scale: The power of ten, e.g. :attr:`Scale.NANO`.

        Returns:
            The quantity.
        """
        return cls(_decimal(_int_arg(value, "value"), int(scale)), Format.DECIMAL_SI)

    @classmethod
    def from_json(cls, value: str | int | float | None) -> Quantity:
        """Decode a quantity from a JSON (or YAML) value, as upstream ``UnmarshalJSON``.

        Strings have surrounding whitespace removed, numbers are read through their
        decimal text, and ``None`` (JSON ``null``) is the zero quantity.

        Args:
            value: The decoded JSON value.

        Returns:
            The quantity.

        Raises:
            QuantityError: The value is not a quantity.
            TypeError: The value is neither a string, a number nor None.
        """
        if value is None:
            return cls()
        if isinstance(value, bool):
            raise TypeError("a quantity cannot be a boolean")
        if isinstance(value, int | float):
            # repr gives the shortest text that reads back as the same float; an
            # int too long to print (Python's digit limit) is no quantity either
            try:
                text = repr(value)
            except ValueError:
                raise _error(f"<integer of {int(value).bit_length()} bits>", ERR_NUMERIC) from None
            return cls.parse(text)
        if isinstance(value, str):
            return cls.parse(value.strip())
        raise TypeError(f"a quantity must be a string or a number, not {type(value).__name__}")

    # -- text -------------------------------------------------------------------------

    def __str__(self) -> str:
        """The canonical form, or the parsed text when upstream keeps it verbatim."""
        if self._verbatim is not None:
            return self._verbatim
        return self.canonical()

    def to_json(self) -> str:
        """The JSON string value (upstream ``MarshalJSON``): the same text as ``str()``."""
        return str(self)

    def canonical(self) -> str:
        """The canonical form, computed even for a quantity parsed verbatim.

        Returns:
            The largest suffix of the quantity's family that keeps an integer
            mantissa; binary values that are fractional or smaller than 1024 in
            magnitude use decimal suffixes; a magnitude with no suffix of its family
            is written in exponent form.
        """
        if self.amount.is_zero():
            return "0"
        fmt = self.format
        if fmt is Format.BINARY_SI:
            if -1024 < self.amount < 1024:
                fmt = Format.DECIMAL_SI
            else:
                rounded, exact = _round_away(self.amount, 0)
                if not exact:
                    fmt = Format.DECIMAL_SI
                else:
                    number = abs(int(rounded))
                    power = 0
                    while number >= 1024 and number % 1024 == 0:
                        number //= 1024
                        power += 1
                    binary_suffix = _BINARY_SUFFIX.get(power)
                    if binary_suffix is not None:
                        sign = "-" if rounded < 0 else ""
                        return f"{sign}{number}{binary_suffix}"
                    # beyond Ei: exact decimal exponent form (newest upstream)
                    fmt = Format.DECIMAL_EXPONENT

        sign, digits, exponent = _canonical_decimal(self.amount)
        if fmt is Format.DECIMAL_SI:
            decimal_suffix = _DECIMAL_SUFFIX.get(exponent)
            if decimal_suffix is not None:
                return f"{sign}{digits}{decimal_suffix}"
            # beyond E or finer than n: exponent form rather than dropping the suffix
        return f"{sign}{digits}" if exponent == 0 else f"{sign}{digits}e{exponent}"

    # -- numbers ----------------------------------------------------------------------

    def is_zero(self) -> bool:
        """Whether the quantity is zero."""
        return self.amount.is_zero()

    def sign(self) -> int:
        """-1, 0 or 1 as the quantity is negative, zero or positive."""
        if self.amount.is_zero():
            return 0
        return -1 if self.amount.is_signed() else 1

    def cmp(self, other: Quantity) -> int:
        """-1, 0 or 1 as this quantity is less than, equal to or greater than ``other``."""
        return (self.amount > other.amount) - (self.amount < other.amount)

    def value(self) -> int:
        """The value in whole units, rounded away from zero (``1.2`` -> 2, ``-1.2`` -> -2).

        Unlike upstream's int64 this never wraps; compare with :data:`MAX_INT64` when
        the result must fit an int64.

        Raises:
            OverflowError: The integer would have more than 100000 digits.
        """
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """The value in thousandths, rounded away from zero (``0.1m`` -> 1)."""
        return self.scaled_value(Scale.MILLI)

    def scaled_value(self, scale: int) -> int:
        """The value in units of ``10**scale``, rounded away from zero.

        Args:
            scale: The power of ten, e.g. :attr:`Scale.MILLI`.

        Raises:
            OverflowError: The integer would have more than 100000 digits.
        """
        shifted = self.amount.scaleb(-int(scale), context=_EXACT)
        if not shifted.is_zero() and shifted.adjusted() >= _MAX_INTEGER_DIGITS:
            raise OverflowError(f"quantity {self} is too large to convert to an integer")
        rounded, _ = _round_away(shifted, 0)
        return int(rounded)

    def round_up(self, scale: int) -> tuple[Quantity, bool]:
        """Round to a multiple of ``10**scale``, away from zero (upstream ``RoundUp``).

        Args:
            scale: The power of ten to round to.

        Returns:
            The rounded quantity (same format) and whether no precision was lost.
        """
        rounded, exact = _round_away(self.amount, int(scale))
        if rounded is self.amount:
            return self, True
        return Quantity(rounded, self.format), exact

    def as_decimal(self) -> Decimal:
        """The exact value."""
        return self.amount

    def as_approximate_float(self) -> float:
        """A float near the value, computed as upstream ``AsApproximateFloat64`` does.

        The stored coefficient is converted to a float and multiplied by a float
        power of ten, so the result can differ from the closest float in the last
        bit; beyond the float range the result is an infinity.
        """
        sign, digits, exp = self.amount.as_tuple()
        assert isinstance(exp, int)  # finite by construction
        coefficient = int("".join(map(str, digits))) * (-1 if sign else 1)
        try:
            base = float(coefficient)
        except OverflowError:
            base = float("inf") if coefficient > 0 else float("-inf")
        if exp == 0:
            return base
        return base * _pow10(exp)

    def __add__(self, other: Quantity) -> Quantity:
        """The exact sum; a zero left operand takes the right operand's format."""
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other.format if self.is_zero() else self.format
        return Quantity(_EXACT.add(self.amount, other.amount), fmt)

    def __sub__(self, other: Quantity) -> Quantity:
        """The exact difference; a zero left operand takes the right operand's format."""
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other.format if self.is_zero() else self.format
        return Quantity(_EXACT.subtract(self.amount, other.amount), fmt)

    def __neg__(self) -> Quantity:
        """The negated quantity, same format."""
        return Quantity(_EXACT.minus(self.amount), self.format)

    def __mul__(self, factor: int) -> Quantity:
        """The exact product with an integer (upstream ``Mul``), same format."""
        if isinstance(factor, bool) or not isinstance(factor, int):
            return NotImplemented
        return Quantity(_EXACT.multiply(self.amount, Decimal(factor)), self.format)

    __rmul__ = __mul__

    def __lt__(self, other: Quantity) -> bool:
        """Numeric order, as upstream ``Cmp``."""
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.amount < other.amount

    def __le__(self, other: Quantity) -> bool:
        """Numeric order, as upstream ``Cmp``."""
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.amount <= other.amount

    def __gt__(self, other: Quantity) -> bool:
        """Numeric order, as upstream ``Cmp``."""
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.amount > other.amount

    def __ge__(self, other: Quantity) -> bool:
        """Numeric order, as upstream ``Cmp``."""
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.amount >= other.amount


# -- helpers ----------------------------------------------------------------------------


def _error(text: str, reason: str) -> QuantityError:
    return QuantityError(f"{_quote(text)} is not a quantity: {reason}")


def _quote(text: str) -> str:
    """Double-quote like Go's %q, so control characters in the input stay visible."""
    return json.dumps(text, ensure_ascii=False)


def _with_verbatim(quantity: Quantity, text: str) -> Quantity:
    # The only write to a frozen instance: done once, before anyone else sees it.
    object.__setattr__(quantity, "_verbatim", text)
    return quantity


def _int_arg(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return value


def _decimal(coefficient: int, exponent: int) -> Decimal:
    """``coefficient * 10**exponent`` built directly, with no context rounding."""
    sign = 1 if coefficient < 0 else 0
    digits = tuple(int(c) for c in str(abs(coefficient)))
    return Decimal((sign, digits, exponent))


def _round_away(value: Decimal, scale: int) -> tuple[Decimal, bool]:
    """Round to a multiple of ``10**scale`` away from zero; say if that was exact.

    A value already at that scale or coarser is returned as is (no zero padding,
    which for huge exponents would be enormous).
    """
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    if exponent >= scale:
        return value, True
    rounded = value.quantize(_decimal(1, scale), context=_ROUNDING)
    return rounded, rounded == value


def _canonical_decimal(value: Decimal) -> tuple[str, str, int]:
    """Sign, mantissa digits and an exponent that is a multiple of 3, no precision lost.

    Trailing zeros move into the exponent, then the exponent steps down to the
    multiple of three at or below it (``1.1e5`` -> ``"110"``, 3).
    """
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    stripped = text.rstrip("0") or "0"
    exponent += len(text) - len(stripped)
    down = exponent % 3
    return ("-" if sign else ""), stripped + "0" * down, exponent - down


def _pow10(exponent: int) -> float:
    """10.0**exponent correctly rounded, 0 below and infinity above the float range."""
    if exponent > 308:
        return float("inf")
    if exponent < -323:
        return 0.0
    return float(f"1e{exponent}")


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """Split a quantity string the way upstream's fast scanner does.

    Returns:
        (positive, number text with sign, integer digits without leading zeros or
        "0", fraction digits, suffix).

    Raises:
        QuantityError: The shape is wrong (ERR_FORMAT_WRONG).
    """
    positive = True
    pos = 0
    end = len(text)
    if text[0] == "-":
        positive = False
        pos = 1
    elif text[0] == "+":
        pos = 1

    # leading zeros; a string of nothing but zeros is zero
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""

    i = pos
    while i < end and text[i] in _DIGITS:
        i += 1
    if i >= end:
        return positive, text, text[pos:], "", ""
    num = text[pos:i] or "0"
    pos = i

    denom = ""
    if text[pos] == ".":
        pos += 1
        i = pos
        while i < end and text[i] in _DIGITS:
            i += 1
        if i >= end:
            return positive, text, num, text[pos:], ""
        denom = text[pos:i]
        pos = i
    number = text[:pos]

    # suffix: letters, then an optional sign and digits (for exponents)
    suffix_start = pos
    i = pos
    while i < end and text[i] in _SUFFIX_CHARS:
        i += 1
    if i >= end:
        return positive, number, num, denom, text[suffix_start:]
    pos = i
    if text[pos] in "+-":
        pos += 1
    i = pos
    while i < end and text[i] in _DIGITS:
        i += 1
    if i >= end:
        return positive, number, num, denom, text[suffix_start:]
    raise _error(text, ERR_FORMAT_WRONG)


def _interpret(suffix: str) -> tuple[int, int, Format] | None:
    """(base, exponent, format) of a suffix, or None if it is not one."""
    known = _SUFFIXES.get(suffix)
    if known is not None:
        return known
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent = _parse_go_int(suffix[1:])
        # Newest upstream rejects exponents that do not fit its int32 scale instead
        # of truncating them to an unrelated value.
        if exponent is None or not _INT32_MIN <= exponent <= _INT32_MAX:
            return None
        return 10, exponent, Format.DECIMAL_EXPONENT
    return None


def _parse_go_int(text: str) -> int | None:
    """An optionally signed run of ASCII digits, as Go's strconv.ParseInt(text, 10, 64)."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or any(c not in _DIGITS for c in digits):
        return None
    return int(text)
