"""What this machine offers pods, read from the machine itself."""

from __future__ import annotations

import os

from kubelet_kit.api import Quantity

__all__ = ["detect_capacity"]


def _memory_bytes() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def detect_capacity(*, max_pods: int = 110, root_dir: str = "/") -> dict[str, Quantity]:
    """This machine's capacity: usable CPUs, MemTotal, the root filesystem, pods."""
    st = os.statvfs(root_dir)
    return {
        "cpu": Quantity.from_int(len(os.sched_getaffinity(0))),
        "memory": Quantity.from_int(_memory_bytes()),
        "ephemeral-storage": Quantity.from_int(st.f_blocks * st.f_frsize),
        "pods": Quantity.from_int(max_pods),
    }
