"""The node API over real HTTPS on 127.0.0.1: shapes, authentication, authorization,
path validation and request bounds.

The agent is a real Kubelet on FakeRuntime + FakeClock (KubeletEnv); the server
listens on ephemeral ports with certificates made here by the ``openssl`` command.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from fifo import unblock_fifo_later

from kubelet_kit.errors import ConfigurationError, RuntimeUnavailableError
from kubelet_kit.server import (
    Authenticator,
    KubeletServer,
    PolicyAuthorizer,
    PolicyRule,
    load_token_file,
    read_only_rule,
)
from kubelet_kit.testing.env import KubeletEnv

OPENSSL = shutil.which("openssl")

ADMIN_TOKEN = "admin-token-0123456789"
MONITOR_TOKEN = "monitor-token-0123456789"

WEB_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default", "uid": "uid-web"},
    "spec": {"containers": [{
        "name": "app", "image": "busybox",
        "command": ["sh", "-c", "echo one; echo two; echo three; sleep 3600"],
    }]},
}


def _openssl(*args: str) -> None:
    assert OPENSSL is not None
    subprocess.run([OPENSSL, *args], check=True, capture_output=True)


def _make_ca(d: Path, name: str) -> tuple[Path, Path]:
    key, crt = d / f"{name}.key", d / f"{name}.crt"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-days", "2", "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(crt))
    return crt, key


def _make_leaf(
    d: Path, name: str, subject: str, ca: tuple[Path, Path], usage: str
) -> tuple[str, str]:
    key, csr, crt, ext = (d / f"{name}.key", d / f"{name}.csr", d / f"{name}.crt",
                          d / f"{name}.ext")
    ext.write_text("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                   f"extendedKeyUsage={usage}\nsubjectKeyIdentifier=hash\n"
                   "authorityKeyIdentifier=keyid\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-subj", subject, "-keyout", str(key), "-out", str(csr))
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
             "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", str(crt))
    return str(crt), str(key)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if OPENSSL is None:  # the test PKI is made with the openssl command
        if os.environ.get("KUBELET_KIT_REQUIRE_REAL") == "1":
            pytest.fail("openssl is required here (KUBELET_KIT_REQUIRE_REAL=1) but missing")
        pytest.skip("openssl not available")
    d = tmp_path_factory.mktemp("pki")
    ca = _make_ca(d, "ca")
    rogue_ca = _make_ca(d, "rogue-ca")
    tokens = d / "tokens.csv"
    tokens.write_text(f'{ADMIN_TOKEN},alice,1001,"admins"\n'
                      f"# monitoring\n{MONITOR_TOKEN},scraper,1002,monitoring\n")
    return {
        "ca": str(ca[0]),
        "server": _make_leaf(d, "server", "/CN=fake-node", ca, "serverAuth"),
        "admin": _make_leaf(d, "admin", "/O=admins/CN=admin", ca, "clientAuth"),
        "monitor": _make_leaf(d, "monitor", "/O=monitoring/CN=prometheus", ca, "clientAuth"),
        "rogue": _make_leaf(d, "rogue", "/O=admins/CN=admin", rogue_ca, "clientAuth"),
        "tokens": str(tokens),
    }


def client_ssl(pki: dict[str, Any], identity: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki["ca"])
    if identity is not None:
        ctx.load_cert_chain(*pki[identity])
    return ctx


class Served:
    def __init__(self, env: KubeletEnv, server: KubeletServer, pki: dict[str, Any]) -> None:
        self.env = env
        self.server = server
        self.pki = pki

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.server.port}{path}"

    async def get(self, path: str, identity: str | None = "admin", *, method: str = "GET",
                  headers: dict[str, str] | None = None, data: bytes | None = None,
                  ) -> tuple[int, str, Any]:
        connector = aiohttp.TCPConnector(ssl=client_ssl(self.pki, identity))
        async with aiohttp.ClientSession(connector=connector) as session, session.request(
                method, self.url(path), headers=headers, data=data) as resp:
            return resp.status, await resp.text(), resp.headers


def policy() -> PolicyAuthorizer:
    return PolicyAuthorizer([PolicyRule(groups=["admins"]),
                             read_only_rule(groups=["monitoring"])])


@pytest.fixture
async def served(pki: dict[str, Any]) -> AsyncIterator[Served]:
    async with KubeletEnv() as env:
        env.add_pod(WEB_POD)
        await env.wait_for(lambda: env.phase("web") == "Running")
        server = KubeletServer(
            env.kubelet, address="127.0.0.1", port=0,
            tls_cert_file=pki["server"][0], tls_private_key_file=pki["server"][1],
            authenticator=Authenticator(client_ca_file=pki["ca"],
                                        tokens=load_token_file(pki["tokens"])),
            authorizer=policy(), read_only_port=0, healthz_port=0,
        )
        async with server:
            yield Served(env, server, pki)


# ----------------------------------------------------------------- endpoint shapes


async def test_healthz_ok(served: Served) -> None:
    status, body, _ = await served.get("/healthz")
    assert (status, body) == (200, "ok")
    status, body, _ = await served.get("/healthz?verbose")
    assert status == 200
    assert body.splitlines() == ["[+]ping ok", "[+]log ok", "[+]syncloop ok", "[+]pleg ok",
                                 "healthz check passed"]
    assert (await served.get("/healthz/pleg"))[:2] == (200, "ok\n")


async def test_healthz_fails_with_the_pleg_reason(served: Served) -> None:
    served.env.runtime.inject_error("list_pod_sandboxes", RuntimeUnavailableError("down"),
                                    times=10_000)
    await served.env.sleep(240)
    status, body, _ = await served.get("/healthz")
    assert status == 500
    assert "[-]pleg failed: pleg was last seen active" in body
    assert body.rstrip().endswith("healthz check failed")
    status, body, _ = await served.get("/healthz/pleg")
    assert status == 500 and "threshold is 3m" in body.replace("3m0s", "3m")


async def test_healthz_names_a_stalled_sync_loop(served: Served,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    reason = "sync loop has not run for 400s; threshold is 300s"
    monkeypatch.setattr(served.env.kubelet, "healthy", lambda: (False, reason))
    status, body, _ = await served.get("/healthz")
    assert status == 500
    assert body.splitlines() == ["[+]ping ok", "[+]log ok", f"[-]syncloop failed: {reason}",
                                 "[+]pleg ok", "healthz check failed"]
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
        assert pod["metadata"] == {"name": "web", "namespace": "default", "uid": "uid-web",
                                   "creationTimestamp": None}
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
    runtime.set_stats(container.id, cpu_ns=5_000_000_000, memory_working_set=7 << 20,
                      memory_usage=8 << 20, writable_layer_bytes=4096)
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
    assert ('container_cpu_usage_seconds_total{container="app",namespace="default",'
            'pod="web"} 5.0') in body


async def test_container_logs_options(served: Served) -> None:
    base = "/containerLogs/default/web/app"
    assert (await served.get(base))[:2] == (200, "one\ntwo\nthree\n")
    assert (await served.get(base + "?tailLines=2"))[1] == "two\nthree\n"
    assert (await served.get(base + "?tailLines=0"))[1] == ""
    assert (await served.get(base + "?limitBytes=5"))[1] == "one\nt"
    lines = (await served.get(base + "?timestamps=true"))[1].splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == ["one", "two", "three"]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z", line.split(" ")[0])
               for line in lines)
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
        async with aiohttp.ClientSession(connector=connector) as session, session.get(
                f"http://127.0.0.1:{served.server.healthz_port}/healthz") as resp:
            assert (resp.status, await resp.text()) == (200, "ok")
        assert (await served.get("/healthz"))[:2] == (200, "ok")
        status, body, _ = await logs
        # Both answered while nothing had yet opened the FIFO's other end.
        assert not unblocked.is_set()
    assert status == 400 and "not a regular file" in body


async def test_quiet_follow_ends_when_the_client_leaves(served: Served) -> None:
    connector = aiohttp.TCPConnector(ssl=client_ssl(served.pki, "admin"))
    async with aiohttp.ClientSession(connector=connector) as session, session.get(
            served.url("/containerLogs/default/web/app?follow=1")) as resp:
        assert resp.status == 200
        assert [await resp.content.readline() for _ in range(3)] == [b"one\n", b"two\n",
                                                                     b"three\n"]
        assert served.server.open_streams == 1
    for _ in range(50):  # the follow notices at its next poll of the clock
        await served.env.sleep(1)
        if served.server.open_streams == 0:
            break
    assert served.server.open_streams == 0


async def test_run_a_command(served: Served) -> None:
    status, body, _ = await served.get("/run/default/web/app?cmd=echo%20hello", method="POST")
    assert (status, body) == (200, "hello\n")
    status, body, _ = await served.get("/run/default/web/uid-web/app?cmd=echo%20hi",
                                       method="POST")
    assert (status, body) == (200, "hi\n")
    status, body, _ = await served.get("/run/default/web/app?cmd=exit%203", method="POST")
    assert status == 500 and "exited with 3" in body
    status, _, _ = await served.get("/run/default/web/app", method="POST")
    assert status == 400
    status, _, _ = await served.get("/run/default/web/app?cmd=true")  # GET: not a route
    assert status == 405


# ------------------------------------------------------------------ authentication


@pytest.mark.parametrize("path", ["/healthz", "/pods", "/metrics", "/stats/summary",
                                  "/containerLogs/default/web/app"])
async def test_no_credentials_is_401(served: Served, path: str) -> None:
    status, body, _ = await served.get(path, identity=None)
    assert (status, body) == (401, "Unauthorized\n")


async def test_read_only_identity_reads_but_gets_no_logs_or_run(served: Served) -> None:
    for path in ("/healthz", "/pods", "/metrics", "/stats/summary"):
        assert (await served.get(path, "monitor"))[0] == 200, path
    status, body, _ = await served.get("/containerLogs/default/web/app", "monitor")
    assert status == 403
    assert body.strip() == ("Forbidden (user=prometheus, verb=get, resource=nodes, "
                            "subresource(s)=[proxy])")
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
            env.kubelet, address="127.0.0.1", port=0, tls_cert_file=pki["server"][0],
            tls_private_key_file=pki["server"][1],
            authenticator=Authenticator(client_ca_file=pki["ca"], anonymous=True),
            authorizer=PolicyAuthorizer([read_only_rule(groups=["system:unauthenticated"])]))
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
        for method, path in (("GET", "/containerLogs/default/web/app"),
                             ("POST", "/run/default/web/app?cmd=id"),
                             ("GET", "/runningpods/")):
            async with session.request(method, base + path) as resp:
                assert resp.status == 404, path
        async with session.get(f"http://127.0.0.1:{served.server.healthz_port}/healthz") as r:
            assert (r.status, await r.text()) == (200, "ok")
        async with session.get(f"http://127.0.0.1:{served.server.healthz_port}/pods") as r:
            assert r.status == 404


# --------------------------------------------------------- paths and request bounds


@pytest.mark.parametrize("path", [
    "/containerLogs/default/web/..%2F..%2F..%2Fetc%2Fpasswd",
    "/containerLogs/default/..%2F..%2Fetc/app",
    "/containerLogs/..%2F..%2F/web/app",
    "/containerLogs/default/web/%2E%2E",
    "/containerLogs/default/Web/app",
    "/containerLogs/default/web/app%00",
    "/run/default/web/..%2F..%2Fbin%2Fsh?cmd=id",
])
async def test_traversal_is_refused(served: Served, path: str) -> None:
    method = "POST" if path.startswith("/run") else "GET"
    status, body, _ = await served.get(path, method=method)
    assert status in (400, 404), (status, body)
    assert "root:" not in body


async def test_plain_dot_segments_do_not_escape(served: Served) -> None:
    # Dot segments are resolved before routing: this is /etc/passwd, no route.
    connector = aiohttp.TCPConnector(ssl=client_ssl(served.pki, "admin"))
    async with aiohttp.ClientSession(connector=connector) as session:
        url = served.url("/containerLogs/default/web/app/../../../../etc/passwd")
        async with session.get(aiohttp.client.URL(url, encoded=True)) as resp:
            assert resp.status == 404
            assert "root:" not in await resp.text()


async def test_oversized_requests_are_refused(served: Served) -> None:
    status, _, _ = await served.get("/run/default/web/app?cmd=true", method="POST",
                                    data=b"x" * (1 << 20))
    assert status == 413
    status, _, _ = await served.get("/pods", headers={"X-Big": "a" * 20_000})
    assert status in (400, 431)
    status, _, _ = await served.get("/pods?" + "a" * 20_000)
    assert status in (400, 414)
    many = {f"X-H{i}": "v" for i in range(200)}
    status, _, _ = await served.get("/pods", headers=many)
    assert status in (400, 431)
    # The server still answers afterwards.
    assert (await served.get("/healthz"))[0] == 200


async def test_debugging_handlers_off_answer_405(pki: dict[str, Any]) -> None:
    async with KubeletEnv() as env:
        server = KubeletServer(
            env.kubelet, address="127.0.0.1", port=0, tls_cert_file=pki["server"][0],
            tls_private_key_file=pki["server"][1],
            authenticator=Authenticator(client_ca_file=pki["ca"]),
            enable_debugging_handlers=False)
        async with server:
            s = Served(env, server, pki)
            status, body, _ = await s.get("/containerLogs/default/web/app")
            assert (status, body) == (405, "Debug endpoints are disabled.\n")
            assert (await s.get("/run/default/web/app?cmd=id", method="POST"))[0] == 405
            assert (await s.get("/runningpods/"))[0] == 405
            assert (await s.get("/pods"))[0] == 200


async def test_slow_requests_time_out_on_the_agents_clock(pki: dict[str, Any]) -> None:
    import asyncio

    from kubelet_kit.server import ServerLimits

    async with KubeletEnv() as env:
        env.add_pod(WEB_POD)
        await env.wait_for(lambda: env.phase("web") == "Running")
        server = KubeletServer(
            env.kubelet, address="127.0.0.1", port=0, tls_cert_file=pki["server"][0],
            tls_private_key_file=pki["server"][1],
            authenticator=Authenticator(client_ca_file=pki["ca"]),
            limits=ServerLimits(request_timeout=30, exec_timeout=600))
        async with server:
            s = Served(env, server, pki)
            request = asyncio.ensure_future(
                s.get("/run/default/web/app?cmd=sleep%20300", method="POST"))
            for _ in range(100):
                await env.sleep(1)
                if request.done():
                    break
            status, body, _ = await request
            assert status == 504 and "longer than 30s" in body
            # A command outliving exec_timeout is ended by the runtime and reported.
            server.limits = ServerLimits(request_timeout=600, exec_timeout=10)
            request = asyncio.ensure_future(
                s.get("/run/default/web/app?cmd=sleep%20300", method="POST"))
            for _ in range(100):
                await env.sleep(1)
                if request.done():
                    break
            status, body, _ = await request
            assert status == 500 and "timed out after 10s" in body


# ------------------------------------------------------------------ configuration


def test_secure_port_needs_a_certificate() -> None:
    env = KubeletEnv()
    with pytest.raises(ConfigurationError, match="tlsCertFile"):
        KubeletServer(env.kubelet, port=0)


def test_from_config_reads_the_kubelet_fields(pki: dict[str, Any]) -> None:
    from kubelet_kit.api.kubeletconfig import load_kubelet_config
    from kubelet_kit.server.auth import AlwaysAllowAuthorizer, Attributes, UserInfo

    config = load_kubelet_config({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": "127.0.0.1", "port": 10250, "readOnlyPort": 10255,
        "tlsCertFile": pki["server"][0], "tlsPrivateKeyFile": pki["server"][1],
        "authentication": {"x509": {"clientCAFile": pki["ca"]}, "tokenFile": pki["tokens"],
                           "anonymous": {"enabled": True}},
        "authorization": {"mode": "Policy", "policy": [
            {"groups": ["monitoring"], "subresources": ["stats"], "verbs": ["get"]}]},
    })
    server = KubeletServer.from_config(KubeletEnv().kubelet, config)
    assert (server.address, server.port, server.read_only_port) == ("127.0.0.1", 10250, 10255)
    assert server.authenticator.anonymous and server.authenticator.tokens is not None
    user = UserInfo("p", "", ("monitoring",))
    assert server.authorizer.authorize(Attributes(user, "get", "stats", "n", "/stats"))
    assert not server.authorizer.authorize(Attributes(user, "get", "proxy", "n", "/run"))
    default = KubeletServer.from_config(KubeletEnv().kubelet, load_kubelet_config({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "tlsCertFile": pki["server"][0], "tlsPrivateKeyFile": pki["server"][1]}))
    assert isinstance(default.authorizer, AlwaysAllowAuthorizer)
    assert not default.authenticator.anonymous and default.read_only_port is None


@pytest.mark.parametrize(("section", "message"), [
    ({"authorization": {"mode": "Webhook"}}, "needs an API server"),
    ({"authorization": {"mode": "Sometimes"}}, 'Unsupported value: "Sometimes"'),
    ({"authorization": {"mode": "Policy", "policy": [{"groups": "x"}]}},
     r"authorization.policy\[0\].groups: must be a list of strings"),
    ({"authentication": {"anonymous": {"enabled": "yes"}}}, "anonymous.enabled"),
    ({"authentication": {"tokenFile": "/nonexistent/tokens.csv"}}, "cannot read"),
])
def test_bad_settings_name_their_field(section: dict[str, Any], message: str) -> None:
    from kubelet_kit.api.kubeletconfig import load_kubelet_config

    config = load_kubelet_config({"apiVersion": "kubelet.config.k8s.io/v1beta1",
                                  "kind": "KubeletConfiguration", **section})
    with pytest.raises(ConfigurationError, match=message):
        KubeletServer.from_config(KubeletEnv().kubelet, config)





# ------------------------------------------------------- follow, on real processes


async def test_follow_streams_new_lines_from_a_real_container(
        pki: dict[str, Any], tmp_path: Path) -> None:
    import asyncio
    import time

    from kubelet_kit.api import load_pod
    from kubelet_kit.config import ProgrammaticSource
    from kubelet_kit.kubelet import Kubelet
    from kubelet_kit.runtimes.host import HostProcessRuntime
    from kubelet_kit.testing.env import stub_parts

    source = ProgrammaticSource()
    kubelet = Kubelet(**stub_parts(
        runtime=HostProcessRuntime(tmp_path / "runtime"), sources=[source],
        node_name="e2e-node", root_dir=tmp_path / "state", pod_logs_dir=tmp_path / "logs"))
    source.add(load_pod({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "ticker", "namespace": "default", "uid": "uid-ticker"},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
            "name": "tick", "image": "busybox",
            "command": ["sh", "-c", "i=0; while [ $i -lt 600 ]; do echo tick $i; "
                                    "i=$((i+1)); sleep 0.1; done"],
        }]},
    }, source="test"))
    server = KubeletServer(kubelet, address="127.0.0.1", port=0,
                           tls_cert_file=pki["server"][0], tls_private_key_file=pki["server"][1],
                           authenticator=Authenticator(client_ca_file=pki["ca"]))
    agent = asyncio.create_task(kubelet.run())
    try:
        async with server:
            deadline = time.monotonic() + 30
            while getattr(kubelet.pod_status("uid-ticker"), "phase", "") != "Running":
                assert time.monotonic() < deadline, "the ticker pod never ran"
                await asyncio.sleep(0.1)
            served = Served(None, server, pki)  # type: ignore[arg-type]
            await asyncio.sleep(0.5)
            connector = aiohttp.TCPConnector(ssl=client_ssl(pki, "admin"))
            async with aiohttp.ClientSession(connector=connector) as session, session.get(
                    served.url("/containerLogs/default/ticker/tick?follow=true&tailLines=1")
            ) as resp:
                assert resp.status == 200
                seen: list[int] = []
                started = time.monotonic()
                while len(seen) < 15:
                    line = await asyncio.wait_for(resp.content.readline(), 10)
                    assert line, "the follow ended early"
                    seen.append(int(line.decode().split()[1]))
                # One old line (tailLines=1), then lines written while we listened.
                assert seen == list(range(seen[0], seen[0] + 15))
                assert time.monotonic() - started > 0.8
            # The client went away: the follow ends; the agent and its server carry on.
            deadline = time.monotonic() + 5
            while server.open_streams:
                assert time.monotonic() < deadline, "the follow outlived its client"
                await asyncio.sleep(0.05)
            assert (await served.get("/healthz"))[:2] == (200, "ok")
    finally:
        await kubelet.drain(grace_period=1)
        kubelet.stop()
        await asyncio.wait_for(agent, 30)
