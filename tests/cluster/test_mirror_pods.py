"""Mirror pods against the API server stand-in: made for each static pod, finished
and made again when deleted through the API, replaced when stale, while the static
pod itself runs on untouched."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from kubelet_kit.config import FileSource

from .apiserver_standin import StandInAPIServer
from .helpers import eventually, pod_object
from .test_cluster_node import Agent, running_agent

MIRROR = "static-node-1"
MIRROR_PATH = f"/api/v1/namespaces/default/pods/{MIRROR}"
_MANIFEST = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: static\n  namespace: default\n"
    "spec:\n  containers:\n  - name: main\n    image: busybox\n"
    "    command: [sh, -c, sleep infinity]\n"
)


@contextlib.asynccontextmanager
async def static_agent(api_client: Any, tmp_path: Path) -> AsyncIterator[Agent]:
    """An agent with one static pod from a manifest directory, its mirror made and
    showing Running."""
    manifests = tmp_path / "manifests"
    manifests.mkdir(parents=True)
    (manifests / "static.yaml").write_text(_MANIFEST)
    file_source = FileSource(manifests, node_name="node-1")
    async with running_agent(api_client, tmp_path / "root", extra_sources=(file_source,)) as agent:
        file_source._clock = agent.clock  # the source's checks on the agent's clock
        yield agent


def mirror(standin: StandInAPIServer) -> dict[str, Any] | None:
    return standin.get("pods", "default", MIRROR)


def mirror_uid(standin: StandInAPIServer) -> str:
    return str(((mirror(standin) or {}).get("metadata") or {}).get("uid", ""))


def mirror_phase(standin: StandInAPIServer) -> str:
    return str(((mirror(standin) or {}).get("status") or {}).get("phase", ""))


def mirror_deletes(standin: StandInAPIServer) -> list[Any]:
    return [b for m, p, b in standin.bodies if m == "DELETE" and p == MIRROR_PATH]


async def mirror_running(standin: StandInAPIServer, agent: Agent) -> str:
    """Wait for the mirror pod to show the static pod Running; its uid."""
    await eventually(
        lambda: mirror_phase(standin) == "Running",
        clock=agent.clock,
        what="mirror pod showing Running",
    )
    return mirror_uid(standin)


def static_uid(agent: Agent) -> str:
    return next(p.uid for p in agent.kubelet.pods() if p.name == MIRROR)


def stops_and_starts(agent: Agent) -> tuple[int, int, int]:
    runtime = agent.runtime
    return (
        len(runtime.calls_to("run_pod_sandbox")),
        len(runtime.calls_to("start_container")),
        len(runtime.calls_to("stop_container")),
    )


async def test_a_static_pod_gets_a_mirror_pod(
    standin: StandInAPIServer, api_client: Any, tmp_path: Path
) -> None:
    async with static_agent(api_client, tmp_path) as agent:
        uid = await mirror_running(standin, agent)
        obj = mirror(standin)
        assert obj is not None
        static = next(p for p in agent.kubelet.pods() if p.name == MIRROR)
        annotations = obj["metadata"]["annotations"]
        assert (
            annotations["kubernetes.io/config.mirror"]
            == static.metadata.annotations["kubernetes.io/config.hash"]
        )
        assert "kubernetes.io/config.seen" not in annotations
        assert obj["metadata"]["ownerReferences"][0]["kind"] == "Node"
        assert obj["spec"]["nodeName"] == "node-1"
        assert agent.node.mirrors.mirror_of(static) == uid
        # A sync with nothing to change changes nothing.
        await agent.clock.run_for(30)
        assert mirror_uid(standin) == uid
        assert mirror_deletes(standin) == []


async def test_a_gracefully_deleted_mirror_pod_is_deleted_for_good_and_made_again(
    standin: StandInAPIServer, api_client: Any, tmp_path: Path
) -> None:
    async with static_agent(api_client, tmp_path) as agent:
        old_uid = await mirror_running(standin, agent)
        before = stops_and_starts(agent)

        # kubectl delete pod: the server only marks a pod bound to a node.
        await k8s.CoreV1Api(api_client).delete_namespaced_pod(MIRROR, "default")
        marked = mirror(standin)
        assert marked is not None and marked["metadata"]["deletionTimestamp"]
        assert marked["metadata"]["deletionGracePeriodSeconds"] == 30

        await eventually(
            lambda: mirror_uid(standin) not in ("", old_uid),
            clock=agent.clock,
            what="a new mirror pod",
        )
        new = mirror(standin)
        assert new is not None and "deletionTimestamp" not in new["metadata"]
        # The marked mirror was finished as the kubelet does: grace 0, its uid as
        # the precondition (never another pod of that name).
        assert mirror_deletes(standin)[-1] == {
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": old_uid},
        }

        # Its status is the static pod's again, sent to the new uid.
        new_uid = await mirror_running(standin, agent)
        patches = [b for m, p, b in standin.bodies if m == "PATCH" and p == f"{MIRROR_PATH}/status"]
        assert patches[-1]["metadata"] == {"uid": new_uid}
        assert (
            agent.node.mirrors.mirror_of(next(p for p in agent.kubelet.pods() if p.name == MIRROR))
            == new_uid
        )

        # The static pod ran on: nothing stopped, nothing started again, and the
        # mirror was never taken for a pod to run.
        assert stops_and_starts(agent) == before
        assert [p.name for p in agent.kubelet.pods()] == [MIRROR]
        assert await agent.running(static_uid(agent)) == ["main"]
        assert not agent.node.pod_status.final_deletes

        # And it stays: the next syncs keep the new mirror.
        await agent.clock.run_for(30)
        assert mirror_uid(standin) == new_uid


async def test_a_mirror_pod_with_a_stale_hash_is_replaced(
    standin: StandInAPIServer, api_client: Any, tmp_path: Path
) -> None:
    async with static_agent(api_client, tmp_path) as agent:
        old_uid = await mirror_running(standin, agent)
        before = stops_and_starts(agent)
        stale = mirror(standin)
        assert stale is not None
        stale["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "0123abcd"
        standin.put("pods", stale)

        await eventually(
            lambda: mirror_uid(standin) not in ("", old_uid),
            clock=agent.clock,
            what="the stale mirror pod replaced",
        )
        static = next(p for p in agent.kubelet.pods() if p.name == MIRROR)
        new = mirror(standin)
        assert new is not None
        assert (
            new["metadata"]["annotations"]["kubernetes.io/config.mirror"]
            == static.metadata.annotations["kubernetes.io/config.hash"]
        )
        assert mirror_deletes(standin)[-1] == {
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": old_uid},
        }
        await mirror_running(standin, agent)
        assert stops_and_starts(agent) == before


async def test_orphaned_mirror_pods_go_and_regular_pods_of_the_name_stay(
    standin: StandInAPIServer, api_client: Any, tmp_path: Path
) -> None:
    orphan = pod_object("gone-node-1", annotations={"kubernetes.io/config.mirror": "abc"})
    orphan_uid = standin.put("pods", orphan)["metadata"]["uid"]
    async with static_agent(api_client, tmp_path) as agent:
        await mirror_running(standin, agent)
        await eventually(
            lambda: standin.get("pods", "default", "gone-node-1") is None,
            clock=agent.clock,
            what="orphaned mirror pod deleted",
        )
        deletes = [
            b for m, p, b in standin.bodies if m == "DELETE" and p.endswith("/pods/gone-node-1")
        ]
        assert deletes == [{"gracePeriodSeconds": 0, "preconditions": {"uid": orphan_uid}}]

    # A regular pod holding the static pod's name is not the mirror: left alone.
    standin.remove("pods", "default", MIRROR)
    regular = standin.put("pods", pod_object(MIRROR, node="node-2"))
    creates = standin.count("POST", "/api/v1/namespaces/default/pods")
    async with static_agent(api_client, tmp_path / "again") as agent:
        await eventually(
            lambda: standin.count("POST", "/api/v1/namespaces/default/pods") > creates,
            clock=agent.clock,
            what="a mirror pod asked for",
        )
        await agent.clock.run_for(30)
        assert (
            agent.node.mirrors.mirror_of(next(p for p in agent.kubelet.pods() if p.name == MIRROR))
            is None
        )
        kept = mirror(standin)
        assert kept is not None and kept["metadata"]["uid"] == regular["metadata"]["uid"]
        assert "phase" not in (kept.get("status") or {})


async def test_the_stand_in_finishes_a_graceful_delete_only_with_grace_zero(
    standin: StandInAPIServer, api_client: Any
) -> None:
    core = k8s.CoreV1Api(api_client)
    uid = standin.put("pods", pod_object("web", grace=20))["metadata"]["uid"]
    await core.delete_namespaced_pod("web", "default")
    marked = standin.get("pods", "default", "web")
    assert marked is not None and marked["metadata"]["deletionGracePeriodSeconds"] == 20
    assert marked["metadata"]["deletionTimestamp"]
    # Another uid in the precondition: 409, the pod stays.
    with pytest.raises(ApiException) as refused:
        await core.delete_namespaced_pod(
            "web",
            "default",
            body=k8s.V1DeleteOptions(
                grace_period_seconds=0, preconditions=k8s.V1Preconditions(uid="other")
            ),
        )
    assert refused.value.status == 409
    assert standin.get("pods", "default", "web") is not None
    await core.delete_namespaced_pod(
        "web",
        "default",
        body=k8s.V1DeleteOptions(
            grace_period_seconds=0, preconditions=k8s.V1Preconditions(uid=uid)
        ),
    )
    assert standin.get("pods", "default", "web") is None
