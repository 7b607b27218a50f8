"""The four probe handlers (exec, HTTP GET, TCP socket, gRPC health) and a dispatcher.

Each handler runs one probe and returns a :class:`ProbeOutcome` with the kubelet's
result and output strings (``pkg/probe/...``):

* **exec** runs the command through ``Runtime.exec_sync`` with the probe's timeout:
  exit 0 succeeds, any other exit fails with the output (stdout then stderr, at
  most 10 KiB) as the message, and a ``DeadlineExceededError`` fails with
  ``command "<cmd>" timed out``. On a runtime that does not offer ``exec``
  (:func:`~kubelet_kit.container.runtime_capabilities`) the probe errs with
  ``runtime <name> does not offer exec``. ``$(VAR)`` in the command is expanded from the
  container's ``env`` as the kubelet does (static values only).
* **HTTP GET** (aiohttp; HTTPS without certificate verification, no proxies, no
  keep-alive): 2xx succeeds with the body as output, 3xx succeeds with a warning
  (``Probe terminated redirects, Response body: ...``), anything else fails with
  ``HTTP probe failed with statuscode: N``; transport errors and timeouts fail.
  Redirects are followed only to the same host name (any port), at most 10
  requests in all; a redirect elsewhere ends the chain and its 3xx counts as
  above. At most 10 KiB of the body is read. ``User-Agent: kube-probe/<ver>`` and
  ``Accept: */*`` are sent unless the probe sets them; a header set to ``""``
  is not sent.
* **TCP** succeeds once a connection is established, and closes it at once.
* **gRPC** calls ``grpc.health.v1.Health/Check`` for the probe's service;
  ``SERVING`` succeeds with ``service healthy``, anything else fails with the
  kubelet's messages.

A handler that cannot run at all (a named port the container does not declare,
an exec the runtime refuses) returns :attr:`ProbeStatus.UNKNOWN`: the kubelet
calls that a prober error, retries it up to 3 times, and then discards it.

Timeouts: every handler is bounded by ``timeoutSeconds`` measured on the injected
clock, and real network I/O is also bounded by the same number of real seconds,
so a FakeClock test can time a probe out without waiting and a real agent never
hangs on a peer.
"""

from __future__ import annotations

import asyncio
import enum
import ipaddress
import logging
import os
import socket
from collections.abc import Awaitable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import attrs

from kubelet_kit._lazy import lazy_exports
from kubelet_kit.api import Container, EnvVar, Pod, Probe
from kubelet_kit.api.expand import expand_all
from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.container import RuntimeCore
from kubelet_kit.container.interfaces import ExecRuntime
from kubelet_kit.container.optional import EXEC, not_offered, runtime_capabilities
from kubelet_kit.errors import ContainerRuntimeError, DeadlineExceededError
from kubelet_kit.prober.interfaces import ProbeKind

if TYPE_CHECKING:
    import aiohttp

    from kubelet_kit.prober._grpc import grpc_probe
    from kubelet_kit.prober._http import format_probe_url, http_probe

__all__ = [
    "KUBE_PROBE_USER_AGENT",
    "MAX_PROBE_RETRIES",
    "MAX_READ_LENGTH",
    "MAX_REDIRECT_REQUESTS",
    "ProbeOutcome",
    "ProbeStatus",
    "Prober",
    "exec_probe",
    "expand_command",
    "format_probe_url",
    "grpc_probe",
    "http_probe",
    "join_host_port",
    "resolve_port",
    "tcp_probe",
]

# The HTTP and gRPC handlers live in their own modules, imported when first used:
# they need aiohttp and grpc, which an agent whose pods probe only by exec or TCP
# (or not at all) never loads.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "format_probe_url": "kubelet_kit.prober._http",
        "http_probe": "kubelet_kit.prober._http",
        "grpc_probe": "kubelet_kit.prober._grpc",
    },
    __all__,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Most output kept from an exec probe and most body read from an HTTP probe (10 KiB).
MAX_READ_LENGTH: Final = 10 * 1024
#: Most requests one HTTP probe makes while following redirects (Go's default policy).
MAX_REDIRECT_REQUESTS: Final = 10
#: How often the kubelet runs a probe that errored before giving up on that period.
MAX_PROBE_RETRIES: Final = 3
#: The Kubernetes minor version whose kubelet this package follows.
KUBERNETES_VERSION: Final = "1.34"
#: The kubelet's probe User-Agent: ``kube-probe/<major>.<minor>``.
KUBE_PROBE_USER_AGENT: Final = f"kube-probe/{KUBERNETES_VERSION}"


class ProbeStatus(enum.Enum):
    """What one run of a handler found (``pkg/probe`` ``Result``)."""

    SUCCESS = "success"
    #: Success, with something worth a warning (an HTTP redirect not followed).
    WARNING = "warning"
    FAILURE = "failure"
    #: The prober itself erred; the run says nothing about the container.
    UNKNOWN = "unknown"


@attrs.frozen
class ProbeOutcome:
    """Result of one handler run.

    Attributes:
        status: Success, warning, failure or unknown (prober error).
        output: The handler's output: the body, the command's output, or the
            failure or error message, in the kubelet's words.
    """

    status: ProbeStatus
    output: str = ""

    @property
    def succeeded(self) -> bool:
        """True for SUCCESS and WARNING (the kubelet counts a warning as success)."""
        return self.status in (ProbeStatus.SUCCESS, ProbeStatus.WARNING)


def _success(output: str = "") -> ProbeOutcome:
    return ProbeOutcome(ProbeStatus.SUCCESS, output)


def _failure(output: str) -> ProbeOutcome:
    return ProbeOutcome(ProbeStatus.FAILURE, output)


def _unknown(output: str) -> ProbeOutcome:
    return ProbeOutcome(ProbeStatus.UNKNOWN, output)


def _go_seconds(seconds: float) -> str:
    # Go prints a whole-second time.Duration as "1s", "30s".
    return f"{seconds:g}s"


def _errno_text(exc: OSError) -> str:
    # Go prints the errno's text in lower case ("connection refused"); asyncio's
    # message ("Connect call failed (...)") is not what a user of the kubelet reads.
    text = os.strerror(exc.errno) if exc.errno else (exc.strerror or str(exc))
    return text[:1].lower() + text[1:]


async def _bounded(clock: Clock, awaitable: Awaitable[T], timeout: float) -> T:
    """Await with ``timeout`` on ``clock`` and, for real I/O, in real seconds too.

    Runs ``awaitable`` in the current task (no extra task per probe: a node runs
    thousands of probes a minute). Raises TimeoutError when either bound expires.
    """
    task = asyncio.current_task()
    assert task is not None
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    # The real clock's timers are the loop's own: asyncio.timeout below suffices.
    handle = None if isinstance(clock, RealClock) else clock.call_later(timeout, expire)
    try:
        async with asyncio.timeout(timeout):
            return await awaitable
    except asyncio.CancelledError:
        if expired and task.uncancel() == 0:
            raise TimeoutError(f"timed out after {timeout:g}s") from None
        raise
    finally:
        if handle is not None:
            handle.cancel()


# ------------------------------------------------------------------ helpers


def join_host_port(host: str, port: int) -> str:
    """``host:port``, with brackets around an IPv6 address (Go's JoinHostPort)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def resolve_port(port: int | str, container: Container) -> int:
    """The port number a probe means: a number, or a container port's name.

    A string that names no port of the container is tried as a number, as the
    kubelet does.

    Raises:
        ValueError: the name matches no port and is not a number, or the number
            is outside 1-65535; the message is the kubelet's.
    """
    number: int
    if isinstance(port, int):
        number = port
    else:
        named = next((p.container_port for p in container.ports if p.name == port), None)
        if named is not None:
            number = named
        else:
            try:
                number = int(port, 10)
            except ValueError:
                raise ValueError(f'strconv.Atoi: parsing "{port}": invalid syntax') from None
    if 0 < number < 65536:
        return number
    raise ValueError(f"invalid port number: {number}")


def expand_command(command: Sequence[str], env: Iterable[EnvVar]) -> list[str]:
    """Expand ``$(VAR)`` in each argument from the container's env.

    The kubelet's rules: ``$$`` is a literal ``$``; ``$(NAME)`` becomes the value
    of ``NAME`` (an env var with ``valueFrom`` counts as empty), or stays as
    written when there is no such variable; an unclosed ``$(`` and a ``$``
    before any other character stay as written.
    """
    values: dict[str, str] = {e.name: e.value or "" for e in env}
    return list(expand_all(command, values))


# ------------------------------------------------------------------ exec


async def exec_probe(
    runtime: RuntimeCore, container_id: str, command: Sequence[str], timeout: float
) -> ProbeOutcome:
    """Run ``command`` in the container with ``runtime.exec_sync``.

    The runtime enforces ``timeout`` (it must also kill the command), so no second
    timer is set here.

    Returns:
        SUCCESS on exit 0, FAILURE on another exit or on a timeout, UNKNOWN when
        the runtime could not run the command (not running, unknown id, ...) or
        does not offer ``exec`` (``runtime <name> does not offer exec``).
    """
    if EXEC not in runtime_capabilities(runtime):
        return _unknown(str(not_offered(runtime, EXEC)))
    try:
        result = await cast(ExecRuntime, runtime).exec_sync(container_id, list(command), timeout)
    except DeadlineExceededError:
        return _failure(f'command "{" ".join(command)}" timed out')
    except ContainerRuntimeError as exc:
        return _unknown(str(exc))
    data = (result.stdout + result.stderr)[:MAX_READ_LENGTH]
    output = data.decode("utf-8", errors="replace")
    return _success(output) if result.exit_code == 0 else _failure(output)


# ------------------------------------------------------------------ TCP


async def tcp_probe(host: str, port: int, timeout: float, *, clock: Clock) -> ProbeOutcome:
    """Open a TCP connection to ``host:port`` and close it; connected is success.

    A bare non-blocking socket rather than asyncio streams: a connect is all a TCP
    probe needs, and streams cost twice the CPU per probe.
    """
    addr = join_host_port(host, port)
    loop = asyncio.get_running_loop()
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
        sockaddr: tuple[Any, ...] = (host, port)
    except ValueError:
        try:
            infos = await _bounded(
                clock, loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout
            )
        except TimeoutError:
            return _failure(f"dial tcp: lookup {host}: i/o timeout")
        except OSError as exc:
            return _failure(f"dial tcp: lookup {host}: {exc.strerror or exc}")
        family, _, _, _, sockaddr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        await _bounded(clock, loop.sock_connect(sock, sockaddr), timeout)
    except TimeoutError:
        return _failure(f"dial tcp {addr}: i/o timeout")
    except OSError as exc:
        return _failure(f"dial tcp {addr}: connect: {_errno_text(exc)}")
    finally:
        sock.close()
    return _success()


# ------------------------------------------------------------------ dispatcher


class Prober:
    """Runs a container's probe with the right handler, the kubelet's way.

    Resolves named ports against the container's ports, the host (the probe's
    ``host``, else the pod IP, else ``127.0.0.1`` for an agent whose pods share
    the host network), expands an exec command's ``$(VAR)``, and retries a
    prober error (UNKNOWN) up to :data:`MAX_PROBE_RETRIES` times.

    Holds one aiohttp session (no keep-alive, no certificate checks), made on
    first use; :meth:`aclose` closes it.

    Args:
        runtime: Runs exec probes.
        clock: Measures every timeout.
        user_agent: The User-Agent of HTTP and gRPC probes.
        max_retries: Runs per probe while the handler errs.
    """

    def __init__(
        self,
        runtime: RuntimeCore,
        clock: Clock,
        *,
        user_agent: str = KUBE_PROBE_USER_AGENT,
        max_retries: int = MAX_PROBE_RETRIES,
    ) -> None:
        self.runtime = runtime
        self.clock = clock
        self.user_agent = user_agent
        self.max_retries = max(1, max_retries)
        self._session: aiohttp.ClientSession | None = None

    def _http_session(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(force_close=True, ssl=False, limit=0),
                # Timeouts are the probe's own (see http_probe); no proxies from env.
                timeout=aiohttp.ClientTimeout(total=None),
                trust_env=False,
                auto_decompress=True,
            )
        return self._session

    async def aclose(self) -> None:
        """Close the HTTP session. Idempotent."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def probe(
        self,
        kind: ProbeKind,
        pod: Pod,
        container: Container,
        probe: Probe,
        *,
        pod_ip: str,
        container_id: str,
    ) -> ProbeOutcome:
        """Run ``probe`` once (with retries on prober errors) and return the outcome.

        Never raises for anything the probe finds; cancellable.

        Args:
            kind: Which probe this is (for logs).
            pod: The container's pod.
            container: The probed container's spec.
            probe: Its probe of ``kind``.
            pod_ip: The pod's IP, the default host of HTTP, TCP and gRPC probes.
            container_id: The runtime's container id (a ``<type>://`` prefix is
                dropped before calling the runtime).
        """
        outcome = _unknown("no probe handler")
        for _ in range(self.max_retries):
            outcome = await self.run_once(
                probe, container, pod_ip=pod_ip, container_id=container_id
            )
            if outcome.status is not ProbeStatus.UNKNOWN:
                break
        if outcome.status is ProbeStatus.UNKNOWN:
            log.warning(
                "%s probe of %s/%s container %s errored and resulted in unknown state: %s",
                kind.value,
                pod.namespace,
                pod.name,
                container.name,
                outcome.output,
            )
        elif outcome.status is ProbeStatus.WARNING:
            log.info(
                "%s probe warning for %s/%s container %s: %s",
                kind.value,
                pod.namespace,
                pod.name,
                container.name,
                outcome.output,
            )
        elif outcome.status is ProbeStatus.FAILURE:
            log.info(
                "%s probe failed for %s/%s container %s: %s",
                kind.value,
                pod.namespace,
                pod.name,
                container.name,
                outcome.output,
            )
        return outcome

    async def run_once(
        self, probe: Probe, container: Container, *, pod_ip: str, container_id: str
    ) -> ProbeOutcome:
        """Run the probe's handler once, without retries."""
        timeout = float(probe.timeout_seconds)
        default_host = pod_ip or "127.0.0.1"
        if probe.exec is not None:
            command = expand_command(probe.exec.command, container.env)
            runtime_id = container_id.partition("://")[2] or container_id
            return await exec_probe(self.runtime, runtime_id, command, timeout)
        if probe.http_get is not None:
            action = probe.http_get
            try:
                port = resolve_port(action.port, container)
            except ValueError as exc:
                return _unknown(str(exc))
            from kubelet_kit.prober._http import format_probe_url, http_probe

            url = format_probe_url(action.scheme, action.host or default_host, port, action.path)
            return await http_probe(
                url,
                [(h.name, h.value) for h in action.http_headers],
                timeout,
                clock=self.clock,
                session=self._http_session(),
                user_agent=self.user_agent,
            )
        if probe.tcp_socket is not None:
            try:
                port = resolve_port(probe.tcp_socket.port, container)
            except ValueError as exc:
                return _unknown(str(exc))
            return await tcp_probe(
                probe.tcp_socket.host or default_host, port, timeout, clock=self.clock
            )
        if probe.grpc is not None:
            from kubelet_kit.prober._grpc import grpc_probe

            return await grpc_probe(
                default_host,
                probe.grpc.port,
                probe.grpc.service or "",
                timeout,
                clock=self.clock,
                user_agent=self.user_agent,
            )
        return _unknown(f"missing probe handler for container {container.name}")
