"""The example plugin (examples/cni_plugin.py) run as an executable by the
project's own CNI caller: its error shapes without privileges, and, as root,
real addresses in real namespaces, CHECK, DEL and STATUS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from kubelet_kit.cni import (
    ERR_INVALID_NETWORK_CONFIG,
    ERR_PLUGIN_NOT_AVAILABLE,
    ERR_UNKNOWN_CONTAINER,
    CNIError,
)
from kubelet_kit.network import (
    CNIExec,
    CNIInvoker,
    NetworkConfigList,
    RuntimeConf,
    create_netns,
    remove_netns,
)

pytestmark = pytest.mark.timeout(60)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "cni_plugin.py"
ADDRESSES = ["10.251.7.10/24", "10.251.7.11/24"]


def install_plugin(bin_dir: Path) -> None:
    """The example as an executable named kk-static, as a runtime finds plugins."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / "kk-static"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{EXAMPLE}" "$@"\n')
    wrapper.chmod(0o755)


def conflist(data_dir: Path, version: str = "1.0.0", **extra: object) -> NetworkConfigList:
    plugin = {"type": "kk-static", "addresses": ADDRESSES, "dataDir": str(data_dir), **extra}
    return NetworkConfigList.from_json(
        {"cniVersion": version, "name": "static-test", "plugins": [plugin]}
    )


@pytest.fixture
def invoker(tmp_path: Path) -> CNIInvoker:
    install_plugin(tmp_path / "bin")
    return CNIInvoker(CNIExec([tmp_path / "bin"], timeout=30), tmp_path / "cache")


def test_run_by_hand_it_says_what_it_is() -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, env={}, timeout=30
    )
    assert out.returncode == 0
    assert "kk-static" in out.stderr and "1.0.0" in out.stderr


async def test_version(invoker: CNIInvoker) -> None:
    assert "1.0.0" in await invoker.version("kk-static")
    assert "1.1.0" in await invoker.version("kk-static")


async def test_a_bad_config_is_reported_in_the_spec_shape(
    invoker: CNIInvoker, tmp_path: Path
) -> None:
    net = conflist(tmp_path / "data", addresses=["10.251.7.300/24"])
    with pytest.raises(CNIError) as err:
        await invoker.add(net, RuntimeConf("c1", "/nonexistent/netns"))
    assert err.value.code == ERR_INVALID_NETWORK_CONFIG
    assert err.value.msg == "addresses[0]: '10.251.7.300/24' is not an address/prefix"
    assert err.value.plugin == "kk-static"


async def test_a_used_up_list_fails_add_with_the_plugins_own_code(
    invoker: CNIInvoker, tmp_path: Path
) -> None:
    leases = tmp_path / "data" / "static-test"
    leases.mkdir(parents=True)
    for a in ADDRESSES:
        (leases / a.split("/")[0]).write_text("someone-else\neth0\n")
    with pytest.raises(CNIError) as err:
        await invoker.add(conflist(tmp_path / "data"), RuntimeConf("c1", "/nonexistent/netns"))
    assert (err.value.code, err.value.msg) == (100, "no free address")
    assert "all 2 addresses" in err.value.details
    # STATUS (1.1) says so before anyone tries.
    with pytest.raises(CNIError) as err:
        await invoker.status(conflist(tmp_path / "data", version="1.1.0"))
    assert err.value.code == ERR_PLUGIN_NOT_AVAILABLE


@pytest.fixture
async def namespaces(
    tmp_path: Path, require_real: Callable[[bool, str], None]
) -> AsyncIterator[list[str]]:
    require_real(os.geteuid() == 0, "root (network namespaces)")
    made = [await create_netns(tmp_path / "netns" / f"ns{i}") for i in range(2)]
    try:
        yield made
    finally:
        for path in made:
            await remove_netns(path)
        subprocess.run(["umount", "-l", str(tmp_path / "netns")], check=False)


def addresses_in(netns: str) -> str:
    return subprocess.run(
        ["nsenter", f"--net={netns}", "ip", "-o", "addr", "show", "eth0"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout


async def test_add_check_del_in_real_namespaces(
    invoker: CNIInvoker, tmp_path: Path, namespaces: list[str]
) -> None:
    net = conflist(tmp_path / "data")
    a, b = (RuntimeConf(f"sandbox{i}", ns) for i, ns in enumerate(namespaces))
    first = await invoker.add(net, a)
    second = await invoker.add(net, b)
    assert [ip.address for ip in first.sandbox_ips("eth0")] == [ADDRESSES[0]]
    assert [ip.address for ip in second.sandbox_ips("eth0")] == [ADDRESSES[1]]
    assert first.interfaces[0].sandbox == namespaces[0]
    assert "inet 10.251.7.10/24" in addresses_in(namespaces[0])
    assert "inet 10.251.7.11/24" in addresses_in(namespaces[1])
    assert invoker.cached_result(net, a) == first

    await invoker.check(net, a)
    # Someone removed the address behind the plugin's back: CHECK notices.
    subprocess.run(
        ["nsenter", f"--net={namespaces[0]}", "ip", "addr", "flush", "dev", "eth0"], check=True
    )
    with pytest.raises(CNIError) as err:
        await invoker.check(net, a)
    assert err.value.code == ERR_UNKNOWN_CONTAINER
    assert err.value.msg == "10.251.7.10/24 is not on eth0"

    await invoker.delete(net, a)
    assert "eth0" not in addresses_in(namespaces[0])
    assert invoker.cached_result(net, a) is None
    await invoker.delete(net, a)  # DEL of what is gone succeeds
    # The released address is the next one handed out.
    again = await invoker.add(net, a)
    assert [ip.address for ip in again.sandbox_ips("eth0")] == [ADDRESSES[0]]
    await invoker.delete(net, a)
    await invoker.delete(net, b)
    assert sorted(p.name for p in (tmp_path / "data" / "static-test").iterdir()) == ["lock"]


async def test_chained_after_loopback_it_extends_the_previous_result(
    tmp_path: Path, namespaces: list[str]
) -> None:
    install_plugin(tmp_path / "bin")
    invoker = CNIInvoker(CNIExec([tmp_path / "bin", "/usr/lib/cni"]), tmp_path / "cache")
    plugin = {"type": "kk-static", "addresses": ADDRESSES, "dataDir": str(tmp_path / "data")}
    net = NetworkConfigList.from_json(
        {
            "cniVersion": "1.0.0",
            "name": "static-test",
            "plugins": [{"type": "loopback"}, plugin],
        }
    )
    result = await invoker.add(net, RuntimeConf("sandbox0", namespaces[0]))
    # loopback's "lo" comes first, the example's eth0 after it with its index.
    assert [i.name for i in result.interfaces] == ["lo", "eth0"]
    eth0 = result.sandbox_ips("eth0")
    assert [(ip.address, ip.interface) for ip in eth0] == [(ADDRESSES[0], 1)]
    await invoker.delete(net, RuntimeConf("sandbox0", namespaces[0]))
    assert json.loads(json.dumps(result.to_json()))["cniVersion"] == "1.0.0"
