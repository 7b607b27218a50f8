"""Container log rotation: ``containerLogMaxSize`` and ``containerLogMaxFiles``.

The kubelet's container log manager (``pkg/kubelet/logs/container_log_manager.go``,
every 10 seconds): for each running container whose log file has reached the
maximum size, it

1. removes leftovers of an interrupted compression (``*.tmp``, and a file whose
   compressed copy exists);
2. removes the oldest rotated files, so that with the one about to be made and the
   live file there are at most ``max_files``;
3. compresses every rotated file but the newest (``<log>.<time>.gz``);
4. renames the live file to ``<log>.<YYYYMMDD-hhmmss>`` and asks the runtime to
   open a new one (CRI ``ReopenContainerLog``); if the runtime cannot, the name is
   put back.

Runtimes that cannot reopen a log (that do not offer ``log_reopen``, see
:class:`~kubelet_kit.container.LogReopener`) are left alone: their logs are not
rotated, and one line says so in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import glob
import gzip
import logging
import os
import shutil
from typing import cast

from kubelet_kit.clock import Clock, RealClock
from kubelet_kit.container.interfaces import (
    ContainerFilter,
    ContainerState,
    LogReopener,
    RuntimeCore,
)
from kubelet_kit.container.optional import LOG_REOPEN, not_offered, runtime_capabilities
from kubelet_kit.errors import ConfigurationError, ContainerRuntimeError, UnimplementedError

__all__ = ["LOG_MONITOR_PERIOD", "ContainerLogManager"]

log = logging.getLogger(__name__)

#: Seconds between checks (the kubelet's containerLogMonitorInterval).
LOG_MONITOR_PERIOD = 10.0

_TIME_FORMAT = "%Y%m%d-%H%M%S"  # Go's "20060102-150405"
_COMPRESSED = ".gz"
_TMP = ".tmp"


class ContainerLogManager:
    """Rotates running containers' CRI log files (see the module doc).

    Args:
        runtime: Lists the running containers, gives their log paths and reopens
            their logs.
        max_size: Bytes a log file may reach before it is rotated
            (containerLogMaxSize, 10 MiB by default).
        max_files: Files a container's log may span, the live one included
            (containerLogMaxFiles, 5 by default; at least 2).
        clock: Time for the rotated files' names.

    Raises:
        ConfigurationError: a size that is not positive or fewer than 2 files.
    """

    def __init__(
        self,
        runtime: RuntimeCore,
        *,
        max_size: int = 10 * 1024 * 1024,
        max_files: int = 5,
        clock: Clock | None = None,
    ) -> None:
        if max_size <= 0:
            raise ConfigurationError(f"containerLogMaxSize: must be positive, got {max_size}")
        if max_files < 2:
            raise ConfigurationError(
                f"containerLogMaxFiles: must be greater than 1, got {max_files}"
            )
        self.runtime = runtime
        self.max_size = max_size
        self.max_files = max_files
        self.clock: Clock = clock or RealClock()
        self._disabled = False

    async def rotate_logs(self) -> list[str]:
        """One round: rotate every running container's log that is too large.

        Returns:
            The ids of the containers whose logs were rotated.
        """
        if self._disabled:
            return []
        if LOG_REOPEN not in runtime_capabilities(self.runtime):
            log.warning("container logs are not rotated: %s", not_offered(self.runtime, LOG_REOPEN))
            self._disabled = True
            return []
        runtime = cast(LogReopener, self.runtime)
        core = self.runtime
        rotated = []
        running = await core.list_containers(ContainerFilter(state=ContainerState.RUNNING))
        for container in running:
            try:
                path = (await core.container_status(container.id)).log_path
                if not path:
                    continue
                try:
                    size = os.stat(path).st_size
                except FileNotFoundError:
                    # Renamed, but the reopen never happened (the agent stopped in
                    # between): have the runtime make the file again.
                    await runtime.reopen_container_log(container.id)
                    continue
                if size < self.max_size:
                    continue
                await self._rotate(runtime, container.id, path)
                rotated.append(container.id)
            except UnimplementedError as exc:
                log.warning("container logs are not rotated: %s", exc)
                self._disabled = True
                break
            except (ContainerRuntimeError, OSError) as exc:
                log.warning("rotating the log of container %s failed: %s", container.id, exc)
        return rotated

    async def _rotate(self, runtime: LogReopener, container_id: str, path: str) -> None:
        await asyncio.to_thread(self._prepare, path)
        stamp = _dt.datetime.fromtimestamp(self.clock.now(), _dt.UTC).strftime(_TIME_FORMAT)
        target = f"{path}.{stamp}"
        if os.path.exists(target):
            return  # rotated this second already; next round
        os.rename(path, target)
        try:
            await runtime.reopen_container_log(container_id)
        except BaseException:
            # The runtime still writes to the renamed file: give it its name back.
            with contextlib.suppress(OSError):
                os.rename(target, path)
            raise

    def _prepare(self, path: str) -> None:
        """Steps 1 to 3 of the module doc, on the rotated files of ``path``."""
        rotated = sorted(glob.glob(glob.escape(path) + ".*"))
        # Leftovers of an interrupted compression: its temporary file, or the
        # original of a file already compressed.
        names = set(rotated)
        for leftover in [p for p in rotated if p.endswith(_TMP) or p + _COMPRESSED in names]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(leftover)
            rotated.remove(leftover)
        # Keep max_files - 2: with the one about to be made and the live file,
        # max_files in all. The names sort by time (a .gz after its plain name).
        excess = len(rotated) - (self.max_files - 2)
        for old in rotated[: max(0, excess)]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(old)
        rotated = rotated[max(0, excess) :]
        for plain in [p for p in rotated if not p.endswith(_COMPRESSED)]:
            # The newest rotated file is compressed now, as it stops being newest.
            _compress(plain)


def _compress(path: str) -> None:
    """``path`` -> ``path.gz`` through a temporary file, then the original removed."""
    tmp = path + _TMP
    with open(path, "rb") as src, gzip.open(tmp, "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.rename(tmp, path + _COMPRESSED)
    os.remove(path)
