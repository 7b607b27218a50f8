"""The prober's pure parts: thresholds, caches, status folding, command expansion,
ports and URLs. Tables ported from upstream where upstream has them."""

from __future__ import annotations

import datetime as _dt
from typing import Any

import attrs
import pytest

import kubelet_kit.prober as prober_pkg
from kubelet_kit.api import (
    Container,
    ContainerPort,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    EnvVar,
    EnvVarSource,
    ObjectFieldSelector,
    Pod,
    PodCondition,
    PodIP,
    PodSpec,
    PodStatus,
    Quantity,
)
from kubelet_kit.prober import ProbeKind, ProbeResult
from kubelet_kit.prober.probers import expand_command, format_probe_url, resolve_port
from kubelet_kit.prober.results import (
    INITIAL_RESULTS,
    ResultsCache,
    ThresholdCounter,
    fold_pod_status,
)

S, F = ProbeResult.SUCCESS, ProbeResult.FAILURE


def test_all_is_honest() -> None:
    for name in prober_pkg.__all__:
        assert hasattr(prober_pkg, name), name
    modules = {"interfaces", "stub", "manager", "metrics", "probers", "results", "health"}
    # (the package's lazy re-exports need these two names of its own)
    helpers = {"TYPE_CHECKING", "lazy_exports"}
    names = {n for n in vars(prober_pkg) if n.isidentifier() and not n.startswith("_")}
    public = names - modules - helpers
    assert public == set(prober_pkg.__all__)


def test_initial_results_are_the_kubelets() -> None:
    assert INITIAL_RESULTS == {
        ProbeKind.READINESS: F,
        ProbeKind.LIVENESS: S,
        ProbeKind.STARTUP: ProbeResult.UNKNOWN,
    }


@pytest.mark.parametrize(
    ("success", "failure", "sequence", "acted"),
    [
        # Defaults: one success acts, three failures in a row act.
        (1, 3, [S], [True]),
        (1, 3, [F, F, F], [False, False, True]),
        (1, 3, [F, F, S, F, F, F], [False, False, True, False, False, True]),
        # Every further failure past the threshold still acts (the result is re-set).
        (1, 3, [F, F, F, F], [False, False, True, True]),
        (3, 1, [S, S, F, S, S, S], [False, False, True, False, False, True]),
        (2, 2, [S, F, S, S, F, F], [False, False, False, True, False, True]),
    ],
)
def test_threshold_counts_consecutive_equal_results(
    success: int, failure: int, sequence: list[ProbeResult], acted: list[bool]
) -> None:
    counter = ThresholdCounter(success, failure)
    assert [counter.observe(r) for r in sequence] == acted


def test_threshold_reset_starts_the_run_over() -> None:
    counter = ThresholdCounter(1, 2)
    assert not counter.observe(F)
    counter.reset()
    assert not counter.observe(F)
    assert counter.observe(F)


def test_results_cache_reports_changes() -> None:
    cache = ResultsCache()
    assert cache.get("c1") is None
    assert cache.set("c1", F) is True
    assert cache.set("c1", F) is False
    assert cache.set("c1", S) is True
    assert cache.get("c1") is S
    cache.remove("c1")
    cache.remove("c1")
    assert cache.get("c1") is None and len(cache) == 0


# ---------------------------------------------------------------- fold

NOW = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)


def running(name: str, cid: str) -> ContainerStatus:
    return ContainerStatus(
        name=name,
        container_id=cid,
        state=ContainerState(running=ContainerStateRunning(started_at=NOW)),
    )


def exited(name: str, cid: str, code: int) -> ContainerStatus:
    return ContainerStatus(
        name=name,
        container_id=cid,
        state=ContainerState(terminated=ContainerStateTerminated(exit_code=code)),
    )


def waiting(name: str) -> ContainerStatus:
    return ContainerStatus(name=name, state=ContainerState(waiting=ContainerStateWaiting()))


def fold(
    status: PodStatus,
    results: dict[tuple[ProbeKind, str], ProbeResult],
    workers: set[tuple[str, ProbeKind]],
    pod: Pod | None = None,
) -> tuple[PodStatus, list[str]]:
    return fold_pod_status(
        pod or Pod(),
        status,
        lambda kind, cid: results.get((kind, cid)),
        lambda name, kind: (name, kind) in workers,
    )


def test_fold_without_probes_running_is_started_and_ready() -> None:
    status = PodStatus(container_statuses=(running("a", "c1"), waiting("b")))
    folded, trigger = fold(status, {}, set())
    a, b = folded.container_statuses
    assert (a.started, a.ready) == (True, True)
    assert (b.started, b.ready) == (False, False)
    assert trigger == []


def test_fold_startup_probe_gates_started_and_ready() -> None:
    status = PodStatus(container_statuses=(running("a", "c1"),))
    workers = {("a", ProbeKind.STARTUP)}
    # Startup probe exists but has no result for this container yet: not started.
    folded, _ = fold(status, {}, workers)
    assert (folded.container_statuses[0].started, folded.container_statuses[0].ready) == (
        False,
        False,
    )
    folded, _ = fold(status, {(ProbeKind.STARTUP, "c1"): ProbeResult.UNKNOWN}, workers)
    assert folded.container_statuses[0].started is False
    folded, _ = fold(status, {(ProbeKind.STARTUP, "c1"): S}, workers)
    assert (folded.container_statuses[0].started, folded.container_statuses[0].ready) == (
        True,
        True,
    )


def test_fold_readiness_probe_and_trigger() -> None:
    status = PodStatus(container_statuses=(running("a", "c1"),))
    workers = {("a", ProbeKind.READINESS)}
    folded, trigger = fold(status, {(ProbeKind.READINESS, "c1"): F}, workers)
    assert folded.container_statuses[0].ready is False
    assert trigger == ["a"]  # started but not ready: run the readiness probe now
    folded, trigger = fold(status, {(ProbeKind.READINESS, "c1"): S}, workers)
    assert folded.container_statuses[0].ready is True
    assert trigger == []
    # A result for another (older) container id does not count.
    folded, _ = fold(status, {(ProbeKind.READINESS, "old"): S}, workers)
    assert folded.container_statuses[0].ready is False


def test_fold_not_running_is_neither_started_nor_ready() -> None:
    status = PodStatus(container_statuses=(exited("a", "c1", 0),))
    folded, trigger = fold(status, {(ProbeKind.READINESS, "c1"): S}, {("a", ProbeKind.READINESS)})
    assert (folded.container_statuses[0].started, folded.container_statuses[0].ready) == (
        False,
        False,
    )
    assert trigger == []


def test_fold_init_containers_ready_when_exited_zero_and_sidecars_like_containers() -> None:
    pod = Pod(
        spec=PodSpec(
            init_containers=(
                Container(name="init"),
                Container(name="side", restart_policy="Always"),
            )
        )
    )
    status = PodStatus(
        init_container_statuses=(exited("init", "i1", 0), running("side", "s1")),
    )
    folded, trigger = fold(status, {}, {("side", ProbeKind.READINESS)}, pod)
    init, side = folded.init_container_statuses
    assert init.ready is True
    assert (side.started, side.ready) == (True, False)
    assert trigger == ["side"]
    failed = attrs_evolve_status(status, exited("init", "i1", 1))
    folded, _ = fold(failed, {}, set(), pod)
    assert folded.init_container_statuses[0].ready is False


def test_fold_changes_only_started_and_ready() -> None:
    # Every field set to something other than its default (a field added to a
    # model must be added here: the fold's copies must keep it).
    extra = {"futureField": "kept"}
    container: dict[str, Any] = {
        "extra": extra,
        "name": "a",
        "state": ContainerState(running=ContainerStateRunning(started_at=NOW)),
        "last_state": ContainerState(terminated=ContainerStateTerminated(exit_code=1)),
        "ready": False,
        "restart_count": 2,
        "image": "a:1",
        "image_id": "sha256:a",
        "container_id": "x://c1",
        "started": False,
        "allocated_resources": {"cpu": Quantity.parse("1")},
        "resources": {"limits": {"cpu": "1"}},
    }
    pod_status: dict[str, Any] = {
        "extra": extra,
        "phase": "Running",
        "conditions": (PodCondition(type="Ready", status="False"),),
        "message": "m",
        "reason": "r",
        "nominated_node_name": "node-b",
        "host_ip": "192.0.2.1",
        "host_ips": (PodIP(ip="192.0.2.1"),),
        "pod_ip": "10.0.0.1",
        "pod_ips": (PodIP(ip="10.0.0.1"),),
        "start_time": NOW,
        "init_container_statuses": (ContainerStatus(name="init", started=False),),
        "container_statuses": (ContainerStatus(**container),),
        "ephemeral_container_statuses": (waiting("debug"),),
        "qos_class": "Burstable",
    }
    assert set(container) == {a.name for a in attrs.fields(ContainerStatus)}
    assert set(pod_status) == {a.name for a in attrs.fields(PodStatus)}
    status = PodStatus(**pod_status)
    folded, _ = fold(status, {}, set())
    started = ContainerStatus(**{**container, "ready": True, "started": True})
    assert folded == PodStatus(**{**pod_status, "container_statuses": (started,)})
    # Folded again, nothing changes: the very same status comes back.
    again, _ = fold(folded, {}, set())
    assert again is folded


def test_fold_reuses_the_previous_folds_equal_copies() -> None:
    # Each sync folds a fresh, equal status (its states the previous ones, as the
    # generator passes them): the copies the previous fold made come back, so
    # the caller sees an unchanged container by identity.
    statuses = (running("a", "c1"), exited("b", "c2", 1))

    def fresh() -> PodStatus:
        return PodStatus(container_statuses=tuple(attrs.evolve(s) for s in statuses))

    first, _ = fold(fresh(), {}, set())
    again, _ = fold_pod_status(Pod(), fresh(), lambda k, c: None, lambda n, k: False, first)
    assert again.container_statuses[0] is first.container_statuses[0]
    assert again.container_statuses[1] is first.container_statuses[1]
    assert again == first
    # Without the previous fold, an equal copy is made.
    alone, _ = fold(fresh(), {}, set())
    assert alone == first and alone.container_statuses[0] is not first.container_statuses[0]


@pytest.mark.parametrize(
    "change",
    [
        {"restart_count": True},  # equal to 1, but not the same value
        {"restart_count": 2},
        {"extra": {"futureField": "x"}},
        {"allocated_resources": {"cpu": Quantity.parse("1")}},
        {"image": "other"},
        {"container_id": "c9"},
        {"state": ContainerState(running=ContainerStateRunning(started_at=NOW))},
    ],
)
def test_fold_reuses_a_previous_copy_only_when_it_is_the_same(change: dict[str, Any]) -> None:
    base = attrs.evolve(running("a", "c1"), restart_count=1)
    first, _ = fold(PodStatus(container_statuses=(base,)), {}, set())
    changed = attrs.evolve(base, **change)
    again, _ = fold_pod_status(
        Pod(),
        PodStatus(container_statuses=(changed,)),
        lambda k, c: None,
        lambda n, k: False,
        first,
    )
    (folded,) = again.container_statuses
    assert folded is not first.container_statuses[0]
    assert folded == changed.with_life(changed.state, changed.last_state, True, True)
    assert type(folded.restart_count) is type(changed.restart_count)
    # A copy whose flags the probes now set otherwise is not reused either.
    unready, _ = fold_pod_status(
        Pod(),
        PodStatus(container_statuses=(base,)),
        lambda k, c: None,
        lambda n, k: k is ProbeKind.READINESS,
        first,
    )
    assert unready.container_statuses[0].ready is False


def attrs_evolve_status(status: PodStatus, first_init: ContainerStatus) -> PodStatus:
    return PodStatus(
        init_container_statuses=(first_init, *status.init_container_statuses[1:]),
        container_statuses=status.container_statuses,
    )


# ---------------------------------------------------------------- expansion

EXPANSION_ENV = (
    EnvVar(name="VAR_A", value="A"),
    EnvVar(name="VAR_B", value="B"),
    EnvVar(name="VAR_C", value="C"),
    EnvVar(name="VAR_REF", value="$(VAR_A)"),
    EnvVar(name="VAR_EMPTY", value=""),
)


def test_expand_command_expands_each_argument_from_the_env() -> None:
    # The rules themselves are tested once, on upstream's table (tests/test_expand.py).
    assert expand_command(["sh", "-c", "$(VAR_A)-$(VAR_REF)-$$(VAR_B)-$(NOPE)"], EXPANSION_ENV) == [
        "sh",
        "-c",
        "A-$(VAR_A)-$(VAR_B)-$(NOPE)",
    ]


def test_expand_command_value_from_counts_as_empty() -> None:
    env = (
        EnvVar(
            name="POD_IP",
            value_from=EnvVarSource(field_ref=ObjectFieldSelector(field_path="status.podIP")),
        ),
    )
    assert expand_command(["sh", "-c", "x$(POD_IP)y"], env) == ["sh", "-c", "xy"]


# ---------------------------------------------------------------- ports and URLs

PORTED = Container(
    name="c",
    ports=(ContainerPort(name="http", container_port=8080), ContainerPort(container_port=9090)),
)


@pytest.mark.parametrize(
    ("port", "expected"),
    [(80, 80), ("http", 8080), ("8081", 8081), (65535, 65535)],
)
def test_resolve_port(port: int | str, expected: int) -> None:
    assert resolve_port(port, PORTED) == expected


@pytest.mark.parametrize(
    ("port", "message"),
    [
        ("metrics", 'strconv.Atoi: parsing "metrics": invalid syntax'),
        (0, "invalid port number: 0"),
        (65536, "invalid port number: 65536"),
        ("-1", "invalid port number: -1"),
    ],
)
def test_resolve_port_errors_in_the_kubelets_words(port: int | str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        resolve_port(port, PORTED)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("scheme", "host", "port", "path", "url"),
    # Upstream prober_test.go TestFormatURL, plus the default scheme.
    [
        ("http", "localhost", 93, "", "http://localhost:93/"),
        ("https", "localhost", 93, "/path", "https://localhost:93/path"),
        ("http", "localhost", 93, "?foo", "http://localhost:93/?foo"),
        ("https", "localhost", 93, "/path?bar", "https://localhost:93/path?bar"),
        ("HTTP", "10.0.0.1", 8080, "/healthz", "http://10.0.0.1:8080/healthz"),
        ("", "::1", 8080, "/x", "http://[::1]:8080/x"),
    ],
)
def test_format_probe_url(scheme: str, host: str, port: int, path: str, url: str) -> None:
    assert str(format_probe_url(scheme, host, port, path)) == url


def test_prober_imports_no_other_subsystem() -> None:
    import subprocess
    import sys

    code = (
        "import sys, kubelet_kit.prober; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('kubelet_kit.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    allowed = (
        "kubelet_kit.api",
        "kubelet_kit.container",
        "kubelet_kit.clock",
        "kubelet_kit.prober",
        "kubelet_kit.errors",
        "kubelet_kit._version",
        "kubelet_kit._lazy",
    )
    assert [m for m in out if not m.startswith(allowed)] == []
