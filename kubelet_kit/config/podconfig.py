"""PodConfig: every source's snapshots merged into one stream of pod updates."""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
from collections.abc import AsyncIterator, Callable

from kubelet_kit.api import Pod
from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.config.interfaces import PodSource, PodUpdate, SourceSnapshot
from kubelet_kit.config.merge import PodStorage

__all__ = ["PodConfig"]

log = logging.getLogger(__name__)

#: Back-off before a failed source is started again, doubling up to the maximum:
#: the kubelet's retryPeriod and maxRetryPeriod for its file watch (1 s, 20 s).
_RETRY_PERIOD = 1.0
_MAX_RETRY_PERIOD = 20.0


class PodConfig:
    """Runs pod sources and merges them (the kubelet's ``PodConfig``).

    Iterate :meth:`updates` (single consumer) for incremental updates; each
    source's problems (rejected manifests) are logged once per change and kept in
    :attr:`problems`, and ``on_problem`` is called with each new line.

    Args:
        sources: The pod sources; their names must differ.
        clock: Time source for the first-seen annotation.
        on_problem: Called with each new problem line (a rejected manifest).
    """

    def __init__(
        self,
        *sources: PodSource,
        clock: Clock | None = None,
        on_problem: Callable[[str], None] | None = None,
    ) -> None:
        names = [s.name for s in sources]
        if len(set(names)) != len(names):
            raise ValueError(
                f"pod sources need distinct names, got {names}: the API server's source "
                "and ProgrammaticSource are both 'api' by default; name one of them "
                "otherwise, e.g. ProgrammaticSource('local')"
            )
        self.sources = list(sources)
        self._clock = clock or RealClock()
        self._storage = PodStorage()
        self._seen: set[str] = set()
        self.problems: dict[str, tuple[str, ...]] = {}
        self._on_problem = on_problem

    def pods(self) -> list[Pod]:
        """Every pod every source wants now."""
        return self._storage.pods()

    def sources_ready(self) -> bool:
        """True once every source delivered its first snapshot. Until then the agent
        must not remove runtime pods it cannot match to a source."""
        return all(s.name in self._seen for s in self.sources)

    def apply(self, source: str, snapshot: SourceSnapshot) -> list[PodUpdate]:
        """Merge one snapshot (for callers that drive sources themselves)."""
        now = _dt.datetime.fromtimestamp(self._clock.now(), _dt.UTC)
        updates, refused = self._storage.merge(source, snapshot.pods, now=now)
        problems = tuple(snapshot.problems) + tuple(refused)
        old = set(self.problems.get(source, ()))
        for line in problems:
            if line not in old:
                log.error("pod source %s: %s", source, line)
                if self._on_problem is not None:
                    self._on_problem(line)
        self.problems[source] = problems
        self._seen.add(source)
        return updates

    async def updates(self) -> AsyncIterator[PodUpdate]:
        """Run every source and yield the merged updates as they come."""
        queue: asyncio.Queue[PodUpdate] = asyncio.Queue()

        async def pump(source: PodSource) -> None:
            # A source that fails (a bug, or input its code did not expect) is
            # logged and started again after a back-off, so that it never takes
            # the other sources or the agent down; its pods stay as last merged.
            delay = _RETRY_PERIOD
            while True:
                try:
                    async for snapshot in source.snapshots():
                        delay = _RETRY_PERIOD
                        for update in self.apply(source.name, snapshot):
                            queue.put_nowait(update)
                    return
                except Exception as exc:
                    log.exception(
                        "pod source %s failed; restarting it in %.0fs", source.name, delay
                    )
                    if self._on_problem is not None:
                        self._on_problem(
                            f"pod source {source.name} failed: {type(exc).__name__}: {exc}"
                        )
                await self._clock.sleep(delay)
                delay = min(delay * 2, _MAX_RETRY_PERIOD)

        tasks = [asyncio.create_task(pump(s), name=f"pod-source-{s.name}") for s in self.sources]
        get: asyncio.Future[PodUpdate] | None = None
        try:
            while True:
                get = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait([get, *tasks], return_when=asyncio.FIRST_COMPLETED)
                if get in done:
                    yield get.result()
                    continue
                get.cancel()
                for task in done:
                    if task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
                tasks = [t for t in tasks if not t.done()]
                if not tasks and queue.empty():
                    return
        finally:
            # The pending read too: left alone it would be destroyed pending when
            # the loop closes (and warn about it).
            if get is not None and not get.done():
                get.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
