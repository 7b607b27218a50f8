"""The CNI caller (kubelet_kit.network.cni) against scripted plugins.

The plugins are small executables written by the tests: each logs how it was
called (its CNI_* environment and its stdin) and answers as its configuration
tells it to, so the tests see exactly what the spec says a runtime must pass.
No privileges needed: nothing touches a real namespace.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.cni import (
    ERR_DECODING_FAILURE,
    ERR_INTERNAL,
    ERR_INVALID_ENVIRONMENT_VARIABLES,
    ERR_INVALID_NETWORK_CONFIG,
    ERR_IO_FAILURE,
    ERR_TRY_AGAIN_LATER,
    CNIError,
    Interface,
    IPConfig,
    Result,
)
from kubelet_kit.network import (
    CNIExec,
    CNIInvoker,
    NetworkConfigList,
    RuntimeConf,
    load_conf_dir,
    load_conflist,
)
from kubelet_kit.testing.clock import FakeClock

FAKE_PLUGIN = r"""
import json, os, sys, time
conf = json.loads(sys.stdin.read() or "{}")
cmd = os.environ.get("CNI_COMMAND")
with open(LOG, "a") as f:
    f.write(json.dumps({
        "plugin": os.path.basename(sys.argv[0]),
        "env": {k: v for k, v in os.environ.items() if k.startswith("CNI_")},
        "conf": conf,
    }) + "\n")
act = conf.get("act", {}).get(cmd or "", {})
if "sleep" in act:
    time.sleep(act["sleep"])
if "error" in act:
    print(json.dumps(dict(act["error"], cniVersion=conf.get("cniVersion"))))
    sys.exit(1)
if "crash" in act:
    sys.stderr.write(act["crash"])
    sys.exit(2)
if "stdout" in act:
    sys.stdout.write(act["stdout"])
    sys.exit(0)
if cmd == "VERSION":
    print(json.dumps({"cniVersion": "1.1.0", "supportedVersions": ["0.4.0", "1.0.0", "1.1.0"]}))
elif cmd == "ADD":
    res = conf.get("prevResult") or {"cniVersion": conf["cniVersion"]}
    if "ip" in conf:
        res.setdefault("interfaces", []).append(
            {"name": os.environ["CNI_IFNAME"], "sandbox": os.environ["CNI_NETNS"]})
        res.setdefault("ips", []).append(
            {"address": conf["ip"], "interface": len(res["interfaces"]) - 1})
    print(json.dumps(res))
"""


class Plugins:
    """A directory of scripted plugins and the log of their calls."""

    def __init__(self, tmp: Path) -> None:
        self.bin = tmp / "bin"
        self.bin.mkdir()
        self.log = tmp / "calls.jsonl"
        self.cache = tmp / "cache"

    def add(self, *names: str) -> None:
        for name in names:
            path = self.bin / name
            path.write_text(f"#!{sys.executable}\nLOG = {str(self.log)!r}\n{FAKE_PLUGIN}")
            path.chmod(0o755)

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def invoker(self, clock: FakeClock | None = None, timeout: float = 30.0) -> CNIInvoker:
        return CNIInvoker(CNIExec([self.bin], clock=clock, timeout=timeout), self.cache)


@pytest.fixture
def plugins(tmp_path: Path) -> Plugins:
    p = Plugins(tmp_path)
    p.add("first", "second", "third")
    return p


def netlist(*plugins: dict[str, Any], version: str = "1.0.0", **extra: Any) -> NetworkConfigList:
    return NetworkConfigList.from_json(
        {"cniVersion": version, "name": "testnet", "plugins": list(plugins), **extra}
    )


RT = RuntimeConf(
    container_id="sandbox-1",
    netns="/run/netns/example",
    ifname="eth0",
    args=(("IgnoreUnknown", "1"), ("K8S_POD_NAME", "web")),
    capability_args={"portMappings": [{"hostPort": 8080, "containerPort": 80}], "other": 1},
)


async def test_add_chains_each_result_into_the_next_and_caches_the_last(
    plugins: Plugins,
) -> None:
    net = netlist(
        {"type": "first", "ip": "10.1.0.5/24"},
        {"type": "second", "capabilities": {"portMappings": True}},
        {"type": "third", "ip": "fd00::5/64"},
    )
    result = await plugins.invoker().add(net, RT)
    assert [ip.address for ip in result.ips] == ["10.1.0.5/24", "fd00::5/64"]
    assert [ip.ip for ip in result.sandbox_ips("eth0")] == ["10.1.0.5", "fd00::5"]
    first, second, third = plugins.calls()
    assert [c["plugin"] for c in (first, second, third)] == ["first", "second", "third"]
    # The list's name and version are put into each plugin's configuration.
    assert all(
        c["conf"]["name"] == "testnet" and c["conf"]["cniVersion"] == "1.0.0"
        for c in (first, second, third)
    )
    assert "prevResult" not in first["conf"]
    assert second["conf"]["prevResult"]["ips"] == [{"address": "10.1.0.5/24", "interface": 0}]
    assert third["conf"]["prevResult"] == second["conf"]["prevResult"]
    # runtimeConfig carries only the capabilities a plugin declared.
    assert "runtimeConfig" not in first["conf"]
    assert second["conf"]["runtimeConfig"] == {
        "portMappings": [{"hostPort": 8080, "containerPort": 80}]
    }
    assert first["env"] == {
        "CNI_COMMAND": "ADD",
        "CNI_CONTAINERID": "sandbox-1",
        "CNI_NETNS": "/run/netns/example",
        "CNI_IFNAME": "eth0",
        "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAME=web",
        "CNI_PATH": str(plugins.bin),
    }
    assert plugins.invoker().cached_result(net, RT) == result
    cache = json.loads((plugins.cache / "results" / "testnet-sandbox-1-eth0").read_text())
    assert cache["kind"] == "cniCacheV1" and cache["containerId"] == "sandbox-1"
    assert cache["result"] == result.to_json()


async def test_del_runs_in_reverse_with_the_cached_result_then_forgets_it(
    plugins: Plugins,
) -> None:
    net = netlist({"type": "first", "ip": "10.1.0.5/24"}, {"type": "second"})
    invoker = plugins.invoker()
    added = await invoker.add(net, RT)
    plugins.log.unlink()
    await invoker.delete(net, RT)
    calls = plugins.calls()
    assert [(c["plugin"], c["env"]["CNI_COMMAND"]) for c in calls] == [
        ("second", "DEL"),
        ("first", "DEL"),
    ]
    assert all(c["conf"]["prevResult"] == added.to_json() for c in calls)
    assert invoker.cached_result(net, RT) is None
    # A second DEL has no cached result to pass, and passes none.
    plugins.log.unlink()
    await invoker.delete(net, RT)
    assert all("prevResult" not in c["conf"] for c in plugins.calls())


async def test_del_before_0_4_0_passes_no_prev_result(plugins: Plugins) -> None:
    net = netlist({"type": "first", "ip": "10.1.0.5/24"}, version="0.3.1")
    invoker = plugins.invoker()
    await invoker.add(net, RT)
    plugins.log.unlink()
    await invoker.delete(net, RT)
    assert "prevResult" not in plugins.calls()[0]["conf"]


async def test_del_without_a_namespace_sends_an_empty_cni_netns(plugins: Plugins) -> None:
    await plugins.invoker().delete(netlist({"type": "first"}), RuntimeConf("sandbox-1", ""))
    assert plugins.calls()[0]["env"]["CNI_NETNS"] == ""


async def test_a_failed_del_keeps_the_cache_for_a_retry(plugins: Plugins) -> None:
    ok = netlist({"type": "first", "ip": "10.1.0.5/24"})
    invoker = plugins.invoker()
    await invoker.add(ok, RT)
    failing = netlist({"type": "first", "act": {"DEL": {"error": {"code": 11, "msg": "busy"}}}})
    with pytest.raises(CNIError) as err:
        await invoker.delete(failing, RT)
    assert err.value.code == ERR_TRY_AGAIN_LATER
    assert invoker.cached_result(ok, RT) is not None


async def test_check_passes_the_cached_result_in_order(plugins: Plugins) -> None:
    net = netlist({"type": "first", "ip": "10.1.0.5/24"}, {"type": "second"})
    invoker = plugins.invoker()
    with pytest.raises(CNIError, match="no cached result") as err:
        await invoker.check(net, RT)
    assert err.value.code == ERR_IO_FAILURE
    added = await invoker.add(net, RT)
    plugins.log.unlink()
    await invoker.check(net, RT)
    calls = plugins.calls()
    assert [(c["plugin"], c["env"]["CNI_COMMAND"]) for c in calls] == [
        ("first", "CHECK"),
        ("second", "CHECK"),
    ]
    assert all(c["conf"]["prevResult"] == added.to_json() for c in calls)


@pytest.mark.parametrize(("version", "extra"), [("0.3.1", {}), ("1.0.0", {"disableCheck": True})])
async def test_check_is_skipped_where_the_spec_says(
    plugins: Plugins, version: str, extra: dict[str, Any]
) -> None:
    net = netlist({"type": "first"}, version=version, **extra)
    await plugins.invoker().check(net, RT)
    assert plugins.calls() == []


async def test_a_plugin_error_is_raised_with_its_code_and_later_plugins_are_not_run(
    plugins: Plugins,
) -> None:
    error = {"code": 7, "msg": "bad subnet", "details": "10.0.0.0/33 is not a network"}
    net = netlist(
        {"type": "first"}, {"type": "second", "act": {"ADD": {"error": error}}}, {"type": "third"}
    )
    with pytest.raises(CNIError) as err:
        await plugins.invoker().add(net, RT)
    assert (err.value.code, err.value.msg, err.value.details, err.value.plugin) == (
        ERR_INVALID_NETWORK_CONFIG,
        "bad subnet",
        "10.0.0.0/33 is not a network",
        "second",
    )
    assert str(err.value) == (
        "plugin type='second' failed: bad subnet; 10.0.0.0/33 is not a network"
    )
    assert [c["plugin"] for c in plugins.calls()] == ["first", "second"]
    assert plugins.invoker().cached_result(net, RT) is None


async def test_a_crash_without_an_error_object_is_an_internal_error_with_stderr(
    plugins: Plugins,
) -> None:
    net = netlist({"type": "first", "act": {"ADD": {"crash": "panic: nil pointer"}}})
    with pytest.raises(CNIError) as err:
        await plugins.invoker().add(net, RT)
    assert err.value.code == ERR_INTERNAL
    assert err.value.msg == "exit status 2"
    assert "panic: nil pointer" in err.value.details


async def test_an_add_that_prints_no_json_is_a_decoding_failure(plugins: Plugins) -> None:
    net = netlist({"type": "first", "act": {"ADD": {"stdout": "all good!"}}})
    with pytest.raises(CNIError) as err:
        await plugins.invoker().add(net, RT)
    assert (err.value.code, err.value.plugin) == (ERR_DECODING_FAILURE, "first")


async def test_a_missing_plugin_names_the_directories_searched(plugins: Plugins) -> None:
    with pytest.raises(CNIError) as err:
        await plugins.invoker().add(netlist({"type": "nope"}), RT)
    assert err.value.code == ERR_IO_FAILURE
    assert err.value.msg == f"failed to find plugin \"nope\" in path ['{plugins.bin}']"


async def test_a_plugin_past_its_time_is_killed_on_the_injected_clock(plugins: Plugins) -> None:
    clock = FakeClock()
    invoker = plugins.invoker(clock=clock, timeout=5)
    net = netlist({"type": "first", "act": {"ADD": {"sleep": 60}}})
    task = asyncio.create_task(invoker.add(net, RT))
    # The deadline is armed once the process runs; wait for that, not for time.
    for _ in range(2000):
        if clock.pending or task.done():
            break
        await asyncio.sleep(0.005)
    assert clock.pending == 1
    clock.advance(4.9)
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(0.2)
    with pytest.raises(CNIError, match="ADD timed out after 5s") as err:
        await asyncio.wait_for(task, 10)
    assert err.value.code == ERR_IO_FAILURE


async def test_invalid_container_ids_and_interface_names_are_refused_before_running(
    plugins: Plugins,
) -> None:
    net = netlist({"type": "first"})
    with pytest.raises(CNIError, match="invalid characters in containerID"):
        await plugins.invoker().add(net, RuntimeConf("bad/id", "/run/netns/x"))
    with pytest.raises(CNIError, match="interface name is too long") as err:
        await plugins.invoker().add(net, RuntimeConf("ok", "/run/netns/x", ifname="e" * 16))
    assert err.value.code == ERR_INVALID_ENVIRONMENT_VARIABLES
    assert plugins.calls() == []


async def test_version_and_status(plugins: Plugins) -> None:
    invoker = plugins.invoker()
    assert await invoker.version("first") == ["0.4.0", "1.0.0", "1.1.0"]
    assert plugins.calls()[0]["env"]["CNI_COMMAND"] == "VERSION"
    plugins.log.unlink()
    # A 1.1 list asks every plugin for STATUS; the first refusal is raised.
    busy = {"error": {"code": 50, "msg": "plugin not available"}}
    net = netlist({"type": "first"}, {"type": "second", "act": {"STATUS": busy}}, version="1.1.0")
    with pytest.raises(CNIError) as err:
        await invoker.status(net)
    assert (err.value.code, err.value.plugin) == (50, "second")
    assert [c["env"]["CNI_COMMAND"] for c in plugins.calls()] == ["STATUS", "STATUS"]
    plugins.log.unlink()
    # Older lists are only checked for their plugins' presence.
    await invoker.status(netlist({"type": "first"}))
    assert plugins.calls() == []
    with pytest.raises(CNIError, match='failed to find plugin "gone"'):
        await invoker.status(netlist({"type": "gone"}))


# ------------------------------------------------------------ configuration

INVALID_LISTS = [
    ([], ERR_DECODING_FAILURE, "network config is not a JSON object"),
    (
        {"cniVersion": "1.0.0", "plugins": [{"type": "a"}]},
        ERR_INVALID_NETWORK_CONFIG,
        "name: missing network name",
    ),
    (
        {"name": "bad name!", "cniVersion": "1.0.0", "plugins": [{"type": "a"}]},
        ERR_INVALID_NETWORK_CONFIG,
        "name: invalid characters found in network name",
    ),
    (
        {"name": "n", "cniVersion": "one", "plugins": [{"type": "a"}]},
        ERR_DECODING_FAILURE,
        "cniVersion: invalid version 'one': expected X.Y.Z",
    ),
    (
        {"name": "n", "cniVersion": "1.0.0", "plugins": []},
        ERR_INVALID_NETWORK_CONFIG,
        "plugins: no plugins in the list",
    ),
    (
        {"name": "n", "cniVersion": "1.0.0", "plugins": [{"type": "a"}, {"mtu": 1}]},
        ERR_INVALID_NETWORK_CONFIG,
        "plugins[1].type: missing",
    ),
    (
        {"name": "n", "cniVersion": "1.0.0", "plugins": [{"type": "../bin/sh"}]},
        ERR_INVALID_NETWORK_CONFIG,
        "plugins[0].type: '../bin/sh' is not a plugin name",
    ),
]


@pytest.mark.parametrize(("doc", "code", "message"), INVALID_LISTS)
def test_invalid_lists_name_the_file_and_field(
    tmp_path: Path, doc: Any, code: int, message: str
) -> None:
    path = tmp_path / "10-net.conflist"
    path.write_text(json.dumps(doc))
    with pytest.raises(CNIError) as err:
        load_conflist(path)
    assert err.value.code == code
    assert err.value.msg == f"{path}: {message}"


def test_the_first_file_by_name_is_used_and_a_lone_plugin_is_a_list_of_one(
    tmp_path: Path,
) -> None:
    with pytest.raises(CNIError, match="no network config found"):
        load_conf_dir(tmp_path)
    (tmp_path / "README").write_text("not a config")
    (tmp_path / "20-b.conflist").write_text(
        json.dumps({"cniVersion": "1.0.0", "name": "b", "plugins": [{"type": "bridge"}]})
    )
    (tmp_path / "10-a.conf").write_text(
        json.dumps({"cniVersion": "0.4.0", "name": "a", "type": "ptp", "mtu": 1400})
    )
    net = load_conf_dir(tmp_path)
    assert (net.name, net.cni_version, net.source) == ("a", "0.4.0", str(tmp_path / "10-a.conf"))
    assert [dict(p) for p in net.plugins] == [{"type": "ptp", "mtu": 1400}]
    (tmp_path / "10-a.conf").unlink()
    assert load_conf_dir(tmp_path).name == "b"


def test_results_round_trip_in_the_spec_shape() -> None:
    doc = {
        "cniVersion": "1.0.0",
        "interfaces": [
            {"name": "cni0", "mac": "00:11:22:33:44:55"},
            {"name": "eth0", "mac": "00:11:22:33:44:66", "sandbox": "/run/netns/x"},
        ],
        "ips": [{"address": "10.1.0.5/24", "gateway": "10.1.0.1", "interface": 1}],
        "routes": [{"dst": "0.0.0.0/0", "gw": "10.1.0.1"}],
        "dns": {"nameservers": ["10.1.0.10"], "search": ["svc.local"]},
    }
    result = Result.from_json(doc)
    assert result.to_json() == doc
    assert result.ips[0] == IPConfig("10.1.0.5/24", "10.1.0.1", 1)
    assert result.interfaces[1] == Interface("eth0", "00:11:22:33:44:66", "/run/netns/x")
    # Only addresses on an interface inside the sandbox are the pod's.
    host_side = Result(interfaces=(Interface("cni0"),), ips=(IPConfig("10.1.0.1/24", "", 0),))
    assert host_side.sandbox_ips() == []
    with pytest.raises(CNIError) as err:
        Result.from_json({"ips": [{"interface": "x"}]})
    assert err.value.code == ERR_DECODING_FAILURE


def test_caller_env_is_inherited_with_cni_variables_on_top(plugins: Plugins) -> None:
    # PATH must reach plugins (several shell out to iptables, ip, ...).
    assert os.environ.get("PATH")
    asyncio.run(plugins.invoker().add(netlist({"type": "first"}), RT))
    assert plugins.calls()[0]["env"]["CNI_COMMAND"] == "ADD"


# ------------------------------------------------------------------ packages


@pytest.mark.parametrize("package", ["kubelet_kit.network", "kubelet_kit.cni"])
def test_all_is_honest(package: str) -> None:
    module = __import__(package, fromlist=["__all__"])
    assert sorted(module.__all__) == sorted(set(module.__all__))
    for name in module.__all__:
        assert hasattr(module, name), f"{package}.__all__ names missing {name}"
    public = {n for n in vars(module) if not n.startswith("_") and n != "annotations"}
    submodules = {n for n in public if type(getattr(module, n)).__name__ == "module"}
    assert public - submodules == set(module.__all__)


@pytest.mark.parametrize("package", ["kubelet_kit.network", "kubelet_kit.cni"])
def test_the_packages_pull_in_no_other_subsystem_nor_pyroute2(package: str) -> None:
    # A plugin executable starts for every call: importing the SDK must stay cheap.
    code = (
        f"import sys, json; import {package}; "
        "print(json.dumps(sorted({m for m in sys.modules "
        "if m.startswith('kubelet_kit.') or m.split('.')[0] in ('pyroute2', 'grpc')})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = {m.split(".")[1] for m in json.loads(out.stdout) if m.startswith("kubelet_kit.")}
    allowed = {"cni", "errors", "_version", "_lazy"} | (
        {"network", "clock"} if package == "kubelet_kit.network" else set()
    )
    assert loaded <= allowed
    assert not any(m.startswith(("pyroute2", "grpc")) for m in json.loads(out.stdout))
