"""The relist diff: which events one pod's change of containers produces.

Pure functions, no event loop. A relist turns each runtime pod into a map
``container id -> PlegContainerState`` (sandboxes count as containers) and
compares it with the map of the previous relist, with the kubelet's rules:

====================  ===============  ==========================================
old state             new state        events
====================  ===============  ==========================================
any                   same             none
any                   running          ContainerStarted
any                   exited           ContainerDied
any                   unknown          ContainerChanged (computed, never sent)
exited                non-existent     ContainerRemoved
running, unknown      non-existent     ContainerDied, ContainerRemoved
====================  ===============  ==========================================

Created containers count as unknown, like the kubelet, which does not act on them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerInfo,
    ContainerState,
    PodSandbox,
    PodSandboxState,
)
from kubelet_kit.container.pods import RuntimePod
from kubelet_kit.pleg.interfaces import PodLifecycleEvent, PodLifecycleEventType

__all__ = [
    "CONTAINER_STATES",
    "SANDBOX_STATES",
    "PlegContainerState",
    "compute_pod_events",
    "container_states",
    "diff_pods",
    "generate_events",
    "sendable",
    "states_by_pod",
]


class PlegContainerState(enum.Enum):
    """A container's state as the relist sees it (the kubelet's plegContainerState)."""

    RUNNING = "running"
    EXITED = "exited"
    UNKNOWN = "unknown"
    NON_EXISTENT = "non-existent"


#: The relist state of a container in each runtime state.
CONTAINER_STATES: Mapping[ContainerState, PlegContainerState] = {
    ContainerState.RUNNING: PlegContainerState.RUNNING,
    ContainerState.EXITED: PlegContainerState.EXITED,
    ContainerState.CREATED: PlegContainerState.UNKNOWN,
    ContainerState.UNKNOWN: PlegContainerState.UNKNOWN,
}
#: The relist state of a sandbox (counted as a container) in each runtime state.
SANDBOX_STATES: Mapping[PodSandboxState, PlegContainerState] = {
    PodSandboxState.READY: PlegContainerState.RUNNING,
    PodSandboxState.NOTREADY: PlegContainerState.EXITED,
}
_FROM_CONTAINER = CONTAINER_STATES
_FROM_SANDBOX = SANDBOX_STATES

_READY = PodSandboxState.READY
_STARTED = PodLifecycleEventType.CONTAINER_STARTED
_DIED = PodLifecycleEventType.CONTAINER_DIED
_REMOVED = PodLifecycleEventType.CONTAINER_REMOVED
_CHANGED = PodLifecycleEventType.CONTAINER_CHANGED
_NON_EXISTENT = PlegContainerState.NON_EXISTENT


def container_states(pod: RuntimePod | None) -> dict[str, PlegContainerState]:
    """The relist state of every container and sandbox of ``pod`` by id.

    Containers come before sandboxes, the order in which the kubelet reports a
    pod's events. ``None`` (a pod that is gone) has no containers.
    """
    if pod is None:
        return {}
    from_container, from_sandbox = _FROM_CONTAINER, _FROM_SANDBOX
    states = {c.id: from_container[c.state] for c in pod.containers}
    for s in pod.sandboxes:
        states[s.id] = from_sandbox[s.state]
    return states


def states_by_pod(
    sandboxes: Iterable[PodSandbox], containers: Iterable[ContainerInfo]
) -> dict[str, dict[str, PlegContainerState]]:
    """Container states of every pod, straight from the runtime's lists.

    Equal to ``{p.uid: container_states(p) for p in group_pods(sandboxes,
    containers)}``, in one pass and without building the pods: this is the part
    of a relist that runs for every container every second, so it avoids
    anything but dict operations (even hashing enum members, which runs Python
    code, is replaced by identity tests).
    """
    key = kl.POD_UID
    running, exited, unknown = (
        PlegContainerState.RUNNING,
        PlegContainerState.EXITED,
        PlegContainerState.UNKNOWN,
    )
    c_running, c_exited, s_ready = ContainerState.RUNNING, ContainerState.EXITED, _READY
    result: dict[str, dict[str, PlegContainerState]] = {}
    get = result.get
    for c in containers:
        uid = c.labels.get(key)
        if not uid:
            continue
        st = c.state
        state = running if st is c_running else exited if st is c_exited else unknown
        states = get(uid)
        if states is None:
            result[uid] = {c.id: state}
        else:
            states[c.id] = state
    for s in sandboxes:
        uid = s.labels.get(key)
        if not uid:
            continue
        state = running if s.state is s_ready else exited
        states = get(uid)
        if states is None:
            result[uid] = {s.id: state}
        else:
            states[s.id] = state
    return result


def generate_events(
    pod_uid: str,
    container_id: str,
    old: PlegContainerState,
    new: PlegContainerState,
) -> list[PodLifecycleEvent]:
    """The events for one container going from ``old`` to ``new`` (see the table above)."""
    if old is new:
        return []
    if new is PlegContainerState.RUNNING:
        return [PodLifecycleEvent(pod_uid, _STARTED, container_id)]
    if new is PlegContainerState.EXITED:
        return [PodLifecycleEvent(pod_uid, _DIED, container_id)]
    if new is PlegContainerState.UNKNOWN:
        return [PodLifecycleEvent(pod_uid, _CHANGED, container_id)]
    if old is PlegContainerState.EXITED:
        # Its death was reported when it exited.
        return [PodLifecycleEvent(pod_uid, _REMOVED, container_id)]
    return [
        PodLifecycleEvent(pod_uid, _DIED, container_id),
        PodLifecycleEvent(pod_uid, _REMOVED, container_id),
    ]


def compute_pod_events(
    pod_uid: str,
    old: Mapping[str, PlegContainerState],
    new: Mapping[str, PlegContainerState],
) -> list[PodLifecycleEvent]:
    """Every event of one pod between two relists, old containers first.

    Includes ContainerChanged events; drop them with :func:`sendable` before
    sending, as the kubelet does.
    """
    if old == new:
        return []
    events: list[PodLifecycleEvent] = []
    for cid, old_state in old.items():
        new_state = new.get(cid, _NON_EXISTENT)
        if new_state is not old_state:
            events.extend(generate_events(pod_uid, cid, old_state, new_state))
    for cid, new_state in new.items():
        if cid not in old:
            events.extend(generate_events(pod_uid, cid, _NON_EXISTENT, new_state))
    return events


def diff_pods(
    old: Mapping[str, Mapping[str, PlegContainerState]],
    new: Mapping[str, Mapping[str, PlegContainerState]],
) -> dict[str, list[PodLifecycleEvent]]:
    """Events of every pod between two relists, keyed by pod uid.

    Args:
        old: Container states by pod uid at the previous relist.
        new: Container states by pod uid now; a pod missing here is gone.

    Returns:
        Only the pods that have events (ContainerChanged included).
    """
    result: dict[str, list[PodLifecycleEvent]] = {}
    empty: dict[str, PlegContainerState] = {}
    for uid, old_states in old.items():
        events = compute_pod_events(uid, old_states, new.get(uid, empty))
        if events:
            result[uid] = events
    for uid, new_states in new.items():
        if uid not in old:
            events = compute_pod_events(uid, empty, new_states)
            if events:
                result[uid] = events
    return result


def sendable(events: Iterable[PodLifecycleEvent]) -> list[PodLifecycleEvent]:
    """The events a PLEG sends: all but ContainerChanged, which nothing acts on."""
    return [e for e in events if e.type is not _CHANGED]
