"""The HTTP GET probe handler: one request (and its same-host redirects) with aiohttp.

The kubelet's rules are in :mod:`kubelet_kit.prober.probers`' docstring; this
module holds the handler alone because it is the one that needs aiohttp, which
the dispatcher imports only for a probe with ``httpGet``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from kubelet_kit.clock import Clock
from kubelet_kit.prober.probers import (
    KUBE_PROBE_USER_AGENT,
    MAX_READ_LENGTH,
    MAX_REDIRECT_REQUESTS,
    ProbeOutcome,
    ProbeStatus,
    _bounded,
    _errno_text,
    _failure,
    _success,
    _unknown,
    join_host_port,
    log,
)

__all__ = ["format_probe_url", "http_probe"]

_REDIRECT_CODES: Final = frozenset({301, 302, 303, 307, 308})


def format_probe_url(scheme: str, host: str, port: int, path: str) -> URL:
    """The URL an HTTP probe requests: lower-cased scheme (default http), host,
    port and the path as given (query string included)."""
    scheme = (scheme or "http").lower()
    if not path.startswith("/"):
        path = "/" + path
    return URL(f"{scheme}://{join_host_port(host, port)}{path}", encoded=True)


def _probe_headers(
    headers: Iterable[tuple[str, str]], user_agent: str
) -> tuple[CIMultiDict[str], list[str]]:
    """The request headers and the automatic headers aiohttp must not add."""
    hdrs: CIMultiDict[str] = CIMultiDict(headers)
    skip: list[str] = []
    if "User-Agent" not in hdrs:
        hdrs["User-Agent"] = user_agent
    elif hdrs["User-Agent"] == "":
        # Go's transport sends no User-Agent when the header is set but empty.
        del hdrs["User-Agent"]
        skip.append("User-Agent")
    if "Accept" not in hdrs:
        hdrs["Accept"] = "*/*"
    elif hdrs["Accept"] == "":
        del hdrs["Accept"]
        skip.append("Accept")
    return hdrs, skip


async def _read_at_most(content: aiohttp.StreamReader, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        data = await content.read(limit - size)
        if not data:
            break
        chunks.append(data)
        size += len(data)
    return b"".join(chunks)


async def http_probe(
    url: URL | str,
    headers: Iterable[tuple[str, str]],
    timeout: float,
    *,
    clock: Clock,
    session: aiohttp.ClientSession,
    user_agent: str = KUBE_PROBE_USER_AGENT,
) -> ProbeOutcome:
    """GET ``url`` the way the kubelet's HTTP prober does (see the module docs).

    Args:
        url: The full URL (see :func:`format_probe_url`).
        headers: The probe's ``httpHeaders`` as (name, value) pairs, repeats kept.
        timeout: Seconds for the whole exchange, redirects and body included.
        clock: Where the timeout is measured (real I/O is bounded in real time too).
        session: The session to use; it should not verify certificates nor keep
            connections alive (:class:`Prober` makes such a session).
        user_agent: Sent unless the probe sets ``User-Agent`` itself.
    """
    start = URL(url, encoded=True) if isinstance(url, str) else url
    hdrs, skip = _probe_headers(headers, user_agent)
    try:
        return await _bounded(clock, _http_exchange(start, hdrs, skip, session), timeout)
    except TimeoutError:
        return _failure(
            f'Get "{start}": context deadline exceeded '
            "(Client.Timeout exceeded while awaiting headers)"
        )


async def _http_exchange(
    start: URL, hdrs: CIMultiDict[str], skip: list[str], session: aiohttp.ClientSession
) -> ProbeOutcome:
    current = start
    requests = 0
    while True:
        requests += 1
        try:
            async with session.get(
                current,
                headers=hdrs,
                skip_auto_headers=skip,
                allow_redirects=False,
                ssl=False,
            ) as resp:
                location = resp.headers.get("Location")
                if resp.status in _REDIRECT_CODES and location is not None:
                    target = current.join(URL(location))
                    if target.host == start.host:
                        if requests >= MAX_REDIRECT_REQUESTS:
                            return _failure(f'Get "{target}": stopped after 10 redirects')
                        current = target
                        continue
                    # Another host: the chain ends here with this 3xx (a warning).
                body = await _read_at_most(resp.content, MAX_READ_LENGTH)
                text = body.decode("utf-8", errors="replace")
                if 200 <= resp.status < 300:
                    return _success(text)
                if 300 <= resp.status < 400:
                    log.debug("probe of %s terminated redirects (%d)", start, resp.status)
                    return ProbeOutcome(
                        ProbeStatus.WARNING, f"Probe terminated redirects, Response body: {text}"
                    )
                return _failure(f"HTTP probe failed with statuscode: {resp.status}")
        except aiohttp.ClientConnectorError as exc:
            addr = join_host_port(exc.host, exc.port or 0)
            reason = _errno_text(exc.os_error)
            return _failure(f'Get "{current}": dial tcp {addr}: connect: {reason}')
        except aiohttp.ClientError as exc:
            return _failure(f'Get "{current}": {exc}')
        except ValueError as exc:
            # A URL aiohttp cannot request (a malformed host or path).
            return _unknown(f'parse "{current}": {exc}')
