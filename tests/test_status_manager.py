"""StatusManager: normalisation, no-op updates, terminate_pod, subscribers."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator

import attrs

from kubelet_kit.api import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    ObjectMeta,
    Pod,
    PodCondition,
    PodStatus,
)
from kubelet_kit.status.manager import StatusManager, StatusSubscription
from kubelet_kit.testing.clock import FakeClock

T0 = 1_700_000_000.0


def _pod(uid: str = "u1", **annotations: str) -> Pod:
    return Pod(metadata=ObjectMeta(name=f"pod-{uid}", uid=uid, annotations=annotations))


def _at(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


def _running(name: str) -> ContainerStatus:
    return ContainerStatus(name=name, state=ContainerState(running=ContainerStateRunning()))


def _clock() -> FakeClock:
    return FakeClock(start=T0)


def test_set_and_get_and_remove() -> None:
    manager = StatusManager(_clock())
    pod = _pod()
    assert manager.get_pod_status("u1") is None
    assert manager.set_pod_status(pod, PodStatus(phase="Pending"))
    stored = manager.get_pod_status("u1")
    assert stored is not None and stored.phase == "Pending"
    assert stored.start_time == _at(T0)
    assert dict(manager.all_statuses()) == {"u1": stored}
    manager.remove("u1")
    manager.remove("u1")
    assert manager.get_pod_status("u1") is None and not manager.all_statuses()


def test_no_op_update_is_dropped() -> None:
    clock = _clock()
    manager = StatusManager(clock)
    pod = _pod()
    cond = PodCondition(type="Ready", status="False")
    assert manager.set_pod_status(pod, PodStatus(phase="Running", conditions=(cond,)))
    clock.advance(30)
    # Same content: the stored transition time and start time make it equal.
    assert not manager.set_pod_status(pod, PodStatus(phase="Running", conditions=(cond,)))


def test_terminal_phase_is_sticky() -> None:
    manager = StatusManager(_clock())
    pod = _pod()
    manager.set_pod_status(pod, PodStatus(phase="Succeeded", reason="Done", message="m"))
    manager.set_pod_status(pod, PodStatus(phase="Running"))
    stored = manager.get_pod_status("u1")
    assert stored is not None
    assert (stored.phase, stored.reason, stored.message) == ("Succeeded", "Done", "m")
    # A pod new to the manager but terminal in the API stays terminal too.
    api_failed = attrs.evolve(_pod("u2"), status=PodStatus(phase="Failed"))
    manager.set_pod_status(api_failed, PodStatus(phase="Pending"))
    assert manager.get_pod_status("u2") == attrs.evolve(
        PodStatus(phase="Failed"), start_time=_at(T0)
    )


def test_transition_time_changes_only_with_status() -> None:
    clock = _clock()
    manager = StatusManager(clock)
    pod = _pod()
    manager.set_pod_status(pod, PodStatus(conditions=(PodCondition(type="Ready", status="False"),)))
    clock.advance(10)
    manager.set_pod_status(
        pod, PodStatus(phase="Running", conditions=(PodCondition(type="Ready", status="False"),))
    )
    stored = manager.get_pod_status("u1")
    assert stored is not None and stored.conditions[0].last_transition_time == _at(T0)
    clock.advance(10)
    manager.set_pod_status(
        pod, PodStatus(phase="Running", conditions=(PodCondition(type="Ready", status="True"),))
    )
    stored = manager.get_pod_status("u1")
    assert stored is not None and stored.conditions[0].last_transition_time == _at(T0 + 20)


def test_a_status_already_normal_is_stored_as_it_is() -> None:
    # Timed conditions and a start time on a pod's first status, then the
    # stored status handed back unchanged: nothing is copied, nothing changes.
    manager = StatusManager(_clock())
    pod = _pod()
    ready = PodCondition(type="Ready", status="True", last_transition_time=_at(T0 - 5))
    status = PodStatus(phase="Running", conditions=(ready,), start_time=_at(T0 - 9))
    assert manager.set_pod_status(pod, status)
    assert manager.get_pod_status("u1") is status
    assert not manager.set_pod_status(pod, status)
    assert manager.get_pod_status("u1") is status


def test_a_repeated_condition_type_takes_the_later_time() -> None:
    # Two conditions of one type: the one found before is the later one, whose
    # time the earlier takes when their statuses agree (even when the status
    # handed in is the stored one itself).
    manager = StatusManager(_clock())
    pod = _pod()
    first = PodCondition(type="Ready", status="True", last_transition_time=_at(T0 - 5))
    second = attrs.evolve(first, last_transition_time=_at(T0 - 2))
    status = PodStatus(phase="Running", conditions=(first, second), start_time=_at(T0))
    manager.set_pod_status(pod, status)
    stored = manager.get_pod_status("u1")
    assert stored is status
    assert manager.set_pod_status(pod, stored)
    again = manager.get_pod_status("u1")
    assert again is not None
    assert [c.last_transition_time for c in again.conditions] == [_at(T0 - 2)] * 2


def test_terminate_pod_marks_failed_and_containers_unknown() -> None:
    manager = StatusManager(_clock())
    pod = _pod()
    done = ContainerStatus(
        name="done",
        state=ContainerState(terminated=ContainerStateTerminated(exit_code=0, reason="Completed")),
    )
    never = ContainerStatus(name="later", state=ContainerState(waiting=ContainerStateWaiting()))
    manager.set_pod_status(
        pod,
        PodStatus(
            phase="Running",
            init_container_statuses=(done, _running("sidecar"), never),
            container_statuses=(_running("app"),),
        ),
    )
    msg = "The node was low on resource: memory. "
    status = manager.terminate_pod(pod, "Evicted", msg)
    assert (status.phase, status.reason, status.message) == ("Failed", "Evicted", msg)
    app = status.container_statuses[0].state.terminated
    assert app == ContainerStateTerminated(
        reason="ContainerStatusUnknown",
        exit_code=137,
        message="The container could not be located when the pod was terminated",
    )
    inits = status.init_container_statuses
    assert inits[0] == done
    assert inits[1].state.terminated is not None and inits[1].state.terminated.exit_code == 137
    assert inits[2] == never  # never started: stays waiting
    assert manager.get_pod_status("u1") == status


def test_terminate_keeps_terminal_phase_and_static_pods() -> None:
    manager = StatusManager(_clock())
    pod = _pod()
    manager.set_pod_status(pod, PodStatus(phase="Succeeded", reason="R"))
    assert manager.terminate_pod(pod, "Evicted", "x").reason == "R"
    static = _pod("s1", **{"kubernetes.io/config.source": "file"})
    manager.set_pod_status(static, PodStatus(phase="Running"))
    assert manager.terminate_pod(static, "Killed", "").phase == "Running"


async def test_subscribers_get_latest_and_lose_intermediate() -> None:
    manager = StatusManager(_clock())
    a, b = _pod("a"), _pod("b")
    manager.set_pod_status(a, PodStatus(phase="Pending"))
    subscription = manager.subscribe()
    fresh = manager.subscribe(replay=False)
    manager.set_pod_status(b, PodStatus(phase="Pending"))
    manager.set_pod_status(a, PodStatus(phase="Running"))
    manager.set_pod_status(b, PodStatus(phase="Running"))
    manager.set_pod_status(b, PodStatus(phase="Running"))  # no-op: not delivered
    assert subscription.pending == 2
    got = [(p.uid, s.phase) async for p, s in _take(subscription, 2)]
    # Pod a's Pending was replaced by Running; b's latest comes last.
    assert got == [("a", "Running"), ("b", "Running")]
    got = [(p.uid, s.phase) async for p, s in _take(fresh, 2)]
    assert got == [("a", "Running"), ("b", "Running")]


async def test_subscription_waits_then_ends_on_close() -> None:
    manager = StatusManager(_clock())
    subscription = manager.subscribe()
    received: list[str] = []

    async def read() -> None:
        async for pod, _ in subscription:
            received.append(pod.uid)

    task = asyncio.create_task(read())
    await asyncio.sleep(0)
    manager.set_pod_status(_pod("x"), PodStatus(phase="Pending"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert received == ["x"]
    manager.close()
    await asyncio.wait_for(task, 1)
    assert task.done()
    async with manager.subscribe() as late:  # after close: ends at once
        assert [item async for item in late] == []


async def _take(subscription: StatusSubscription, n: int) -> AsyncIterator[tuple[Pod, PodStatus]]:
    for _ in range(n):
        yield await subscription.__anext__()


def test_status_package_exports_and_imports_no_other_subsystem() -> None:
    import subprocess
    import sys

    import kubelet_kit.status as status_pkg

    for name in status_pkg.__all__:
        assert hasattr(status_pkg, name), name
    code = (
        "import sys, kubelet_kit.status; "
        "bad = [m for m in sys.modules if m.split('.')[:2] in ("
        "['kubelet_kit','pleg'], ['kubelet_kit','cri'], ['kubelet_kit','prober'], "
        "['kubelet_kit','cm'], ['kubelet_kit','volume'], ['kubelet_kit','eviction'], "
        "['kubelet_kit','config'], ['kubelet_kit','testing'])]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _terminated(name: str, code: int) -> ContainerStatus:
    return ContainerStatus(
        name=name, state=ContainerState(terminated=ContainerStateTerminated(exit_code=code))
    )


def _waiting(name: str) -> ContainerStatus:
    return ContainerStatus(name=name, state=ContainerState(waiting=ContainerStateWaiting()))


def _policy(pod: Pod, policy: str) -> Pod:
    return attrs.evolve(pod, spec=attrs.evolve(pod.spec, restart_policy=policy))


def test_terminated_containers_cannot_come_back_unless_restartable() -> None:
    manager = StatusManager(_clock())
    never = _policy(_pod("n"), "Never")
    manager.set_pod_status(never, PodStatus(container_statuses=(_terminated("app", 1),)))
    assert not manager.set_pod_status(never, PodStatus(container_statuses=(_running("app"),)))
    stored = manager.get_pod_status("n")
    assert stored is not None and stored.container_statuses[0].state.terminated is not None

    on_failure = _policy(_pod("f"), "OnFailure")
    manager.set_pod_status(on_failure, PodStatus(container_statuses=(_terminated("app", 1),)))
    assert manager.set_pod_status(on_failure, PodStatus(container_statuses=(_waiting("app"),)))
    manager.set_pod_status(on_failure, PodStatus(container_statuses=(_terminated("app", 0),)))
    assert not manager.set_pod_status(on_failure, PodStatus(container_statuses=(_running("app"),)))

    always = _policy(_pod("a"), "Always")
    manager.set_pod_status(always, PodStatus(container_statuses=(_terminated("app", 0),)))
    assert manager.set_pod_status(always, PodStatus(container_statuses=(_running("app"),)))


def _with_message(message: str) -> PodStatus:
    state = ContainerState(terminated=ContainerStateTerminated(exit_code=1, message=message))
    return PodStatus(
        start_time=_at(T0), container_statuses=(ContainerStatus(name="app", state=state),)
    )


def _stored_message(manager: StatusManager, pod: Pod) -> str:
    stored = manager.get_pod_status(pod.uid)
    assert stored is not None
    terminated = stored.container_statuses[0].state.terminated
    assert terminated is not None
    return terminated.message


def test_termination_messages_are_measured_in_bytes() -> None:
    # A pod of one container: its share is the whole 12 KiB.
    pod = attrs.evolve(_pod(), spec=attrs.evolve(_pod().spec, containers=(Container(name="app"),)))
    share = 12 * 1024
    cases = [
        ("x" * share, "x" * share),  # ASCII: as many bytes as characters
        ("x" * (share + 1), "x" * share),
        ("é" * (share // 2), "é" * (share // 2)),  # two bytes each: exactly the share
        ("é" * (share // 2 + 1), "é" * (share // 2)),
        ("x" + "é" * (share // 2), "x" + "é" * (share // 2 - 1) + "\ufffd"),  # cut mid-character
    ]
    for message, kept in cases:
        manager = StatusManager(_clock())
        status = _with_message(message)
        manager.set_pod_status(pod, status)
        assert _stored_message(manager, pod) == kept
        if kept == message:
            assert manager.get_pod_status(pod.uid) is status  # stored as given


def test_a_message_with_a_lone_surrogate_is_stored_not_refused() -> None:
    # A custom Runtime may hand over a str no UTF-8 encoder takes: counted as the
    # bytes it stands for, cut like any other, and what is cut inside it replaced.
    pod = attrs.evolve(_pod(), spec=attrs.evolve(_pod().spec, containers=(Container(name="app"),)))
    share = 12 * 1024
    manager = StatusManager(_clock())
    short = _with_message("bad \udc80 byte")
    assert manager.set_pod_status(pod, short)
    assert _stored_message(manager, pod) == "bad \udc80 byte"
    manager = StatusManager(_clock())
    manager.set_pod_status(pod, _with_message("x" * (share - 1) + "\udc80"))
    assert _stored_message(manager, pod) == "x" * (share - 1) + "\ufffd"
