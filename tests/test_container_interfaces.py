"""The runtime value types' maps (labels, annotations, sysctls...): a value keeps
its own unchangeable copy of what it is given, shares another value's, and the map
reads, compares, prints and serialises as the dict it is."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from kubelet_kit.container import (
    ContainerFilter,
    ContainerInfo,
    ContainerMetadata,
    ContainerState,
    ContainerStatus,
    ImageSpec,
    PodSandbox,
    PodSandboxFilter,
    PodSandboxMetadata,
    PodSandboxState,
)

LABELS = {"io.kubernetes.pod.uid": "uid-1", "io.kubernetes.container.name": "app"}


def info(**labels: str) -> ContainerInfo:
    return ContainerInfo(
        id="c1",
        pod_sandbox_id="s1",
        metadata=ContainerMetadata("app"),
        image="busybox",
        image_ref="sha256:1",
        state=ContainerState.RUNNING,
        created_at=1.0,
        labels=labels,
    )


def test_a_value_keeps_a_copy_of_the_callers_dict() -> None:
    labels = dict(LABELS)
    value = info(**labels)
    given = {"a": "1"}
    spec = ImageSpec("busybox", annotations=given)
    labels["io.kubernetes.pod.uid"] = "changed"
    given.clear()
    assert value.labels == LABELS
    assert spec.annotations == {"a": "1"}


def test_a_value_made_from_another_shares_its_map() -> None:
    first = info(**LABELS)
    status = ContainerStatus(
        id=first.id,
        metadata=first.metadata,
        state=first.state,
        created_at=first.created_at,
        image=first.image,
        labels=first.labels,
        annotations=first.annotations,
    )
    assert status.labels is first.labels
    assert attrs.evolve(first, id="c2").labels is first.labels


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.__setitem__("k", "v"),
        lambda m: m.__delitem__("io.kubernetes.pod.uid"),
        lambda m: m.update(k="v"),
        lambda m: m.setdefault("k", "v"),
        lambda m: m.pop("io.kubernetes.pod.uid"),
        lambda m: m.popitem(),
        lambda m: m.clear(),
        lambda m: m.__ior__({"k": "v"}),
    ],
)
def test_a_values_map_cannot_be_changed(change: Callable[[Any], object]) -> None:
    value = info(**LABELS)
    with pytest.raises(TypeError, match="frozen value"):
        change(value.labels)
    assert value.labels == LABELS


def test_a_values_map_reads_prints_and_serialises_as_a_dict() -> None:
    value = info(**LABELS)
    labels = value.labels
    assert isinstance(labels, dict)
    assert labels == LABELS and repr(labels) == repr(LABELS)
    assert json.dumps(labels) == json.dumps(LABELS)
    assert labels | {"k": "v"} == {**LABELS, "k": "v"}
    assert repr(value) == repr(info(**LABELS))
    for copied in (copy.copy(labels), copy.deepcopy(labels), pickle.loads(pickle.dumps(labels))):
        assert copied == LABELS
    assert pickle.loads(pickle.dumps(value)) == value
    # A copy the caller makes is theirs to change.
    mine = dict(labels)
    mine["k"] = "v"
    assert labels == LABELS


def test_empty_maps() -> None:
    value = info()
    assert value.labels == {} and value.annotations == {}
    assert not value.labels
    assert ImageSpec("busybox").annotations == {}
    with pytest.raises(TypeError):
        value.labels["k"] = "v"  # type: ignore[index]
    assert info().labels == {}


def test_filters_match_every_label_of_their_selector() -> None:
    container = info(**LABELS)
    sandbox = PodSandbox(
        id="s1",
        metadata=PodSandboxMetadata("web", "default", "uid-1"),
        state=PodSandboxState.READY,
        created_at=1.0,
        labels=LABELS,
    )
    for selector, expected in [
        ({}, True),
        ({"io.kubernetes.pod.uid": "uid-1"}, True),
        (LABELS, True),
        ({"io.kubernetes.pod.uid": "uid-2"}, False),
        ({**LABELS, "other": "x"}, False),
    ]:
        assert ContainerFilter(label_selector=selector).matches(container) is expected
        assert PodSandboxFilter(label_selector=selector).matches(sandbox) is expected
