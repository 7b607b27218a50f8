"""The node's HTTP API, served with aiohttp: the kubelet's paths and JSON shapes.

Three listeners, as the kubelet has them:

* the **secure port** (``address:port``, HTTPS): every endpoint, each request
  authenticated (client certificate, bearer token, or anonymous if enabled) and
  authorized by node subresource (see :mod:`kubelet_kit.server.auth`);
* the optional **read-only port** (plain HTTP, off unless ``read_only_port`` is
  set): health, pods, stats and metrics only, never logs or run;
* the **healthz port** (plain HTTP, usually on 127.0.0.1): ``/healthz`` only.

Endpoints: ``/healthz`` (checks ``ping``, ``log``, ``syncloop``, ``pleg``; each
also at ``/healthz/<check>``), ``/pods`` and ``/runningpods/`` (PodList),
``/metrics`` (the agent's registry), ``/metrics/probes`` (the prober's),
``/metrics/resource``, ``/stats/summary``,
``/containerLogs/{namespace}/{pod}/{container}`` and
``/run/{namespace}/{pod}[/{uid}]/{container}?cmd=...`` (POST).

Everything is bounded: request line and header sizes, header count, body size
(413 past it), the time a non-streaming request may take, an exec's run time,
and a log follow's length (it also ends when the client goes away).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kubelet_kit.api.serde import encode
from kubelet_kit.clock import wait_for
from kubelet_kit.container import ContainerFilter, ContainerState, labels
from kubelet_kit.container.optional import EXEC, LOGS, not_offered, runtime_capabilities
from kubelet_kit.container.pods import get_pods
from kubelet_kit.errors import ConfigurationError, ContainerRuntimeError, DeadlineExceededError
from kubelet_kit.node.metrics import KubeletMetrics
from kubelet_kit.server.auth import (
    AlwaysAllowAuthorizer,
    Authenticator,
    Authorizer,
    UserInfo,
    request_attributes,
)
from kubelet_kit.server.logs import (
    container_log_dir,
    find_log_file,
    parse_log_options,
    stream_log,
)
from kubelet_kit.server.stats import SummaryProvider
from kubelet_kit.server.streams import STREAM_PATH_PREFIXES, StreamEndpoints

if TYPE_CHECKING:
    from kubelet_kit.api import Pod
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration
    from kubelet_kit.node.kubelet import KubeletCore as Kubelet

__all__ = ["KubeletServer", "ServerLimits"]

log = logging.getLogger("kubelet_kit.server")

# DNS-1123 label (namespace, container) and subdomain (pod name), as the API validates.
_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_UID: Final = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,127}$")

_USER: Final = web.RequestKey("user", UserInfo)


@attrs.frozen(kw_only=True)
class ServerLimits:
    """Bounds on what one request may cost.

    Attributes:
        max_body_bytes: Largest request body (413 past it).
        max_line_bytes: Longest request line or header line.
        max_field_bytes: Longest header value.
        max_headers: Most header lines in a request.
        request_timeout: Seconds a non-streaming request may take (504 past it).
        exec_timeout: Seconds a ``/run`` command may run.
        max_follow: Seconds a log follow may last.
        keepalive_timeout: Seconds an idle keep-alive connection is kept.
    """

    max_body_bytes: int = 64 * 1024
    max_line_bytes: int = 8190
    max_field_bytes: int = 8190
    max_headers: int = 64
    request_timeout: float = 60.0
    exec_timeout: float = 60.0
    max_follow: float = 4 * 3600.0
    keepalive_timeout: float = 75.0


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n")


def _cpu_and_memory(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary cut down as the kubelet's ``only_cpu_and_memory=true`` does."""
    keep = ("cpu", "memory")
    node = summary["node"]
    return {
        "node": {
            "nodeName": node["nodeName"],
            "startTime": node["startTime"],
            "systemContainers": node.get("systemContainers", []),
            **{k: node[k] for k in keep if k in node},
        },
        "pods": [
            {
                "podRef": p["podRef"],
                "startTime": p["startTime"],
                **{k: p[k] for k in keep if k in p},
                "containers": [
                    {
                        "name": c["name"],
                        "startTime": c["startTime"],
                        **{k: c[k] for k in keep if k in c},
                    }
                    for c in p.get("containers", [])
                ],
            }
            for p in summary["pods"]
        ],
    }


def _check_name(kind: str, value: str, pattern: re.Pattern[str], limit: int) -> str | None:
    if len(value) > limit or not pattern.match(value):
        return f"invalid {kind} {value[:64]!r} in the path"
    return None


class KubeletServer:
    """Serves a :class:`~kubelet_kit.Kubelet`'s node API.

    Nothing listens until :meth:`start` (or ``async with``); ports given as 0 are
    chosen by the system and readable afterwards (:attr:`port`,
    :attr:`read_only_port`, :attr:`healthz_port`).

    Args:
        kubelet: The agent to serve.
        address: Address of the secure and read-only ports.
        port: The HTTPS port (None: no secure port).
        tls_cert_file: The serving certificate (PEM), required for ``port``.
        tls_private_key_file: Its private key (PEM).
        authenticator: Who may connect; default: nobody (no CA, no tokens,
            no anonymous), so every request to the secure port gets 401.
        authorizer: What they may do; default AlwaysAllow.
        read_only_port: Plain-HTTP port without authentication (None: off).
        healthz_address: Address of the healthz port.
        healthz_port: Plain-HTTP ``/healthz`` port (None: off).
        enable_debugging_handlers: Serve ``/containerLogs``, ``/run``,
            ``/runningpods/`` and the streams (``/exec``, ``/attach``,
            ``/portForward``); when False they answer 405.
        limits: Request bounds.
        metrics: The agent metrics refreshed before each ``/metrics``; default the
            ones of ``kubelet.registry``.
    """

    def __init__(
        self,
        kubelet: Kubelet,
        *,
        address: str = "0.0.0.0",
        port: int | None = 10250,
        tls_cert_file: str | Path | None = None,
        tls_private_key_file: str | Path | None = None,
        authenticator: Authenticator | None = None,
        authorizer: Authorizer | None = None,
        read_only_port: int | None = None,
        healthz_address: str = "127.0.0.1",
        healthz_port: int | None = None,
        enable_debugging_handlers: bool = True,
        limits: ServerLimits | None = None,
        metrics: KubeletMetrics | None = None,
    ) -> None:
        if port is not None and not (tls_cert_file and tls_private_key_file):
            raise ConfigurationError(
                "tlsCertFile and tlsPrivateKeyFile are required to serve the secure port"
            )
        self.kubelet = kubelet
        self.address = address
        self.port = port
        self.tls_cert_file = tls_cert_file
        self.tls_private_key_file = tls_private_key_file
        self.authenticator = authenticator or Authenticator()
        self.authorizer: Authorizer = authorizer or AlwaysAllowAuthorizer()
        self.read_only_port = read_only_port
        self.healthz_address = healthz_address
        self.healthz_port = healthz_port
        self.enable_debugging_handlers = enable_debugging_handlers
        self.limits = limits or ServerLimits()
        self.metrics = metrics or KubeletMetrics.for_registry(
            kubelet.registry, node_name=kubelet.node_name
        )
        self.summary = SummaryProvider(
            kubelet.runtime,
            node_name=kubelet.node_name,
            root_dir=kubelet.root_dir,
            pod_logs_dir=kubelet.pod_logs_dir,
            now=kubelet.clock.now,
            monotonic=kubelet.clock.monotonic,
        )
        #: Log streams being served now (a follow counts until it ends).
        self.open_streams = 0
        self._runners: list[web.AppRunner] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()

    # -- construction from a KubeletConfiguration ------------------------------------

    @classmethod
    def from_config(
        cls, kubelet: Kubelet, config: KubeletConfiguration, **overrides: Any
    ) -> KubeletServer:
        """Build a server from a KubeletConfiguration: ``address``, ``port``,
        ``readOnlyPort``, ``healthzBindAddress``/``healthzPort``, ``tlsCertFile``,
        ``tlsPrivateKeyFile``, ``enableDebuggingHandlers``, ``authentication``
        (``x509.clientCAFile``, ``anonymous.enabled``, and kubelet-kit's
        ``tokenFile``) and ``authorization`` (``mode: AlwaysAllow``, or kubelet-kit's
        ``mode: Policy`` with ``policy:`` rules). Keyword ``overrides`` win.

        Raises:
            ConfigurationError: a setting is missing or malformed (named by its
                field path), or a file cannot be read.
        """
        from kubelet_kit.server.config import server_options

        options = server_options(config)
        options.update(overrides)
        return cls(kubelet, **options)

    # -- the applications ------------------------------------------------------------

    def _app(self, kind: str) -> web.Application:
        middlewares: list[Any] = [self._bounded]
        if kind == "secure":
            middlewares.insert(0, self._authenticated)
        app = web.Application(client_max_size=self.limits.max_body_bytes, middlewares=middlewares)
        r = app.router
        r.add_get("/healthz", self._healthz)
        r.add_get("/healthz/{check}", self._healthz)
        if kind == "healthz":
            return app
        for path in ("/pods", "/pods/"):
            r.add_get(path, self._pods)
        r.add_get("/metrics", self._metrics)
        r.add_get("/metrics/probes", self._metrics_probes)
        r.add_get("/metrics/resource", self._metrics_resource)
        r.add_get("/stats/summary", self._stats_summary)
        r.add_post("/stats/summary", self._stats_summary)
        if kind != "secure":
            return app  # the read-only port never serves logs, run or runtime pods
        debug: list[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]] = [
            ("GET", "/runningpods/", self._running_pods),
            ("GET", "/runningpods", self._running_pods),
            ("GET", "/containerLogs/{namespace}/{pod}/{container}", self._container_logs),
            ("POST", "/run/{namespace}/{pod}/{container}", self._run),
            ("POST", "/run/{namespace}/{pod}/{uid}/{container}", self._run),
        ]
        debug.extend(StreamEndpoints(self).routes())
        for method, path, handler in debug:
            r.add_route(
                method,
                path,
                handler if self.enable_debugging_handlers else self._debugging_disabled,
            )
        return app

    @web.middleware
    async def _authenticated(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        peercert = request.transport.get_extra_info("peercert") if request.transport else None
        user = self.authenticator.authenticate(peercert, request.headers.get("Authorization"))
        if user is None:
            return _text(401, "Unauthorized")
        attributes = request_attributes(user, request.method, request.path, self.kubelet.node_name)
        if not any(self.authorizer.authorize(a) for a in attributes):
            log.info("refused %s %s for %s", request.method, request.path, user.name)
            return _text(403, attributes[0].forbidden_message())
        request[_USER] = user
        return await handler(request)

    @web.middleware
    async def _bounded(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.body_exists:
            # No endpoint takes a body; refuse a large one before anything else, and
            # read a small one (within client_max_size) so the connection stays usable.
            length = request.content_length
            if length is not None and length > self.limits.max_body_bytes:
                return _text(
                    413,
                    f"request body of {length} bytes is larger than {self.limits.max_body_bytes}",
                )
            try:
                await request.read()
            except web.HTTPRequestEntityTooLarge:
                return _text(413, f"request body is larger than {self.limits.max_body_bytes} bytes")
        if request.path.startswith(("/containerLogs/", *STREAM_PATH_PREFIXES)):
            return await handler(request)  # streams: bounded by max_follow instead
        try:
            return await wait_for(self.kubelet.clock, handler(request), self.limits.request_timeout)
        except TimeoutError:
            return _text(504, f"request took longer than {self.limits.request_timeout:g}s")

    # -- handlers --------------------------------------------------------------------

    async def _healthz(self, request: web.Request) -> web.Response:
        pleg_ok, pleg_msg = self.kubelet.pleg.healthy()
        ok, msg = self.kubelet.healthy()
        # Kubelet.healthy() reports the PLEG's failure too; keep each under its check.
        loop_ok = ok or (not pleg_ok and msg == pleg_msg)
        checks = {
            "ping": (True, ""),
            "log": (True, ""),
            "syncloop": (loop_ok, msg),
            "pleg": (pleg_ok, pleg_msg),
        }
        name = request.match_info.get("check")
        if name is not None:
            if name not in checks:
                return _text(404, f"no healthz check named {name!r}")
            good, why = checks[name]
            return _text(200, "ok") if good else _text(500, f"internal server error: {why}")
        lines = [
            f"[+]{n} ok" if good else f"[-]{n} failed: {why}" for n, (good, why) in checks.items()
        ]
        if all(good for good, _ in checks.values()):
            if "verbose" in request.query:
                return _text(200, "\n".join([*lines, "healthz check passed"]))
            return web.Response(text="ok")
        return _text(500, "\n".join([*lines, "healthz check failed"]))

    def _pod_json(self, pod: Pod) -> dict[str, Any]:
        status = self.kubelet.pod_status(pod.metadata.uid)
        doc: dict[str, Any] = encode(attrs.evolve(pod, status=status) if status else pod)
        doc.setdefault("apiVersion", "v1")
        doc.setdefault("kind", "Pod")
        return doc

    async def _pods(self, request: web.Request) -> web.Response:
        items = [self._pod_json(p) for p in self.kubelet.pods()]
        return web.json_response(
            {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
        )

    async def _running_pods(self, request: web.Request) -> web.Response:
        try:
            pods = await get_pods(self.kubelet.runtime, all=False)
        except ContainerRuntimeError as exc:
            return _text(500, f"listing the runtime's pods failed: {exc}")
        items = []
        for rp in pods:
            containers = [
                {
                    "name": c.labels.get(labels.CONTAINER_NAME, c.metadata.name),
                    "image": c.image,
                    "resources": {},
                }
                for c in rp.containers
            ]
            items.append(
                {
                    "metadata": {
                        "name": rp.name,
                        "namespace": rp.namespace,
                        "uid": rp.uid,
                        "creationTimestamp": None,
                    },
                    "spec": {"containers": containers},
                    "status": {},
                }
            )
        return web.json_response(
            {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        try:
            await self.metrics.refresh(self.kubelet.runtime)
        except ContainerRuntimeError as exc:  # serve the rest; the gauges keep old values
            log.warning("metrics: listing the runtime failed: %s", exc)
        return self._exposition(self.kubelet.registry)

    async def _metrics_probes(self, request: web.Request) -> web.Response:
        prober_metrics = getattr(self.kubelet.probe_manager, "metrics", None)
        registry = getattr(prober_metrics, "registry", None)
        if not isinstance(registry, CollectorRegistry):
            registry = CollectorRegistry()  # a prober without metrics: an empty page
        return self._exposition(registry)

    async def _metrics_resource(self, request: web.Request) -> web.Response:
        from kubelet_kit.server.resource_metrics import resource_registry

        try:
            summary = await self.summary.summary()
        except ContainerRuntimeError as exc:
            return _text(500, f"collecting stats failed: {exc}")
        return self._exposition(resource_registry(summary))

    @staticmethod
    def _exposition(registry: CollectorRegistry) -> web.Response:
        body = generate_latest(registry)
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    async def _stats_summary(self, request: web.Request) -> web.Response:
        try:
            summary = await self.summary.summary()
        except ContainerRuntimeError as exc:
            return _text(500, f"collecting stats failed: {exc}")
        if request.query.get("only_cpu_and_memory", "").lower() in ("1", "t", "true"):
            summary = _cpu_and_memory(summary)
        return web.json_response(summary)

    async def _debugging_disabled(self, request: web.Request) -> web.Response:
        return _text(405, "Debug endpoints are disabled.")

    def _validate_path(self, request: web.Request) -> web.Response | None:
        m = request.match_info
        for problem in (
            _check_name("namespace", m["namespace"], _LABEL, 63),
            _check_name("pod name", m["pod"], _SUBDOMAIN, 253),
            _check_name("container name", m["container"], _LABEL, 63) if "container" in m else None,
            _check_name("pod uid", m["uid"], _UID, 128) if "uid" in m else None,
        ):
            if problem:
                return _text(400, problem)
        return None

    def _find_pod(self, namespace: str, name: str, uid: str | None = None) -> Pod | None:
        for pod in self.kubelet.pods():
            if (
                pod.metadata.namespace == namespace
                and pod.metadata.name == name
                and (uid is None or pod.metadata.uid == uid)
            ):
                return pod
        return None

    async def _running_container(self, pod: Pod, container: str) -> str | None:
        selector = {labels.POD_UID: pod.metadata.uid, labels.CONTAINER_NAME: container}
        found = await self.kubelet.runtime.list_containers(
            ContainerFilter(state=ContainerState.RUNNING, label_selector=selector)
        )
        return max(found, key=lambda c: c.created_at).id if found else None

    async def _container_logs(self, request: web.Request) -> web.StreamResponse:
        bad = self._validate_path(request)
        if bad is not None:
            return bad
        m = request.match_info
        namespace, name, container = m["namespace"], m["pod"], m["container"]
        opts, errors = parse_log_options(request.query, self.kubelet.clock.now())
        if errors:
            return _text(400, "; ".join(str(e) for e in errors))
        pod = self._find_pod(namespace, name)
        if pod is None:
            return _text(404, f'pod "{name}" in namespace "{namespace}" does not exist')
        if container not in {c.name for c in pod.spec.all_containers()}:
            return _text(404, f'container "{container}" not found in pod "{name}"')
        try:
            directory = container_log_dir(
                self.kubelet.pod_logs_dir, namespace, name, pod.metadata.uid, container
            )
        except ValueError as exc:
            return _text(400, str(exc))
        path = await asyncio.to_thread(find_log_file, directory, opts.previous)
        if path is None:
            what = "previous terminated container" if opts.previous else "container"
            why = ""
            if LOGS not in runtime_capabilities(self.kubelet.runtime):
                why = f": {not_offered(self.kubelet.runtime, LOGS)}"
            return _text(
                400 if opts.previous else 404,
                f'{what} "{container}" in pod "{name}" not found{why}',
            )

        async def running() -> bool:
            try:
                return await self._running_container(pod, container) is not None
            except ContainerRuntimeError:
                return False

        response = web.StreamResponse()
        response.content_type = "text/plain"
        response.charset = "utf-8"
        transport = request.transport
        stream = stream_log(
            path,
            opts,
            clock=self.kubelet.clock,
            running=running,
            max_follow=self.limits.max_follow,
            root=self.kubelet.pod_logs_dir,
            # aiohttp does not cancel a handler whose client left: look for it.
            client_alive=lambda: transport is not None and not transport.is_closing(),
        )
        self.open_streams += 1
        try:
            async with contextlib.aclosing(stream) as chunks:
                async for chunk in chunks:
                    if not response.prepared:
                        await response.prepare(request)
                    await response.write(chunk)
            if not response.prepared:
                await response.prepare(request)
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client went away mid-follow
        except FileNotFoundError:
            if not response.prepared:
                return _text(404, f'log of container "{container}" in pod "{name}" not found')
        except OSError as exc:
            # The kubelet answers 400 when the log cannot be opened; a refused file
            # (a link, a FIFO...) is one. The reason, never a link's target, is told.
            if not response.prepared:
                return _text(400, f'failed to open log file "{path}": {exc.strerror or exc}')
            log.warning("reading the log of %s/%s/%s failed: %s", namespace, name, container, exc)
        finally:
            self.open_streams -= 1
        return response

    async def _run(self, request: web.Request) -> web.Response:
        bad = self._validate_path(request)
        if bad is not None:
            return bad
        m = request.match_info
        pod = self._find_pod(m["namespace"], m["pod"], m.get("uid"))
        if pod is None:
            return _text(404, f'pod "{m["pod"]}" in namespace "{m["namespace"]}" does not exist')
        cmd_text = request.query.get("cmd", "")
        if not cmd_text.strip():
            return _text(400, "cmd: Required value: a command to run")
        if EXEC not in runtime_capabilities(self.kubelet.runtime):
            return _text(501, str(not_offered(self.kubelet.runtime, EXEC)))
        # As the kubelet: the command is the cmd parameter split at single spaces.
        cmd = cmd_text.split(" ")
        try:
            container_id = await self._running_container(pod, m["container"])
            if container_id is None:
                return _text(
                    404, f'container "{m["container"]}" is not running in pod "{m["pod"]}"'
                )
            result = await self.kubelet.runtime.exec_sync(
                container_id, cmd, self.limits.exec_timeout
            )
        except DeadlineExceededError:
            return _text(500, f"command {cmd_text!r} timed out after {self.limits.exec_timeout:g}s")
        except ContainerRuntimeError as exc:
            return _text(500, f"command {cmd_text!r} failed: {exc}")
        output = result.stdout + result.stderr
        if result.exit_code != 0:
            return web.Response(
                status=500,
                body=output + (f"command {cmd_text!r} exited with {result.exit_code}\n").encode(),
            )
        return web.Response(body=output, content_type="application/json")

    # -- lifecycle -------------------------------------------------------------------

    def _tls_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(str(self.tls_cert_file), str(self.tls_private_key_file))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(
                f"tlsCertFile/tlsPrivateKeyFile: cannot load {self.tls_cert_file} with "
                f"{self.tls_private_key_file}: {exc}"
            ) from None
        self.authenticator.configure_tls(context)
        return context

    async def _listen(
        self, kind: str, host: str, port: int, ssl_context: ssl.SSLContext | None
    ) -> int:
        runner = web.AppRunner(
            self._app(kind),
            handle_signals=False,
            access_log=None,
            keepalive_timeout=self.limits.keepalive_timeout,
            max_line_size=self.limits.max_line_bytes,
            max_field_size=self.limits.max_field_bytes,
            max_headers=self.limits.max_headers,
        )
        await runner.setup()
        self._runners.append(runner)
        site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
        await site.start()
        server = site._server  # the bound port when 0 was asked for
        sockets = getattr(server, "sockets", None) or []
        bound: int = sockets[0].getsockname()[1] if sockets else port
        log.info("serving the %s API on %s:%d", kind, host, bound)
        return bound

    async def start(self) -> None:
        """Bind every configured port and start serving.

        Raises:
            ConfigurationError: the certificate or CA cannot be loaded.
            OSError: a port cannot be bound.
        """
        self._stopped.clear()
        try:
            if self.port is not None:
                self.port = await self._listen(
                    "secure", self.address, self.port, self._tls_context()
                )
            if self.read_only_port is not None:
                self.read_only_port = await self._listen(
                    "read-only", self.address, self.read_only_port, None
                )
            if self.healthz_port is not None:
                self.healthz_port = await self._listen(
                    "healthz", self.healthz_address, self.healthz_port, None
                )
        except BaseException:
            await self.stop()
            raise
        self._tasks.append(
            asyncio.create_task(
                self.metrics.watch_pod_starts(self.kubelet.subscribe(), self.kubelet.clock),
                name="pod-start-metrics",
            )
        )

    async def stop(self) -> None:
        """Stop listening and end open requests (log follows too). Idempotent."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        runners, self._runners = self._runners, []
        for runner in runners:
            await runner.cleanup()
        self._stopped.set()

    async def run(self) -> None:
        """Serve until :meth:`stop` (or cancellation)."""
        await self.start()
        try:
            await self._stopped.wait()
        finally:
            await self.stop()

    async def __aenter__(self) -> KubeletServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
