"""APIServerSource against the API server stand-in, through kubernetes_asyncio:
list, watch, field selector, bookmarks, 410 Gone, back-off, mirror pods."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from kubelet_kit.config.apiserver import APIServerSource, Backoff, PodLoadCache, pods_snapshot
from kubelet_kit.config.interfaces import SourceSnapshot
from kubelet_kit.testing import FakeClock

from .apiserver_standin import StandInAPIServer
from .helpers import eventually, pod_object


class Reader:
    """Drains a source's snapshots in a task, keeping the latest."""

    def __init__(self, source: APIServerSource) -> None:
        self.source = source
        self.snapshots: list[SourceSnapshot] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        stream: AsyncIterator[SourceSnapshot] = self.source.snapshots()
        async for snap in stream:
            self.snapshots.append(snap)

    def names(self) -> list[str]:
        return [p.name for p in self.snapshots[-1].pods] if self.snapshots else []

    async def __aenter__(self) -> Reader:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def test_lists_and_watches_only_this_nodes_pods(
    standin: StandInAPIServer, api_client: Any
) -> None:
    standin.put("pods", pod_object("a"))
    standin.put("pods", pod_object("elsewhere", node="node-2"))
    source = APIServerSource(api_client, "node-1", clock=FakeClock())
    async with Reader(source) as reader:
        await eventually(lambda: reader.names() == ["a"], what="first list")
        assert source.resource_version == str(standin.rv)
        standin.put("pods", pod_object("b"))
        await eventually(lambda: reader.names() == ["a", "b"], what="watched ADDED")
        standin.remove("pods", "default", "a")
        await eventually(lambda: reader.names() == ["b"], what="watched DELETED")
        # A pod scheduled elsewhere never shows; one re-bound here does (ADDED).
        standin.put("pods", pod_object("c", node="node-2"))
        moved = standin.put("pods", pod_object("c"))
        await eventually(lambda: "c" in reader.names(), what="re-bound pod")
        assert reader.snapshots[-1].pods[-1].uid == moved["metadata"]["uid"]
    assert source.lists == 1
    watches = [p for m, p in standin.requests if m == "GET" and "watch=True" in p]
    assert watches and all("fieldSelector=spec.nodeName%3Dnode-1" in p for p in watches)
    assert all("allowWatchBookmarks=True" in p for p in watches)


async def test_a_modified_pod_is_a_new_snapshot_with_its_new_spec(
    standin: StandInAPIServer, api_client: Any
) -> None:
    obj = standin.put("pods", pod_object("a"))
    source = APIServerSource(api_client, "node-1", clock=FakeClock())
    async with Reader(source) as reader:
        await eventually(lambda: reader.names() == ["a"])
        obj["metadata"]["labels"] = {"tier": "web"}
        standin.put("pods", obj)
        await eventually(
            lambda: dict(reader.snapshots[-1].pods[0].metadata.labels) == {"tier": "web"},
            what="label change",
        )


async def test_410_gone_relists_and_a_bookmark_avoids_it(
    standin: StandInAPIServer, api_client: Any
) -> None:
    standin.put("pods", pod_object("a"))
    source = APIServerSource(api_client, "node-1", clock=FakeClock())
    async with Reader(source) as reader:
        await eventually(lambda: reader.names() == ["a"])
        await eventually(lambda: standin._watchers != set(), what="watch open")
        # Another node's pods move the version on; a bookmark carries it here.
        for i in range(3):
            standin.put("pods", pod_object(f"x{i}", node="node-2"))
        standin.bookmark()
        await eventually(lambda: source.resource_version == str(standin.rv), what="bookmark")
        standin.compact()
        standin.close_watches()
        standin.put("pods", pod_object("b"))
        await eventually(lambda: reader.names() == ["a", "b"], what="rewatch")
        assert source.lists == 1  # the bookmark's version was still in the history

        # Without a bookmark the version is compacted away: 410, then a fresh list.
        await eventually(lambda: standin._watchers != set(), what="watch open again")
        for i in range(3):
            standin.put("pods", pod_object(f"y{i}", node="node-2"))
        standin.remove("pods", "default", "a")
        standin.close_watches()
        standin.compact()
        standin.put("pods", pod_object("c"))
        standin.compact()
        await eventually(lambda: source.lists == 2, what="re-list after 410")
        await eventually(lambda: reader.names() == ["b", "c"], what="state after re-list")


async def test_errors_back_off_on_the_clock_and_keep_the_last_pods(
    standin: StandInAPIServer, api_client: Any
) -> None:
    clock = FakeClock()
    failing = {"n": 2}

    def hook(request: web.Request) -> web.Response | None:
        if request.path == "/api/v1/pods" and failing["n"] > 0:
            failing["n"] -= 1
            return web.json_response(
                {
                    "kind": "Status",
                    "code": 500,
                    "reason": "InternalError",
                    "message": "etcd is sad",
                },
                status=500,
            )
        return None

    standin.add_hook(hook)
    standin.put("pods", pod_object("a"))
    source = APIServerSource(api_client, "node-1", clock=clock, backoff=Backoff(1.0, 30.0))
    async with Reader(source) as reader:
        await eventually(lambda: clock.next_deadline() is not None, what="first back-off")
        assert clock.next_deadline() == clock.monotonic() + 1.0
        assert reader.snapshots == []
        clock.advance(1.0)
        await eventually(
            lambda: failing["n"] == 0 and clock.next_deadline() is not None, what="second back-off"
        )
        assert clock.next_deadline() == clock.monotonic() + 2.0  # doubled
        clock.advance(2.0)
        await eventually(lambda: reader.names() == ["a"], what="list after back-off")
        # The server goes away: the pods last seen stay, nothing new is yielded.
        count = len(reader.snapshots)
        await standin.stop()
        await eventually(lambda: clock.next_deadline() is not None, what="back-off on outage")
        assert len(reader.snapshots) == count
        await standin.start()
        standin.put("pods", pod_object("b"))
        await eventually(
            lambda: reader.names() == ["a", "b"], clock=clock, what="caught up after the outage"
        )


def test_snapshot_skips_mirror_pods_and_names_bad_pods() -> None:
    good = pod_object("good")
    good["metadata"].update(uid="u1", resourceVersion="5", creationTimestamp="2026-01-01T00:00:00Z")
    mirror = pod_object("static-node-1")
    mirror["metadata"].update(
        uid="u2", resourceVersion="6", annotations={"kubernetes.io/config.mirror": "abc"}
    )
    # The API server judged its pods: a value the agent cannot read is served with
    # the pod, for the agent to reject at admission; only a pod that cannot be
    # named becomes a problem line.
    bad = pod_object("bad")
    bad["metadata"].update(uid="u3", resourceVersion="7", creationTimestamp="2026-01-01T00:01:00Z")
    bad["spec"]["containers"][0]["resources"] = {"limits": {"memory": "12Q"}}
    nameless = pod_object("")
    nameless["metadata"].update(uid="u4", resourceVersion="8")
    cache = PodLoadCache()
    snap = pods_snapshot(
        {"u1": good, "u2": mirror, "u3": bad, "u4": nameless}, node_name="node-1", cache=cache
    )
    assert [p.name for p in snap.pods] == ["good", "bad"]
    assert snap.pods[0].problems == ()
    assert [e.path for e in snap.pods[1].problems] == ["spec.containers[0].resources.limits.memory"]
    assert len(snap.problems) == 1
    assert snap.problems[0].startswith("api: default/: metadata")
    assert cache.versions() == {"u1": "5", "u3": "7"}
    # A pod already loaded at that version is not loaded again.
    again = pods_snapshot({"u1": good}, node_name="node-1", cache=cache)
    assert again.pods[0] is snap.pods[0]


def test_backoff_doubles_to_its_cap_and_resets() -> None:
    backoff = Backoff()
    assert [backoff.next() for _ in range(8)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    backoff.reset()
    assert backoff.next() == 0.8


def test_a_pod_finished_before_it_was_first_seen_is_not_run_again() -> None:
    done = pod_object("done")
    done["metadata"].update(uid="u1", resourceVersion="5")
    done["status"] = {"phase": "Succeeded"}
    running = pod_object("job")
    running["metadata"].update(uid="u2", resourceVersion="6")
    running["status"] = {"phase": "Running"}
    seen: set[str] = set()
    snap = pods_snapshot({"u1": done, "u2": running}, node_name="node-1", seen_active=seen)
    assert [p.name for p in snap.pods] == ["job"]
    # The job finishes while this agent runs it: it stays until the server drops it.
    finished = {
        **running,
        "status": {"phase": "Succeeded"},
        "metadata": {**running["metadata"], "resourceVersion": "7"},
    }
    snap = pods_snapshot({"u1": done, "u2": finished}, node_name="node-1", seen_active=seen)
    assert [p.name for p in snap.pods] == ["job"]
    assert snap.pods[0].status.phase == "Succeeded"


async def test_a_malformed_watch_answer_backs_off_and_recovers(
    standin: StandInAPIServer, api_client: Any
) -> None:
    clock = FakeClock()
    broken = {"n": 1}

    def hook(request: web.Request) -> web.Response | None:
        if request.query.get("watch") and broken["n"]:
            broken["n"] -= 1
            return web.Response(
                text='{"neither": "type nor object"}\n', content_type="application/json"
            )
        return None

    standin.add_hook(hook)
    standin.put("pods", pod_object("a"))
    source = APIServerSource(api_client, "node-1", clock=clock)
    async with Reader(source) as reader:
        await eventually(
            lambda: reader.names() == ["a"] and clock.next_deadline() is not None,
            what="list, then a back-off after the bad watch",
        )
        standin.put("pods", pod_object("b"))
        await eventually(lambda: reader.names() == ["a", "b"], clock=clock, what="watching again")
        assert source.lists == 1


def test_a_status_only_change_keeps_the_loaded_spec_and_reads_the_new_status() -> None:
    cache = PodLoadCache()
    first = pod_object("web")
    first["metadata"].update(uid="u1", resourceVersion="5")
    (loaded,) = pods_snapshot({"u1": first}, node_name="node-1", cache=cache).pods

    # The node's own status write: a new version, new managedFields, same spec.
    written = copy.deepcopy(first)
    written["metadata"].update(
        resourceVersion="6", managedFields=[{"manager": "kubelet", "operation": "Update"}]
    )
    written["status"] = {"phase": "Running", "podIP": "10.88.2.1"}
    (after,) = pods_snapshot({"u1": written}, node_name="node-1", cache=cache).pods
    assert after.spec is loaded.spec  # not decoded again
    assert after.status.phase == "Running" and after.status.pod_ip == "10.88.2.1"
    assert after.metadata.resource_version == "6"
    assert cache.versions() == {"u1": "6"}

    # A change of the spec or the metadata loads the pod whole.
    relabelled = copy.deepcopy(written)
    relabelled["metadata"].update(resourceVersion="7", labels={"tier": "web"})
    (again,) = pods_snapshot({"u1": relabelled}, node_name="node-1", cache=cache).pods
    assert again.metadata.labels == {"tier": "web"}
    assert again.spec is not loaded.spec and again.spec == loaded.spec

    # A status the model cannot read falls back to the whole load (and its problems).
    odd = copy.deepcopy(relabelled)
    odd["metadata"]["resourceVersion"] = "8"
    odd["status"] = {"startTime": 12}
    (whole,) = pods_snapshot({"u1": odd}, node_name="node-1", cache=cache).pods
    assert [e.path for e in whole.problems] == ["status.startTime"]
