"""Lifecycle hooks: postStart and preStop in RuntimePodSyncer (with the grace
period and the termination ordering of sidecars), and the hook runner's exec,
HTTP, TCP and sleep handlers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _podsync_syncer_helpers import Env, exec_hook, make_env, mkcontainer, mkpod, shutdown
from aiohttp import web

from kubelet_kit.api import (
    ContainerPort,
    HTTPGetAction,
    HTTPHeader,
    Lifecycle,
    LifecycleHandler,
    SleepAction,
    TCPSocketAction,
)
from kubelet_kit.container.interfaces import ContainerState
from kubelet_kit.node.podworkers import UpdateType
from kubelet_kit.podsync.hooks import HandlerRunner


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield make_env(tmp_path)


# ------------------------------------------------------------------------- hooks


async def test_post_start_failure_kills_the_container(env: Env) -> None:
    container = mkcontainer(lifecycle=Lifecycle(post_start=exec_hook("sh", "-c", "exit 3")))
    pod = mkpod(container, restart="Never")
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    (app,) = await env.containers("app")
    assert app.state is ContainerState.EXITED
    reason, message = env.syncer.waiting_reasons("u1")["app"]
    assert reason == "PostStartHookError"
    assert message == (
        'Exec lifecycle hook ([sh -c exit 3]) for Container "app" in Pod "web_ns(u1)" '
        "failed - error: command 'sh -c exit 3' exited with 3: , message: \"\""
    )


async def test_post_start_success_clears_nothing_and_keeps_running(env: Env) -> None:
    container = mkcontainer(lifecycle=Lifecycle(post_start=exec_hook("sh", "-c", "echo hi")))
    await env.syncer.sync_pod(UpdateType.CREATE, mkpod(container))
    assert (await env.containers("app"))[0].state is ContainerState.RUNNING
    assert env.syncer.waiting_reasons("u1") == {}


async def test_pre_stop_then_graceful_stop_with_term_and_kill(env: Env) -> None:
    container = mkcontainer(lifecycle=Lifecycle(pre_stop=exec_hook("sh", "-c", "sleep 5")))
    pod = mkpod(container)
    env.runtime.ignore_sigterm("app")
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    (app,) = await env.containers("app")
    task = asyncio.create_task(env.syncer.sync_terminating_pod(pod, 30))
    await env.clock.run_for(4, settle_rounds=200)
    assert env.runtime.calls_to("stop_container") == []  # preStop still running
    await env.clock.run_for(40, settle_rounds=200)
    await task
    (stop,) = env.runtime.calls_to("stop_container")
    assert stop.args[:2] == (app.id, 25)  # what the 5 s hook left of 30 s
    (done,) = await env.containers("app")
    assert done.exit_code == 137  # SIGTERM ignored: killed at the deadline
    assert done.finished_at - env.t0 == 30
    assert all(s.state.value == "SANDBOX_NOTREADY" for s in await env.runtime.list_pod_sandboxes())


async def test_pre_stop_bounded_by_grace_and_minimum_stop_window(env: Env) -> None:
    container = mkcontainer(lifecycle=Lifecycle(pre_stop=exec_hook("sh", "-c", "sleep 100")))
    pod = mkpod(container)
    await env.syncer.sync_pod(UpdateType.CREATE, pod)
    task = asyncio.create_task(env.syncer.sync_terminating_pod(pod, 10))
    await env.clock.run_for(20, settle_rounds=200)
    await task
    (stop,) = env.runtime.calls_to("stop_container")
    assert stop.args[1] == 2  # the hook used the whole grace; 2 s is the floor


async def test_termination_stops_sidecars_after_regular_containers(env: Env) -> None:
    sidecars = tuple(mkcontainer(n, restart_policy="Always") for n in ("s1", "s2"))
    pod = mkpod(inits=sidecars)
    env.runtime.ignore_sigterm("s2")
    env.start_workers(pod)
    await env.run_until(5)
    assert all(c.state is ContainerState.RUNNING for c in await env.containers())
    await shutdown(env)
    task = asyncio.create_task(env.syncer.sync_terminating_pod(pod, 20))
    await env.clock.run_for(60, settle_rounds=200)
    await task
    finished = {c.metadata.name: c.finished_at - env.t0 for c in await env.containers()}
    # app stops at once on SIGTERM; s2 (the later sidecar) is stopped only then,
    # ignores SIGTERM and is killed 20 s later; s1 waits for s2, and its grace is
    # used up by then, so it gets the 2 s floor (and stops at once).
    assert finished == {"app": 5, "s2": 25, "s1": 25}
    names = {c.id: c.metadata.name for c in await env.containers()}
    stops = [(names[c.args[0]], c.args[1]) for c in env.runtime.calls_to("stop_container")]
    assert stops == [("app", 20), ("s2", 20), ("s1", 2)]


# ----------------------------------------------------------- hook runner details


@pytest.fixture
async def http_server() -> Any:
    seen: list[web.Request] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request)
        return web.Response(status=int(request.query.get("status", "200")), text="ok")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield port, seen
    await runner.cleanup()


async def test_http_hook_uses_pod_ip_named_port_path_and_headers(
    env: Env, http_server: Any
) -> None:
    port, seen = http_server
    container = mkcontainer(ports=(ContainerPort(name="web", container_port=port),))
    handler = LifecycleHandler(
        http_get=HTTPGetAction(
            path="/hook?status=500", port="web", http_headers=(HTTPHeader(name="X-A", value="1"),)
        )
    )
    runner = HandlerRunner(env.runtime, env.clock)
    pod = mkpod(container)
    # As upstream, any HTTP response (even a 500) is a completed hook.
    assert await runner.run("cid", pod, container, handler, pod_ips=("127.0.0.1",)) is None
    (request,) = seen
    assert request.path == "/hook"
    assert request.headers["X-A"] == "1"
    assert request.headers["User-Agent"].startswith("kube-lifecycle/")


async def test_https_hook_answered_over_http_falls_back(env: Env, http_server: Any) -> None:
    port, seen = http_server
    handler = LifecycleHandler(
        http_get=HTTPGetAction(
            path="/tls",
            port=port,
            host="127.0.0.1",
            scheme="HTTPS",
            http_headers=(
                HTTPHeader(name="Authorization", value="Bearer x"),
                HTTPHeader(name="X-B", value="2"),
            ),
        )
    )
    runner = HandlerRunner(env.runtime, env.clock)
    assert await runner.run("cid", mkpod(), mkcontainer(), handler) is None
    (request,) = seen
    assert request.path == "/tls" and request.headers["X-B"] == "2"
    assert "Authorization" not in request.headers


async def test_http_hook_failure_message(env: Env, http_server: Any) -> None:
    port, _ = http_server
    await asyncio.sleep(0)
    container = mkcontainer()
    handler = LifecycleHandler(http_get=HTTPGetAction(path="/x", port=1, host="127.0.0.1"))
    message = await HandlerRunner(env.runtime, env.clock).run("cid", mkpod(), container, handler)
    assert message is not None
    assert message.startswith(
        'HTTP lifecycle hook (/x) for Container "app" in Pod "web_ns(u1)" failed - error: '
        'Get "http://127.0.0.1:1/x":'
    )
    no_ip = LifecycleHandler(http_get=HTTPGetAction(path="/x", port=port))
    message = await HandlerRunner(env.runtime, env.clock).run("cid", mkpod(), container, no_ip)
    assert message is not None and "failed to find networking container" in message


async def test_tcp_hook(env: Env, http_server: Any) -> None:
    port, _ = http_server
    runner = HandlerRunner(env.runtime, env.clock)
    ok = LifecycleHandler(tcp_socket=TCPSocketAction(port=port, host="127.0.0.1"))
    assert await runner.run("cid", mkpod(), mkcontainer(), ok) is None
    bad = LifecycleHandler(tcp_socket=TCPSocketAction(port="missing", host="127.0.0.1"))
    message = await runner.run("cid", mkpod(), mkcontainer(), bad)
    assert message is not None and "couldn't find port: missing in app" in message


async def test_sleep_hook_waits_on_the_clock(env: Env) -> None:
    runner = HandlerRunner(env.runtime, env.clock)
    handler = LifecycleHandler(sleep=SleepAction(seconds=5))
    task = asyncio.create_task(runner.run("cid", mkpod(), mkcontainer(), handler))
    await env.clock.run_for(4.9)
    assert not task.done()
    await env.clock.run_for(0.1)
    assert await task is None


async def test_exec_hook_runtime_error(env: Env) -> None:
    await env.syncer.sync_pod(UpdateType.CREATE, mkpod())
    (app,) = await env.containers("app")
    runner = HandlerRunner(env.runtime, env.clock)
    ok = await runner.run(app.id, mkpod(), mkcontainer(), exec_hook("sh", "-c", "echo fine"))
    assert ok is None
    message = await runner.run("nope", mkpod(), mkcontainer(), exec_hook("true"))
    assert message is not None
    assert message.startswith('Exec lifecycle hook ([true]) for Container "app" in Pod')
