"""Build a pod's API status from what the runtime reports (``generateAPIPodStatus``).

:func:`generate_pod_status` is pure: the composer gives it the pod, the runtime's
view (:class:`~kubelet_kit.container.pods.PodRuntimeStatus`), the waiting reasons
it decided (CrashLoopBackOff, ErrImagePull, ...), the previous status and the
time, and gets back a ``PodStatus`` with container statuses, phase, conditions,
IPs, start time and QoS class, following the kubelet's rules:

* every container of the spec gets a status; with no runtime container yet it is
  waiting with ``ContainerCreating`` (``PodInitializing`` for every container of
  a pod that has init containers);
* the current state comes from the newest runtime container of that name and
  ``lastState`` from the one before it; ``restartCount`` from the container's
  ``io.kubernetes.container.restartCount`` annotation (its attempt otherwise);
* a container that was running and is no longer reported (or is reported in the
  unknown state) is shown terminated with ``ContainerStatusUnknown`` and exit 137,
  and counted as a restart unless the pod is being deleted;
* a container the syncer will (re)start next shows the syncer's waiting reason;
* a pod never leaves ``Failed`` or ``Succeeded``, and keeps its reason and
  message while its phase does not change.

Readiness comes from the prober: pass its ``update_pod_status`` as
``fold_probes`` and the conditions are computed from the folded statuses, as
the kubelet does. Without it every container is reported not ready.
"""

from __future__ import annotations

import datetime as _dt
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from kubelet_kit.api import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    Pod,
    PodCondition,
    PodStatus,
)
from kubelet_kit.api.status import DISRUPTION_TARGET
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import ContainerState as RuntimeState
from kubelet_kit.container.interfaces import ContainerStatus as RuntimeContainerStatus
from kubelet_kit.container.interfaces import PodSandboxState
from kubelet_kit.container.pods import PodRuntimeStatus
from kubelet_kit.status import _values as values
from kubelet_kit.status.phase import (
    TERMINAL_PHASES,
    _first_by_name,
    has_any_regular_container_started,
    pod_phase,
)

__all__ = [
    "CONTAINERS_NOT_INITIALIZED",
    "CONTAINERS_NOT_READY",
    "CONTAINERS_READY",
    "CONTAINER_CREATING",
    "CONTAINER_STATUS_UNKNOWN",
    "DISRUPTION_TARGET",
    "INITIALIZED",
    "KUBELET_CONDITIONS",
    "POD_COMPLETED",
    "POD_FAILED",
    "POD_INITIALIZING",
    "POD_READY_TO_START_CONTAINERS",
    "POD_SCHEDULED",
    "READINESS_GATES_NOT_READY",
    "READY",
    "UNKNOWN_CONTAINER_STATUSES",
    "container_should_be_restarted",
    "container_statuses",
    "generate_pod_status",
    "merge_transition_times",
    "pod_conditions",
    "pod_ready_to_start_containers",
    "to_datetime",
]

# Waiting reasons the status generator itself decides.
CONTAINER_CREATING: Final = "ContainerCreating"
POD_INITIALIZING: Final = "PodInitializing"
CONTAINER_STATUS_UNKNOWN: Final = "ContainerStatusUnknown"

# Condition types.
POD_READY_TO_START_CONTAINERS: Final = "PodReadyToStartContainers"
INITIALIZED: Final = "Initialized"
READY: Final = "Ready"
CONTAINERS_READY: Final = "ContainersReady"
POD_SCHEDULED: Final = "PodScheduled"
#: Condition types the kubelet owns (and regenerates on every sync).
KUBELET_CONDITIONS: Final = frozenset(
    {POD_READY_TO_START_CONTAINERS, INITIALIZED, READY, CONTAINERS_READY, POD_SCHEDULED}
)

# Condition reasons (upstream ``pkg/kubelet/status/generate.go``).
UNKNOWN_CONTAINER_STATUSES: Final = "UnknownContainerStatuses"
POD_COMPLETED: Final = "PodCompleted"
POD_FAILED: Final = "PodFailed"
CONTAINERS_NOT_READY: Final = "ContainersNotReady"
CONTAINERS_NOT_INITIALIZED: Final = "ContainersNotInitialized"
READINESS_GATES_NOT_READY: Final = "ReadinessGatesNotReady"

_VANISHED_RUNNING = "The container could not be located when the pod was terminated"
_VANISHED_DELETED = (
    "The container could not be located when the pod was deleted.  The container used to be Running"
)
_INIT_INFERRED = (
    "Unable to get init container status from container runtime and pod has been "
    "initialized, treat it as exited normally"
)
#: The sort key of regular container statuses (their name, as upstream).
_status_name: Final = operator.attrgetter("name")


def to_datetime(seconds: float) -> _dt.datetime | None:
    """A runtime timestamp (seconds since the epoch, 0 = unset) as an aware datetime."""
    if not seconds:
        return None
    # (The zone by position: as a keyword it costs about as much again, and each
    # running container's start time is converted on every sync.)
    return _dt.datetime.fromtimestamp(seconds, _dt.UTC)


def _restart_count(cs: RuntimeContainerStatus) -> int:
    raw = cs.annotations.get(kl.CONTAINER_RESTART_COUNT)
    if raw is not None:
        try:
            return int(raw)
        except ValueError:
            pass  # a foreign or damaged annotation: fall back to the attempt
    return cs.metadata.attempt


def _go_list(names: Sequence[str]) -> str:
    # Go prints a []string with %s as "[a b]"; the kubelet's messages use that.
    return "[" + " ".join(names) + "]"


def container_should_be_restarted(
    container: Container, pod: Pod, runtime_status: PodRuntimeStatus | None
) -> bool:
    """Whether the syncer will (re)start this container (``ShouldContainerBeRestarted``).

    A deleted pod restarts nothing; a container never created is started; a
    running one is not; one in the created or unknown state is; an exited one
    follows the restart policy (a sidecar's own ``Always``, else the pod's).
    """
    if pod.metadata.deletion_timestamp is not None:
        return False
    cs = runtime_status.find_container_status(container.name) if runtime_status else None
    if cs is None:
        return True
    if cs.state is RuntimeState.RUNNING:
        return False
    if cs.state in (RuntimeState.UNKNOWN, RuntimeState.CREATED):
        return True
    policy = "Always" if container.is_sidecar else pod.spec.restart_policy
    if policy == "Never":
        return False
    if policy == "OnFailure":
        return cs.exit_code != 0
    return True


def _any_regular_container_created(pod: Pod, runtime_status: PodRuntimeStatus | None) -> bool:
    if runtime_status is None:
        return False
    for container in pod.spec.containers:
        cs = runtime_status.find_container_status(container.name)
        if cs is not None and cs.state is not RuntimeState.UNKNOWN:
            return True
    return False


def _api_state(
    cs: RuntimeContainerStatus,
    old: ContainerStatus | None,
    cid: str,
    priors: Sequence[ContainerState],
) -> tuple[ContainerState, bool]:
    """The API state of one runtime container, and whether it vanished (ran, and
    the runtime lost track of it). A prior state equal to the answer is returned
    itself."""
    if cs.state is RuntimeState.RUNNING:
        started_at = to_datetime(cs.started_at)
        for prior in priors:
            if values.is_running_since(prior, started_at):
                return prior, False
        return ContainerState(running=ContainerStateRunning(started_at=started_at)), False
    if cs.state is RuntimeState.CREATED:
        # Created but not started: "waiting to be running", with no reason.
        return values.WAITING, False
    if cs.state is RuntimeState.EXITED:
        # Runtimes report Completed/Error/OOMKilled; one that leaves the reason
        # empty gets containerd's words, so users always see a reason.
        reason = cs.reason or ("Completed" if cs.exit_code == 0 else "Error")
        started_at = to_datetime(cs.started_at)
        finished_at = to_datetime(cs.finished_at)
        for prior in priors:
            if values.is_terminated_as(
                prior,
                exit_code=cs.exit_code,
                reason=reason,
                message=cs.message,
                started_at=started_at,
                finished_at=finished_at,
                container_id=cid,
            ):
                return prior, False
        terminated = ContainerStateTerminated(
            exit_code=cs.exit_code,
            reason=reason,
            message=cs.message,
            started_at=started_at,
            finished_at=finished_at,
            container_id=cid,
        )
        return ContainerState(terminated=terminated), False
    if old is not None and old.state.running is not None:
        # It ran and the runtime lost track of it: "ran and failed" is not
        # "never ran", so it is not shown as waiting (a run-once pod must not
        # appear to be able to run twice).
        terminated = ContainerStateTerminated(
            reason=CONTAINER_STATUS_UNKNOWN, message=_VANISHED_RUNNING, exit_code=137
        )
        return ContainerState(terminated=terminated), True
    return values.WAITING, False


def _convert(
    cs: RuntimeContainerStatus,
    spec_image: str,
    old: ContainerStatus | None,
    runtime_name: str,
    previous_attempt: RuntimeContainerStatus | None = None,
) -> ContainerStatus:
    # ``cs`` is the newest runtime container of its name and gives the state;
    # ``previous_attempt``, the one before it, gives ``lastState``.
    cid = f"{runtime_name}://{cs.id}"
    restart_count = _restart_count(cs)
    state, vanished = _api_state(cs, old, cid, (old.state,) if old is not None else ())
    if vanished and old is not None:
        restart_count = old.restart_count + 1
    last_state = values.NO_STATE
    if previous_attempt is not None:
        priors = (old.last_state, old.state) if old is not None else ()
        last_state, _ = _api_state(
            previous_attempt, old, f"{runtime_name}://{previous_attempt.id}", priors
        )
    elif old is not None and values.is_empty_state(old.last_state):
        last_state = old.last_state
    started = False
    if state.running is not None:
        # The prober decides "started"; until it has, keep what was reported
        # for this very container, else report not started.
        started = bool(old.started) if old is not None and old.container_id == cid else False
    image = cs.image or spec_image
    return values.container_status(
        old,
        name=cs.metadata.name,
        state=state,
        last_state=last_state,
        restart_count=restart_count,
        image=image,
        image_id=cs.image_ref,
        container_id=cid,
        started=started,
    )


def container_statuses(
    pod: Pod,
    runtime_status: PodRuntimeStatus | None,
    containers: Sequence[Container],
    previous: Sequence[ContainerStatus],
    *,
    is_init: bool,
    waiting: Mapping[str, tuple[str, str]] | None = None,
    runtime_name: str = "",
) -> tuple[ContainerStatus, ...]:
    """API statuses of ``containers`` (``convertToAPIContainerStatuses``).

    Args:
        pod: The pod.
        runtime_status: What the runtime reports for the pod (None: nothing yet).
        containers: The containers to report (the init or the regular ones).
        previous: The previous API statuses of the same containers.
        is_init: ``containers`` are init containers (ordered as in the spec and a
            succeeded one is never given a waiting reason).
        waiting: Waiting reasons decided by the syncer: name -> (reason, message).
        runtime_name: Prefix of container ids (``<runtime>://<id>``).

    Returns:
        Init statuses in spec order, regular statuses sorted by name (as upstream).
    """
    if not containers:
        return ()  # (a pod without init containers: nothing to report)
    waiting = waiting or {}
    has_init = bool(pod.spec.init_containers)
    default_state = values.waiting_state(POD_INITIALIZING if has_init else CONTAINER_CREATING)
    old_by_name = {s.name: s for s in previous} if previous else {}
    # The newest two runtime containers of each name (runtime_status keeps them
    # newest first): the current state and the last one.
    wanted = {c.name for c in containers}
    newest: dict[str, RuntimeContainerStatus] = {}
    before: dict[str, RuntimeContainerStatus] = {}
    for cs in runtime_status.container_statuses if runtime_status else ():
        name = cs.metadata.name
        if name not in wanted:
            continue
        if name not in newest:
            newest[name] = cs
        elif name not in before:
            before[name] = cs

    statuses: dict[str, ContainerStatus] = {}
    for c in containers:
        name = c.name
        old = old_by_name.get(name)
        found = newest.get(name)
        if found is not None:
            statuses[name] = _convert(found, c.image, old, runtime_name, before.get(name))
        elif old is not None and old.state.terminated is not None:
            statuses[name] = old
        else:
            statuses[name] = _not_created(c, old, default_state, pod)

    if not is_init and not waiting:
        # (What follows only gives init containers their inferred state and
        # containers the syncer restarts their waiting reason.)
        return tuple(sorted(statuses.values(), key=_status_name))
    for c in containers:
        if is_init:
            found_cs = newest.get(c.name)  # (the runtime's newest of that name)
            if (
                found_cs is not None
                and found_cs.state is RuntimeState.EXITED
                and found_cs.exit_code == 0
            ):
                continue
            current = statuses[c.name]
            if (
                found_cs is None
                and not c.is_sidecar
                and current.state.waiting is not None
                and _any_regular_container_created(pod, runtime_status)
            ):
                inferred = ContainerState(
                    terminated=ContainerStateTerminated(
                        reason="Completed", message=_INIT_INFERRED, exit_code=0
                    )
                )
                statuses[c.name] = current.with_life(
                    inferred, current.last_state, current.ready, current.started
                )
                continue
        if c.name not in waiting or not container_should_be_restarted(c, pod, runtime_status):
            continue
        reason, message = waiting[c.name]
        status = statuses[c.name]
        last_state = status.state if status.state.terminated is not None else status.last_state
        state = ContainerState(waiting=ContainerStateWaiting(reason=reason, message=message))
        statuses[c.name] = status.with_life(state, last_state, status.ready, status.started)

    if is_init:
        return tuple(statuses[c.name] for c in containers)
    return tuple(sorted(statuses.values(), key=_status_name))


def _not_created(
    c: Container, old: ContainerStatus | None, default_state: ContainerState, pod: Pod
) -> ContainerStatus:
    """The status of a container the runtime holds none of (and that did not end)."""
    if old is None:
        return ContainerStatus(
            name=c.name,
            image=c.image,
            state=default_state,
            last_state=values.NO_STATE,
            started=False,
        )
    last_state = old.last_state
    restart_count = old.restart_count
    if old.state.running is not None and last_state.terminated is None:
        # It was running and is gone from the runtime: it terminated, even if
        # nobody saw how. Recorded, so the pod does not fall back to Pending.
        last_state = ContainerState(
            terminated=ContainerStateTerminated(
                reason=CONTAINER_STATUS_UNKNOWN, message=_VANISHED_DELETED, exit_code=137
            )
        )
        if pod.metadata.deletion_timestamp is None:
            restart_count += 1
    return values.container_status(
        old,
        name=c.name,
        state=default_state,
        last_state=last_state,
        restart_count=restart_count,
        image=c.image,
        started=False,
    )


def pod_ready_to_start_containers(pod: Pod, runtime_status: PodRuntimeStatus | None) -> bool:
    """Whether the pod's sandbox is usable as is (the kubelet needs no new one).

    True when exactly one sandbox is ready, it is the newest, its network
    namespace matches ``hostNetwork``, and a pod-network pod has an IP.
    """
    if runtime_status is None or not runtime_status.sandbox_statuses:
        return False
    sandboxes = runtime_status.sandbox_statuses
    newest = sandboxes[0]
    if newest.state is not PodSandboxState.READY:
        return False
    for older in sandboxes[1:]:  # (a loop: asked on every sync, of one sandbox)
        if older.state is PodSandboxState.READY:
            return False  # two ready sandboxes: the kubelet makes a new one
    if newest.namespace_options.host_network != pod.spec.host_network:
        return False
    return pod.spec.host_network or bool(newest.ip)


def _containers_ready(
    pod: Pod, by_name: Mapping[str, ContainerStatus], phase: str
) -> tuple[str, str, str]:
    unknown: list[str] = []
    unready: list[str] = []
    spec = pod.spec
    # (spec.sidecars is made on each use: a pod without init containers has none.)
    containers = (*spec.sidecars, *spec.containers) if spec.init_containers else spec.containers
    for c in containers:
        status = by_name.get(c.name)
        if status is None:
            unknown.append(c.name)
        elif not status.ready:
            unready.append(c.name)
    if phase == "Succeeded" and not unknown:
        return "False", POD_COMPLETED, ""
    if phase == "Failed":
        return "False", POD_FAILED, ""
    messages = []
    if unknown:
        messages.append(f"containers with unknown status: {_go_list(unknown)}")
    if unready:
        messages.append(f"containers with unready status: {_go_list(unready)}")
    if messages:
        return "False", CONTAINERS_NOT_READY, ", ".join(messages)
    return "True", "", ""


def _initialized(
    pod: Pod,
    statuses: Sequence[ContainerStatus],
    by_name: Mapping[str, ContainerStatus],
    phase: str,
) -> tuple[str, str, str]:
    if not pod.spec.init_containers:
        # Nothing to wait for: what the rules below come to with no init container.
        return "True", POD_COMPLETED if phase == "Succeeded" else "", ""
    unknown: list[str] = []
    incomplete: list[str] = []
    for c in pod.spec.init_containers:
        status = by_name.get(c.name)
        if status is None:
            unknown.append(c.name)
            continue
        done = bool(status.started) if c.is_sidecar else status.ready
        if not done:
            incomplete.append(c.name)
    if phase == "Succeeded" and not unknown:
        return "True", POD_COMPLETED, ""
    if has_any_regular_container_started(pod, statuses):
        return "True", "", ""
    messages = []
    if unknown:
        messages.append(f"containers with unknown status: {_go_list(unknown)}")
    if incomplete:
        messages.append(f"containers with incomplete status: {_go_list(incomplete)}")
    if messages:
        return "False", CONTAINERS_NOT_INITIALIZED, ", ".join(messages)
    return "True", "", ""


def _ready(
    pod: Pod, conditions: Sequence[PodCondition], containers_ready: tuple[str, str, str]
) -> tuple[str, str, str]:
    if containers_ready[0] != "True":
        return containers_ready
    messages = []
    for gate in pod.spec.readiness_gates:
        ctype = str(gate.get("conditionType", ""))
        found = next((c for c in conditions if c.type == ctype), None)
        if found is None:
            messages.append(
                f'corresponding condition of pod readiness gate "{ctype}" does not exist.'
            )
        elif found.status != "True":
            messages.append(
                f'the status of pod readiness gate "{ctype}" is not "True", but {found.status}'
            )
    if messages:
        return "False", READINESS_GATES_NOT_READY, ", ".join(messages)
    return "True", "", ""


def pod_conditions(
    pod: Pod,
    status: PodStatus,
    runtime_status: PodRuntimeStatus | None,
    *,
    previous: PodStatus | None = None,
    now: _dt.datetime | None = None,
) -> tuple[PodCondition, ...]:
    """The pod's conditions for ``status`` (whose container statuses and phase are set).

    Conditions the kubelet does not own (``DisruptionTarget``, readiness-gate
    conditions set by others) are kept from ``previous``; then come
    PodReadyToStartContainers, Initialized, Ready, ContainersReady and
    PodScheduled, in the kubelet's order. A condition whose status did not change
    keeps its ``lastTransitionTime`` from ``previous``; a changed one gets ``now``.
    """
    before = previous.conditions if previous else ()
    return _conditions(
        pod,
        status.phase,
        (*status.init_container_statuses, *status.container_statuses),
        runtime_status,
        before,
        now,
    )


def _conditions(
    pod: Pod,
    phase: str,
    all_statuses: Sequence[ContainerStatus],
    runtime_status: PodRuntimeStatus | None,
    before: tuple[PodCondition, ...],
    now: _dt.datetime | None,
) -> tuple[PodCondition, ...]:
    # pod_conditions' work; ``before`` itself when every condition is unchanged.
    # (A new pod has no conditions yet: its empty ``before`` is not searched.)
    kept = [c for c in before if c.type not in KUBELET_CONDITIONS] if before else []
    by_name = _first_by_name(all_statuses)
    cready = _containers_ready(pod, by_name, phase)
    generated = [
        (
            POD_READY_TO_START_CONTAINERS,
            ("True" if pod_ready_to_start_containers(pod, runtime_status) else "False", "", ""),
        ),
        (INITIALIZED, _initialized(pod, all_statuses, by_name, phase)),
        (READY, _ready(pod, kept, cready)),
        (CONTAINERS_READY, cready),
        (POD_SCHEDULED, ("True", "", "")),
    ]
    if type(before) is tuple and len(before) == len(generated):
        # The usual sync: the same conditions as before, in the same order (then
        # no other condition is kept): answered without the general merge.
        for prior, (ctype, (st, reason, message)) in zip(before, generated, strict=True):
            if prior.type != ctype or not _is_condition(prior, st, reason, message):
                break
        else:
            return before
    # The transition times are merged as merge_transition_times does, but while
    # each condition is made: statuses are generated on every sync, and making
    # each condition twice (then copying it) was a good part of their cost. A
    # condition equal to its predecessor is the predecessor.
    by_type = {c.type: c for c in before} if before else {}
    conditions = list(merge_transition_times(kept, before, now)) if kept else []
    for ctype, (st, reason, message) in generated:
        old = by_type.get(ctype)
        if old is not None and _is_condition(old, st, reason, message):
            conditions.append(old)
            continue
        when: _dt.datetime | None = now
        if old is not None and old.status == st and old.last_transition_time is not None:
            when = old.last_transition_time
        conditions.append(
            PodCondition(
                type=ctype,
                status=st,
                reason=reason,
                message=message,
                last_transition_time=when,
            )
        )
    if (
        type(before) is tuple
        and len(conditions) == len(before)
        and all(map(operator.is_, conditions, before))
    ):
        return before
    return tuple(conditions)


def _is_condition(old: PodCondition, status: str, reason: str, message: str) -> bool:
    """Whether ``old`` is the condition of its type made now: with these status,
    reason and message, a transition time of its own and nothing else."""
    return (
        old.status == status
        and old.last_transition_time is not None
        and old.reason == reason
        and old.message == message
        and old.last_probe_time is None
        and type(old.extra) is dict
        and not old.extra  # (values.is_empty, written out)
        and type(old.status) is str
    )


def merge_transition_times(
    conditions: Iterable[PodCondition],
    previous: Iterable[PodCondition],
    now: _dt.datetime | None,
) -> tuple[PodCondition, ...]:
    """Keep each condition's ``lastTransitionTime`` while its status is unchanged.

    A condition whose type had the same status before takes the earlier time; a
    new or changed one without a time of its own gets ``now``. A tuple of timed
    conditions that nothing before could change (no previous conditions, or the
    previous ones themselves with no type twice) is returned as it is.
    """
    if (
        type(conditions) is tuple
        and type(previous) is tuple
        and (not previous or (previous is conditions and _types_once(conditions)))
        and all(c.last_transition_time is not None for c in conditions)
    ):
        # The usual cases (a pod's first status; a status generated from the
        # stored one, no condition changed): every condition would be kept.
        return conditions
    before = {c.type: c for c in previous}
    merged = []
    for c in conditions:
        old = before.get(c.type)
        if old is not None and old.status == c.status and old.last_transition_time is not None:
            if c.last_transition_time is not old.last_transition_time:
                c = values.with_transition_time(c, old.last_transition_time)
        elif c.last_transition_time is None and now is not None:
            c = values.with_transition_time(c, now)
        merged.append(c)
    return tuple(merged)


def _types_once(conditions: tuple[PodCondition, ...]) -> bool:
    # With a type twice, a later condition of that type is the "previous" one.
    return len({c.type for c in conditions}) == len(conditions)


def _succeeded_init_ready(
    pod: Pod, statuses: Sequence[ContainerStatus]
) -> tuple[ContainerStatus, ...]:
    # The kubelet's prober marks a regular init container that exited 0 ready;
    # Initialized depends on it, so the rule is applied whatever fold_probes did.
    sidecars = {c.name for c in pod.spec.sidecars}
    out = []
    changed = False
    for s in statuses:
        done = s.state.terminated is not None and s.state.terminated.exit_code == 0
        if done and s.name not in sidecars and s.ready is not True:
            s = s.with_life(s.state, s.last_state, True, s.started)
            changed = True
        out.append(s)
    return tuple(out) if changed else tuple(statuses)


def generate_pod_status(
    pod: Pod,
    runtime_status: PodRuntimeStatus | None,
    *,
    waiting: Mapping[str, tuple[str, str]] | None = None,
    previous: PodStatus | None = None,
    now: _dt.datetime,
    host_ip: str = "",
    pod_ip: str = "",
    pod_is_terminal: bool = False,
    runtime_name: str = "",
    fold_probes: Callable[[Pod, PodStatus], PodStatus] | None = None,
) -> PodStatus:
    """The pod's API status from the runtime's view of it.

    Args:
        pod: The pod (its ``status`` is what the API server last saw; a terminal
            phase there is kept, as upstream).
        runtime_status: What the runtime reports (None or empty: nothing exists).
        waiting: Waiting reasons decided by the syncer, container name ->
            (reason, message): CrashLoopBackOff, ErrImagePull, ImagePullBackOff,
            CreateContainerConfigError, PostStartHookError, ... Applied to
            containers the syncer would start next.
        previous: The last status generated for this pod (from the
            StatusManager); defaults to ``pod.status``.
        now: The time, for ``startTime`` and condition transitions.
        host_ip: The node's IP (``hostIP``/``hostIPs``; the pod IP of a
            host-network pod).
        pod_ip: The pod IP to report when the runtime reports none.
        pod_is_terminal: The pod is being stopped for good: a pod whose
            containers have all stopped becomes Succeeded or Failed.
        runtime_name: Prefix of container ids, e.g. ``containerd``.
        fold_probes: ``ProbeManager.update_pod_status``: folds ``ready`` and
            ``started`` into the container statuses before the conditions are
            computed.

    Returns:
        The new status. Never raises for a well-formed pod.
    """
    old = previous if previous is not None else pod.status
    ips: list[str] = list(runtime_status.ips) if runtime_status else []
    if not ips and pod_ip:
        ips = [pod_ip]
    if not ips and pod.spec.host_network and host_ip:
        ips = [host_ip]
    inits: tuple[ContainerStatus, ...] = ()
    if pod.spec.init_containers:
        inits = container_statuses(
            pod,
            runtime_status,
            pod.spec.init_containers,
            old.init_container_statuses,
            is_init=True,
            waiting=waiting,
            runtime_name=runtime_name,
        )
    regular = container_statuses(
        pod,
        runtime_status,
        pod.spec.containers,
        old.container_statuses,
        is_init=False,
        waiting=waiting,
        runtime_name=runtime_name,
    )
    phase = pod_phase(pod, regular, inits, pod_is_terminal=pod_is_terminal)
    if phase not in TERMINAL_PHASES:
        if old.phase in TERMINAL_PHASES:
            phase = old.phase
        elif pod.status.phase in TERMINAL_PHASES:
            phase = pod.status.phase
    reason = message = ""
    if phase == old.phase:
        # The reason and message belong to the phase: keep them while it lasts.
        reason = old.reason or pod.status.reason
        message = old.message or pod.status.message
    if pod.status.phase in TERMINAL_PHASES and phase != pod.status.phase:
        phase = pod.status.phase  # the API server has it terminal: no way back
    start_time = old.start_time or pod.status.start_time or now
    generated = PodStatus(
        phase=phase,
        reason=reason,
        message=message,
        host_ip=host_ip,
        host_ips=values.host_ips(host_ip, old.host_ips),
        pod_ip=ips[0] if ips else "",
        pod_ips=values.pod_ips(ips, old.pod_ips),
        start_time=start_time,
        init_container_statuses=inits,
        container_statuses=regular,
        qos_class=values.pod_qos_class(pod),
        nominated_node_name=old.nominated_node_name,
    )
    status = fold_probes(pod, generated) if fold_probes is not None else generated
    inits = status.init_container_statuses
    if inits:
        inits = _succeeded_init_ready(pod, inits)
    # Statuses equal to the previous ones are the previous ones: an unchanged pod
    # then gets its previous status back, and comparing it costs nothing.
    inits = values.reuse_statuses(inits, old.init_container_statuses)
    regular = values.reuse_statuses(status.container_statuses, old.container_statuses)
    conditions = _conditions(
        pod,
        status.phase,
        (*inits, *regular) if inits else regular,
        runtime_status,
        old.conditions,
        now,
    )
    return values.pod_status_with(
        old,
        status,
        init_container_statuses=inits,
        container_statuses=regular,
        conditions=conditions,
    )
