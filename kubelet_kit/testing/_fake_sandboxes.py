"""The pod sandboxes of the fake runtime.

The part of :class:`~kubelet_kit.testing.FakeRuntime` implementing the CRI's
sandbox calls: running a sandbox (one per name, namespace, uid and attempt),
stopping it (which kills its containers), removing it with its containers, its
status, and listing sandboxes through the pod uid index.
"""

from __future__ import annotations

from kubelet_kit.container.interfaces import (
    ContainerEventType,
    PodSandbox,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxState,
    PodSandboxStatus,
)
from kubelet_kit.errors import AlreadyExistsError, UnimplementedError
from kubelet_kit.testing._fake_process import _ProcessPart
from kubelet_kit.testing._fake_records import _ALIVE, EXIT_SIGKILL, POD_UID_LABEL, _Sandbox


class _SandboxPart(_ProcessPart):
    """``run_pod_sandbox``, ``stop_pod_sandbox``, ``remove_pod_sandbox``, their
    status and list."""

    # =========================================================== Runtime: sandboxes

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> str:
        """Create a READY sandbox. Not idempotent.

        Raises:
            AlreadyExistsError: a duplicate name/namespace/uid/attempt.
            UnimplementedError: a port mapping asks for a host port and the fake
                was made with ``host_ports="decline"`` (it has no host network to
                publish it on).
        """
        await self._enter("run_pod_sandbox", (config,))
        if self.host_ports == "decline":
            published = [p for p in config.port_mappings if p.host_port]
            if published:
                raise UnimplementedError(
                    f"port_mappings: host_port {published[0].host_port}: the fake runtime "
                    "publishes no ports on the host"
                )
        md = config.metadata
        taken = self._sandbox_by_metadata.get(md)
        if taken is not None:
            raise AlreadyExistsError(
                f"run_pod_sandbox: sandbox name {_sandbox_name(config)!r} is reserved for {taken}"
            )
        sid = self._new_id("sandbox")
        ip = "" if config.namespace_options.host_network else f"10.88.{next(self._ips)}.1"
        self._sandboxes[sid] = _Sandbox(sid, config, PodSandboxState.READY, self.clock.now(), ip)
        self._sandbox_by_metadata[md] = sid
        self._containers_by_sandbox[sid] = {}
        self._sandboxes_by_pod.setdefault(config.labels.get(POD_UID_LABEL, ""), {})[sid] = None
        self._emit(sid, ContainerEventType.CREATED, sid)
        self._emit(sid, ContainerEventType.STARTED, sid)
        return sid

    async def stop_pod_sandbox(self, pod_sandbox_id: str) -> None:
        """Kill every running container in the sandbox and mark it NOTREADY.
        Idempotent; NotFoundError for an unknown id."""
        await self._enter("stop_pod_sandbox", (pod_sandbox_id,))
        sb = self._sandbox(pod_sandbox_id)
        self._stop_sandbox(sb)

    async def remove_pod_sandbox(self, pod_sandbox_id: str) -> None:
        """Stop the sandbox, remove it and its containers. Idempotent (unknown id
        succeeds)."""
        await self._enter("remove_pod_sandbox", (pod_sandbox_id,))
        sb = self._sandboxes.get(pod_sandbox_id)
        if sb is None:
            return
        self._stop_sandbox(sb)
        for c in list(self._containers_by_sandbox.get(sb.id, {}).values()):
            self._remove_container(c)
        del self._sandboxes[sb.id]
        self._sandbox_by_metadata.pop(sb.config.metadata, None)
        self._containers_by_sandbox.pop(sb.id, None)
        self._sandboxes_by_pod.get(sb.config.labels.get(POD_UID_LABEL, ""), {}).pop(sb.id, None)
        self._emit(sb.id, ContainerEventType.DELETED, sb.id, sandbox_status=self._sb_status(sb))

    async def pod_sandbox_status(self, pod_sandbox_id: str) -> PodSandboxStatus:
        """Status of one sandbox. Raises NotFoundError for an unknown id."""
        await self._enter("pod_sandbox_status", (pod_sandbox_id,))
        return self._sb_status(self._sandbox(pod_sandbox_id))

    async def list_pod_sandboxes(self, filter: PodSandboxFilter | None = None) -> list[PodSandbox]:
        """Every sandbox matching ``filter``, oldest first."""
        await self._enter("list_pod_sandboxes", (filter,))
        out = []
        for sb in self._candidates(self._sandboxes, self._sandboxes_by_pod, filter):
            if sb.listed is not None and sb.listed.state is sb.state:
                if filter is None or filter.matches(sb.listed):
                    out.append(sb.listed)
                continue
            item = sb.listed = PodSandbox(
                id=sb.id,
                metadata=sb.config.metadata,
                state=sb.state,
                created_at=sb.created_at,
                labels=sb.config.labels,
                annotations=sb.config.annotations,
                runtime_handler=sb.config.runtime_handler,
            )
            if filter is None or filter.matches(item):
                out.append(item)
        return out

    def _stop_sandbox(self, sb: _Sandbox) -> None:
        for c in list(self._containers_by_sandbox.get(sb.id, {}).values()):
            if c.state in _ALIVE:
                self._finish(c, EXIT_SIGKILL)
        if sb.state != PodSandboxState.NOTREADY:
            sb.state = PodSandboxState.NOTREADY
            self._emit(sb.id, ContainerEventType.STOPPED, sb.id)


def _sandbox_name(config: PodSandboxConfig) -> str:
    md = config.metadata
    return f"{md.name}_{md.namespace}_{md.uid}_{md.attempt}"
