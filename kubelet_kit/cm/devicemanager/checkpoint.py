"""The device manager's checkpoint: which devices each container holds.

The file keeps upstream's JSON shape::

    {"Data": {"PodDeviceEntries": [{"PodUID": ..., "ContainerName": ...,
                                    "ResourceName": ..., "DeviceIDs": {"-1": [...]},
                                    "AllocResp": "<base64 AllocateResponse>"}],
              "RegisteredDevices": {"example.com/widget": ["w0", "w1"]}},
     "Checksum": 1234}

``DeviceIDs`` is keyed by NUMA node ("-1": no topology). ``AllocResp`` is the
plugin's ``ContainerAllocateResponse`` in protobuf wire form, so a container that
restarts gets the same environment without asking the plugin again. The checksum
is a CRC-32 of the canonical JSON of ``Data``: it guards against torn or edited
files, and is not the value upstream's kubelet computes (that one hashes Go's
in-memory representation), so the two kubelets do not share checkpoint files.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import tempfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from kubelet_kit.errors import ConfigurationError

__all__ = ["CheckpointData", "PodDevicesEntry", "decode", "encode", "read", "write"]

#: NUMA node key of devices that report no topology.
NO_TOPOLOGY = -1


@attrs.frozen
class PodDevicesEntry:
    """The devices of one resource held by one container.

    Attributes:
        pod_uid: The pod.
        container_name: The container.
        resource_name: The extended resource.
        device_ids: Device ids by NUMA node (``-1``: no topology).
        alloc_resp: The plugin's ContainerAllocateResponse, serialised.
    """

    pod_uid: str
    container_name: str
    resource_name: str
    device_ids: Mapping[int, tuple[str, ...]]
    alloc_resp: bytes = b""

    def all_ids(self) -> tuple[str, ...]:
        """Every device id, in NUMA node order."""
        return tuple(i for node in sorted(self.device_ids) for i in self.device_ids[node])


@attrs.frozen
class CheckpointData:
    """Everything the checkpoint holds.

    Attributes:
        entries: Every container's devices.
        registered_devices: Healthy device ids per resource when last written.
    """

    entries: tuple[PodDevicesEntry, ...] = ()
    registered_devices: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)


def _data_json(data: CheckpointData) -> dict[str, Any]:
    return {
        "PodDeviceEntries": [
            {
                "PodUID": e.pod_uid,
                "ContainerName": e.container_name,
                "ResourceName": e.resource_name,
                "DeviceIDs": {str(k): list(v) for k, v in sorted(e.device_ids.items())},
                "AllocResp": base64.b64encode(e.alloc_resp).decode("ascii"),
            }
            for e in data.entries
        ],
        "RegisteredDevices": {r: list(ids) for r, ids in sorted(data.registered_devices.items())},
    }


def _checksum(data_json: Mapping[str, Any]) -> int:
    canonical = json.dumps(data_json, sort_keys=True, separators=(",", ":"))
    return zlib.crc32(canonical.encode("utf-8"))


def encode(data: CheckpointData) -> bytes:
    """The checkpoint file's bytes for ``data``."""
    body = _data_json(data)
    return json.dumps({"Data": body, "Checksum": _checksum(body)}, indent=1).encode("utf-8")


def decode(raw: bytes, source: str = "checkpoint") -> CheckpointData:
    """Parse checkpoint bytes.

    Raises:
        ConfigurationError: Not JSON of the expected shape (naming the field), or
            a checksum mismatch.
    """
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{source}: not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("Data"), dict):
        raise ConfigurationError(f"{source}: Data: missing or not an object")
    body = doc["Data"]
    if doc.get("Checksum") != _checksum(body):
        raise ConfigurationError(f"{source}: Checksum: does not match the data (corrupt file)")
    entries: list[PodDevicesEntry] = []
    for i, item in enumerate(body.get("PodDeviceEntries") or []):
        where = f"{source}: Data.PodDeviceEntries[{i}]"
        try:
            entries.append(
                PodDevicesEntry(
                    pod_uid=str(item["PodUID"]),
                    container_name=str(item["ContainerName"]),
                    resource_name=str(item["ResourceName"]),
                    device_ids={
                        int(k): tuple(str(x) for x in v)
                        for k, v in (item.get("DeviceIDs") or {}).items()
                    },
                    alloc_resp=base64.b64decode(item.get("AllocResp") or "", validate=True),
                )
            )
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            raise ConfigurationError(f"{where}: {exc!r}") from None
    registered = body.get("RegisteredDevices") or {}
    if not isinstance(registered, dict):
        raise ConfigurationError(f"{source}: Data.RegisteredDevices: not an object")
    return CheckpointData(
        entries=tuple(entries),
        registered_devices={str(r): tuple(str(x) for x in ids) for r, ids in registered.items()},
    )


def write(path: str | os.PathLike[str], data: CheckpointData) -> None:
    """Write the checkpoint atomically (a temporary file renamed over it). Blocks."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=".checkpoint-", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(encode(data))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(path: str | os.PathLike[str]) -> CheckpointData | None:
    """Read the checkpoint; None when there is none. Blocks.

    Raises:
        ConfigurationError: The file is corrupt (see :func:`decode`).
    """
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    return decode(raw, source=str(path))
