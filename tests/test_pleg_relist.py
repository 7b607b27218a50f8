"""The pure relist diff: the kubelet's event rules, as tables."""

from __future__ import annotations

import pytest

from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerInfo,
    ContainerMetadata,
    ContainerState,
    PodSandbox,
    PodSandboxMetadata,
    PodSandboxState,
)
from kubelet_kit.container.pods import RuntimePod
from kubelet_kit.pleg import PodLifecycleEvent, PodLifecycleEventType
from kubelet_kit.pleg.relist import (
    PlegContainerState,
    compute_pod_events,
    container_states,
    diff_pods,
    generate_events,
    sendable,
)

R = PlegContainerState.RUNNING
X = PlegContainerState.EXITED
U = PlegContainerState.UNKNOWN
N = PlegContainerState.NON_EXISTENT
STARTED = PodLifecycleEventType.CONTAINER_STARTED
DIED = PodLifecycleEventType.CONTAINER_DIED
REMOVED = PodLifecycleEventType.CONTAINER_REMOVED
CHANGED = PodLifecycleEventType.CONTAINER_CHANGED


def test_event_type_strings_are_the_kubelets() -> None:
    assert [t.value for t in PodLifecycleEventType] == [
        "ContainerStarted",
        "ContainerDied",
        "ContainerRemoved",
        "PodSync",
        "ContainerChanged",
    ]


# Every (old, new) pair of the kubelet's generateEvents.
TRANSITIONS = [
    (R, R, []),
    (X, X, []),
    (U, U, []),
    (N, N, []),
    (N, R, [STARTED]),
    (X, R, [STARTED]),
    (U, R, [STARTED]),
    (N, X, [DIED]),
    (R, X, [DIED]),
    (U, X, [DIED]),
    (N, U, [CHANGED]),
    (R, U, [CHANGED]),
    (X, U, [CHANGED]),
    (X, N, [REMOVED]),
    (R, N, [DIED, REMOVED]),
    (U, N, [DIED, REMOVED]),
]


@pytest.mark.parametrize(("old", "new", "types"), TRANSITIONS)
def test_generate_events(
    old: PlegContainerState, new: PlegContainerState, types: list[PodLifecycleEventType]
) -> None:
    events = generate_events("pod", "c1", old, new)
    assert [e.type for e in events] == types
    assert all(e.pod_uid == "pod" and e.data == "c1" for e in events)


def test_compute_pod_events_no_change_is_empty() -> None:
    states = {"c1": R, "c2": X}
    assert compute_pod_events("p", states, dict(states)) == []


def test_sendable_drops_container_changed_only() -> None:
    events = compute_pod_events("p", {}, {"c1": R, "c2": U, "c3": X})
    assert {e.type for e in events} == {STARTED, CHANGED, DIED}
    assert [(e.type, e.data) for e in sendable(events)] == [(STARTED, "c1"), (DIED, "c3")]


def ev(uid: str, t: PodLifecycleEventType, cid: str) -> PodLifecycleEvent:
    return PodLifecycleEvent(uid, t, cid)


# Ported from the kubelet's TestRelisting / TestDetectingContainerDeaths, as
# (previous relist, this relist, sendable events) tables of container states.
RELIST_TABLE = [
    pytest.param(
        {},
        {"1234": {"c1": X, "c2": R, "c3": U}, "4567": {"c1": X}},
        [ev("1234", STARTED, "c2"), ev("4567", DIED, "c1"), ev("1234", DIED, "c1")],
        id="first-relist-reports-running-and-exited",
    ),
    pytest.param(
        {"1234": {"c1": X, "c2": R, "c3": U}, "4567": {"c1": X}},
        {"1234": {"c1": X, "c2": R, "c3": U}, "4567": {"c1": X}},
        [],
        id="no-change",
    ),
    pytest.param(
        {"1234": {"c1": X, "c2": R, "c3": U}, "4567": {"c1": X}},
        {"1234": {"c2": X, "c3": R}, "4567": {"c4": R}},
        [
            ev("1234", REMOVED, "c1"),
            ev("1234", DIED, "c2"),
            ev("1234", STARTED, "c3"),
            ev("4567", REMOVED, "c1"),
            ev("4567", STARTED, "c4"),
        ],
        id="transitions",
    ),
    pytest.param(
        {"1234": {"c1": R, "c2": R, "c3": X}},
        {"1234": {"c1": R}},
        [ev("1234", DIED, "c2"), ev("1234", REMOVED, "c2"), ev("1234", REMOVED, "c3")],
        id="missing-containers",
    ),
    pytest.param(
        {"1234": {"c2": R}},
        {},
        [ev("1234", DIED, "c2"), ev("1234", REMOVED, "c2")],
        id="missing-pod",
    ),
    pytest.param(
        {"p": {"a1": X}},
        {"p": {"a1": X, "a2": R}},
        [ev("p", STARTED, "a2")],
        id="restart-between-relists",
    ),
    pytest.param(
        {"p": {"a1": R}},
        {"p": {"a2": R}},
        [ev("p", DIED, "a1"), ev("p", REMOVED, "a1"), ev("p", STARTED, "a2")],
        id="restart-and-gc-between-relists",
    ),
]


def key(e: PodLifecycleEvent) -> tuple[str, str, str]:
    return (e.pod_uid, e.data, e.type.value)


@pytest.mark.parametrize(("old", "new", "expected"), RELIST_TABLE)
def test_diff_pods_table(
    old: dict[str, dict[str, PlegContainerState]],
    new: dict[str, dict[str, PlegContainerState]],
    expected: list[PodLifecycleEvent],
) -> None:
    by_pod = diff_pods(old, new)
    got = [e for events in by_pod.values() for e in sendable(events)]
    assert sorted(got, key=key) == sorted(expected, key=key)
    # Only pods with events are returned.
    assert all(by_pod.values())


def test_events_of_one_pod_keep_died_before_removed() -> None:
    events = compute_pod_events("p", {"c1": R}, {})
    assert [e.type for e in events] == [DIED, REMOVED]


def _sandbox(sid: str, state: PodSandboxState) -> PodSandbox:
    return PodSandbox(
        id=sid,
        metadata=PodSandboxMetadata("n", "ns", "u"),
        state=state,
        created_at=1.0,
        labels={kl.POD_UID: "u"},
    )


def _container(cid: str, state: ContainerState) -> ContainerInfo:
    return ContainerInfo(
        id=cid,
        pod_sandbox_id="s",
        metadata=ContainerMetadata(cid),
        image="i",
        image_ref="i",
        state=state,
        created_at=1.0,
        labels={kl.POD_UID: "u"},
    )


def test_container_states_maps_runtime_states_and_counts_sandboxes() -> None:
    pod = RuntimePod(
        "u",
        "n",
        "ns",
        (_sandbox("s1", PodSandboxState.READY), _sandbox("s0", PodSandboxState.NOTREADY)),
        (
            _container("run", ContainerState.RUNNING),
            _container("exit", ContainerState.EXITED),
            _container("new", ContainerState.CREATED),
            _container("what", ContainerState.UNKNOWN),
        ),
    )
    assert container_states(pod) == {
        "run": R,
        "exit": X,
        "new": U,  # the kubelet does not act on created containers
        "what": U,
        "s1": R,
        "s0": X,
    }
    assert list(container_states(pod))[-2:] == ["s1", "s0"]  # containers first
    assert container_states(None) == {}


def test_states_by_pod_equals_grouping_then_container_states() -> None:
    from kubelet_kit.container.pods import group_pods
    from kubelet_kit.pleg.relist import states_by_pod

    sandboxes = [
        _sandbox("s1", PodSandboxState.READY),
        _sandbox("s0", PodSandboxState.NOTREADY),
        PodSandbox(
            id="s9",
            metadata=PodSandboxMetadata("n", "ns", "v"),
            state=PodSandboxState.READY,
            created_at=1.0,
            labels={kl.POD_UID: "v"},
        ),
        PodSandbox(  # not the kubelet's: ignored
            id="x",
            metadata=PodSandboxMetadata("n", "ns", ""),
            state=PodSandboxState.READY,
            created_at=1.0,
        ),
    ]
    containers = [_container(cid, st) for cid, st in zip("abcd", ContainerState, strict=True)]
    expected = {p.uid: container_states(p) for p in group_pods(sandboxes, containers)}
    assert states_by_pod(sandboxes, containers) == expected
    assert set(expected) == {"u", "v"}
