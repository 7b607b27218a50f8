"""Lifecycle hooks: postStart and preStop handlers (the kubelet's ``HandlerRunner``).

* ``exec``: the command runs in the container through ``Runtime.exec_sync``; a
  non-zero exit or a runtime error fails the hook, and so does a runtime that
  does not offer ``exec`` (``runtime <name> does not offer exec``).
* ``httpGet``: a GET to ``<scheme>://<host>:<port><path>`` with the handler's
  headers; ``host`` defaults to the pod's IP, ``port`` is a number, a numeric
  string or a named container port (an empty one means 80). As upstream, any HTTP
  response counts as success: only a request that gets no response (connection
  refused, reset, TLS failure, a timeout) fails the hook. HTTPS does not verify
  the server's certificate, as the kubelet's prober and hook client do not; an
  HTTPS hook answered by a plain HTTP server is retried once over HTTP without
  the ``Authorization`` header, as upstream does.
* ``tcpSocket``: a TCP connection to host and port; connected is success.
  (Upstream's API keeps this action for compatibility but its handler runner
  refuses it; here it is run.)
* ``sleep``: waits the given seconds on the injected clock.

:meth:`HandlerRunner.run` returns None on success or the failure message the
kubelet would report (``Exec lifecycle hook ([cmd]) for Container "c" in Pod
"name_ns(uid)" failed - error: ..., message: "..."``); it raises nothing for a
failing hook, so the caller decides (kill the container after a failed
postStart, carry on after a failed preStop).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from kubelet_kit.clock import Clock, wait_for
from kubelet_kit.container.interfaces import ExecRuntime, RuntimeCore
from kubelet_kit.container.optional import EXEC, not_offered, runtime_capabilities
from kubelet_kit.errors import ContainerRuntimeError
from kubelet_kit.podsync.backoff import format_pod, go_list, go_quote

if TYPE_CHECKING:
    import aiohttp

    from kubelet_kit.api import Container, LifecycleHandler, Pod

__all__ = [
    "LIFECYCLE_USER_AGENT",
    "HandlerRunner",
    "HookError",
    "resolve_port",
]

#: ``User-Agent`` of hook requests (the kubelet's ``kube-lifecycle/<major>.<minor>``).
LIFECYCLE_USER_AGENT = "kube-lifecycle/1.34"

log = logging.getLogger(__name__)


class HookError(Exception):
    """Why one hook action failed (internal: turned into the kubelet's message)."""


def resolve_port(port: int | str, container: Container) -> int:
    """The port number a handler's ``port`` names (the kubelet's ``resolvePort``).

    Raises:
        HookError: a name that no container port has.
    """
    if isinstance(port, int):
        return port
    if port == "":
        return 80
    if port.isdigit():
        return int(port)
    for spec in container.ports:
        if spec.name == port:
            return spec.container_port
    raise HookError(f"couldn't find port: {port} in {container.name}")


def _plain_http_answer(exc: aiohttp.ClientConnectorSSLError) -> bool:
    """Whether a TLS handshake failed because the server spoke plain HTTP."""
    cause = exc.os_error
    return isinstance(cause, ssl.SSLError) and cause.reason == "WRONG_VERSION_NUMBER"


def _join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class HandlerRunner:
    """Runs lifecycle handlers against a runtime.

    Args:
        runtime: Where ``exec`` handlers run.
        clock: The clock ``sleep`` handlers wait on.
        http_timeout: Seconds an ``httpGet`` or ``tcpSocket`` handler may take
            (None: no limit; a preStop hook is bounded by the grace period anyway).
        session_factory: Builds the aiohttp session for ``httpGet`` handlers
            (injectable for tests).
    """

    def __init__(
        self,
        runtime: RuntimeCore,
        clock: Clock,
        *,
        http_timeout: float | None = None,
        session_factory: Callable[[], aiohttp.ClientSession] | None = None,
    ) -> None:
        self.runtime = runtime
        self.clock = clock
        self.http_timeout = http_timeout
        # aiohttp is imported by the first httpGet handler, not with the agent
        self._session_factory = session_factory

    async def run(
        self,
        container_id: str,
        pod: Pod,
        container: Container,
        handler: LifecycleHandler,
        *,
        pod_ips: Sequence[str] = (),
    ) -> str | None:
        """Run one handler to completion.

        Blocks until the action finishes (cancel it to bound it, as a preStop
        grace period does). Not idempotent: the action runs each call.

        Args:
            container_id: The runtime id of the container the hook is for.
            pod: The pod.
            container: The container's spec (for named ports and the message).
            handler: The postStart or preStop handler.
            pod_ips: The pod's IPs; the first is the default ``httpGet``/
                ``tcpSocket`` host.

        Returns:
            None on success, else the kubelet's failure message.
        """
        where = f"for Container {go_quote(container.name)} in Pod {go_quote(format_pod(pod))}"
        if handler.exec is not None:
            command = list(handler.exec.command)
            try:
                await self._exec(container_id, command)
            except HookError as exc:
                error, output = exc.args[0], exc.args[1] if len(exc.args) > 1 else ""
                return (
                    f"Exec lifecycle hook ({go_list(command)}) {where} failed - error: "
                    f"{error}, message: {go_quote(output)}"
                )
            return None
        if handler.http_get is not None:
            try:
                await self._http_get(pod, container, handler, pod_ips)
            except HookError as exc:
                return (
                    f"HTTP lifecycle hook ({handler.http_get.path}) {where} failed - error: {exc}"
                )
            return None
        if handler.tcp_socket is not None:
            try:
                await self._tcp(container, handler, pod_ips)
            except HookError as exc:
                return f"TCP lifecycle hook {where} failed - error: {exc}"
            return None
        if handler.sleep is not None:
            # Cancelled (by the end of a grace period) like any other handler.
            await self.clock.sleep(handler.sleep.seconds)
            return None
        return f"Cannot run handler: invalid handler: {handler!r}"

    async def _exec(self, container_id: str, command: list[str]) -> None:
        if EXEC not in runtime_capabilities(self.runtime):
            raise HookError(str(not_offered(self.runtime, EXEC)), "")
        try:
            result = await cast(ExecRuntime, self.runtime).exec_sync(container_id, command, None)
        except ContainerRuntimeError as exc:
            raise HookError(str(exc), "") from exc
        output = (result.stdout + result.stderr).decode(errors="replace")
        if result.exit_code != 0:
            # The CRI client's wording for a command that exited non-zero.
            stderr = result.stderr.decode(errors="replace")
            raise HookError(
                f"command '{' '.join(command)}' exited with {result.exit_code}: {stderr}",
                output,
            )

    def _host(self, explicit: str, pod_ips: Sequence[str]) -> str:
        if explicit:
            return explicit
        if not pod_ips:
            raise HookError("failed to find networking container: the pod has no IP")
        return pod_ips[0]

    async def _http_get(
        self,
        pod: Pod,
        container: Container,
        handler: LifecycleHandler,
        pod_ips: Sequence[str],
    ) -> None:
        import aiohttp

        action = handler.http_get
        assert action is not None
        session_factory = self._session_factory or aiohttp.ClientSession
        host = self._host(action.host, pod_ips)
        port = resolve_port(action.port, container)
        scheme = (action.scheme or "HTTP").lower()
        path = action.path if action.path.startswith("/") else "/" + action.path
        url = f"{scheme}://{_join_host_port(host, port)}{path}"
        headers = {"User-Agent": LIFECYCLE_USER_AGENT, "Accept": "*/*"}
        for header in action.http_headers:
            # A header given in the spec replaces the defaults of the same name.
            for key in [k for k in headers if k.lower() == header.name.lower()]:
                del headers[key]
            headers[header.name] = header.value

        async def get(target: str, send: dict[str, str]) -> None:
            async with (
                session_factory() as session,
                session.get(target, headers=send, ssl=False, allow_redirects=False) as response,
            ):
                # Read a little of the body, as upstream does before closing.
                await response.content.read(10 * 1024)

        try:
            await wait_for(self.clock, get(url, headers), self.http_timeout)
        except aiohttp.ClientConnectorSSLError as exc:
            if not _plain_http_answer(exc):
                raise HookError(f"Get {go_quote(url)}: {exc}") from exc
            # An HTTPS hook answered by a plain HTTP server: upstream retries once
            # over HTTP, without the Authorization header, and succeeds if that does.
            log.warning("HTTPS lifecycle hook %s got an HTTP answer; retrying with HTTP", url)
            plain = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            http_url = "http" + url[len("https") :]
            try:
                await wait_for(self.clock, get(http_url, plain), self.http_timeout)
            except (aiohttp.ClientError, OSError, TimeoutError):
                raise HookError(f"Get {go_quote(url)}: {exc}") from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise HookError(f"Get {go_quote(url)}: {exc or type(exc).__name__}") from exc

    async def _tcp(
        self, container: Container, handler: LifecycleHandler, pod_ips: Sequence[str]
    ) -> None:
        action = handler.tcp_socket
        assert action is not None
        host = self._host(action.host, pod_ips)
        port = resolve_port(action.port, container)
        try:
            _, writer = await wait_for(
                self.clock,
                asyncio.open_connection(host, port, family=socket.AF_UNSPEC),
                self.http_timeout,
            )
        except (OSError, TimeoutError) as exc:
            raise HookError(f"dial tcp {_join_host_port(host, port)}: {exc}") from exc
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
