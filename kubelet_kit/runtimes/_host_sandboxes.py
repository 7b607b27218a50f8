"""The sandboxes of :class:`~kubelet_kit.runtimes.host.HostProcessRuntime`.

A sandbox is a record sharing the host's namespaces, or, with CNI networking, a
record with a network namespace of its own that the CNI plugins set up. This
part runs, stops, removes, lists and reports sandboxes, and tears down (and at
start-up recovers) their networks.
"""

from __future__ import annotations

import contextlib
import shutil
import uuid

import attrs

from kubelet_kit.cni.types import CNIError
from kubelet_kit.container.interfaces import (
    ContainerEventType,
    NamespaceOptions,
    PodSandbox,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxState,
    PodSandboxStatus,
)
from kubelet_kit.errors import (
    AlreadyExistsError,
    ContainerRuntimeError,
    NotFoundError,
    UnimplementedError,
)
from kubelet_kit.network import is_netns, port_mappings_arg
from kubelet_kit.runtimes._host_events import _HostEvents
from kubelet_kit.runtimes._host_records import _pod_ref, _SandboxRecord
from kubelet_kit.runtimes._host_system import _host_primary_ip


def _check_host_network_ports(config: PodSandboxConfig) -> None:
    """On the host's network a container's port is the host's: a mapping to
    another host port or address cannot be honoured, so it is declined."""
    for p in config.port_mappings:
        if p.host_port and (p.host_port != p.container_port or p.host_ip):
            raise UnimplementedError(
                f"port_mappings: host port {p.host_ip or '*'}:{p.host_port} to container "
                f"port {p.container_port}: the sandbox shares the host's network (the host "
                "runtime publishes ports only through CNI networking)"
            )


class _HostSandboxes(_HostEvents):
    """Running, stopping, removing and reporting sandboxes, and their networks."""

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        """Record a READY sandbox; returns its id. Not idempotent. With CNI
        networking and a config that does not ask for the host's network, the
        sandbox gets a network namespace and the address the CNI plugins gave it
        (failures leave nothing behind).

        Raises:
            AlreadyExistsError: a sandbox with the same name, namespace, uid and
                attempt exists (containerd reserves that name too).
            UnimplementedError: a port mapping to another host port or address
                for a sandbox on the host's network.
            ContainerRuntimeError: the network could not be set up (the message
                names the plugin and its error).
        """
        if config.sysctls:
            # Namespaced sysctls would change the host's own: its IPC namespace is
            # shared, and so is its network unless CNI gives the sandbox one.
            raise UnimplementedError(
                f"sysctls: the host runtime cannot set sandbox sysctls "
                f"({', '.join(sorted(config.sysctls))}) without changing the host's"
            )
        await self._recover_networks()
        md = config.metadata
        for sid in self._sandbox_ids():
            with contextlib.suppress(NotFoundError):
                other = self._load_sandbox(sid).config.metadata
                if other == md:
                    raise AlreadyExistsError(
                        f'sandbox name "{md.name}_{md.namespace}_{md.uid}_{md.attempt}" '
                        f'is reserved for "{sid}"'
                    )
        sandbox_id = uuid.uuid4().hex + uuid.uuid4().hex
        own_network = self._network is not None and not config.namespace_options.host_network
        if not own_network:
            _check_host_network_ports(config)
        # The host's PID and IPC namespaces are shared whatever the config asked
        # for; the network too unless CNI networking gives the sandbox its own.
        config = attrs.evolve(
            config,
            namespace_options=NamespaceOptions(
                host_network=not own_network, host_pid=True, host_ipc=True
            ),
        )
        netns = ""
        extra_ips: tuple[str, ...] = ()
        if own_network:
            assert self._network is not None
            try:
                net = await self._network.setup(
                    sandbox_id,
                    _pod_ref(config),
                    capability_args=port_mappings_arg(config.port_mappings),
                )
            except (CNIError, OSError) as exc:
                raise ContainerRuntimeError(
                    f'failed to setup network for sandbox "{sandbox_id}": {exc}'
                ) from exc
            ip, netns, extra_ips = net.ip, net.netns, net.additional_ips
        else:
            ip = self._host_ip if self._host_ip is not None else _host_primary_ip()
        rec = _SandboxRecord(
            sandbox_id, config, self._clock.now(), PodSandboxState.READY, ip, netns, extra_ips
        )
        self._sandbox_dir(sandbox_id).mkdir(parents=True)
        self._save_sandbox(rec)
        self._emit_sandbox(sandbox_id, ContainerEventType.CREATED)
        self._emit_sandbox(sandbox_id, ContainerEventType.STARTED)
        return sandbox_id

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        """Stop every container of the sandbox (SIGKILL at once, as containerd does
        when the kubelet has already stopped them gracefully) and mark it NOTREADY.
        Idempotent. Raises NotFoundError for an unknown id."""
        rec = self._load_sandbox(pod_sandbox_id)
        for c in self._container_records():
            if c.pod_sandbox_id == pod_sandbox_id:
                await self.stop_container(c.id, 0)
        if rec.state is not PodSandboxState.NOTREADY:
            rec = attrs.evolve(rec, state=PodSandboxState.NOTREADY)
            self._save_sandbox(rec)
            self._emit_sandbox(pod_sandbox_id, ContainerEventType.STOPPED)
        await self._teardown_network(rec)

    async def _teardown_network(self, rec: _SandboxRecord) -> None:
        """CNI DEL and namespace removal, once; the record forgets the namespace
        only after both succeeded, so a failure is retried by the next stop,
        remove or start-up."""
        if not rec.netns or self._network is None:
            return
        try:
            await self._network.teardown(
                rec.id,
                _pod_ref(rec.config),
                capability_args=port_mappings_arg(rec.config.port_mappings),
            )
        except (CNIError, OSError) as exc:
            raise ContainerRuntimeError(
                f'failed to destroy network for sandbox "{rec.id}": {exc}'
            ) from exc
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile
            self._save_sandbox(attrs.evolve(rec, netns=""))

    async def _recover_networks(self) -> None:
        """Once per runtime: release the networks of sandboxes left behind by an
        agent that stopped mid-way. A stopped sandbox still holding a namespace,
        a ready one whose namespace is gone (a reboot: it is marked NOTREADY, its
        containers being gone too), and a namespace of ours with no sandbox at
        all are each given a CNI DEL and their namespace removed. Failures are
        retried at the next start-up (or stop/remove of that sandbox)."""
        if self._networks_recovered or self._network is None:
            return
        self._networks_recovered = True
        known = set()
        for sid in self._sandbox_ids():
            try:
                rec = self._load_sandbox(sid)
            except NotFoundError:
                continue
            known.add(sid)
            if not rec.netns:
                continue
            if rec.state is PodSandboxState.READY and is_netns(rec.netns):
                continue
            if rec.state is PodSandboxState.READY:
                rec = attrs.evolve(rec, state=PodSandboxState.NOTREADY)
                self._save_sandbox(rec)
            with contextlib.suppress(ContainerRuntimeError):
                await self._teardown_network(rec)
        for sid in self._network.leftover_sandbox_ids():
            if sid not in known:
                with contextlib.suppress(CNIError, OSError):
                    await self._network.teardown(sid)

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        """Stop and remove the sandbox and its containers. Idempotent: an unknown
        id succeeds."""
        try:
            self._check_id("sandbox", pod_sandbox_id)
        except NotFoundError:
            return
        try:
            status = self._sandbox_status(self._load_sandbox(pod_sandbox_id))
        except NotFoundError:
            status = None
        for c in self._container_records():
            if c.pod_sandbox_id == pod_sandbox_id:
                await self.remove_container(c.id)
        with contextlib.suppress(NotFoundError):
            await self._teardown_network(self._load_sandbox(pod_sandbox_id))
        shutil.rmtree(self._sandbox_dir(pod_sandbox_id), ignore_errors=True)
        if status is not None:
            self._emit(pod_sandbox_id, ContainerEventType.DELETED, status, ())

    async def pod_sandbox_status(self, pod_sandbox_id: str) -> PodSandboxStatus:
        """Status of one sandbox. Raises NotFoundError for an unknown id."""
        return self._sandbox_status(self._load_sandbox(pod_sandbox_id))

    @staticmethod
    def _sandbox_status(rec: _SandboxRecord) -> PodSandboxStatus:
        c = rec.config
        return PodSandboxStatus(
            id=rec.id,
            metadata=c.metadata,
            state=rec.state,
            created_at=rec.created_at,
            ip=rec.ip,
            additional_ips=rec.additional_ips,
            namespace_options=c.namespace_options,
            labels=c.labels,
            annotations=c.annotations,
            runtime_handler=c.runtime_handler,
        )

    async def list_pod_sandboxes(self, filter: PodSandboxFilter | None = None) -> list[PodSandbox]:
        """Every sandbox matching ``filter``, oldest first. Raises nothing. (The
        first call of a runtime with CNI networking first releases the networks
        of sandboxes left behind.)"""
        await self._recover_networks()
        result = []
        for sid in self._sandbox_ids():
            try:
                rec = self._load_sandbox(sid)
            except NotFoundError:
                continue
            sb = PodSandbox(
                id=rec.id,
                metadata=rec.config.metadata,
                state=rec.state,
                created_at=rec.created_at,
                labels=rec.config.labels,
                annotations=rec.config.annotations,
                runtime_handler=rec.config.runtime_handler,
            )
            if filter is None or filter.matches(sb):
                result.append(sb)
        result.sort(key=lambda s: (s.created_at, s.id))
        return result
