"""``kubelet-kit run`` as root makes the kubelet's cgroup hierarchy (cgroupsPerQOS):
the pod's process runs in its pod cgroup, under ``--cgroup-root``, with the pod's
limits. Real processes and real cgroups under a test-owned root, removed afterwards."""

from __future__ import annotations

import asyncio
import secrets
import signal
from collections.abc import Callable
from pathlib import Path

from hostproc import limited_pod_manifest, pids_with, start_agent, stop_host_pods

from kubelet_kit.cm.manager import cgroups_unavailable, default_cgroup_driver

NODE = "cg-node"


def _memory_cgroup(pid: int) -> str:
    with open(f"/proc/{pid}/cgroup", encoding="ascii") as f:
        for line in f.read().splitlines():
            _, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(",") or controllers == "":
                return path
    raise AssertionError(f"no memory cgroup for {pid}")


def _limit_of(cgroup: str) -> int:
    v2 = Path("/sys/fs/cgroup" + cgroup, "memory.max")
    if v2.exists():
        return int(v2.read_text())
    return int(Path("/sys/fs/cgroup/memory" + cgroup, "memory.limit_in_bytes").read_text())


def test_run_puts_the_pod_in_its_pod_cgroup_with_its_limits(
    tmp_path: Path, require_real: Callable[[bool, str], None]
) -> None:
    problem = cgroups_unavailable()
    require_real(problem is None, f"pod cgroups ({problem})")
    token = secrets.token_hex(6)
    cgroup_root = f"/kubelet-kit-test-{token}"
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "limited.yaml").write_text(limited_pod_manifest(token))
    root = tmp_path / "state"
    proc = None
    try:
        proc, lines = start_agent(
            tmp_path,
            NODE,
            "--port",
            "0",
            "--healthz-port",
            "0",
            "--cgroup-root",
            cgroup_root,
            "--drain-on-exit",
            until=f"pod default/limited-{NODE}: Running",
        )
        assert "cgroupsPerQOS" not in "".join(lines), "".join(lines)
        (pid,) = pids_with(token)
        cgroup = _memory_cgroup(pid)
        assert cgroup.startswith(f"{cgroup_root}/kubepods/burstable/pod"), cgroup
        pod_cgroup = "/".join(cgroup.split("/")[:5])  # <root>/kubepods/burstable/pod<uid>
        assert _limit_of(pod_cgroup) == 128 << 20

        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, "".join(lines) + err
        assert not pids_with(token), "drained on exit"
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        asyncio.run(stop_host_pods(root / "runtime"))
        asyncio.run(default_cgroup_driver().remove(cgroup_root))
