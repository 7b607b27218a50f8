"""Waiting in tests that run real processes or real I/O (bounded, polled)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def wait_until(predicate: Callable[[], bool], what: str = "", timeout: float = 60.0) -> None:
    """Poll ``predicate`` every 0.1 s until it holds.

    Raises:
        AssertionError: still false after ``timeout`` seconds, naming ``what``.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what or predicate}")
        await asyncio.sleep(0.1)
