"""The API server is the judge of the pods it serves; the agent's own checks are
for static pods; a pod the agent still cannot run is rejected at admission.

The kubelet validates only the pods of its file and HTTP sources (upstream
``pkg/kubelet/config/common.go``), never those of the API server, and it rejects
a pod it cannot admit with ``rejectPod``: a Warning event with the reason and
message, and the pod Failed with that reason and ``Pod was rejected: <message>``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.api import load_pod
from kubelet_kit.api.loading import load_api_pod
from kubelet_kit.cm import StubContainerManager
from kubelet_kit.config import FileSource
from kubelet_kit.errors import ValidationError
from kubelet_kit.testing.env import KubeletEnv

MEMORY_PATH = "spec.containers[0].resources.limits.memory"


def api_pod(name: str, **container: Any) -> dict[str, Any]:
    """A pod as the API server serves it (defaulted, with a uid)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sh", "-c", "sleep infinity"],
                    **container,
                }
            ],
        },
    }


def unreadable_pod(name: str) -> dict[str, Any]:
    """A pod with a value this agent cannot read (no such quantity suffix)."""
    return api_pod(name, resources={"limits": {"memory": "12Q"}})


def test_the_api_servers_pods_are_not_validated_again() -> None:
    obj = api_pod("web")
    obj["metadata"]["annotations"] = {"not a key!": "x"}
    with pytest.raises(ValidationError) as refused:
        load_pod(obj)  # a static pod: every rule applies
    assert [e.path for e in refused.value.errors] == ["metadata.annotations"]
    pod = load_api_pod(obj)  # the API server's pod: the server already judged it
    assert pod.problems == ()
    assert pod.metadata.annotations == {"not a key!": "x"}


def test_a_value_the_agent_cannot_read_is_kept_as_a_problem_of_the_pod() -> None:
    pod = load_api_pod(unreadable_pod("bad"))
    assert (pod.name, pod.uid) == ("bad", "uid-bad")
    assert [e.path for e in pod.problems] == [MEMORY_PATH]


def test_an_api_object_that_names_no_pod_cannot_be_served() -> None:
    obj = api_pod("anonymous")
    del obj["metadata"]["uid"]
    with pytest.raises(ValidationError):
        load_api_pod(obj)


async def test_a_pod_the_api_server_accepted_runs() -> None:
    obj = api_pod("web")
    obj["metadata"]["annotations"] = {"not a key!": "x"}
    async with KubeletEnv() as env:
        env.add_pod(load_api_pod(obj))
        await env.wait_for(lambda: env.phase("web") == "Running", what="web Running")


async def test_a_pod_the_agent_cannot_read_is_rejected_as_at_admission() -> None:
    async with KubeletEnv() as env:
        env.add_pod(load_api_pod(unreadable_pod("bad")))
        env.add_pod(load_api_pod(api_pod("good")))
        await env.wait_for(lambda: env.phase("bad") == "Failed", what="bad Failed")
        status = env.status("bad")
        assert status.reason == "UnexpectedAdmissionError"
        assert status.message.startswith(f"Pod was rejected: {MEMORY_PATH}: ")
        events = env.kubelet.events.events("uid-bad")
        assert [(e.type, e.reason) for e in events] == [("Warning", "UnexpectedAdmissionError")]
        assert events[0].message.startswith(f"{MEMORY_PATH}: ")
        # Nothing of it runs, and it is not active: its deletion can complete.
        await env.wait_for(lambda: env.phase("good") == "Running", what="good Running")
        assert all(p.uid != "uid-bad" for p in env.kubelet.active_pods())
        assert not [
            c
            for c in env.runtime.calls_to("run_pod_sandbox")
            if c.args[0].metadata.uid == "uid-bad"
        ]
        env.delete_pod("bad", grace_period_seconds=30)
        await env.sleep(5)
        assert env.phase("bad") == "Failed"
        assert all(p.uid != "uid-bad" for p in env.kubelet.active_pods())
        # Once gone from its source, nothing of it stays, its status neither.
        env.remove_pod("bad")
        await env.sleep(5)
        assert env.kubelet.pod_status("uid-bad") is None
        assert env.phase("good") == "Running"


async def test_the_same_pod_as_a_static_file_is_refused_with_its_field_path(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps(unreadable_pod("bad")))
    problems: list[str] = []
    source = FileSource(tmp_path, node_name="fake-node")
    async with KubeletEnv(sources=[source], on_pod_problem=problems.append) as env:
        await env.wait_for(lambda: bool(problems), what="the file refused")
        await env.sleep(30)
        assert env.kubelet.pods() == []
    assert len(problems) == 1
    assert problems[0].startswith(f"{tmp_path / 'bad.json'}: {MEMORY_PATH}: ")


async def test_every_admission_rejection_records_a_warning_event() -> None:
    async with KubeletEnv(container_manager=StubContainerManager(max_pods=1)) as env:
        env.add_pod(load_api_pod(api_pod("first")))
        await env.wait_for(lambda: env.phase("first") == "Running")
        env.add_pod(load_api_pod(api_pod("second")))
        await env.wait_for(lambda: env.phase("second") == "Failed")
        status = env.status("second")
        events = env.kubelet.events.events("uid-second")
        assert [(e.type, e.reason, f"Pod was rejected: {e.message}") for e in events] == [
            ("Warning", "OutOfpods", status.message)
        ]


def test_admission_leaves_the_pod_out_of_the_active_pods_unless_it_is_new() -> None:
    from kubelet_kit.eviction import StubEvictionManager
    from kubelet_kit.node.admission import admit_pod
    from kubelet_kit.testing.builders import make_pod

    cm = StubContainerManager(max_pods=1)
    em = StubEvictionManager()
    pod, other = make_pod(name="a", uid="ua"), make_pod(name="b", uid="ub")
    # An admitted pod weighed again (an update) does not count against itself...
    again = admit_pod(pod, [pod], eviction_manager=em, container_manager=cm)
    assert again.admit
    # ...and a new one is weighed against the others as they are.
    new = admit_pod(pod, [other], eviction_manager=em, container_manager=cm, pod_is_new=True)
    assert (new.admit, new.reason) == (False, "OutOfpods")
