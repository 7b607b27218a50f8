"""A FIFO whose reader must not wait: the helper that frees one that does."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def unblock_fifo_later(path: Path, delay: float = 3.0) -> Iterator[threading.Event]:
    """After ``delay`` seconds open ``path`` for writing and close it: a reader stuck
    in ``open()`` of the FIFO then goes on. The event tells whether that happened."""
    fired = threading.Event()

    def write() -> None:
        fired.set()
        with contextlib.suppress(OSError):  # ENXIO: nobody has it open to read
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    timer = threading.Timer(delay, write)
    timer.start()
    try:
        yield fired
    finally:
        timer.cancel()
