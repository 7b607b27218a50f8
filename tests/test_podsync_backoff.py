"""Back-off: upstream flowcontrol tables, the kubelet's crash-loop constants, Go formatting."""

from __future__ import annotations

import pytest

from kubelet_kit.api import Container, ObjectMeta, Pod
from kubelet_kit.podsync.backoff import (
    CRASH_BACKOFF_CAP,
    CRASH_BACKOFF_INITIAL,
    CRASH_BACKOFF_RESET,
    Backoff,
    format_pod,
    go_list,
    go_quote,
    stable_key,
)
from kubelet_kit.testing import FakeClock

# Upstream client-go flowcontrol TestIsInBackOffSinceUpdate: step 1 s, max 10 s,
# (tick, in back-off, window) where Next is called whenever not in back-off.
SINCE_UPDATE_TABLE = [
    (0, False, 0),
    (1, False, 1),
    (2, True, 2),
    (3, False, 2),
    (4, True, 4),
    (5, True, 4),
    (6, True, 4),
    (7, False, 4),
    (8, True, 8),
    (9, True, 8),
    (10, True, 8),
    (11, True, 8),
    (12, True, 8),
    (13, True, 8),
    (14, True, 8),
    (15, False, 8),
    (16, True, 10),
    (17, True, 10),
    (18, True, 10),
    (19, True, 10),
    (20, True, 10),
    (21, True, 10),
    (22, True, 10),
    (23, True, 10),
    (24, True, 10),
    (25, False, 10),
    (26, True, 10),
    (27, True, 10),
    (28, True, 10),
    (29, True, 10),
    (30, True, 10),
    (31, True, 10),
    (32, True, 10),
    (33, True, 10),
    (34, True, 10),
    (35, False, 10),
    (56, False, 0),
    (57, False, 1),
]


def test_is_in_backoff_since_update_follows_upstream_table() -> None:
    clock = FakeClock()
    start = clock.now()
    backoff = Backoff(clock, initial=1.0, cap=10.0, reset_after=None)
    for tick, in_backoff, window in SINCE_UPDATE_TABLE:
        clock.set_wall_time(start + tick)
        assert backoff.is_in_backoff_since_update("id", clock.now()) is in_backoff, tick
        if in_backoff:
            assert backoff.get("id") == window, tick
        else:
            backoff.next("id", clock.now())


def test_slow_backoff_doubles_to_the_cap() -> None:
    # Upstream TestSlowBackoff: step 10 s, max 120 s.
    clock = FakeClock()
    backoff = Backoff(clock, initial=10.0, cap=120.0)
    windows = []
    for _ in range(6):
        backoff.next("k", clock.now())
        windows.append(backoff.get("k"))
        clock.advance(1)
    assert windows == [10, 20, 40, 80, 120, 120]


def test_unknown_key_is_not_in_backoff_and_has_no_window() -> None:
    backoff = Backoff(FakeClock())
    assert backoff.get("nope") == 0.0
    assert not backoff.is_in_backoff_since("nope", 0.0)
    assert not backoff.is_in_backoff_since_update("nope", 0.0)


def test_crash_loop_defaults_are_the_kubelets() -> None:
    backoff = Backoff(FakeClock())
    assert (backoff.initial, backoff.cap, backoff.reset_after) == (10.0, 300.0, 600.0)
    assert (CRASH_BACKOFF_INITIAL, CRASH_BACKOFF_CAP, CRASH_BACKOFF_RESET) == (10, 300, 600)


def test_crash_loop_window_is_measured_from_the_exit() -> None:
    clock = FakeClock()
    backoff = Backoff(clock)
    finished = clock.now()
    backoff.next("c", finished)  # restarted at once after the first exit
    clock.advance(3)
    second_exit = clock.now()
    clock.advance(9.9)
    assert backoff.is_in_backoff_since("c", second_exit)
    clock.advance(0.1)
    assert not backoff.is_in_backoff_since("c", second_exit)


def test_crash_loop_resets_after_running_ten_minutes() -> None:
    clock = FakeClock()
    backoff = Backoff(clock)
    for _ in range(6):
        backoff.next("c", clock.now())
    assert backoff.get("c") == 300
    clock.advance(600)
    # It ran exactly 600 s since the last update: not yet forgiven.
    assert backoff.is_in_backoff_since("c", clock.now())
    clock.advance(1)
    exited = clock.now()
    assert not backoff.is_in_backoff_since("c", exited)
    assert backoff.next("c", exited) == 10


def test_reset_after_is_strictly_greater() -> None:
    clock = FakeClock()
    backoff = Backoff(clock)
    backoff.next("c", clock.now())
    backoff.next("c", clock.now())
    clock.advance(600)
    assert backoff.next("c", clock.now()) == 40  # 600 s is not more than 600 s


def test_gc_drops_entries_older_than_twice_the_cap() -> None:
    clock = FakeClock()
    backoff = Backoff(clock, initial=1.0, cap=10.0)
    backoff.next("old", clock.now())
    clock.advance(15)
    backoff.next("new", clock.now())
    clock.advance(6)
    assert backoff.gc() == 1
    assert "old" not in backoff and "new" in backoff


def test_forget_prefix_and_reset() -> None:
    backoff = Backoff(FakeClock())
    for key in ("p_ns_u1_a_1", "p_ns_u1_b_2", "q_ns_u2_a_1"):
        backoff.next(key, 0.0)
    assert backoff.forget_prefix("p_ns_u1_") == 2
    assert list(backoff.keys()) == ["q_ns_u2_a_1"]
    backoff.reset("q_ns_u2_a_1")
    backoff.reset("q_ns_u2_a_1")
    assert len(backoff) == 0


def test_invalid_configuration_is_rejected() -> None:
    with pytest.raises(ValueError, match="positive"):
        Backoff(FakeClock(), initial=0)


def test_stable_key_and_pod_format_are_the_kubelets() -> None:
    pod = Pod(metadata=ObjectMeta(name="web", namespace="prod", uid="u-1"))
    container = Container(name="app", image="nginx:1.27")
    assert stable_key(pod, container, "1a2b") == "web_prod_u-1_app_1a2b"
    assert format_pod(pod) == "web_prod(u-1)"


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("nginx", '"nginx"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("a\nb\tc\\", '"a\\nb\\tc\\\\"'),
        ("\x00\x7f", '"\\x00\\x7f"'),
        ("héllo", '"héllo"'),
    ],
)
def test_go_quote(text: str, quoted: str) -> None:
    assert go_quote(text) == quoted


def test_go_list() -> None:
    assert go_list(["sh", "-c", "exit 1"]) == "[sh -c exit 1]"
    assert go_list([]) == "[]"


@pytest.mark.parametrize(
    "module",
    [
        "kubelet_kit.podsync",
        "kubelet_kit.podsync.actions",
        "kubelet_kit.podsync.backoff",
        "kubelet_kit.podsync.hooks",
        "kubelet_kit.podsync.images",
        "kubelet_kit.podsync.syncer",
    ],
)
def test_all_is_honest(module: str) -> None:
    import importlib

    mod = importlib.import_module(module)
    missing = [name for name in mod.__all__ if not hasattr(mod, name)]
    assert missing == []
    assert len(set(mod.__all__)) == len(mod.__all__)
