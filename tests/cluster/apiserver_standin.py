"""A TEST STAND-IN for a Kubernetes API server: an in-memory aiohttp server.

It is not Kubernetes. It serves only the paths kubelet-kit's cluster mode uses,
with the behaviour the Kubernetes API documents for them, so that the real
``kubernetes_asyncio`` client can be driven against it:

* one resourceVersion counter for every object; list returns it in
  ``metadata.resourceVersion``;
* watch (``?watch=true``) from a resourceVersion replays the events after it, then
  streams new ones; a version older than the kept history gets an ``ERROR`` event
  carrying a 410 Gone Status (``compact()`` drops the history); without a version
  it starts with ``ADDED`` for every current object; ``allowWatchBookmarks`` gets
  ``BOOKMARK`` events (``bookmark()``, and at the end of ``timeoutSeconds``);
* field selectors ``spec.nodeName`` and ``metadata.name`` (``=``, ``==``, ``!=``),
  with objects entering or leaving the selection seen as ADDED or DELETED;
* writes carrying a stale ``metadata.resourceVersion`` (PUT, or a PATCH that
  names one) get 409 Conflict; create of an existing name gets 409 AlreadyExists;
  a ``metadata.uid`` in a patch, or ``preconditions.uid`` in DeleteOptions, that
  does not match gets 409 Conflict;
* strategic merge patches merge ``conditions`` by type and container statuses by
  name, and replace other lists;
* DELETE of a pod bound to a node with a grace period above zero only sets
  ``deletionTimestamp`` and ``deletionGracePeriodSeconds`` (default: the pod's
  ``terminationGracePeriodSeconds``); with zero it removes the pod.

``stop()`` and ``start()`` take the server away and bring it back on the same
port with its objects kept, as an API server restarting over the same etcd.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime as _dt
import json
import ssl
import uuid
from collections.abc import Callable
from typing import Any

from aiohttp import web

_LIST_MERGE_KEYS = {
    "conditions": "type",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "ephemeralContainerStatuses": "name",
}

# (api prefix, resource) -> (kind, namespaced)
_KINDS = {
    "pods": ("Pod", True),
    "nodes": ("Node", False),
    "leases": ("Lease", True),
    "events": ("Event", True),
    "configmaps": ("ConfigMap", True),
    "secrets": ("Secret", True),
    "services": ("Service", True),
}


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def strategic_merge(target: Any, patch: Any) -> Any:
    """Apply a strategic merge patch (the subset the stand-in needs)."""
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target)
    for key, value in patch.items():
        if key.startswith("$"):
            continue  # directives such as $setElementOrder: order is not checked here
        if value is None:
            out.pop(key, None)
        elif key in _LIST_MERGE_KEYS and isinstance(value, list):
            merge_key = _LIST_MERGE_KEYS[key]
            items = list(out.get(key) or [])
            for entry in value:
                for i, old in enumerate(items):
                    if old.get(merge_key) == entry.get(merge_key):
                        items[i] = strategic_merge(old, entry)
                        break
                else:
                    items.append(copy.deepcopy(entry))
            out[key] = items
        elif isinstance(value, dict):
            out[key] = strategic_merge(out.get(key) or {}, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _field(obj: dict[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return "" if cur is None else str(cur)


def field_matches(obj: dict[str, Any], selector: str) -> bool:
    """Whether ``obj`` matches a field selector such as ``spec.nodeName=n1``."""
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if _field(obj, key) == value:
                return False
        else:
            key, value = term.replace("==", "=").split("=", 1)
            if key not in (
                "spec.nodeName",
                "metadata.name",
                "metadata.namespace",
                "involvedObject.name",
                "involvedObject.uid",
            ):
                raise ValueError(f"field label not supported: {key}")
            if _field(obj, key) != value:
                return False
    return True


def parse_bool(text: str | None) -> bool:
    """A query flag as the API server reads it (Go's strconv.ParseBool)."""
    return text in ("1", "t", "T", "TRUE", "true", "True")


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _error(code: int, reason: str, message: str) -> web.Response:
    return web.json_response(_status(code, reason, message), status=code)


class StandInAPIServer:
    """The stand-in; see the module docstring. Use ``async with`` or start/stop.

    Attributes:
        objects: (resource, namespace, name) -> object; tests read and change it
            through :meth:`put` and :meth:`get`.
        requests: Every request as (method, path), in order.
        history_limit: Events kept for watches from older versions.
    """

    def __init__(
        self, *, history_limit: int = 1000, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.history: list[tuple[int, str, str, dict[str, Any], dict[str, Any] | None]] = []
        self.history_limit = history_limit
        self.oldest_rv = 0  # watches from below this get 410 Gone
        self.rv = 100
        self.requests: list[tuple[str, str]] = []
        self.bodies: list[tuple[str, str, Any]] = []  # (method, path, JSON body)
        self.authorizations: list[str] = []  # each request's Authorization header
        self.port = 0
        self.ssl_context = ssl_context
        self.client_subjects: list[str] = []  # verified client certificates' subjects
        self._runner: web.AppRunner | None = None
        self._watchers: set[asyncio.Queue[Any]] = set()
        self._hooks: list[Callable[[web.Request], web.Response | None]] = []

    # -- lifecycle ----------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL on loopback (HTTPS when serving with an SSL context)."""
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def kubeconfig(
        self, user: str = "node", *, ca_data: str = "", credentials: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """A kubeconfig document pointing at the stand-in.

        Args:
            user: The user entry's name.
            ca_data: ``certificate-authority-data`` (base64 PEM) for HTTPS.
            credentials: The user's fields (default a bearer token), e.g.
                ``client-certificate-data`` and ``client-key-data``.
        """
        cluster: dict[str, str] = {"server": self.url}
        if ca_data:
            cluster["certificate-authority-data"] = ca_data
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "standin",
            "clusters": [{"name": "standin", "cluster": cluster}],
            "users": [{"name": user, "user": credentials or {"token": "standin-token"}}],
            "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": user}}],
        }

    async def start(self) -> None:
        """Serve (again, on the same port after a stop)."""
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(
            self._runner, "127.0.0.1", self.port, reuse_address=True, ssl_context=self.ssl_context
        )
        await site.start()
        if not self.port:
            server = site._server
            assert server is not None
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        """Go away: close the port and every open watch. Objects are kept."""
        for queue in list(self._watchers):
            queue.put_nowait(("CLOSE", {}, None))
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> StandInAPIServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- store --------------------------------------------------------------------

    def _record(
        self, kind: str, resource: str, obj: dict[str, Any], old: dict[str, Any] | None = None
    ) -> None:
        self.history.append((self.rv, kind, resource, copy.deepcopy(obj), old))
        if len(self.history) > self.history_limit:
            dropped = self.history.pop(0)
            self.oldest_rv = dropped[0]
        for queue in list(self._watchers):
            queue.put_nowait((kind, {"resource": resource, "obj": copy.deepcopy(obj)}, old))

    def put(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object (as another client would), with a new version."""
        md = obj.setdefault("metadata", {})
        kind, namespaced = _KINDS[resource]
        obj.setdefault("kind", kind)
        obj.setdefault("apiVersion", "coordination.k8s.io/v1" if resource == "leases" else "v1")
        if namespaced:
            md.setdefault("namespace", "default")
        key = (resource, md.get("namespace", "") if namespaced else "", md["name"])
        old = self.objects.get(key)
        md.setdefault("uid", (old or {}).get("metadata", {}).get("uid") or str(uuid.uuid4()))
        md.setdefault("creationTimestamp", _now())
        self.rv += 1
        md["resourceVersion"] = str(self.rv)
        self.objects[key] = obj
        self._record("MODIFIED" if old else "ADDED", resource, obj, old)
        return obj

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object, or None."""
        return self.objects.get((resource, namespace, name))

    def remove(self, resource: str, namespace: str, name: str) -> None:
        """Delete an object at once."""
        obj = self.objects.pop((resource, namespace, name))
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._record("DELETED", resource, obj)

    def compact(self) -> None:
        """Forget the event history: watches from any earlier version get 410."""
        self.oldest_rv = self.rv
        self.history.clear()

    def bookmark(self) -> None:
        """Send a BOOKMARK with the current version to watches that allow them."""
        for queue in list(self._watchers):
            queue.put_nowait(("BOOKMARK", {}, None))

    def close_watches(self) -> None:
        """End every open watch (as a server ending its watches at their timeout)."""
        for queue in list(self._watchers):
            queue.put_nowait(("CLOSE", {}, None))

    def count(self, method: str, path_prefix: str, *, query: str = "") -> int:
        """How many requests matched ``method`` and the path prefix (and query)."""
        return sum(
            1 for m, p in self.requests if m == method and p.startswith(path_prefix) and query in p
        )

    def add_hook(self, hook: Callable[[web.Request], web.Response | None]) -> None:
        """Run ``hook`` on every request first; a response it returns is sent as is
        (to inject a failure)."""
        self._hooks.append(hook)

    # -- HTTP ---------------------------------------------------------------------

    def _route(self, path: str) -> tuple[str, str, str, str] | None:
        """(resource, namespace, name, subresource) from an API path."""
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            rest = parts[2:]
        elif parts[:3] == ["apis", "coordination.k8s.io", "v1"]:
            rest = parts[3:]
        else:
            return None
        namespace = ""
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        if not rest:
            return None
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if resource not in _KINDS:
            return None
        return resource, namespace, name, sub

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.method, request.path_qs))
        self.authorizations.append(request.headers.get("Authorization", ""))
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        if peer:
            # The subject as the API server's x509 authenticator reads it.
            self.client_subjects.append(
                ",".join(f"{k}={v}" for rdn in peer.get("subject", ()) for k, v in rdn)
            )
        for hook in self._hooks:
            response = hook(request)
            if response is not None:
                return response
        route = self._route(request.path)
        if route is None:
            return _error(
                404,
                "NotFound",
                f"the server could not find the requested resource ({request.path})",
            )
        resource, namespace, name, sub = route
        body: Any = None
        if request.can_read_body:
            body = json.loads(await request.read() or b"null")
            self.bodies.append((request.method, request.path, copy.deepcopy(body)))
        if request.method == "GET" and not name:
            if parse_bool(request.query.get("watch")):
                return await self._watch(request, resource, namespace)
            return self._list(request, resource, namespace)
        if request.method == "GET":
            obj = self.get(resource, namespace, name)
            if obj is None:
                return _error(404, "NotFound", f'{resource} "{name}" not found')
            return web.json_response(obj)
        if request.method == "POST" and not name:
            return self._create(resource, namespace, body)
        if request.method == "PUT":
            return self._update(resource, namespace, name, body, sub)
        if request.method == "PATCH":
            return self._patch(resource, namespace, name, body, sub, request.content_type)
        if request.method == "DELETE":
            options = dict(body or {})
            if "gracePeriodSeconds" in request.query:  # DeleteOptions as query parameters
                options.setdefault("gracePeriodSeconds", int(request.query["gracePeriodSeconds"]))
            return self._delete(resource, namespace, name, options)
        return _error(405, "MethodNotAllowed", f"{request.method} {request.path}")

    def _list(self, request: web.Request, resource: str, namespace: str) -> web.Response:
        selector = request.query.get("fieldSelector", "")
        try:
            items = [
                o
                for (r, ns, _), o in sorted(self.objects.items())
                if r == resource
                and (not namespace or ns == namespace)
                and field_matches(o, selector)
            ]
        except ValueError as exc:
            return _error(400, "BadRequest", str(exc))
        # As the real server: items of a list carry no kind or apiVersion.
        items = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in items]
        kind, _ = _KINDS[resource]
        return web.json_response(
            {
                "kind": f"{kind}List",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self.rv)},
                "items": items,
            }
        )

    async def _watch(
        self, request: web.Request, resource: str, namespace: str
    ) -> web.StreamResponse:
        selector = request.query.get("fieldSelector", "")
        bookmarks = parse_bool(request.query.get("allowWatchBookmarks"))
        timeout = float(request.query.get("timeoutSeconds", "1800"))
        since = request.query.get("resourceVersion", "")
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)

        def visible(obj: dict[str, Any] | None) -> bool:
            if obj is None:
                return False
            md = obj.get("metadata") or {}
            return (not namespace or md.get("namespace") == namespace) and field_matches(
                obj, selector
            )

        async def send(kind: str, obj: dict[str, Any]) -> None:
            line = json.dumps({"type": kind, "object": obj}) + "\n"
            await response.write(line.encode())

        async def deliver(
            kind: str, res: str, obj: dict[str, Any], old: dict[str, Any] | None
        ) -> None:
            if res != resource:
                return
            now_in, was_in = visible(obj), visible(old)
            if kind == "MODIFIED" and now_in and not was_in:
                kind = "ADDED"
            elif kind == "MODIFIED" and was_in and not now_in:
                kind, now_in = "DELETED", True
            if now_in:
                await send(kind, obj)

        queue: asyncio.Queue[tuple[str, dict[str, Any], dict[str, Any] | None]] = asyncio.Queue()
        self._watchers.add(queue)
        try:
            if since and since != "0":
                if int(since) < self.oldest_rv:
                    await send(
                        "ERROR",
                        _status(
                            410, "Expired", f"too old resource version: {since} ({self.oldest_rv})"
                        ),
                    )
                    return response
                for rv, kind, res, obj, old in list(self.history):
                    if rv > int(since):
                        await deliver(kind, res, obj, old)
            else:
                for (res, _, _), obj in sorted(self.objects.items()):
                    if res == resource and visible(obj):
                        await send("ADDED", obj)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while True:
                try:
                    kind, data, old = await asyncio.wait_for(
                        queue.get(), max(0.0, deadline - loop.time())
                    )
                except TimeoutError:
                    if bookmarks:
                        await send(
                            "BOOKMARK",
                            {
                                "kind": _KINDS[resource][0],
                                "apiVersion": "v1",
                                "metadata": {"resourceVersion": str(self.rv)},
                            },
                        )
                    break
                if kind == "CLOSE":
                    break
                if kind == "BOOKMARK":
                    if bookmarks:
                        await send(
                            "BOOKMARK",
                            {
                                "kind": _KINDS[resource][0],
                                "apiVersion": "v1",
                                "metadata": {"resourceVersion": str(self.rv)},
                            },
                        )
                    continue
                await deliver(kind, data["resource"], data["obj"], old)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._watchers.discard(queue)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await response.write_eof()
        return response

    def _create(self, resource: str, namespace: str, body: dict[str, Any]) -> web.Response:
        md = body.setdefault("metadata", {})
        if not md.get("name") and md.get("generateName"):
            md["name"] = md["generateName"] + uuid.uuid4().hex[:5]
        if namespace:
            md["namespace"] = namespace
        key = (resource, namespace, md.get("name", ""))
        if key in self.objects:
            return _error(409, "AlreadyExists", f'{resource} "{md.get("name")}" already exists')
        md.pop("resourceVersion", None)
        md.pop("uid", None)
        if resource == "pods":
            body["status"] = {"phase": "Pending"}  # as the real server sets it on create
        return web.json_response(self.put(resource, body), status=201)

    def _update(
        self, resource: str, namespace: str, name: str, body: dict[str, Any], sub: str
    ) -> web.Response:
        current = self.get(resource, namespace, name)
        if current is None:
            return _error(404, "NotFound", f'{resource} "{name}" not found')
        sent_rv = (body.get("metadata") or {}).get("resourceVersion")
        if sent_rv != current["metadata"]["resourceVersion"]:
            return _error(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {resource} "{name}": the object '
                "has been modified; please apply your changes to the latest "
                "version and try again",
            )
        new = copy.deepcopy(current)
        if sub == "status":
            new["status"] = body.get("status") or {}
        else:
            status = new.get("status")
            new = copy.deepcopy(body)
            if status is not None and resource == "nodes":
                new["status"] = status  # the main resource ignores status changes
            new["metadata"]["uid"] = current["metadata"]["uid"]
            new["metadata"]["creationTimestamp"] = current["metadata"]["creationTimestamp"]
        return web.json_response(self.put(resource, new))

    def _patch(
        self,
        resource: str,
        namespace: str,
        name: str,
        body: dict[str, Any],
        sub: str,
        content_type: str,
    ) -> web.Response:
        current = self.get(resource, namespace, name)
        if current is None:
            return _error(404, "NotFound", f'{resource} "{name}" not found')
        md = body.get("metadata") or {}
        if md.get("uid") and md["uid"] != current["metadata"]["uid"]:
            return _error(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {md['uid']}, UID in "
                f"object meta: {current['metadata']['uid']}",
            )
        if (
            md.get("resourceVersion")
            and md["resourceVersion"] != current["metadata"]["resourceVersion"]
        ):
            return _error(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {resource} "{name}": the object '
                "has been modified; please apply your changes to the latest "
                "version and try again",
            )
        if content_type not in (
            "application/strategic-merge-patch+json",
            "application/merge-patch+json",
        ):
            return _error(415, "UnsupportedMediaType", f"patch type {content_type}")
        if sub == "status":
            body = {"status": body.get("status") or {}}
        else:
            body = {k: v for k, v in body.items() if k != "status"}
        new = strategic_merge(current, body)
        new["metadata"].pop("resourceVersion", None)
        return web.json_response(self.put(resource, new))

    def _delete(
        self, resource: str, namespace: str, name: str, options: dict[str, Any]
    ) -> web.Response:
        current = self.get(resource, namespace, name)
        if current is None:
            return _error(404, "NotFound", f'{resource} "{name}" not found')
        want_uid = (options.get("preconditions") or {}).get("uid")
        if want_uid and want_uid != current["metadata"]["uid"]:
            return _error(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {want_uid}, UID in "
                f"object meta: {current['metadata']['uid']}",
            )
        grace = options.get("gracePeriodSeconds")
        if resource == "pods" and (current.get("spec") or {}).get("nodeName"):
            if grace is None:
                grace = (current.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            phase = (current.get("status") or {}).get("phase")
            if grace > 0 and phase not in ("Succeeded", "Failed"):
                new = copy.deepcopy(current)
                old_grace = new["metadata"].get("deletionGracePeriodSeconds")
                if old_grace is None or grace < old_grace:
                    new["metadata"]["deletionGracePeriodSeconds"] = grace
                    deadline = _dt.datetime.now(_dt.UTC) + _dt.timedelta(seconds=grace)
                    new["metadata"]["deletionTimestamp"] = deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
                    new["metadata"].pop("resourceVersion", None)
                    return web.json_response(self.put(resource, new))
                return web.json_response(current)
        self.remove(resource, namespace, name)
        return web.json_response(current)


async def _serve(port: int) -> None:
    server = StandInAPIServer()
    server.port = port
    await server.start()
    print(json.dumps(server.kubeconfig()), flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    # Serve the stand-in on its own, printing a kubeconfig for it (for trying the
    # real-cluster script without a cluster): python apiserver_standin.py [PORT]
    import sys

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
