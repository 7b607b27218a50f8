"""Exec probes through a real containerd (the CRI's ExecSync), as the kubelet runs them."""

from __future__ import annotations

import pytest

from kubelet_kit.container import ContainerState, ImageSpec
from kubelet_kit.cri import CRIRuntime
from kubelet_kit.prober.probers import ProbeStatus, exec_probe

from .containerd import BUSYBOX_IMAGE, Containerd
from .helpers import container_config, pod_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


async def test_exec_probes_succeed_fail_and_time_out_in_a_real_container(
    cri: CRIRuntime, containerd: Containerd
) -> None:
    # As the kubelet would with IfNotPresent: an earlier test may have removed it.
    if await cri.image_status(ImageSpec(BUSYBOX_IMAGE)) is None:
        await cri.pull_image(ImageSpec(BUSYBOX_IMAGE))
    pod = pod_config(containerd.logs)
    sandbox_id = await cri.run_pod_sandbox(pod)
    try:
        cid = await cri.create_container(
            sandbox_id,
            container_config(pod, "app", ("sh", "-c", "touch /tmp/healthy; exec sleep 600")),
            pod,
        )
        await cri.start_container(cid)
        assert (await cri.container_status(cid)).state is ContainerState.RUNNING

        ok = await exec_probe(cri, cid, ["sh", "-c", "cat /tmp/healthy && echo fine"], 5)
        assert (ok.status, ok.output.strip()) == (ProbeStatus.SUCCESS, "fine")

        bad = await exec_probe(cri, cid, ["sh", "-c", "echo broken; exit 3"], 5)
        assert bad.status is ProbeStatus.FAILURE
        assert "broken" in bad.output

        slow = await exec_probe(cri, cid, ["sh", "-c", "sleep 30"], 1)
        assert slow.status is ProbeStatus.FAILURE
        assert "timed out" in slow.output
    finally:
        await cri.stop_pod_sandbox(sandbox_id)
        await cri.remove_pod_sandbox(sandbox_id)
