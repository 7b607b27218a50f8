"""Pod status to the API server (the kubelet's ``status_manager.go`` sync side).

Each status the agent's StatusManager records is patched to the pod's
``status`` subresource, with the kubelet's rules for what a node may write
(:func:`node_status_patch`), and re-sent every ``resync_period`` seconds until
the server took it: losing the API server for a while loses nothing. A static
pod's status goes to its mirror pod, and is sent again when the mirror pod is made
again under a new uid (its status starts over as Pending). A pod being deleted
gracefully is deleted for good, with a zero grace period and its uid as a
precondition, once its containers have stopped; mirror pods are never deleted
here (the mirror pod sync replaces them), and a static pod is never finished
because of its mirror.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from kubelet_kit.api import Pod, PodStatus
from kubelet_kit.api.status import DISRUPTION_TARGET
from kubelet_kit.clock import Clock
from kubelet_kit.config.apiserver import RAW_REQUEST, api_json
from kubelet_kit.config.interfaces import CONFIG_SOURCE_ANNOTATION

if TYPE_CHECKING:
    from kubelet_kit.node.kubelet import KubeletCore as Kubelet

__all__ = ["KUBELET_POD_CONDITIONS", "PodStatusSync", "node_status_patch"]

log = logging.getLogger(__name__)

#: Pod condition types the kubelet owns (``kubetypes.PodConditionsByKubelet``, with
#: PodReadyToStartContainers, on by default). Other types belong to other writers
#: (readiness gates, controllers) and are never written here.
KUBELET_POD_CONDITIONS: Final = frozenset(
    {
        "PodScheduled",
        "Ready",
        "Initialized",
        "ContainersReady",
        "PodResizeInProgress",
        "PodResizePending",
        "PodReadyToStartContainers",
    }
)
#: Shared with controllers: written only on the pod's move to a terminal phase.
SHARED_POD_CONDITIONS: Final = frozenset({DISRUPTION_TARGET})
_TERMINAL: Final = ("Succeeded", "Failed")
_TERMINAL_READY_REASON: Final = {"Succeeded": "PodCompleted", "Failed": "PodFailed"}
_TRANSPORT_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)


def node_status_patch(
    uid: str,
    api_status: Mapping[str, Any],
    new_status: Mapping[str, Any],
    *,
    containers_stopped: bool,
) -> dict[str, Any]:
    """The strategic merge patch a node sends for a pod's status (the kubelet's
    ``mergePodStatus``).

    * Only the kubelet's condition types are written; the others on the server
      stay as they are (conditions merge by type). DisruptionTarget is written
      only with the move to a terminal phase, once the containers have stopped.
    * A move to a terminal phase waits until no container may still run: until
      then the server's phase, reason and message are kept.
    * With a terminal phase, Ready and ContainersReady are written False (reason
      PodCompleted or PodFailed) if either was True.
    * ``resourceClaimStatuses`` are not the node's: never written.
    * ``metadata.uid`` makes the patch fail with 409 if the name now belongs to
      another pod.

    Args:
        uid: The pod's uid on the server.
        api_status: The status the server holds (camelCase dict).
        new_status: The agent's status (camelCase dict).
        containers_stopped: Whether no container of the pod may still run.

    Returns:
        ``{"metadata": {"uid": uid}, "status": {...}}``.
    """
    status = {
        k: v for k, v in new_status.items() if k not in ("conditions", "resourceClaimStatuses")
    }
    to_terminal = api_status.get("phase") not in _TERMINAL and new_status.get("phase") in _TERMINAL
    conditions: list[dict[str, Any]] = []
    for cond in new_status.get("conditions") or ():
        kind = cond.get("type")
        if kind in KUBELET_POD_CONDITIONS or (
            kind in SHARED_POD_CONDITIONS and to_terminal and containers_stopped
        ):
            conditions.append(dict(cond))
    if to_terminal and not containers_stopped:
        for key in ("phase", "reason", "message"):
            if api_status.get(key):
                status[key] = api_status[key]
            else:
                status.pop(key, None)
    phase = status.get("phase")
    if phase in _TERMINAL and any(
        c.get("type") in ("Ready", "ContainersReady") and c.get("status") == "True"
        for c in conditions
    ):
        for cond in conditions:
            if cond.get("type") in ("Ready", "ContainersReady"):
                cond.update(status="False", reason=_TERMINAL_READY_REASON[phase])
                cond.pop("message", None)
    status["conditions"] = conditions
    for key in ("podIPs", "hostIPs"):
        _replace_ips(status, key, api_status.get(key) or (), new_status.get(key) or ())
    return {"metadata": {"uid": uid}, "status": status}


def _replace_ips(
    status: dict[str, Any],
    key: str,
    old: Sequence[Mapping[str, Any]],
    new: Sequence[Mapping[str, Any]],
) -> None:
    """Make the patch replace the IP list ``key`` rather than add to it.

    ``podIPs`` and ``hostIPs`` merge by ``ip`` in a strategic merge patch, so a
    pod whose sandbox was made again (a new IP) would otherwise hold both, which
    the API server refuses ("may specify no more than one IP for each IP
    family"). As the kubelet's two-way patch does, each IP the server holds that
    the new status lacks gets a delete directive, and the order is set.
    """
    keep = [str(e.get("ip")) for e in new]
    removed = [str(e.get("ip")) for e in old if str(e.get("ip")) not in keep]
    if not removed:
        return
    status[key] = [*(dict(e) for e in new), *({"$patch": "delete", "ip": ip} for ip in removed)]
    status[f"$setElementOrder/{key}"] = [{"ip": ip} for ip in keep]


def _server_message(exc: ApiException) -> str:
    """The message of the Status the server answered with (what it refused and why)."""
    try:
        return str(json.loads(exc.body or "{}").get("message") or "")
    except (ValueError, AttributeError):
        return str(exc.body or "")[:500]


class PodStatusSync:
    """Sends the agent's pod statuses to the API server.

    Args:
        api_client: A ``kubernetes_asyncio`` ApiClient.
        kubelet: The agent (its ``subscribe()``, ``pods()``, ``active_pods()`` and
            ``pod_status()``).
        clock: Resync schedule.
        resync_period: Seconds between retries of statuses not yet accepted (the
            kubelet's status manager syncs every 10 s).
        mirror_of: Returns the mirror pod's uid for a static pod, or None.

    Attributes:
        sent: Pod uid -> the last status the server accepted (as sent).
        final_deletes: Uids deleted for good (zero grace, uid precondition).
    """

    def __init__(
        self,
        api_client: Any,
        kubelet: Kubelet,
        *,
        clock: Clock | None = None,
        resync_period: float = 10.0,
        mirror_of: Callable[[Pod], str | None] | None = None,
    ) -> None:
        self.core: Any = k8s.CoreV1Api(api_client)
        self.kubelet = kubelet
        self.clock = clock or kubelet.clock
        self.resync_period = resync_period
        self._mirror_of = mirror_of
        self._pending: dict[str, tuple[Pod, PodStatus]] = {}
        self._wake = asyncio.Event()
        self.sent: dict[str, Mapping[str, Any]] = {}
        self.final_deletes: set[str] = set()
        # Pod uid -> the server uid its last status went to (accepted, or refused as
        # gone): a static pod whose mirror now has another uid is sent again.
        self._sent_to: dict[str, str] = {}

    def _target(self, pod: Pod) -> str | bool:
        """The uid on the server that carries ``pod``'s status; True when the pod
        has no place there (nothing to send); False when its mirror pod is not
        made yet (send later)."""
        source = pod.metadata.annotations.get(CONFIG_SOURCE_ANNOTATION)
        if source == "api":
            return pod.uid
        if self._mirror_of is None:
            return True
        return self._mirror_of(pod) or False

    def _current(self, uid: str) -> Pod | None:
        return next((p for p in self.kubelet.pods() if p.uid == uid), None)

    def _stopped(self, uid: str) -> bool:
        return all(p.uid != uid for p in self.kubelet.active_pods())

    async def sync_one(self, pod: Pod, status: PodStatus) -> bool:
        """Patch one pod's status now.

        Returns:
            True when done with it (accepted, or the pod is gone from the server);
            False to try again later.
        """
        pod = self._current(pod.uid) or pod
        target = self._target(pod)
        if isinstance(target, bool):
            return target
        body = node_status_patch(
            target,
            pod.status.to_dict() if target == pod.uid else {},
            status.to_dict(),
            containers_stopped=self._stopped(pod.uid),
        )
        try:
            await api_json(
                self.core.patch_namespaced_pod_status(pod.name, pod.namespace, body, **RAW_REQUEST)
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                # Gone, or the name belongs to another pod now: nothing to report to
                # (a static pod's new mirror gets the status once it is known).
                log.info(
                    "pod %s/%s: status not written: %s %s",
                    pod.namespace,
                    pod.name,
                    exc.status,
                    exc.reason,
                )
                self._sent_to[pod.uid] = target
                return True
            log.warning(
                "pod %s/%s: status update failed: %s %s: %s",
                pod.namespace,
                pod.name,
                exc.status,
                exc.reason,
                _server_message(exc),
            )
            return False
        self.sent[pod.uid] = body["status"]
        self._sent_to[pod.uid] = target
        return True

    def _requeue_new_mirrors(self) -> None:
        """Queue the current status of each static pod whose mirror pod is not the
        one its status last went to (the kubelet's status manager reconciles a
        mirror pod's status with the static pod's on every resync)."""
        for pod in self.kubelet.pods():
            if pod.uid in self._pending or pod.metadata.annotations.get(
                CONFIG_SOURCE_ANNOTATION
            ) in (None, "api"):
                continue
            target = self._target(pod)
            if isinstance(target, bool) or self._sent_to.get(pod.uid) == target:
                continue
            status = self.kubelet.pod_status(pod.uid)
            if status is not None:
                self._pending[pod.uid] = (pod, status)

    async def delete_finished(self) -> None:
        """Delete for good (grace 0, uid precondition) every API pod being deleted
        whose containers stopped and whose latest status was sent."""
        for pod in self.kubelet.pods():
            if (
                pod.metadata.deletion_timestamp is None
                or pod.uid in self.final_deletes
                or pod.metadata.annotations.get(CONFIG_SOURCE_ANNOTATION) != "api"
                or pod.uid in self._pending
                or not self._stopped(pod.uid)
            ):
                continue
            options = {"gracePeriodSeconds": 0, "preconditions": {"uid": pod.uid}}
            try:
                await api_json(
                    self.core.delete_namespaced_pod(
                        pod.name, pod.namespace, body=options, **RAW_REQUEST
                    )
                )
            except ApiException as exc:
                if exc.status not in (404, 409):
                    log.warning(
                        "pod %s/%s: final delete failed: %s %s",
                        pod.namespace,
                        pod.name,
                        exc.status,
                        exc.reason,
                    )
                    continue
            log.info("pod %s/%s: deleted from the API server", pod.namespace, pod.name)
            self.final_deletes.add(pod.uid)

    async def flush(self) -> None:
        """Send every pending status; keep those that could not be sent."""
        self._requeue_new_mirrors()
        for uid, (pod, status) in list(self._pending.items()):
            try:
                done = await self.sync_one(pod, status)
            except _TRANSPORT_ERRORS as exc:
                log.warning("pod statuses: API server unreachable: %s", exc or type(exc).__name__)
                return
            if done and self._pending.get(uid) == (pod, status):
                del self._pending[uid]
        with contextlib.suppress(*_TRANSPORT_ERRORS):
            await self.delete_finished()
        # Forget pods the agent no longer has (bounded memory on a long-lived node).
        known = {p.uid for p in self.kubelet.pods()} | set(self._pending)
        for uid in [u for u in self.sent if u not in known]:
            del self.sent[uid]
        for uid in [u for u in self._sent_to if u not in known]:
            del self._sent_to[uid]
        self.final_deletes &= known

    async def _collect(self) -> None:
        async for pod, status in self.kubelet.subscribe():
            self._pending[pod.uid] = (pod, status)
            self._wake.set()

    async def _tick(self) -> None:
        while True:
            await self.clock.sleep(self.resync_period)
            self._wake.set()

    async def run(self) -> None:
        """Send statuses as they change, and retry every period. Runs until
        cancelled."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._collect(), name="pod-status-collect")
            tg.create_task(self._tick(), name="pod-status-resync")
            while True:
                await self._wake.wait()
                self._wake.clear()
                try:
                    await self.flush()
                except Exception:
                    log.exception("pod statuses: sync failed")
