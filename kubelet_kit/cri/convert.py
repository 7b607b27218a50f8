"""Conversion between the Runtime's attrs types and runtime.v1 protobuf messages.

Pure functions, both directions: the client (:mod:`kubelet_kit.cri.remote`) turns
requests into messages and responses back into attrs values; the server
(:mod:`kubelet_kit.cri.server`) does the opposite. Keeping both directions side by
side lets the tests check that a value survives the round trip.

Conventions at this edge:

* Timestamps are int64 nanoseconds on the wire and float seconds in kubelet-kit;
  ``0`` stays ``0`` (not set) both ways.
* Enums share their names with the protobuf enums (``SANDBOX_READY``...); an
  enum value a newer runtime sends and these conversions do not know becomes the
  ``UNKNOWN``/``NOTREADY`` state rather than an exception.
* Optional numbers (``run_as_user``, stats counters) travel in wrapper messages,
  so "unset" and zero stay different.

The conversions live by message family in private sibling modules (shared
scalars and small values, sandboxes, containers, stats, images, runtime info and
events); this module re-exports every one of them.
"""

from __future__ import annotations

from kubelet_kit.cri._convert_container import (
    container_config_from_pb,
    container_config_to_pb,
    container_filter_from_pb,
    container_filter_to_pb,
    container_from_pb,
    container_stats_filter_to_pb,
    container_status_from_pb,
    container_status_to_pb,
    container_to_pb,
    exec_result_from_pb,
)
from kubelet_kit.cri._convert_images import (
    filesystem_usage_from_pb,
    filesystem_usage_to_pb,
    image_from_pb,
    image_to_pb,
)
from kubelet_kit.cri._convert_runtime import (
    container_event_from_pb,
    container_event_to_pb,
    runtime_status_from_pb,
    runtime_status_to_pb,
    version_from_pb,
    version_to_pb,
)
from kubelet_kit.cri._convert_sandbox import (
    sandbox_config_from_pb,
    sandbox_config_to_pb,
    sandbox_filter_from_pb,
    sandbox_filter_to_pb,
    sandbox_from_pb,
    sandbox_status_from_pb,
    sandbox_status_to_pb,
    sandbox_to_pb,
)
from kubelet_kit.cri._convert_stats import (
    container_stats_from_pb,
    container_stats_to_pb,
    sandbox_stats_from_pb,
    sandbox_stats_to_pb,
)
from kubelet_kit.cri._convert_values import (
    Message,
    auth_config_from_pb,
    auth_config_to_pb,
    image_spec_from_pb,
    image_spec_to_pb,
    ns_to_seconds,
    resources_from_pb,
    resources_to_pb,
    seconds_to_ns,
)

__all__ = [
    "Message",
    "auth_config_from_pb",
    "auth_config_to_pb",
    "container_config_from_pb",
    "container_config_to_pb",
    "container_event_from_pb",
    "container_event_to_pb",
    "container_filter_from_pb",
    "container_filter_to_pb",
    "container_from_pb",
    "container_stats_filter_to_pb",
    "container_stats_from_pb",
    "container_stats_to_pb",
    "container_status_from_pb",
    "container_status_to_pb",
    "container_to_pb",
    "exec_result_from_pb",
    "filesystem_usage_from_pb",
    "filesystem_usage_to_pb",
    "image_from_pb",
    "image_spec_from_pb",
    "image_spec_to_pb",
    "image_to_pb",
    "ns_to_seconds",
    "resources_from_pb",
    "resources_to_pb",
    "runtime_status_from_pb",
    "runtime_status_to_pb",
    "sandbox_config_from_pb",
    "sandbox_config_to_pb",
    "sandbox_filter_from_pb",
    "sandbox_filter_to_pb",
    "sandbox_from_pb",
    "sandbox_stats_from_pb",
    "sandbox_stats_to_pb",
    "sandbox_status_from_pb",
    "sandbox_status_to_pb",
    "sandbox_to_pb",
    "seconds_to_ns",
    "version_from_pb",
    "version_to_pb",
]
