"""Cheap construction of status values: shared parts, reuse, direct copies.

A pod's status is generated on every sync, most often with nothing changed. The
helpers here keep that cheap without changing a single value:

* frozen parts that are the same for many statuses (an empty state, the default
  waiting states) are made once;
* a part equal to its predecessor's (a running state since the same instant, a
  container status, a condition) is the predecessor itself, so the status
  manager's "did anything change?" is answered by identity, element by element;
* a copy with a few fields changed calls the constructor directly (``attrs.evolve``
  looks the fields up on every call). Each copy lists every field of its model:
  ``tests/test_status_values.py`` fails when a model gains a field they miss.

Reuse is decided by value: a predecessor is reused only when every field, extra
fields included, is what the new value would have been, and timestamps only when
they are equal *and* in the same time zone (equal instants in other zones print
differently).
"""

from __future__ import annotations

import datetime as _dt
import functools
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Final

from kubelet_kit.api import (
    ContainerState,
    ContainerStateWaiting,
    ContainerStatus,
    Pod,
    PodCondition,
    PodIP,
    PodSpec,
    PodStatus,
    qos_class,
)
from kubelet_kit.api.status import same_mapping

#: The empty state (a status's ``lastState`` until a container restarts).
NO_STATE: Final = ContainerState()
#: Waiting without a reason (created, or in an unknown state, and not yet started).
WAITING: Final = ContainerState(waiting=ContainerStateWaiting())


@functools.cache
def waiting_state(reason: str) -> ContainerState:
    """The waiting state with ``reason`` and no message; one object per reason.

    Only for the generator's own fixed reasons (ContainerCreating,
    PodInitializing): the cache holds one entry per distinct reason.
    """
    return ContainerState(waiting=ContainerStateWaiting(reason=reason))


def is_empty(mapping: Mapping[str, Any]) -> bool:
    """Whether ``mapping`` is an empty plain dict (what a model's default is).

    (The checks made for every container on every sync write it out instead:
    ``type(m) is dict and not m``, a call less each time.)
    """
    return type(mapping) is dict and not mapping


def same_time(a: _dt.datetime | None, b: _dt.datetime | None) -> bool:
    """Whether two optional timestamps are the same value, written the same way."""
    if a is None or b is None:
        return a is b
    return a == b and a.tzinfo is b.tzinfo and a.fold == b.fold


def is_empty_state(state: ContainerState) -> bool:
    """Whether ``state`` equals :data:`NO_STATE`."""
    extra = state.extra
    return (
        state.waiting is None
        and state.running is None
        and state.terminated is None
        and type(extra) is dict
        and not extra
    )


def is_running_since(state: ContainerState, started_at: _dt.datetime | None) -> bool:
    """Whether ``state`` equals ``running`` since ``started_at`` and nothing else."""
    running = state.running
    if running is None or state.waiting is not None or state.terminated is not None:
        return False
    extra, running_extra = state.extra, running.extra
    return (
        type(extra) is dict
        and not extra
        and type(running_extra) is dict
        and not running_extra
        and same_time(running.started_at, started_at)
    )


def is_terminated_as(
    state: ContainerState,
    *,
    exit_code: int,
    reason: str,
    message: str,
    started_at: _dt.datetime | None,
    finished_at: _dt.datetime | None,
    container_id: str,
) -> bool:
    """Whether ``state`` equals ``terminated`` with these fields (and no signal)."""
    terminated = state.terminated
    return (
        terminated is not None
        and state.waiting is None
        and state.running is None
        and is_empty(state.extra)
        and is_empty(terminated.extra)
        and terminated.signal is None
        and type(terminated.exit_code) is type(exit_code)
        and terminated.exit_code == exit_code
        and terminated.reason == reason
        and terminated.message == message
        and terminated.container_id == container_id
        and same_time(terminated.started_at, started_at)
        and same_time(terminated.finished_at, finished_at)
    )


def container_status(
    old: ContainerStatus | None,
    *,
    name: str,
    state: ContainerState,
    last_state: ContainerState,
    restart_count: int,
    image: str,
    image_id: str = "",
    container_id: str = "",
    started: bool,
) -> ContainerStatus:
    """The status made from these fields (not ready, no resources, no extra
    fields), or ``old`` itself when it equals it. ``state`` and ``last_state``
    must be ``old``'s own objects to be reused: whoever reuses parts passes them."""
    if (
        old is not None
        and old.state is state
        and old.last_state is last_state
        and old.ready is False
        and old.started is started
        and type(old.restart_count) is int
        and old.restart_count == restart_count
        and old.name == name
        and old.image == image
        and old.image_id == image_id
        and old.container_id == container_id
        and is_empty(old.allocated_resources)
        and old.resources is None
        and is_empty(old.extra)
    ):
        return old
    return ContainerStatus(
        name=name,
        state=state,
        last_state=last_state,
        restart_count=restart_count,
        image=image,
        image_id=image_id,
        container_id=container_id,
        started=started,
    )


def with_transition_time(condition: PodCondition, when: _dt.datetime | None) -> PodCondition:
    """``condition`` with another ``lastTransitionTime``."""
    return PodCondition(
        extra=condition.extra,
        type=condition.type,
        status=condition.status,
        reason=condition.reason,
        message=condition.message,
        last_probe_time=condition.last_probe_time,
        last_transition_time=when,
    )


def pod_status_with(
    old: PodStatus,
    status: PodStatus,
    *,
    init_container_statuses: tuple[ContainerStatus, ...],
    container_statuses: tuple[ContainerStatus, ...],
    conditions: tuple[PodCondition, ...],
) -> PodStatus:
    """``status.with_parts`` of these, or ``old`` itself when it equals it (the
    three tuples must be ``old``'s own objects to be reused)."""
    if (
        init_container_statuses is old.init_container_statuses
        and container_statuses is old.container_statuses
        and conditions is old.conditions
        and status.phase == old.phase
        and status.reason == old.reason
        and status.message == old.message
        and status.host_ip == old.host_ip
        and status.pod_ip == old.pod_ip
        and status.host_ips is old.host_ips
        and status.pod_ips is old.pod_ips
        and same_time(status.start_time, old.start_time)
        and status.nominated_node_name == old.nominated_node_name
        and status.qos_class == old.qos_class
        and (
            status.ephemeral_container_statuses is old.ephemeral_container_statuses
            or (
                type(old.ephemeral_container_statuses) is tuple
                and not status.ephemeral_container_statuses
                and not old.ephemeral_container_statuses
            )
        )
        and same_mapping(status.extra, old.extra)
    ):
        return old
    return status.with_parts(init_container_statuses, container_statuses, conditions)


def _holds_ips(old: tuple[PodIP, ...], ips: Sequence[str]) -> bool:
    """Whether ``old`` is a tuple of exactly the plain ``PodIP`` entries of ``ips``."""
    if type(old) is not tuple or len(old) != len(ips):
        return False
    for entry, ip in zip(old, ips, strict=True):
        extra = entry.extra
        if not (type(entry.ip) is str and entry.ip == ip and type(extra) is dict and not extra):
            return False
    return True


def pod_ips(ips: Sequence[str], old: tuple[PodIP, ...]) -> tuple[PodIP, ...]:
    """``PodIP`` entries for ``ips``: ``old`` itself when it holds exactly those."""
    if _holds_ips(old, ips):
        return old
    return tuple(PodIP(ip=ip) for ip in ips)


def host_ips(host_ip: str, old: tuple[PodIP, ...]) -> tuple[PodIP, ...]:
    """``hostIPs`` for ``host_ip`` (none for ``""``): ``old`` itself when it holds
    exactly that, else one tuple shared by every pod of the node (a new pod's
    status then makes no entry of its own)."""
    if not host_ip:
        return pod_ips((), old)
    return old if _holds_ips(old, (host_ip,)) else _node_ips(host_ip)


@functools.lru_cache(maxsize=4)
def _node_ips(host_ip: str) -> tuple[PodIP, ...]:
    # A node has one IP (or a few, over its life): a tiny cache serves every pod.
    return (PodIP(ip=host_ip),)


def same_status(a: ContainerStatus, b: ContainerStatus) -> bool:
    """Whether two container statuses are equal with the same parts: states the
    same objects, flags the same values, every other field as
    ``ContainerStatus.keeps_all_but_life_of`` compares it. Stricter than ``==``,
    which takes ``1`` for ``True`` and equal instants in other time zones as
    equal; it compares nothing deeply, so it is cheap."""
    return (
        a.state is b.state
        and a.last_state is b.last_state
        and a.ready is b.ready
        and a.started is b.started
        and a.keeps_all_but_life_of(b)
    )


def reuse_statuses(
    new: tuple[ContainerStatus, ...], old: tuple[ContainerStatus, ...]
) -> tuple[ContainerStatus, ...]:
    """``new`` with each status equal to the one at its place in ``old`` replaced by
    that one; ``old`` itself when all are equal."""
    if new is old or type(old) is not tuple or len(new) != len(old):
        return new
    merged: list[ContainerStatus] = []
    reused = 0
    for status, before in zip(new, old, strict=True):
        if status is before or same_status(status, before):
            merged.append(before)
            reused += 1
        else:
            merged.append(status)
    if reused == len(old):
        return old
    return tuple(merged) if reused else new


# QoS classes by spec object: a spec is a frozen value and the class depends on it
# alone, while a pod's status is generated many times. An entry lives as long as
# its spec (a weak reference removes it), so the cache never keeps a pod alive.
_qos_by_spec: dict[int, tuple[weakref.ref[PodSpec], str]] = {}


def _forget_spec(key: int, ref: weakref.ref[PodSpec]) -> None:
    entry = _qos_by_spec.get(key)
    if entry is not None and entry[0] is ref:
        _qos_by_spec.pop(key, None)


def pod_qos_class(pod: Pod) -> str:
    """:func:`~kubelet_kit.api.qos_class` of ``pod``, computed once per spec object."""
    spec = pod.spec
    key = id(spec)
    entry = _qos_by_spec.get(key)
    if entry is not None and entry[0]() is spec:
        return entry[1]
    qos = qos_class(pod)
    _qos_by_spec[key] = (weakref.ref(spec, functools.partial(_forget_spec, key)), qos)
    return qos
