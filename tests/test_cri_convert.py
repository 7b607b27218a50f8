"""Wire compatibility of api.proto and the attrs <-> protobuf conversions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubelet_kit.container import (
    ContainerConfig,
    ContainerEvent,
    ContainerEventType,
    ContainerFilter,
    ContainerInfo,
    ContainerMetadata,
    ContainerState,
    ContainerStats,
    ContainerStatus,
    Device,
    DNSConfig,
    Image,
    ImageSpec,
    KeyValue,
    LinuxContainerResources,
    LinuxContainerSecurityContext,
    Mount,
    MountPropagation,
    NamespaceOptions,
    PodSandbox,
    PodSandboxConfig,
    PodSandboxFilter,
    PodSandboxMetadata,
    PodSandboxState,
    PodSandboxStats,
    PodSandboxStatus,
    PortMapping,
    RuntimeCondition,
    RuntimeStatus,
    VersionInfo,
)
from kubelet_kit.cri import convert
from kubelet_kit.cri.gen import api_pb2 as pb
from kubelet_kit.errors import InvalidArgumentError

# Field numbers of upstream cri-api runtime/v1/api.proto, for the messages whose
# bytes matter most (a wrong number here silently drops data on the wire).
UPSTREAM_FIELDS: dict[str, dict[str, int]] = {
    "VersionResponse": {
        "version": 1,
        "runtime_name": 2,
        "runtime_version": 3,
        "runtime_api_version": 4,
    },
    "PodSandboxMetadata": {"name": 1, "uid": 2, "namespace": 3, "attempt": 4},
    "PodSandboxConfig": {
        "metadata": 1,
        "hostname": 2,
        "log_directory": 3,
        "dns_config": 4,
        "port_mappings": 5,
        "labels": 6,
        "annotations": 7,
        "linux": 8,
    },
    "LinuxPodSandboxConfig": {
        "cgroup_parent": 1,
        "security_context": 2,
        "sysctls": 3,
        "overhead": 4,
        "resources": 5,
    },
    "LinuxSandboxSecurityContext": {
        "namespace_options": 1,
        "selinux_options": 2,
        "run_as_user": 3,
        "readonly_rootfs": 4,
        "supplemental_groups": 5,
        "privileged": 6,
        "run_as_group": 8,
    },
    "NamespaceOption": {"network": 1, "pid": 2, "ipc": 3, "target_id": 4},
    "RunPodSandboxRequest": {"config": 1, "runtime_handler": 2},
    "PodSandboxStatus": {
        "id": 1,
        "metadata": 2,
        "state": 3,
        "created_at": 4,
        "network": 5,
        "linux": 6,
        "labels": 7,
        "annotations": 8,
        "runtime_handler": 9,
    },
    "PodSandboxStatusResponse": {
        "status": 1,
        "info": 2,
        "containers_statuses": 3,
        "timestamp": 4,
    },
    "PodSandboxFilter": {"id": 1, "state": 2, "label_selector": 3},
    "PodSandbox": {
        "id": 1,
        "metadata": 2,
        "state": 3,
        "created_at": 4,
        "labels": 5,
        "annotations": 6,
        "runtime_handler": 7,
    },
    "ImageSpec": {
        "image": 1,
        "annotations": 2,
        "user_specified_image": 18,
        "runtime_handler": 19,
    },
    "LinuxContainerResources": {
        "cpu_period": 1,
        "cpu_quota": 2,
        "cpu_shares": 3,
        "memory_limit_in_bytes": 4,
        "oom_score_adj": 5,
        "cpuset_cpus": 6,
        "cpuset_mems": 7,
        "hugepage_limits": 8,
        "unified": 9,
        "memory_swap_limit_in_bytes": 10,
    },
    "LinuxContainerSecurityContext": {
        "capabilities": 1,
        "privileged": 2,
        "namespace_options": 3,
        "selinux_options": 4,
        "run_as_user": 5,
        "run_as_username": 6,
        "readonly_rootfs": 7,
        "supplemental_groups": 8,
        "no_new_privs": 11,
        "run_as_group": 12,
        "masked_paths": 13,
        "readonly_paths": 14,
    },
    "ContainerConfig": {
        "metadata": 1,
        "image": 2,
        "command": 3,
        "args": 4,
        "working_dir": 5,
        "envs": 6,
        "mounts": 7,
        "devices": 8,
        "labels": 9,
        "annotations": 10,
        "log_path": 11,
        "stdin": 12,
        "stdin_once": 13,
        "tty": 14,
        "linux": 15,
    },
    "Mount": {
        "container_path": 1,
        "host_path": 2,
        "readonly": 3,
        "selinux_relabel": 4,
        "propagation": 5,
        "recursive_read_only": 8,
    },
    "Container": {
        "id": 1,
        "pod_sandbox_id": 2,
        "metadata": 3,
        "image": 4,
        "image_ref": 5,
        "state": 6,
        "created_at": 7,
        "labels": 8,
        "annotations": 9,
        "image_id": 10,
    },
    "ContainerFilter": {"id": 1, "state": 2, "pod_sandbox_id": 3, "label_selector": 4},
    "ContainerStatus": {
        "id": 1,
        "metadata": 2,
        "state": 3,
        "created_at": 4,
        "started_at": 5,
        "finished_at": 6,
        "exit_code": 7,
        "image": 8,
        "image_ref": 9,
        "reason": 10,
        "message": 11,
        "labels": 12,
        "annotations": 13,
        "mounts": 14,
        "log_path": 15,
        "resources": 16,
        "image_id": 17,
    },
    "UpdateContainerResourcesRequest": {"container_id": 1, "linux": 2, "annotations": 4},
    "ExecSyncRequest": {"container_id": 1, "cmd": 2, "timeout": 3},
    "ExecSyncResponse": {"stdout": 1, "stderr": 2, "exit_code": 3},
    "StopContainerRequest": {"container_id": 1, "timeout": 2},
    "Image": {
        "id": 1,
        "repo_tags": 2,
        "repo_digests": 3,
        "size": 4,
        "uid": 5,
        "username": 6,
        "spec": 7,
        "pinned": 8,
    },
    "PullImageRequest": {"image": 1, "auth": 2, "sandbox_config": 3},
    "ContainerStats": {"attributes": 1, "cpu": 2, "memory": 3, "writable_layer": 4},
    "CpuUsage": {"timestamp": 1, "usage_core_nano_seconds": 2, "usage_nano_cores": 3},
    "MemoryUsage": {
        "timestamp": 1,
        "working_set_bytes": 2,
        "available_bytes": 3,
        "usage_bytes": 4,
        "rss_bytes": 5,
        "page_faults": 6,
        "major_page_faults": 7,
    },
    "LinuxPodSandboxStats": {"cpu": 1, "memory": 2, "process": 4, "containers": 5},
    "ContainerEventResponse": {
        "container_id": 1,
        "container_event_type": 2,
        "created_at": 3,
        "pod_sandbox_status": 4,
        "containers_statuses": 5,
    },
    "RuntimeCondition": {"type": 1, "status": 2, "reason": 3, "message": 4},
    "StatusResponse": {"status": 1, "info": 2},
}

UPSTREAM_ENUMS: dict[str, dict[str, int]] = {
    "PodSandboxState": {"SANDBOX_READY": 0, "SANDBOX_NOTREADY": 1},
    "ContainerState": {
        "CONTAINER_CREATED": 0,
        "CONTAINER_RUNNING": 1,
        "CONTAINER_EXITED": 2,
        "CONTAINER_UNKNOWN": 3,
    },
    "NamespaceMode": {"POD": 0, "CONTAINER": 1, "NODE": 2, "TARGET": 3},
    "ContainerEventType": {
        "CONTAINER_CREATED_EVENT": 0,
        "CONTAINER_STARTED_EVENT": 1,
        "CONTAINER_STOPPED_EVENT": 2,
        "CONTAINER_DELETED_EVENT": 3,
    },
    "MountPropagation": {
        "PROPAGATION_PRIVATE": 0,
        "PROPAGATION_HOST_TO_CONTAINER": 1,
        "PROPAGATION_BIDIRECTIONAL": 2,
    },
    "Protocol": {"TCP": 0, "UDP": 1, "SCTP": 2},
}

# Every RPC of upstream's two services (runtime.v1 as of Kubernetes 1.35+).
UPSTREAM_RPCS: dict[str, set[str]] = {
    "RuntimeService": {
        "Version",
        "RunPodSandbox",
        "StopPodSandbox",
        "RemovePodSandbox",
        "PodSandboxStatus",
        "ListPodSandbox",
        "StreamPodSandboxes",
        "CreateContainer",
        "StartContainer",
        "StopContainer",
        "RemoveContainer",
        "ListContainers",
        "StreamContainers",
        "ContainerStatus",
        "UpdateContainerResources",
        "ReopenContainerLog",
        "ExecSync",
        "Exec",
        "Attach",
        "PortForward",
        "ContainerStats",
        "ListContainerStats",
        "StreamContainerStats",
        "PodSandboxStats",
        "ListPodSandboxStats",
        "StreamPodSandboxStats",
        "UpdateRuntimeConfig",
        "Status",
        "CheckpointContainer",
        "GetContainerEvents",
        "ListMetricDescriptors",
        "ListPodSandboxMetrics",
        "StreamPodSandboxMetrics",
        "RuntimeConfig",
        "UpdatePodSandboxResources",
    },
    "ImageService": {
        "ListImages",
        "StreamImages",
        "ImageStatus",
        "PullImage",
        "RemoveImage",
        "ImageFsInfo",
    },
}


#: No per-example deadline: a shared 2-core CI machine must not make these flaky.
relaxed = settings(deadline=None, max_examples=60)

# ------------------------------------------------------------ wire compatibility


def test_package_is_runtime_v1() -> None:
    assert pb.DESCRIPTOR.package == "runtime.v1"


@pytest.mark.parametrize("message", sorted(UPSTREAM_FIELDS))
def test_field_numbers_match_upstream(message: str) -> None:
    fields = pb.DESCRIPTOR.message_types_by_name[message].fields_by_name
    got = {name: fields[name].number for name in UPSTREAM_FIELDS[message] if name in fields}
    assert got == UPSTREAM_FIELDS[message]


@pytest.mark.parametrize("enum", sorted(UPSTREAM_ENUMS))
def test_enum_numbers_match_upstream(enum: str) -> None:
    values = pb.DESCRIPTOR.enum_types_by_name[enum].values_by_name
    assert {k: v.number for k, v in values.items()} == UPSTREAM_ENUMS[enum]


@pytest.mark.parametrize("service", sorted(UPSTREAM_RPCS))
def test_every_upstream_rpc_is_declared(service: str) -> None:
    methods = pb.DESCRIPTOR.services_by_name[service].methods_by_name
    assert set(methods) == UPSTREAM_RPCS[service]


def test_get_container_events_is_server_streaming() -> None:
    method = pb.DESCRIPTOR.services_by_name["RuntimeService"].methods_by_name["GetContainerEvents"]
    assert method.server_streaming and not method.client_streaming
    assert method.output_type.name == "ContainerEventResponse"


def test_sandbox_metadata_bytes_are_upstream_encoding() -> None:
    # Hand-encoded per upstream: name=1 "n", uid=2 "u", namespace=3 "s", attempt=4 varint 2.
    expected = b"\x0a\x01n\x12\x01u\x1a\x01s\x20\x02"
    msg = pb.PodSandboxMetadata(name="n", uid="u", namespace="s", attempt=2)
    assert msg.SerializeToString() == expected


# ------------------------------------------------------------------ timestamps


@pytest.mark.parametrize(
    ("seconds", "ns"),
    [(0.0, 0), (1.5, 1_500_000_000), (1_767_225_600.25, 1_767_225_600_250_000_000)],
)
def test_timestamp_table(seconds: float, ns: int) -> None:
    assert convert.seconds_to_ns(seconds) == ns
    assert convert.ns_to_seconds(ns) == seconds


@relaxed
@given(st.integers(min_value=0, max_value=4_102_444_800_000_000_000))
def test_ns_round_trip_within_a_microsecond(ns: int) -> None:
    # float seconds hold ~16 significant digits: nanoseconds of a 2020s epoch time
    # come back within a microsecond, which is all a kubelet ever compares.
    assert abs(convert.seconds_to_ns(convert.ns_to_seconds(ns)) - ns) <= 1000


# ------------------------------------------------------------------ round trips

labels = st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=3)
names = st.text(min_size=1, max_size=10)
u32 = st.integers(min_value=0, max_value=2**32 - 1)
i64 = st.integers(min_value=0, max_value=2**62)
times = st.integers(min_value=0, max_value=2**40).map(lambda n: n / 1000)  # ms precision

sandbox_metadata = st.builds(
    PodSandboxMetadata, name=names, namespace=names, uid=names, attempt=u32
)
namespaces = st.builds(
    NamespaceOptions, host_network=st.booleans(), host_pid=st.booleans(), host_ipc=st.booleans()
)
sandbox_configs = st.builds(
    PodSandboxConfig,
    metadata=sandbox_metadata,
    hostname=st.text(max_size=10),
    log_directory=st.text(max_size=10),
    dns_config=st.none()
    | st.builds(
        DNSConfig,
        servers=st.lists(names, max_size=2).map(tuple),
        searches=st.lists(names, max_size=2).map(tuple),
        options=st.lists(names, max_size=2).map(tuple),
    ),
    port_mappings=st.lists(
        st.builds(
            PortMapping,
            container_port=st.integers(0, 65535),
            host_port=st.integers(0, 65535),
            protocol=st.sampled_from(["TCP", "UDP", "SCTP"]),
            host_ip=st.sampled_from(["", "127.0.0.1"]),
        ),
        max_size=2,
    ).map(tuple),
    labels=labels,
    annotations=labels,
    cgroup_parent=st.text(max_size=10),
    namespace_options=namespaces,
    sysctls=labels,
    runtime_handler=st.sampled_from(["", "runc"]),
    privileged=st.booleans(),
    run_as_user=st.none() | st.integers(0, 2**31),
    run_as_group=st.none() | st.integers(0, 2**31),
    supplemental_groups=st.lists(st.integers(0, 2**31), max_size=3).map(tuple),
)
resources = st.builds(
    LinuxContainerResources,
    cpu_period=i64,
    cpu_quota=i64,
    cpu_shares=i64,
    memory_limit_in_bytes=i64,
    oom_score_adj=st.integers(-1000, 1000),
    cpuset_cpus=st.sampled_from(["", "0-1"]),
    cpuset_mems=st.sampled_from(["", "0"]),
    unified=labels,
)
security = st.builds(
    LinuxContainerSecurityContext,
    run_as_user=st.none() | st.integers(0, 65535),
    run_as_group=st.none() | st.integers(0, 65535),
    privileged=st.booleans(),
    readonly_rootfs=st.booleans(),
    no_new_privs=st.booleans(),
    capabilities_add=st.lists(names, max_size=2).map(tuple),
    capabilities_drop=st.lists(names, max_size=2).map(tuple),
    supplemental_groups=st.lists(st.integers(0, 65535), max_size=2).map(tuple),
)
mounts = st.builds(
    Mount,
    container_path=names,
    host_path=names,
    readonly=st.booleans(),
    selinux_relabel=st.booleans(),
    propagation=st.sampled_from(list(MountPropagation)),
)
container_configs = st.builds(
    ContainerConfig,
    metadata=st.builds(ContainerMetadata, name=names, attempt=u32),
    image=st.builds(ImageSpec, image=names, annotations=labels),
    command=st.lists(st.text(max_size=5), max_size=3).map(tuple),
    args=st.lists(st.text(max_size=5), max_size=3).map(tuple),
    working_dir=st.text(max_size=5),
    envs=st.lists(st.builds(KeyValue, key=names, value=st.text(max_size=5)), max_size=3).map(tuple),
    mounts=st.lists(mounts, max_size=2).map(tuple),
    devices=st.lists(
        st.builds(
            Device,
            container_path=names,
            host_path=names,
            permissions=st.sampled_from(["r", "rw", "rwm"]),
        ),
        max_size=2,
    ).map(tuple),
    labels=labels,
    annotations=labels,
    log_path=st.text(max_size=8),
    stdin=st.booleans(),
    stdin_once=st.booleans(),
    tty=st.booleans(),
    resources=st.none() | resources,
    security_context=st.none() | security,
)
container_statuses = st.builds(
    ContainerStatus,
    id=names,
    metadata=st.builds(ContainerMetadata, name=names, attempt=u32),
    state=st.sampled_from(list(ContainerState)),
    created_at=times,
    image=names,
    image_ref=st.text(max_size=8),
    started_at=times,
    finished_at=times,
    exit_code=st.integers(-(2**31), 2**31 - 1),
    reason=st.sampled_from(["", "Completed", "Error", "OOMKilled"]),
    message=st.text(max_size=10),
    labels=labels,
    annotations=labels,
    mounts=st.lists(mounts, max_size=2).map(tuple),
    log_path=st.text(max_size=8),
    resources=st.none() | resources,
)
sandbox_statuses = st.builds(
    PodSandboxStatus,
    id=names,
    metadata=sandbox_metadata,
    state=st.sampled_from(list(PodSandboxState)),
    created_at=times,
    ip=st.sampled_from(["", "10.0.0.2"]),
    additional_ips=st.lists(st.sampled_from(["fd00::2", "10.1.0.2"]), max_size=2).map(tuple),
    namespace_options=namespaces,
    labels=labels,
    annotations=labels,
    runtime_handler=st.sampled_from(["", "runc"]),
)
optional_u64 = st.none() | st.integers(0, 2**63)


def _wire(msg: object) -> object:
    """Serialise and parse again, as the other side of the socket would."""
    parsed = type(msg)()
    parsed.ParseFromString(msg.SerializeToString())  # type: ignore[attr-defined]
    return parsed


@relaxed
@given(sandbox_configs)
def test_sandbox_config_round_trip(config: PodSandboxConfig) -> None:
    msg = _wire(convert.sandbox_config_to_pb(config))
    assert convert.sandbox_config_from_pb(msg, config.runtime_handler) == config


@relaxed
@given(container_configs, namespaces)
def test_container_config_round_trip(config: ContainerConfig, ns: NamespaceOptions) -> None:
    sandbox = PodSandboxConfig(metadata=PodSandboxMetadata("p", "d", "u"), namespace_options=ns)
    msg = _wire(convert.container_config_to_pb(config, sandbox))
    back = convert.container_config_from_pb(msg)
    if config.security_context == LinuxContainerSecurityContext():
        # An all-default security context carries nothing; it reads back as None.
        assert back == config.__class__(**{**_fields(config), "security_context": None})
    else:
        assert back == config


def _fields(obj: object) -> dict[str, object]:
    import attrs

    return attrs.asdict(obj, recurse=False)  # type: ignore[arg-type]


@relaxed
@given(container_statuses)
def test_container_status_round_trip(status: ContainerStatus) -> None:
    assert convert.container_status_from_pb(_wire(convert.container_status_to_pb(status))) == status


@relaxed
@given(sandbox_statuses)
def test_sandbox_status_round_trip(status: PodSandboxStatus) -> None:
    assert convert.sandbox_status_from_pb(_wire(convert.sandbox_status_to_pb(status))) == status


@relaxed
@given(
    st.builds(
        PodSandbox,
        id=names,
        metadata=sandbox_metadata,
        state=st.sampled_from(list(PodSandboxState)),
        created_at=times,
        labels=labels,
        annotations=labels,
    )
)
def test_sandbox_round_trip(sandbox: PodSandbox) -> None:
    assert convert.sandbox_from_pb(_wire(convert.sandbox_to_pb(sandbox))) == sandbox


@relaxed
@given(
    st.builds(
        ContainerInfo,
        id=names,
        pod_sandbox_id=names,
        metadata=st.builds(ContainerMetadata, name=names, attempt=u32),
        image=names,
        image_ref=names,
        state=st.sampled_from(list(ContainerState)),
        created_at=times,
        labels=labels,
        annotations=labels,
    )
)
def test_container_round_trip(info: ContainerInfo) -> None:
    assert convert.container_from_pb(_wire(convert.container_to_pb(info))) == info


@relaxed
@given(
    st.builds(
        ContainerStats,
        container_id=names,
        timestamp=times,
        cpu_usage_core_nanoseconds=optional_u64,
        memory_working_set_bytes=optional_u64,
        memory_usage_bytes=optional_u64,
        writable_layer_bytes=optional_u64,
        writable_layer_inodes=optional_u64,
    )
)
def test_container_stats_round_trip(stats: ContainerStats) -> None:
    assert convert.container_stats_from_pb(_wire(convert.container_stats_to_pb(stats))) == stats


def test_sandbox_stats_round_trip_keeps_unset_apart_from_zero() -> None:
    stats = PodSandboxStats(
        pod_sandbox_id="sb",
        timestamp=12.5,
        cpu_usage_core_nanoseconds=0,
        memory_working_set_bytes=None,
        process_count=3,
        containers=(ContainerStats("c1", 12.5, memory_working_set_bytes=42),),
    )
    assert convert.sandbox_stats_from_pb(_wire(convert.sandbox_stats_to_pb(stats))) == stats


@relaxed
@given(
    st.builds(
        Image,
        id=names,
        repo_tags=st.lists(names, max_size=2).map(tuple),
        repo_digests=st.lists(names, max_size=2).map(tuple),
        size=st.integers(0, 2**63),
        pinned=st.booleans(),
    )
)
def test_image_round_trip(image: Image) -> None:
    assert convert.image_from_pb(_wire(convert.image_to_pb(image))) == image


@relaxed
@given(
    st.builds(
        PodSandboxFilter,
        id=st.none() | names,
        state=st.none() | st.sampled_from(list(PodSandboxState)),
        label_selector=labels,
    )
)
def test_sandbox_filter_round_trip(flt: PodSandboxFilter) -> None:
    assert convert.sandbox_filter_from_pb(_wire(convert.sandbox_filter_to_pb(flt))) == flt


@relaxed
@given(
    st.builds(
        ContainerFilter,
        id=st.none() | names,
        state=st.none() | st.sampled_from(list(ContainerState)),
        pod_sandbox_id=st.none() | names,
        label_selector=labels,
    )
)
def test_container_filter_round_trip(flt: ContainerFilter) -> None:
    assert convert.container_filter_from_pb(_wire(convert.container_filter_to_pb(flt))) == flt


def test_filter_state_ready_is_sent_although_it_is_enum_zero() -> None:
    # SANDBOX_READY and CONTAINER_CREATED are 0: only the wrapper message tells
    # "filter on READY" from "no state filter".
    msg = convert.sandbox_filter_to_pb(PodSandboxFilter(state=PodSandboxState.READY))
    assert msg.HasField("state")
    assert not convert.sandbox_filter_to_pb(PodSandboxFilter()).HasField("state")
    assert convert.sandbox_filter_to_pb(None) is None


@relaxed
@given(
    st.builds(
        ContainerEvent,
        container_id=names,
        type=st.sampled_from(list(ContainerEventType)),
        created_at=times,
        pod_sandbox_status=st.none() | sandbox_statuses,
        containers_statuses=st.lists(container_statuses, max_size=2).map(tuple),
    )
)
def test_event_round_trip(event: ContainerEvent) -> None:
    assert convert.container_event_from_pb(_wire(convert.container_event_to_pb(event))) == event


def test_version_and_status_round_trip() -> None:
    v = VersionInfo("containerd", "1.6.20", "v1", "0.1.0")
    assert convert.version_from_pb(_wire(convert.version_to_pb(v))) == v
    s = RuntimeStatus(
        (
            RuntimeCondition("RuntimeReady", True),
            RuntimeCondition("NetworkReady", False, "NoCNI", "no config"),
        )
    )
    assert convert.runtime_status_from_pb(_wire(convert.runtime_status_to_pb(s))) == s


# ---------------------------------------------------------- kubelet-specific facts


def test_namespace_modes_follow_the_kubelet() -> None:
    cfg = PodSandboxConfig(metadata=PodSandboxMetadata("p", "d", "u"))
    ns = convert.sandbox_config_to_pb(cfg).linux.security_context.namespace_options
    # Pod network and IPC, but a PID namespace per container (the v1 PodSpec default).
    assert (ns.network, ns.pid, ns.ipc) == (pb.POD, pb.CONTAINER, pb.POD)
    host = PodSandboxConfig(
        metadata=PodSandboxMetadata("p", "d", "u"),
        namespace_options=NamespaceOptions(True, True, True),
    )
    ns = convert.sandbox_config_to_pb(host).linux.security_context.namespace_options
    assert (ns.network, ns.pid, ns.ipc) == (pb.NODE, pb.NODE, pb.NODE)


def test_container_of_host_network_pod_asks_for_host_network() -> None:
    sandbox = PodSandboxConfig(
        metadata=PodSandboxMetadata("p", "d", "u"),
        namespace_options=NamespaceOptions(host_network=True),
    )
    cfg = ContainerConfig(metadata=ContainerMetadata("c"), image=ImageSpec("busybox"))
    msg = convert.container_config_to_pb(cfg, sandbox)
    assert msg.linux.security_context.namespace_options.network == pb.NODE


def test_unknown_protocol_is_refused_with_its_field() -> None:
    cfg = PodSandboxConfig(
        metadata=PodSandboxMetadata("p", "d", "u"),
        port_mappings=(PortMapping(80, protocol="ICMP"),),
    )
    with pytest.raises(InvalidArgumentError, match="port_mappings: protocol 'ICMP'"):
        convert.sandbox_config_to_pb(cfg)


def test_unknown_enum_values_from_a_newer_runtime_degrade() -> None:
    status = pb.ContainerStatus(id="c", state=3)
    status.state = 3
    raw = status.SerializeToString().replace(b"\x18\x03", b"\x18\x09")
    parsed = pb.ContainerStatus.FromString(raw)
    assert convert.container_status_from_pb(parsed).state is ContainerState.UNKNOWN


# ------------------------------------------------------------- package hygiene


def test_all_is_honest() -> None:
    import types

    import kubelet_kit.cri as cri

    public = {
        name
        for name, value in vars(cri).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert sorted(cri.__all__) == sorted(public)


def test_cri_imports_no_other_subsystem() -> None:
    # Rule 1 of the design: cri may import only api, container, clock and errors, and
    # the streaming protocols its CRI server's streaming server speaks.
    import ast
    from pathlib import Path

    import kubelet_kit.cri as cri

    allowed = (
        "kubelet_kit.cri",
        "kubelet_kit.container",
        "kubelet_kit.clock",
        "kubelet_kit.errors",
        "kubelet_kit.api",
        "kubelet_kit.streams",
    )
    package = Path(cri.__file__).parent
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.startswith("kubelet_kit"):
                    assert name.startswith(allowed), f"{path.name} imports {name}"


def test_committed_generated_code_is_up_to_date() -> None:
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("grpc_tools", reason="grpcio-tools (the dev extra) generates the stubs")
    script = Path(__file__).resolve().parent.parent / "scripts" / "gen_protos.py"
    done = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
