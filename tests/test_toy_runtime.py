"""The core-only runtime of examples/toy_runtime.py: it passes the runtime kit's
core checks (the rest skipped as not offered) and runs pods through the composer."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kubelet_kit.container import RuntimeCore, runtime_capabilities
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.conformance import CHECKS, REQUIRES, check_runtime, run_conformance
from kubelet_kit.testing.env import KubeletEnv

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "toy_runtime.py"

#: The checks that need nothing beyond the core.
CORE_CHECKS = {
    "version_and_status",
    "sandbox_lifecycle",
    "unknown_ids",
    "duplicate_names",
    "container_lifecycle",
    "multi_container",
}


@pytest.fixture(scope="module")
def toy() -> ModuleType:
    spec = importlib.util.spec_from_file_location("toy_runtime_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def pod(name: str, **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "restartPolicy": container.pop("restartPolicy", "Always"),
            "containers": [{"name": "app", "image": "busybox", **container}],
        },
    }


def test_the_toy_is_a_core_runtime_declaring_nothing_more(toy: ModuleType) -> None:
    runtime = toy.ToyRuntime()
    assert isinstance(runtime, RuntimeCore)
    assert runtime_capabilities(runtime) == frozenset()


def test_every_check_names_what_it_needs() -> None:
    assert set(REQUIRES) == set(CHECKS)
    assert {name for name, needs in REQUIRES.items() if not needs} == CORE_CHECKS


async def test_the_kit_passes_the_core_checks_and_skips_the_rest(
    toy: ModuleType, tmp_path: Path
) -> None:
    report = await check_runtime(toy.ToyRuntime(), log_root=tmp_path, poll_interval=0.01)
    passed = {r.name for r in report.results if r.status == "passed"}
    assert passed == CORE_CHECKS
    skipped = {r.name: r.message for r in report.results if r.status == "skipped"}
    assert set(skipped) == set(CHECKS) - CORE_CHECKS
    assert skipped["exec"] == "not offered: exec"
    assert skipped["images"] == "not offered: images"
    assert skipped["exit_codes_and_logs"] == "not offered: logs, processes"
    assert skipped["sigterm_ignored"] == "not offered: processes"
    assert skipped["stats"] == "not offered: stats"
    assert skipped["events"] == "not offered: events, processes"
    assert skipped["attach"] == "not offered: streams"
    assert skipped["log_reopen"] == "not offered: log_reopen, logs, processes"


async def test_a_broken_toy_fails_the_core_checks(toy: ModuleType, tmp_path: Path) -> None:
    class Forgetful(toy.ToyRuntime):  # type: ignore[name-defined,misc]
        async def remove_container(self, container_id: str) -> None:
            pass  # never removes anything

    report = await run_conformance(
        Forgetful(), log_root=tmp_path, poll_interval=0.01, checks=sorted(CORE_CHECKS)
    )
    assert report.result("container_lifecycle").status == "failed"
    assert "container_status (removed)" in report.result("container_lifecycle").message


async def test_a_pod_runs_on_the_toy_through_the_composer(toy: ModuleType) -> None:
    clock = FakeClock()
    runtime = toy.ToyRuntime(now=clock.now)
    async with KubeletEnv(clock=clock, runtime=runtime, auto_images=False) as env:
        env.add_pod(pod("web"))
        await env.wait_for(lambda: env.phase("web") == "Running", what="web Running")
        status = env.status("web")
        assert status.container_statuses[0].ready
        assert status.container_statuses[0].image == "busybox:latest"
        assert await env.running_containers("uid-web") == ["app"]
        reasons = [e.reason for e in env.kubelet.events.events("uid-web")]
        assert "Pulling" not in reasons and "Pulled" not in reasons  # nothing to pull
        assert "Started" in reasons

        env.delete_pod("web", grace_period_seconds=5)
        await env.wait_for(
            lambda: (
                not runtime.containers
                or all(c.state.value == "CONTAINER_EXITED" for c in runtime.containers.values())
            ),
            what="web stopped",
        )


async def test_a_true_container_completes_on_the_toy(toy: ModuleType) -> None:
    clock = FakeClock()
    runtime = toy.ToyRuntime(now=clock.now)
    async with KubeletEnv(clock=clock, runtime=runtime, auto_images=False) as env:
        env.add_pod(pod("job", command=["true"], restartPolicy="Never"))
        await env.wait_for(lambda: env.phase("job") == "Succeeded", what="job Succeeded")
        terminated = env.status("job").container_statuses[0].state.terminated
        assert terminated is not None
        assert (terminated.exit_code, terminated.reason) == (0, "Completed")


async def test_served_over_the_cri_the_core_works_and_the_rest_is_unimplemented(
    toy: ModuleType, tmp_path: Path
) -> None:
    """A core-only runtime behind CRIServer: the core RPCs reach it, and the RPCs of
    a capability it does not offer answer UNIMPLEMENTED naming it, as a CRI
    runtime does for what it lacks (not INTERNAL from a missing method)."""
    from kubelet_kit.container import (
        ContainerConfig,
        ContainerMetadata,
        ContainerState,
        ImageSpec,
        PodSandboxConfig,
        PodSandboxMetadata,
    )
    from kubelet_kit.cri import CRIRuntime, CRIServer
    from kubelet_kit.cri_server import load_runtime
    from kubelet_kit.errors import UnimplementedError

    async with (
        CRIServer(toy.ToyRuntime(), tmp_path / "toy.sock") as server,
        CRIRuntime(server.endpoint) as client,
    ):
        assert (await client.version()).runtime_name == "toy"
        sandbox = PodSandboxConfig(metadata=PodSandboxMetadata("web", "default", "uid-1"))
        sid = await client.run_pod_sandbox(sandbox)
        config = ContainerConfig(
            metadata=ContainerMetadata("app"), image=ImageSpec("busybox"), command=("sleep",)
        )
        cid = await client.create_container(sid, config, sandbox)
        await client.start_container(cid)
        assert (await client.container_status(cid)).state == ContainerState.RUNNING
        with pytest.raises(UnimplementedError, match="runtime ToyRuntime does not offer exec"):
            await client.exec_sync(cid, ["true"], 5)
        with pytest.raises(UnimplementedError, match="does not offer images"):
            await client.image_status(ImageSpec("busybox"))
        with pytest.raises(UnimplementedError, match="does not offer stats"):
            await client.list_container_stats()
    # The command line takes it too (MODULE:NAME needs only the core).
    loaded = await load_runtime("toy_runtime_example:ToyRuntime")
    assert runtime_capabilities(loaded) == frozenset()
