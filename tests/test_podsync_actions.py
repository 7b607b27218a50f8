"""compute_pod_actions: one table row per rule of the kubelet's computePodActions."""

from __future__ import annotations

import datetime as dt
import zlib
from typing import Any

import attrs
import pytest

from kubelet_kit.api import Container, ObjectMeta, Pod, PodSpec, Probe
from kubelet_kit.api.pod import ExecAction
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerMetadata,
    ContainerState,
    ContainerStatus,
    NamespaceOptions,
    PodSandboxMetadata,
    PodSandboxState,
    PodSandboxStatus,
)
from kubelet_kit.container.pods import PodRuntimeStatus
from kubelet_kit.podsync.actions import (
    ContainerToKill,
    PodActions,
    compute_pod_actions,
    init_containers_done,
    is_init_container_failed,
    sandbox_changed,
)

IMAGE = "registry.example/app:1"
RUNNING, EXITED, CREATED, UNKNOWN = (
    ContainerState.RUNNING, ContainerState.EXITED, ContainerState.CREATED, ContainerState.UNKNOWN
)
PROBE = Probe(exec=ExecAction(command=("true",)))


def chash(container: Container) -> str:
    return format(zlib.crc32(container.image.encode()), "x")


SPEC_HASH = chash(Container(name="x", image=IMAGE))


def mkpod(
    containers: tuple[str, ...] = ("app",),
    inits: tuple[str, ...] = (),
    *,
    sidecars: tuple[str, ...] = (),
    restart: str = "Always",
    host_network: bool = False,
    deleting: bool = False,
    probes: dict[str, str] | None = None,
) -> Pod:
    probes = probes or {}

    def make(name: str) -> Container:
        kind = probes.get(name)
        return Container(
            name=name,
            image=IMAGE,
            restart_policy="Always" if name in sidecars else None,
            liveness_probe=PROBE if kind == "liveness" else None,
            startup_probe=PROBE if kind == "startup" else None,
        )

    return Pod(
        metadata=ObjectMeta(
            name="web",
            namespace="ns",
            uid="u1",
            deletion_timestamp=dt.datetime(2026, 1, 1, tzinfo=dt.UTC) if deleting else None,
        ),
        spec=PodSpec(
            containers=tuple(make(n) for n in containers),
            init_containers=tuple(make(n) for n in inits),
            restart_policy=restart,
            host_network=host_network,
        ),
    )


def cs(
    name: str,
    state: ContainerState = RUNNING,
    *,
    exit_code: int = 0,
    reason: str = "",
    created: float = 1.0,
    spec_hash: str = SPEC_HASH,
    cid: str | None = None,
) -> ContainerStatus:
    return ContainerStatus(
        id=cid or f"{name}-{int(created)}",
        metadata=ContainerMetadata(name=name),
        state=state,
        created_at=created,
        image=IMAGE,
        exit_code=exit_code,
        reason=reason,
        annotations={kl.CONTAINER_HASH: spec_hash},
    )


def sb(
    state: PodSandboxState = PodSandboxState.READY,
    *,
    attempt: int = 0,
    host_network: bool = False,
    sid: str = "sb",
    created: float = 1.0,
) -> PodSandboxStatus:
    return PodSandboxStatus(
        id=sid,
        metadata=PodSandboxMetadata("web", "ns", "u1", attempt),
        state=state,
        created_at=created,
        namespace_options=NamespaceOptions(host_network=host_network),
    )


def rt(*containers: ContainerStatus, sandboxes: tuple[PodSandboxStatus, ...] | None = None) -> (
    PodRuntimeStatus
):
    return PodRuntimeStatus(
        uid="u1",
        name="web",
        namespace="ns",
        sandbox_statuses=(sb(),) if sandboxes is None else sandboxes,
        container_statuses=containers,
    )


def actions(pod: Pod, status: PodRuntimeStatus, **probe_sets: frozenset[str]) -> PodActions:
    return compute_pod_actions(pod, status, container_hash=chash, **probe_sets)


def kill(cid: str, name: str, message: str, reason: str = "", pod: Pod | None = None) -> (
    ContainerToKill
):
    spec = None
    if pod is not None:
        spec = next((c for c in pod.spec.all_containers() if c.name == name), None)
    return ContainerToKill(cid, name, message, reason, spec)


# ----------------------------------------------------------------------- sandbox


def test_no_sandbox_creates_attempt_zero_and_starts_every_container() -> None:
    pod = mkpod(("a", "b"))
    assert actions(pod, rt(sandboxes=())) == PodActions(
        kill_pod=True, create_sandbox=True, sandbox_id="", attempt=0, containers_to_start=(0, 1)
    )


def test_no_sandbox_with_init_containers_starts_only_the_first_init() -> None:
    pod = mkpod(("app",), ("i1", "i2"))
    got = actions(pod, rt(sandboxes=()))
    assert got.create_sandbox and got.init_containers_to_start == (0,)
    assert got.containers_to_start == ()


def test_sandbox_not_ready_is_replaced_with_the_next_attempt() -> None:
    pod = mkpod()
    got = actions(pod, rt(sandboxes=(sb(PodSandboxState.NOTREADY, attempt=2),)))
    assert (got.kill_pod, got.create_sandbox, got.attempt, got.sandbox_id) == (True, True, 3, "sb")
    assert got.containers_to_start == (0,)


def test_two_ready_sandboxes_are_reconciled() -> None:
    two = (sb(attempt=1, sid="new", created=2), sb(sid="old"))
    create, attempt, sid = sandbox_changed(mkpod(), rt(sandboxes=two))
    assert (create, attempt, sid) == (True, 2, "new")


def test_host_network_change_needs_a_new_sandbox() -> None:
    got = actions(mkpod(host_network=True), rt(cs("app"), sandboxes=(sb(attempt=1),)))
    assert (got.create_sandbox, got.attempt, got.sandbox_id) == (True, 2, "")


def test_host_network_sandbox_of_a_pod_network_pod_is_kept() -> None:
    # What a runtime without pod networking (host processes) reports for every pod.
    status = rt(cs("app"), sandboxes=(sb(host_network=True),))
    assert actions(mkpod(), status) == PodActions(sandbox_id="sb", attempt=0)


def test_never_restart_with_dead_sandbox_kills_without_recreating() -> None:
    status = rt(cs("app", EXITED, exit_code=0), sandboxes=(sb(PodSandboxState.NOTREADY),))
    got = actions(mkpod(restart="Never"), status)
    assert got == PodActions(kill_pod=True, create_sandbox=False, sandbox_id="sb", attempt=1)


def test_on_failure_with_dead_sandbox_skips_succeeded_containers() -> None:
    status = rt(
        cs("a", EXITED, exit_code=0), cs("b", EXITED, exit_code=1),
        sandboxes=(sb(PodSandboxState.NOTREADY),),
    )
    got = actions(mkpod(("a", "b"), restart="OnFailure"), status)
    assert got.create_sandbox and got.containers_to_start == (1,)


def test_on_failure_all_succeeded_dead_sandbox_is_not_recreated() -> None:
    status = rt(cs("a", EXITED), sandboxes=(sb(PodSandboxState.NOTREADY),))
    got = actions(mkpod(("a",), restart="OnFailure"), status)
    assert got.kill_pod and not got.create_sandbox


# ------------------------------------------------------------ regular containers


def test_everything_running_as_wanted_does_nothing() -> None:
    assert actions(mkpod(("a", "b")), rt(cs("a"), cs("b"))) == PodActions(
        sandbox_id="sb", attempt=0
    )


def test_missing_container_is_started() -> None:
    got = actions(mkpod(("a", "b")), rt(cs("a")))
    assert got.containers_to_start == (1,) and not got.kill_pod


@pytest.mark.parametrize(
    ("policy", "exit_code", "start", "kill_pod"),
    [
        ("Always", 0, (0,), False),
        ("Always", 1, (0,), False),
        ("OnFailure", 1, (0,), False),
        ("OnFailure", 0, (), True),
        ("Never", 1, (), True),
        ("Never", 0, (), True),
    ],
)
def test_exited_container_restarts_by_restart_policy(
    policy: str, exit_code: int, start: tuple[int, ...], kill_pod: bool
) -> None:
    got = actions(mkpod(restart=policy), rt(cs("app", EXITED, exit_code=exit_code)))
    assert (got.containers_to_start, got.kill_pod) == (start, kill_pod)


def test_never_policy_keeps_pod_while_another_container_runs() -> None:
    got = actions(mkpod(("a", "b"), restart="Never"), rt(cs("a", EXITED, exit_code=1), cs("b")))
    assert got == PodActions(sandbox_id="sb", attempt=0)


def test_created_but_not_started_container_is_started_again_even_with_never() -> None:
    got = actions(mkpod(restart="Never"), rt(cs("app", CREATED)))
    assert got.containers_to_start == (0,)


def test_unknown_container_is_killed_then_restarted() -> None:
    pod = mkpod(restart="Never")
    got = actions(pod, rt(cs("app", UNKNOWN)))
    assert got.containers_to_start == (0,)
    assert got.containers_to_kill == (
        kill("app-1", "app", 'Container is in "unknown" state, try killing it before restart',
             "Unknown", pod),
    )


@pytest.mark.parametrize("policy", ["Always", "OnFailure", "Never"])
def test_spec_hash_change_restarts_whatever_the_policy(policy: str) -> None:
    pod = mkpod(restart=policy)
    got = actions(pod, rt(cs("app", spec_hash="0ld")))
    assert got.containers_to_start == (0,)
    assert got.containers_to_kill == (
        kill("app-1", "app", "Container app definition changed, will be restarted", "", pod),
    )
    assert not got.kill_pod


def test_hash_is_compared_case_insensitively_and_missing_hash_is_kept() -> None:
    pod = mkpod()
    assert actions(pod, rt(cs("app", spec_hash=SPEC_HASH.upper()))).containers_to_kill == ()
    assert actions(pod, rt(cs("app", spec_hash=""))).containers_to_kill == ()


def test_liveness_failure_kills_and_restarts() -> None:
    pod = mkpod(probes={"app": "liveness"})
    got = actions(pod, rt(cs("app")), liveness_failed=frozenset({"app-1"}))
    assert got.containers_to_kill == (
        kill("app-1", "app", "Container app failed liveness probe, will be restarted",
             "LivenessProbe", pod),
    )
    assert got.containers_to_start == (0,)


def test_liveness_failure_with_never_kills_without_restart() -> None:
    pod = mkpod(restart="Never", probes={"app": "liveness"})
    got = actions(pod, rt(cs("app")), liveness_failed=frozenset({"app-1"}))
    assert got.containers_to_kill == (
        kill("app-1", "app", "Container app failed liveness probe", "LivenessProbe", pod),
    )
    assert got.containers_to_start == () and got.kill_pod


def test_liveness_result_of_an_older_container_is_ignored() -> None:
    got = actions(mkpod(), rt(cs("app", cid="new")), liveness_failed=frozenset({"old"}))
    assert got.containers_to_kill == ()


def test_startup_failure_kills_and_restarts() -> None:
    pod = mkpod(probes={"app": "startup"})
    got = actions(pod, rt(cs("app")), startup_failed=frozenset({"app-1"}))
    assert got.containers_to_kill[0].message == (
        "Container app failed startup probe, will be restarted"
    )
    assert got.containers_to_kill[0].reason == "StartupProbe"
    assert got.containers_to_start == (0,)


def test_deleted_pod_restarts_nothing() -> None:
    got = actions(mkpod(deleting=True), rt(cs("app", EXITED, exit_code=1)))
    assert got.containers_to_start == () and got.kill_pod


def test_container_not_in_spec_is_killed() -> None:
    got = actions(mkpod(("a",)), rt(cs("a"), cs("gone")))
    message = "Container gone is not in the pod spec"
    assert got.containers_to_kill == (kill("gone-1", "gone", message),)
    assert not got.kill_pod


def test_newest_status_of_a_name_decides() -> None:
    # An old failed attempt and a newer running one: keep running.
    status = rt(cs("app", EXITED, exit_code=1, created=1), cs("app", created=5))
    assert actions(mkpod(), status) == PodActions(sandbox_id="sb", attempt=0)


# --------------------------------------------------------------- init containers


def test_first_init_container_starts_first() -> None:
    got = actions(mkpod(("app",), ("i1", "i2")), rt())
    assert (got.init_containers_to_start, got.containers_to_start) == ((0,), ())


def test_next_init_container_after_success() -> None:
    got = actions(mkpod(("app",), ("i1", "i2")), rt(cs("i1", EXITED)))
    assert (got.init_containers_to_start, got.containers_to_start) == ((1,), ())


def test_running_init_container_is_waited_for() -> None:
    got = actions(mkpod(("app",), ("i1", "i2")), rt(cs("i1", EXITED), cs("i2")))
    assert got == PodActions(sandbox_id="sb", attempt=0)


def test_regular_containers_start_after_last_init_succeeded() -> None:
    got = actions(mkpod(("a", "b"), ("i1", "i2")), rt(cs("i1", EXITED), cs("i2", EXITED)))
    assert (got.init_containers_to_start, got.containers_to_start) == ((), (0, 1))


@pytest.mark.parametrize("policy", ["Always", "OnFailure"])
def test_failed_init_container_is_restarted(policy: str) -> None:
    got = actions(mkpod(("app",), ("i1", "i2"), restart=policy), rt(cs("i1", EXITED, exit_code=2)))
    assert (got.init_containers_to_start, got.kill_pod) == ((0,), False)


def test_failed_init_container_with_never_kills_the_pod() -> None:
    got = actions(mkpod(("app",), ("i1", "i2"), restart="Never"), rt(cs("i1", EXITED, exit_code=2)))
    assert got.kill_pod and got.init_containers_to_start == () and got.containers_to_start == ()


def test_oom_killed_init_container_counts_as_failed() -> None:
    status = cs("i1", EXITED, exit_code=0, reason="OOMKilled")
    assert is_init_container_failed(status)
    got = actions(mkpod(("app",), ("i1",), restart="Never"), rt(status))
    assert got.kill_pod


def test_unknown_init_container_is_killed_and_restarted() -> None:
    pod = mkpod(("app",), ("i1",))
    got = actions(pod, rt(cs("i1", UNKNOWN)))
    assert got.init_containers_to_start == (0,)
    assert got.containers_to_kill == (
        kill("i1-1", "i1", 'Init container is in "unknown" state, try killing it before restart',
             "Unknown", pod),
    )


def test_init_containers_removed_after_initialisation_are_not_rerun() -> None:
    got = actions(mkpod(("app",), ("i1", "i2")), rt(cs("app")))
    assert got == PodActions(sandbox_id="sb", attempt=0)


def test_init_done_helper() -> None:
    pod = mkpod(("app",), ("i1", "i2"))
    assert not init_containers_done(pod, rt())
    assert not init_containers_done(pod, rt(cs("i1", EXITED)))
    assert init_containers_done(pod, rt(cs("i1", EXITED), cs("i2", EXITED)))
    assert not init_containers_done(pod, rt(cs("i1", EXITED), cs("i2", EXITED, exit_code=1)))
    assert init_containers_done(pod, rt(cs("app")))
    assert init_containers_done(mkpod(), rt())


# ---------------------------------------------------------------------- sidecars


def test_running_sidecar_lets_the_next_init_container_start() -> None:
    got = actions(mkpod(("app",), ("side", "i2"), sidecars=("side",)), rt(cs("side")))
    assert (got.init_containers_to_start, got.containers_to_start) == ((1,), ())


def test_sidecar_as_last_init_container_lets_regular_containers_start() -> None:
    pod = mkpod(("app",), ("i1", "side"), sidecars=("side",))
    got = actions(pod, rt(cs("i1", EXITED), cs("side")))
    assert (got.init_containers_to_start, got.containers_to_start) == ((), (0,))


def test_sidecar_waits_for_its_startup_probe() -> None:
    pod = mkpod(("app",), ("side", "i2"), sidecars=("side",), probes={"side": "startup"})
    got = actions(pod, rt(cs("side")), startup_pending=frozenset({"side-1"}))
    assert got.init_containers_to_start == () and got.containers_to_start == ()
    got = actions(pod, rt(cs("side")))
    assert got.init_containers_to_start == (1,)


@pytest.mark.parametrize("policy", ["Always", "OnFailure", "Never"])
def test_exited_sidecar_is_restarted_whatever_the_policy(policy: str) -> None:
    pod = mkpod(("app",), ("side",), sidecars=("side",), restart=policy)
    got = actions(pod, rt(cs("side", EXITED, exit_code=0), cs("app")))
    assert got.init_containers_to_start == (0,)
    assert got.containers_to_start == () and not got.kill_pod


def test_sidecar_removed_from_runtime_after_initialisation_is_started_again() -> None:
    got = actions(mkpod(("app",), ("i1", "side"), sidecars=("side",)), rt(cs("app")))
    assert got.init_containers_to_start == (1,)


def test_sidecar_spec_change_restarts_it() -> None:
    pod = mkpod(("app",), ("side",), sidecars=("side",))
    got = actions(pod, rt(cs("side", spec_hash="0ld"), cs("app")))
    assert got.containers_to_kill == (
        kill("side-1", "side", "Init container side definition changed", "", pod),
    )
    assert got.init_containers_to_start == (0,)


def test_sidecar_liveness_failure_restarts_it() -> None:
    pod = mkpod(("app",), ("side",), sidecars=("side",), probes={"side": "liveness"})
    got = actions(pod, rt(cs("side"), cs("app")), liveness_failed=frozenset({"side-1"}))
    assert got.containers_to_kill == (
        kill("side-1", "side", "Init container side failed liveness probe", "LivenessProbe", pod),
    )
    assert got.init_containers_to_start == (0,)


def test_sidecar_startup_failure_restarts_it() -> None:
    pod = mkpod(("app",), ("side", "i2"), sidecars=("side",), probes={"side": "startup"})
    got = actions(pod, rt(cs("side")), startup_failed=frozenset({"side-1"}))
    assert got.containers_to_kill[0].reason == "StartupProbe"
    assert got.init_containers_to_start == (0,)


def test_finished_regular_containers_end_the_pod_despite_sidecars() -> None:
    pod = mkpod(("app",), ("side",), sidecars=("side",), restart="Never")
    got = actions(pod, rt(cs("side"), cs("app", EXITED)))
    assert got.kill_pod and got.init_containers_to_start == ()


def test_regular_init_after_sidecar_failed_with_never_kills_pod() -> None:
    pod = mkpod(("app",), ("side", "i2"), sidecars=("side",), restart="Never")
    got = actions(pod, rt(cs("side"), cs("i2", EXITED, exit_code=1)))
    assert got.kill_pod and got.init_containers_to_start == ()


def test_default_hash_is_the_one_written_on_containers() -> None:
    from kubelet_kit.podsync.configs import container_hash

    pod = mkpod()
    current = container_hash(pod.spec.containers[0])
    assert compute_pod_actions(pod, rt(cs("app", spec_hash=current))).containers_to_kill == ()
    changed = compute_pod_actions(pod, rt(cs("app", spec_hash=SPEC_HASH)))
    assert [k.name for k in changed.containers_to_kill] == ["app"]


def test_actions_are_values() -> None:
    a = actions(mkpod(), rt())
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        a.kill_pod = False  # type: ignore[misc]


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
    ("initialization completed; start all containers", "Always", None, {},
     (False, False, 0, (), (0, 1, 2), ())),
    ("no init containers have been started; start the first one", "Always",
     lambda s: [], {}, (False, False, 0, (0,), (), ())),
    ("an init container is stuck in the created state; restart it", "Always",
     _set(2, CREATED), {}, (False, False, 0, (2,), (), ())),
    ("restartable init container has started; start the next", "Always",
     lambda s: s[:1], {}, (False, False, 0, (1,), (), ())),
    ("livenessProbe has not been run; start the next", "Always",
     lambda s: s[:2], {}, (False, False, 0, (2,), (), ())),
    ("kill and recreate the restartable init container if the liveness check has failed",
     "Always", None, {"liveness_failed": frozenset({"initid3"})},
     (False, False, 0, (2,), (0, 1, 2), ("initid3",))),
    ("startupProbe has not been run; do nothing", "Always",
     lambda s: s[:2], {"startup_pending": frozenset({"initid2"})}, NO_ACTION),
    ("startupProbe has completed; start the next", "Always",
     lambda s: s[:2], {}, (False, False, 0, (2,), (), ())),
    ("kill and recreate the restartable init container if the startup check has failed",
     "Always", None, {"startup_failed": frozenset({"initid3"})},
     (False, False, 0, (2,), (), ("initid3",))),
    ("restart terminated restartable init container and next init container", "Always",
     _both(_set(0, EXITED), _set(2, EXITED)), {}, (False, False, 0, (0, 2), (), ())),
    ("restart terminated restartable init container and regular containers", "Always",
     _set(0, EXITED), {}, (False, False, 0, (0,), (0, 1, 2), ())),
    ("sandbox not ready, restartable init container failed, Never; kill pod only", "Never",
     _both(NOT_READY, _set(2, EXITED, 137)), {}, (True, False, 1, (), (), ())),
    ("sandbox not ready, Never, no container statuses; create a new sandbox", "Never",
     _both(NOT_READY, lambda s: []), {}, (True, True, 1, (0,), (), ())),
    ("sandbox not ready, restartable init container failed, OnFailure; new sandbox",
     "OnFailure", _both(NOT_READY, _set(2, EXITED, 137)), {}, (True, True, 1, (0,), (), ())),
    ("sandbox not ready, restartable init container failed, Always; new sandbox", "Always",
     _both(NOT_READY, _set(2, EXITED, 137)), {}, (True, True, 1, (0,), (), ())),
    ("initialization failed; restart the last restartable init container even if Never",
     "Never", _set(2, EXITED, 137), {}, (False, False, 0, (2,), (), ())),
    ("restartable init container state unknown; kill and recreate it even if Never", "Never",
     _set(2, UNKNOWN), {}, (False, False, 0, (2,), (), ("initid3",))),
    ("restart restartable init container if regular containers run even if Never", "Never",
     _both(_set(2, EXITED, 137), _regular(RUNNING)), {}, (False, False, 0, (2,), (), ())),
    ("kill the pod if all main containers succeeded and the policy is Never", "Never",
     _regular(EXITED, 0), {}, (True, False, 0, (), (), ())),
    ("some init statuses are missing but the last init container runs", "Always",
     lambda s: s[2:], {}, (False, False, 0, (0, 1), (0, 1, 2), ())),
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
            sandboxes = (attrs.evolve(
                sandboxes[0], metadata=attrs.evolve(sandboxes[0].metadata, attempt=m[1])
            ),)
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
    ("start all containers", "Always", _both("no-sandbox", lambda s: []), {},
     (True, True, 0, (), (0, 1, 2), ())),
    ("restart exited containers if RestartPolicy == Always", "Always",
     _both(_regular_set(0, EXITED, 0), _regular_set(1, EXITED, 111)), {},
     (False, False, 0, (), (0, 1), ())),
    ("restart failed containers if RestartPolicy == OnFailure", "OnFailure",
     _both(_regular_set(0, EXITED, 0), _regular_set(1, EXITED, 111)), {},
     (False, False, 0, (), (1,), ())),
    ("restart created but not started containers if RestartPolicy == OnFailure", "OnFailure",
     _both(_regular_set(0, EXITED, 0), _regular_set(1, CREATED)), {},
     (False, False, 0, (), (1,), ())),
    ("don't restart containers if RestartPolicy == Never", "Never",
     _both(_regular_set(0, EXITED, 0), _regular_set(1, EXITED, 111)), {}, NO_ACTION),
    ("kill pod and recreate everything if the sandbox is dead, Always", "Always",
     NOT_READY, {}, (True, True, 1, (), (0, 1, 2), ())),
    ("kill pod and recreate all but the succeeded containers if the sandbox is dead, OnFailure",
     "OnFailure", _both(NOT_READY, _regular_set(1, EXITED, 0)), {},
     (True, True, 1, (), (0, 2), ())),
    ("kill and recreate the container if the container's spec changed", "Always",
     _regular_set(1, RUNNING, **_CHANGED_HASH), {}, (False, False, 0, (), (1,), ("id2",))),
    ("kill and recreate the container if the liveness check has failed", "Always", None,
     {"liveness_failed": frozenset({"id2"})}, (False, False, 0, (), (1,), ("id2",))),
    ("kill and recreate the container if the startup check has failed", "Always", None,
     {"startup_failed": frozenset({"id2"})}, (False, False, 0, (), (1,), ("id2",))),
    ("no new sandbox for a Never pod whose containers all exited", "Never",
     _both(NOT_READY, ("attempt", 1), _all_exited), {}, (True, False, 2, (), (), ())),
    ("no new sandbox for an OnFailure pod whose containers all succeeded", "OnFailure",
     _both(NOT_READY, ("attempt", 1), _all_exited), {}, (True, False, 2, (), (), ())),
    ("new sandbox for a Never pod whose containers were never created", "Never",
     _both(NOT_READY, ("attempt", 2), lambda s: []), {}, (True, True, 3, (), (0, 1, 2), ())),
    ("kill and recreate the container if the container is in unknown state", "Never",
     _regular_set(1, UNKNOWN), {}, (False, False, 0, (), (1,), ("id2",))),
    ("restart the container if the container is in created state", "Never",
     _regular_set(1, CREATED), {}, (False, False, 0, (), (1,), ())),
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
    ("initialization completed; start all containers", "Always", None,
     (False, False, 0, (), (0, 1, 2), ())),
    ("no init containers have been started; start the first one", "Always", lambda s: [],
     (False, False, 0, (0,), (), ())),
    ("initialization in progress; do nothing", "Always", _set(2, RUNNING), NO_ACTION),
    ("kill pod and restart the first init container if the sandbox is dead", "Always",
     NOT_READY, (True, True, 1, (0,), (), ())),
    ("initialization failed; restart the last init container if Always", "Always",
     _set(2, EXITED, 137), (False, False, 0, (2,), (), ())),
    ("initialization failed; restart the last init container if OnFailure", "OnFailure",
     _set(2, EXITED, 137), (False, False, 0, (2,), (), ())),
    ("initialization failed; kill pod if Never", "Never", _set(2, EXITED, 137),
     (True, False, 0, (), (), ())),
    ("init container state unknown; kill and recreate it if Always", "Always",
     _set(2, UNKNOWN), (False, False, 0, (2,), (), ("initid3",))),
    ("init container state unknown; kill and recreate it if OnFailure", "OnFailure",
     _set(2, UNKNOWN), (False, False, 0, (2,), (), ("initid3",))),
    ("init container state unknown; kill pod if Never", "Never", _set(2, UNKNOWN),
     (True, False, 0, (), (), ())),
    ("sandbox not ready, init container failed, Never; kill pod only", "Never", NOT_READY,
     (True, False, 1, (), (), ())),
    ("sandbox not ready, Never, no visible init containers; create a new sandbox", "Never",
     _both(NOT_READY, lambda s: []), (True, True, 1, (0,), (), ())),
    ("sandbox not ready, init container failed, OnFailure; create a new sandbox", "OnFailure",
     _both(NOT_READY, _set(2, EXITED, 137)), (True, True, 1, (0,), (), ())),
    ("some init statuses missing but the last one runs; don't restart preceding ones",
     "Always", _both(_set(2, RUNNING), lambda s: s[2:]), NO_ACTION),
    ("an init container stuck in the created state is restarted", "Always",
     _set(2, CREATED), (False, False, 0, (2,), (), ())),
]


@pytest.mark.parametrize(
    ("policy", "mutate", "expected"),
    [row[1:] for row in INIT_TABLE],
    ids=[row[0] for row in INIT_TABLE],
)
def test_upstream_init_container_table(policy: str, mutate: Any, expected: tuple[Any, ...]) -> (
    None
):
    statuses, sandboxes = _mutated(_init_statuses(), mutate)
    pod = mkpod(("foo1", "foo2", "foo3"), INITS, restart=policy)
    _check(actions(pod, rt(*statuses, sandboxes=sandboxes)), expected)
