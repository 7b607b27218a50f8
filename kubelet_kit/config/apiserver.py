"""The API server pod source (the kubelet's ``pkg/kubelet/config/apiserver.go``).

Lists and watches the pods bound to this node (field selector
``spec.nodeName=<node>``) through the ``kubernetes_asyncio`` client, as a
reflector does: list once, then watch from the list's resourceVersion with
bookmarks, follow every event's resourceVersion, re-list when the server answers
410 Gone (the version was compacted away), and back off on other errors while
the pods last seen stay as they are.

Mirror pods (the API server's copies of this node's static pods, annotated
``kubernetes.io/config.mirror``) are left out of the snapshots: the static pod
itself runs from its file or URL source, never its mirror.

The API server is the judge of the pods it serves: they are loaded without this
package's validation (:func:`~kubelet_kit.api.loading.load_api_pod`), and one the
agent cannot read is still served, carrying its problems, so that the agent
rejects it at admission and reports that to the server.

Needs the optional extra ``kubelet-kit[cluster]``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any

import aiohttp
import attrs
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import watch as k8s_watch
from kubernetes_asyncio.client.exceptions import ApiException

from kubelet_kit.api import Pod, PodStatus
from kubelet_kit.api.loading import load_api_pod
from kubelet_kit.api.serde import decode
from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.config.interfaces import CONFIG_MIRROR_ANNOTATION, SourceSnapshot
from kubelet_kit.errors import FieldError, ValidationError

__all__ = [
    "API_TIMEOUT",
    "RAW_REQUEST",
    "APIServerSource",
    "Backoff",
    "ListWatch",
    "PodLoadCache",
    "api_json",
    "pods_snapshot",
]

log = logging.getLogger(__name__)

#: Seconds one API request may take (real time, the client's own timeout): the
#: kubelet's heartbeat client uses max(nodeStatusUpdateFrequency, lease duration).
API_TIMEOUT = 40.0
#: Keyword arguments for a raw call (JSON body, see :func:`api_json`) with that timeout.
RAW_REQUEST: Mapping[str, Any] = {"_preload_content": False, "_request_timeout": API_TIMEOUT}


async def api_json(call: Awaitable[Any]) -> Any:
    """Await a ``kubernetes_asyncio`` call made with ``_preload_content=False`` and
    return its JSON body (the raw camelCase object, not a generated model).

    With ``_preload_content=False`` the client hands back the HTTP response
    whatever its status, so the status is checked here.

    Raises:
        ApiException: The server answered with a status outside 2xx (``status``
            and ``reason`` set; ``body`` holds the Status text).
    """
    resp = await call
    try:
        if not 200 <= resp.status <= 299:
            body = await resp.text()
            exc = ApiException(status=resp.status, reason=resp.reason)
            exc.body = body
            raise exc
        return await resp.json()
    finally:
        resp.release()


class Backoff:
    """Doubling delays between failed attempts (client-go's reflector: 800 ms
    doubling to 30 s). Deterministic: no jitter, so tests can count the steps.

    Args:
        initial: First delay in seconds.
        cap: Longest delay.
    """

    def __init__(self, initial: float = 0.8, cap: float = 30.0) -> None:
        self.initial = initial
        self.cap = cap
        self._next = initial

    def next(self) -> float:
        """The delay to wait now; the one after it is twice as long (up to the cap)."""
        delay = self._next
        self._next = min(self._next * 2, self.cap)
        return delay

    def reset(self) -> None:
        """Start again from the initial delay (after a success)."""
        self._next = self.initial


_TERMINAL_PHASES = ("Succeeded", "Failed")


def _created(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    md = obj.get("metadata") or {}
    return (
        str(md.get("creationTimestamp") or ""),
        str(md.get("namespace") or ""),
        str(md.get("name") or ""),
    )


# What a pod's own status writes change in its metadata besides the status.
_VOLATILE_METADATA = ("resourceVersion", "managedFields")


def _stable_metadata(md: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in md.items() if k not in _VOLATILE_METADATA}


class PodLoadCache:
    """Pods already loaded from the API server's objects, so that an event
    reloads only what it changed.

    Each pod is kept by uid with the resourceVersion it was loaded at and its
    raw spec and metadata. The same version is not loaded again. A newer version
    whose spec and metadata are the same (the node's own status writes: most of
    the events a node sees) keeps the loaded pod and decodes only its new status;
    anything else is loaded whole.
    """

    def __init__(self) -> None:
        self._by_uid: dict[str, tuple[str, Any, dict[str, Any], Pod]] = {}

    def versions(self) -> dict[str, str]:
        """The resourceVersion each kept pod was loaded at, by uid."""
        return {uid: entry[0] for uid, entry in self._by_uid.items()}

    def load(self, obj: Mapping[str, Any], *, node_name: str) -> Pod:
        """The pod of ``obj`` (an object as the API server sent it).

        Raises:
            ValidationError: As :func:`~kubelet_kit.api.loading.load_api_pod`.
        """
        md = obj.get("metadata") or {}
        uid = str(md.get("uid") or "")
        version = str(md.get("resourceVersion") or "")
        kept = self._by_uid.get(uid)
        if kept is not None and kept[0] == version:
            return kept[3]
        spec = obj.get("spec")
        stable = _stable_metadata(md)
        if kept is not None and kept[1] == spec and kept[2] == stable and not kept[3].problems:
            pod = _with_status(kept[3], obj.get("status"), version)
            if pod is not None:
                self._by_uid[uid] = (version, spec, stable, pod)
                return pod
        # List items come without kind and apiVersion; the loader wants them.
        pod = load_api_pod(
            {"apiVersion": "v1", "kind": "Pod", **obj}, source="api", node_name=node_name
        )
        self._by_uid[uid] = (version, spec, stable, pod)
        return pod

    def retain(self, uids: set[str]) -> None:
        """Forget every pod but those of ``uids``."""
        for stale in [u for u in self._by_uid if u not in uids]:
            del self._by_uid[stale]


def _with_status(pod: Pod, raw: Any, version: str) -> Pod | None:
    """``pod`` with the status ``raw`` and metadata at ``version``; None when the
    status cannot be read as it is (the whole pod is loaded then)."""
    if raw is not None and not isinstance(raw, Mapping):
        return None
    errors: list[FieldError] = []
    status = decode(PodStatus, raw or {}, errors=errors)
    if errors:
        return None
    return attrs.evolve(
        pod, status=status, metadata=attrs.evolve(pod.metadata, resource_version=version)
    )


def pods_snapshot(
    objects: Mapping[str, Mapping[str, Any]],
    *,
    node_name: str,
    cache: PodLoadCache | None = None,
    seen_active: set[str] | None = None,
) -> SourceSnapshot:
    """Turn the API objects of this node's pods into a snapshot.

    Mirror pods are skipped. With ``seen_active``, a pod already Succeeded or
    Failed when first seen is skipped too (after an agent restart, a finished pod
    must not run again: the kubelet's pod workers treat it as finished at once),
    while a pod seen active before stays until the server drops it. Pods are not
    validated again (the API server validated them); a pod with values the agent
    cannot read is kept with them in ``Pod.problems``, for the agent to reject at
    admission. Only an object that does not even say which pod it is becomes a
    problem line, naming ``namespace/name`` and the field path.

    Args:
        objects: Pod objects as the API server sent them (camelCase), by uid.
        node_name: This node's name.
        cache: Pods already loaded (see :class:`PodLoadCache`); kept to the pods
            of ``objects``.
        seen_active: Uids of pods seen in a non-terminal phase; updated here.

    Returns:
        The pods in creation order, and the problems.
    """
    pods: list[Pod] = []
    problems: list[str] = []
    cache = cache if cache is not None else PodLoadCache()
    for obj in sorted(objects.values(), key=_created):
        md = obj.get("metadata") or {}
        if CONFIG_MIRROR_ANNOTATION in (md.get("annotations") or {}):
            continue
        if seen_active is not None:
            uid = str(md.get("uid") or "")
            if (obj.get("status") or {}).get("phase") not in _TERMINAL_PHASES:
                seen_active.add(uid)
            elif uid not in seen_active:
                continue
        try:
            pods.append(cache.load(obj, node_name=node_name))
        except ValidationError as exc:
            where = f"api: {md.get('namespace', '')}/{md.get('name', '')}"
            problems.extend(f"{where}: {e}" for e in exc.errors)
    cache.retain({str((o.get("metadata") or {}).get("uid") or "") for o in objects.values()})
    return SourceSnapshot(tuple(pods), tuple(problems))


class _RawWatch(k8s_watch.Watch):
    """A watch that hands over each event's object as the server's JSON only.

    The client's own watch also builds a generated model (``V1Pod``...) from every
    event, by serialising the object again and walking the model's schema: most of
    the CPU a busy watch costs. Nothing here reads the models (every consumer reads
    ``raw_object``), so the event's ``object`` stays the raw dict.
    """

    def get_return_type(self, func: object) -> Any:
        return None


class ListWatch:
    """One kind of object kept current from the API server, as client-go's reflector
    keeps it: list once, then watch from the list's resourceVersion with bookmarks,
    follow every event's resourceVersion, list again on 410 Gone (the version was
    compacted away), and back off on other errors while the objects last seen stay.

    Args:
        list_call: The ``CoreV1Api`` method that lists (and, with ``watch``,
            watches) the objects, e.g. ``"list_service_for_all_namespaces"``.
        what: How log lines name the objects (``"pod"``, ``"service"``).
        field_selector: Narrows the objects (``spec.nodeName=<node>``).
        clock: Time source for the back-off between failed attempts.
        watch_timeout: Seconds the server keeps one watch open before it is made
            again from the last resourceVersion (client-go picks 5-10 min).
        backoff: Delays after failed lists or watches.
        request_timeout: Seconds one list may take (real time: the client's own).

    Attributes:
        objects: The objects now, raw (camelCase), by uid.
        lists: How many times it listed (1 plus each re-list).
        resource_version: The last resourceVersion seen (list, event or bookmark).
        changed: Uids of the objects added, modified or deleted since
            :meth:`changes` last yielded; None when it listed (any may have
            changed). A reader that keeps its own index (a shared informer
            dispatching to many nodes) reads it at each yield.
    """

    def __init__(
        self,
        list_call: str,
        *,
        what: str,
        field_selector: str = "",
        clock: Clock | None = None,
        watch_timeout: float = 300.0,
        backoff: Backoff | None = None,
        request_timeout: float = 60.0,
    ) -> None:
        self.list_call = list_call
        self.what = what
        self.field_selector = field_selector
        self._clock = clock or RealClock()
        self.watch_timeout = watch_timeout
        self.backoff = backoff or Backoff()
        self.request_timeout = request_timeout
        self.objects: dict[str, Mapping[str, Any]] = {}
        self.lists = 0
        self.resource_version: str | None = None
        self.changed: set[str] | None = None

    async def _list(self, core: Any) -> None:
        data = await api_json(
            getattr(core, self.list_call)(
                field_selector=self.field_selector,
                _preload_content=False,
                _request_timeout=self.request_timeout,
            )
        )
        self.lists += 1
        self.objects = {str(item["metadata"]["uid"]): item for item in data.get("items") or ()}
        self.resource_version = str(data["metadata"]["resourceVersion"])
        self.changed = None

    def _apply(self, event: Mapping[str, Any]) -> bool:
        """Apply one watch event; True when the objects changed."""
        kind = event["type"]
        obj = event["raw_object"]
        md = obj.get("metadata") or {}
        if md.get("resourceVersion"):
            self.resource_version = str(md["resourceVersion"])
        if kind == "BOOKMARK":
            return False  # only moves the resourceVersion on
        uid = str(md.get("uid") or "")
        if kind in ("ADDED", "MODIFIED"):
            self.objects[uid] = obj
            if self.changed is not None:
                self.changed.add(uid)
            return True
        if kind == "DELETED":
            if self.objects.pop(uid, None) is None:
                return False
            if self.changed is not None:
                self.changed.add(uid)
            return True
        log.warning("%s watch: unknown event type %r ignored", self.what, kind)
        return False

    async def changes(self, api_client: Any) -> AsyncIterator[None]:
        """List, then watch; yields after the list and after each change (read
        :attr:`objects` then). Runs until cancelled; errors are logged and retried
        with back-off, the objects last seen staying as they are."""
        core = k8s.CoreV1Api(api_client)
        what = self.what
        while True:
            try:
                if self.resource_version is None:
                    await self._list(core)
                    yield None
                    self.changed = set()
                watcher = _RawWatch()
                async with watcher:
                    stream = watcher.stream(
                        getattr(core, self.list_call),
                        field_selector=self.field_selector,
                        resource_version=self.resource_version,
                        allow_watch_bookmarks=True,
                        timeout_seconds=max(1, int(self.watch_timeout)),
                        # Connect within 30 s; a watch silent for longer than its
                        # server-side timeout is a dead connection.
                        _request_timeout=(30, self.watch_timeout + 60),
                    )
                    async for event in stream:
                        self.backoff.reset()
                        if self._apply(event):
                            yield None
                            self.changed = set()
                # The server closed the watch (its timeout): watch again from
                # where it ended.
            except ApiException as exc:
                if exc.status == 410:
                    # Compacted away: only a fresh list can tell what changed.
                    log.info(
                        "%s watch: resourceVersion %s is too old (410 Gone); listing again",
                        what,
                        self.resource_version,
                    )
                    self.resource_version = None
                    continue
                log.warning(
                    "%s list/watch on the API server failed: %s %s", what, exc.status, exc.reason
                )
                await self._clock.sleep(self.backoff.next())
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError, KeyError) as exc:
                log.warning(
                    "%s list/watch on the API server failed: %s", what, exc or type(exc).__name__
                )
                await self._clock.sleep(self.backoff.next())
            except Exception:
                # Whatever else goes wrong (a malformed answer), the watch must not
                # take the agent down: its objects stay, and it tries again.
                log.exception("%s list/watch on the API server failed", what)
                await self._clock.sleep(self.backoff.next())


class APIServerSource:
    """Pods the scheduler bound to this node, from the API server.

    Args:
        api_client: A ``kubernetes_asyncio.client.ApiClient`` (see
            :func:`kubelet_kit.cluster.connect`). Not closed by the source.
        node_name: This node's name (``spec.nodeName`` of its pods).
        clock: Time source for the back-off between failed attempts.
        watch_timeout: Seconds the server keeps one watch open before the source
            watches again from the last resourceVersion (client-go picks 5-10 min).
        backoff: Delays after failed lists or watches.
        request_timeout: Seconds one list may take (real time: the client's own).
    """

    name = "api"

    def __init__(
        self,
        api_client: Any,
        node_name: str,
        *,
        clock: Clock | None = None,
        watch_timeout: float = 300.0,
        backoff: Backoff | None = None,
        request_timeout: float = 60.0,
    ) -> None:
        self.api_client = api_client
        self.node_name = node_name
        self.pods = ListWatch(
            "list_pod_for_all_namespaces",
            what="pod",
            field_selector=f"spec.nodeName={node_name}",
            clock=clock,
            watch_timeout=watch_timeout,
            backoff=backoff,
            request_timeout=request_timeout,
        )
        self._cache = PodLoadCache()
        self._seen_active: set[str] = set()

    @property
    def field_selector(self) -> str:
        """The selector the source lists and watches with."""
        return self.pods.field_selector

    @property
    def lists(self) -> int:
        """How many times the source listed (1 plus each re-list)."""
        return self.pods.lists

    @property
    def resource_version(self) -> str | None:
        """The last resourceVersion seen (list, event or bookmark)."""
        return self.pods.resource_version

    @property
    def backoff(self) -> Backoff:
        """Delays after failed lists or watches."""
        return self.pods.backoff

    async def snapshots(self) -> AsyncIterator[SourceSnapshot]:
        """List, then watch, yielding the full set of this node's pods after the
        list and after each change. Runs until cancelled; errors are logged and
        retried with back-off, the last pods staying as they are."""
        async for _ in self.pods.changes(self.api_client):
            yield pods_snapshot(
                self.pods.objects,
                node_name=self.node_name,
                cache=self._cache,
                seen_active=self._seen_active,
            )
