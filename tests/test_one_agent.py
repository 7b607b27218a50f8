"""One wiring for every face: a part given once reaches the embedded composer,
``build_agent`` and ``kubelet-kit run``, and everything else is the reference
part the kubelet would use."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

from kubelet_kit import cli
from kubelet_kit.agent import Kubelet, build_agent
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.cm.manager import CgroupContainerManager
from kubelet_kit.container import ContainerFilter, ContainerState
from kubelet_kit.eviction.manager import ThresholdEvictionManager
from kubelet_kit.node.instrumented import InstrumentedRuntime
from kubelet_kit.pleg import GenericPLEG
from kubelet_kit.podsync.imagegc import ImageGCManager
from kubelet_kit.podsync.logrotate import ContainerLogManager
from kubelet_kit.prober import ReferenceProbeManager
from kubelet_kit.testing import FakeClock, FakeRuntime
from kubelet_kit.volume.reconciler import ReconcilingVolumeManager

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
  - {name: main, image: busybox, command: [sleep, "3600"]}
"""


class RecordingPLEG(GenericPLEG):
    """The user's own PLEG (here the reference one, marked so it can be found)."""

    started = 0

    async def run(self) -> None:
        RecordingPLEG.started += 1
        await super().run()


# cgroupsPerQOS off and the node API off: the machine stays as it is.
CONFIG = KubeletConfiguration(cgroups_per_qos=False, port=0, healthz_port=0)


def test_the_embedded_composer_wires_what_it_is_not_given(tmp_path: Path) -> None:
    runtime = FakeRuntime(FakeClock())
    pleg = RecordingPLEG(runtime, runtime.clock)
    kubelet = Kubelet(
        CONFIG, runtime=runtime, pleg=pleg, clock=runtime.clock, root_dir=tmp_path, node_name="n1"
    )
    assert kubelet.pleg is pleg
    assert kubelet.base_runtime is runtime
    assert isinstance(kubelet.runtime, InstrumentedRuntime) and kubelet.runtime.inner is runtime
    # The rest is what kubelet-kit run uses, not stubs.
    assert isinstance(kubelet.container_manager, CgroupContainerManager)
    assert isinstance(kubelet.volume_manager, ReconcilingVolumeManager)
    assert isinstance(kubelet.probe_manager, ReferenceProbeManager)
    assert isinstance(kubelet.eviction_manager, ThresholdEvictionManager)
    assert isinstance(kubelet.housekeeper.image_gc, ImageGCManager)
    assert isinstance(kubelet.housekeeper.container_log_manager, ContainerLogManager)


def test_without_a_config_the_embedded_runtime_runs_the_pods(tmp_path: Path) -> None:
    from kubelet_kit.runtimes.host import HostProcessRuntime

    kubelet = Kubelet(
        root_dir=tmp_path, node_name="n1", config=KubeletConfiguration(cgroups_per_qos=False)
    )
    assert isinstance(kubelet.base_runtime, HostProcessRuntime)
    assert isinstance(kubelet.pleg, GenericPLEG)
    # The kubelet's runtimeRequestTimeout bounds a start, not a shorter guess.
    assert kubelet.base_runtime.start_timeout == 120


def test_the_embedded_runtime_takes_the_configured_request_timeout(tmp_path: Path) -> None:
    from kubelet_kit.runtimes.host import HostProcessRuntime

    config = KubeletConfiguration(cgroups_per_qos=False, runtime_request_timeout="5m")
    kubelet = Kubelet(config, root_dir=tmp_path, node_name="n1")
    assert isinstance(kubelet.base_runtime, HostProcessRuntime)
    assert kubelet.base_runtime.start_timeout == 300


def test_a_configured_cri_endpoint_is_the_runtime(tmp_path: Path) -> None:
    from kubelet_kit.cri import CRIRuntime

    config = KubeletConfiguration(
        cgroups_per_qos=False,
        container_runtime_endpoint="unix:///nonexistent/cri.sock",
        runtime_request_timeout="7s",
    )
    kubelet = Kubelet(config, root_dir=tmp_path, node_name="n1")
    assert isinstance(kubelet.base_runtime, CRIRuntime)
    assert "unix:///nonexistent/cri.sock" in repr(kubelet.base_runtime)
    assert "timeout=7" in repr(kubelet.base_runtime)


async def test_build_agent_passes_the_part_on_and_serves_the_node_api(tmp_path: Path) -> None:
    runtime = FakeRuntime(FakeClock())
    pleg = RecordingPLEG(runtime, runtime.clock)
    config = KubeletConfiguration(cgroups_per_qos=False, port=0, read_only_port=0, healthz_port=0)
    agent = await build_agent(
        config, runtime=runtime, pleg=pleg, clock=runtime.clock, root_dir=tmp_path, node_name="n1"
    )
    assert agent.kubelet.pleg is pleg
    assert agent.server is None  # every port off: nothing to serve
    assert agent.cluster is None
    served = await build_agent(
        KubeletConfiguration(
            cgroups_per_qos=False, port=0, healthz_port=0, read_only_port=10255, address="127.0.0.1"
        ),
        runtime=runtime,
        pleg=pleg,
        clock=runtime.clock,
        root_dir=tmp_path,
        node_name="n1",
    )
    assert served.server is not None and served.server.kubelet is served.kubelet
    assert served.server.read_only_port == 10255


def test_kubelet_kit_run_takes_the_part_too(tmp_path: Path) -> None:
    manifests = tmp_path / "pods"
    manifests.mkdir()
    (manifests / "web.yaml").write_text(POD)
    runtime = FakeRuntime()
    runtime.add_image("busybox")
    seen: dict[str, Any] = {}

    class StopOncePodRuns(RecordingPLEG):
        async def run(self) -> None:
            async def stop_when_running() -> None:
                while not await runtime.list_containers(
                    ContainerFilter(state=ContainerState.RUNNING)
                ):
                    await asyncio.sleep(0.02)
                seen["running"] = True
                os.kill(os.getpid(), signal.SIGTERM)  # as an operator's kill would

            task = asyncio.create_task(stop_when_running())
            try:
                await super().run()
            finally:
                task.cancel()

    pleg = StopOncePodRuns(runtime, runtime.clock)
    before = RecordingPLEG.started
    status = cli.main(
        [
            "run",
            "--pod-manifest-path",
            str(manifests),
            "--root-dir",
            str(tmp_path / "root"),
            "--pod-logs-dir",
            str(tmp_path / "logs"),
            "--cgroups-per-qos=false",
            "--port",
            "0",
            "--healthz-port",
            "0",
            "--hostname-override",
            "n1",
            "--file-check-frequency",
            "0.2",
        ],
        runtime=runtime,
        pleg=pleg,
    )
    assert status == 0
    assert RecordingPLEG.started == before + 1  # the CLI ran the PLEG it was given
    assert seen.get("running"), "the pod never ran on the given runtime"
    assert [c.args[0] for c in runtime.calls_to("run_pod_sandbox")], "no sandbox made"
