"""The on-disk records of :class:`~kubelet_kit.runtimes.host.HostProcessRuntime`.

Everything the runtime knows lives in JSON files under its root directory: a
sandbox's record (``sandbox.json``), a container's record (``container.json``),
the images (``images.json``), and the shim's own files (spec, start and exit
reports, named in :mod:`kubelet_kit.runtimes._shim`). This module holds the
record types, what is observed of a container's run state, the file names, and
the turning of attrs values (with enums, tuples and mappings) into JSON-ready
data and back.
"""

from __future__ import annotations

import collections.abc
import enum
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs

from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerState,
    PodSandboxConfig,
    PodSandboxState,
)
from kubelet_kit.network import PodRef

_SANDBOX_FILE = "sandbox.json"
_CONTAINER_FILE = "container.json"
#: A container's own cgroup (kubelet_kit.runtimes._cgroupfs.ContainerCgroup).
_CGROUP_FILE = "cgroup.json"
_START_LOCK = "start.lock"
_SHIM_LOG = "shim.log"
_IMAGES_FILE = "images.json"

T = TypeVar("T")


# ------------------------------------------------------------- attrs <-> JSON


def _unstructure(value: Any) -> Any:
    """Turn attrs values (with enums, tuples, mappings) into JSON-ready data."""
    if attrs.has(type(value)):
        return {f.name: _unstructure(getattr(value, f.name)) for f in attrs.fields(type(value))}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _unstructure(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_unstructure(v) for v in value]
    return value


def _structure(tp: Any, data: Any) -> Any:
    """Rebuild a value of type ``tp`` from :func:`_unstructure`'s output."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if data is None:
            return None
        return _structure(args[0], data)
    if isinstance(tp, type) and attrs.has(tp):
        hints = typing.get_type_hints(tp)
        kwargs = {
            f.name: _structure(hints[f.name], data[f.name])
            for f in attrs.fields(tp)
            if f.name in data
        }
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(data)
    if origin is tuple:
        item = typing.get_args(tp)[0]
        return tuple(_structure(item, v) for v in data)
    if origin in (collections.abc.Mapping, dict):
        return dict(data)
    return data


def _from_json(cls: type[T], data: Any) -> T:
    value: T = _structure(cls, data)
    return value


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data: dict[str, Any] = json.load(f)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return data


# -------------------------------------------------------------- observations


@attrs.frozen
class _Observed:
    """A container's run state as read from its state directory and /proc."""

    state: ContainerState
    started_at: float = 0.0
    finished_at: float = 0.0
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    pid: int = 0
    shim_pid: int = 0
    shim_alive: bool = False


@attrs.frozen
class _ContainerRecord:
    id: str
    pod_sandbox_id: str
    config: ContainerConfig
    created_at: float
    image_ref: str
    log_path: str


@attrs.frozen
class _SandboxRecord:
    id: str
    config: PodSandboxConfig
    created_at: float
    state: PodSandboxState
    ip: str
    #: The sandbox's network namespace while it has one (CNI networking).
    netns: str = ""
    additional_ips: tuple[str, ...] = ()


def _pod_ref(config: PodSandboxConfig) -> PodRef:
    md = config.metadata
    return PodRef(md.name, md.namespace, md.uid)


def _container_record_to_json(rec: _ContainerRecord) -> dict[str, Any]:
    data: dict[str, Any] = _unstructure(rec)
    return data
