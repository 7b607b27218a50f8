"""generate_pod_status: the kubelet's container-status, phase and condition rules."""

from __future__ import annotations

import datetime as dt

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
    PodSpec,
    PodStatus,
)
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerMetadata,
    NamespaceOptions,
    PodSandboxMetadata,
    PodSandboxState,
    PodSandboxStatus,
)
from kubelet_kit.container.interfaces import ContainerState as RS
from kubelet_kit.container.interfaces import ContainerStatus as RuntimeStatus
from kubelet_kit.container.pods import PodRuntimeStatus
from kubelet_kit.status.generate import generate_pod_status, pod_ready_to_start_containers

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(minutes=5)


def _pod(policy: str = "Always", init: tuple[Container, ...] = (), **meta: object) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="web", namespace="ns", uid="u1", **meta),  # type: ignore[arg-type]
        spec=PodSpec(
            restart_policy=policy,
            init_containers=init,
            containers=(
                Container(name="containerA", image="a:1"),
                Container(name="containerB", image="b:1"),
            ),
        ),
    )


def _sandbox(ip: str = "10.0.0.10", ready: bool = True) -> PodSandboxStatus:
    state = PodSandboxState.READY if ready else PodSandboxState.NOTREADY
    return PodSandboxStatus(
        id="sb1",
        metadata=PodSandboxMetadata("web", "ns", "u1"),
        state=state,
        created_at=1.0,
        ip=ip,
    )


def _rc(
    name: str,
    cid: str,
    state: RS,
    *,
    created: float,
    restarts: int = 0,
    exit_code: int = 0,
    reason: str = "",
    started: float = 0.0,
) -> RuntimeStatus:
    return RuntimeStatus(
        id=cid,
        metadata=ContainerMetadata(name, restarts),
        state=state,
        created_at=created,
        image=f"{name}:img",
        image_ref=f"sha256:{name}",
        started_at=started or created + 1,
        finished_at=created + 2 if state is RS.EXITED else 0.0,
        exit_code=exit_code,
        reason=reason,
        annotations={kl.CONTAINER_RESTART_COUNT: str(restarts)},
    )


def _runtime(
    *containers: RuntimeStatus, sandbox: PodSandboxStatus | None = None
) -> PodRuntimeStatus:
    sb = sandbox or _sandbox()
    return PodRuntimeStatus(
        uid="u1",
        name="web",
        namespace="ns",
        ips=(sb.ip,) if sb.ip else (),
        sandbox_statuses=(sb,),
        container_statuses=containers,
    )


def _running(name: str, **kw: object) -> ContainerStatus:
    return ContainerStatus(name=name, state=ContainerState(running=ContainerStateRunning()), **kw)  # type: ignore[arg-type]


def _ready(pod: Pod, status: PodStatus) -> PodStatus:
    """A prober that finds every running container ready and started."""
    return attrs.evolve(
        status,
        container_statuses=tuple(
            attrs.evolve(c, ready=c.state.running is not None, started=c.state.running is not None)
            for c in status.container_statuses
        ),
    )


def _cond(status: PodStatus, type_: str) -> tuple[str, str, str]:
    c = status.condition(type_)
    assert c is not None, type_
    return c.status, c.reason, c.message


def test_nothing_created_yet_is_pending_container_creating() -> None:
    status = generate_pod_status(_pod(), None, now=NOW, host_ip="192.0.2.1")
    assert status.phase == "Pending"
    assert [c.name for c in status.container_statuses] == ["containerA", "containerB"]
    for c in status.container_statuses:
        assert c.state.waiting == ContainerStateWaiting(reason="ContainerCreating")
        assert not c.ready
    assert [c.image for c in status.container_statuses] == ["a:1", "b:1"]
    assert _cond(status, "PodReadyToStartContainers")[0] == "False"
    assert _cond(status, "Initialized") == ("True", "", "")
    assert _cond(status, "ContainersReady") == (
        "False",
        "ContainersNotReady",
        "containers with unready status: [containerA containerB]",
    )
    assert _cond(status, "Ready") == _cond(status, "ContainersReady")
    assert _cond(status, "PodScheduled")[0] == "True"
    assert status.start_time == NOW
    assert status.host_ip == "192.0.2.1" and status.host_ips[0].ip == "192.0.2.1"
    assert status.qos_class == "BestEffort"
    assert all(c.last_transition_time == NOW for c in status.conditions)


def test_init_containers_make_regular_ones_pod_initializing() -> None:
    pod = _pod(init=(Container(name="init", image="i:1"),))
    running_init = _rc("init", "i1", RS.RUNNING, created=10)
    status = generate_pod_status(pod, _runtime(running_init), now=NOW)
    assert status.phase == "Pending"
    assert status.init_container_statuses[0].state.running is not None
    for c in status.container_statuses:
        assert c.state.waiting is not None and c.state.waiting.reason == "PodInitializing"
    assert _cond(status, "Initialized") == (
        "False",
        "ContainersNotInitialized",
        "containers with incomplete status: [init]",
    )
    assert _cond(status, "PodReadyToStartContainers")[0] == "True"

    done_init = _rc("init", "i1", RS.EXITED, created=10, reason="Completed")
    status = generate_pod_status(pod, _runtime(done_init), now=NOW, previous=status)
    assert status.init_container_statuses[0].ready  # a succeeded init container is ready
    assert _cond(status, "Initialized") == ("True", "", "")


def test_running_containers_with_ids_images_and_previous_attempt() -> None:
    rt = _runtime(
        _rc("containerA", "a2", RS.RUNNING, created=20, restarts=1),
        _rc("containerA", "a1", RS.EXITED, created=10, exit_code=1, reason="Error"),
        _rc("containerB", "b1", RS.RUNNING, created=11),
    )
    status = generate_pod_status(_pod(), rt, now=NOW, runtime_name="containerd", fold_probes=_ready)
    a, b = status.container_statuses
    assert a.container_id == "containerd://a2" and a.image == "containerA:img"
    assert a.image_id == "sha256:containerA"
    assert a.restart_count == 1
    assert a.state.running == ContainerStateRunning(
        started_at=dt.datetime.fromtimestamp(21, dt.UTC)
    )
    assert a.last_state.terminated is not None
    assert a.last_state.terminated.exit_code == 1
    assert a.last_state.terminated.reason == "Error"
    assert a.last_state.terminated.container_id == "containerd://a1"
    assert b.last_state == ContainerState()
    assert status.phase == "Running"
    assert status.pod_ip == "10.0.0.10"
    assert _cond(status, "Ready") == ("True", "", "")
    assert _cond(status, "ContainersReady") == ("True", "", "")


def test_unready_message_lists_only_unready_containers() -> None:
    rt = _runtime(
        _rc("containerA", "a1", RS.RUNNING, created=1),
        _rc("containerB", "b1", RS.RUNNING, created=2),
    )

    def only_b_ready(pod: Pod, s: PodStatus) -> PodStatus:
        return attrs.evolve(
            s,
            container_statuses=tuple(
                attrs.evolve(c, ready=c.name == "containerB") for c in s.container_statuses
            ),
        )

    status = generate_pod_status(_pod(), rt, now=NOW, fold_probes=only_b_ready)
    assert _cond(status, "ContainersReady") == (
        "False",
        "ContainersNotReady",
        "containers with unready status: [containerA]",
    )


# Upstream TestConvertToAPIContainerStatuses: previously running, nothing reported now.
def test_vanished_running_containers_get_status_unknown_last_state() -> None:
    previous = PodStatus(container_statuses=(_running("containerA"), _running("containerB")))
    status = generate_pod_status(_pod(), _runtime(), previous=previous, now=NOW)
    for c in status.container_statuses:
        assert c.state.waiting == ContainerStateWaiting(reason="ContainerCreating")
        assert c.last_state.terminated == ContainerStateTerminated(
            reason="ContainerStatusUnknown",
            exit_code=137,
            message="The container could not be located when the pod was deleted.  "
            "The container used to be Running",
        )
        assert c.restart_count == 1
    # "backoff crashloop" shape: the pod stays Running, not Pending.
    assert status.phase == "Running"

    deleted = _pod(deletion_timestamp=NOW)
    status = generate_pod_status(deleted, _runtime(), previous=previous, now=NOW)
    assert [c.restart_count for c in status.container_statuses] == [0, 0]


def test_unknown_runtime_state_after_running_is_terminated_status_unknown() -> None:
    previous = PodStatus(
        container_statuses=(
            _running("containerA", restart_count=2, container_id="://a1"),
            _running("containerB"),
        )
    )
    rt = _runtime(
        _rc("containerA", "a1", RS.UNKNOWN, created=1, restarts=2),
        _rc("containerB", "b1", RS.RUNNING, created=1),
    )
    status = generate_pod_status(_pod(), rt, previous=previous, now=NOW)
    a = status.container_statuses[0]
    assert a.state.terminated is not None
    assert a.state.terminated.reason == "ContainerStatusUnknown"
    assert a.state.terminated.exit_code == 137
    assert a.restart_count == 3


def test_waiting_reasons_apply_to_containers_about_to_restart() -> None:
    rt = _runtime(
        _rc("containerA", "a1", RS.EXITED, created=1, exit_code=2, reason="Error"),
        _rc("containerB", "b1", RS.RUNNING, created=1),
    )
    msg = "back-off 10s restarting failed container=containerA pod=web_ns(u1)"
    waiting = {"containerA": ("CrashLoopBackOff", msg), "containerB": ("Ignored", "")}
    status = generate_pod_status(_pod("Always"), rt, waiting=waiting, now=NOW)
    a, b = status.container_statuses
    assert a.state.waiting == ContainerStateWaiting(reason="CrashLoopBackOff", message=msg)
    assert a.last_state.terminated is not None and a.last_state.terminated.exit_code == 2
    assert b.state.running is not None  # a running container is not restarted
    assert status.phase == "Running"

    # restartPolicy Never: the failed container is not restarted, no waiting reason.
    status = generate_pod_status(_pod("Never"), rt, waiting=waiting, now=NOW)
    assert status.container_statuses[0].state.terminated is not None


def test_image_pull_error_before_creation() -> None:
    waiting = {"containerA": ("ErrImagePull", "pull failed")}
    status = generate_pod_status(_pod(), _runtime(), waiting=waiting, now=NOW)
    assert status.container_statuses[0].state.waiting == ContainerStateWaiting(
        reason="ErrImagePull", message="pull failed"
    )
    assert status.phase == "Pending"


def test_terminal_phase_is_sticky_and_keeps_reason() -> None:
    # Upstream: "terminal phase from previous status must remain terminal".
    previous = PodStatus(
        phase="Succeeded",
        reason="Test",
        message="test",
        container_statuses=(_running("containerA"), _running("containerB")),
    )
    status = generate_pod_status(_pod(), _runtime(), previous=previous, now=NOW)
    assert (status.phase, status.reason, status.message) == ("Succeeded", "Test", "test")
    assert _cond(status, "Initialized") == ("True", "PodCompleted", "")
    assert _cond(status, "Ready") == ("False", "PodCompleted", "")
    assert _cond(status, "ContainersReady") == ("False", "PodCompleted", "")

    # Upstream: "terminal phase cannot be changed (apiserver previous is succeeded)".
    pod = attrs.evolve(_pod(), status=PodStatus(phase="Failed"))
    rt = _runtime(
        _rc("containerA", "a1", RS.RUNNING, created=1),
        _rc("containerB", "b1", RS.RUNNING, created=1),
    )
    assert generate_pod_status(pod, rt, previous=PodStatus(), now=NOW).phase == "Failed"


def test_reason_kept_while_phase_unchanged_and_cleared_when_it_changes() -> None:
    previous = PodStatus(phase="Pending", reason="Test", message="test")
    rt = _runtime(_rc("containerB", "b1", RS.RUNNING, created=1))
    status = generate_pod_status(_pod(), rt, previous=previous, now=NOW)
    assert (status.phase, status.reason, status.message) == ("Pending", "Test", "test")
    rt = _runtime(
        _rc("containerA", "a1", RS.RUNNING, created=1),
        _rc("containerB", "b1", RS.RUNNING, created=2),
    )
    status = generate_pod_status(_pod(), rt, previous=previous, now=NOW)
    assert (status.phase, status.reason, status.message) == ("Running", "", "")


def test_pod_is_terminal_settles_phase_and_failed_conditions() -> None:
    rt = _runtime(
        _rc("containerA", "a1", RS.EXITED, created=1, exit_code=0),
        _rc("containerB", "b1", RS.EXITED, created=1, exit_code=1),
    )
    status = generate_pod_status(_pod("Always"), rt, now=NOW, pod_is_terminal=True)
    assert status.phase == "Failed"
    assert _cond(status, "ContainersReady") == ("False", "PodFailed", "")
    assert status.container_statuses[0].state.terminated is not None
    assert status.container_statuses[0].state.terminated.reason == "Completed"


def test_transition_times_and_start_time_are_kept() -> None:
    first = generate_pod_status(_pod(), None, now=NOW)
    rt = _runtime(
        _rc("containerA", "a1", RS.RUNNING, created=1),
        _rc("containerB", "b1", RS.RUNNING, created=1),
    )
    second = generate_pod_status(_pod(), rt, previous=first, now=LATER, fold_probes=_ready)
    assert second.start_time == NOW
    times = {c.type: c.last_transition_time for c in second.conditions}
    assert times["Initialized"] == NOW and times["PodScheduled"] == NOW  # unchanged
    assert times["Ready"] == LATER and times["PodReadyToStartContainers"] == LATER


def test_conditions_owned_by_others_are_kept_and_gates_checked() -> None:
    pod = attrs.evolve(
        _pod(),
        spec=attrs.evolve(_pod().spec, readiness_gates=({"conditionType": "example.com/lb"},)),
    )
    rt = _runtime(
        _rc("containerA", "a1", RS.RUNNING, created=1),
        _rc("containerB", "b1", RS.RUNNING, created=1),
    )
    status = generate_pod_status(pod, rt, now=NOW, fold_probes=_ready)
    assert _cond(status, "Ready") == (
        "False",
        "ReadinessGatesNotReady",
        'corresponding condition of pod readiness gate "example.com/lb" does not exist.',
    )
    gate = PodCondition(type="example.com/lb", status="True", last_transition_time=NOW)
    status = generate_pod_status(
        pod, rt, now=LATER, fold_probes=_ready, previous=attrs.evolve(status, conditions=(gate,))
    )
    assert status.conditions[0] == gate
    assert _cond(status, "Ready") == ("True", "", "")


def test_sandbox_without_ip_is_not_ready_to_start_containers() -> None:
    status = generate_pod_status(_pod(), _runtime(sandbox=_sandbox(ip="")), now=NOW)
    assert _cond(status, "PodReadyToStartContainers")[0] == "False"
    host = attrs.evolve(_pod(), spec=attrs.evolve(_pod().spec, host_network=True))
    sb = attrs.evolve(_sandbox(ip=""), namespace_options=NamespaceOptions(host_network=True))
    status = generate_pod_status(host, _runtime(sandbox=sb), now=NOW, host_ip="192.0.2.7")
    assert _cond(status, "PodReadyToStartContainers")[0] == "True"
    assert status.pod_ip == "192.0.2.7"


def test_only_a_single_ready_newest_sandbox_is_ready_to_start_containers() -> None:
    newest, older = _sandbox(), attrs.evolve(_sandbox(), id="sb0")
    for sandboxes, expected in (
        ((newest,), True),
        ((newest, attrs.evolve(older, state=PodSandboxState.NOTREADY)), True),
        ((newest, older), False),  # two ready sandboxes
        ((attrs.evolve(newest, state=PodSandboxState.NOTREADY), older), False),
    ):
        rt = PodRuntimeStatus(uid="u1", name="web", namespace="ns", sandbox_statuses=sandboxes)
        assert pod_ready_to_start_containers(_pod(), rt) is expected


def test_lost_init_container_is_inferred_completed_once_regular_created() -> None:
    pod = _pod(init=(Container(name="init"),))
    rt = _runtime(
        _rc("containerA", "a1", RS.RUNNING, created=1),
        _rc("containerB", "b1", RS.RUNNING, created=1),
    )
    status = generate_pod_status(pod, rt, now=NOW)
    init = status.init_container_statuses[0]
    assert init.state.terminated is not None
    assert init.state.terminated.reason == "Completed" and init.state.terminated.exit_code == 0
    assert status.phase == "Running"
