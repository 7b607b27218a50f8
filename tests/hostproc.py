"""For tests that run the agent, or its pods, as real processes on this machine."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def limited_pod_manifest(token: str) -> str:
    """A Burstable pod (cpu 250m/500m, memory 64Mi/128Mi) whose one process carries
    ``token`` on its command line, so :func:`pids_with` finds it."""
    return f"""\
apiVersion: v1
kind: Pod
metadata: {{name: limited}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    command: ["python3", "-c", "import time; time.sleep(600)", "{token}"]
    resources:
      requests: {{cpu: 250m, memory: 64Mi}}
      limits: {{cpu: 500m, memory: 128Mi}}
"""


def pids_with(token: str) -> list[int]:
    """Processes with ``token`` as one of their command-line arguments."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if token.encode() in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def start_agent(
    tmp: Path, node: str, *args: str, until: str, timeout: float = 30.0
) -> tuple[subprocess.Popen[str], list[str]]:
    """Start ``kubelet-kit run`` on the manifests in ``tmp/manifests`` (state in
    ``tmp/state``, logs in ``tmp/logs``, node name ``node``, manifests read every
    0.3 s) with further ``args``, and read its log up to a line with ``until``.

    Returns the process (its stderr still open) and the lines read so far.

    Raises:
        AssertionError: the agent exited, or no such line within ``timeout`` seconds
            (the agent is killed then); the message holds its log.
    """
    base = [
        "--pod-manifest-path",
        str(tmp / "manifests"),
        "--root-dir",
        str(tmp / "state"),
        "--pod-logs-dir",
        str(tmp / "logs"),
        "--hostname-override",
        node,
        "--file-check-frequency",
        "0.3",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubelet_kit.cli", "run", *base, *args],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    problem = ""
    while not problem:
        line = proc.stderr.readline()
        lines.append(line)
        if until in line:
            return proc, lines
        if not line and proc.poll() is not None:
            problem = "the agent exited"
        elif time.monotonic() > deadline:
            problem = f"no line with {until!r} within {timeout:g}s"
    if proc.poll() is None:
        proc.kill()
    _, rest = proc.communicate()
    raise AssertionError(f"{problem}:\n" + "".join(lines) + rest)


async def stop_host_pods(runtime_dir: Path) -> None:
    """Stop and remove every container and sandbox a HostProcessRuntime keeps in
    ``runtime_dir`` (what an agent left running)."""
    from kubelet_kit.runtimes.host import HostProcessRuntime

    runtime = HostProcessRuntime(runtime_dir)
    for container in await runtime.list_containers():
        await runtime.stop_container(container.id, 0)
    for sandbox in await runtime.list_pod_sandboxes():
        await runtime.remove_pod_sandbox(sandbox.id)
