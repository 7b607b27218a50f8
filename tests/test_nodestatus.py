"""Node status built from a running agent on fakes: conditions with the kubelet's
reasons and transition rules, capacity, addresses, nodeInfo, images, JSON shape."""

from __future__ import annotations

import ipaddress
import json
import sys
from pathlib import Path

import pytest

from kubelet_kit.node import nodestatus
from kubelet_kit.node.nodestatus import NodeStatusProvider, host_addresses
from kubelet_kit.testing.env import KubeletEnv


async def test_ready_node_document() -> None:
    async with KubeletEnv() as env:
        env.runtime.add_image("busybox", present=True, size=5_000)
        env.runtime.add_image("nginx", present=True, size=9_000)
        provider = NodeStatusProvider(
            env.kubelet, kubelet_port=10250, addresses=lambda: ["192.0.2.10", "192.0.2.11"]
        )
        doc = json.loads(await provider.to_json())
    ready = doc["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"], ready["message"]) == (
        "Ready",
        "True",
        "KubeletReady",
        "kubelet is posting ready status",
    )
    assert [(c["type"], c["status"], c["reason"]) for c in doc["conditions"][1:]] == [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
    ]
    assert doc["addresses"] == [
        {"type": "InternalIP", "address": "192.0.2.10"},
        {"type": "Hostname", "address": "fake-node"},
    ]
    assert doc["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
    assert {"cpu", "memory", "pods"} <= set(doc["capacity"]) and doc["allocatable"]
    info = doc["nodeInfo"]
    assert info["containerRuntimeVersion"] == "fake://0.1.0"
    assert info["operatingSystem"] == "linux" and info["architecture"] in (
        "amd64",
        "arm64",
        "arm",
        "386",
        "ppc64le",
        "s390x",
        "riscv64",
    )
    assert info["kernelVersion"] and info["kubeletVersion"].endswith("+kubelet-kit")
    assert info["bootID"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert [i["sizeBytes"] for i in doc["images"]] == [9_000, 5_000]
    assert "docker.io/library/nginx:latest" in doc["images"][0]["names"]


async def test_transition_time_moves_only_when_status_changes() -> None:
    async with KubeletEnv() as env:
        provider = NodeStatusProvider(env.kubelet, addresses=lambda: [])
        first = (await provider.status()).condition("Ready")
        await env.sleep(30)
        second = (await provider.status()).condition("Ready")
        assert first is not None and second is not None
        assert second.last_heartbeat_time == first.last_heartbeat_time + 30
        assert second.last_transition_time == first.last_transition_time
        env.runtime.set_condition("RuntimeReady", False, "Broken", "shim gone")
        await env.sleep(10)
        third = (await provider.status()).condition("Ready")
        assert third is not None and third.status == "False"
        assert third.reason == "KubeletNotReady"
        assert (
            "container runtime not ready: RuntimeReady=false reason:Broken message:shim gone"
        ) in third.message
        assert third.last_transition_time == first.last_transition_time + 40


async def test_pressure_conditions_follow_the_eviction_manager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with KubeletEnv() as env:
        provider = NodeStatusProvider(env.kubelet, addresses=lambda: [])
        monkeypatch.setattr(
            env.kubelet.eviction_manager,
            "node_conditions",
            lambda: frozenset({"DiskPressure", "PIDPressure"}),
        )
        status = await provider.status()
    disk, pid, mem = (
        status.condition(t) for t in ("DiskPressure", "PIDPressure", "MemoryPressure")
    )
    assert disk is not None and (disk.status, disk.reason, disk.message) == (
        "True",
        "KubeletHasDiskPressure",
        "kubelet has disk pressure",
    )
    assert pid is not None and (pid.status, pid.reason) == ("True", "KubeletHasInsufficientPID")
    assert mem is not None and mem.status == "False"


async def test_unhealthy_pleg_makes_the_node_not_ready() -> None:
    from kubelet_kit.errors import RuntimeUnavailableError

    async with KubeletEnv() as env:
        env.runtime.inject_error(
            "list_pod_sandboxes", RuntimeUnavailableError("down"), times=10_000
        )
        await env.sleep(240)
        ready = (await NodeStatusProvider(env.kubelet, addresses=lambda: []).status()).condition(
            "Ready"
        )
    assert ready is not None and ready.status == "False"
    assert "PLEG is not healthy: pleg was last seen active" in ready.message


def test_host_addresses_are_real_non_loopback_ipv4() -> None:
    found = host_addresses()
    for address in found:
        ip = ipaddress.ip_address(address)
        assert ip.version == 4 and not ip.is_loopback


def test_host_addresses_without_pyroute2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyroute2", None)  # import now fails
    called = []
    monkeypatch.setattr(nodestatus, "_addresses_by_name", lambda: called.append(1) or ["192.0.2.7"])
    assert host_addresses() == ["192.0.2.7"] and called
