"""The static-pod directory source (the kubelet's ``staticPodPath``)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

from kubelet_kit.api import Pod
from kubelet_kit.api.loading import ManifestResult, manifest_files, read_manifests
from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.config.interfaces import SourceSnapshot
from kubelet_kit.config.static import static_pod_defaults
from kubelet_kit.errors import FieldError

__all__ = ["FileSource"]

log = logging.getLogger(__name__)

_Fingerprint = tuple[tuple[str, int, int], ...]


class FileSource:
    """Pods from a manifest file or a directory of them, re-read as files change.

    The directory is checked every ``check_frequency`` seconds (the kubelet's
    fileCheckFrequency, 20 s) and re-read only when a file's size or mtime changed.
    A file that cannot be loaded is reported (path and field path) and skipped
    while the others run. A file that was good and turns bad keeps its last good
    pods running until it is fixed or removed: an editor's half-saved file never
    stops a pod (the kubelet would drop it).

    Args:
        path: A manifest file or a directory of ``.yaml``/``.yml``/``.json`` files.
        node_name: This node's name (static pods are named ``<name>-<node>``).
        clock: Time source for the checks.
        check_frequency: Seconds between checks.
    """

    name = "file"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        node_name: str = "",
        clock: Clock | None = None,
        check_frequency: float = 20.0,
    ) -> None:
        self.path = Path(path)
        self.node_name = node_name
        self._clock = clock or RealClock()
        self.check_frequency = check_frequency
        self._last_good: dict[str, tuple[Pod, ...]] = {}

    def _fingerprint(self) -> _Fingerprint:
        paths = [self.path]
        if self.path.is_dir():
            paths = sorted(p for p in self.path.iterdir() if not p.name.startswith("."))
        out = []
        for p in paths:
            try:
                st = p.stat()
            except OSError:
                continue
            out.append((str(p), st.st_size, st.st_mtime_ns))
        return tuple(out)

    def read(self) -> SourceSnapshot:
        """Read the path once (blocking file I/O; :meth:`snapshots` runs it in a thread)."""
        if not self.path.exists():
            return SourceSnapshot((), (f"{self.path}: cannot read: no such file or directory",))
        results: list[ManifestResult] = []
        for file in manifest_files(self.path):
            try:
                results.extend(read_manifests(file, node_name=self.node_name))
            except Exception as exc:
                # The loader reports bad content itself; this is a bug in it. The
                # file is treated as bad (reported, skipped, re-read when it changes).
                log.exception("reading %s failed", file)
                results.append(
                    ManifestResult(
                        str(file),
                        None,
                        None,
                        (FieldError("", f"cannot load: {type(exc).__name__}: {exc}"),),
                    )
                )
        by_file: dict[str, list[Pod]] = {}
        bad_files: set[str] = set()
        problems: list[str] = []
        for result in results:
            if result.pod is None:
                bad_files.add(result.source)
                problems.extend(f"{result.location}: {e}" for e in result.errors)
            else:
                pod = static_pod_defaults(result.pod, node_name=self.node_name, source="file")
                by_file.setdefault(result.source, []).append(pod)
        pods: list[Pod] = []
        files = sorted(set(by_file) | bad_files)
        good: dict[str, tuple[Pod, ...]] = {}
        for f in files:
            if f in bad_files and f in self._last_good:
                good[f] = self._last_good[f]  # keep what ran until the file is fixed
            elif f not in bad_files:
                good[f] = tuple(by_file[f])
            pods.extend(good.get(f, ()))
        self._last_good = good
        return SourceSnapshot(tuple(pods), tuple(problems))

    async def snapshots(self) -> AsyncIterator[SourceSnapshot]:
        """Yield the first snapshot at once, then one whenever files change."""
        seen: _Fingerprint | None = None
        last: SourceSnapshot | None = None
        while True:
            fingerprint = await asyncio.to_thread(self._fingerprint)
            if fingerprint != seen:
                seen = fingerprint
                snapshot = await asyncio.to_thread(self.read)
                if snapshot != last:
                    last = snapshot
                    yield snapshot
            await self._clock.sleep(self.check_frequency)
