"""``kubelet-kit cri-server`` as a process of the integration tests: started on a
socket of a fresh directory, serving a runtime named on its command line."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from .kube_apiserver import clean_env


def start_cri_server(runtime: str, base: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``kubelet-kit cri-server`` serving ``runtime`` from ``base``; returns when
    its socket exists.

    Raises:
        RuntimeError: it exited, or made no socket within 30 s; with its log.
    """
    sock = base / "cri.sock"
    log = (base / "cri-server.log").open("wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubelet_kit.cli",
            "cri-server",
            "--listen",
            f"unix://{sock}",
            "--runtime",
            runtime,
            "--root-dir",
            str(base / "state"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env=clean_env(PYTHONUNBUFFERED="1"),
    )
    log.close()
    deadline = time.monotonic() + 30
    while not sock.exists():
        if server.poll() is not None or time.monotonic() > deadline:
            stop_cri_server(server)
            said = (base / "cri-server.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"cri-server --runtime {runtime} did not serve:\n{said}")
        time.sleep(0.1)
    return server, f"unix://{sock}"


def stop_cri_server(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
