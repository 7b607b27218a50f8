"""Shorthands the Quantity tests share: the formats, int64's bounds and upstream's
decQuantity helper."""

from __future__ import annotations

from decimal import Decimal

from kubelet_kit.api.quantity import MAX_INT64, Format, Quantity

DSI = Format.DECIMAL_SI
BSI = Format.BINARY_SI
DEX = Format.DECIMAL_EXPONENT
MIN_INT64 = -MAX_INT64 - 1


def dec(coefficient: int, exponent: int) -> Decimal:
    """coefficient * 10**exponent, keeping that coefficient and exponent."""
    return Decimal(f"{coefficient}e{exponent}")


def dq(coefficient: int, exponent: int, fmt: Format) -> Quantity:
    """Upstream's decQuantity/intQuantity test helper."""
    return Quantity(dec(coefficient, exponent), fmt)


P = Quantity.parse
