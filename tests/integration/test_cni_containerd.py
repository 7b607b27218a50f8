"""The example CNI plugin called by a real CNI caller: containerd.

A private containerd (the harness's, with its own directories and socket) is
pointed at a CNI binary directory holding the example plugin (a wrapper that
runs examples/cni_plugin.py with this interpreter) and loopback, and at a
configuration list that uses the example. A sandbox without host networking
then reports the address the plugin leased, and stopping it releases the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from kubelet_kit.container import NamespaceOptions, PodSandboxState
from kubelet_kit.cri import CRIRuntime

from .containerd import Containerd, missing_parts
from .helpers import pod_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cni_plugin.py"
ADDRESSES = ["10.251.9.20/24", "10.251.9.21/24"]


@attrs.define
class StaticNet:
    containerd: Containerd
    data_dir: Path
    name: str

    def leases(self) -> dict[str, str]:
        """Leased address -> container id holding it."""
        d = self.data_dir / self.name
        if not d.is_dir():
            return {}
        return {p.name: p.read_text().split("\n")[0] for p in d.iterdir() if p.name != "lock"}


@pytest.fixture
def static_containerd(require_real: Callable[[bool, str], None]) -> Iterator[StaticNet]:
    missing = missing_parts()
    require_real(not missing, "containerd harness (" + ", ".join(missing) + ")")
    base = Path(tempfile.mkdtemp(prefix="kk-cni-it-"))
    bin_dir = base / "cni-bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "kk-static"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{EXAMPLE}" "$@"\n')
    wrapper.chmod(0o755)
    # containerd sets up the sandbox's loopback itself, from the same directory.
    (bin_dir / "loopback").symlink_to("/usr/lib/cni/loopback")
    net = StaticNet(Containerd(base), base / "leases", f"kk-static-it-{secrets.token_hex(3)}")
    harness = net.containerd
    harness.write_config()
    config = harness.config.read_text()
    assert 'bin_dir = "/usr/lib/cni"' in config
    harness.config.write_text(config.replace('bin_dir = "/usr/lib/cni"', f'bin_dir = "{bin_dir}"'))
    # Named to sort before the harness's loopback-only list: containerd uses the first.
    (harness.cni_conf / "05-kk-static.conflist").write_text(
        json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": net.name,
                "plugins": [
                    {"type": "kk-static", "addresses": ADDRESSES, "dataDir": str(net.data_dir)}
                ],
            }
        )
    )
    try:
        harness.start()
        harness.import_images()
        yield net
    finally:
        with contextlib.suppress(Exception):
            asyncio.run(_remove_all(harness.endpoint))
        harness.cleanup()


async def _remove_all(endpoint: str) -> None:
    async with CRIRuntime(endpoint, timeout=60) as rt:
        for sandbox in await rt.list_pod_sandboxes():
            with contextlib.suppress(Exception):
                await rt.stop_pod_sandbox(sandbox.id)
            with contextlib.suppress(Exception):
                await rt.remove_pod_sandbox(sandbox.id)


async def _network_ready(rt: CRIRuntime, within: float = 30.0) -> None:
    """containerd loads CNI configurations in the background at start."""
    deadline = time.monotonic() + within
    while True:
        cond = (await rt.status()).condition("NetworkReady")
        if cond is not None and cond.status:
            return
        assert time.monotonic() < deadline, f"containerd's network never became ready: {cond}"
        await asyncio.sleep(0.2)


async def test_containerd_gives_its_sandbox_the_address_the_example_plugin_leased(
    static_containerd: StaticNet,
) -> None:
    net = static_containerd
    async with CRIRuntime(net.containerd.endpoint, timeout=120) as rt:
        await _network_ready(rt)
        configs = [
            attrs.evolve(
                pod_config(net.containerd.logs),
                namespace_options=NamespaceOptions(host_network=False),
                hostname=f"pod{i}",
            )
            for i in range(2)
        ]
        first = await rt.run_pod_sandbox(configs[0])
        second = await rt.run_pod_sandbox(configs[1])
        assert (await rt.pod_sandbox_status(first)).ip == "10.251.9.20"
        assert (await rt.pod_sandbox_status(second)).ip == "10.251.9.21"
        assert net.leases() == {"10.251.9.20": first, "10.251.9.21": second}

        # containerd's StopPodSandbox runs DEL: the plugin releases the address,
        # and the next sandbox is handed it.
        await rt.stop_pod_sandbox(first)
        assert net.leases() == {"10.251.9.21": second}
        third = await rt.run_pod_sandbox(
            attrs.evolve(configs[0], metadata=attrs.evolve(configs[0].metadata, attempt=1))
        )
        status = await rt.pod_sandbox_status(third)
        assert status.state is PodSandboxState.READY
        assert status.ip == "10.251.9.20"
        for sid in (first, second, third):
            await rt.stop_pod_sandbox(sid)
            await rt.remove_pod_sandbox(sid)
        assert net.leases() == {}
