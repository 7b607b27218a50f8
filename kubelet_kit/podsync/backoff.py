"""Keyed exponential back-off, as the kubelet's ``flowcontrol.Backoff``.

The kubelet keeps two of these: one for crash loops (``CrashLoopBackOff``, keyed
by pod and container, 10 s doubling to 300 s) and one for image pulls
(``ImagePullBackOff``, keyed by pod uid and image, 10 s doubling to 300 s). There
is no jitter. An entry is forgotten (back to the initial delay) once the event
being judged comes more than ``reset_after`` seconds after the entry's last
update: for a crash loop, a container that ran ten minutes before exiting starts
again at once and from 10 s.

All times are wall-clock seconds from the injected clock's ``now()``: the
runtime's ``finished_at`` timestamps, which the crash-loop checks compare against,
are wall-clock too.

This module also holds the two bits of Go formatting the kubelet's messages use:
:func:`go_quote`
(Go's ``%q``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import attrs

from kubelet_kit.clock import Clock

if TYPE_CHECKING:
    from kubelet_kit.api import Container, Pod

__all__ = [
    "CRASH_BACKOFF_CAP",
    "CRASH_BACKOFF_INITIAL",
    "CRASH_BACKOFF_RESET",
    "IMAGE_BACKOFF_CAP",
    "IMAGE_BACKOFF_INITIAL",
    "Backoff",
    "BackoffEntry",
    "format_pod",
    "go_list",
    "go_quote",
    "stable_key",
]

#: The kubelet's containerBackOffPeriod.
CRASH_BACKOFF_INITIAL = 10.0
#: The kubelet's MaxContainerBackOff.
CRASH_BACKOFF_CAP = 300.0
#: A container that ran longer than this since the last back-off update starts
#: over from the initial delay (the kubelet's HasExpiredFunc, 600 s).
CRASH_BACKOFF_RESET = 600.0
#: The kubelet's backOffPeriod for image pulls.
IMAGE_BACKOFF_INITIAL = 10.0
#: The kubelet's MaxImageBackOff.
IMAGE_BACKOFF_CAP = 300.0


@attrs.frozen
class BackoffEntry:
    """The back-off state of one key.

    Attributes:
        delay: The current back-off window in seconds.
        last_update: Wall-clock time of the last :meth:`Backoff.next` for the key.
    """

    delay: float
    last_update: float


class Backoff:
    """Per-key exponential back-off on an injected clock.

    Args:
        clock: Source of ``now()`` (wall-clock seconds).
        initial: The first back-off window, seconds.
        cap: The largest window, seconds.
        reset_after: An event more than this many seconds after the key's last
            update finds the entry expired: it is not in back-off, and the next
            :meth:`next` starts again from ``initial``. The kubelet uses 600 s for
            crash loops; upstream's generic default is ``2 * cap``, which is what
            ``None`` selects.

    Not thread-safe: use it from one event loop.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        initial: float = CRASH_BACKOFF_INITIAL,
        cap: float = CRASH_BACKOFF_CAP,
        reset_after: float | None = CRASH_BACKOFF_RESET,
    ) -> None:
        if initial <= 0 or cap <= 0:
            raise ValueError(f"Backoff: initial and cap must be positive, got {initial}, {cap}")
        self.clock = clock
        self.initial = float(initial)
        self.cap = float(cap)
        self.reset_after = float(reset_after) if reset_after is not None else 2 * self.cap
        self._entries: dict[str, BackoffEntry] = {}

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> Iterator[str]:
        """Every key with an entry."""
        return iter(list(self._entries))

    def entry(self, key: str) -> BackoffEntry | None:
        """The entry of ``key``, or None."""
        return self._entries.get(key)

    def get(self, key: str) -> float:
        """The current back-off window of ``key`` in seconds (0.0 without an entry)."""
        entry = self._entries.get(key)
        return entry.delay if entry is not None else 0.0

    def _expired(self, event_time: float, entry: BackoffEntry) -> bool:
        return event_time - entry.last_update > self.reset_after

    def next(self, key: str, event_time: float) -> float:
        """Move ``key`` to its next window: the initial one for a new or expired
        entry, else double the current one, capped. Stamps the entry with now.

        Args:
            key: The back-off key.
            event_time: The time of the event being backed off from (for a crash
                loop, when the container finished); it decides expiry.

        Returns:
            The new window in seconds.
        """
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry):
            delay = self.initial
        else:
            delay = min(entry.delay * 2, self.cap)
        self._entries[key] = BackoffEntry(delay, self.clock.now())
        return delay

    def is_in_backoff_since(self, key: str, event_time: float) -> bool:
        """Whether less than the window has passed since ``event_time``.

        The crash-loop check: ``event_time`` is when the container last finished.
        An expired entry (see ``reset_after``) is never in back-off.
        """
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry):
            return False
        return self.clock.now() - event_time < entry.delay

    def is_in_backoff_since_update(self, key: str, event_time: float) -> bool:
        """Whether ``event_time`` is less than the window after the last update.

        The image-pull check, with ``event_time`` = now.
        """
        entry = self._entries.get(key)
        if entry is None or self._expired(event_time, entry):
            return False
        return event_time - entry.last_update < entry.delay

    def reset(self, key: str) -> None:
        """Forget ``key``. Idempotent."""
        self._entries.pop(key, None)

    def forget_prefix(self, prefix: str) -> int:
        """Forget every key starting with ``prefix`` (e.g. a deleted pod's).

        Returns:
            How many entries were forgotten.
        """
        gone = [k for k in self._entries if k.startswith(prefix)]
        for key in gone:
            del self._entries[key]
        return len(gone)

    def gc(self) -> int:
        """Drop entries not updated for more than ``2 * cap`` seconds (upstream's GC).

        Returns:
            How many entries were dropped.
        """
        now = self.clock.now()
        stale = [k for k, e in self._entries.items() if now - e.last_update > 2 * self.cap]
        for key in stale:
            del self._entries[key]
        return len(stale)


# ------------------------------------------------------------------------ keys


def stable_key(pod: Pod, container: Container, container_hash: str) -> str:
    """The crash-loop back-off key of a container (the kubelet's ``GetStableKey``).

    ``<pod name>_<namespace>_<pod uid>_<container name>_<hash>``: a spec change
    (new hash) starts the container's back-off afresh.
    """
    md = pod.metadata
    return f"{md.name}_{md.namespace}_{md.uid}_{container.name}_{container_hash}"


def format_pod(pod: Pod) -> str:
    """The kubelet's ``format.Pod``: ``<name>_<namespace>(<uid>)``."""
    md = pod.metadata
    return f"{md.name}_{md.namespace}({md.uid})"


# ----------------------------------------------------------------- Go formatting


_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(text: str) -> str:
    """Quote ``text`` as Go's ``%q`` (``strconv.Quote``) does."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        # Most texts (image names, pod names): nothing to escape.
        return f'"{text}"'
    out = ['"']
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def go_list(items: Sequence[str]) -> str:
    """Format a string slice as Go's ``%v``: ``[a b c]``."""
    return "[" + " ".join(items) + "]"
