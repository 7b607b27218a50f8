"""Run CNI plugins as a container runtime does (the caller side of CNI 1.0/1.1).

What this module does, in the spec's terms:

* Network configuration lists (``.conflist``) are read from a directory, the
  first file by name winning, as libcni's ``LoadConfList`` does; a lone plugin
  configuration (``.conf``/``.json``) is taken as a list of one.
* Each plugin is found by its ``type`` in the binary directories (``CNI_PATH``)
  and run with ``CNI_COMMAND``, ``CNI_CONTAINERID``, ``CNI_NETNS``,
  ``CNI_IFNAME``, ``CNI_ARGS`` and ``CNI_PATH``; its standard input is its own
  configuration with the list's ``name`` and ``cniVersion`` put in, the
  ``runtimeConfig`` it declared ``capabilities`` for, and ``prevResult``.
* ADD runs the plugins in order, each getting the previous one's result; the
  last result is the list's, and is cached (``<cache_dir>/results/<network>-
  <container id>-<ifname>``) because DEL and CHECK need it later.
* DEL runs the plugins in reverse order with the cached result as
  ``prevResult`` (none when nothing was cached), then forgets the cache.
* CHECK runs them in order with the cached result (not for versions before
  0.4.0, nor when the list sets ``disableCheck``).
* STATUS (1.1) asks each plugin whether it can serve ADD; for older lists
  only the plugins' presence is checked.
* A plugin that fails prints the spec's error object and exits non-zero; that
  becomes a :class:`~kubelet_kit.cni.CNIError` with the plugin's code, message
  and details, and names the plugin.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from kubelet_kit.clock import Clock, RealClock, wait_for
from kubelet_kit.cni.types import (
    ERR_DECODING_FAILURE,
    ERR_INTERNAL,
    ERR_INVALID_NETWORK_CONFIG,
    ERR_IO_FAILURE,
    CNIError,
    Result,
    format_cni_args,
    validate_container_id,
    validate_interface_name,
    validate_network_name,
    version_tuple,
)

__all__ = [
    "CNIExec",
    "CNIInvoker",
    "NetworkConfigList",
    "RuntimeConf",
    "load_conf_dir",
    "load_conflist",
]

_CONF_EXTENSIONS = (".conflist", ".conf", ".json")


def _freeze_plugins(value: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
    return tuple(dict(p) for p in value)


@attrs.frozen
class NetworkConfigList:
    """A network configuration list (the spec's "Network configuration").

    Attributes:
        name: The network's name.
        cni_version: The spec version the list is written in.
        plugins: Each plugin's configuration (with at least ``type``).
        disable_check: ``disableCheck``: CHECK is skipped.
        source: The file it was read from, if any.
    """

    name: str
    cni_version: str
    plugins: tuple[Mapping[str, Any], ...] = attrs.field(converter=_freeze_plugins)
    disable_check: bool = False
    source: str = ""

    @classmethod
    def from_json(cls, data: Any, *, source: str = "") -> NetworkConfigList:
        """Read and check a conflist document.

        Raises:
            CNIError: ERR_INVALID_NETWORK_CONFIG (or ERR_DECODING_FAILURE), naming
                ``source`` and the field at fault.
        """
        where = f"{source}: " if source else ""
        if not isinstance(data, Mapping):
            raise CNIError(ERR_DECODING_FAILURE, f"{where}network config is not a JSON object")
        if "plugins" not in data and "type" in data:
            # A single plugin's configuration is a list of one.
            plugin = {k: v for k, v in data.items() if k not in ("name", "cniVersion")}
            data = {
                "name": data.get("name"),
                "cniVersion": data.get("cniVersion"),
                "plugins": [plugin],
            }
        name = data.get("name")
        if not isinstance(name, str):
            raise CNIError(ERR_INVALID_NETWORK_CONFIG, f"{where}name: missing network name")
        try:
            validate_network_name(name)
        except CNIError as exc:
            raise CNIError(exc.code, f"{where}name: {exc.msg}", exc.details) from None
        version = data.get("cniVersion") or "0.1.0"
        if not isinstance(version, str):
            raise CNIError(ERR_INVALID_NETWORK_CONFIG, f"{where}cniVersion: not a string")
        try:
            version_tuple(version)
        except CNIError as exc:
            raise CNIError(exc.code, f"{where}cniVersion: {exc.msg}") from None
        plugins = data.get("plugins")
        if not isinstance(plugins, list) or not plugins:
            raise CNIError(ERR_INVALID_NETWORK_CONFIG, f"{where}plugins: no plugins in the list")
        for i, p in enumerate(plugins):
            if not isinstance(p, Mapping) or not isinstance(p.get("type"), str) or not p["type"]:
                raise CNIError(ERR_INVALID_NETWORK_CONFIG, f"{where}plugins[{i}].type: missing")
            if "/" in p["type"]:
                raise CNIError(
                    ERR_INVALID_NETWORK_CONFIG,
                    f"{where}plugins[{i}].type: {p['type']!r} is not a plugin name",
                )
        disable = data.get("disableCheck", False)
        return cls(name, version, plugins, disable is True or disable == "true", source)


def load_conflist(path: str | Path) -> NetworkConfigList:
    """Read one configuration file (a list, or a single plugin's configuration).

    Raises:
        CNIError: ERR_IO_FAILURE when unreadable, ERR_DECODING_FAILURE when not
            JSON, ERR_INVALID_NETWORK_CONFIG when not a valid configuration.
    """
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise CNIError(ERR_IO_FAILURE, f"{path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CNIError(ERR_DECODING_FAILURE, f"{path}: not JSON: {exc}") from None
    return NetworkConfigList.from_json(data, source=str(path))


def load_conf_dir(conf_dir: str | Path) -> NetworkConfigList:
    """The network a runtime uses: the first configuration file in ``conf_dir``
    by name (``.conflist``, ``.conf`` or ``.json``), as the kubelet's and
    containerd's CNI setup choose it.

    Raises:
        CNIError: ERR_IO_FAILURE when the directory holds no configuration, or
            the file's own error.
    """
    try:
        names = sorted(n for n in os.listdir(conf_dir) if n.endswith(_CONF_EXTENSIONS))
    except OSError as exc:
        raise CNIError(ERR_IO_FAILURE, f"{conf_dir}: {exc.strerror}") from None
    if not names:
        raise CNIError(ERR_IO_FAILURE, f"{conf_dir}: no network config found")
    return load_conflist(Path(conf_dir) / names[0])


@attrs.frozen
class RuntimeConf:
    """What a runtime says about one attachment.

    Attributes:
        container_id: ``CNI_CONTAINERID`` (the sandbox's id).
        netns: ``CNI_NETNS``, the namespace path (may be empty for DEL).
        ifname: ``CNI_IFNAME``.
        args: ``CNI_ARGS`` pairs (the kubelet's ``K8S_POD_*`` ones, e.g.).
        capability_args: Values for ``runtimeConfig``, given to a plugin only for
            the capabilities it declares (``portMappings``, ``bandwidth``...).
    """

    container_id: str
    netns: str
    ifname: str = "eth0"
    args: tuple[tuple[str, str], ...] = ()
    capability_args: Mapping[str, Any] = attrs.field(factory=dict)


class CNIExec:
    """Finds and runs plugin executables (libcni's "exec" part); swap it in tests.

    Args:
        bin_dirs: Where plugins are looked for, in order (also ``CNI_PATH``).
        clock: Times each plugin run.
        timeout: Longest a plugin may run; past it, it is killed.
    """

    def __init__(
        self, bin_dirs: Sequence[str | Path], *, clock: Clock | None = None, timeout: float = 60.0
    ) -> None:
        self.bin_dirs = [str(d) for d in bin_dirs]
        self._clock: Clock = clock if clock is not None else RealClock()
        self._timeout = timeout

    def find(self, plugin_type: str) -> str:
        """The path of plugin ``plugin_type``.

        Raises:
            CNIError: ERR_IO_FAILURE naming the directories searched.
        """
        for d in self.bin_dirs:
            path = os.path.join(d, plugin_type)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
        raise CNIError(
            ERR_IO_FAILURE,
            f'failed to find plugin "{plugin_type}" in path {self.bin_dirs}',
            plugin=plugin_type,
        )

    async def run(self, plugin_type: str, stdin: bytes, env: Mapping[str, str]) -> bytes:
        """Run a plugin; returns its standard output when it succeeds.

        Raises:
            CNIError: the plugin's own error (its code, msg, details) when it exits
                non-zero; ERR_INTERNAL with its stderr when it printed no error
                object; ERR_IO_FAILURE when it cannot be found, run, or times out.
        """
        path = self.find(plugin_type)
        # Plugins inherit the runtime's environment (PATH, for the tools some
        # call), with the CNI variables set on top, as libcni does.
        full_env = {**os.environ, **env}
        try:
            proc = await asyncio.create_subprocess_exec(
                path,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=full_env,
                start_new_session=True,
            )
        except OSError as exc:
            raise CNIError(ERR_IO_FAILURE, f"{path}: {exc.strerror}", plugin=plugin_type) from None
        try:
            out, err = await wait_for(self._clock, proc.communicate(stdin), self._timeout)
        except BaseException as exc:
            # Timed out or cancelled: a plugin must not outlive its caller.
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(proc.wait())
            if not isinstance(exc, TimeoutError):
                raise
            raise CNIError(
                ERR_IO_FAILURE,
                f"{env.get('CNI_COMMAND', '')} timed out after {self._timeout:g}s",
                plugin=plugin_type,
            ) from None
        if proc.returncode != 0:
            try:
                data = json.loads(out)
            except (ValueError, UnicodeDecodeError):
                data = None
            if isinstance(data, Mapping) and "code" in data:
                raise CNIError.from_json(data, plugin=plugin_type)
            text = (err or out).decode(errors="replace").strip()
            raise CNIError(
                ERR_INTERNAL,
                f"exit status {proc.returncode}",
                text[-2000:],
                plugin=plugin_type,
            )
        return out


class CNIInvoker:
    """Runs a network configuration list for attachments (libcni's CNIConfig).

    Args:
        exec: How plugins are run (a :class:`CNIExec`, or a double).
        cache_dir: Where results are cached for DEL and CHECK (libcni's
            ``/var/lib/cni`` layout: ``results/<network>-<id>-<ifname>``).
    """

    def __init__(self, exec: CNIExec, cache_dir: str | Path) -> None:
        self.exec = exec
        self.cache_dir = Path(cache_dir)

    # ------------------------------------------------------------- cache

    def _cache_path(self, net: NetworkConfigList, rt: RuntimeConf) -> Path:
        return self.cache_dir / "results" / f"{net.name}-{rt.container_id}-{rt.ifname}"

    def cached_result(self, net: NetworkConfigList, rt: RuntimeConf) -> Result | None:
        """The result cached by the last ADD of this attachment, or None."""
        try:
            data = json.loads(self._cache_path(net, rt).read_bytes())
        except (OSError, ValueError):
            return None
        result = data.get("result") if isinstance(data, Mapping) else None
        if not result:
            return None
        try:
            return Result.from_json(result)
        except CNIError:
            return None

    def _write_cache(self, net: NetworkConfigList, rt: RuntimeConf, result: Result) -> None:
        path = self._cache_path(net, rt)
        path.parent.mkdir(parents=True, exist_ok=True)
        config = json.dumps(
            {
                "cniVersion": net.cni_version,
                "name": net.name,
                "plugins": [dict(p) for p in net.plugins],
            }
        ).encode()
        # libcni's cache record, so its tools can read ours.
        record = {
            "kind": "cniCacheV1",
            "containerId": rt.container_id,
            "config": base64.b64encode(config).decode(),
            "ifName": rt.ifname,
            "networkName": net.name,
            "cniArgs": [list(a) for a in rt.args],
            "capabilityArgs": dict(rt.capability_args),
            "result": result.to_json(),
        }
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        os.replace(tmp, path)

    def _drop_cache(self, net: NetworkConfigList, rt: RuntimeConf) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._cache_path(net, rt).unlink()

    # ----------------------------------------------------------- running

    def _env(self, command: str, rt: RuntimeConf) -> dict[str, str]:
        return {
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": rt.container_id,
            "CNI_NETNS": rt.netns,
            "CNI_IFNAME": rt.ifname,
            "CNI_ARGS": format_cni_args(rt.args),
            "CNI_PATH": os.pathsep.join(self.exec.bin_dirs),
        }

    @staticmethod
    def plugin_config(
        net: NetworkConfigList,
        plugin: Mapping[str, Any],
        rt: RuntimeConf,
        prev_result: Result | None,
    ) -> dict[str, Any]:
        """The configuration one plugin gets on stdin (see the module doc)."""
        conf = dict(plugin)
        conf["name"] = net.name
        conf["cniVersion"] = net.cni_version
        caps = plugin.get("capabilities")
        runtime_config = {
            k: v
            for k, v in rt.capability_args.items()
            if isinstance(caps, Mapping) and caps.get(k) is True
        }
        if runtime_config:
            conf["runtimeConfig"] = runtime_config
        if prev_result is not None:
            conf["prevResult"] = prev_result.to_json()
        return conf

    async def _invoke(
        self,
        command: str,
        net: NetworkConfigList,
        plugin: Mapping[str, Any],
        rt: RuntimeConf,
        prev_result: Result | None,
    ) -> bytes:
        stdin = json.dumps(self.plugin_config(net, plugin, rt, prev_result)).encode()
        return await self.exec.run(str(plugin["type"]), stdin, self._env(command, rt))

    @staticmethod
    def _check_rt(rt: RuntimeConf) -> None:
        validate_container_id(rt.container_id)
        validate_interface_name(rt.ifname)

    async def add(self, net: NetworkConfigList, rt: RuntimeConf) -> Result:
        """ADD the attachment: run the plugins in order, chaining results; cache
        and return the last. Not idempotent (DEL first to redo it).

        Raises:
            CNIError: the first plugin that failed (later ones are not run; the
                caller should DEL to release what earlier ones made).
        """
        self._check_rt(rt)
        prev: Result | None = None
        for plugin in net.plugins:
            out = await self._invoke("ADD", net, plugin, rt, prev)
            try:
                prev = Result.from_json(json.loads(out))
            except (ValueError, UnicodeDecodeError):
                raise CNIError(
                    ERR_DECODING_FAILURE,
                    "ADD printed no JSON result",
                    out.decode(errors="replace")[:2000],
                    plugin=str(plugin["type"]),
                ) from None
            except CNIError as exc:
                raise CNIError(exc.code, exc.msg, exc.details, plugin=str(plugin["type"])) from None
        assert prev is not None  # a list has at least one plugin
        self._write_cache(net, rt, prev)
        return prev

    async def delete(self, net: NetworkConfigList, rt: RuntimeConf) -> None:
        """DEL the attachment: every plugin in reverse order, with the cached
        result as ``prevResult``; then drop the cache. Idempotent as far as the
        plugins are (the spec requires it of them).

        Raises:
            CNIError: the first plugin that failed; the cache is kept so that a
                retry passes the same prevResult.
        """
        self._check_rt(rt)
        cached = self.cached_result(net, rt)
        # Versions before 0.4.0 never passed prevResult to DEL.
        prev = cached if version_tuple(net.cni_version) >= (0, 4, 0) else None
        for plugin in reversed(net.plugins):
            await self._invoke("DEL", net, plugin, rt, prev)
        self._drop_cache(net, rt)

    async def check(self, net: NetworkConfigList, rt: RuntimeConf) -> None:
        """CHECK the attachment against its cached result, plugin by plugin.
        Idempotent; a no-op for versions before 0.4.0 or with ``disableCheck``.

        Raises:
            CNIError: no cached result (ERR_IO_FAILURE: ADD never succeeded), or the
                first plugin that found something wrong.
        """
        self._check_rt(rt)
        if net.disable_check or version_tuple(net.cni_version) < (0, 4, 0):
            return
        cached = self.cached_result(net, rt)
        if cached is None:
            raise CNIError(
                ERR_IO_FAILURE,
                f"no cached result for {net.name}/{rt.container_id}/{rt.ifname}: "
                "was it ever added?",
            )
        for plugin in net.plugins:
            await self._invoke("CHECK", net, plugin, rt, cached)

    async def status(self, net: NetworkConfigList) -> None:
        """STATUS (1.1): raise the first plugin's error if any says ADD cannot be
        served now; a no-op for lists older than 1.1.0. Idempotent.

        Raises:
            CNIError: typically ERR_PLUGIN_NOT_AVAILABLE (50) or
                ERR_LIMITED_CONNECTIVITY (51); ERR_IO_FAILURE if a plugin is missing.
        """
        if version_tuple(net.cni_version) < (1, 1, 0):
            for plugin in net.plugins:
                self.exec.find(str(plugin["type"]))
            return
        for plugin in net.plugins:
            stdin = json.dumps(self.plugin_config(net, plugin, RuntimeConf("", ""), None))
            env = {"CNI_COMMAND": "STATUS", "CNI_PATH": os.pathsep.join(self.exec.bin_dirs)}
            await self.exec.run(str(plugin["type"]), stdin.encode(), env)

    async def version(self, plugin_type: str) -> list[str]:
        """The spec versions plugin ``plugin_type`` supports (VERSION).

        Raises:
            CNIError: the plugin failed, or answered no ``supportedVersions``.
        """
        out = await self.exec.run(
            plugin_type,
            b"",
            {"CNI_COMMAND": "VERSION", "CNI_PATH": os.pathsep.join(self.exec.bin_dirs)},
        )
        try:
            versions = json.loads(out)["supportedVersions"]
        except (ValueError, KeyError, TypeError):
            raise CNIError(
                ERR_DECODING_FAILURE, "VERSION: no supportedVersions", plugin=plugin_type
            ) from None
        return [str(v) for v in versions]
