"""What to do for a pod: the kubelet's ``computePodActions``, pure.

Given the pod as wanted and the pod as the runtime reports it, decide:

* whether the sandbox must be (re)created (missing, not ready, more than one
  ready, or not in the host network a hostNetwork pod wants), with which
  attempt number, and
  whether everything running must be killed first;
* which init containers to start: strictly in order; a failed regular init
  container is restarted unless ``restartPolicy`` is ``Never`` (then the pod is
  killed and fails); restartable init containers (sidecars) are started in order,
  each counting as done once it runs (and its startup probe succeeded), and are
  restarted whenever they exit or fail a probe, whatever the pod's restartPolicy;
* which regular containers to start, only once initialisation is complete, by the
  pod's restartPolicy (``Always``, ``OnFailure``: non-zero exits, ``Never``);
* which running containers to kill: spec hash changed (killed and restarted
  whatever the restartPolicy), liveness or startup probe failed (restarted per
  restartPolicy), state unknown, or not in the spec at all;
* and whether the whole pod is to be killed because nothing is left to run.

The function reads no clock and calls no runtime: every rule is a table test.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

import attrs

from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerState,
    ContainerStatus,
    PodSandboxState,
)
from kubelet_kit.podsync import configs

if TYPE_CHECKING:
    from kubelet_kit.api import Container, Pod
    from kubelet_kit.container.pods import PodRuntimeStatus

__all__ = [
    "KILL_REASON_LIVENESS",
    "KILL_REASON_POST_START",
    "KILL_REASON_STARTUP",
    "KILL_REASON_UNKNOWN",
    "ContainerToKill",
    "PodActions",
    "compute_pod_actions",
    "container_changed",
    "init_containers_done",
    "is_init_container_failed",
    "sandbox_changed",
    "should_container_be_restarted",
    "should_restart_on_failure",
]

# The kubelet's containerKillReason values.
KILL_REASON_STARTUP = "StartupProbe"
KILL_REASON_LIVENESS = "LivenessProbe"
KILL_REASON_POST_START = "FailedPostStartHook"
KILL_REASON_UNKNOWN = "Unknown"

# kubecontainer.ContainerStateUnknown, as the kubelet quotes it in messages.
_UNKNOWN_STATE = '"unknown"'


@attrs.frozen
class ContainerToKill:
    """A running container to stop.

    Attributes:
        container_id: The runtime's id of the container.
        name: The container's name.
        message: Why, in the kubelet's words (the ``Killing`` event message).
        reason: The kubelet's kill reason (``LivenessProbe``, ``StartupProbe``,
            ``Unknown``, or "" for a spec change or an unwanted container).
        container: The container's spec, or None when it is not in the pod spec.
    """

    container_id: str
    name: str
    message: str
    reason: str = ""
    container: Container | None = None


@attrs.frozen
class PodActions:
    """What one sync must do (the kubelet's ``podActions``).

    Attributes:
        kill_pod: Stop every container and the sandbox(es) first.
        create_sandbox: Create a new sandbox (after killing the pod).
        sandbox_id: The current sandbox id ("" when there is none to reuse).
        attempt: The sandbox attempt number to create with (or of the current one).
        init_containers_to_start: Indexes into ``spec.init_containers``, in order.
        containers_to_start: Indexes into ``spec.containers``, in order.
        containers_to_kill: Running containers to stop, in decision order.
    """

    kill_pod: bool = False
    create_sandbox: bool = False
    sandbox_id: str = ""
    attempt: int = 0
    init_containers_to_start: tuple[int, ...] = ()
    containers_to_start: tuple[int, ...] = ()
    containers_to_kill: tuple[ContainerToKill, ...] = ()


# ----------------------------------------------------------------------- helpers


def should_restart_on_failure(pod: Pod) -> bool:
    """Whether failed containers are restarted (``restartPolicy`` is not ``Never``)."""
    return pod.spec.restart_policy != "Never"


def is_init_container_failed(status: ContainerStatus) -> bool:
    """The kubelet's ``isInitContainerFailed``: OOM-killed, exited non-zero, or unknown."""
    if status.reason == "OOMKilled":
        return True
    if status.state is ContainerState.EXITED and status.exit_code != 0:
        return True
    return status.state is ContainerState.UNKNOWN


def _succeeded(status: ContainerStatus | None) -> bool:
    return status is not None and status.state is ContainerState.EXITED and status.exit_code == 0


def sandbox_changed(pod: Pod, status: PodRuntimeStatus) -> tuple[bool, int, str]:
    """The kubelet's ``PodSandboxChanged``: must a new sandbox be created?

    Returns:
        ``(create, attempt, sandbox_id)``: a new sandbox is needed when there is
        none, when more than one is ready, when the newest is not ready, or when
        the pod wants the host network and the sandbox is not in it; ``attempt``
        is the attempt to create with (the newest's + 1) or the current one's.
    """
    if not status.sandbox_statuses:
        return True, 0, ""
    newest = status.sandbox_statuses[0]
    ready = sum(1 for s in status.sandbox_statuses if s.state is PodSandboxState.READY)
    attempt = newest.metadata.attempt
    if ready > 1 or newest.state is not PodSandboxState.READY:
        return True, attempt + 1, newest.id
    if pod.spec.host_network and not newest.namespace_options.host_network:
        # Upstream recreates on a change either way. The other direction (a
        # host-network sandbox for a pod-network pod) is left alone: a pod's spec
        # cannot change under the same uid, and runtimes without pod networking
        # (host processes) put every sandbox in the host's network namespace,
        # which a new sandbox would not change.
        return True, attempt + 1, ""
    # Upstream also recreates a non-host-network sandbox that has no IP. Runtimes
    # without pod networking (host processes) report none, so that rule is left out.
    return False, attempt, newest.id


def container_changed(
    container: Container, status: ContainerStatus, container_hash: Callable[[Container], str]
) -> bool:
    """Whether the running container was made from another spec (hash annotation).

    A container without the hash annotation is taken as unchanged: a runtime that
    drops annotations would otherwise have its containers restarted forever.
    """
    recorded = status.annotations.get(kl.CONTAINER_HASH)
    if not recorded:
        return False
    return recorded.lower() != container_hash(container).lower()


def should_container_be_restarted(container: Container, pod: Pod, status: PodRuntimeStatus) -> bool:
    """The kubelet's ``ShouldContainerBeRestarted`` for a container not running.

    Never once the pod is being deleted; always for a container never started (or
    whose statuses are all gone), created but not started, or in an unknown state;
    otherwise by ``restartPolicy``: ``Never`` no, ``OnFailure`` only after a
    non-zero exit, ``Always`` yes.
    """
    if pod.metadata.deletion_timestamp is not None:
        return False
    current = status.find_container_status(container.name)
    if current is None:
        return True
    if current.state is ContainerState.RUNNING:
        return False
    if current.state in (ContainerState.UNKNOWN, ContainerState.CREATED):
        return True
    if pod.spec.restart_policy == "Never":
        return False
    if pod.spec.restart_policy == "OnFailure":
        return current.exit_code != 0
    return True


def init_containers_done(pod: Pod, status: PodRuntimeStatus) -> bool:
    """Whether the pod's initialisation finished (the ``done`` of the kubelet's
    ``findNextInitContainerToRun``): no init containers, a regular container runs,
    or the last init container exited and none failed."""
    inits = pod.spec.init_containers
    if not inits:
        return True
    for container in pod.spec.containers:
        current = status.find_container_status(container.name)
        if current is not None and current.state is ContainerState.RUNNING:
            return True
    for container in reversed(inits):
        current = status.find_container_status(container.name)
        if current is not None and is_init_container_failed(current):
            return False
    for i in range(len(inits) - 1, -1, -1):
        current = status.find_container_status(inits[i].name)
        if current is None:
            continue
        if current.state is ContainerState.RUNNING:
            return False
        if current.state is ContainerState.EXITED:
            return i == len(inits) - 1
    return False


class _Plan:
    """Mutable working state while the actions are computed."""

    def __init__(self) -> None:
        self.kill_pod = False
        self.init_to_start: list[int] = []
        self.to_start: list[int] = []
        self.to_kill: dict[str, ContainerToKill] = {}

    def kill(
        self,
        status: ContainerStatus,
        message: str,
        reason: str = "",
        container: Container | None = None,
    ) -> None:
        self.to_kill[status.id] = ContainerToKill(
            status.id, status.metadata.name, message, reason, container
        )


def _compute_init_actions(
    pod: Pod,
    status: PodRuntimeStatus,
    plan: _Plan,
    container_hash: Callable[[Container], str],
    liveness_failed: Collection[str],
    startup_failed: Collection[str],
    startup_pending: Collection[str],
) -> bool:
    """The kubelet's ``computeInitContainerActions``; returns whether the pod has
    initialised. Sets ``plan.kill_pod`` when a failed init container ends the pod."""
    inits = pod.spec.init_containers
    if not inits:
        return True
    # A regular container that exists and was created or runs means every init
    # container ran at some point, even if the runtime no longer holds them.
    initialized = any(
        (s := status.find_container_status(c.name)) is not None
        and s.state in (ContainerState.CREATED, ContainerState.RUNNING)
        for c in pod.spec.containers
    )
    previously_initialized = initialized
    restart_on_failure = should_restart_on_failure(pod)
    to_start: list[int] = []  # collected backwards, reversed at the end

    # Walk backwards: completed init containers may have been removed from the
    # runtime, so the last one with a status tells how far initialisation got.
    for i in range(len(inits) - 1, -1, -1):
        container = inits[i]
        current = status.find_container_status(container.name)
        if current is None:
            if previously_initialized and container.is_sidecar:
                to_start.append(i)
            continue
        if previously_initialized and not container.is_sidecar:
            continue  # after initialisation only sidecars are kept running

        state = current.state
        if state is ContainerState.CREATED:
            # Created but never started: the start failed; try again.
            to_start.append(i)
        elif state is ContainerState.RUNNING:
            if container.is_sidecar:
                _running_sidecar(
                    pod,
                    i,
                    container,
                    current,
                    plan,
                    to_start,
                    previously_initialized,
                    container_hash,
                    liveness_failed,
                    startup_failed,
                    startup_pending,
                )
                if i == len(inits) - 1 and _sidecar_started(
                    container, current, startup_pending, startup_failed
                ):
                    initialized = True
            # A regular init container that runs: wait for it to finish.
        elif state is ContainerState.EXITED:
            if container.is_sidecar:
                to_start.append(i)
            elif is_init_container_failed(current):
                if not restart_on_failure:
                    plan.kill_pod = True
                    plan.init_to_start = []
                    return False
                to_start.append(i)
            elif i == len(inits) - 1:
                initialized = True
            else:
                to_start.append(i + 1)
        else:  # unknown
            message = f"Init container is in {_UNKNOWN_STATE} state, try killing it before restart"
            if not container.is_sidecar and not restart_on_failure:
                plan.kill_pod = True
                plan.init_to_start = []
                return False
            plan.kill(current, message, KILL_REASON_UNKNOWN, container)
            to_start.append(i)
        previously_initialized = True

    if not previously_initialized:
        to_start.append(0)  # nothing started yet: the first one
    plan.init_to_start = list(dict.fromkeys(reversed(to_start)))
    return initialized


def _sidecar_started(
    container: Container,
    current: ContainerStatus,
    startup_pending: Collection[str],
    startup_failed: Collection[str],
) -> bool:
    if container.startup_probe is None:
        return True
    return current.id not in startup_pending and current.id not in startup_failed


def _running_sidecar(
    pod: Pod,
    i: int,
    container: Container,
    current: ContainerStatus,
    plan: _Plan,
    to_start: list[int],
    previously_initialized: bool,
    container_hash: Callable[[Container], str],
    liveness_failed: Collection[str],
    startup_failed: Collection[str],
    startup_pending: Collection[str],
) -> None:
    if container.startup_probe is not None:
        if current.id in startup_failed:
            plan.kill(
                current,
                f"Init container {container.name} failed startup probe",
                KILL_REASON_STARTUP,
                container,
            )
            to_start.append(i)
            return
        if current.id in startup_pending:
            return  # not started yet: the next init container waits
    if i != len(pod.spec.init_containers) - 1 and not previously_initialized:
        to_start.append(i + 1)  # started for the first time: on to the next one
    if container_changed(container, current, container_hash):
        plan.kill(current, f"Init container {container.name} definition changed", "", container)
        to_start.append(i)
        return
    if container.liveness_probe is not None and current.id in liveness_failed:
        plan.kill(
            current,
            f"Init container {container.name} failed liveness probe",
            KILL_REASON_LIVENESS,
            container,
        )
        to_start.append(i)


# ----------------------------------------------------------------------- the rules


def compute_pod_actions(
    pod: Pod,
    runtime_status: PodRuntimeStatus,
    *,
    container_hash: Callable[[Container], str] | None = None,
    liveness_failed: Collection[str] = frozenset(),
    startup_failed: Collection[str] = frozenset(),
    startup_pending: Collection[str] = frozenset(),
) -> PodActions:
    """Decide what a sync must do for ``pod`` (the kubelet's ``computePodActions``).

    Args:
        pod: The pod as wanted.
        runtime_status: The pod as the runtime reports it (statuses newest first).
        container_hash: The spec hash of a container, as recorded in the
            ``io.kubernetes.container.hash`` annotation of the containers made;
            :func:`kubelet_kit.podsync.configs.container_hash` by default.
        liveness_failed: Ids of containers whose liveness probe failed.
        startup_failed: Ids of containers whose startup probe failed.
        startup_pending: Ids of running containers with a startup probe that has
            not succeeded yet (a sidecar counts as started only after it).

    Returns:
        The actions, with indexes into the pod's container lists.
    """
    if container_hash is None:
        container_hash = configs.container_hash
    create, attempt, sandbox_id = sandbox_changed(pod, runtime_status)
    plan = _Plan()
    plan.kill_pod = create
    spec = pod.spec

    if create:
        if (
            not should_restart_on_failure(pod)
            and attempt != 0
            and runtime_status.container_statuses
        ):
            # Containers ran and must not run again: do not make a sandbox just to
            # find that out; kill what is left.
            return PodActions(True, False, sandbox_id, attempt)
        to_start = [
            i
            for i, c in enumerate(spec.containers)
            if not (
                spec.restart_policy == "OnFailure"
                and _succeeded(runtime_status.find_container_status(c.name))
            )
        ]
        if not to_start and init_containers_done(pod, runtime_status):
            return PodActions(True, False, sandbox_id, attempt)
        if spec.init_containers:
            return PodActions(True, True, sandbox_id, attempt, init_containers_to_start=(0,))
        return PodActions(True, True, sandbox_id, attempt, containers_to_start=tuple(to_start))

    initialized = _compute_init_actions(
        pod,
        runtime_status,
        plan,
        container_hash,
        liveness_failed,
        startup_failed,
        startup_pending,
    )
    if plan.kill_pod or not initialized:
        _kill_unknown_names(pod, runtime_status, plan)
        return _freeze(plan, sandbox_id, attempt, create)

    keep = 0
    for idx, container in enumerate(spec.containers):
        current = runtime_status.find_container_status(container.name)
        if current is None or current.state is not ContainerState.RUNNING:
            if should_container_be_restarted(container, pod, runtime_status):
                plan.to_start.append(idx)
                if current is not None and current.state is ContainerState.UNKNOWN:
                    plan.kill(
                        current,
                        f"Container is in {_UNKNOWN_STATE} state, try killing it before restart",
                        KILL_REASON_UNKNOWN,
                        container,
                    )
            continue
        restart = should_restart_on_failure(pod)
        if container_changed(container, current, container_hash):
            message, reason = f"Container {container.name} definition changed", ""
            restart = True  # a new spec runs whatever the restart policy
        elif current.id in liveness_failed:
            message = f"Container {container.name} failed liveness probe"
            reason = KILL_REASON_LIVENESS
        elif current.id in startup_failed:
            message = f"Container {container.name} failed startup probe"
            reason = KILL_REASON_STARTUP
        else:
            keep += 1
            continue
        if restart:
            message += ", will be restarted"
            plan.to_start.append(idx)
        plan.kill(current, message, reason, container)

    if keep == 0 and not plan.to_start:
        plan.kill_pod = True
        # Sidecars must not keep a finished pod alive.
        plan.init_to_start = []
    _kill_unknown_names(pod, runtime_status, plan)
    return _freeze(plan, sandbox_id, attempt, create)


def _kill_unknown_names(pod: Pod, runtime_status: PodRuntimeStatus, plan: _Plan) -> None:
    """Running containers whose name the spec no longer has are killed."""
    names = {c.name for c in pod.spec.all_containers()}
    for current in runtime_status.running_container_statuses():
        if current.metadata.name not in names and current.id not in plan.to_kill:
            plan.kill(current, f"Container {current.metadata.name} is not in the pod spec")


def _freeze(plan: _Plan, sandbox_id: str, attempt: int, create: bool) -> PodActions:
    return PodActions(
        kill_pod=plan.kill_pod,
        create_sandbox=create,
        sandbox_id=sandbox_id,
        attempt=attempt,
        init_containers_to_start=tuple(plan.init_to_start),
        containers_to_start=tuple(plan.to_start),
        containers_to_kill=tuple(plan.to_kill.values()),
    )
