"""Go duration strings, checked against values Go itself prints and parses."""

from __future__ import annotations

import pytest

from kubelet_kit.api.duration import format_duration, parse_duration


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (10, "10s"),
        (80, "1m20s"),
        (300, "5m0s"),
        (3600, "1h0m0s"),
        (3725.5, "1h2m5.5s"),
        (0.5, "500ms"),
        (0.0015, "1.5ms"),
        (1.5e-6, "1.5µs"),
        (1e-9, "1ns"),
        (-90, "-1m30s"),
        (160, "2m40s"),
    ],
)
def test_format_matches_go(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("1m0s", 60.0),
        ("20s", 20.0),
        ("1.5h", 5400.0),
        ("300ms", 0.3),
        ("-1m30s", -90.0),
        ("+5s", 5.0),
        ("1h2m3s4ms", 3723.004),
        ("10us", 1e-5),
        (".5s", 0.5),
    ],
)
def test_parse_matches_go(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "1d", "s", "1m x", "--1s", "1.s.5"])
def test_invalid_durations_are_refused_like_go(text: str) -> None:
    with pytest.raises(ValueError, match="time: invalid duration"):
        parse_duration(text)


# Go's time.Duration.String table (time_test.go durationTests).
@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (1e-9, "1ns"),
        (1.1e-6, "1.1µs"),
        (2.2e-3, "2.2ms"),
        (3.3, "3.3s"),
        (4 * 60 + 5, "4m5s"),
        (4 * 60 + 5.001, "4m5.001s"),
        (5 * 3600 + 6 * 60 + 7.001, "5h6m7.001s"),
        (10, "10s"),
        (80, "1m20s"),
        (300, "5m0s"),
        (3600, "1h0m0s"),
        (-1.5, "-1.5s"),
    ],
)
def test_format_matches_gos_own_table(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
