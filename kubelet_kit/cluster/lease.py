"""The node's Lease in ``kube-node-lease`` (the kubelet's ``pkg/kubelet/nodelease``
with client-go's lease controller).

The Lease is the node's heartbeat: the node lifecycle controller marks a node
unreachable when its Lease is not renewed within ``leaseDurationSeconds``. The
kubelet renews it every quarter of the duration (40 s -> every 10 s).
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Callable
from typing import Any, Final

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.config.apiserver import RAW_REQUEST, api_json

__all__ = ["LEASE_NAMESPACE", "LeaseController", "micro_time"]

log = logging.getLogger(__name__)

#: Where node leases live.
LEASE_NAMESPACE: Final = "kube-node-lease"
#: client-go's maxUpdateRetries: attempts at one renewal before waiting a period.
MAX_UPDATE_RETRIES: Final = 5
#: The kubelet's renewIntervalFraction.
RENEW_INTERVAL_FRACTION: Final = 0.25

_TRANSPORT_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)


def micro_time(epoch: float) -> str:
    """``metav1.MicroTime`` text (RFC 3339 with microseconds)."""
    return _dt.datetime.fromtimestamp(epoch, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseController:
    """Creates and renews this node's Lease.

    Args:
        api_client: A ``kubernetes_asyncio`` ApiClient.
        node_name: The Lease's name and holder identity.
        clock: Renewal schedule and renew times.
        lease_duration: ``leaseDurationSeconds`` (the kubelet's nodeLeaseDurationSeconds).
        node_uid: Returns the Node's uid once known, for the owner reference that
            lets the garbage collector remove the Lease with its Node.

    Attributes:
        renewals: How many renewals (and creations) the server accepted.
        last_renew: Clock time of the last accepted renewal, or None.
        longest_gap: The longest time between two accepted renewals (seconds).
        late_renewals: Renewals accepted more than half an interval later than
            due (the gap since the previous one over 1.5 renewal intervals).
    """

    def __init__(
        self,
        api_client: Any,
        node_name: str,
        *,
        clock: Clock | None = None,
        lease_duration: int = 40,
        node_uid: Callable[[], str | None] | None = None,
    ) -> None:
        self.api: Any = k8s.CoordinationV1Api(api_client)
        self.node_name = node_name
        self.clock = clock or RealClock()
        self.lease_duration = lease_duration
        self._node_uid = node_uid or (lambda: None)
        self._latest: Any = None
        self.renewals = 0
        self.last_renew: float | None = None
        self.longest_gap = 0.0
        self.late_renewals = 0

    @property
    def renew_interval(self) -> float:
        """Seconds between renewals (a quarter of the lease duration)."""
        return self.lease_duration * RENEW_INTERVAL_FRACTION

    def _body(self, base: dict[str, Any] | None) -> dict[str, Any]:
        lease = dict(base or {})
        md = dict(lease.get("metadata") or {})
        md.update(name=self.node_name, namespace=LEASE_NAMESPACE)
        uid = self._node_uid()
        if uid and not md.get("ownerReferences"):
            md["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": uid}
            ]
        spec = dict(lease.get("spec") or {})
        spec.update(
            holderIdentity=self.node_name,
            leaseDurationSeconds=self.lease_duration,
            renewTime=micro_time(self.clock.now()),
        )
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": md,
            "spec": spec,
        }

    async def _read(self) -> dict[str, Any] | None:
        return dict(
            await api_json(
                self.api.read_namespaced_lease(self.node_name, LEASE_NAMESPACE, **RAW_REQUEST)
            )
        )

    async def _ensure(self) -> None:
        """Read the Lease, creating it if missing."""
        try:
            self._latest = await self._read()
            return
        except ApiException as exc:
            if exc.status != 404:
                raise
        self._latest = dict(
            await api_json(
                self.api.create_namespaced_lease(LEASE_NAMESPACE, self._body(None), **RAW_REQUEST)
            )
        )
        self._accepted()

    def _accepted(self) -> None:
        now = self.clock.now()
        if self.last_renew is not None:
            gap = now - self.last_renew
            self.longest_gap = max(self.longest_gap, gap)
            if gap > 1.5 * self.renew_interval:
                self.late_renewals += 1
        self.renewals += 1
        self.last_renew = now

    async def renew(self) -> bool:
        """Renew once, re-reading the Lease after a conflict, up to five attempts.

        Returns:
            True when the server accepted a renewal (or a creation). Never raises for
            API or transport errors: they are logged, and the next period tries again.
        """
        for attempt in range(MAX_UPDATE_RETRIES):
            try:
                if self._latest is None:
                    renewals = self.renewals
                    await self._ensure()
                    if self.renewals > renewals:
                        return True  # just created, with a fresh renewTime
                self._latest = dict(
                    await api_json(
                        self.api.replace_namespaced_lease(
                            self.node_name, LEASE_NAMESPACE, self._body(self._latest), **RAW_REQUEST
                        )
                    )
                )
                self._accepted()
                return True
            except ApiException as exc:
                # 409: someone else wrote it (or our copy is stale): read it again.
                # 404: it was deleted: create it again.
                log.warning(
                    "node lease %s: renewal attempt %d failed: %s %s",
                    self.node_name,
                    attempt + 1,
                    exc.status,
                    exc.reason,
                )
                self._latest = None
            except _TRANSPORT_ERRORS as exc:
                log.warning(
                    "node lease %s: API server unreachable: %s",
                    self.node_name,
                    exc or type(exc).__name__,
                )
                return False
        return False

    async def run(self) -> None:
        """Renew every :attr:`renew_interval` seconds until cancelled."""
        while True:
            try:
                await self.renew()
            except Exception:
                log.exception("node lease %s: renewal failed", self.node_name)
            await self.clock.sleep(self.renew_interval)
