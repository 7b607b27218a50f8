"""Inside a pure cgroup v2 VM: describe the hierarchy, then let the container
manager make the kubepods tree with the default (v2) driver.

Prints ``key=value`` lines for tests/vm/test_cgroup_v2_vm.py to check; exits 0
even when a check there would fail, so the test shows every value.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def show(key: str, value: object) -> None:
    print(f"{key}={value}", flush=True)


def words(path: Path) -> str:
    return " ".join(sorted(path.read_text().split()))


def main() -> None:
    mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    show("cgroup_mounts", " ".join(f"{m[1]}:{m[2]}" for m in mounts if m[2].startswith("cgroup")))
    hierarchies = [
        line.split()[0]
        for line in Path("/proc/cgroups").read_text().splitlines()[1:]
        if line.split()[1] != "0"
    ]
    show("v1_hierarchies", " ".join(hierarchies))
    show("root.controllers", words(CGROUP / "cgroup.controllers"))

    start = time.monotonic()
    from kubelet_kit.cm import CgroupContainerManager

    show("import_seconds", f"{time.monotonic() - start:.2f}")

    manager = CgroupContainerManager()
    start = time.monotonic()
    asyncio.run(manager.start())
    show("start_seconds", f"{time.monotonic() - start:.2f}")
    show("driver", type(manager.driver).__name__)
    kubepods = manager.kubepods_path().strip("/")
    show("kubepods", kubepods)
    show("root.subtree_control", words(CGROUP / "cgroup.subtree_control"))
    show("kubepods.controllers", words(CGROUP / kubepods / "cgroup.controllers"))
    show("kubepods.subtree_control", words(CGROUP / kubepods / "cgroup.subtree_control"))
    show("kubepods.memory.max", (CGROUP / kubepods / "memory.max").read_text().strip())
    show("kubepods.cpu.weight", (CGROUP / kubepods / "cpu.weight").read_text().strip())
    show(
        "kubepods.children",
        " ".join(sorted(p.name for p in (CGROUP / kubepods).iterdir() if p.is_dir())),
    )


if __name__ == "__main__":
    main()
