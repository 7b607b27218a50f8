"""Container GC: the newest dead container per pod and name stays, older ones go
with their logs; old sandboxes that hold nothing go; a crash loop stays bounded."""

from __future__ import annotations

from pathlib import Path

from kubelet_kit.container import (
    ContainerConfig,
    ContainerMetadata,
    ContainerState,
    ImageSpec,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.container import labels as kl
from kubelet_kit.podsync.gc import collect_dead_containers
from kubelet_kit.testing import FakeClock, FakeRuntime, KubeletEnv


def _sandbox(tmp: Path, attempt: int) -> PodSandboxConfig:
    return PodSandboxConfig(
        metadata=PodSandboxMetadata("web", "default", "u1", attempt),
        log_directory=str(tmp / "default_web_u1"),
        labels={kl.POD_UID: "u1"},
    )


def _container(name: str, attempt: int, *, labelled: bool = True) -> ContainerConfig:
    labels = {kl.POD_UID: "u1", kl.CONTAINER_NAME: name} if labelled else {}
    return ContainerConfig(
        metadata=ContainerMetadata(name, attempt),
        image=ImageSpec("busybox"),
        labels=labels,
        log_path=f"{name}/{attempt}.log",
    )


async def test_gc_keeps_the_newest_dead_per_name_and_removes_the_rest_with_logs(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    rt = FakeRuntime(clock, images=["busybox"])
    old_sandbox = await rt.run_pod_sandbox(_sandbox(tmp_path, 0))
    await rt.stop_pod_sandbox(old_sandbox)
    clock.advance(1)
    config = _sandbox(tmp_path, 1)
    sandbox = await rt.run_pod_sandbox(config)

    async def run(
        name: str, attempt: int, *, exit_code: int | None = 1, labelled: bool = True
    ) -> str:
        clock.advance(1)
        cid = await rt.create_container(
            sandbox, _container(name, attempt, labelled=labelled), config
        )
        await rt.start_container(cid)
        if exit_code is not None:
            rt.exit_container(cid, exit_code)
        return cid

    app = [await run("app", attempt) for attempt in range(3)]
    side_dead = [await run("side", attempt) for attempt in range(2)]
    side_running = await run("side", 2, exit_code=None)
    foreign = await run("other", 0, labelled=False)
    logs = tmp_path / "default_web_u1"
    (logs / "app").mkdir(parents=True, exist_ok=True)
    for attempt in range(3):
        (logs / "app" / f"{attempt}.log").write_text("2026-12-02T00:00:00Z stderr F boom\n")
    (logs / "app" / "0.log.20261201-000000").write_text("rotated\n")

    result = await collect_dead_containers(rt)

    assert set(result.containers) == {app[0], app[1], side_dead[0]}
    assert result.sandboxes == (old_sandbox,)
    left = {c.id: c for c in await rt.list_containers()}
    assert set(left) == {app[2], side_dead[1], side_running, foreign}
    assert left[side_running].state is ContainerState.RUNNING
    assert sorted(p.name for p in (logs / "app").iterdir()) == ["2.log"]
    assert [s.id for s in await rt.list_pod_sandboxes()] == [sandbox]
    # Nothing more to collect.
    again = await collect_dead_containers(rt)
    assert again.containers == () and again.sandboxes == ()


async def test_a_crash_loop_keeps_one_dead_container_and_counts_every_restart() -> None:
    async with KubeletEnv() as env:
        env.add_pod(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "crasher", "uid": "uid-crasher"},
                "spec": {
                    "containers": [
                        {"name": "c", "image": "busybox", "command": ["sh", "-c", "exit 1"]}
                    ]
                },
            }
        )
        await env.sleep(900)  # restarts at 1, 11, 31, 71, 151, 311, 611 s
        restarts = env.status("crasher").container_statuses[0].restart_count
        assert restarts >= 6
        await env.sleep(60)  # one more collection
        mine = [
            c
            for c in await env.runtime.list_containers()
            if c.labels.get(kl.POD_UID) == "uid-crasher"
        ]
        dead = [c for c in mine if c.state is not ContainerState.RUNNING]
        assert len(dead) == 1, [(c.metadata.attempt, c.state) for c in mine]
        assert env.status("crasher").container_statuses[0].restart_count >= restarts
