"""compute_pod_actions against upstream's tables (kuberuntime_manager_test.go), ported
as data: TestComputePodActionsWithRestartableInitContainers and TestComputePodActions."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from _podsync_actions_helpers import (
    CREATED,
    EXITED,
    PROBE,
    RUNNING,
    UNKNOWN,
    actions,
    cs,
    mkpod,
    rt,
    sb,
)

from kubelet_kit.api import Pod
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerState,
    ContainerStatus,
    PodSandboxState,
    PodSandboxStatus,
)
from kubelet_kit.podsync.actions import (
    PodActions,
)

# ------------------------------------------------ upstream sidecar table, ported
#
# kuberuntime_manager_test.go TestComputePodActionsWithRestartableInitContainers:
# three restartable init containers (the 2nd and 3rd with liveness and startup
# probes, whose startup succeeded) all running, and regular containers foo1..foo3
# with no status yet. Each row: (description, restart policy, status mutation,
# probe sets, expected (kill_pod, create_sandbox, attempt, init to start,
# containers to start, ids killed)).

SIDECARS = ("restartable-init-1", "restartable-init-2", "restartable-init-3")


def sidecar_base(policy: str) -> Pod:
    pod = mkpod(("foo1", "foo2", "foo3"), SIDECARS, sidecars=SIDECARS, restart=policy)
    inits = tuple(
        attrs.evolve(c, liveness_probe=PROBE, startup_probe=PROBE) if i else c
        for i, c in enumerate(pod.spec.init_containers)
    )
    return attrs.evolve(pod, spec=attrs.evolve(pod.spec, init_containers=inits))


def sidecar_statuses() -> list[ContainerStatus]:
    return [cs(name, cid=f"initid{i}") for i, name in enumerate(SIDECARS, 1)]


def _set(i: int, state: ContainerState, exit_code: int = 0) -> object:
    def mutate(statuses: list[ContainerStatus]) -> list[ContainerStatus]:
        statuses[i] = attrs.evolve(statuses[i], state=state, exit_code=exit_code)
        return statuses

    return mutate


def _regular(state: ContainerState, exit_code: int = 0) -> object:
    def mutate(statuses: list[ContainerStatus]) -> list[ContainerStatus]:
        return statuses + [
            cs(f"foo{i}", state, exit_code=exit_code, cid=f"id{i}") for i in (1, 2, 3)
        ]

    return mutate


@attrs.frozen
class _Steps:
    steps: tuple[object, ...]


def _both(*mutations: object) -> _Steps:
    return _Steps(mutations)


NOT_READY = "sandbox-not-ready"
NO_ACTION = (False, False, 0, (), (), ())
SIDECAR_TABLE: list[tuple[str, str, object, dict[str, frozenset[str]], tuple[Any, ...]]] = [
    (
        "initialization completed; start all containers",
        "Always",
        None,
        {},
        (False, False, 0, (), (0, 1, 2), ()),
    ),
    (
        "no init containers have been started; start the first one",
        "Always",
        lambda s: [],
        {},
        (False, False, 0, (0,), (), ()),
    ),
    (
        "an init container is stuck in the created state; restart it",
        "Always",
        _set(2, CREATED),
        {},
        (False, False, 0, (2,), (), ()),
    ),
    (
        "restartable init container has started; start the next",
        "Always",
        lambda s: s[:1],
        {},
        (False, False, 0, (1,), (), ()),
    ),
    (
        "livenessProbe has not been run; start the next",
        "Always",
        lambda s: s[:2],
        {},
        (False, False, 0, (2,), (), ()),
    ),
    (
        "kill and recreate the restartable init container if the liveness check has failed",
        "Always",
        None,
        {"liveness_failed": frozenset({"initid3"})},
        (False, False, 0, (2,), (0, 1, 2), ("initid3",)),
    ),
    (
        "startupProbe has not been run; do nothing",
        "Always",
        lambda s: s[:2],
        {"startup_pending": frozenset({"initid2"})},
        NO_ACTION,
    ),
    (
        "startupProbe has completed; start the next",
        "Always",
        lambda s: s[:2],
        {},
        (False, False, 0, (2,), (), ()),
    ),
    (
        "kill and recreate the restartable init container if the startup check has failed",
        "Always",
        None,
        {"startup_failed": frozenset({"initid3"})},
        (False, False, 0, (2,), (), ("initid3",)),
    ),
    (
        "restart terminated restartable init container and next init container",
        "Always",
        _both(_set(0, EXITED), _set(2, EXITED)),
        {},
        (False, False, 0, (0, 2), (), ()),
    ),
    (
        "restart terminated restartable init container and regular containers",
        "Always",
        _set(0, EXITED),
        {},
        (False, False, 0, (0,), (0, 1, 2), ()),
    ),
    (
        "sandbox not ready, restartable init container failed, Never; kill pod only",
        "Never",
        _both(NOT_READY, _set(2, EXITED, 137)),
        {},
        (True, False, 1, (), (), ()),
    ),
    (
        "sandbox not ready, Never, no container statuses; create a new sandbox",
        "Never",
        _both(NOT_READY, lambda s: []),
        {},
        (True, True, 1, (0,), (), ()),
    ),
    (
        "sandbox not ready, restartable init container failed, OnFailure; new sandbox",
        "OnFailure",
        _both(NOT_READY, _set(2, EXITED, 137)),
        {},
        (True, True, 1, (0,), (), ()),
    ),
    (
        "sandbox not ready, restartable init container failed, Always; new sandbox",
        "Always",
        _both(NOT_READY, _set(2, EXITED, 137)),
        {},
        (True, True, 1, (0,), (), ()),
    ),
    (
        "initialization failed; restart the last restartable init container even if Never",
        "Never",
        _set(2, EXITED, 137),
        {},
        (False, False, 0, (2,), (), ()),
    ),
    (
        "restartable init container state unknown; kill and recreate it even if Never",
        "Never",
        _set(2, UNKNOWN),
        {},
        (False, False, 0, (2,), (), ("initid3",)),
    ),
    (
        "restart restartable init container if regular containers run even if Never",
        "Never",
        _both(_set(2, EXITED, 137), _regular(RUNNING)),
        {},
        (False, False, 0, (2,), (), ()),
    ),
    (
        "kill the pod if all main containers succeeded and the policy is Never",
        "Never",
        _regular(EXITED, 0),
        {},
        (True, False, 0, (), (), ()),
    ),
    (
        "some init statuses are missing but the last init container runs",
        "Always",
        lambda s: s[2:],
        {},
        (False, False, 0, (0, 1), (0, 1, 2), ()),
    ),
]


def _mutated(
    statuses: list[ContainerStatus], mutate: Any
) -> tuple[list[ContainerStatus], tuple[PodSandboxStatus, ...]]:
    sandboxes: tuple[PodSandboxStatus, ...] = (sb(),)
    for m in mutate.steps if isinstance(mutate, _Steps) else [mutate]:
        if m is None:
            continue
        if m == NOT_READY:
            sandboxes = (sb(PodSandboxState.NOTREADY, attempt=sandboxes[0].metadata.attempt),)
        elif isinstance(m, tuple) and m[0] == "attempt":
            sandboxes = (
                attrs.evolve(
                    sandboxes[0], metadata=attrs.evolve(sandboxes[0].metadata, attempt=m[1])
                ),
            )
        elif m == "no-sandbox":
            sandboxes = ()
        else:
            statuses = m(statuses)
    return statuses, sandboxes


def _check(got: PodActions, expected: tuple[Any, ...], sandbox_id: str = "sb") -> None:
    kill_pod, create, attempt, inits, starts, killed = expected
    assert (got.kill_pod, got.create_sandbox, got.attempt) == (kill_pod, create, attempt)
    assert got.sandbox_id == sandbox_id
    assert (got.init_containers_to_start, got.containers_to_start) == (inits, starts)
    assert tuple(k.container_id for k in got.containers_to_kill) == killed


@pytest.mark.parametrize(
    ("policy", "mutate", "probes", "expected"),
    [row[1:] for row in SIDECAR_TABLE],
    ids=[row[0] for row in SIDECAR_TABLE],
)
def test_upstream_restartable_init_container_table(
    policy: str,
    mutate: Any,
    probes: dict[str, frozenset[str]],
    expected: tuple[Any, ...],
) -> None:
    statuses, sandboxes = _mutated(sidecar_statuses(), mutate)
    got = actions(sidecar_base(policy), rt(*statuses, sandboxes=sandboxes), **probes)
    _check(got, expected)


# kuberuntime_manager_test.go TestComputePodActions: regular containers foo1..foo3
# all running from the current spec in a ready sandbox. (Upstream's row "Kill pod
# and recreate all containers if the PodSandbox does not have an IP" is left out:
# runtimes without pod networking report no IP, see sandbox_changed.)


def _regular_statuses() -> list[ContainerStatus]:
    return [cs(f"foo{i}", cid=f"id{i}") for i in (1, 2, 3)]


def _regular_set(i: int, state: ContainerState, exit_code: int = 0, **kw: Any) -> object:
    def mutate(statuses: list[ContainerStatus]) -> list[ContainerStatus]:
        statuses[i] = attrs.evolve(statuses[i], state=state, exit_code=exit_code, **kw)
        return statuses

    return mutate


def _all_exited(statuses: list[ContainerStatus]) -> list[ContainerStatus]:
    return [attrs.evolve(s, state=EXITED, exit_code=0) for s in statuses]


_CHANGED_HASH = {"annotations": {kl.CONTAINER_HASH: "19c6f8a8"}}

REGULAR_TABLE: list[tuple[str, str, object, dict[str, frozenset[str]], tuple[Any, ...]]] = [
    (
        "start all containers",
        "Always",
        _both("no-sandbox", lambda s: []),
        {},
        (True, True, 0, (), (0, 1, 2), ()),
    ),
    (
        "restart exited containers if RestartPolicy == Always",
        "Always",
        _both(_regular_set(0, EXITED, 0), _regular_set(1, EXITED, 111)),
        {},
        (False, False, 0, (), (0, 1), ()),
    ),
    (
        "restart failed containers if RestartPolicy == OnFailure",
        "OnFailure",
        _both(_regular_set(0, EXITED, 0), _regular_set(1, EXITED, 111)),
        {},
        (False, False, 0, (), (1,), ()),
    ),
    (
        "restart created but not started containers if RestartPolicy == OnFailure",
        "OnFailure",
        _both(_regular_set(0, EXITED, 0), _regular_set(1, CREATED)),
        {},
        (False, False, 0, (), (1,), ()),
    ),
    (
        "don't restart containers if RestartPolicy == Never",
        "Never",
        _both(_regular_set(0, EXITED, 0), _regular_set(1, EXITED, 111)),
        {},
        NO_ACTION,
    ),
    (
        "kill pod and recreate everything if the sandbox is dead, Always",
        "Always",
        NOT_READY,
        {},
        (True, True, 1, (), (0, 1, 2), ()),
    ),
    (
        "kill pod and recreate all but the succeeded containers if the sandbox is dead, OnFailure",
        "OnFailure",
        _both(NOT_READY, _regular_set(1, EXITED, 0)),
        {},
        (True, True, 1, (), (0, 2), ()),
    ),
    (
        "kill and recreate the container if the container's spec changed",
        "Always",
        _regular_set(1, RUNNING, **_CHANGED_HASH),
        {},
        (False, False, 0, (), (1,), ("id2",)),
    ),
    (
        "kill and recreate the container if the liveness check has failed",
        "Always",
        None,
        {"liveness_failed": frozenset({"id2"})},
        (False, False, 0, (), (1,), ("id2",)),
    ),
    (
        "kill and recreate the container if the startup check has failed",
        "Always",
        None,
        {"startup_failed": frozenset({"id2"})},
        (False, False, 0, (), (1,), ("id2",)),
    ),
    (
        "no new sandbox for a Never pod whose containers all exited",
        "Never",
        _both(NOT_READY, ("attempt", 1), _all_exited),
        {},
        (True, False, 2, (), (), ()),
    ),
    (
        "no new sandbox for an OnFailure pod whose containers all succeeded",
        "OnFailure",
        _both(NOT_READY, ("attempt", 1), _all_exited),
        {},
        (True, False, 2, (), (), ()),
    ),
    (
        "new sandbox for a Never pod whose containers were never created",
        "Never",
        _both(NOT_READY, ("attempt", 2), lambda s: []),
        {},
        (True, True, 3, (), (0, 1, 2), ()),
    ),
    (
        "kill and recreate the container if the container is in unknown state",
        "Never",
        _regular_set(1, UNKNOWN),
        {},
        (False, False, 0, (), (1,), ("id2",)),
    ),
    (
        "restart the container if the container is in created state",
        "Never",
        _regular_set(1, CREATED),
        {},
        (False, False, 0, (), (1,), ()),
    ),
]


@pytest.mark.parametrize(
    ("policy", "mutate", "probes", "expected"),
    [row[1:] for row in REGULAR_TABLE],
    ids=[row[0] for row in REGULAR_TABLE],
)
def test_upstream_compute_pod_actions_table(
    policy: str,
    mutate: Any,
    probes: dict[str, frozenset[str]],
    expected: tuple[Any, ...],
) -> None:
    statuses, sandboxes = _mutated(_regular_statuses(), mutate)
    pod = mkpod(("foo1", "foo2", "foo3"), restart=policy)
    got = actions(pod, rt(*statuses, sandboxes=sandboxes), **probes)
    _check(got, expected, sandbox_id="sb" if sandboxes else "")


# kuberuntime_manager_test.go TestComputePodActionsWithInitContainers: init1..init3
# all exited 0, no regular container status yet.

INITS = ("init1", "init2", "init3")


def _init_statuses() -> list[ContainerStatus]:
    return [cs(name, EXITED, cid=f"initid{i}") for i, name in enumerate(INITS, 1)]


INIT_TABLE: list[tuple[str, str, object, tuple[Any, ...]]] = [
    (
        "initialization completed; start all containers",
        "Always",
        None,
        (False, False, 0, (), (0, 1, 2), ()),
    ),
    (
        "no init containers have been started; start the first one",
        "Always",
        lambda s: [],
        (False, False, 0, (0,), (), ()),
    ),
    ("initialization in progress; do nothing", "Always", _set(2, RUNNING), NO_ACTION),
    (
        "kill pod and restart the first init container if the sandbox is dead",
        "Always",
        NOT_READY,
        (True, True, 1, (0,), (), ()),
    ),
    (
        "initialization failed; restart the last init container if Always",
        "Always",
        _set(2, EXITED, 137),
        (False, False, 0, (2,), (), ()),
    ),
    (
        "initialization failed; restart the last init container if OnFailure",
        "OnFailure",
        _set(2, EXITED, 137),
        (False, False, 0, (2,), (), ()),
    ),
    (
        "initialization failed; kill pod if Never",
        "Never",
        _set(2, EXITED, 137),
        (True, False, 0, (), (), ()),
    ),
    (
        "init container state unknown; kill and recreate it if Always",
        "Always",
        _set(2, UNKNOWN),
        (False, False, 0, (2,), (), ("initid3",)),
    ),
    (
        "init container state unknown; kill and recreate it if OnFailure",
        "OnFailure",
        _set(2, UNKNOWN),
        (False, False, 0, (2,), (), ("initid3",)),
    ),
    (
        "init container state unknown; kill pod if Never",
        "Never",
        _set(2, UNKNOWN),
        (True, False, 0, (), (), ()),
    ),
    (
        "sandbox not ready, init container failed, Never; kill pod only",
        "Never",
        NOT_READY,
        (True, False, 1, (), (), ()),
    ),
    (
        "sandbox not ready, Never, no visible init containers; create a new sandbox",
        "Never",
        _both(NOT_READY, lambda s: []),
        (True, True, 1, (0,), (), ()),
    ),
    (
        "sandbox not ready, init container failed, OnFailure; create a new sandbox",
        "OnFailure",
        _both(NOT_READY, _set(2, EXITED, 137)),
        (True, True, 1, (0,), (), ()),
    ),
    (
        "some init statuses missing but the last one runs; don't restart preceding ones",
        "Always",
        _both(_set(2, RUNNING), lambda s: s[2:]),
        NO_ACTION,
    ),
    (
        "an init container stuck in the created state is restarted",
        "Always",
        _set(2, CREATED),
        (False, False, 0, (2,), (), ()),
    ),
]


@pytest.mark.parametrize(
    ("policy", "mutate", "expected"),
    [row[1:] for row in INIT_TABLE],
    ids=[row[0] for row in INIT_TABLE],
)
def test_upstream_init_container_table(policy: str, mutate: Any, expected: tuple[Any, ...]) -> None:
    statuses, sandboxes = _mutated(_init_statuses(), mutate)
    pod = mkpod(("foo1", "foo2", "foo3"), INITS, restart=policy)
    _check(actions(pod, rt(*statuses, sandboxes=sandboxes)), expected)
