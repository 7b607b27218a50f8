"""kubectl's streaming commands through a real kube-apiserver 1.20.2 to a
kubelet-kit node: ``exec`` (with stdin, exit codes), ``attach``, ``port-forward``,
``cp`` and ``logs -f``, on both runtimes.

kubectl 1.20 speaks SPDY/3.1 to the API server, which upgrades a connection to
the node's published port. On containerd the node finds the container and
proxies the connection to containerd's streaming URL (as the kubelet does with
``redirectContainerStreaming`` off); on the embedded host-process runtime the
node speaks SPDY itself. Every wait is bounded in real time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from .containerd import BUSYBOX_IMAGE
from .kube_apiserver import free_port
from .test_kube_apiserver import Node
from .test_kube_apiserver import node as plain_node

plain = plain_node  # one agent per test, joined to the API server


@pytest.fixture(params=["containerd", "host"])
def node(plain_node: Node, request: pytest.FixtureRequest) -> Node:
    """The test's agent, on containerd or on the embedded host-process runtime."""
    if request.param == "host":
        plain_node.use_host_runtime()
    return plain_node


pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def busybox_pod(
    name: str, node_name: str, script: str, restart: str = "Always", **container: Any
) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "nodeName": node_name,
                # The harness's CNI is loopback only: the pods use the host's network.
                "hostNetwork": True,
                "terminationGracePeriodSeconds": 1,
                "restartPolicy": restart,
                "containers": [
                    {
                        "name": "main",
                        "image": BUSYBOX_IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["sh", "-c", script],
                        **container,
                    }
                ],
            },
        }
    )


async def running_pod(node: Node, script: str, restart: str = "Always", **container: Any) -> str:
    """Start the agent and one busybox pod running ``script``; its name once Running."""
    node.start()
    await node.until(lambda: node.node() is not None, "the Node to register")
    name = f"streams-{node.name}"
    node.kubectl(
        "apply", "-f", "-", input=busybox_pod(name, node.name, script, restart, **container)
    )
    await node.until(
        lambda: ((node.pod(name) or {}).get("status") or {}).get("phase") == "Running",
        f"pod {name} Running",
        timeout=90,
        explain=lambda: f"its status: {(node.pod(name) or {}).get('status')}",
    )
    return name


async def test_kubectl_exec_runs_the_command_and_passes_its_exit_code(node: Node) -> None:
    name = await running_pod(node, "sleep 3600")
    done = node.apiserver.kubectl(
        "exec", name, "--", "sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"
    )
    assert done.rc == 3, done
    assert done.stdout == "to-stdout\n", done
    assert "to-stderr" in done.stderr, done
    ok = node.apiserver.kubectl("exec", name, "--", "echo", "fine")
    assert (ok.rc, ok.stdout) == (0, "fine\n"), ok


async def test_kubectl_exec_with_stdin(node: Node) -> None:
    name = await running_pod(node, "sleep 3600")
    text = "".join(f"line {i}\n" for i in range(2000))
    done = node.apiserver.kubectl("exec", "-i", name, "--", "wc", "-l", input=text)
    assert (done.rc, done.stdout.strip()) == (0, "2000"), done


async def test_kubectl_cp_copies_a_file_into_the_pod(node: Node, tmp_path: Path) -> None:
    name = await running_pod(node, "sleep 3600")
    local = tmp_path / "payload.txt"
    local.write_text("copied through exec and tar\n")
    done = node.apiserver.kubectl("cp", str(local), f"default/{name}:/tmp/payload.txt")
    assert done.rc == 0, done
    back = node.apiserver.kubectl("exec", name, "--", "cat", "/tmp/payload.txt")
    assert back.stdout == "copied through exec and tar\n", back


async def test_kubectl_attach_reaches_the_containers_stdin(node: Node) -> None:
    # The container waits for a line on its stdin, answers and exits, which ends
    # the attach.
    name = await running_pod(
        node, "read line; echo got:$line", restart="Never", stdin=True, stdinOnce=True
    )
    done = node.apiserver.kubectl("attach", "-i", name, "-c", "main", input="hello\n", timeout=60)
    assert "got:hello" in done.stdout, done


async def test_kubectl_logs_follow_streams_new_lines(node: Node) -> None:
    name = await running_pod(node, "i=0; while true; do echo tick-$i; i=$((i+1)); sleep 0.2; done")
    proc = subprocess.Popen(
        node.apiserver.kubectl_argv("logs", "-f", name),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        seen = []
        deadline = time.monotonic() + 60
        while len(seen) < 15 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line.strip())
        assert len(seen) >= 15, f"logs -f gave {seen}; stderr: {proc.stderr.read()}"
        numbers = [int(s.split("-")[1]) for s in seen if s.startswith("tick-")]
        assert numbers == sorted(numbers) and numbers[-1] - numbers[0] >= 14
    finally:
        proc.kill()
        proc.wait(10)


async def test_kubectl_port_forward_reaches_a_server_in_the_pod(node: Node) -> None:
    remote = free_port()
    # busybox's httpd: an applet in the image, ``busybox httpd`` on a host that has
    # no httpd of its own; its directory under /tmp, which both have.
    www = f"/tmp/kk-www-{remote}"
    name = await running_pod(
        node,
        f"mkdir -p {www} && echo port-forward-ok > {www}/index.html && "
        f"if command -v httpd >/dev/null; then h=httpd; else h='busybox httpd'; fi; "
        f"exec $h -f -p 127.0.0.1:{remote} -h {www}",
    )
    local = free_port()
    proc = subprocess.Popen(
        node.apiserver.kubectl_argv("port-forward", name, f"{local}:{remote}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "Forwarding from 127.0.0.1:LOCAL -> REMOTE"
        assert "Forwarding from" in line, f"{line!r}; stderr: {proc.stderr.read()}"
        body = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=10) as r:
                    body = r.read().decode()
                break
            except OSError:
                time.sleep(0.5)
        assert body == "port-forward-ok\n"
    finally:
        proc.kill()
        proc.wait(10)
        shutil.rmtree(www, ignore_errors=True)  # the host runtime's is on this machine
