"""The plugin SDK (kubelet_kit.cni): what a plugin built on it prints for every
command, argument check and failure, in the spec's JSON. The validation tables
are ported from the reference implementation's own tests (pkg/utils, pkg/skel)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from kubelet_kit.cni import (
    ERR_DECODING_FAILURE,
    ERR_INCOMPATIBLE_CNI_VERSION,
    ERR_INTERNAL,
    ERR_INVALID_ENVIRONMENT_VARIABLES,
    ERR_INVALID_NETWORK_CONFIG,
    ERR_TRY_AGAIN_LATER,
    ERR_UNKNOWN_CONTAINER,
    CmdArgs,
    CNIError,
    Interface,
    IPConfig,
    PluginBase,
    Result,
    format_cni_args,
    parse_cni_args,
    run_plugin,
    validate_container_id,
    validate_interface_name,
)


class Recorder(PluginBase):
    """Records each call; ADD answers an address on the interface it was given."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.calls: list[tuple[str, CmdArgs]] = []
        self.fail = fail

    def _record(self, name: str, args: CmdArgs) -> None:
        self.calls.append((name, args))
        if self.fail is not None:
            raise self.fail

    def add(self, args: CmdArgs) -> Result:
        self._record("add", args)
        return Result(
            cni_version="ignored: the SDK writes the config's version",
            interfaces=(Interface(args.ifname, sandbox=args.netns),),
            ips=(IPConfig("10.9.0.2/24", "10.9.0.1", 0),),
        )

    def delete(self, args: CmdArgs) -> None:
        self._record("delete", args)

    def check(self, args: CmdArgs) -> None:
        self._record("check", args)

    def status(self, args: CmdArgs) -> None:
        self._record("status", args)


ENV = {
    "CNI_COMMAND": "ADD",
    "CNI_CONTAINERID": "c1",
    "CNI_NETNS": "/run/netns/c1",
    "CNI_IFNAME": "eth0",
    "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAME=web",
    "CNI_PATH": "/opt/cni/bin:/usr/lib/cni",
}
CONF: dict[str, Any] = {"cniVersion": "1.0.0", "name": "net1", "type": "recorder"}


def call(
    plugin: Recorder, env: dict[str, str] | None = None, conf: Any = None, **kw: Any
) -> tuple[int, Any, str]:
    stdin = json.dumps(CONF if conf is None else conf).encode()
    code, out, err = run_plugin(plugin, environ=ENV if env is None else env, stdin=stdin, **kw)
    return code, json.loads(out) if out else None, err


def test_add_prints_the_result_in_the_configs_version() -> None:
    plugin = Recorder()
    code, out, _ = call(plugin, conf={**CONF, "cniVersion": "0.4.0"})
    assert code == 0
    assert out == {
        "cniVersion": "0.4.0",
        "interfaces": [{"name": "eth0", "sandbox": "/run/netns/c1"}],
        "ips": [{"address": "10.9.0.2/24", "gateway": "10.9.0.1", "interface": 0}],
    }
    ((name, args),) = plugin.calls
    assert name == "add"
    assert (args.container_id, args.netns, args.ifname) == ("c1", "/run/netns/c1", "eth0")
    assert args.args == (("IgnoreUnknown", "1"), ("K8S_POD_NAME", "web"))
    assert args.path == ("/opt/cni/bin", "/usr/lib/cni")
    assert (args.name, args.cni_version, args.prev_result) == ("net1", "0.4.0", None)


def test_prev_result_and_runtime_config_reach_the_plugin() -> None:
    plugin = Recorder()
    prev = {"cniVersion": "1.0.0", "ips": [{"address": "10.9.0.7/24"}]}
    conf = {**CONF, "prevResult": prev, "runtimeConfig": {"portMappings": []}}
    code, _, _ = call(plugin, env={**ENV, "CNI_COMMAND": "CHECK"}, conf=conf)
    assert code == 0
    args = plugin.calls[0][1]
    assert args.prev_result == Result(ips=(IPConfig("10.9.0.7/24"),))
    assert args.runtime_config == {"portMappings": []}


@pytest.mark.parametrize(
    ("command", "unset", "missing"),
    [
        # Which variables each command needs, as the reference skel says.
        ("ADD", ["CNI_NETNS"], "CNI_NETNS"),
        (
            "ADD",
            ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"],
            "CNI_CONTAINERID,CNI_NETNS,CNI_IFNAME",
        ),
        ("CHECK", ["CNI_PATH"], "CNI_PATH"),
        ("DEL", ["CNI_IFNAME"], "CNI_IFNAME"),
        ("DEL", ["CNI_CONTAINERID"], "CNI_CONTAINERID"),
        ("", [], "CNI_COMMAND"),
    ],
)
def test_missing_variables_are_listed(command: str, unset: list[str], missing: str) -> None:
    env = {k: v for k, v in ENV.items() if k not in unset}
    env["CNI_COMMAND"] = command
    if not command:
        del env["CNI_COMMAND"]
    plugin = Recorder()
    code, out, _ = call(plugin, env=env)
    assert code == 1
    assert out == {
        "cniVersion": "1.0.0",
        "code": ERR_INVALID_ENVIRONMENT_VARIABLES,
        "msg": f"required env variables [{missing}] missing",
    }
    assert plugin.calls == []


def test_del_needs_no_namespace() -> None:
    plugin = Recorder()
    env = {k: v for k, v in ENV.items() if k != "CNI_NETNS"} | {"CNI_COMMAND": "DEL"}
    code, out, _ = call(plugin, env=env)
    assert (code, out) == (0, None)
    assert plugin.calls[0][0] == "delete" and plugin.calls[0][1].netns == ""


def test_version_needs_nothing_and_lists_the_supported_versions() -> None:
    code, out, _ = call(
        Recorder(), env={"CNI_COMMAND": "VERSION"}, supported_versions=("0.4.0", "1.0.0")
    )
    assert (code, out) == (0, {"cniVersion": "1.0.0", "supportedVersions": ["0.4.0", "1.0.0"]})


def test_without_a_command_the_about_text_goes_to_stderr() -> None:
    code, out, err = call(Recorder(), env={}, about="CNI plugin recorder v1")
    assert (code, out) == (0, None)
    assert err.startswith("CNI plugin recorder v1\nCNI protocol versions supported: 0.3.0,")


@pytest.mark.parametrize(
    ("conf", "code", "msg", "details"),
    [
        (
            {**CONF, "cniVersion": "0.2.0"},
            ERR_INCOMPATIBLE_CNI_VERSION,
            "incompatible CNI versions",
            "config is \"0.2.0\", plugin supports ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']",
        ),
        ({**CONF, "name": ""}, ERR_INVALID_NETWORK_CONFIG, "missing network name", ""),
        (
            {**CONF, "name": "-bad"},
            ERR_INVALID_NETWORK_CONFIG,
            "invalid characters found in network name",
            "-bad",
        ),
        ([1, 2], ERR_DECODING_FAILURE, "network config is not a JSON object", ""),
    ],
)
def test_configuration_problems(conf: Any, code: int, msg: str, details: str) -> None:
    plugin = Recorder()
    rc, out, _ = call(plugin, conf=conf)
    assert rc == 1
    assert (out["code"], out["msg"], out.get("details", "")) == (code, msg, details)
    assert plugin.calls == []


def test_check_is_refused_for_configs_older_than_0_4_0() -> None:
    rc, out, _ = call(
        Recorder(), env={**ENV, "CNI_COMMAND": "CHECK"}, conf={**CONF, "cniVersion": "0.3.1"}
    )
    assert (rc, out["code"], out["msg"]) == (
        1,
        ERR_INCOMPATIBLE_CNI_VERSION,
        "config version does not allow CHECK",
    )


def test_status_is_a_1_1_command_without_container_variables() -> None:
    plugin = Recorder()
    env = {"CNI_COMMAND": "STATUS", "CNI_PATH": "/opt/cni/bin"}
    rc, out, _ = call(plugin, env=env, conf={**CONF, "cniVersion": "1.1.0"})
    assert (rc, out) == (0, None)
    assert plugin.calls[0][0] == "status"
    rc, out, _ = call(plugin, env=env)
    assert (rc, out["msg"]) == (1, "config version does not allow STATUS")


def test_unknown_commands_are_refused() -> None:
    rc, out, _ = call(Recorder(), env={**ENV, "CNI_COMMAND": "FROB"})
    assert (rc, out["code"], out["msg"]) == (
        1,
        ERR_INVALID_ENVIRONMENT_VARIABLES,
        "unknown CNI_COMMAND: FROB",
    )


def test_plugin_errors_are_printed_as_the_spec_shapes_them() -> None:
    rc, out, _ = call(Recorder(CNIError(ERR_TRY_AGAIN_LATER, "locked", "retry soon")))
    assert (rc, out) == (
        1,
        {"cniVersion": "1.0.0", "code": 11, "msg": "locked", "details": "retry soon"},
    )
    # A bug in the plugin still answers in the spec's shape, with libcni's code 999.
    rc, out, _ = call(Recorder(KeyError("ipam")))
    assert (rc, out["code"], out["msg"]) == (1, ERR_INTERNAL, "KeyError: 'ipam'")


# The reference's pkg/utils tables: (value, code, msg, details); code None = valid.
CONTAINER_IDS = [
    ("", ERR_UNKNOWN_CONTAINER, "missing containerID", ""),
    ("dummy", None, "", ""),
    ("d", None, "", ""),
    ("d" * 64, None, "", ""),
    ("a.b-c_d", None, "", ""),
    ("_dummy", ERR_INVALID_ENVIRONMENT_VARIABLES, "invalid characters in containerID", "_dummy"),
    ("-dummy", ERR_INVALID_ENVIRONMENT_VARIABLES, "invalid characters in containerID", "-dummy"),
    ("dummy!", ERR_INVALID_ENVIRONMENT_VARIABLES, "invalid characters in containerID", "dummy!"),
]
INTERFACE_NAMES = [
    ("", ERR_INVALID_ENVIRONMENT_VARIABLES, "interface name is empty", ""),
    (
        "testnamemorethan16",
        ERR_INVALID_ENVIRONMENT_VARIABLES,
        "interface name is too long",
        "interface name should be less than 16 characters",
    ),
    (".", ERR_INVALID_ENVIRONMENT_VARIABLES, "interface name is . or ..", ""),
    (
        "/testname",
        ERR_INVALID_ENVIRONMENT_VARIABLES,
        "interface name contains / or : or whitespace characters",
        "",
    ),
    (
        "test name",
        ERR_INVALID_ENVIRONMENT_VARIABLES,
        "interface name contains / or : or whitespace characters",
        "",
    ),
    ("testname", None, "", ""),
    ("e" * 15, None, "", ""),
]


@pytest.mark.parametrize(("value", "code", "msg", "details"), CONTAINER_IDS)
def test_container_id_table(value: str, code: int | None, msg: str, details: str) -> None:
    if code is None:
        validate_container_id(value)
        return
    with pytest.raises(CNIError) as err:
        validate_container_id(value)
    assert (err.value.code, err.value.msg, err.value.details) == (code, msg, details)


@pytest.mark.parametrize(("value", "code", "msg", "details"), INTERFACE_NAMES)
def test_interface_name_table(value: str, code: int | None, msg: str, details: str) -> None:
    if code is None:
        validate_interface_name(value)
        return
    with pytest.raises(CNIError) as err:
        validate_interface_name(value)
    assert (err.value.code, err.value.msg, err.value.details) == (code, msg, details)


def test_cni_args() -> None:
    pairs = parse_cni_args("IgnoreUnknown=1;K8S_POD_NAME=web-0;EMPTY=")
    assert pairs == [("IgnoreUnknown", "1"), ("K8S_POD_NAME", "web-0"), ("EMPTY", "")]
    assert format_cni_args(pairs) == "IgnoreUnknown=1;K8S_POD_NAME=web-0;EMPTY="
    assert parse_cni_args("") == []
    with pytest.raises(CNIError, match="invalid pair 'novalue'"):
        parse_cni_args("A=1;novalue")


def test_a_plugin_executable_reads_its_stdin_and_exits_non_zero_on_error(tmp_path: Any) -> None:
    script = tmp_path / "plugin.py"
    script.write_text(
        "import sys\n"
        "from kubelet_kit.cni import PluginBase, Result, CNIError, plugin_main\n"
        "class P(PluginBase):\n"
        "    def add(self, args):\n"
        "        if args.config.get('refuse'):\n"
        "            raise CNIError(7, 'refused', 'by config')\n"
        "        return Result()\n"
        "    def delete(self, args):\n"
        "        pass\n"
        "sys.exit(plugin_main(P()))\n"
    )
    for conf, rc, out in [
        (CONF, 0, {"cniVersion": "1.0.0"}),
        (
            {**CONF, "refuse": True},
            1,
            {"cniVersion": "1.0.0", "code": 7, "msg": "refused", "details": "by config"},
        ),
    ]:
        done = subprocess.run(
            [sys.executable, str(script)],
            input=json.dumps(conf).encode(),
            env=ENV,
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == rc, done.stderr
        assert json.loads(done.stdout) == out
