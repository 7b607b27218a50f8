"""Registering the Node and keeping its status current (the kubelet's
``kubelet_node_status.go``).

Registration creates the Node with its labels, taints and first status; a Node
that already exists is adopted: its default labels are brought up to date. The
status is rebuilt every ``node_status_update_frequency`` seconds (10 s) and sent
when it changed or ``node_status_report_frequency`` (5 min) has passed since the
last report; the Lease carries the heartbeat in between. A write refused with 409
Conflict is retried after reading the Node again, up to five times.
"""

from __future__ import annotations

import copy
import logging
import platform
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.config.apiserver import RAW_REQUEST, api_json

__all__ = ["NODE_STATUS_UPDATE_RETRY", "NodeController", "default_labels", "status_changed"]

log = logging.getLogger(__name__)

#: The kubelet's nodeStatusUpdateRetry.
NODE_STATUS_UPDATE_RETRY: Final = 5
#: registerWithAPIServer's back-off: 100 ms doubling, at most 7 s.
REGISTER_INITIAL_DELAY: Final = 0.1
REGISTER_MAX_DELAY: Final = 7.0

_GOARCH: Final = {
    "x86_64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm",
    "i686": "386",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
}
_TRANSPORT_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)


def default_labels(node_name: str) -> dict[str, str]:
    """The labels the kubelet sets on its Node: ``kubernetes.io/hostname``, and the
    OS and architecture (Go's names) under both the stable and the ``beta.`` keys."""
    machine = platform.machine()
    os_name = platform.system().lower()
    arch = _GOARCH.get(machine, machine)
    return {
        "kubernetes.io/hostname": node_name,
        "kubernetes.io/os": os_name,
        "kubernetes.io/arch": arch,
        "beta.kubernetes.io/os": os_name,
        "beta.kubernetes.io/arch": arch,
    }


def _without_heartbeats(status: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(status))
    for cond in out.get("conditions") or ():
        cond.pop("lastHeartbeatTime", None)
    return out


def status_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether a node status differs in more than its heartbeat times (the
    kubelet's test for sending a status before the report frequency is due)."""
    return old is None or _without_heartbeats(old) != _without_heartbeats(new)


class NodeController:
    """Registers this node and reports its status.

    Args:
        api_client: A ``kubernetes_asyncio`` ApiClient.
        node_name: The Node's name.
        status: Returns the current v1 NodeStatus as a dict, e.g.
            ``(await NodeStatusProvider(kubelet).status()).to_dict()``.
        clock: Update schedule.
        labels: Labels besides :func:`default_labels` (the kubelet's nodeLabels).
        taints: Taints to register with (registerWithTaints), v1 Taint dicts.
        node_status_update_frequency: Seconds between status builds.
        node_status_report_frequency: Longest time between sends of an unchanged
            status.

    Attributes:
        node: The Node as last read or written (a dict), or None before registration.
        reports: How many status writes the server accepted.
    """

    def __init__(
        self,
        api_client: Any,
        node_name: str,
        status: Callable[[], Awaitable[Mapping[str, Any]]],
        *,
        clock: Clock | None = None,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, Any]] = (),
        node_status_update_frequency: float = 10.0,
        node_status_report_frequency: float = 300.0,
    ) -> None:
        self.core: Any = k8s.CoreV1Api(api_client)
        self.node_name = node_name
        self._status = status
        self.clock = clock or RealClock()
        self.default_labels = default_labels(node_name)
        self.labels = {**self.default_labels, **dict(labels or {})}
        self.taints = [dict(t) for t in taints]
        self.update_frequency = node_status_update_frequency
        self.report_frequency = node_status_report_frequency
        self.node: dict[str, Any] | None = None
        self.reports = 0
        self._last_sent: Mapping[str, Any] | None = None
        self._last_report: float | None = None

    @property
    def node_uid(self) -> str | None:
        """The registered Node's uid, once known."""
        return (self.node or {}).get("metadata", {}).get("uid") if self.node else None

    @property
    def registered(self) -> bool:
        """Whether the Node has been registered (or adopted)."""
        return self.node is not None

    async def _json(self, call: Awaitable[Any]) -> dict[str, Any]:
        return dict(await api_json(call))

    def _new_node(self, status: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.node_name,
                "labels": dict(self.labels),
                "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
            },
            "spec": {"taints": list(self.taints)} if self.taints else {},
            "status": dict(status),
        }

    async def register(self) -> bool:
        """Create the Node, or adopt an existing one (updating its default labels,
        not the extra ones, as the kubelet does).

        Returns:
            True once registered. Never raises for API or transport errors (logged);
            the caller tries again.
        """
        try:
            status = await self._status()
            try:
                self.node = await self._json(
                    self.core.create_node(self._new_node(status), **RAW_REQUEST)
                )
                log.info("node %s: registered", self.node_name)
                return True
            except ApiException as exc:
                if exc.status != 409:
                    raise
            for _ in range(NODE_STATUS_UPDATE_RETRY):
                existing = await self._json(self.core.read_node(self.node_name, **RAW_REQUEST))
                labels = dict(existing["metadata"].get("labels") or {})
                # As the kubelet: only the default labels are reconciled; extra
                # labels apply at registration alone.
                if all(labels.get(k) == v for k, v in self.default_labels.items()):
                    self.node = existing
                    break
                labels.update(self.default_labels)
                existing["metadata"]["labels"] = labels
                try:
                    self.node = await self._json(
                        self.core.replace_node(self.node_name, existing, **RAW_REQUEST)
                    )
                    break
                except ApiException as exc:
                    if exc.status != 409:
                        raise
            else:
                return False
            log.info("node %s: already registered, adopted", self.node_name)
            return True
        except ApiException as exc:
            log.warning(
                "node %s: registration failed: %s %s", self.node_name, exc.status, exc.reason
            )
        except _TRANSPORT_ERRORS as exc:
            log.warning(
                "node %s: registration failed: API server unreachable: %s",
                self.node_name,
                exc or type(exc).__name__,
            )
        return False

    async def update_status(self, *, force: bool = False) -> bool:
        """Build the status and send it if it changed, the report is due, or ``force``.

        The patch names the Node's resourceVersion, so a Node changed meanwhile
        answers 409 Conflict; the Node is then read again and the patch retried
        (five attempts in all).

        Returns:
            True when the server holds the current status (sent now, or nothing
            needed sending). Never raises for API or transport errors.
        """
        status = await self._status()
        now = self.clock.monotonic()
        due = self._last_report is None or now - self._last_report >= self.report_frequency
        if not (force or due or status_changed(self._last_sent, status)):
            return True
        for attempt in range(NODE_STATUS_UPDATE_RETRY):
            try:
                if self.node is None or attempt > 0:
                    self.node = await self._json(self.core.read_node(self.node_name, **RAW_REQUEST))
                patch = {
                    "metadata": {"resourceVersion": self.node["metadata"]["resourceVersion"]},
                    "status": dict(status),
                }
                self.node = await self._json(
                    self.core.patch_node_status(self.node_name, patch, **RAW_REQUEST)
                )
            except ApiException as exc:
                log.warning(
                    "node %s: status update attempt %d failed: %s %s",
                    self.node_name,
                    attempt + 1,
                    exc.status,
                    exc.reason,
                )
                if exc.status == 404:
                    self.node = None  # deleted: the run loop registers it again
                    return False
                continue
            except _TRANSPORT_ERRORS as exc:
                log.warning(
                    "node %s: status update failed: API server unreachable: %s",
                    self.node_name,
                    exc or type(exc).__name__,
                )
                return False
            self._last_sent = copy.deepcopy(dict(status))
            self._last_report = now
            self.reports += 1
            return True
        return False

    async def run(self) -> None:
        """Register, retrying after 100 ms doubling to 7 s as the kubelet does; then
        update the status every period, registering again if the Node was deleted.
        Runs until cancelled."""
        while True:
            step = REGISTER_INITIAL_DELAY
            while self.node is None:
                try:
                    if await self.register():
                        self._last_sent = None
                        break
                except Exception:
                    log.exception("node %s: registration failed", self.node_name)
                await self.clock.sleep(step)
                step = min(step * 2, REGISTER_MAX_DELAY)
            await self.clock.sleep(self.update_frequency)
            try:
                await self.update_status()
            except Exception:
                log.exception("node %s: status update failed", self.node_name)
