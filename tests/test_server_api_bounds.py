"""The node API over real HTTPS on 127.0.0.1: path validation, request bounds, its
configuration, and log follow on real processes.

The agent is a real Kubelet on FakeRuntime + FakeClock (KubeletEnv); the server
listens on ephemeral ports with certificates made here by the ``openssl`` command.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from _server_api_helpers import (
    WEB_POD,
    Served,
    client_ssl,
    make_pki,
    serve,
)

from kubelet_kit.errors import ConfigurationError
from kubelet_kit.server import (
    Authenticator,
    KubeletServer,
)
from kubelet_kit.testing.env import KubeletEnv


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return make_pki(tmp_path_factory)


@pytest.fixture
async def served(pki: dict[str, Any]) -> AsyncIterator[Served]:
    async with serve(pki) as s:
        yield s


# --------------------------------------------------------- paths and request bounds


@pytest.mark.parametrize(
    "path",
    [
        "/containerLogs/default/web/..%2F..%2F..%2Fetc%2Fpasswd",
        "/containerLogs/default/..%2F..%2Fetc/app",
        "/containerLogs/..%2F..%2F/web/app",
        "/containerLogs/default/web/%2E%2E",
        "/containerLogs/default/Web/app",
        "/containerLogs/default/web/app%00",
        "/run/default/web/..%2F..%2Fbin%2Fsh?cmd=id",
    ],
)
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
    status, _, _ = await served.get(
        "/run/default/web/app?cmd=true", method="POST", data=b"x" * (1 << 20)
    )
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
            env.kubelet,
            address="127.0.0.1",
            port=0,
            tls_cert_file=pki["server"][0],
            tls_private_key_file=pki["server"][1],
            authenticator=Authenticator(client_ca_file=pki["ca"]),
            enable_debugging_handlers=False,
        )
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
            env.kubelet,
            address="127.0.0.1",
            port=0,
            tls_cert_file=pki["server"][0],
            tls_private_key_file=pki["server"][1],
            authenticator=Authenticator(client_ca_file=pki["ca"]),
            limits=ServerLimits(request_timeout=30, exec_timeout=600),
        )
        async with server:
            s = Served(env, server, pki)
            request = asyncio.ensure_future(
                s.get("/run/default/web/app?cmd=sleep%20300", method="POST")
            )
            for _ in range(100):
                await env.sleep(1)
                if request.done():
                    break
            status, body, _ = await request
            assert status == 504 and "longer than 30s" in body
            # A command outliving exec_timeout is ended by the runtime and reported.
            server.limits = ServerLimits(request_timeout=600, exec_timeout=10)
            request = asyncio.ensure_future(
                s.get("/run/default/web/app?cmd=sleep%20300", method="POST")
            )
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

    config = load_kubelet_config(
        {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": "127.0.0.1",
            "port": 10250,
            "readOnlyPort": 10255,
            "tlsCertFile": pki["server"][0],
            "tlsPrivateKeyFile": pki["server"][1],
            "authentication": {
                "x509": {"clientCAFile": pki["ca"]},
                "tokenFile": pki["tokens"],
                "anonymous": {"enabled": True},
            },
            "authorization": {
                "mode": "Policy",
                "policy": [{"groups": ["monitoring"], "subresources": ["stats"], "verbs": ["get"]}],
            },
        }
    )
    server = KubeletServer.from_config(KubeletEnv().kubelet, config)
    assert (server.address, server.port, server.read_only_port) == ("127.0.0.1", 10250, 10255)
    assert server.authenticator.anonymous and server.authenticator.tokens is not None
    user = UserInfo("p", "", ("monitoring",))
    assert server.authorizer.authorize(Attributes(user, "get", "stats", "n", "/stats"))
    assert not server.authorizer.authorize(Attributes(user, "get", "proxy", "n", "/run"))
    default = KubeletServer.from_config(
        KubeletEnv().kubelet,
        load_kubelet_config(
            {
                "apiVersion": "kubelet.config.k8s.io/v1beta1",
                "kind": "KubeletConfiguration",
                "tlsCertFile": pki["server"][0],
                "tlsPrivateKeyFile": pki["server"][1],
            }
        ),
    )
    assert isinstance(default.authorizer, AlwaysAllowAuthorizer)
    assert not default.authenticator.anonymous and default.read_only_port is None


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"authorization": {"mode": "Webhook"}}, "needs an API server"),
        ({"authorization": {"mode": "Sometimes"}}, 'Unsupported value: "Sometimes"'),
        (
            {"authorization": {"mode": "Policy", "policy": [{"groups": "x"}]}},
            r"authorization.policy\[0\].groups: must be a list of strings",
        ),
        ({"authentication": {"anonymous": {"enabled": "yes"}}}, "anonymous.enabled"),
        ({"authentication": {"tokenFile": "/nonexistent/tokens.csv"}}, "cannot read"),
    ],
)
def test_bad_settings_name_their_field(section: dict[str, Any], message: str) -> None:
    from kubelet_kit.api.kubeletconfig import load_kubelet_config

    config = load_kubelet_config(
        {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", **section}
    )
    with pytest.raises(ConfigurationError, match=message):
        KubeletServer.from_config(KubeletEnv().kubelet, config)


# ------------------------------------------------------- follow, on real processes


async def test_follow_streams_new_lines_from_a_real_container(
    pki: dict[str, Any], tmp_path: Path
) -> None:
    import asyncio
    import time

    from kubelet_kit.api import load_pod
    from kubelet_kit.config import ProgrammaticSource
    from kubelet_kit.kubelet import Kubelet
    from kubelet_kit.runtimes.host import HostProcessRuntime
    from kubelet_kit.testing.env import stub_parts

    source = ProgrammaticSource()
    kubelet = Kubelet(
        **stub_parts(
            runtime=HostProcessRuntime(tmp_path / "runtime"),
            sources=[source],
            node_name="e2e-node",
            root_dir=tmp_path / "state",
            pod_logs_dir=tmp_path / "logs",
        )
    )
    source.add(
        load_pod(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "ticker", "namespace": "default", "uid": "uid-ticker"},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "tick",
                            "image": "busybox",
                            "command": [
                                "sh",
                                "-c",
                                "i=0; while [ $i -lt 600 ]; do echo tick $i; "
                                "i=$((i+1)); sleep 0.1; done",
                            ],
                        }
                    ],
                },
            },
            source="test",
        )
    )
    server = KubeletServer(
        kubelet,
        address="127.0.0.1",
        port=0,
        tls_cert_file=pki["server"][0],
        tls_private_key_file=pki["server"][1],
        authenticator=Authenticator(client_ca_file=pki["ca"]),
    )
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
            async with (
                aiohttp.ClientSession(connector=connector) as session,
                session.get(
                    served.url("/containerLogs/default/ticker/tick?follow=true&tailLines=1")
                ) as resp,
            ):
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
