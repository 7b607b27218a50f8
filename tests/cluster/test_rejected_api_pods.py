"""In cluster mode: the API server is the judge of its pods, and a pod the agent
cannot run is rejected as at admission, reported to the server, and its deletion
completes (the kubelet's ``rejectPod``, then the status manager's final delete of
a terminal pod)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes_asyncio import client as k8s

from .apiserver_standin import StandInAPIServer
from .helpers import eventually, pod_object
from .test_cluster_node import pod_status, running_agent

MEMORY_PATH = "spec.containers[0].resources.limits.memory"


def with_zero_divisors(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod as the API server stores it when no divisor was given: ``"0"``."""
    ref = {"resource": "limits.memory", "divisor": "0"}
    container = obj["spec"]["containers"][0]
    container["env"] = [{"name": "MEMORY", "valueFrom": {"resourceFieldRef": ref}}]
    container["resources"] = {"limits": {"memory": "64Mi"}}
    return obj


async def test_a_pod_with_the_api_servers_zero_divisor_runs(
    standin: StandInAPIServer, api_client: Any, tmp_path: Path
) -> None:
    standin.put("pods", with_zero_divisors(pod_object("dapi")))
    async with running_agent(api_client, tmp_path) as agent:
        await eventually(
            lambda: pod_status(standin, "dapi").get("phase") == "Running",
            clock=agent.clock,
            what="dapi Running on the server",
        )
        config = agent.runtime.calls_to("create_container")[-1].args[1]
        assert {kv.key: kv.value for kv in config.envs}["MEMORY"] == str(64 * 1024 * 1024)


async def test_a_pod_the_agent_cannot_run_fails_is_reported_and_its_deletion_completes(
    standin: StandInAPIServer, api_client: Any, tmp_path: Path
) -> None:
    bad = pod_object("bad")
    bad["spec"]["containers"][0]["resources"] = {"limits": {"memory": "12Q"}}
    uid = standin.put("pods", bad)["metadata"]["uid"]
    async with running_agent(api_client, tmp_path) as agent:
        clock = agent.clock
        await eventually(
            lambda: pod_status(standin, "bad").get("phase") == "Failed",
            clock=clock,
            what="bad Failed on the server",
        )
        status = pod_status(standin, "bad")
        assert status["reason"] == "UnexpectedAdmissionError"
        assert status["message"].startswith(f"Pod was rejected: {MEMORY_PATH}: ")

        def rejections() -> list[dict[str, Any]]:
            return [
                e
                for (r, _, _), e in standin.objects.items()
                if r == "events" and e["reason"] == "UnexpectedAdmissionError"
            ]

        await eventually(lambda: bool(rejections()), clock=clock, what="event written")
        event = rejections()[0]
        assert event["type"] == "Warning"
        assert event["involvedObject"]["uid"] == uid
        assert MEMORY_PATH in event["message"]
        assert await agent.running(uid) == []

        await k8s.CoreV1Api(api_client).delete_namespaced_pod(
            "bad", "default", grace_period_seconds=30
        )
        await eventually(
            lambda: standin.get("pods", "default", "bad") is None,
            clock=clock,
            what="the rejected pod deleted for good",
        )
