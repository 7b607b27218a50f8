"""The shared state of :class:`~kubelet_kit.testing.FakeRuntime`'s parts.

:class:`FakeRuntime` is composed of one mixin per part of the CRI; each derives
from :class:`_FakeRuntimeBase`, which declares every attribute they share (set by
``FakeRuntime.__init__``) and holds the few internals all of them use: the call
pipeline every method enters (record, unavailability, latency, faults), the
lookups of sandboxes and containers by id, the CRI status builders and the
emission of container events.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from kubelet_kit.clock import Clock
from kubelet_kit.container.interfaces import (
    ContainerEvent,
    ContainerEventType,
    ContainerFilter,
    ContainerInfo,
    ContainerStatus,
    ExecResult,
    Image,
    PodSandboxFilter,
    PodSandboxMetadata,
    PodSandboxStatus,
    RuntimeCondition,
)
from kubelet_kit.container.streams import TerminalSize
from kubelet_kit.errors import NotFoundError, RuntimeUnavailableError
from kubelet_kit.testing._fake_records import (
    _PARAMS,
    POD_UID_LABEL,
    AttachHandler,
    Call,
    ExecStreamHandler,
    LogLine,
    PortForwardHandler,
    _Container,
    _Fault,
    _normalized,
    _Sandbox,
    _ScriptRule,
    _take,
)

if TYPE_CHECKING:
    from kubelet_kit.testing.fake_runtime import _EventStream

_R = TypeVar("_R", "_Sandbox", "_Container")


class _FakeRuntimeBase:
    """State and common internals of every part of :class:`FakeRuntime`."""

    clock: Clock
    calls: list[Call]
    dropped_events: int
    pull_latency: float
    image_fs: str | None
    _default_latency: float
    _latency: dict[str, float]
    _events_enabled: bool
    _streams: weakref.WeakSet[_EventStream]
    _faults: list[_Fault]
    _delays: list[_Fault]
    _unavailable: bool
    _conditions: dict[str, RuntimeCondition]
    _sandboxes: dict[str, _Sandbox]
    _containers: dict[str, _Container]
    _sandbox_by_metadata: dict[PodSandboxMetadata, str]
    _containers_by_sandbox: dict[str, dict[str, _Container]]
    _sandboxes_by_pod: dict[str, dict[str, None]]
    _containers_by_pod: dict[str, dict[str, None]]
    _logs: dict[str, list[LogLine]]
    _ids: itertools.count[int]
    _ips: itertools.count[int]
    _registry: dict[str, Image]
    _image_by_id: dict[str, Image | None]
    _call_history: int | None
    pull_any: bool
    host_ports: str
    _present: set[str]
    _pull_failures: dict[str, BaseException]
    _private: dict[str, set[tuple[str, str]]]
    _scripts: list[_ScriptRule]
    _ignore_term: set[str]
    _exec_handler: Callable[[str, Sequence[str]], ExecResult | Awaitable[ExecResult] | None] | None
    _exec_stream_handler: ExecStreamHandler | None
    _attach_handler: AttachHandler | None
    _port_forward_handler: PortForwardHandler | None
    _attached: dict[str, list[asyncio.Queue[tuple[str, str]]]]
    _sizes: dict[str, list[TerminalSize]]
    _stdin_closed: set[str]

    def latency_of(self, method: str) -> float:
        """The latency currently applied to ``method``."""
        return self._latency.get(method, self._default_latency)

    @staticmethod
    def _candidates(
        records: Mapping[str, _R],
        by_pod: Mapping[str, Mapping[str, None]],
        filter: ContainerFilter | PodSandboxFilter | None,
    ) -> list[_R]:
        """The records a filter can match, oldest first: only the pod's own when the
        filter selects by the pod uid label (what the kubelet's lists do), and the
        one record when it selects by id."""
        if filter is not None and filter.id is not None:
            record = records.get(filter.id)
            return [record] if record is not None else []
        uid = filter.label_selector.get(POD_UID_LABEL) if filter is not None else None
        if uid is None:
            return list(records.values())
        # The index is insertion-ordered, as the records are: still oldest first.
        return [records[i] for i in by_pod.get(uid, {}) if i in records]

    async def _enter(self, method: str, args: tuple[Any, ...]) -> None:
        """Record a call, apply unavailability, latency and injected faults."""
        # Every call of the runtime passes here: it is kept to the few steps each
        # call needs, skipping the fault lists while they are empty.
        names = _PARAMS[method]
        if len(args) == 1 and len(names) == 1:
            kwargs = {names[0]: args[0]}  # the usual case, cheaper than zip()
        elif not args and not names:
            kwargs = {}  # version(), status(), list_images()...: no zip() either
        else:
            kwargs = dict(zip(names, args, strict=True))
        calls = self.calls
        calls.append(Call(method, args, kwargs))
        keep = self._call_history
        if keep is not None and len(calls) >= 2 * keep + 1:
            # Dropped in halves, so recording stays O(1) amortised.
            del calls[: len(calls) - keep]
        if self._unavailable:
            raise RuntimeUnavailableError(f"{method}: the runtime is unavailable")
        # What latency_of(method) says, without the method call.
        delay = self._latency.get(method, self._default_latency)
        if self._delays:
            extra = _take(self._delays, method, args)
            if extra is not None:
                delay += extra.seconds
        if delay > 0:
            await self.clock.sleep(delay)
            if self._unavailable:
                raise RuntimeUnavailableError(f"{method}: the runtime is unavailable")
        if self._faults:
            fault = _take(self._faults, method, args)
            if fault is not None:
                raise fault.exc.with_traceback(None)

    def _new_id(self, kind: str) -> str:
        return hashlib.sha256(f"{kind}-{next(self._ids)}".encode()).hexdigest()

    def _sandbox(self, sandbox_id: str) -> _Sandbox:
        sb = self._sandboxes.get(sandbox_id)
        if sb is None:
            raise NotFoundError(f"pod sandbox {sandbox_id!r} not found")
        return sb

    def _container(self, container_id: str) -> _Container:
        c = self._containers.get(container_id)
        if c is None:
            raise NotFoundError(f"container {container_id!r} not found")
        return c

    def _registry_image(self, ref: str) -> Image | None:
        """The registry's image that ``ref`` names, by reference or by id."""
        if ref.startswith("sha256:"):
            # The scan's answer is kept until the registry changes (add_image
            # clears it), as containers are made again and again by image id.
            try:
                return self._image_by_id[ref]
            except KeyError:
                found = next((i for i in self._registry.values() if i.id == ref), None)
                self._image_by_id[ref] = found
                return found
        return self._registry.get(_normalized(ref))

    def _sb_status(self, sb: _Sandbox) -> PodSandboxStatus:
        # A sandbox's state is the only part of its status that changes: the status
        # last built (a frozen value) is given again while the state is the same.
        status = sb.status
        if status is not None and status.state is sb.state:
            return status
        status = sb.status = PodSandboxStatus(
            id=sb.id,
            metadata=sb.config.metadata,
            state=sb.state,
            created_at=sb.created_at,
            ip=sb.ip,
            namespace_options=sb.config.namespace_options,
            labels=sb.config.labels,
            annotations=sb.config.annotations,
            runtime_handler=sb.config.runtime_handler,
        )
        return status

    def _c_info(self, c: _Container) -> ContainerInfo:
        """What ``list_containers`` reports for ``c``."""
        return ContainerInfo(
            id=c.id,
            pod_sandbox_id=c.sandbox_id,
            metadata=c.config.metadata,
            image=c.image,
            image_ref=c.image_ref,
            state=c.state,
            created_at=c.created_at,
            labels=c.config.labels,
            annotations=c.config.annotations,
        )

    def _c_status(self, c: _Container) -> ContainerStatus:
        # The status last built (a frozen value) is given again while none of the
        # fields a container's life changes has changed; the rest are fixed at
        # creation.
        status = c.status
        if (
            status is not None
            and status.state is c.state
            and status.started_at == c.started_at
            and status.finished_at == c.finished_at
            and status.exit_code == c.exit_code
            and status.reason == c.reason
            and status.message == c.message
            and status.resources is c.resources
        ):
            return status
        status = c.status = ContainerStatus(
            id=c.id,
            metadata=c.config.metadata,
            state=c.state,
            created_at=c.created_at,
            image=c.image,
            image_ref=c.image_ref,
            started_at=c.started_at,
            finished_at=c.finished_at,
            exit_code=c.exit_code,
            reason=c.reason,
            message=c.message,
            labels=c.config.labels,
            annotations=c.config.annotations,
            mounts=c.config.mounts,
            log_path=c.log_path,
            resources=c.resources,
        )
        return status

    def _emit(
        self,
        container_id: str,
        type: ContainerEventType,
        sandbox_id: str,
        *,
        sandbox_status: PodSandboxStatus | None = None,
    ) -> None:
        """Queue an event, with the sandbox's status and its containers' statuses."""
        if not self._events_enabled or not self._streams:
            return
        sb = self._sandboxes.get(sandbox_id)
        if sandbox_status is None and sb is not None:
            sandbox_status = self._sb_status(sb)
        event = ContainerEvent(
            container_id=container_id,
            type=type,
            created_at=self.clock.now(),
            pod_sandbox_status=sandbox_status,
            containers_statuses=tuple(
                self._c_status(c) for c in self._containers_by_sandbox.get(sandbox_id, {}).values()
            ),
        )
        for stream in list(self._streams):
            if not stream.offer(event) and not stream.closed and stream.error is None:
                self.dropped_events += 1
