"""The CNI plugin kit against the fake (in-process), the example plugin run by
the project's CNI caller in real network namespaces, and plugins that break the
contract; and the fake's own leases, log and faults."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.cni import CmdArgs, CNIError, Result, run_plugin
from kubelet_kit.network import create_netns, remove_netns
from kubelet_kit.testing import ConformanceFailure
from kubelet_kit.testing.cni_kit import CHECKS, CNIPluginConformance, check_cni_plugin
from kubelet_kit.testing.fake_cni import ERR_NO_FREE_ADDRESS, FakeCNIPlugin
from kubelet_kit.testing.kit import KitContext, run_kit

pytestmark = pytest.mark.timeout(120)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "cni_plugin.py"


class TestFakeCNIPlugin(CNIPluginConformance):
    def make(self) -> FakeCNIPlugin:
        return FakeCNIPlugin("10.88.0.0/24", size=4)

    def kit_options(self) -> dict[str, Any]:
        return {"pool_size": 4}


class TestFakeCNIPluginAt040(CNIPluginConformance):
    """An older configuration version: CHECK still runs, STATUS is skipped."""

    def make(self) -> FakeCNIPlugin:
        return FakeCNIPlugin("fd00:88::/120", size=3)

    def kit_options(self) -> dict[str, Any]:
        return {"pool_size": 3, "cni_version": "0.4.0"}


@pytest.fixture(scope="module")
def example_executable() -> Any:
    d = Path(tempfile.mkdtemp(prefix="kit-cni-ex-"))
    wrapper = d / "kk-static"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{EXAMPLE}" "$@"\n')
    wrapper.chmod(0o755)
    yield wrapper
    shutil.rmtree(d, ignore_errors=True)


async def _real_netns(ctx: KitContext[Any], name: str) -> str:
    directory = Path(tempfile.mkdtemp(prefix="kit-ns-"))
    path = await create_netns(directory / name)

    async def remove() -> None:
        await remove_netns(path)
        subprocess.run(["umount", "-l", str(directory)], check=False, capture_output=True)
        shutil.rmtree(directory, ignore_errors=True)

    ctx.defer(remove)
    return path


class TestExamplePlugin(CNIPluginConformance):
    """examples/cni_plugin.py (kk-static) run by the CNI caller, in real
    network namespaces (root)."""

    @pytest.fixture(autouse=True)
    def _exe(self, example_executable: Path, tmp_path: Path, require_real: Any) -> None:
        require_real(os.geteuid() == 0, "root (network namespaces)")
        self.exe = example_executable
        self.data = tmp_path / "data"

    def make(self) -> Path:
        return self.exe

    def kit_options(self) -> dict[str, Any]:
        # Two addresses: every plugin run is a process, keep the checks short.
        addresses = ["10.251.9.10/24", "10.251.9.11/24"]
        return {
            "config": {"addresses": addresses, "dataDir": str(self.data)},
            "pool_size": len(addresses),
            "netns": _real_netns,
        }


# ------------------------------------------------------------ broken plugins


class LeakyDelete(FakeCNIPlugin):
    def delete(self, args: CmdArgs) -> None:
        self._enter("delete", (args,))


class StrictDelete(FakeCNIPlugin):
    def delete(self, args: CmdArgs) -> None:
        if (args.name, args.container_id, args.ifname) not in self._leases:
            raise CNIError(3, f"unknown container {args.container_id}")
        super().delete(args)


class Racy(FakeCNIPlugin):
    """Chooses an address, then takes it a moment later, without a lock."""

    def add(self, args: CmdArgs) -> Result:
        taken = set(self._leases.values())
        address = next(a for a in self.pool if a not in taken)
        time.sleep(0.05)
        self._leases[(args.name, args.container_id, args.ifname)] = address
        return super().add(args)


class Forgetful(FakeCNIPlugin):
    """Takes a new address on every ADD."""

    def add(self, args: CmdArgs) -> Result:
        result = super().add(args)
        key = (args.name, args.container_id, args.ifname)
        self._leases[(args.name, f"{args.container_id}-old{len(self.calls)}", args.ifname)] = (
            self._leases.pop(key)
        )
        return result


class Unchained(FakeCNIPlugin):
    def add(self, args: CmdArgs) -> Result:
        import attrs

        return super().add(attrs.evolve(args, config={**args.config, "prevResult": None}))


class AlwaysAvailable(FakeCNIPlugin):
    def status(self, args: CmdArgs) -> None:
        pass


@pytest.mark.parametrize(
    ("plugin", "check", "message"),
    [
        (LeakyDelete, "del_releases_the_address", "ADD of extra failed"),
        (StrictDelete, "del_is_idempotent", "unknown container kit-never"),
        (Racy, "concurrent_adds_give_distinct_addresses", "all distinct"),
        (Forgetful, "repeated_add_takes_no_second_address", "addresses of the repeated ADD"),
        (Unchained, "chained_add_extends_the_previous_result", "first interface"),
        (AlwaysAvailable, "status_says_when_add_cannot_be_served", "range used up"),
    ],
)
async def test_the_kit_catches_a_broken_plugin(plugin: type, check: str, message: str) -> None:
    def factory() -> FakeCNIPlugin:
        return plugin("10.88.0.0/24", size=4)  # type: ignore[no-any-return]

    with pytest.raises(ConformanceFailure):
        await check_cni_plugin(factory, names=[check], pool_size=4)
    report = await run_kit(CHECKS, factory, names=[check], options={"pool_size": 4})
    result = report.result(check)
    assert result.status == "failed" and message in result.message, result


async def test_without_pool_size_the_checks_that_use_up_the_range_skip() -> None:
    report = await check_cni_plugin(FakeCNIPlugin)
    assert report.result("del_releases_the_address").status == "skipped"
    assert report.result("add_gives_an_address").status == "passed"


# ------------------------------------------------------------ the fake itself

ENV = {
    "CNI_COMMAND": "ADD",
    "CNI_CONTAINERID": "c1",
    "CNI_NETNS": "/run/netns/c1",
    "CNI_IFNAME": "eth0",
    "CNI_PATH": "/opt/cni/bin",
}
CONF = json.dumps({"cniVersion": "1.0.0", "name": "net", "type": "fake"}).encode()


def call(plugin: FakeCNIPlugin, command: str, cid: str = "c1", conf: bytes = CONF) -> Any:
    code, out, _ = run_plugin(
        plugin, environ={**ENV, "CNI_COMMAND": command, "CNI_CONTAINERID": cid}, stdin=conf
    )
    return code, json.loads(out) if out else None


def test_the_fake_leases_in_order_and_answers_in_the_spec_shape() -> None:
    plugin = FakeCNIPlugin("10.88.0.0/29", size=2)
    assert plugin.gateway == "10.88.0.1" and plugin.pool == ("10.88.0.2", "10.88.0.3")
    code, out = call(plugin, "ADD")
    assert code == 0
    assert out["ips"] == [{"address": "10.88.0.2/29", "gateway": "10.88.0.1", "interface": 0}]
    assert out["interfaces"][0]["name"] == "eth0"
    assert out["interfaces"][0]["sandbox"] == "/run/netns/c1"
    assert call(plugin, "ADD") == (0, out)  # the same attachment, the same answer
    call(plugin, "ADD", "c2")
    code, out = call(plugin, "ADD", "c3")
    assert (code, out["code"], out["msg"]) == (1, ERR_NO_FREE_ADDRESS, "no free address")
    assert plugin.leases() == {
        "10.88.0.2": ("net", "c1", "eth0"),
        "10.88.0.3": ("net", "c2", "eth0"),
    }
    assert call(plugin, "DEL", "c1") == (0, None)
    assert call(plugin, "DEL", "c1") == (0, None)
    assert plugin.free() == ["10.88.0.2"]
    assert [(c.method, c.args[0].container_id) for c in plugin.calls] == [
        ("add", "c1"),
        ("add", "c1"),
        ("add", "c2"),
        ("add", "c3"),
        ("delete", "c1"),
        ("delete", "c1"),
    ]


def test_the_fake_fails_when_told() -> None:
    plugin = FakeCNIPlugin()
    plugin.inject_error(
        "add", CNIError(11, "try again later", "locked"), when=lambda a: a.container_id == "c2"
    )
    assert call(plugin, "ADD")[0] == 0
    code, out = call(plugin, "ADD", "c2")
    assert (code, out["code"], out["msg"], out["details"]) == (1, 11, "try again later", "locked")
    assert call(plugin, "ADD", "c2")[0] == 0
    plugin.inject_error("status", RuntimeError("bug"))
    code, out = call(plugin, "STATUS", conf=CONF.replace(b"1.0.0", b"1.1.0"))
    assert (code, out["code"], out["msg"]) == (1, 999, "RuntimeError: bug")
    with pytest.raises(ValueError, match="no method 'version'"):
        plugin.inject_error("version", RuntimeError())


async def test_the_in_process_runs_are_concurrent() -> None:
    plugin = FakeCNIPlugin(size=8)
    report = await check_cni_plugin(
        lambda: plugin, names=["concurrent_adds_give_distinct_addresses"]
    )
    assert report.ok
    assert plugin.leases() == {}  # the kit deletes what it added
    assert len(plugin.calls_to("add")) == 4
    await asyncio.sleep(0)
