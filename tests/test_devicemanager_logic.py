"""The device manager's pure parts: resource names, device needs, choices, checkpoint."""

from __future__ import annotations

import json
from typing import Any

import pytest

import kubelet_kit.cm.devicemanager as dm
from kubelet_kit.api import load_pod
from kubelet_kit.cm.devicemanager import checkpoint
from kubelet_kit.cm.devicemanager.logic import (
    choose_devices,
    container_device_requests,
    is_extended_resource_name,
    pod_device_needs,
)
from kubelet_kit.errors import ConfigurationError

# Upstream's TestIsExtendedResourceName (pkg/apis/core/v1/helper), then our own.
EXTENDED_NAMES = [
    ("pod.alpha.kubernetes.io/opaque-int-resource-foo", False),
    ("kubernetes.io/resource-foo", False),
    ("foo", False),
    ("a/b", True),
    ("requests.foobar", False),
    ("c/d/", False),
    ("", False),
    ("example.com/widget", True),
    ("nvidia.com/gpu", True),
    ("cpu", False),
    ("hugepages-2Mi", False),
    ("Example.com/widget", False),
    ("example.com/-widget", False),
    ("example.com/" + "w" * 63, True),
    ("example.com/" + "w" * 64, False),
    ("requests.example.com/gpu", False),
]


@pytest.mark.parametrize(("name", "expected"), EXTENDED_NAMES)
def test_is_extended_resource_name(name: str, expected: bool) -> None:
    assert is_extended_resource_name(name) is expected


def _pod(spec: dict[str, Any]) -> Any:
    return load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": spec,
        }
    )


def _c(name: str, widgets: int, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "busybox",
        "resources": {"limits": {"example.com/widget": str(widgets), "cpu": "1"}},
        **extra,
    }


def test_container_requests_count_extended_resources_only() -> None:
    pod = _pod({"containers": [_c("a", 2)]})
    assert container_device_requests(pod.spec.containers[0]) == {"example.com/widget": 2}
    assert container_device_requests(pod.spec.containers[0], ["example.com/other"]) == {}


@pytest.mark.parametrize(
    ("spec", "needs"),
    [
        ({"containers": [_c("a", 1), _c("b", 2)]}, 3),
        # Init containers run one at a time; their devices pass on to the app.
        ({"initContainers": [_c("i1", 3), _c("i2", 1)], "containers": [_c("a", 1)]}, 3),
        ({"initContainers": [_c("i1", 1)], "containers": [_c("a", 2)]}, 2),
        # A sidecar keeps its devices beside the app's.
        ({"initContainers": [_c("s", 1, restartPolicy="Always")], "containers": [_c("a", 2)]}, 3),
    ],
)
def test_pod_device_needs(spec: dict[str, Any], needs: int) -> None:
    assert pod_device_needs(_pod(spec)) == {"example.com/widget": needs}


def test_choose_devices_order() -> None:
    assert choose_devices(["c", "a", "b"], 2) == ["a", "b"]
    assert choose_devices(["a", "b", "c"], 2, preferred=["c", "zz"]) == ["c", "a"]
    assert choose_devices(["a", "b"], 2, must_include=["x"], preferred=["b"]) == ["x", "b"]
    with pytest.raises(ValueError, match="only 2 devices to choose 3 from"):
        choose_devices(["a", "b"], 3)


def test_checkpoint_round_trip_and_shape() -> None:
    data = checkpoint.CheckpointData(
        entries=(
            checkpoint.PodDevicesEntry(
                "u1", "app", "example.com/widget", {-1: ("w0", "w1")}, b"\x0a\x01x"
            ),
        ),
        registered_devices={"example.com/widget": ("w0", "w1", "w2")},
    )
    raw = checkpoint.encode(data)
    assert checkpoint.decode(raw) == data
    doc = json.loads(raw)
    assert set(doc) == {"Data", "Checksum"}
    assert doc["Data"]["PodDeviceEntries"][0] == {
        "PodUID": "u1",
        "ContainerName": "app",
        "ResourceName": "example.com/widget",
        "DeviceIDs": {"-1": ["w0", "w1"]},
        "AllocResp": "CgF4",
    }


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{", "not JSON"),
        (b"[]", "Data: missing or not an object"),
        (b'{"Data": {}, "Checksum": 1}', "Checksum: does not match"),
    ],
)
def test_checkpoint_decode_errors_name_the_place(raw: bytes, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        checkpoint.decode(raw, source="ckpt")


def test_checkpoint_bad_entry_names_its_index() -> None:
    body = {"PodDeviceEntries": [{"PodUID": "u"}], "RegisteredDevices": {}}
    raw = json.dumps({"Data": body, "Checksum": checkpoint._checksum(body)}).encode()
    with pytest.raises(ConfigurationError, match=r"ckpt: Data.PodDeviceEntries\[0\]"):
        checkpoint.decode(raw, source="ckpt")


def test_checkpoint_read_write(tmp_path: Any) -> None:
    path = tmp_path / dm.CHECKPOINT_NAME
    assert checkpoint.read(path) is None
    data = checkpoint.CheckpointData(registered_devices={"example.com/widget": ("w0",)})
    checkpoint.write(path, data)
    assert checkpoint.read(path) == data
    assert [p.name for p in tmp_path.iterdir()] == [dm.CHECKPOINT_NAME]


def test_all_is_honest() -> None:
    for name in dm.__all__:
        assert hasattr(dm, name), name
    assert len(set(dm.__all__)) == len(dm.__all__)


def test_constants_match_upstream() -> None:
    assert (dm.VERSION, dm.HEALTHY, dm.UNHEALTHY) == ("v1beta1", "Healthy", "Unhealthy")
    assert dm.DEVICE_PLUGIN_PATH == "/var/lib/kubelet/device-plugins/"
    assert dm.KUBELET_SOCKET == "kubelet.sock"
    assert dm.CHECKPOINT_NAME == "kubelet_internal_checkpoint"
    assert dm.PRE_START_CONTAINER_TIMEOUT == 30


def test_proto_is_wire_compatible_with_upstream() -> None:
    """Package, services, methods and field numbers of upstream v1beta1."""
    from kubelet_kit.cm.devicemanager.gen import api_pb2 as pb

    desc = pb.DESCRIPTOR
    assert desc.package == "v1beta1"
    assert [m.name for m in desc.services_by_name["Registration"].methods] == ["Register"]
    assert [m.name for m in desc.services_by_name["DevicePlugin"].methods] == [
        "GetDevicePluginOptions",
        "ListAndWatch",
        "GetPreferredAllocation",
        "Allocate",
        "PreStartContainer",
    ]
    fields = {
        "RegisterRequest": {"version": 1, "endpoint": 2, "resource_name": 3, "options": 4},
        "DevicePluginOptions": {"pre_start_required": 1, "get_preferred_allocation_available": 2},
        "Device": {"ID": 1, "health": 2, "topology": 3},
        "ContainerPreferredAllocationRequest": {
            "available_deviceIDs": 1,
            "must_include_deviceIDs": 2,
            "allocation_size": 3,
        },
        "ContainerAllocateResponse": {
            "envs": 1,
            "mounts": 2,
            "devices": 3,
            "annotations": 4,
            "cdi_devices": 5,
        },
        "Mount": {"container_path": 1, "host_path": 2, "read_only": 3},
        "DeviceSpec": {"container_path": 1, "host_path": 2, "permissions": 3},
    }
    for message, numbers in fields.items():
        got = {f.name: f.number for f in desc.message_types_by_name[message].fields}
        assert got == numbers, message
