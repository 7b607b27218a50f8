"""ConfigMaps and Secrets for volumes and env from the API server (a
:class:`~kubelet_kit.volume.ConfigSource`).

A ConfigSource is called synchronously: from the volume manager's worker threads,
and (for env vars) from the pod syncer on the agent's own event loop. So the
reads run on a private event loop in a thread of their own, with their own client
built from the same configuration, and the caller waits for them (waiting for
the agent's loop from the agent's loop could never finish). A call made on an
event loop blocks every task there, so it gets the last value read at once when
there is one (the read refreshes it in the background), and otherwise waits at
most ``loop_timeout``. The last value read of each object is kept, so a refresh
while the API server is away keeps the data it had.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import logging
import threading
from collections.abc import Mapping
from typing import Any, Literal

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from kubelet_kit.cluster.client import client_like
from kubelet_kit.config.apiserver import api_json
from kubelet_kit.errors import ConfigurationError

__all__ = ["APIConfigSource"]

log = logging.getLogger(__name__)

_TRANSPORT_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class APIConfigSource:
    """Reads ConfigMaps and Secrets through the API server.

    Args:
        api_client: A ``kubernetes_asyncio`` ApiClient; its configuration (server,
            credentials) is used for a private client.
        timeout: Seconds a read may take (real time).
        loop_timeout: Seconds a call made on an event loop waits for an object
            never read before (later calls there get the last value read at once,
            refreshed in the background).
    """

    def __init__(
        self, api_client: Any, *, timeout: float = 30.0, loop_timeout: float = 5.0
    ) -> None:
        self.configuration = api_client.configuration
        # The private client shares this one's request budget (kubeAPIQPS/Burst).
        self._api_client = api_client
        self.timeout = timeout
        self.loop_timeout = loop_timeout
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str, str], dict[str, bytes] | None] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.core: Any = None

    def _private_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="api-config-source", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def close(self) -> None:
        """Close the private client and stop its thread. Idempotent; blocks briefly."""
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        # Reads still in flight (a refresh started in the background, a read whose
        # caller stopped waiting) end here, not as coroutines dropped with the loop.
        asyncio.run_coroutine_threadsafe(_cancel_others(), loop).result(self.timeout)
        if self.core is not None:
            client = self.core.api_client
            asyncio.run_coroutine_threadsafe(client.close(), loop).result(self.timeout)
            self.core = None
        loop.call_soon_threadsafe(loop.stop)
        thread.join(self.timeout)
        loop.close()

    async def _read(
        self, kind: Literal["ConfigMap", "Secret"], namespace: str, name: str
    ) -> dict[str, bytes] | None:
        """Read one object now (on the private loop); None when it does not exist.

        Raises:
            ConfigurationError: The server cannot be read (unreachable, or it
                refuses) and the object was never read, or it holds data that is
                not valid (naming the object).
        """
        key = (kind, namespace, name)
        if self.core is None:
            self.core = k8s.CoreV1Api(await client_like(self._api_client))
        call = (
            self.core.read_namespaced_config_map
            if kind == "ConfigMap"
            else self.core.read_namespaced_secret
        )
        try:
            obj = await api_json(
                call(name, namespace, _preload_content=False, _request_timeout=self.timeout)
            )
        except ApiException as exc:
            if exc.status == 404:
                self._store(key, None)
                return None
            return self._fallback(key, f"{exc.status} {exc.reason}")
        except _TRANSPORT_ERRORS as exc:
            return self._fallback(key, str(exc) or type(exc).__name__)
        data: dict[str, bytes] = {}
        try:
            if kind == "ConfigMap":
                data.update({k: str(v).encode() for k, v in (obj.get("data") or {}).items()})
                data.update(
                    {
                        k: base64.b64decode(v, validate=True)
                        for k, v in (obj.get("binaryData") or {}).items()
                    }
                )
            else:
                data.update(
                    {
                        k: base64.b64decode(v, validate=True)
                        for k, v in (obj.get("data") or {}).items()
                    }
                )
                data.update({k: str(v).encode() for k, v in (obj.get("stringData") or {}).items()})
        except ValueError as exc:
            raise ConfigurationError(
                f"{kind} {namespace}/{name}: data: not base64: {exc}"
            ) from None
        self._store(key, data)
        return data

    def _store(self, key: tuple[str, str, str], data: dict[str, bytes] | None) -> None:
        with self._lock:
            self._cache[key] = data

    def _fallback(self, key: tuple[str, str, str], why: str) -> dict[str, bytes] | None:
        with self._lock:
            if key in self._cache:
                # A refusal (403 as its namespace is deleted, 5xx) or a transport
                # error alike: the last good data serves until a read succeeds.
                log.warning(
                    "%s %s/%s: cannot read it from the API server (%s); keeping the last data",
                    *key,
                    why,
                )
                cached = self._cache[key]
                return dict(cached) if cached is not None else None
        raise ConfigurationError(
            f"{key[0]} {key[1]}/{key[2]}: cannot read it from the API server: {why}"
        )

    def _blocking(
        self, kind: Literal["ConfigMap", "Secret"], namespace: str, name: str
    ) -> dict[str, bytes] | None:
        key = (kind, namespace, name)
        future = asyncio.run_coroutine_threadsafe(
            self._read(kind, namespace, name), self._private_loop()
        )
        wait = self.timeout + 5
        if _on_event_loop():
            # Called on an event loop (the pod syncer's env lookups): every task of
            # the agent waits with us. Serve the last value read, if any, and let
            # the read refresh it in the background; else wait only briefly.
            with self._lock:
                if key in self._cache:
                    cached = self._cache[key]
                    return dict(cached) if cached is not None else None
            wait = self.loop_timeout
        try:
            return future.result(wait)
        except concurrent.futures.TimeoutError:
            raise ConfigurationError(
                f"{kind} {namespace}/{name}: no answer from the API server within {wait:g}s"
            ) from None

    def get_config_map(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        """See :meth:`ConfigSource.get_config_map`. Blocks for one request (on an
        event loop: at most ``loop_timeout``, or not at all once read); raises
        ConfigurationError."""
        return self._blocking("ConfigMap", namespace, name)

    def get_secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        """See :meth:`ConfigSource.get_secret`. Blocks as :meth:`get_config_map`."""
        return self._blocking("Secret", namespace, name)

    def __call__(
        self, kind: Literal["ConfigMap", "Secret"], namespace: str, name: str
    ) -> Mapping[str, str] | None:
        """The pod syncer's lookup shape: text values, None when missing. Blocks."""
        data = self._blocking(kind, namespace, name)
        if data is None:
            return None
        return {k: v.decode("utf-8", errors="replace") for k, v in data.items()}


async def _cancel_others() -> None:
    """Cancel every other task of the running loop and wait for them to end."""
    current = asyncio.current_task()
    others = [task for task in asyncio.all_tasks() if task is not current]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
