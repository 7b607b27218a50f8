"""Container log rotation: size-triggered renames, reopen, compression, bounded files."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from kubelet_kit.container import (
    ContainerConfig,
    ContainerMetadata,
    ImageSpec,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.errors import ConfigurationError
from kubelet_kit.podsync.logrotate import ContainerLogManager
from kubelet_kit.testing import FakeClock, FakeRuntime


async def _running(tmp: Path) -> tuple[FakeClock, FakeRuntime, str, Path]:
    clock = FakeClock()
    rt = FakeRuntime(clock, images=["busybox"])
    config = PodSandboxConfig(
        metadata=PodSandboxMetadata("p", "default", "u1"), log_directory=str(tmp / "pod")
    )
    sandbox = await rt.run_pod_sandbox(config)
    cid = await rt.create_container(
        sandbox,
        ContainerConfig(
            metadata=ContainerMetadata("app"), image=ImageSpec("busybox"), log_path="app/0.log"
        ),
        config,
    )
    await rt.start_container(cid)
    path = tmp / "pod" / "app" / "0.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    return clock, rt, cid, path


def _grow(path: Path, size: int) -> None:
    with path.open("a") as f:
        f.write("2026-12-02T00:00:00.000000000Z stdout F " + "x" * (size - 41) + "\n")


async def test_a_small_log_is_left_alone(tmp_path: Path) -> None:
    _, rt, _, path = await _running(tmp_path)
    _grow(path, 100)
    manager = ContainerLogManager(rt, max_size=1000)
    assert await manager.rotate_logs() == []
    assert sorted(p.name for p in path.parent.iterdir()) == ["0.log"]


async def test_rotation_renames_reopens_compresses_and_keeps_max_files(tmp_path: Path) -> None:
    clock, rt, cid, path = await _running(tmp_path)
    manager = ContainerLogManager(rt, max_size=1000, max_files=3, clock=clock)
    names = []
    for _ in range(4):
        _grow(path, 1500)
        clock.advance(1)
        assert await manager.rotate_logs() == [cid]
        names = sorted(p.name for p in path.parent.iterdir())
    # The live file (new, empty), the newest rotated as it is, the one before it
    # compressed; older ones gone: 3 files in all.
    assert len(names) == 3
    live, newest, older = "0.log", names[2], names[1]
    assert names[0] == live and (path.parent / live).stat().st_size == 0
    assert newest.startswith("0.log.2") and not newest.endswith(".gz")
    assert older.endswith(".gz") and older < newest
    with gzip.open(path.parent / older, "rt") as f:
        assert f.read().startswith("2026-12-02T00:00:00.000000000Z stdout F xxx")
    assert len(rt.calls_to("reopen_container_log")) == 4


async def test_leftovers_of_an_interrupted_compression_are_cleaned(tmp_path: Path) -> None:
    clock, rt, _, path = await _running(tmp_path)
    d = path.parent
    (d / "0.log.20261201-000000.tmp").write_text("half")
    (d / "0.log.20261201-000001").write_text("done twice")
    with gzip.open(d / "0.log.20261201-000001.gz", "wt") as f:
        f.write("done twice")
    _grow(path, 2000)
    await ContainerLogManager(rt, max_size=1000, max_files=5, clock=clock).rotate_logs()
    names = sorted(p.name for p in d.iterdir())
    assert "0.log.20261201-000000.tmp" not in names
    assert "0.log.20261201-000001" not in names and "0.log.20261201-000001.gz" in names


async def test_a_failed_reopen_puts_the_name_back(tmp_path: Path) -> None:
    from kubelet_kit.errors import ContainerRuntimeError

    clock, rt, _, path = await _running(tmp_path)
    _grow(path, 2000)
    rt.inject_error("reopen_container_log", ContainerRuntimeError("no"))
    assert await ContainerLogManager(rt, max_size=1000, clock=clock).rotate_logs() == []
    assert sorted(p.name for p in path.parent.iterdir()) == ["0.log"]
    assert path.stat().st_size >= 2000


class _WithoutReopen:
    """A runtime like the given one, minus reopen_container_log."""

    def __init__(self, inner: FakeRuntime) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> object:
        if name == "reopen_container_log":
            raise AttributeError(name)
        return getattr(self.inner, name)


async def test_a_runtime_that_cannot_reopen_logs_is_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from prometheus_client import CollectorRegistry

    from kubelet_kit.node.instrumented import InstrumentedRuntime
    from kubelet_kit.node.metrics import KubeletMetrics

    _, rt, _, path = await _running(tmp_path)
    _grow(path, 2000)
    plain = _WithoutReopen(rt)
    assert await ContainerLogManager(plain).rotate_logs() == []  # type: ignore[arg-type]
    assert caplog.text.count("container logs are not rotated") == 1
    caplog.clear()
    # A wrapper that forwards only what its runtime has says so once, then is quiet.
    wrapped = InstrumentedRuntime(plain, KubeletMetrics.for_registry(CollectorRegistry()))  # type: ignore[arg-type]
    manager = ContainerLogManager(wrapped, max_size=1000)
    assert await manager.rotate_logs() == []
    assert await manager.rotate_logs() == []
    assert caplog.text.count("container logs are not rotated") == 1
    assert sorted(p.name for p in path.parent.iterdir()) == ["0.log"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_size": 0}, "containerLogMaxSize"),
        ({"max_files": 1}, "containerLogMaxFiles"),
    ],
)
def test_bad_limits_are_refused_naming_the_field(kwargs: dict[str, int], field: str) -> None:
    with pytest.raises(ConfigurationError, match=field):
        ContainerLogManager(FakeRuntime(), **kwargs)


def test_from_config_rotates_logs_by_the_configuration(tmp_path: Path) -> None:
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration
    from kubelet_kit.kubelet import Kubelet

    config = KubeletConfiguration(
        container_log_max_size="5Mi", container_log_max_files=3, cgroups_per_qos=False
    )
    kubelet = Kubelet.from_config(config, node_name="n1", root_dir=tmp_path, runtime=FakeRuntime())
    manager = kubelet.housekeeper.container_log_manager
    assert manager is not None and (manager.max_size, manager.max_files) == (5 << 20, 3)
    with pytest.raises(ConfigurationError, match="containerLogMaxSize: 'lots'"):
        Kubelet.from_config(
            KubeletConfiguration(container_log_max_size="lots", cgroups_per_qos=False),
            node_name="n1",
            root_dir=tmp_path,
            runtime=FakeRuntime(),
        )


async def test_the_agent_rotates_logs_as_it_keeps_house() -> None:
    from kubelet_kit.testing import KubeletEnv

    clock = FakeClock()
    rt = FakeRuntime(clock)
    manager = ContainerLogManager(rt, max_size=1000, clock=clock)
    async with KubeletEnv(clock=clock, runtime=rt, container_log_manager=manager) as env:
        env.add_pod(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "talker"},
                "spec": {
                    "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]
                },
            }
        )
        await env.wait_for(lambda: env.phase("talker") == "Running")
        (container,) = await rt.list_containers()
        path = Path((await rt.container_status(container.id)).log_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        _grow(path, 5000)
        # Within the next round (10 s); the file work runs in a thread, so wait
        # for its outcome rather than for a fixed time.
        took = await env.wait_for(
            lambda: bool(rt.calls_to("reopen_container_log")), timeout=60, what="log rotated"
        )
        # The next round (10 s) does it. The file work runs in a thread, and the
        # fake clock keeps stepping while it does: on a loaded machine that real
        # time passes for a round or two more of clock time (21 s was seen), so the
        # bound is "a few rounds", not "one".
        assert took < 40
        assert [c.args[0] for c in rt.calls_to("reopen_container_log")] == [container.id]
        assert len(list(path.parent.iterdir())) == 2
