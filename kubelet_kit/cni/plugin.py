"""Write a CNI plugin in Python: fill in a :class:`Plugin`, call :func:`plugin_main`.

A CNI plugin is a short-lived executable: the runtime sets ``CNI_*`` variables,
writes the network configuration to its standard input and reads one JSON
document from its standard output. :func:`plugin_main` does the parts every
plugin shares, as the reference ``skel`` package does: it checks the
environment (which variables each command needs), the network name, the
container id and the interface name, reconciles the configuration's
``cniVersion`` with the versions the plugin supports, dispatches ADD, DEL,
CHECK, STATUS and VERSION to the plugin, and prints the result or, on failure,
the spec's error object with a non-zero exit.

A plugin runs once per command and then exits, so this module is synchronous:
there is no loop to share and nothing to wait on concurrently.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any, Protocol

import attrs

from kubelet_kit.cni.types import (
    ERR_DECODING_FAILURE,
    ERR_INCOMPATIBLE_CNI_VERSION,
    ERR_INTERNAL,
    ERR_INVALID_ENVIRONMENT_VARIABLES,
    ERR_IO_FAILURE,
    SPEC_VERSIONS,
    CNIError,
    Result,
    parse_cni_args,
    validate_container_id,
    validate_interface_name,
    validate_network_name,
    version_tuple,
)

__all__ = ["CmdArgs", "Plugin", "PluginBase", "plugin_main", "run_plugin"]

#: Which variables each command needs (True) besides CNI_COMMAND, as the spec says.
_REQUIRED: dict[str, dict[str, bool]] = {
    "CNI_CONTAINERID": {"ADD": True, "CHECK": True, "DEL": True},
    "CNI_NETNS": {"ADD": True, "CHECK": True, "DEL": False},
    "CNI_IFNAME": {"ADD": True, "CHECK": True, "DEL": True},
    "CNI_ARGS": {},
    "CNI_PATH": {"ADD": True, "CHECK": True, "DEL": True},
}


@attrs.frozen
class CmdArgs:
    """Everything one invocation was given.

    Attributes:
        command: ``ADD``, ``DEL``, ``CHECK`` or ``STATUS``.
        container_id: ``CNI_CONTAINERID``.
        netns: ``CNI_NETNS``, the namespace path (may be empty for DEL).
        ifname: ``CNI_IFNAME``, the interface to make inside the namespace.
        args: ``CNI_ARGS`` as ordered pairs.
        path: ``CNI_PATH`` split into directories (where to find delegated plugins).
        stdin_data: The raw configuration bytes.
        config: The configuration, parsed.
    """

    command: str
    container_id: str
    netns: str
    ifname: str
    args: tuple[tuple[str, str], ...]
    path: tuple[str, ...]
    stdin_data: bytes
    config: Mapping[str, Any]

    @property
    def cni_version(self) -> str:
        """The configuration's ``cniVersion``."""
        return str(self.config.get("cniVersion", ""))

    @property
    def name(self) -> str:
        """The network's name."""
        return str(self.config.get("name", ""))

    @property
    def prev_result(self) -> Result | None:
        """``prevResult`` (the previous plugin's result in a chain, or the cached
        result for DEL and CHECK), or None.

        Raises:
            CNIError: ERR_DECODING_FAILURE for a malformed prevResult.
        """
        data = self.config.get("prevResult")
        return Result.from_json(data) if data else None

    @property
    def runtime_config(self) -> Mapping[str, Any]:
        """``runtimeConfig``: the capability arguments the runtime passed."""
        value = self.config.get("runtimeConfig") or {}
        return value if isinstance(value, Mapping) else {}


class Plugin(Protocol):
    """What :func:`plugin_main` dispatches to. :class:`PluginBase` provides
    defaults for all but :meth:`add` and :meth:`delete`."""

    def add(self, args: CmdArgs) -> Result:
        """ADD: attach the container to the network and return the result.

        Blocks for as long as the plugin's work takes; not idempotent (the
        runtime calls DEL before a second ADD). Raises CNIError to report a
        failure in the spec's shape; any other exception becomes code 999.
        """
        ...

    def delete(self, args: CmdArgs) -> None:
        """DEL: release what ADD made. Must succeed when it is already gone
        (idempotent), and when ``args.netns`` is empty or the namespace vanished.
        Raises CNIError on failure."""
        ...

    def check(self, args: CmdArgs) -> None:
        """CHECK: raise CNIError if what ADD made (``args.prev_result``) is no
        longer in place. Blocks briefly; idempotent."""
        ...

    def status(self, args: CmdArgs) -> None:
        """STATUS: raise CNIError (50 or 51) when the plugin cannot serve ADD now.
        Idempotent."""
        ...


class PluginBase:
    """A :class:`Plugin` with CHECK and STATUS that always succeed; subclass it
    and implement :meth:`add` and :meth:`delete`."""

    def add(self, args: CmdArgs) -> Result:
        """See :meth:`Plugin.add`."""
        raise NotImplementedError

    def delete(self, args: CmdArgs) -> None:
        """See :meth:`Plugin.delete`."""
        raise NotImplementedError

    def check(self, args: CmdArgs) -> None:
        """See :meth:`Plugin.check`; this default finds nothing wrong."""

    def status(self, args: CmdArgs) -> None:
        """See :meth:`Plugin.status`; this default is always available."""


def _read_env(env: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    cmd = env.get("CNI_COMMAND", "")
    values: dict[str, str] = {}
    missing = [] if cmd else ["CNI_COMMAND"]
    for name, needed in _REQUIRED.items():
        values[name] = env.get(name, "")
        if not values[name] and needed.get(cmd, False):
            missing.append(name)
    if missing:
        raise CNIError(
            ERR_INVALID_ENVIRONMENT_VARIABLES,
            f"required env variables [{','.join(missing)}] missing",
        )
    return cmd, values


def _parse_config(data: bytes) -> dict[str, Any]:
    try:
        config = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CNIError(ERR_DECODING_FAILURE, f"error unmarshalling network config: {exc}") from None
    if not isinstance(config, dict):
        raise CNIError(ERR_DECODING_FAILURE, "network config is not a JSON object")
    return config


def _check_version(config: Mapping[str, Any], supported: Sequence[str]) -> str:
    # A configuration without cniVersion is 0.1.0 in the spec's reading.
    version = str(config.get("cniVersion") or "0.1.0")
    version_tuple(version)
    if version not in supported:
        raise CNIError(
            ERR_INCOMPATIBLE_CNI_VERSION,
            "incompatible CNI versions",
            f'config is "{version}", plugin supports {list(supported)}',
        )
    return version


def run_plugin(
    plugin: Plugin,
    *,
    environ: Mapping[str, str],
    stdin: bytes,
    supported_versions: Sequence[str] = SPEC_VERSIONS,
    about: str = "",
) -> tuple[int, str, str]:
    """Run one invocation without touching the process's own streams.

    Args:
        plugin: The plugin to dispatch to.
        environ: The ``CNI_*`` environment.
        stdin: The configuration bytes (ignored for VERSION).
        supported_versions: Spec versions the plugin speaks (VERSION lists them).
        about: Printed to stderr, with the versions, when run without CNI_COMMAND
            (a person trying the binary by hand), as the reference plugins do.

    Returns:
        ``(exit code, stdout text, stderr text)``: 0 and the result JSON (nothing
        for DEL, CHECK and STATUS), or 1 and the spec's error JSON.
    """
    version = "1.0.0"
    try:
        try:
            cmd, env = _read_env(environ)
        except CNIError:
            if not environ.get("CNI_COMMAND") and about:
                return (
                    0,
                    "",
                    f"{about}\nCNI protocol versions supported: "
                    + ", ".join(supported_versions)
                    + "\n",
                )
            raise
        if cmd == "VERSION":
            body = {
                "cniVersion": supported_versions[-1],
                "supportedVersions": list(supported_versions),
            }
            return 0, json.dumps(body) + "\n", ""
        if cmd not in ("ADD", "DEL", "CHECK", "STATUS"):
            raise CNIError(ERR_INVALID_ENVIRONMENT_VARIABLES, f"unknown CNI_COMMAND: {cmd}")
        config = _parse_config(stdin)
        validate_network_name(str(config.get("name", "")))
        if cmd != "STATUS":
            validate_container_id(env["CNI_CONTAINERID"])
            validate_interface_name(env["CNI_IFNAME"])
        version = _check_version(config, supported_versions)
        if cmd == "CHECK" and version_tuple(version) < (0, 4, 0):
            raise CNIError(ERR_INCOMPATIBLE_CNI_VERSION, "config version does not allow CHECK")
        if cmd == "STATUS" and version_tuple(version) < (1, 1, 0):
            raise CNIError(ERR_INCOMPATIBLE_CNI_VERSION, "config version does not allow STATUS")
        args = CmdArgs(
            command=cmd,
            container_id=env["CNI_CONTAINERID"],
            netns=env["CNI_NETNS"],
            ifname=env["CNI_IFNAME"],
            args=tuple(parse_cni_args(env["CNI_ARGS"])),
            path=tuple(p for p in env["CNI_PATH"].split(os.pathsep) if p),
            stdin_data=stdin,
            config=config,
        )
        if cmd == "ADD":
            result = plugin.add(args)
            # The result is written in the version the configuration asked for.
            out = attrs.evolve(result, cni_version=version).to_json()
            return 0, json.dumps(out) + "\n", ""
        handler: Callable[[CmdArgs], None] = {
            "DEL": plugin.delete,
            "CHECK": plugin.check,
            "STATUS": plugin.status,
        }[cmd]
        handler(args)
        return 0, "", ""
    except CNIError as exc:
        return 1, json.dumps(exc.to_json(version)) + "\n", ""
    except Exception as exc:  # a plugin bug still answers in the spec's shape
        err = CNIError(ERR_INTERNAL, f"{type(exc).__name__}: {exc}")
        return 1, json.dumps(err.to_json(version)) + "\n", ""


def plugin_main(
    plugin: Plugin,
    *,
    supported_versions: Sequence[str] = SPEC_VERSIONS,
    about: str = "",
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """The ``main`` of a plugin executable: read ``os.environ`` and stdin, run
    :func:`run_plugin`, print, and return the exit code for ``sys.exit``."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    data = b""
    if os.environ.get("CNI_COMMAND", "") not in ("", "VERSION"):
        try:
            data = sys.stdin.buffer.read()
        except OSError as exc:
            e = CNIError(ERR_IO_FAILURE, f"error reading from stdin: {exc}")
            out.write(json.dumps(e.to_json("1.0.0")) + "\n")
            return 1
    code, text, diag = run_plugin(
        plugin,
        environ=os.environ,
        stdin=data,
        supported_versions=supported_versions,
        about=about,
    )
    out.write(text)
    out.flush()
    err.write(diag)
    return code
