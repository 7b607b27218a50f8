"""Pod updates: what may change under the same uid (the API server's ValidatePodUpdate)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from kubelet_kit.api import Pod, load_pod
from kubelet_kit.api.validation import validate_pod_update
from kubelet_kit.config import PodConfig, PodOperation, ProgrammaticSource
from kubelet_kit.errors import ValidationError
from kubelet_kit.testing import FakeClock


def _pod(**spec: Any) -> Pod:
    base: dict[str, Any] = {
        "containers": [{"name": "app", "image": "nginx:1", "command": ["nginx"]}],
        "initContainers": [{"name": "init", "image": "busybox:1"}],
        "tolerations": [{"key": "a", "operator": "Exists"}],
        "activeDeadlineSeconds": 600,
    }
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
            "spec": {**base, **spec},
        }
    )


def _messages(new: Pod, old: Pod) -> list[str]:
    return [str(e) for e in validate_pod_update(new, old)]


def test_images_a_lower_deadline_and_added_tolerations_may_change() -> None:
    old = _pod()
    new = _pod(
        containers=[{"name": "app", "image": "nginx:2", "command": ["nginx"]}],
        initContainers=[{"name": "init", "image": "busybox:2"}],
        activeDeadlineSeconds=300,
        tolerations=[{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}],
    )
    assert _messages(new, old) == []
    assert _messages(old, old) == []


def test_a_negative_grace_period_may_be_raised_to_one_only() -> None:
    # Only pods from before validation refused negative periods can have one.
    old = attrs.evolve(_pod(), spec=attrs.evolve(_pod().spec, termination_grace_period_seconds=-1))
    assert _messages(_pod(terminationGracePeriodSeconds=1), old) == []
    (msg,) = _messages(_pod(terminationGracePeriodSeconds=5), old)
    assert "changed: spec.terminationGracePeriodSeconds" in msg


def test_any_other_change_is_forbidden_naming_the_fields() -> None:
    old = _pod()
    new = _pod(
        containers=[
            {"name": "app", "image": "nginx:1", "command": ["nginx", "-g"], "workingDir": "/srv"}
        ]
    )
    (msg,) = _messages(new, old)
    assert msg.startswith(
        "spec: Forbidden: pod updates may not change fields other than "
        "`spec.containers[*].image`,`spec.initContainers[*].image`,"
        "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
        "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it "
        "was previously negative)"
    )
    assert "spec.containers[0].command," in msg and "spec.containers[0].workingDir" in msg


def test_removed_tolerations_are_forbidden() -> None:
    (msg,) = _messages(_pod(tolerations=[]), _pod())
    assert "changed: spec.tolerations" in msg


def test_adding_or_removing_containers_is_forbidden() -> None:
    new = _pod(
        containers=[
            {"name": "app", "image": "nginx:1", "command": ["nginx"]},
            {"name": "side", "image": "busybox:1"},
        ]
    )
    assert _messages(new, _pod()) == [
        "spec.containers: Forbidden: pod updates may not add or remove containers"
    ]
    assert _messages(_pod(initContainers=[]), _pod()) == [
        "spec.initContainers: Forbidden: pod updates may not add or remove containers"
    ]


def test_the_deadline_may_not_grow_or_go() -> None:
    assert _messages(_pod(activeDeadlineSeconds=900), _pod()) == [
        "spec.activeDeadlineSeconds: Invalid value: 900: must be less than or equal to "
        "previous value"
    ]
    spec = attrs.evolve(_pod().spec, active_deadline_seconds=None)
    (msg,) = _messages(attrs.evolve(_pod(), spec=spec), _pod())
    assert msg.startswith("spec.activeDeadlineSeconds: Invalid value: ")
    assert msg.endswith("must not update from a positive integer to nil value")
    # Setting one where there was none is allowed.
    assert _messages(_pod(), attrs.evolve(_pod(), spec=spec)) == []


async def test_the_programmatic_source_refuses_a_forbidden_update_and_keeps_the_pod() -> None:
    clock = FakeClock()
    source = ProgrammaticSource(clock=clock)
    config = PodConfig(source, clock=clock)
    updates = config.updates()
    old = _pod()
    source.add(old)
    assert (await anext(updates)).op is PodOperation.ADD

    changed = _pod(containers=[{"name": "app", "image": "nginx:1", "command": ["sh"]}])
    with pytest.raises(
        ValidationError,
        match=r"api: pod default/web: spec: Forbidden: .*"
        r"spec\.containers\[0\]\.command\[0\]",
    ):
        source.update(changed)
    with pytest.raises(ValidationError):
        other = attrs.evolve(old, metadata=attrs.evolve(old.metadata, name="other", uid="u2"))
        source.set_pods([changed, other])  # all or nothing: "other" is not added either
    assert source.pods() == [old]

    source.update(_pod(containers=[{"name": "app", "image": "nginx:2", "command": ["nginx"]}]))
    update = await anext(updates)
    assert update.op is PodOperation.UPDATE
    assert update.pods[0].spec.containers[0].image == "nginx:2"
    await updates.aclose()
