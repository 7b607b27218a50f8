"""compute_pod_actions: one table row per rule of the kubelet's computePodActions.

Upstream's own tables, ported, are in test_podsync_actions_upstream.py.
"""

from __future__ import annotations

import attrs
import pytest
from _podsync_actions_helpers import (
    CREATED,
    EXITED,
    SPEC_HASH,
    UNKNOWN,
    actions,
    cs,
    kill,
    mkpod,
    rt,
    sb,
)

from kubelet_kit.container.interfaces import (
    PodSandboxState,
)
from kubelet_kit.podsync.actions import (
    PodActions,
    compute_pod_actions,
    init_containers_done,
    is_init_container_failed,
    sandbox_changed,
)

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
        cs("a", EXITED, exit_code=0),
        cs("b", EXITED, exit_code=1),
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
        kill(
            "app-1",
            "app",
            'Container is in "unknown" state, try killing it before restart',
            "Unknown",
            pod,
        ),
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
        kill(
            "app-1",
            "app",
            "Container app failed liveness probe, will be restarted",
            "LivenessProbe",
            pod,
        ),
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
        kill(
            "i1-1",
            "i1",
            'Init container is in "unknown" state, try killing it before restart',
            "Unknown",
            pod,
        ),
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
