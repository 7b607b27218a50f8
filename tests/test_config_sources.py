"""Pod sources and their merge: the kubelet's ADD/UPDATE/DELETE/REMOVE/RECONCILE."""

from __future__ import annotations

import asyncio
import datetime as dt
import textwrap
from pathlib import Path
from typing import Any

import attrs
import pytest
from aiohttp import web
from realtime import wait_until

from kubelet_kit.api import Pod, load_pod
from kubelet_kit.config import (
    CONFIG_HASH_ANNOTATION,
    CONFIG_SEEN_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
    FileSource,
    HTTPSource,
    PodConfig,
    PodOperation,
    PodStorage,
    ProgrammaticSource,
    SourceSnapshot,
)
from kubelet_kit.testing import FakeClock

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def pod(name: str, uid: str, image: str = "busybox", **meta: Any) -> Pod:
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "uid": uid, **meta},
            "spec": {"containers": [{"name": "c", "image": image}]},
        }
    )


def ops(updates: list[Any]) -> list[tuple[str, list[str]]]:
    return [(u.op.value, [p.metadata.name for p in u.pods]) for u in updates]


def test_merge_emits_kubelet_operations_in_order() -> None:
    storage = PodStorage()
    a, b, c = pod("a", "1"), pod("b", "2"), pod("c", "3")
    updates, problems = storage.merge("file", [a, b, c], now=NOW)
    assert ops(updates) == [("ADD", ["a", "b", "c"])]
    assert problems == []

    changed_b = pod("b", "2", image="nginx")
    deleted_c = attrs.evolve(
        c,
        metadata=attrs.evolve(c.metadata, deletion_timestamp=NOW, deletion_grace_period_seconds=5),
    )
    status_a = attrs.evolve(a, status=attrs.evolve(a.status, phase="Running"))
    d = pod("d", "4")
    updates, _ = storage.merge("file", [status_a, changed_b, deleted_c, d], now=NOW)
    assert ops(updates) == [
        ("ADD", ["d"]),
        ("UPDATE", ["b"]),
        ("DELETE", ["c"]),
        ("RECONCILE", ["a"]),
    ]
    updates, _ = storage.merge("file", [d], now=NOW)
    assert ops(updates) == [("REMOVE", ["a", "b", "c"])]


def test_merge_stamps_source_and_keeps_first_seen_time() -> None:
    storage = PodStorage()
    (add,), _ = storage.merge("http", [pod("a", "1")], now=NOW)
    seen = add.pods[0].metadata.annotations[CONFIG_SEEN_ANNOTATION]
    assert seen == "2026-01-01T00:00:00.000000000Z"
    assert add.pods[0].metadata.annotations[CONFIG_SOURCE_ANNOTATION] == "http"
    later = NOW + dt.timedelta(hours=1)
    updates, _ = storage.merge("http", [pod("a", "1")], now=later)
    assert updates == []  # nothing changed: the seen time is not a change
    assert storage.pods()[0].metadata.annotations[CONFIG_SEEN_ANNOTATION] == seen


def test_duplicate_names_are_refused_and_the_first_pod_keeps_running() -> None:
    storage = PodStorage()
    storage.merge("file", [pod("web", "1")], now=NOW)
    updates, problems = storage.merge("api", [pod("web", "2"), pod("db", "3")], now=NOW)
    assert ops(updates) == [("ADD", ["db"])]
    assert problems == ['api: metadata.name: Duplicate value: "default/web"']
    assert sorted(p.metadata.uid for p in storage.pods()) == ["1", "3"]


GOOD = """
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: c, image: busybox, command: [sleep, "3600"]}]
"""
BROKEN = """
apiVersion: v1
kind: Pod
metadata: {name: bad}
spec:
  restartPolicy: Sometimes
  containers: [{name: c}]
"""


def test_file_source_applies_static_pod_defaults(tmp_path: Path) -> None:
    (tmp_path / "web.yaml").write_text(GOOD)
    snap = FileSource(tmp_path, node_name="node1").read()
    (web,) = snap.pods
    assert web.metadata.name == "web-node1"
    assert web.spec.node_name == "node1"
    assert web.metadata.annotations[CONFIG_HASH_ANNOTATION] == web.metadata.uid
    assert web.metadata.annotations[CONFIG_SOURCE_ANNOTATION] == "file"
    assert {"operator": "Exists", "effect": "NoExecute"} in [dict(t) for t in web.spec.tolerations]
    # Same content, same uid; another node, another uid (the kubelet hashes the host).
    assert FileSource(tmp_path, node_name="node1").read().pods[0].metadata.uid == web.metadata.uid
    assert FileSource(tmp_path, node_name="node2").read().pods[0].metadata.uid != web.metadata.uid


def test_file_source_reports_bad_files_with_path_and_field_and_runs_the_rest(
    tmp_path: Path,
) -> None:
    (tmp_path / "web.yaml").write_text(GOOD)
    (tmp_path / "bad.yaml").write_text(BROKEN)
    snap = FileSource(tmp_path).read()
    assert [p.metadata.name for p in snap.pods] == ["web"]
    bad = str(tmp_path / "bad.yaml")
    assert f"{bad}: spec.containers[0].image: Required value" in snap.problems
    assert any(
        line.startswith(f"{bad}: spec.restartPolicy: Unsupported value") for line in snap.problems
    )


def test_file_turned_bad_keeps_its_last_good_pod_until_fixed_or_removed(tmp_path: Path) -> None:
    source = FileSource(tmp_path)
    (tmp_path / "web.yaml").write_text(GOOD)
    first = source.read().pods
    (tmp_path / "web.yaml").write_text(GOOD.replace("image: busybox", "image: 12:"))
    half_saved = source.read()
    assert half_saved.pods == first and half_saved.problems
    (tmp_path / "web.yaml").unlink()
    assert source.read().pods == ()


async def test_pod_config_follows_the_directory_on_the_check_period(tmp_path: Path) -> None:
    clock = FakeClock()
    problems: list[str] = []
    config = PodConfig(
        FileSource(tmp_path, clock=clock, check_frequency=20),
        clock=clock,
        on_problem=problems.append,
    )
    seen: list[tuple[str, list[str]]] = []

    async def consume() -> None:
        async for update in config.updates():
            seen.extend(ops([update]))

    task = asyncio.create_task(consume())
    try:
        await wait_until(config.sources_ready)
        assert seen == []
        (tmp_path / "web.yaml").write_text(GOOD)
        (tmp_path / "bad.yaml").write_text(BROKEN)
        await clock.run_for(19)
        await asyncio.sleep(0.05)
        assert seen == []  # not checked yet
        await clock.run_for(1)
        await wait_until(lambda: seen == [("ADD", ["web"])])
        assert any("bad.yaml" in p for p in problems)
        (tmp_path / "web.yaml").unlink()
        await clock.run_for(20)
        await wait_until(lambda: seen[-1] == ("REMOVE", ["web"]))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_programmatic_source_graceful_delete_and_remove() -> None:
    clock = FakeClock()
    source = ProgrammaticSource(clock=clock)
    config = PodConfig(source, clock=clock)
    it = config.updates()
    source.add(pod("a", "1"))
    assert ops([await anext(it)]) == [("ADD", ["a"])]
    source.delete("1", grace_period_seconds=3)
    update = await anext(it)
    assert update.op is PodOperation.DELETE
    assert update.pods[0].metadata.deletion_grace_period_seconds == 3
    source.remove("1")
    assert ops([await anext(it)]) == [("REMOVE", ["a"])]
    await it.aclose()


@pytest.fixture
async def manifest_server() -> Any:
    state: dict[str, Any] = {"status": 200, "body": GOOD}

    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=state["status"], text=state["body"])

    app = web.Application()
    app.router.add_get("/pods", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    state["url"] = f"http://127.0.0.1:{port}/pods"
    yield state
    await runner.cleanup()


async def test_http_source_fetches_and_keeps_pods_on_errors(manifest_server: Any) -> None:
    clock = FakeClock()
    source = HTTPSource(manifest_server["url"], node_name="n", clock=clock, check_frequency=20)
    it = source.snapshots()
    first = await anext(it)
    assert [p.metadata.name for p in first.pods] == ["web-n"]
    assert first.pods[0].metadata.annotations[CONFIG_SOURCE_ANNOTATION] == "http"
    url_uid = first.pods[0].metadata.uid
    assert url_uid != FileSource.__name__  # generated from the URL
    # A server error changes nothing; a bad body is reported, pods kept.
    manifest_server["status"] = 500
    manifest_server["body"] = BROKEN
    nxt = asyncio.ensure_future(anext(it))
    await clock.run_for(20)
    await asyncio.sleep(0.1)
    assert not nxt.done()
    manifest_server["status"] = 200
    await clock.run_for(20)
    bad = await asyncio.wait_for(nxt, 5)
    assert bad.pods == first.pods and any("spec.containers[0].image" in p for p in bad.problems)
    manifest_server["body"] = ""
    nxt = asyncio.ensure_future(anext(it))
    for _ in range(100):  # the fetch is real I/O: let it land between clock steps
        if nxt.done():
            break
        await clock.run_for(20)
        await asyncio.sleep(0.02)
    assert nxt.result() == SourceSnapshot(())
    await it.aclose()


def test_http_source_parses_pod_lists() -> None:
    body = textwrap.dedent(
        """
        {"kind": "List", "apiVersion": "v1", "items": [
          {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
          {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}]}
        """
    ).encode()
    snap = HTTPSource("http://example.invalid/x").parse(body)
    assert [p.metadata.name for p in snap.pods] == ["a", "b"]
    assert len({p.metadata.uid for p in snap.pods}) == 2


def test_sources_with_the_same_name_are_refused_with_the_fix() -> None:
    with pytest.raises(
        ValueError,
        match=r"distinct names, got \['api', 'api'\].*"
        r"ProgrammaticSource\('local'\)",
    ):
        PodConfig(ProgrammaticSource(), ProgrammaticSource())


async def test_a_source_that_raises_is_restarted_and_the_others_keep_going() -> None:
    class Flaky:
        name = "flaky"
        runs = 0

        async def snapshots(self) -> Any:
            Flaky.runs += 1
            if Flaky.runs == 1:
                raise RuntimeError("boom")
            yield SourceSnapshot((pod("f", "f1"),))
            await asyncio.Event().wait()

    lines: list[str] = []
    clock = FakeClock()
    config = PodConfig(Flaky(), ProgrammaticSource("local"), clock=clock, on_problem=lines.append)
    seen: list[str] = []

    async def consume() -> None:
        async for update in config.updates():
            seen.extend(p.metadata.name for p in update.pods)

    task = asyncio.create_task(consume())
    try:
        await wait_until(lambda: bool(lines), what="the failure reported")
        assert not task.done()
        clock.advance(1.0)  # the back-off before the restart
        await wait_until(lambda: "f" in seen, what="restarted source's pod")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert Flaky.runs == 2
    assert any("pod source flaky failed: RuntimeError: boom" in line for line in lines)
