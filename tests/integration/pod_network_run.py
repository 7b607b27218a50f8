"""The runtime kit's network checks against a containerd with a real pod network,
run inside a network namespace of its own.

``python tests/integration/pod_network_run.py BASE CHECK...`` is started by
:mod:`test_cri_pod_network` under ``unshare --net``: the bridge, the pod addresses,
the NAT rules of port mappings and the test registry all live in that namespace and
vanish with it, so nothing of the machine's own network is touched. It starts a
private containerd whose CNI configuration is a bridge with host-local addresses,
the portmap plugin and loopback, runs the named checks with sandboxes on that
network, prints the report as one JSON object on its last line, and cleans up.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from integration.containerd import BUSYBOX_IMAGE, REGISTRY_HOST, Containerd  # noqa: E402
from kubelet_kit.container import (  # noqa: E402
    NamespaceOptions,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.cri import CRIRuntime  # noqa: E402
from kubelet_kit.testing.conformance import run_conformance  # noqa: E402

#: The pod network: addresses of the pods this namespace holds, nowhere else.
SUBNET = "10.250.77.0/24"
BRIDGE = "kkpod0"


def write_network(harness: Containerd) -> None:
    """Replace the harness's loopback-only network with a bridge, portmap and all."""
    for old in harness.cni_conf.glob("*.conflist"):
        old.unlink()
    (harness.cni_conf / "10-kubelet-kit-pods.conflist").write_text(
        json.dumps(
            {
                "cniVersion": "0.4.0",
                "name": "kubelet-kit-pods",
                "plugins": [
                    {
                        "type": "bridge",
                        "bridge": BRIDGE,
                        "isGateway": True,
                        "ipMasq": True,
                        "ipam": {
                            "type": "host-local",
                            "ranges": [[{"subnet": SUBNET}]],
                            "routes": [{"dst": "0.0.0.0/0"}],
                            "dataDir": str(harness.base / "ipam"),
                        },
                    },
                    {"type": "portmap", "capabilities": {"portMappings": True}},
                ],
            }
        )
    )


async def run(harness: Containerd, checks: list[str]) -> dict[str, object]:
    template = PodSandboxConfig(
        metadata=PodSandboxMetadata("template", "template", "template"),
        namespace_options=NamespaceOptions(host_network=False),
        cgroup_parent=f"{harness.cgroup_parent}/pod-network",
    )
    async with CRIRuntime(harness.endpoint, timeout=60) as rt:
        report = await run_conformance(
            rt,
            log_root=harness.logs,
            image=BUSYBOX_IMAGE,
            missing_image=f"{REGISTRY_HOST}/no-such-image:0",
            sandbox_template=template,
            network_template=template,
            checks=checks,
            timeout=30,
        )
        for sandbox in await rt.list_pod_sandboxes():
            await rt.stop_pod_sandbox(sandbox.id)
            await rt.remove_pod_sandbox(sandbox.id)
    return {r.name: {"status": r.status, "message": r.message} for r in report.results}


def main() -> int:
    base, checks = Path(sys.argv[1]), sys.argv[2:]
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    harness = Containerd(base)
    try:
        harness.write_config()
        write_network(harness)
        harness.start()
        harness.import_images()
        results = asyncio.run(run(harness, checks))
    finally:
        harness.cleanup()
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
