"""Go's duration strings (``1m30s``), as KubeletConfiguration and kubelet messages use.

``parse_duration`` reads what Go's ``time.ParseDuration`` reads; ``format_duration``
writes what Go's ``time.Duration.String`` writes (``10s``, ``1m20s``, ``5m0s``,
``1h0m0s``, ``500ms``), so messages such as ``back-off 1m20s restarting failed
container`` read exactly as the kubelet's.
"""

from __future__ import annotations

import re
from decimal import Decimal

__all__ = ["format_duration", "parse_duration"]

_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string such as ``"1m30s"``, ``"-1.5h"``, ``"300ms"``.

    Raises:
        ValueError: ``time: invalid duration "<text>"`` for anything else (a bare
            number other than ``0`` needs a unit, as in Go).
    """
    s = text.strip()
    sign = 1
    if s[:1] in "+-" and s:
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise ValueError(f'time: invalid duration "{text}"')
    pos = 0
    total = Decimal(0)
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None:
            raise ValueError(f'time: invalid duration "{text}"')
        total += Decimal(m.group(1)) * _UNITS_NS[m.group(2)]
        pos = m.end()
    return float(sign * total / 1_000_000_000)


def _fraction(value: int, unit: int) -> str:
    whole, rest = divmod(value, unit)
    if not rest:
        return str(whole)
    digits = str(rest).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


def format_duration(seconds: float) -> str:
    """Go's ``Duration.String()`` of ``seconds`` (nanosecond precision)."""
    ns = round(Decimal(repr(seconds)) * 1_000_000_000)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{_fraction(ns, 1_000)}µs"
    if ns < 1_000_000_000:
        return f"{sign}{_fraction(ns, 1_000_000)}ms"
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    secs = _fraction(rest, 1_000_000_000) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}"
    if minutes:
        return f"{sign}{minutes}m{secs}"
    return f"{sign}{secs}"
