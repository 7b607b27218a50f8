"""ConfigMaps and Secrets for volumes and env from the API server (a
:class:`~kubelet_kit.volume.ConfigSource`).

The volume manager calls a ConfigSource from worker threads; this one runs each
read on the agent's event loop (where the asyncio client lives) and waits for it.
The last value read of each object is kept, so a volume refresh while the API
server is away keeps the data it had instead of failing.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import threading
from collections.abc import Mapping
from typing import Any, Literal

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from kubelet_kit.config.apiserver import api_json
from kubelet_kit.errors import ConfigurationError

__all__ = ["APIConfigSource"]

log = logging.getLogger(__name__)

_TRANSPORT_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)


class APIConfigSource:
    """Reads ConfigMaps and Secrets through the API server.

    Args:
        api_client: A ``kubernetes_asyncio`` ApiClient.
        loop: The event loop the client belongs to (default: the running one at
            construction).
        timeout: Seconds a read may take (real time).
    """

    def __init__(self, api_client: Any, *, loop: asyncio.AbstractEventLoop | None = None,
                 timeout: float = 30.0) -> None:
        self.core: Any = k8s.CoreV1Api(api_client)
        self.loop = loop or asyncio.get_running_loop()
        self.timeout = timeout
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str, str], dict[str, bytes] | None] = {}

    async def read(self, kind: Literal["ConfigMap", "Secret"], namespace: str,
                   name: str) -> dict[str, bytes] | None:
        """Read one object now (on the loop); None when it does not exist.

        Raises:
            ConfigurationError: The server is unreachable and the object was never
                read, or it holds data that is not valid (naming the object).
        """
        key = (kind, namespace, name)
        call = (self.core.read_namespaced_config_map if kind == "ConfigMap"
                else self.core.read_namespaced_secret)
        try:
            obj = await api_json(call(name, namespace, _preload_content=False,
                              _request_timeout=self.timeout))
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
                data.update({k: base64.b64decode(v, validate=True)
                             for k, v in (obj.get("binaryData") or {}).items()})
            else:
                data.update({k: base64.b64decode(v, validate=True)
                             for k, v in (obj.get("data") or {}).items()})
                data.update({k: str(v).encode()
                             for k, v in (obj.get("stringData") or {}).items()})
        except ValueError as exc:
            raise ConfigurationError(f"{kind} {namespace}/{name}: data: not base64: "
                                     f"{exc}") from None
        self._store(key, data)
        return data

    def _store(self, key: tuple[str, str, str], data: dict[str, bytes] | None) -> None:
        with self._lock:
            self._cache[key] = data

    def _fallback(self, key: tuple[str, str, str], why: str) -> dict[str, bytes] | None:
        with self._lock:
            if key in self._cache:
                log.warning("%s %s/%s: API server unreachable (%s); keeping the last data",
                            *key, why)
                cached = self._cache[key]
                return dict(cached) if cached is not None else None
        raise ConfigurationError(f"{key[0]} {key[1]}/{key[2]}: API server unreachable: {why}")

    def _blocking(self, kind: Literal["ConfigMap", "Secret"], namespace: str,
                  name: str) -> dict[str, bytes] | None:
        future = asyncio.run_coroutine_threadsafe(self.read(kind, namespace, name), self.loop)
        return future.result(self.timeout + 5)

    def get_config_map(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        """See :meth:`ConfigSource.get_config_map`. Blocks (call from a worker
        thread, never from the loop itself); raises ConfigurationError."""
        return self._blocking("ConfigMap", namespace, name)

    def get_secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        """See :meth:`ConfigSource.get_secret`. Blocks as :meth:`get_config_map`."""
        return self._blocking("Secret", namespace, name)

    def __call__(self, kind: Literal["ConfigMap", "Secret"], namespace: str,
                 name: str) -> Mapping[str, str] | None:
        """The pod syncer's lookup shape: text values, None when missing. Blocks."""
        data = self._blocking(kind, namespace, name)
        if data is None:
            return None
        return {k: v.decode("utf-8", errors="replace") for k, v in data.items()}
