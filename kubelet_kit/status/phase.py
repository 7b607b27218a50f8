"""A pod's phase from its container statuses, by the kubelet's rules (``getPhase``).

The rules, in the order the kubelet applies them:

* a regular init container that failed makes the pod ``Failed`` when the pod's
  ``restartPolicy`` is ``Never`` (it will not be retried);
* the pod is ``Pending`` while a regular init container has not succeeded, while a
  sidecar (restartable init container) has not started and no regular container
  has run yet, or while any container waits without ever having terminated;
* it is ``Running`` when every container is known and at least one runs;
* when everything has stopped: a pod that is terminal (being shut down for good)
  is ``Succeeded`` if every regular container exited 0 and ``Failed`` otherwise
  (static pods excepted, as upstream); else ``restartPolicy: Always`` keeps it
  ``Running``, all-succeeded gives ``Succeeded``, ``Never`` gives ``Failed`` and
  ``OnFailure`` gives ``Running`` (a container is being restarted);
* anything else (a container with no status) is ``Pending``.

Sidecars count toward ``running`` but a stopped sidecar never counts as stopped:
it does not decide whether the pod succeeded. Upstream's ContainerRestartRules
feature (per-container restart rules, alpha) is not modelled: the pod's
``restartPolicy`` decides, as in upstream's default configuration.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from kubelet_kit.api import ContainerStatus, Pod
from kubelet_kit.api.podsource import CONFIG_SOURCE_ANNOTATION, is_static_pod

__all__ = [
    "CONFIG_SOURCE_ANNOTATION",
    "FAILED",
    "PENDING",
    "RUNNING",
    "SUCCEEDED",
    "TERMINAL_PHASES",
    "UNKNOWN",
    "has_any_regular_container_started",
    "is_static_pod",
    "pod_phase",
]

PENDING: Final = "Pending"
RUNNING: Final = "Running"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
UNKNOWN: Final = "Unknown"
#: Phases a pod never leaves once it has reached them.
TERMINAL_PHASES: Final = frozenset({SUCCEEDED, FAILED})


def _first_by_name(statuses: Iterable[ContainerStatus]) -> dict[str, ContainerStatus]:
    """The first status of each container name (what a search by name finds).

    One pass instead of a search per container: a pod's phase and conditions
    look up every container of the spec, on every sync.
    """
    found: dict[str, ContainerStatus] = {}
    for status in statuses:
        if status.name not in found:
            found[status.name] = status
    return found


def has_any_regular_container_started(pod: Pod, statuses: Iterable[ContainerStatus]) -> bool:
    """Whether any regular (non-init) container is running or has terminated.

    The kubelet uses this to tell "initialising" from "initialised, but a sidecar
    is restarting": once a regular container has run, the pod stays initialised.
    """
    names = {c.name for c in pod.spec.containers}
    return any(
        s.name in names and (s.state.running is not None or s.state.terminated is not None)
        for s in statuses
    )


def _last_terminated_exit(status: ContainerStatus) -> int | None:
    terminated = status.last_state.terminated
    return None if terminated is None else terminated.exit_code


def pod_phase(
    pod: Pod,
    container_statuses: Sequence[ContainerStatus],
    init_container_statuses: Sequence[ContainerStatus] = (),
    *,
    pod_is_terminal: bool = False,
    pod_has_initialized: bool | None = None,
) -> str:
    """Compute the pod's phase from its API container statuses (upstream ``getPhase``).

    Args:
        pod: The pod; its spec's containers, init containers and restart policy
            are read.
        container_statuses: Statuses of the regular containers (any order; a
            container without a status counts as unknown).
        init_container_statuses: Statuses of the init containers, sidecars
            included.
        pod_is_terminal: The pod is being shut down for good (deleted, evicted,
            or its containers will not be restarted): a pod whose containers have
            all stopped then ends ``Succeeded`` or ``Failed`` whatever its restart
            policy.
        pod_has_initialized: Whether a regular container has already run in the
            pod's current sandbox. When None it is derived from the statuses
            (:func:`has_any_regular_container_started`).

    Returns:
        ``"Pending"``, ``"Running"``, ``"Succeeded"`` or ``"Failed"``.
    """
    spec = pod.spec
    info = [*container_statuses, *init_container_statuses]
    by_name = _first_by_name(info)

    pending_regular_init = 0
    pending_sidecars = 0
    failed_init = 0
    for container in spec.init_containers:
        if container.is_sidecar:
            continue
        status = by_name.get(container.name)
        if status is None:
            pending_regular_init += 1
            continue
        state = status.state
        if state.running is not None:
            pending_regular_init += 1
        elif state.terminated is not None:
            if state.terminated.exit_code != 0:
                failed_init += 1
        elif state.waiting is not None:
            last_exit = _last_terminated_exit(status)
            if last_exit is None:
                pending_regular_init += 1
            elif last_exit != 0:
                failed_init += 1
        else:
            pending_regular_init += 1

    unknown = running = waiting = stopped = succeeded = 0
    for container in spec.init_containers:
        if not container.is_sidecar:
            continue
        status = by_name.get(container.name)
        if status is None:
            unknown += 1
            continue
        state = status.state
        if state.running is not None:
            if not status.started:
                pending_sidecars += 1
            running += 1
        elif state.terminated is not None:
            pass  # a stopped sidecar does not decide the pod's phase
        elif state.waiting is not None:
            if status.last_state.terminated is None:
                pending_sidecars += 1
                waiting += 1
        else:
            pending_sidecars += 1
            unknown += 1

    for container in spec.containers:
        status = by_name.get(container.name)
        if status is None:
            unknown += 1
            continue
        state = status.state
        if state.running is not None:
            running += 1
        elif state.terminated is not None:
            stopped += 1
            if state.terminated.exit_code == 0:
                succeeded += 1
        elif state.waiting is not None:
            if status.last_state.terminated is not None:
                stopped += 1
            else:
                waiting += 1
        else:
            unknown += 1

    if failed_init > 0 and spec.restart_policy == "Never":
        return FAILED
    if pending_regular_init > 0:
        return PENDING
    if pending_sidecars > 0:
        # Asked only here, where it decides something.
        if pod_has_initialized is None:
            pod_has_initialized = has_any_regular_container_started(pod, info)
        if not pod_has_initialized:
            return PENDING
    if waiting > 0:
        return PENDING
    if running > 0 and unknown == 0:
        return RUNNING
    if running == 0 and stopped > 0 and unknown == 0:
        if pod_is_terminal and not is_static_pod(pod):
            return SUCCEEDED if stopped == succeeded else FAILED
        if spec.restart_policy == "Always":
            return RUNNING
        if stopped == succeeded:
            return SUCCEEDED
        if spec.restart_policy == "Never":
            return FAILED
        return RUNNING
    return PENDING
