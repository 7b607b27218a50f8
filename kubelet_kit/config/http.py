"""The manifest URL source (the kubelet's ``staticPodURL``)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

import attrs

from kubelet_kit.api import Pod
from kubelet_kit.api.loading import (
    MAX_MANIFEST_BYTES,
    load_pod,
    parse_documents,
    static_pod_uid,
)
from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.config.interfaces import SourceSnapshot
from kubelet_kit.config.static import static_pod_defaults
from kubelet_kit.errors import ValidationError

if TYPE_CHECKING:
    import aiohttp

__all__ = ["HTTPSource"]

log = logging.getLogger(__name__)


class HTTPSource:
    """Pods from a manifest URL (one pod, several YAML documents, or a PodList),
    fetched every ``check_frequency`` seconds (the kubelet's httpCheckFrequency).

    A fetch that fails (connection error, a status other than 200) or a body with
    a bad manifest is reported and changes nothing: the pods from the last good
    fetch keep running. An empty body means "no pods", as for the kubelet.

    Args:
        url: The manifest URL.
        node_name: This node's name.
        headers: Extra request headers (the kubelet's staticPodURLHeader).
        clock: Time source for the checks.
        check_frequency: Seconds between fetches.
        timeout: Seconds one fetch may take.
    """

    name = "http"

    def __init__(
        self,
        url: str,
        *,
        node_name: str = "",
        headers: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        check_frequency: float = 20.0,
        timeout: float = 10.0,
    ) -> None:
        self.url = url
        self.node_name = node_name
        self.headers = dict(headers or {})
        self._clock = clock or RealClock()
        self.check_frequency = check_frequency
        self.timeout = timeout
        self._last_pods: tuple[Pod, ...] = ()

    def parse(self, body: bytes) -> SourceSnapshot:
        """Turn a fetched body into a snapshot; raises ValidationError if any
        document is bad (so that nothing changes)."""
        if not body.strip():
            return SourceSnapshot(())
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError.single("", f"not UTF-8 text: {exc}", source=self.url) from None
        pods: list[Pod] = []
        problems: list[str] = []
        for index, obj in parse_documents(text, source=self.url):
            try:
                pod = load_pod(obj, source=self.url, node_name=self.node_name)
            except ValidationError as exc:
                where = self.url if index is None else f"{self.url}[{index}]"
                problems.extend(f"{where}: {e}" for e in exc.errors)
                continue
            has_uid = isinstance(obj, Mapping) and bool((obj.get("metadata") or {}).get("uid"))
            if not has_uid:
                uid = static_pod_uid(pod, source=self.url, node_name=self.node_name, is_file=False)
                pod = attrs.evolve(pod, metadata=attrs.evolve(pod.metadata, uid=uid))
            pods.append(static_pod_defaults(pod, node_name=self.node_name, source="http"))
        if problems:
            raise ValidationError.single("", "; ".join(problems), source=None)
        return SourceSnapshot(tuple(pods))

    async def fetch(self, session: aiohttp.ClientSession) -> bytes:
        """GET the URL once; raises aiohttp.ClientError or ValueError on failure
        (a status other than 200, or a body over ``MAX_MANIFEST_BYTES``)."""
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=self.timeout)
        async with session.get(self.url, headers=self.headers, timeout=timeout) as resp:
            if resp.status != 200:
                raise ValueError(f"{self.url}: {resp.status} {resp.reason}")
            # Read no more than the cap (and one byte to tell it was passed), as
            # the kubelet reads its URL with ReadAtMost(maxConfigLength).
            body = bytearray()
            async for chunk in resp.content.iter_chunked(64 * 1024):
                body += chunk
                if len(body) > MAX_MANIFEST_BYTES:
                    raise ValueError(
                        f"{self.url}: the manifest is larger than {MAX_MANIFEST_BYTES} bytes"
                    )
            return bytes(body)

    async def snapshots(self) -> AsyncIterator[SourceSnapshot]:
        """Yield a snapshot after each fetch whose content changed."""
        # aiohttp is imported by a running URL source, not with the package
        import aiohttp

        last_body: bytes | None = None
        async with aiohttp.ClientSession() as session:
            while True:
                try:
                    body = await self.fetch(session)
                except (aiohttp.ClientError, ValueError, TimeoutError) as exc:
                    log.warning("manifest URL %s: %s", self.url, exc or type(exc).__name__)
                else:
                    if body != last_body:
                        try:
                            snapshot = self.parse(body)
                        except ValidationError as exc:
                            log.warning("manifest URL %s rejected: %s", self.url, exc)
                            yield SourceSnapshot(self._last_pods, tuple(str(e) for e in exc.errors))
                        else:
                            last_body = body
                            self._last_pods = snapshot.pods
                            yield snapshot
                await self._clock.sleep(self.check_frequency)
