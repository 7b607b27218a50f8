"""CNINetwork: a network namespace per sandbox, wired by a CNI configuration.

This is what a runtime needs from CNI for one sandbox: :meth:`CNINetwork.setup`
makes a named network namespace for it, runs the configuration list's ADD and
returns the pod's addresses; :meth:`CNINetwork.teardown` runs DEL (with the
cached result) and removes the namespace. The attachment is made as the
kubelet's runtimes make it: interface ``eth0`` and ``CNI_ARGS`` of
``IgnoreUnknown=1;K8S_POD_NAMESPACE=..;K8S_POD_NAME=..;
K8S_POD_INFRA_CONTAINER_ID=..;K8S_POD_UID=..``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

from kubelet_kit.clock import Clock
from kubelet_kit.cni.types import CNIError, Result
from kubelet_kit.network.cni import (
    CNIExec,
    CNIInvoker,
    NetworkConfigList,
    RuntimeConf,
    load_conf_dir,
)
from kubelet_kit.network.netns import DEFAULT_NETNS_DIR, create_netns, is_netns, remove_netns

__all__ = ["CNINetwork", "NetworkStatus", "PodRef", "port_mappings_arg"]

#: The prefix of this project's namespace names (``kk-<sandbox id>``).
NETNS_PREFIX = "kk-"


class _PortMapping(Protocol):
    @property
    def container_port(self) -> int: ...
    @property
    def host_port(self) -> int: ...
    @property
    def protocol(self) -> str: ...
    @property
    def host_ip(self) -> str: ...


def port_mappings_arg(mappings: Sequence[_PortMapping]) -> dict[str, Any]:
    """The ``portMappings`` capability argument for a sandbox's port mappings,
    as containerd builds it: only ports published on the host (``host_port`` >
    0), protocol in lower case, ``hostIP`` when set. Empty when none is
    published (so no ``runtimeConfig`` is sent for it)."""
    entries = []
    for m in mappings:
        if m.host_port <= 0:
            continue
        entry: dict[str, Any] = {
            "hostPort": m.host_port,
            "containerPort": m.container_port,
            "protocol": (m.protocol or "TCP").lower(),
        }
        if m.host_ip:
            entry["hostIP"] = m.host_ip
        entries.append(entry)
    return {"portMappings": entries} if entries else {}


@attrs.frozen
class PodRef:
    """The pod a sandbox belongs to, for ``CNI_ARGS``."""

    name: str
    namespace: str
    uid: str


@attrs.frozen
class NetworkStatus:
    """What :meth:`CNINetwork.setup` made.

    Attributes:
        netns: The namespace path the sandbox's processes join.
        ip: The pod's primary address (first on ``eth0``), without prefix.
        additional_ips: Further addresses on ``eth0`` (another family, say).
        result: The configuration list's whole result.
    """

    netns: str
    ip: str
    additional_ips: tuple[str, ...]
    result: Result


class CNINetwork:
    """CNI networking for sandboxes.

    Args:
        conf_dir: Directory of network configurations; the first by name is used
            (read at each setup, so a change applies to the next sandbox).
        bin_dirs: Directories holding plugin executables.
        cache_dir: Where results are cached between ADD and DEL.
        netns_dir: Where the named namespaces are made.
        ifname: The interface made inside each namespace.
        clock: Times plugin runs (with ``plugin_timeout``).
        plugin_timeout: Longest one plugin run may take.
        exec: How plugins are run; default a :class:`CNIExec` over ``bin_dirs``.
    """

    def __init__(
        self,
        conf_dir: str | Path,
        bin_dirs: Sequence[str | Path] = ("/opt/cni/bin", "/usr/lib/cni"),
        *,
        cache_dir: str | Path = "/var/lib/cni",
        netns_dir: str | Path = DEFAULT_NETNS_DIR,
        ifname: str = "eth0",
        clock: Clock | None = None,
        plugin_timeout: float = 60.0,
        exec: CNIExec | None = None,
    ) -> None:
        self.conf_dir = Path(conf_dir)
        self.netns_dir = Path(netns_dir)
        self.ifname = ifname
        self.exec = (
            exec if exec is not None else CNIExec(bin_dirs, clock=clock, timeout=plugin_timeout)
        )
        self.invoker = CNIInvoker(self.exec, cache_dir)

    def config(self) -> NetworkConfigList:
        """The configuration list in use now.

        Raises:
            CNIError: none found, or it is invalid.
        """
        return load_conf_dir(self.conf_dir)

    async def ready(self) -> str:
        """ "" when ready for a sandbox, else why not (for NetworkReady): the
        configuration is loaded, its plugins are present (and, for 1.1 lists,
        answer STATUS). Raises nothing."""
        try:
            await self.invoker.status(self.config())
        except CNIError as exc:
            return str(exc)
        return ""

    def netns_path(self, sandbox_id: str) -> str:
        """Where the sandbox's namespace is (or would be)."""
        return str(self.netns_dir / f"{NETNS_PREFIX}{sandbox_id}")

    def _rt(
        self,
        sandbox_id: str,
        netns: str,
        pod: PodRef | None,
        capability_args: Mapping[str, Any] | None = None,
    ) -> RuntimeConf:
        args: tuple[tuple[str, str], ...] = (("IgnoreUnknown", "1"),)
        if pod is not None:
            args += (
                ("K8S_POD_NAMESPACE", pod.namespace),
                ("K8S_POD_NAME", pod.name),
                ("K8S_POD_INFRA_CONTAINER_ID", sandbox_id),
                ("K8S_POD_UID", pod.uid),
            )
        return RuntimeConf(
            container_id=sandbox_id,
            netns=netns,
            ifname=self.ifname,
            args=args,
            capability_args=dict(capability_args or {}),
        )

    async def setup(
        self,
        sandbox_id: str,
        pod: PodRef | None = None,
        *,
        capability_args: Mapping[str, Any] | None = None,
    ) -> NetworkStatus:
        """Make the sandbox's namespace and ADD it to the network. Not idempotent.
        On failure nothing is left behind: DEL is run for what the chain made and
        the namespace removed. ``capability_args`` (e.g. from
        :func:`port_mappings_arg`) reach the plugins that declare those
        capabilities, at ADD and again at DEL.

        Raises:
            CNIError: configuration or plugin failure (names the plugin).
            OSError: the namespace could not be made.
        """
        net = self.config()
        path = await create_netns(self.netns_path(sandbox_id))
        rt = self._rt(sandbox_id, path, pod, capability_args)
        try:
            result = await self.invoker.add(net, rt)
        except BaseException:
            # As the kubelet's runtimes do: a failed ADD is followed by a DEL.
            with contextlib.suppress(Exception):
                await self.invoker.delete(net, rt)
            with contextlib.suppress(OSError):
                await remove_netns(path)
            raise
        ips = [ip.ip for ip in result.sandbox_ips(self.ifname)]
        return NetworkStatus(path, ips[0] if ips else "", tuple(ips[1:]), result)

    async def teardown(
        self,
        sandbox_id: str,
        pod: PodRef | None = None,
        *,
        capability_args: Mapping[str, Any] | None = None,
    ) -> None:
        """DEL the sandbox from the network and remove its namespace. Idempotent:
        a namespace already gone is passed as an empty ``CNI_NETNS`` (plugins then
        release only their bookkeeping, e.g. IPAM leases).

        Raises:
            CNIError: a plugin's DEL failed (the namespace is kept for a retry).
        """
        path = self.netns_path(sandbox_id)
        netns = path if is_netns(path) else ""
        rt = self._rt(sandbox_id, netns, pod, capability_args)
        await self.invoker.delete(self.config(), rt)
        await remove_netns(path)

    async def check(
        self,
        sandbox_id: str,
        pod: PodRef | None = None,
        *,
        capability_args: Mapping[str, Any] | None = None,
    ) -> None:
        """CHECK the sandbox's attachment: each plugin verifies that what its ADD
        made is still in place. Idempotent; does nothing for configurations that
        predate CHECK or disable it.

        Raises:
            CNIError: the first plugin that found a problem, or ERR_IO_FAILURE when
                the sandbox was never added (no cached result).
        """
        rt = self._rt(sandbox_id, self.netns_path(sandbox_id), pod, capability_args)
        await self.invoker.check(self.config(), rt)

    def leftover_sandbox_ids(self) -> list[str]:
        """Sandbox ids whose namespace file (live or stale) is in ``netns_dir``."""
        try:
            names = os.listdir(self.netns_dir)
        except OSError:
            return []
        return sorted(n[len(NETNS_PREFIX) :] for n in names if n.startswith(NETNS_PREFIX))
