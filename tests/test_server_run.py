"""``kubelet-kit run`` serves the node API: a real agent process on host processes,
its HTTPS port (self-signed certificate), healthz and read-only ports, and its
/metrics checked by promtool."""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import ssl
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import pytest
from hostproc import start_agent, stop_host_pods

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "pods"
NODE = "api-node"
TOKEN = "run-test-token-42"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def agent(tmp_path: Path, require_real: Callable[[bool, str], None]) -> Iterator[dict[str, int]]:
    # The agent makes its self-signed certificate with the openssl command.
    require_real(shutil.which("openssl") is not None, "openssl")
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    shutil.copy(EXAMPLES / "web.yaml", manifests / "web.yaml")
    (tmp_path / "tokens.csv").write_text(f"{TOKEN},ops,7,admins\n")
    ports = {"port": free_port(), "read_only_port": free_port(), "healthz_port": free_port()}
    root = tmp_path / "state"
    proc = None
    try:
        proc, _ = start_agent(
            tmp_path,
            NODE,
            "--address",
            "127.0.0.1",
            "--port",
            str(ports["port"]),
            "--read-only-port",
            str(ports["read_only_port"]),
            "--healthz-port",
            str(ports["healthz_port"]),
            "--token-auth-file",
            str(tmp_path / "tokens.csv"),
            "--cgroups-per-qos=false",  # the host's cgroups stay as they are
            until=f"pod default/web-{NODE}: Running",
        )
        yield ports
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        asyncio.run(stop_host_pods(root / "runtime"))


async def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the agent's self-signed certificate
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session,
        session.get(url, headers=headers) as resp,
    ):
        return resp.status, await resp.text()


async def test_run_serves_the_api(
    agent: dict[str, int], require_real: Callable[[bool, str], None]
) -> None:
    secure = f"https://127.0.0.1:{agent['port']}"
    assert await _get(f"http://127.0.0.1:{agent['healthz_port']}/healthz") == (200, "ok")
    assert (await _get(secure + "/pods"))[0] == 401
    status, body = await _get(secure + "/pods", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and f'"web-{NODE}"' in body
    status, body = await _get(f"http://127.0.0.1:{agent['read_only_port']}/pods")
    assert status == 200 and '"PodList"' in body
    ro = f"http://127.0.0.1:{agent['read_only_port']}"
    assert (await _get(ro + "/containerLogs/default/web-api-node/web"))[0] == 404
    status, metrics = await _get(ro + "/metrics")
    assert status == 200
    assert "kubelet_running_pods 1.0" in metrics
    assert 'kubelet_runtime_operations_total{operation_type="run_podsandbox"}' in metrics
    promtool = shutil.which("promtool")
    require_real(promtool is not None, "promtool (Debian package prometheus)")
    assert promtool is not None
    proc = subprocess.run(
        [promtool, "check", "metrics"],
        input=metrics,
        text=True,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")
