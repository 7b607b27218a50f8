"""A scrape from another thread, interrupted midway through a collector's copy
of its series while the test's thread adds one."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from prometheus_client import CollectorRegistry

V = TypeVar("V")


class PausingDict(dict[str, V]):
    """A dict whose items are handed out with a pause after the first, as a copy
    interrupted by a garbage collection (whose finalizers let other threads run)
    would hand them out."""

    def __init__(self, values: dict[str, V]) -> None:
        super().__init__(values)
        self.paused = threading.Event()
        self.resume = threading.Event()

    def items(self) -> Iterator[tuple[str, V]]:  # type: ignore[override]
        for n, item in enumerate(super().items()):
            if n == 1:
                self.paused.set()
                self.resume.wait(5)
            yield item


def scrape_while_adding(
    registry: CollectorRegistry, series: PausingDict[V], add: Callable[[], object]
) -> list[BaseException]:
    """Collect ``registry`` in another thread; once its copy of ``series`` has
    paused, call ``add`` in a third thread and give it time to run, then let the
    copy go on. What the scrape raised."""
    failures: list[BaseException] = []

    def scrape() -> None:
        try:
            for family in registry.collect():
                list(family.samples)
        except BaseException as exc:  # reported to the caller, not lost in the thread
            failures.append(exc)

    scraper = threading.Thread(target=scrape)
    scraper.start()
    assert series.paused.wait(5), "the scrape never copied the series"
    adding = threading.Thread(target=add)
    adding.start()
    adding.join(0.1)  # long enough to add the series, were nothing holding it back
    series.resume.set()
    scraper.join(5)
    adding.join(5)
    return failures
