"""Statuses made cheaply are the same statuses: an unchanged pod gets its previous
status back, parts are reused only when equal and written alike, copies keep every
field, and the QoS class follows each spec without keeping pods alive."""

from __future__ import annotations

import copy
import datetime as dt
import gc
import weakref
from typing import Any

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
    PodIP,
    PodSpec,
    PodStatus,
    Quantity,
    ResourceRequirements,
)
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerMetadata,
    PodSandboxMetadata,
    PodSandboxState,
    PodSandboxStatus,
)
from kubelet_kit.container.interfaces import ContainerState as RS
from kubelet_kit.container.interfaces import ContainerStatus as RuntimeStatus
from kubelet_kit.container.pods import PodRuntimeStatus
from kubelet_kit.status import StatusManager, generate_pod_status, merge_transition_times
from kubelet_kit.testing.clock import FakeClock

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(minutes=5)
PLUS_ONE = dt.timezone(dt.timedelta(hours=1))


def _pod(*, init: tuple[Container, ...] = (), uid: str = "u1", **spec: Any) -> Pod:
    containers = spec.pop(
        "containers", (Container(name="app", image="a:1"), Container(name="side", image="s:1"))
    )
    return Pod(
        metadata=ObjectMeta(name="web", namespace="ns", uid=uid),
        spec=PodSpec(init_containers=init, containers=containers, **spec),
    )


def _rc(name: str, cid: str, state: RS = RS.RUNNING, *, created: float = 1.0) -> RuntimeStatus:
    return RuntimeStatus(
        id=cid,
        metadata=ContainerMetadata(name, 0),
        state=state,
        created_at=created,
        image=f"{name}:img",
        image_ref=f"sha256:{name}",
        started_at=created + 1,
        finished_at=created + 2 if state is RS.EXITED else 0.0,
        annotations={kl.CONTAINER_RESTART_COUNT: "0"},
    )


def _runtime(*containers: RuntimeStatus) -> PodRuntimeStatus:
    sandbox = PodSandboxStatus(
        id="sb1",
        metadata=PodSandboxMetadata("web", "ns", "u1"),
        state=PodSandboxState.READY,
        created_at=1.0,
        ip="10.0.0.10",
    )
    return PodRuntimeStatus(
        uid="u1",
        name="web",
        namespace="ns",
        ips=("10.0.0.10",),
        sandbox_statuses=(sandbox,),
        container_statuses=containers,
    )


def _ready(pod: Pod, status: PodStatus) -> PodStatus:
    """A prober that finds every running container ready and started."""
    return attrs.evolve(
        status,
        container_statuses=tuple(
            attrs.evolve(c, ready=c.state.running is not None, started=c.state.running is not None)
            for c in status.container_statuses
        ),
    )


def test_an_unchanged_pod_gets_its_previous_status_back() -> None:
    pod = _pod()
    rt = _runtime(_rc("app", "a1"), _rc("side", "s1"))
    first = generate_pod_status(pod, rt, now=NOW, host_ip="192.0.2.1", fold_probes=_ready)
    again = generate_pod_status(
        pod, rt, previous=first, now=LATER, host_ip="192.0.2.1", fold_probes=_ready
    )
    assert again is first
    manager = StatusManager(FakeClock(LATER.timestamp()))
    assert manager.set_pod_status(pod, first)
    assert not manager.set_pod_status(pod, again)

    # An equal copy of the previous status serves as well as the original.
    twin = copy.deepcopy(first)
    assert (
        generate_pod_status(
            pod, rt, previous=twin, now=LATER, host_ip="192.0.2.1", fold_probes=_ready
        )
        is twin
    )


def test_a_change_keeps_the_unchanged_parts_and_makes_the_rest_anew() -> None:
    pod = _pod()
    first = generate_pod_status(
        pod, _runtime(_rc("app", "a1"), _rc("side", "s1")), now=NOW, fold_probes=_ready
    )
    restarted = _runtime(
        _rc("app", "a1"), _rc("side", "s2", created=5.0), _rc("side", "s1", RS.EXITED)
    )
    second = generate_pod_status(pod, restarted, previous=first, now=LATER, fold_probes=_ready)
    fresh = generate_pod_status(pod, restarted, now=NOW, fold_probes=_ready)
    app, side = second.container_statuses
    assert app is first.container_statuses[0]
    assert side.container_id == "://s2" and side.last_state.terminated is not None
    assert second.container_statuses == fresh.container_statuses
    assert repr(second.container_statuses) == repr(fresh.container_statuses)
    # Conditions that did not change keep their time, as always.
    assert {c.type: c.last_transition_time for c in second.conditions} == {
        c.type: c.last_transition_time for c in first.conditions
    }


def test_conditions_out_of_order_come_back_in_order_each_one_reused() -> None:
    pod = _pod()
    rt = _runtime(_rc("app", "a1"), _rc("side", "s1"))
    first = generate_pod_status(pod, rt, now=NOW, fold_probes=_ready)
    shuffled = attrs.evolve(first, conditions=first.conditions[::-1])
    again = generate_pod_status(pod, rt, previous=shuffled, now=LATER, fold_probes=_ready)
    assert again.conditions is not shuffled.conditions
    assert [c.type for c in again.conditions] == [c.type for c in first.conditions]
    assert all(a is b for a, b in zip(again.conditions, first.conditions, strict=True))
    # Some conditions changed (no prober: no container is ready): the others are
    # the previous ones, all in the usual order.
    changed = generate_pod_status(pod, rt, previous=first, now=LATER)
    kept = {c.type: c for c in changed.conditions if c in first.conditions}
    assert set(kept) == {"PodReadyToStartContainers", "Initialized", "PodScheduled"}
    assert all(any(k is c for c in first.conditions) for k in kept.values())
    assert [c.type for c in changed.conditions] == [c.type for c in first.conditions]


def test_parts_written_in_another_time_zone_are_not_reused() -> None:
    pod = _pod()
    rt = _runtime(_rc("app", "a1"), _rc("side", "s1"))
    first = generate_pod_status(pod, rt, now=NOW, fold_probes=_ready)
    app = first.container_statuses[0]
    assert app.state.running is not None and app.state.running.started_at is not None
    shifted_at = app.state.running.started_at.astimezone(PLUS_ONE)
    shifted_state = ContainerState(running=ContainerStateRunning(started_at=shifted_at))
    shifted = attrs.evolve(
        first,
        container_statuses=(
            attrs.evolve(app, state=shifted_state),
            first.container_statuses[1],
        ),
    )
    assert shifted == first  # the same instant...
    again = generate_pod_status(pod, rt, previous=shifted, now=LATER, fold_probes=_ready)
    assert again is not shifted  # ...written differently: the runtime's UTC time is reported
    assert repr(again) == repr(first)
    assert again.to_dict() == first.to_dict()


def test_qos_class_follows_each_spec() -> None:
    guaranteed = ResourceRequirements(
        limits={"cpu": Quantity.parse("1"), "memory": Quantity.parse("64Mi")},
        requests={"cpu": Quantity.parse("1"), "memory": Quantity.parse("64Mi")},
    )
    for _ in range(3):
        best = generate_pod_status(_pod(), None, now=NOW)
        assert best.qos_class == "BestEffort"
        pod = _pod(containers=(Container(name="app", resources=guaranteed),))
        assert generate_pod_status(pod, None, now=NOW).qos_class == "Guaranteed"
        burstable = attrs.evolve(
            guaranteed, requests={"cpu": Quantity.parse("500m"), "memory": Quantity.parse("64Mi")}
        )
        pod = _pod(containers=(Container(name="app", resources=burstable),))
        assert generate_pod_status(pod, None, now=NOW).qos_class == "Burstable"


def test_generating_statuses_keeps_no_pod_alive() -> None:
    pod = _pod()
    spec_ref = weakref.ref(pod.spec)
    status = generate_pod_status(pod, _runtime(_rc("app", "a1")), now=NOW)
    assert status.qos_class == "BestEffort"
    del pod
    gc.collect()
    assert spec_ref() is None


# Every field of the models, set to something other than its default: a copy made
# while generating or normalising a status must keep them all.
EXTRA = {"futureField": "kept"}
FULL_STATUS_FIELDS: dict[str, Any] = {
    "extra": EXTRA,
    "name": "app",
    "state": ContainerState(terminated=ContainerStateTerminated(exit_code=1, message="bye")),
    "last_state": ContainerState(waiting=ContainerStateWaiting(reason="Before")),
    "ready": False,
    "restart_count": 4,
    "image": "a:1",
    "image_id": "sha256:a",
    "container_id": "x://a0",
    "started": False,
    "allocated_resources": {"cpu": Quantity.parse("1")},
    "resources": {"limits": {"cpu": "1"}},
}
FULL_CONDITION_FIELDS: dict[str, Any] = {
    "extra": EXTRA,
    "type": "Ready",
    "status": "True",
    "reason": "Why",
    "message": "What",
    "last_probe_time": NOW,
    "last_transition_time": None,
}
FULL_POD_STATUS_FIELDS: dict[str, Any] = {
    "extra": EXTRA,
    "phase": "Pending",
    "conditions": (),
    "message": "m",
    "reason": "r",
    "nominated_node_name": "node-b",
    "host_ip": "192.0.2.1",
    "host_ips": (PodIP(ip="192.0.2.1"),),
    "pod_ip": "10.0.0.10",
    "pod_ips": (PodIP(ip="10.0.0.10"),),
    "start_time": NOW,
    "init_container_statuses": (),
    "container_statuses": (),
    "ephemeral_container_statuses": (ContainerStatus(name="debug"),),
    "qos_class": "BestEffort",
}


def test_the_field_tables_cover_the_models() -> None:
    # When a model gains a field, add it here: the tests below then check that
    # the status code's copies keep it.
    for model, table in (
        (ContainerStatus, FULL_STATUS_FIELDS),
        (PodCondition, FULL_CONDITION_FIELDS),
        (PodStatus, FULL_POD_STATUS_FIELDS),
    ):
        assert {a.name for a in attrs.fields(model)} == set(table), model.__name__
    # A previous state or IP is reused only when each of these fields matches.
    compared = {
        ContainerState: {"extra", "waiting", "running", "terminated"},
        ContainerStateRunning: {"extra", "started_at"},
        ContainerStateTerminated: {
            "extra",
            "exit_code",
            "signal",
            "reason",
            "message",
            "started_at",
            "finished_at",
            "container_id",
        },
        PodIP: {"extra", "ip"},
    }
    for part, names in compared.items():
        assert {a.name for a in attrs.fields(part)} == names, part.__name__


def test_a_waiting_reason_keeps_every_other_field_of_the_container_status() -> None:
    pod = _pod(containers=(Container(name="app", image="a:1"),))
    old = ContainerStatus(**FULL_STATUS_FIELDS)
    previous = PodStatus(container_statuses=(old,))
    status = generate_pod_status(
        pod, _runtime(), previous=previous, now=NOW, waiting={"app": ("CrashLoopBackOff", "m")}
    )
    expected = attrs.evolve(
        old,
        state=ContainerState(waiting=ContainerStateWaiting(reason="CrashLoopBackOff", message="m")),
        last_state=old.state,
    )
    assert status.container_statuses == (expected,)


def test_a_succeeded_init_container_is_ready_with_every_other_field_kept() -> None:
    pod = _pod(init=(Container(name="init"),), containers=(Container(name="app"),))
    done = ContainerStatus(
        **{
            **FULL_STATUS_FIELDS,
            "name": "init",
            "state": ContainerState(terminated=ContainerStateTerminated(exit_code=0)),
        }
    )
    previous = PodStatus(init_container_statuses=(done,))
    status = generate_pod_status(pod, None, previous=previous, now=NOW)
    assert status.init_container_statuses == (attrs.evolve(done, ready=True),)


def test_fold_probes_output_is_kept_field_by_field() -> None:
    full = PodStatus(**FULL_POD_STATUS_FIELDS)

    def fold(pod: Pod, status: PodStatus) -> PodStatus:
        return attrs.evolve(
            full,
            phase=status.phase,
            container_statuses=status.container_statuses,
            init_container_statuses=status.init_container_statuses,
        )

    status = generate_pod_status(_pod(), None, now=NOW, fold_probes=fold)
    for name, value in FULL_POD_STATUS_FIELDS.items():
        if name not in ("conditions", "phase", "container_statuses", "init_container_statuses"):
            assert getattr(status, name) == value, name


def test_merged_transition_times_keep_every_other_field_of_the_condition() -> None:
    condition = PodCondition(**FULL_CONDITION_FIELDS)
    earlier = attrs.evolve(condition, last_transition_time=NOW)
    (merged,) = merge_transition_times([condition], [earlier], LATER)
    assert merged == attrs.evolve(condition, last_transition_time=NOW)
    (merged,) = merge_transition_times([condition], [], LATER)
    assert merged == attrs.evolve(condition, last_transition_time=LATER)


def test_with_life_changes_the_four_fields_and_keeps_every_other() -> None:
    old = ContainerStatus(**FULL_STATUS_FIELDS)
    running = ContainerState(running=ContainerStateRunning(started_at=NOW))
    copy = old.with_life(running, old.state, not old.ready, not old.started)
    assert copy == attrs.evolve(
        old, state=running, last_state=old.state, ready=not old.ready, started=not old.started
    )


def test_with_parts_changes_the_three_parts_and_keeps_every_other() -> None:
    old = PodStatus(**FULL_POD_STATUS_FIELDS)
    cs = (ContainerStatus(name="app"),)
    cond = (PodCondition(type="Ready", status="True"),)
    copy = old.with_parts(cs, cs, cond)
    assert copy == attrs.evolve(
        old, init_container_statuses=cs, container_statuses=cs, conditions=cond
    )
