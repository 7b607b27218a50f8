"""Mirror pods: the API server's read-only copies of this node's static pods (the
kubelet's ``pkg/kubelet/pod/mirror_client.go``).

For each static pod (from a file or URL source) a pod of the same name and
namespace is created on the API server, annotated ``kubernetes.io/config.mirror``
with the static pod's ``kubernetes.io/config.hash`` and owned by the Node. As the
kubelet's ``syncPod`` does, a mirror that is being deleted (it has a
``deletionTimestamp``) or whose hash no longer matches is deleted for good and
made again in the same sync; a mirror whose static pod is gone is deleted.
Deletes use a zero grace period and the mirror's uid as a precondition.

A user's ``kubectl delete pod <mirror>`` is a graceful delete: the API server
only marks a pod bound to a node and waits for its kubelet to finish it. Nothing
runs a mirror pod, so the kubelet finishes it here; the static pod itself goes on
running (the API server pod source never takes mirror pods).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from kubelet_kit.api import Pod
from kubelet_kit.clock import Clock
from kubelet_kit.config.apiserver import RAW_REQUEST, api_json
from kubelet_kit.config.interfaces import (
    CONFIG_HASH_ANNOTATION,
    CONFIG_MIRROR_ANNOTATION,
    CONFIG_SEEN_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
)

if TYPE_CHECKING:
    from kubelet_kit.node.kubelet import KubeletCore as Kubelet

__all__ = ["MirrorPods", "mirror_pod_object"]

log = logging.getLogger(__name__)

_TRANSPORT_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)


def mirror_pod_object(pod: Pod, *, node_name: str, node_uid: str) -> dict[str, Any]:
    """The mirror pod the kubelet creates for static pod ``pod``."""
    annotations = {k: v for k, v in pod.metadata.annotations.items() if k != CONFIG_SEEN_ANNOTATION}
    annotations[CONFIG_MIRROR_ANNOTATION] = annotations.get(CONFIG_HASH_ANNOTATION, pod.uid)
    spec = pod.spec.to_dict()
    spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "labels": dict(pod.metadata.labels),
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": node_name,
                    "uid": node_uid,
                    "controller": True,
                }
            ],
        },
        "spec": spec,
    }


class MirrorPods:
    """Keeps a mirror pod on the API server for each static pod.

    Args:
        api_client: A ``kubernetes_asyncio`` ApiClient.
        kubelet: The agent (its ``pods()``).
        node_uid: Returns the Node's uid once registered (mirrors wait for it).
        clock: Sync schedule.
        period: Seconds between syncs.
    """

    def __init__(
        self,
        api_client: Any,
        kubelet: Kubelet,
        node_uid: Callable[[], str | None],
        *,
        clock: Clock | None = None,
        period: float = 10.0,
    ) -> None:
        self.core: Any = k8s.CoreV1Api(api_client)
        self.kubelet = kubelet
        self._node_uid = node_uid
        self.clock = clock or kubelet.clock
        self.period = period
        self._mirrors: dict[tuple[str, str], str] = {}

    def mirror_of(self, pod: Pod) -> str | None:
        """The uid of ``pod``'s mirror on the server, if it has one."""
        return self._mirrors.get((pod.namespace, pod.name))

    async def _delete(self, obj: dict[str, Any]) -> bool:
        """Delete mirror pod ``obj`` for good (the kubelet's ``DeleteMirrorPod``).

        Returns:
            True when it was deleted; False when it is gone already, the name now
            belongs to another pod (uid precondition failed), or the server refused
            (logged).

        Raises:
            aiohttp.ClientError, OSError: The server is unreachable.
        """
        md = obj["metadata"]
        try:
            await api_json(
                self.core.delete_namespaced_pod(
                    md["name"],
                    md["namespace"],
                    **RAW_REQUEST,
                    body={"gracePeriodSeconds": 0, "preconditions": {"uid": md["uid"]}},
                )
            )
        except ApiException as exc:
            # Not found and a failed uid precondition are not errors: either way
            # this mirror is no longer on the server.
            if exc.status not in (404, 409):
                log.error(
                    'Failed deleting a mirror pod "%s/%s": %s %s',
                    md["namespace"],
                    md["name"],
                    exc.status,
                    exc.reason,
                )
            return False
        return True

    async def _create(self, pod: Pod, node_name: str, node_uid: str) -> str | None:
        """Create ``pod``'s mirror (the kubelet's ``CreateMirrorPod``).

        Returns:
            The new mirror's uid, or None when none was made (another pod holds the
            name, e.g. a mirror not yet gone: next sync; or the server refused).

        Raises:
            aiohttp.ClientError, OSError: The server is unreachable.
        """
        body = mirror_pod_object(pod, node_name=node_name, node_uid=node_uid)
        try:
            created = await api_json(
                self.core.create_namespaced_pod(pod.namespace, body, **RAW_REQUEST)
            )
        except ApiException as exc:
            if exc.status != 409:
                log.error(
                    'Failed creating a mirror pod for "%s/%s": %s %s',
                    pod.namespace,
                    pod.name,
                    exc.status,
                    exc.reason,
                )
            return None
        log.info('Created a mirror pod for static pod "%s/%s"', pod.namespace, pod.name)
        return str(created["metadata"]["uid"])

    async def sync(self) -> None:
        """Create, replace and delete mirror pods once.

        A server refusing one mirror pod is logged and the others are synced.

        Raises:
            ApiException: The server refused the list (the run loop logs and retries).
            aiohttp.ClientError, OSError: The server is unreachable (likewise).
        """
        node_uid = self._node_uid()
        if not node_uid:
            return
        node_name = self.kubelet.node_name
        listing = await api_json(
            self.core.list_pod_for_all_namespaces(
                field_selector=f"spec.nodeName={node_name}", **RAW_REQUEST
            )
        )
        on_server = {
            (o["metadata"]["namespace"], o["metadata"]["name"]): o
            for o in listing.get("items") or ()
        }
        static = {
            (p.namespace, p.name): p
            for p in self.kubelet.pods()
            if p.metadata.annotations.get(CONFIG_SOURCE_ANNOTATION) not in (None, "api")
        }
        mirrors: dict[tuple[str, str], str] = {}
        for key, obj in on_server.items():
            md = obj["metadata"]
            annotations = md.get("annotations") or {}
            if CONFIG_MIRROR_ANNOTATION not in annotations:
                continue
            pod = static.get(key)
            if pod is None:
                log.info('Deleting orphaned mirror pod "%s/%s"', *key)
                await self._delete(obj)
                continue
            want = pod.metadata.annotations.get(CONFIG_HASH_ANNOTATION, pod.uid)
            if (
                md.get("deletionTimestamp") is not None
                or annotations[CONFIG_MIRROR_ANNOTATION] != want
            ):
                # Being deleted (a graceful delete waits for this node, and no
                # container of a mirror runs to be stopped), or not the mirror of
                # the static pod now: delete it for good; it is made again below.
                log.info('Trying to delete pod "%s/%s" %s', *key, md["uid"])
                if await self._delete(obj):
                    log.warning('Deleted mirror pod "%s/%s" because it is outdated', *key)
                continue
            mirrors[key] = md["uid"]
        for key, pod in static.items():
            if key in mirrors:
                continue
            existing = on_server.get(key)
            if existing is not None and CONFIG_MIRROR_ANNOTATION not in (
                existing["metadata"].get("annotations") or {}
            ):
                log.warning(
                    'static pod "%s/%s": a regular pod of that name exists on the '
                    "API server; no mirror pod",
                    *key,
                )
                continue
            uid = await self._create(pod, node_name, node_uid)
            if uid is not None:
                mirrors[key] = uid
        self._mirrors = mirrors

    async def run(self) -> None:
        """Sync every period until cancelled."""
        while True:
            try:
                await self.sync()
            except ApiException as exc:
                log.warning("mirror pods: %s %s", exc.status, exc.reason)
            except _TRANSPORT_ERRORS as exc:
                log.warning("mirror pods: API server unreachable: %s", exc or type(exc).__name__)
            except Exception:
                log.exception("mirror pods: sync failed")
            await self.clock.sleep(self.period)
