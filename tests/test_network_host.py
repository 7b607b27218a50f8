"""CNI networking of the host-process runtime, for real: Debian's bridge,
host-local and loopback plugins, as root.

Each test makes its own bridge (a unique name) on a private /24 it picks, keeps
its namespaces, IPAM leases and result cache under its own temporary
directory, and removes all of it afterwards. The only traffic is the readiness
probe's, from the agent to the pod address the test created, bounded by the
test's time limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest
from realtime import wait_until

from kubelet_kit.cni import CNIError
from kubelet_kit.config import FileSource
from kubelet_kit.container import (
    ContainerConfig,
    ContainerMetadata,
    ContainerState,
    ImageSpec,
    NamespaceOptions,
    PodSandboxConfig,
    PodSandboxMetadata,
    PodSandboxState,
    PortMapping,
)
from kubelet_kit.errors import ContainerRuntimeError
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.network import CNINetwork, PodRef, is_netns
from kubelet_kit.runtimes.host import HostProcessRuntime
from kubelet_kit.testing.env import stub_parts

pytestmark = pytest.mark.timeout(120)

CNI_BIN = Path("/usr/lib/cni")
NET_NAME = "kk-test-net"
NODE = "cni-node"


@attrs.define
class Net:
    """One test's private CNI network."""

    tmp: Path
    bridge: str
    subnet: ipaddress.IPv4Network
    conf_dir: Path
    ipam_dir: Path
    netns_dir: Path
    cache_dir: Path

    def network(self) -> CNINetwork:
        return CNINetwork(
            self.conf_dir, [CNI_BIN], cache_dir=self.cache_dir, netns_dir=self.netns_dir
        )

    def leases(self) -> set[str]:
        """Addresses host-local holds (one file per address)."""
        d = self.ipam_dir / NET_NAME
        if not d.is_dir():
            return set()
        return {p.name for p in d.iterdir() if p.name[0].isdigit()}

    def namespaces(self) -> list[str]:
        return sorted(os.listdir(self.netns_dir)) if self.netns_dir.is_dir() else []


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)


def _mounted(path: Path) -> bool:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return any(line.split()[4] == str(path) for line in f)


@pytest.fixture
def net(tmp_path: Path, require_real: Callable[[bool, str], None]) -> Iterator[Net]:
    require_real(os.geteuid() == 0, "root (network namespaces, bridges)")
    require_real(
        all((CNI_BIN / p).exists() for p in ("bridge", "host-local", "loopback")),
        "containernetworking-plugins in /usr/lib/cni",
    )
    tag = secrets.token_hex(3)
    # A /24 in 10.250.0.0/16 that no interface of this machine is on.
    used = _run("ip", "-4", "-o", "addr").stdout
    third = next(
        n for n in (secrets.randbelow(250) + 1 for _ in range(100)) if f"10.250.{n}." not in used
    )
    subnet = ipaddress.IPv4Network(f"10.250.{third}.0/24")
    n = Net(
        tmp=tmp_path,
        bridge=f"kkbr{tag}",
        subnet=subnet,
        conf_dir=tmp_path / "conf",
        ipam_dir=tmp_path / "ipam",
        netns_dir=tmp_path / "netns",
        cache_dir=tmp_path / "cache",
    )
    n.conf_dir.mkdir()
    (n.conf_dir / "10-test.conflist").write_text(
        json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": NET_NAME,
                "plugins": [
                    {
                        "type": "bridge",
                        "bridge": n.bridge,
                        "isGateway": True,
                        "ipMasq": False,
                        "ipam": {
                            "type": "host-local",
                            "ranges": [[{"subnet": str(subnet)}]],
                            "dataDir": str(n.ipam_dir),
                        },
                    },
                    {"type": "loopback"},
                ],
            }
        )
    )
    try:
        yield n
    finally:
        # Whatever a failed test left: namespaces, the run directory's mount, the bridge.
        for name in n.namespaces():
            path = n.netns_dir / name
            _run("umount", "-l", str(path))
            with contextlib.suppress(OSError):
                path.unlink()
        if _mounted(n.netns_dir):
            _run("umount", "-l", str(n.netns_dir))
        _run("ip", "link", "del", n.bridge)


def sandbox_config(tmp: Path, name: str, *, host_network: bool = False) -> PodSandboxConfig:
    uid = f"uid-{secrets.token_hex(4)}"
    return PodSandboxConfig(
        metadata=PodSandboxMetadata(name=name, namespace="default", uid=uid),
        hostname=name,
        log_directory=str(tmp / "logs" / name),
        namespace_options=NamespaceOptions(host_network=host_network),
    )


def ns_inode(path: str) -> str:
    return f"net:[{os.stat(path).st_ino}]"


async def test_a_sandbox_gets_its_own_namespace_and_address_and_gives_them_back(
    net: Net,
) -> None:
    runtime = HostProcessRuntime(net.tmp / "state", network=net.network())
    status = await runtime.status()
    assert status.condition("NetworkReady") is not None
    assert status.condition("NetworkReady").status  # type: ignore[union-attr]
    cfg = sandbox_config(net.tmp, "web")
    sid = await runtime.run_pod_sandbox(cfg)
    sb = await runtime.pod_sandbox_status(sid)
    assert ipaddress.IPv4Address(sb.ip) in net.subnet
    assert sb.ip != str(net.subnet[1])  # .1 is the bridge's gateway address
    assert not sb.namespace_options.host_network
    assert net.leases() == {sb.ip}
    netns = str(net.netns_dir / f"kk-{sid}")
    assert is_netns(netns)

    # The container and an exec both run inside the sandbox's namespace, where
    # eth0 holds the pod address.
    container = ContainerConfig(
        metadata=ContainerMetadata(name="c"),
        image=ImageSpec("busybox"),
        command=("/bin/sh", "-c", "readlink /proc/self/ns/net; exec sleep 60"),
        log_path="c/0.log",
    )
    cid = await runtime.create_container(sid, container, cfg)
    await runtime.start_container(cid)
    log = Path(cfg.log_directory) / "c" / "0.log"
    await wait_until(lambda: log.exists() and "net:[" in log.read_text(), "the container's log")
    assert ns_inode(netns) in log.read_text()
    res = await runtime.exec_sync(cid, ["ip", "-4", "-o", "addr", "show", "eth0"], timeout=10)
    assert res.exit_code == 0, res.stderr
    assert f"inet {sb.ip}/24" in res.stdout.decode()
    res = await runtime.exec_sync(cid, ["readlink", "/proc/self/ns/net"], timeout=10)
    assert res.stdout.decode().strip() == ns_inode(netns)

    # Stopping runs DEL: the namespace is gone and the address released.
    await runtime.stop_pod_sandbox(sid)
    assert (await runtime.container_status(cid)).state is ContainerState.EXITED
    assert not os.path.lexists(netns)
    assert net.leases() == set()
    assert not list((net.cache_dir / "results").iterdir())
    await runtime.stop_pod_sandbox(sid)  # idempotent: no second DEL needed
    await runtime.remove_pod_sandbox(sid)
    assert await runtime.list_pod_sandboxes() == []


async def test_host_network_sandboxes_keep_sharing_the_hosts_network(net: Net) -> None:
    runtime = HostProcessRuntime(net.tmp / "state", network=net.network(), host_ip="192.0.2.7")
    sid = await runtime.run_pod_sandbox(sandbox_config(net.tmp, "host", host_network=True))
    sb = await runtime.pod_sandbox_status(sid)
    assert sb.ip == "192.0.2.7"
    assert sb.namespace_options.host_network
    assert net.namespaces() == [] and net.leases() == set()
    await runtime.remove_pod_sandbox(sid)


async def test_a_failed_add_leaves_nothing_behind(net: Net) -> None:
    # A second address range-less network: host-local refuses it, after bridge
    # made its interfaces; the runtime must DEL and drop the namespace.
    conf = json.loads((net.conf_dir / "10-test.conflist").read_text())
    conf["plugins"][0]["ipam"]["ranges"] = [[{"subnet": "10.250.0.0/33"}]]
    (net.conf_dir / "10-test.conflist").write_text(json.dumps(conf))
    runtime = HostProcessRuntime(net.tmp / "state", network=net.network())
    pattern = r"failed to setup network for sandbox .*type='bridge'"
    with pytest.raises(ContainerRuntimeError, match=pattern):
        await runtime.run_pod_sandbox(sandbox_config(net.tmp, "broken"))
    assert await runtime.list_pod_sandboxes() == []
    assert net.namespaces() == []
    assert net.leases() == set()


async def test_start_up_releases_what_an_earlier_agent_left_behind(net: Net) -> None:
    first = HostProcessRuntime(net.tmp / "state", network=net.network())
    lost = await first.run_pod_sandbox(sandbox_config(net.tmp, "lost"))
    kept = await first.run_pod_sandbox(sandbox_config(net.tmp, "kept"))
    lost_ip = (await first.pod_sandbox_status(lost)).ip
    kept_ip = (await first.pod_sandbox_status(kept)).ip
    # A namespace whose sandbox record never got written (a crash mid-way).
    orphan = await net.network().setup("0" * 64, PodRef("orphan", "default", "u"))
    assert net.leases() == {lost_ip, kept_ip, orphan.ip}
    # The machine "rebooted" under one sandbox: its namespace is gone.
    subprocess.run(["umount", str(net.netns_dir / f"kk-{lost}")], check=True)
    os.unlink(net.netns_dir / f"kk-{lost}")

    second = HostProcessRuntime(net.tmp / "state", network=net.network())
    states = {s.id: s.state for s in await second.list_pod_sandboxes()}
    assert states == {lost: PodSandboxState.NOTREADY, kept: PodSandboxState.READY}
    assert net.leases() == {kept_ip}
    assert net.namespaces() == [f"kk-{kept}"]
    await second.remove_pod_sandbox(kept)
    await second.remove_pod_sandbox(lost)
    assert net.leases() == set() and net.namespaces() == []


WEB_POD = """
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
    - name: server
      image: python:3.11-slim
      command: [%(python)s, -m, http.server, "8080", --bind, 0.0.0.0]
      ports: [{name: http, containerPort: 8080}]
      readinessProbe:
        httpGet: {path: /, port: http}
        periodSeconds: 1
        timeoutSeconds: 2
"""


async def test_a_pod_is_probed_ready_on_its_own_address_and_deleted_cleanly(net: Net) -> None:
    manifests = net.tmp / "manifests"
    manifests.mkdir()
    (manifests / "web.yaml").write_text(WEB_POD % {"python": json.dumps(sys.executable)})
    problems: list[str] = []
    kubelet = Kubelet(
        **stub_parts(
            runtime=HostProcessRuntime(net.tmp / "runtime", network=net.network()),
            sources=[FileSource(manifests, node_name=NODE, check_frequency=0.3)],
            node_name=NODE,
            root_dir=net.tmp / "agent",
            pod_logs_dir=net.tmp / "logs",
            on_pod_problem=problems.append,
        )
    )
    task = asyncio.create_task(kubelet.run())

    def status():  # type: ignore[no-untyped-def]
        pod = next((p for p in kubelet.pods() if p.metadata.name == f"web-{NODE}"), None)
        return kubelet.pod_status(pod.metadata.uid) if pod is not None else None

    def ready() -> bool:
        st = status()
        cond = st.condition("Ready") if st is not None else None
        return cond is not None and cond.status == "True"

    try:
        await wait_until(ready, "the pod Ready by its HTTP readiness probe", timeout=90)
        pod_ip = status().pod_ip
        assert ipaddress.IPv4Address(pod_ip) in net.subnet
        assert net.leases() == {pod_ip}
        assert len(net.namespaces()) == 1
        # The server listens only in the pod's namespace: the host has no such socket.
        netns = str(net.netns_dir / net.namespaces()[0])
        inside = _run("nsenter", f"--net={netns}", "ss", "-ltnH", "sport = :8080").stdout
        assert "0.0.0.0:8080" in inside
        assert "0.0.0.0:8080" not in _run("ss", "-ltnH", "sport = :8080").stdout

        (manifests / "web.yaml").unlink()
        await wait_until(
            lambda: net.namespaces() == [] and net.leases() == set(),
            "the namespace removed and the address released",
        )
    finally:
        kubelet.stop()
        await asyncio.wait_for(task, 30)
        runtime = HostProcessRuntime(net.tmp / "runtime", network=net.network())
        for c in await runtime.list_containers():
            await runtime.stop_container(c.id, 0)
        for s in await runtime.list_pod_sandboxes():
            await runtime.remove_pod_sandbox(s.id)
    assert not problems


async def test_without_a_configuration_the_network_is_not_ready_and_sandboxes_fail(
    net: Net,
) -> None:
    (net.conf_dir / "10-test.conflist").unlink()
    runtime = HostProcessRuntime(net.tmp / "state", network=net.network())
    cond = (await runtime.status()).condition("NetworkReady")
    assert cond is not None and not cond.status
    assert cond.reason == "NetworkPluginNotReady"
    assert cond.message.startswith("Network plugin returns error: cni plugin not initialized: ")
    assert "no network config found" in cond.message
    with pytest.raises(ContainerRuntimeError, match="no network config found"):
        await runtime.run_pod_sandbox(sandbox_config(net.tmp, "web"))
    assert await runtime.list_pod_sandboxes() == []
    assert net.namespaces() == []


async def test_an_agent_that_is_not_root_keeps_the_host_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    network = CNINetwork(tmp_path / "no-such-conf", [CNI_BIN], netns_dir=tmp_path / "netns")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    runtime = HostProcessRuntime(tmp_path / "state", network=network, host_ip="192.0.2.9")
    monkeypatch.undo()
    cond = (await runtime.status()).condition("NetworkReady")
    assert cond is not None and cond.status
    sid = await runtime.run_pod_sandbox(sandbox_config(tmp_path, "web"))
    sb = await runtime.pod_sandbox_status(sid)
    assert (sb.ip, sb.namespace_options.host_network) == ("192.0.2.9", True)
    assert not (tmp_path / "netns").exists()
    await runtime.remove_pod_sandbox(sid)


RECORDER = r"""
import json, os, sys
conf = json.loads(sys.stdin.read())
with open(LOG, "a") as f:
    f.write(json.dumps({"cmd": os.environ["CNI_COMMAND"], "args": os.environ["CNI_ARGS"],
                        "runtimeConfig": conf.get("runtimeConfig")}) + "\n")
if os.environ["CNI_COMMAND"] == "ADD":
    print(json.dumps(conf["prevResult"]))
"""


async def test_published_ports_and_pod_identity_reach_the_plugins(net: Net) -> None:
    bin_dir = net.tmp / "bin"
    bin_dir.mkdir()
    log = net.tmp / "recorder.jsonl"
    (bin_dir / "recorder").write_text(f"#!{sys.executable}\nLOG = {str(log)!r}\n{RECORDER}")
    (bin_dir / "recorder").chmod(0o755)
    conf = json.loads((net.conf_dir / "10-test.conflist").read_text())
    conf["plugins"].append({"type": "recorder", "capabilities": {"portMappings": True}})
    (net.conf_dir / "10-test.conflist").write_text(json.dumps(conf))
    network = CNINetwork(
        net.conf_dir, [bin_dir, CNI_BIN], cache_dir=net.cache_dir, netns_dir=net.netns_dir
    )
    runtime = HostProcessRuntime(net.tmp / "state", network=network)
    cfg = attrs.evolve(
        sandbox_config(net.tmp, "ports"),
        port_mappings=(
            PortMapping(container_port=80, host_port=18080, protocol="TCP"),
            PortMapping(container_port=53, host_port=10053, protocol="UDP", host_ip="127.0.0.1"),
            PortMapping(container_port=9090),  # not published: no mapping for it
        ),
    )
    sid = await runtime.run_pod_sandbox(cfg)
    await runtime.remove_pod_sandbox(sid)
    add, delete = (json.loads(line) for line in log.read_text().splitlines())
    expected = {
        "portMappings": [
            {"hostPort": 18080, "containerPort": 80, "protocol": "tcp"},
            {"hostPort": 10053, "containerPort": 53, "protocol": "udp", "hostIP": "127.0.0.1"},
        ]
    }
    assert (add["cmd"], add["runtimeConfig"]) == ("ADD", expected)
    assert (delete["cmd"], delete["runtimeConfig"]) == ("DEL", expected)
    md = cfg.metadata
    assert add["args"] == (
        f"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=ports;"
        f"K8S_POD_INFRA_CONTAINER_ID={sid};K8S_POD_UID={md.uid}"
    )
    assert net.leases() == set() and net.namespaces() == []


async def test_check_notices_an_address_taken_away(net: Net) -> None:
    network = net.network()
    pod = PodRef("checked", "default", "uid-c")
    status = await network.setup("c" * 64, pod)
    try:
        await network.check("c" * 64, pod)
        _run("nsenter", f"--net={status.netns}", "ip", "addr", "flush", "dev", "eth0")
        with pytest.raises(CNIError) as err:
            await network.check("c" * 64, pod)
        # bridge (the first plugin) finds its address gone from the interface.
        assert err.value.plugin == "bridge"
        assert status.ip in str(err.value)
    finally:
        await network.teardown("c" * 64, pod)
    assert net.leases() == set() and net.namespaces() == []
