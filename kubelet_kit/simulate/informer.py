"""One pod watch for many simulated nodes: :class:`SharedPodInformer`.

A real kubelet lists and watches its own pods (``spec.nodeName=<node>``). A
thousand of them in one process would hold a thousand watches open and decode
every change once per node that asked; the simulator instead keeps one
list/watch of every bound pod (``spec.nodeName!=``, as a scheduler's informer
does) and hands each simulated node the pods bound to it, through a
:class:`~kubelet_kit.config.PodSource` of its own. Only the nodes a change
touches are told about it, so a pod update costs one node's snapshot, not a
thousand.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.config.apiserver import Backoff, ListWatch, PodLoadCache, pods_snapshot
from kubelet_kit.config.interfaces import SourceSnapshot

__all__ = ["NodePodSource", "SharedPodInformer"]

log = logging.getLogger(__name__)


def _node_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("spec") or {}).get("nodeName") or "")


class NodePodSource:
    """The pods bound to one node, as the shared informer sees them.

    A :class:`~kubelet_kit.config.PodSource` named ``api`` (the pods' config
    source is the API server's, as for a real kubelet). Made by
    :meth:`SharedPodInformer.source`.
    """

    name = "api"

    def __init__(self, informer: SharedPodInformer, node_name: str) -> None:
        self.node_name = node_name
        self._informer = informer
        self._changed = asyncio.Event()
        self._cache = PodLoadCache()
        self._seen_active: set[str] = set()

    def _notify(self) -> None:
        self._changed.set()

    async def snapshots(self) -> AsyncIterator[SourceSnapshot]:
        """The node's pods once the informer has listed, then after each change
        to one of them. Runs until cancelled."""
        while True:
            await self._changed.wait()
            self._changed.clear()
            yield pods_snapshot(
                self._informer.objects_of(self.node_name),
                node_name=self.node_name,
                cache=self._cache,
                seen_active=self._seen_active,
            )


class SharedPodInformer:
    """Lists and watches every pod bound to a node, once, for many nodes.

    Args:
        api_client: A ``kubernetes_asyncio`` ApiClient (not closed here).
        clock: Time source for the back-off between failed attempts.
        wanted: Which node names to keep pods of (default: every node that asked
            for a :meth:`source`); pods of other nodes are dropped on arrival.
        watch_timeout: Seconds the server keeps one watch open.
        backoff: Delays after failed lists or watches.

    Attributes:
        watch: The underlying :class:`~kubelet_kit.config.apiserver.ListWatch`
            (its ``lists`` and ``resource_version``).
        events: Watch events applied so far (adds, updates and deletes of the
            wanted nodes' pods and of others).
    """

    def __init__(
        self,
        api_client: Any,
        *,
        clock: Clock | None = None,
        wanted: Callable[[str], bool] | None = None,
        watch_timeout: float = 300.0,
        backoff: Backoff | None = None,
    ) -> None:
        self.api_client = api_client
        self.watch = ListWatch(
            "list_pod_for_all_namespaces",
            what="pod",
            field_selector="spec.nodeName!=",
            clock=clock or RealClock(),
            watch_timeout=watch_timeout,
            backoff=backoff,
        )
        self._wanted = wanted
        self._sources: dict[str, NodePodSource] = {}
        self._by_node: dict[str, dict[str, Mapping[str, Any]]] = {}
        self._node_by_uid: dict[str, str] = {}
        self.events = 0
        self.synced = asyncio.Event()

    def source(self, node_name: str) -> NodePodSource:
        """The pod source of ``node_name`` (one per node; asking again returns it)."""
        src = self._sources.get(node_name)
        if src is None:
            src = self._sources[node_name] = NodePodSource(self, node_name)
            if self.synced.is_set():
                src._notify()
        return src

    def objects_of(self, node_name: str) -> Mapping[str, Mapping[str, Any]]:
        """The raw pod objects bound to ``node_name`` now, by uid."""
        return self._by_node.get(node_name, {})

    def _keeps(self, node_name: str) -> bool:
        if not node_name:
            return False
        if self._wanted is not None:
            return self._wanted(node_name)
        return node_name in self._sources

    def _move(self, uid: str, obj: Mapping[str, Any] | None, touched: set[str]) -> None:
        old = self._node_by_uid.pop(uid, None)
        if old is not None:
            self._by_node.get(old, {}).pop(uid, None)
            touched.add(old)
        if obj is None:
            return
        node = _node_of(obj)
        if self._keeps(node):
            self._by_node.setdefault(node, {})[uid] = obj
            self._node_by_uid[uid] = node
            touched.add(node)

    def _rebuild(self) -> set[str]:
        touched = set(self._by_node)
        self._by_node = {}
        self._node_by_uid = {}
        for uid, obj in list(self.watch.objects.items()):
            self._move(uid, obj, touched)
            if uid not in self._node_by_uid:
                del self.watch.objects[uid]  # another node's: not kept
        # Each node hears after a list, its pods or none (a node whose pods all
        # went while the watch was down must learn that too).
        return touched | set(self._sources)

    async def run(self) -> None:
        """List, then watch, telling each node's source about its changes. Runs
        until cancelled; errors are retried as the ListWatch retries them."""
        async for _ in self.watch.changes(self.api_client):
            changed = self.watch.changed
            if changed is None:
                touched = self._rebuild()
            else:
                touched = set()
                for uid in changed:
                    self.events += 1
                    self._move(uid, self.watch.objects.get(uid), touched)
                    # The objects map keeps every bound pod; only wanted ones
                    # are indexed, so drop the rest from it as they come.
                    if uid not in self._node_by_uid:
                        self.watch.objects.pop(uid, None)
            for node in touched:
                src = self._sources.get(node)
                if src is not None:
                    src._notify()
            self.synced.set()
