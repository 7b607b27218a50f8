"""The node API over real HTTPS on 127.0.0.1: endpoint shapes, logs, run, and
authentication.

The agent is a real Kubelet on FakeRuntime + FakeClock (KubeletEnv); the server
listens on ephemeral ports with certificates made here by the ``openssl`` command.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from _server_api_helpers import (
    ADMIN_TOKEN,
    MONITOR_TOKEN,
    WEB_POD,
    Served,
    client_ssl,
    make_pki,
    serve,
)
from fifo import unblock_fifo_later

from kubelet_kit.errors import RuntimeUnavailableError
from kubelet_kit.server import (
    Authenticator,
    KubeletServer,
    PolicyAuthorizer,
    read_only_rule,
)
from kubelet_kit.testing.env import KubeletEnv


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return make_pki(tmp_path_factory)


@pytest.fixture
async def served(pki: dict[str, Any]) -> AsyncIterator[Served]:
    async with serve(pki) as s:
        yield s


# ----------------------------------------------------------------- endpoint shapes


async def test_healthz_ok(served: Served) -> None:
    status, body, _ = await served.get("/healthz")
    assert (status, body) == (200, "ok")
    status, body, _ = await served.get("/healthz?verbose")
    assert status == 200
    assert body.splitlines() == [
        "[+]ping ok",
        "[+]log ok",
        "[+]syncloop ok",
        "[+]pleg ok",
        "healthz check passed",
    ]
    assert (await served.get("/healthz/pleg"))[:2] == (200, "ok\n")


async def test_healthz_fails_with_the_pleg_reason(served: Served) -> None:
    served.env.runtime.inject_error(
        "list_pod_sandboxes", RuntimeUnavailableError("down"), times=10_000
    )
    await served.env.sleep(240)
    status, body, _ = await served.get("/healthz")
    assert status == 500
    assert "[-]pleg failed: pleg was last seen active" in body
    assert body.rstrip().endswith("healthz check failed")
    status, body, _ = await served.get("/healthz/pleg")
    assert status == 500 and "threshold is 3m" in body.replace("3m0s", "3m")


async def test_healthz_names_a_stalled_sync_loop(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    reason = "sync loop has not run for 400s; threshold is 300s"
    monkeypatch.setattr(served.env.kubelet, "healthy", lambda: (False, reason))
    status, body, _ = await served.get("/healthz")
    assert status == 500
    assert body.splitlines() == [
        "[+]ping ok",
        "[+]log ok",
        f"[-]syncloop failed: {reason}",
        "[+]pleg ok",
        "healthz check failed",
    ]
    assert (await served.get("/healthz/syncloop"))[0] == 500
    assert (await served.get("/healthz/ping"))[:2] == (200, "ok\n")
    assert (await served.get("/healthz/nope"))[0] == 404


async def test_pods_is_a_podlist_with_statuses(served: Served) -> None:
    status, body, headers = await served.get("/pods")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    doc = __import__("json").loads(body)
    assert doc["kind"] == "PodList" and doc["apiVersion"] == "v1"
    [pod] = doc["items"]
    assert pod["metadata"]["name"] == "web" and pod["metadata"]["uid"] == "uid-web"
    assert pod["spec"]["containers"][0]["name"] == "app"
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["containerStatuses"][0]["state"]["running"]


async def test_runningpods_lists_the_runtime(served: Served) -> None:
    for path in ("/runningpods/", "/runningpods"):
        status, body, _ = await served.get(path)
        doc = __import__("json").loads(body)
        assert status == 200 and doc["kind"] == "PodList"
        [pod] = doc["items"]
        assert pod["metadata"] == {
            "name": "web",
            "namespace": "default",
            "uid": "uid-web",
            "creationTimestamp": None,
        }
        assert [c["name"] for c in pod["spec"]["containers"]] == ["app"]


async def test_metrics_exposition(served: Served) -> None:
    status, body, headers = await served.get("/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert "kubelet_running_pods 1.0" in body
    assert 'kubelet_running_containers{container_state="running"} 1.0' in body
    assert 'kubelet_node_name{node="fake-node"} 1.0' in body
    assert "kubelet_pleg_relist_duration_seconds_bucket" in body
    status, body, _ = await served.get("/metrics/probes")
    assert status == 200


async def test_stats_summary_shape(served: Served) -> None:
    runtime = served.env.runtime
    [container] = await runtime.list_containers()
    runtime.set_stats(
        container.id,
        cpu_ns=5_000_000_000,
        memory_working_set=7 << 20,
        memory_usage=8 << 20,
        writable_layer_bytes=4096,
    )
    status, body, _ = await served.get("/stats/summary")
    assert status == 200
    doc = __import__("json").loads(body)
    node = doc["node"]
    assert node["nodeName"] == "fake-node"
    assert node["cpu"]["usageCoreNanoSeconds"] > 0
    assert node["memory"]["workingSetBytes"] > 0 and node["memory"]["availableBytes"] > 0
    assert node["fs"]["capacityBytes"] >= node["fs"]["availableBytes"] > 0
    assert set(node["runtime"]) == {"imageFs", "containerFs"}
    [pod] = doc["pods"]
    assert pod["podRef"] == {"name": "web", "namespace": "default", "uid": "uid-web"}
    [c] = pod["containers"]
    assert c["name"] == "app"
    assert c["cpu"]["usageCoreNanoSeconds"] == 5_000_000_000
    assert c["memory"]["workingSetBytes"] == 7 << 20
    assert c["rootfs"]["usedBytes"] == 4096
    assert c["logs"]["usedBytes"] > 0  # the container wrote three lines
    assert pod["ephemeral-storage"]["usedBytes"] >= 4096 + c["logs"]["usedBytes"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", pod["startTime"])
    status, body, _ = await served.get("/stats/summary?only_cpu_and_memory=true")
    slim = __import__("json").loads(body)
    assert set(slim["node"]) == {"nodeName", "startTime", "systemContainers", "cpu", "memory"}
    assert set(slim["pods"][0]["containers"][0]) == {"name", "startTime", "cpu", "memory"}
    assert "ephemeral-storage" not in slim["pods"][0]
    status, body, _ = await served.get("/metrics/resource")
    assert status == 200
    assert (
        'container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 5.0'
    ) in body


async def test_container_logs_options(served: Served) -> None:
    base = "/containerLogs/default/web/app"
    assert (await served.get(base))[:2] == (200, "one\ntwo\nthree\n")
    assert (await served.get(base + "?tailLines=2"))[1] == "two\nthree\n"
    assert (await served.get(base + "?tailLines=0"))[1] == ""
    assert (await served.get(base + "?limitBytes=5"))[1] == "one\nt"
    lines = (await served.get(base + "?timestamps=true"))[1].splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == ["one", "two", "three"]
    assert all(
        re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z", line.split(" ")[0])
        for line in lines
    )
    # Written before the pod settled: nothing is newer than a second before now.
    await served.env.sleep(30)
    assert (await served.get(base + "?sinceSeconds=5"))[1] == ""
    status, body, _ = await served.get(base + "?sinceSeconds=0&limitBytes=0&tailLines=-1")
    assert status == 400
    assert "sinceSeconds" in body and "limitBytes" in body and "tailLines" in body
    status, body, _ = await served.get(base + "?previous=true")
    assert status == 400 and "previous terminated container" in body
    status, body, _ = await served.get("/containerLogs/default/web/nope")
    assert status == 404 and '"nope"' in body
    status, body, _ = await served.get("/containerLogs/default/absent/app")
    assert status == 404 and '"absent"' in body


def web_log(served: Served) -> Path:
    path = served.env.kubelet.pod_logs_dir / "default_web_uid-web" / "app" / "0.log"
    assert path.is_file()
    return path


async def test_a_log_replaced_by_a_symlink_is_refused(served: Served, tmp_path: Path) -> None:
    secret = tmp_path / "shadow"
    secret.write_bytes(b"2023-11-14T22:13:20Z stdout F root:hostsecret\n")
    path = web_log(served)
    path.unlink()
    path.symlink_to(secret)
    for query in ("", "?follow=true", "?tailLines=1"):
        status, body, _ = await served.get("/containerLogs/default/web/app" + query)
        assert status == 400 and "failed to open log file" in body
        assert "hostsecret" not in body and str(secret) not in body


async def test_a_fifo_log_neither_stalls_nor_blocks_the_server(served: Served) -> None:
    path = web_log(served)
    path.unlink()
    os.mkfifo(path)
    with unblock_fifo_later(path) as unblocked:
        logs = asyncio.ensure_future(served.get("/containerLogs/default/web/app?follow=1"))
        connector = aiohttp.TCPConnector()
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.get(f"http://127.0.0.1:{served.server.healthz_port}/healthz") as resp,
        ):
            assert (resp.status, await resp.text()) == (200, "ok")
        assert (await served.get("/healthz"))[:2] == (200, "ok")
        status, body, _ = await logs
        # Both answered while nothing had yet opened the FIFO's other end.
        assert not unblocked.is_set()
    assert status == 400 and "not a regular file" in body


async def test_quiet_follow_ends_when_the_client_leaves(served: Served) -> None:
    connector = aiohttp.TCPConnector(ssl=client_ssl(served.pki, "admin"))
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.get(served.url("/containerLogs/default/web/app?follow=1")) as resp,
    ):
        assert resp.status == 200
        assert [await resp.content.readline() for _ in range(3)] == [b"one\n", b"two\n", b"three\n"]
        assert served.server.open_streams == 1
    for _ in range(50):  # the follow notices at its next poll of the clock
        await served.env.sleep(1)
        if served.server.open_streams == 0:
            break
    assert served.server.open_streams == 0


async def test_run_a_command(served: Served) -> None:
    status, body, _ = await served.get("/run/default/web/app?cmd=echo%20hello", method="POST")
    assert (status, body) == (200, "hello\n")
    status, body, _ = await served.get("/run/default/web/uid-web/app?cmd=echo%20hi", method="POST")
    assert (status, body) == (200, "hi\n")
    status, body, _ = await served.get("/run/default/web/app?cmd=exit%203", method="POST")
    assert status == 500 and "exited with 3" in body
    status, _, _ = await served.get("/run/default/web/app", method="POST")
    assert status == 400
    status, _, _ = await served.get("/run/default/web/app?cmd=true")  # GET: not a route
    assert status == 405


# ------------------------------------------------------------------ authentication


@pytest.mark.parametrize(
    "path", ["/healthz", "/pods", "/metrics", "/stats/summary", "/containerLogs/default/web/app"]
)
async def test_no_credentials_is_401(served: Served, path: str) -> None:
    status, body, _ = await served.get(path, identity=None)
    assert (status, body) == (401, "Unauthorized\n")


async def test_read_only_identity_reads_but_gets_no_logs_or_run(served: Served) -> None:
    for path in ("/healthz", "/pods", "/metrics", "/stats/summary"):
        assert (await served.get(path, "monitor"))[0] == 200, path
    status, body, _ = await served.get("/containerLogs/default/web/app", "monitor")
    assert status == 403
    assert body.strip() == (
        "Forbidden (user=prometheus, verb=get, resource=nodes, subresource(s)=[proxy])"
    )
    status, body, _ = await served.get("/run/default/web/app?cmd=id", "monitor", method="POST")
    assert status == 403 and "verb=create" in body


async def test_certificate_from_another_ca_is_refused(served: Served) -> None:
    with pytest.raises(aiohttp.ClientError):
        await served.get("/pods", "rogue")


async def test_bearer_tokens(served: Served) -> None:
    def bearer(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    logs = "/containerLogs/default/web/app"
    assert (await served.get(logs, None, headers=bearer(ADMIN_TOKEN)))[0] == 200
    assert (await served.get("/pods", None, headers=bearer(MONITOR_TOKEN)))[0] == 200
    status, body, _ = await served.get(logs, None, headers=bearer(MONITOR_TOKEN))
    assert status == 403 and "user=scraper" in body
    assert (await served.get("/pods", None, headers=bearer("wrong")))[0] == 401
    assert (await served.get("/pods", None, headers={"Authorization": "Basic eDp5"}))[0] == 401


async def test_anonymous_only_when_enabled(pki: dict[str, Any]) -> None:
    async with KubeletEnv() as env:
        env.add_pod(WEB_POD)
        await env.wait_for(lambda: env.phase("web") == "Running")
        server = KubeletServer(
            env.kubelet,
            address="127.0.0.1",
            port=0,
            tls_cert_file=pki["server"][0],
            tls_private_key_file=pki["server"][1],
            authenticator=Authenticator(client_ca_file=pki["ca"], anonymous=True),
            authorizer=PolicyAuthorizer([read_only_rule(groups=["system:unauthenticated"])]),
        )
        async with server:
            s = Served(env, server, pki)
            assert (await s.get("/pods", None))[0] == 200
            status, body, _ = await s.get("/containerLogs/default/web/app", None)
            assert status == 403 and "user=system:anonymous" in body
            # A wrong token is refused, not downgraded to anonymous.
            headers = {"Authorization": "Bearer nope"}
            assert (await s.get("/pods", None, headers=headers))[0] == 401


# ------------------------------------------------------ read-only and healthz ports


async def test_read_only_port_never_serves_logs_or_run(served: Served) -> None:
    base = f"http://127.0.0.1:{served.server.read_only_port}"
    async with aiohttp.ClientSession() as session:
        for path in ("/healthz", "/pods", "/metrics", "/stats/summary"):
            async with session.get(base + path) as resp:
                assert resp.status == 200, path
        for method, path in (
            ("GET", "/containerLogs/default/web/app"),
            ("POST", "/run/default/web/app?cmd=id"),
            ("GET", "/runningpods/"),
        ):
            async with session.request(method, base + path) as resp:
                assert resp.status == 404, path
        async with session.get(f"http://127.0.0.1:{served.server.healthz_port}/healthz") as r:
            assert (r.status, await r.text()) == (200, "ok")
        async with session.get(f"http://127.0.0.1:{served.server.healthz_port}/pods") as r:
            assert r.status == 404
