"""The whole agent process: the Kubelet, its node API server and, in cluster mode,
its cluster side, built by :func:`build_agent` and run together by :class:`Agent`."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from kubelet_kit.agent.kubelet import Kubelet
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.clock import RealClock
from kubelet_kit.errors import ConfigurationError
from kubelet_kit.node.defaults import default_node_name

if TYPE_CHECKING:
    from kubelet_kit.cluster.agent import ClusterNode
    from kubelet_kit.server import KubeletServer

__all__ = ["Agent", "ClusterOptions", "build_agent"]

log = logging.getLogger("kubelet_kit")


@attrs.define(kw_only=True)
class ClusterOptions:
    """How the agent joins an API server (the kubelet's cluster flags).

    Attributes:
        kubeconfig: The node's kubeconfig (path or content); None: in-cluster.
        context: Kubeconfig context.
        taints: Taints to register with (``--register-with-taints``).
        lease_duration: nodeLeaseDurationSeconds.
    """

    kubeconfig: str | os.PathLike[str] | Mapping[str, Any] | None = None
    context: str | None = None
    taints: Sequence[Mapping[str, Any]] = ()
    lease_duration: int = 40


class Agent:
    """A whole node agent: the :class:`Kubelet`, its node API server, and, in
    cluster mode, its cluster side. Made by :func:`build_agent`.

    ``run()`` serves the node API, runs the Kubelet (and the cluster side) until
    :meth:`stop`, then closes everything it opened; pods keep running.
    """

    def __init__(
        self,
        kubelet: Kubelet,
        *,
        server: KubeletServer | None = None,
        cluster: ClusterNode | None = None,
        api_client: Any = None,
        background: Sequence[Callable[[], Any]] = (),
        closers: Sequence[Callable[[], Any]] = (),
    ) -> None:
        self.kubelet = kubelet
        self.server = server
        self.cluster = cluster
        self.api_client = api_client
        self._background = list(background)
        self._closers = list(closers)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._serving = False

    async def start_server(self) -> None:
        """Start listening on the node API's ports (idempotent; ``run`` calls it).

        Raises:
            OSError: A port cannot be bound.
        """
        if self.server is not None and not self._serving:
            await self.server.start()
            self._serving = True

    async def run(self) -> None:
        """Run until :meth:`stop` (pods keep running). Raises if a part fails."""
        self._stop.clear()
        try:
            await self.start_server()
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(self.kubelet.run(), name="kubelet")]
                if self.cluster is not None:
                    tasks.append(tg.create_task(self.cluster.run(), name="cluster-node"))
                for start in self._background:
                    tasks.append(tg.create_task(start()))
                stop = tg.create_task(self._stop.wait())
                await asyncio.wait([*tasks, stop], return_when=asyncio.FIRST_COMPLETED)
                # Whichever ended first (a stop, or a part that failed), the rest go.
                self.kubelet.stop()
                if self.cluster is not None:
                    self.cluster.stop()
                for task in tasks[1 + (self.cluster is not None) :]:
                    task.cancel()
                stop.cancel()
        finally:
            await self.close()

    def stop(self) -> None:
        """Ask :meth:`run` to return. Idempotent; pods keep running."""
        self._stop.set()

    async def drain(self, grace_period: float | None = None) -> None:
        """Stop every pod (gracefully) and wait until they are stopped."""
        await self.kubelet.drain(grace_period)

    async def close(self) -> None:
        """Stop serving and close the clients the agent opened. Idempotent."""
        if self.server is not None and self._serving:
            self._serving = False
            await self.server.stop()
        closers, self._closers = self._closers, []
        for close in closers:
            with contextlib.suppress(Exception):
                result = close()
                if asyncio.iscoroutine(result):
                    await result
        close_runtime = getattr(self.kubelet.runtime, "close", None)
        if close_runtime is not None:
            with contextlib.suppress(Exception):
                await close_runtime()

    async def __aenter__(self) -> Agent:
        await self.start_server()
        self._task = asyncio.create_task(self.run(), name="agent")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def build_agent(
    config: KubeletConfiguration | None = None,
    *,
    cluster: ClusterOptions | None = None,
    serve: bool = True,
    cert_dir: str | os.PathLike[str] | None = None,
    node_ip: str | None = None,
    **parts: Any,
) -> Agent:
    """Build the whole agent ``config`` describes: the :class:`Kubelet` (``parts``
    as its keyword arguments), the node API server (``address``, ``port``,
    ``tlsCertFile``, ``authentication``, ``authorization``, ...; a self-signed
    certificate in ``cert_dir``, default ``<root-dir>/pki``, when none is given),
    and with ``cluster`` the cluster side.

    Args:
        config: The KubeletConfiguration (default: the kubelet's, on the embedded
            runtime).
        cluster: Join this API server as a Node (needs ``kubelet-kit[cluster]``).
        serve: Serve the node API (``config``'s ports; a port of 0 is off).
        cert_dir: Where a self-signed serving certificate is made.
        node_ip: The node's address (``--node-ip``): ``status.hostIP`` of its pods
            and the InternalIP of its Node; default the default route's address.
        parts: Keyword arguments of :class:`Kubelet` (``runtime``, ``pleg``, ...).

    Raises:
        ConfigurationError: A setting is malformed (named by its field path), or
            the kubeconfig cannot be used.
    """
    config = config if config is not None else KubeletConfiguration()
    if node_ip:
        parts.setdefault("host_ip", node_ip)
    closers: list[Callable[[], Any]] = []
    background: list[Callable[[], Any]] = []
    api_client: Any = None
    if cluster is not None:
        from kubelet_kit.cluster.client import connect
        from kubelet_kit.cluster.configsource import APIConfigSource
        from kubelet_kit.cluster.services import APIServices
        from kubelet_kit.config.apiserver import APIServerSource

        api_client = await connect(
            cluster.kubeconfig,
            context=cluster.context,
            qps=config.kube_api_qps,
            burst=config.kube_api_burst,
            clock=parts.get("clock"),
        )
        closers.append(api_client.close)
        node_name = parts.get("node_name") or default_node_name()
        parts["node_name"] = node_name
        clock = parts.setdefault("clock", RealClock())
        parts["sources"] = [
            APIServerSource(api_client, node_name, clock=clock),
            *parts.get("sources", ()),
        ]
        if parts.get("config_source") is None:
            config_source = parts["config_source"] = APIConfigSource(api_client)
            closers.insert(0, functools.partial(asyncio.to_thread, config_source.close))
        if parts.get("services") is None:
            services = parts["services"] = APIServices(api_client, clock=clock)
            background.append(services.run)
    try:
        kubelet = Kubelet(config, **parts)
        server = await _build_server(kubelet, config, cert_dir) if serve else None
        cluster_node = None
        if cluster is not None:
            from kubelet_kit.cluster.agent import ClusterNode
            from kubelet_kit.node.nodestatus import NodeStatusProvider

            port = server.port if server is not None and server.port else 0
            provider = NodeStatusProvider(
                kubelet, kubelet_port=port, addresses=(lambda: [node_ip]) if node_ip else None
            )

            async def node_status() -> Mapping[str, Any]:
                return (await provider.status()).to_dict()

            cluster_node = ClusterNode(
                kubelet,
                api_client,
                node_status=node_status,
                labels=config.node_labels,
                taints=cluster.taints,
                lease_duration=cluster.lease_duration,
                node_status_update_frequency=config.seconds("node_status_update_frequency"),
                node_status_report_frequency=config.seconds("node_status_report_frequency"),
            )
    except BaseException:
        for close in reversed(closers):
            with contextlib.suppress(Exception):
                result = close()
                if asyncio.iscoroutine(result):
                    await result
        raise
    return Agent(
        kubelet,
        server=server,
        cluster=cluster_node,
        api_client=api_client,
        background=background,
        closers=closers,
    )


async def _build_server(
    kubelet: Kubelet, config: KubeletConfiguration, cert_dir: str | os.PathLike[str] | None
) -> KubeletServer | None:
    """The node API server of ``config``, or None when every port is off."""
    from kubelet_kit.server import KubeletServer
    from kubelet_kit.server.config import ensure_self_signed, server_options

    options = server_options(config)
    if not any(options[p] for p in ("port", "read_only_port", "healthz_port")):
        return None
    if options["port"] is not None and not (
        options["tls_cert_file"] and options["tls_private_key_file"]
    ):
        where = Path(cert_dir) if cert_dir is not None else kubelet.root_dir / "pki"
        try:
            cert, key = await asyncio.to_thread(ensure_self_signed, where, kubelet.node_name)
        except ConfigurationError as exc:
            log.warning("not serving the secure port: %s", exc)
            options["port"] = None
        else:
            options["tls_cert_file"], options["tls_private_key_file"] = cert, key
    return KubeletServer(kubelet, metrics=kubelet.metrics, **options)
