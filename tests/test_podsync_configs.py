"""Pod -> runtime configs: $(VAR) expansion, sandbox/container configs, env, labels."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs
import pytest

from kubelet_kit.api import (
    Capabilities,
    ConfigMapEnvSource,
    ConfigMapKeySelector,
    Container,
    ContainerPort,
    EnvFromSource,
    EnvVar,
    EnvVarSource,
    ExecAction,
    HTTPGetAction,
    Lifecycle,
    LifecycleHandler,
    ObjectFieldSelector,
    ObjectMeta,
    Pod,
    PodSecurityContext,
    PodSpec,
    Quantity,
    ResourceFieldSelector,
    ResourceRequirements,
    SecretKeySelector,
    SecurityContext,
)
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import DNSConfig, KeyValue, Mount
from kubelet_kit.errors import PodSyncError
from kubelet_kit.podsync.configs import (
    _fnv1a_32,
    _go_json_string,
    container_config,
    container_hash,
    container_info_from_labels,
    read_resolv_conf,
    resolve_env,
    sandbox_config,
)

# ------------------------------------------------------------------- sandbox


def _pod(**spec: object) -> Pod:
    base: dict[str, object] = {"containers": (Container(name="app", image="nginx:1"),)}
    base.update(spec)
    return Pod(
        metadata=ObjectMeta(
            name="web",
            namespace="prod",
            uid="uid-1",
            labels={"app": "web"},
            annotations={"note": "x"},
        ),
        spec=PodSpec(**base),  # type: ignore[arg-type]
    )


HOST_RESOLV = DNSConfig(("192.0.2.53",), ("corp.example",), ("edns0",))


def test_sandbox_config_identity_logs_labels_namespaces() -> None:
    pod = _pod(
        host_pid=True,
        security_context=PodSecurityContext(
            sysctls=({"name": "net.core.somaxconn", "value": "1024"},)
        ),
        containers=(
            Container(
                name="app",
                ports=(
                    ContainerPort(name="http", container_port=80, host_port=8080),
                    ContainerPort(container_port=9090),
                    ContainerPort(
                        container_port=53, host_port=5353, protocol="UDP", host_ip="127.0.0.1"
                    ),
                ),
            ),
        ),
        init_containers=(
            Container(name="init", ports=(ContainerPort(container_port=1, host_port=1),)),
        ),
    )
    config = sandbox_config(
        pod,
        attempt=2,
        pod_logs_dir="/var/log/pods",
        cgroup_parent="/kubepods/poduid-1",
        resolv_conf=HOST_RESOLV,
    )
    assert (
        config.metadata.name,
        config.metadata.namespace,
        config.metadata.uid,
        config.metadata.attempt,
    ) == ("web", "prod", "uid-1", 2)
    assert config.hostname == "web"
    assert config.log_directory == "/var/log/pods/prod_web_uid-1"
    assert dict(config.labels) == {
        "app": "web",
        kl.POD_NAME: "web",
        kl.POD_NAMESPACE: "prod",
        kl.POD_UID: "uid-1",
    }
    assert dict(config.annotations) == {"note": "x"}
    mappings = [
        (p.container_port, p.host_port, p.protocol, p.host_ip) for p in config.port_mappings
    ]
    assert mappings == [(80, 8080, "TCP", ""), (53, 5353, "UDP", "127.0.0.1")]
    assert config.namespace_options.host_pid and not config.namespace_options.host_network
    assert dict(config.sysctls) == {"net.core.somaxconn": "1024"}
    assert config.cgroup_parent == "/kubepods/poduid-1"


def test_sandbox_is_privileged_when_any_container_is() -> None:
    """The kubelet's generatePodSandboxLinuxConfig: ``privileged`` is
    HasPrivilegedContainer(pod), init containers included (containerd refuses a
    privileged container in a sandbox without it: "no privileged container
    allowed in sandbox"); the pod's runAsUser/runAsGroup go to the sandbox, and
    its groups are fsGroup then supplementalGroups."""
    plain = sandbox_config(_pod(), attempt=0, pod_logs_dir="/l", resolv_conf=HOST_RESOLV)
    assert not plain.privileged
    assert (plain.run_as_user, plain.run_as_group, plain.supplemental_groups) == (None, None, ())
    for where in ("containers", "init_containers"):
        pod = _pod(
            **{
                where: (
                    Container(
                        name="c", image="busybox", security_context=SecurityContext(privileged=True)
                    ),
                )
            }
        )
        assert sandbox_config(
            pod, attempt=0, pod_logs_dir="/l", resolv_conf=HOST_RESOLV
        ).privileged, where
    unprivileged = _pod(
        containers=(
            Container(
                name="c", image="busybox", security_context=SecurityContext(privileged=False)
            ),
        )
    )
    assert not sandbox_config(
        unprivileged, attempt=0, pod_logs_dir="/l", resolv_conf=HOST_RESOLV
    ).privileged
    grouped = _pod(
        security_context=PodSecurityContext(
            run_as_user=1000, run_as_group=3000, fs_group=2000, supplemental_groups=(5, 6)
        )
    )
    config = sandbox_config(grouped, attempt=0, pod_logs_dir="/l", resolv_conf=HOST_RESOLV)
    assert (config.run_as_user, config.run_as_group) == (1000, 3000)
    assert config.supplemental_groups == (2000, 5, 6)


def test_hostname_from_spec_truncated_and_absent_for_host_network() -> None:
    pod = _pod(hostname="db-0")

    def hostname(pod: Pod) -> str:
        return sandbox_config(pod, attempt=0, pod_logs_dir="/l", resolv_conf=HOST_RESOLV).hostname

    assert hostname(pod) == "db-0"
    long_name = "a" * 62 + "-" + "b" * 10
    pod = attrs.evolve(_pod(), metadata=attrs.evolve(_pod().metadata, name=long_name))
    assert hostname(pod) == "a" * 62  # 63 characters, then the trailing "-" is dropped
    assert hostname(_pod(host_network=True)) == ""


def test_dns_policies() -> None:
    def dns(pod: Pod, **kw: object) -> DNSConfig:
        config = sandbox_config(
            pod,
            attempt=0,
            pod_logs_dir="/l",
            resolv_conf=HOST_RESOLV,
            **kw,  # type: ignore[arg-type]
        )
        assert config.dns_config is not None
        return config.dns_config

    assert dns(_pod(dns_policy="Default")) == HOST_RESOLV
    # No cluster DNS: ClusterFirst falls back to the node's resolver.
    assert dns(_pod()) == HOST_RESOLV
    assert dns(_pod(), cluster_dns=["10.96.0.10"], cluster_domain="cluster.local") == DNSConfig(
        ("10.96.0.10",),
        ("prod.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"),
        ("ndots:5",),
    )
    # Host-network pods need ClusterFirstWithHostNet for cluster DNS.
    assert dns(_pod(host_network=True), cluster_dns=["10.96.0.10"]) == HOST_RESOLV
    none = _pod(
        dns_policy="None",
        dns_config={
            "nameservers": ["1.1.1.1"],
            "searches": ["a.example"],
            "options": [{"name": "ndots", "value": "2"}, {"name": "rotate"}],
        },
    )
    assert dns(none) == DNSConfig(("1.1.1.1",), ("a.example",), ("ndots:2", "rotate"))
    merged = _pod(
        dns_policy="Default",
        dns_config={"nameservers": ["192.0.2.53", "1.1.1.1"], "options": [{"name": "edns0"}]},
    )
    assert dns(merged) == DNSConfig(("192.0.2.53", "1.1.1.1"), ("corp.example",), ("edns0",))


def test_resolv_conf_is_read_only_when_needed(tmp_path: Path) -> None:
    resolv = tmp_path / "resolv.conf"
    resolv.write_text(
        "# comment\nnameserver 10.0.0.2\nnameserver 10.0.0.3 ; x\n"
        "search old.example\nsearch a.example b.example\noptions ndots:1 rotate\n"
    )
    assert read_resolv_conf(str(resolv)) == DNSConfig(
        ("10.0.0.2", "10.0.0.3"), ("a.example", "b.example"), ("ndots:1", "rotate")
    )
    assert read_resolv_conf(str(tmp_path / "missing")) == DNSConfig()
    calls: list[int] = []

    def reader() -> DNSConfig:
        calls.append(1)
        return read_resolv_conf(str(resolv))

    config = sandbox_config(
        _pod(dns_policy="Default"), attempt=0, pod_logs_dir="/l", read_resolv=reader
    )
    assert config.dns_config is not None and config.dns_config.servers == ("10.0.0.2", "10.0.0.3")
    sandbox_config(_pod(dns_policy="None"), attempt=0, pod_logs_dir="/l", read_resolv=reader)
    assert calls == [1]


# ----------------------------------------------------------------- container


def test_fnv1a_32_reference_vectors() -> None:
    assert _fnv1a_32(b"") == 0x811C9DC5
    assert _fnv1a_32(b"a") == 0xE40C292C
    assert _fnv1a_32(b"foobar") == 0xBF9CF968


def test_container_hash_is_the_kubelets() -> None:
    # HashContainer's own test case upstream (pkg/kubelet/container/helpers_test.go,
    # Kubernetes 1.31 and later): args and ports do not enter the hash.
    c = Container(
        name="test_container",
        image="foo/image:v1",
        args=("/bin/sh", "-c", "echo abc"),
        ports=(ContainerPort(container_port=8001),),
    )
    assert container_hash(c) == "8e45cbd0"


def test_container_hash_tracks_name_and_image_only() -> None:
    c = Container(name="app", image="nginx:1", command=("nginx",))
    h = container_hash(c)
    assert h == h.lower() and int(h, 16) < 2**32
    assert container_hash(attrs.evolve(c, image="nginx:2")) != h
    assert container_hash(attrs.evolve(c, name="web")) != h
    # Fields a pod update may not change leave the hash (and the container) alone.
    assert container_hash(attrs.evolve(c, args=("-g",), working_dir="/srv")) == h


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("registry.local/app:1", '"registry.local/app:1"'),
        ("a<b>&c", '"a\\u003cb\\u003e\\u0026c"'),
        ('q"b\\s', '"q\\"b\\\\s"'),
        ("\b\f\n\r\t\x01\x1f", '"\\b\\f\\n\\r\\t\\u0001\\u001f"'),
        ("\u2028\u2029", '"\\u2028\\u2029"'),
        ("caf\u00e9", '"caf\u00e9"'),
        ("\ud800", '"\\ufffd"'),
    ],
)
def test_hashed_strings_are_encoded_as_go_encodes_them(value: str, expected: str) -> None:
    assert _go_json_string(value) == expected


def _rich_container() -> Container:
    return Container(
        name="app",
        image="nginx:1",
        command=("/bin/sh", "-c", "echo $(GREETING) $$(NOT) $(MISSING)"),
        args=("--name=$(POD_NAME)",),
        working_dir="/srv",
        ports=(
            ContainerPort(name="http", container_port=8080, host_port=80),
            ContainerPort(container_port=9090, protocol="UDP"),
        ),
        lifecycle=Lifecycle(
            pre_stop=LifecycleHandler(http_get=HTTPGetAction(path="/quit", port="http"))
        ),
        termination_message_policy="FallbackToLogsOnError",
        security_context=SecurityContext(
            run_as_user=1000,
            allow_privilege_escalation=False,
            read_only_root_filesystem=True,
            capabilities=Capabilities(add=("NET_ADMIN",), drop=("ALL",)),
        ),
        stdin=True,
        tty=True,
    )


def test_container_config_fields() -> None:
    container = _rich_container()
    pod = attrs.evolve(
        _pod(containers=(container,)),
        metadata=attrs.evolve(_pod().metadata, deletion_grace_period_seconds=10),
    )
    pod = attrs.evolve(
        pod,
        spec=attrs.evolve(
            pod.spec,
            security_context=PodSecurityContext(
                run_as_user=1, run_as_group=2, supplemental_groups=(5,), fs_group=7
            ),
        ),
    )
    env = [KeyValue("GREETING", "hi"), KeyValue("POD_NAME", "web")]
    mounts = [Mount("/data", "/var/lib/data")]
    config = container_config(
        pod, container, restart_count=3, env=env, mounts=mounts, image="sha256:abc"
    )
    assert (config.metadata.name, config.metadata.attempt) == ("app", 3)
    assert config.image.image == "sha256:abc"
    assert config.command == ("/bin/sh", "-c", "echo hi $(NOT) $(MISSING)")
    assert config.args == ("--name=web",)
    assert config.working_dir == "/srv" and config.envs == tuple(env)
    assert config.mounts == tuple(mounts)
    assert config.log_path == "app/3.log"
    assert config.stdin and config.tty and not config.stdin_once
    assert dict(config.labels) == {
        kl.POD_NAME: "web",
        kl.POD_NAMESPACE: "prod",
        kl.POD_UID: "uid-1",
        kl.CONTAINER_NAME: "app",
    }
    a = config.annotations
    assert a[kl.CONTAINER_HASH] == container_hash(container)
    assert a[kl.CONTAINER_RESTART_COUNT] == "3"
    assert a[kl.CONTAINER_TERMINATION_MESSAGE_PATH] == "/dev/termination-log"
    assert a[kl.CONTAINER_TERMINATION_MESSAGE_POLICY] == "FallbackToLogsOnError"
    assert a[kl.POD_TERMINATION_GRACE_PERIOD] == "30"
    assert a[kl.POD_DELETION_GRACE_PERIOD] == "10"
    assert a[kl.CONTAINER_PRESTOP_HANDLER] == (
        '{"httpGet":{"path":"/quit","port":"http","scheme":"HTTP"}}'
    )
    assert a[kl.CONTAINER_PORTS] == (
        '[{"name":"http","hostPort":80,"containerPort":8080,"protocol":"TCP"},'
        '{"containerPort":9090,"protocol":"UDP"}]'
    )
    assert a[kl.CONTAINER_TYPE] == "container"
    sc = config.security_context
    assert sc is not None
    assert (sc.run_as_user, sc.run_as_group) == (1000, 2)
    assert sc.no_new_privs and sc.readonly_rootfs and not sc.privileged
    assert sc.capabilities_add == ("NET_ADMIN",) and sc.capabilities_drop == ("ALL",)
    assert sc.supplemental_groups == (5, 7)


def test_extra_annotations_come_first_and_the_kubelets_keys_win_in_place() -> None:
    container = Container(name="app", image="nginx:1")
    extra = {"device": "gpu0", kl.CONTAINER_RESTART_COUNT: "99", "zone": "a"}
    config = container_config(
        _pod(containers=(container,)),
        container,
        restart_count=2,
        env=[],
        extra_annotations=extra,
    )
    assert list(config.annotations.items()) == [
        ("device", "gpu0"),
        (kl.CONTAINER_RESTART_COUNT, "2"),  # the kubelet's value, at extra's place
        ("zone", "a"),
        (kl.CONTAINER_HASH, container_hash(container)),
        (kl.CONTAINER_TERMINATION_MESSAGE_PATH, "/dev/termination-log"),
        (kl.CONTAINER_TERMINATION_MESSAGE_POLICY, "File"),
        (kl.POD_TERMINATION_GRACE_PERIOD, "30"),
        (kl.CONTAINER_TYPE, "container"),
    ]
    assert extra == {"device": "gpu0", kl.CONTAINER_RESTART_COUNT: "99", "zone": "a"}


def test_labels_round_trip() -> None:
    # In the spirit of upstream labels_test.go: what is written is read back.
    container = _rich_container()
    pod = _pod(containers=(container,), init_containers=(Container(name="setup"),))
    config = container_config(pod, container, restart_count=4, env=[])
    info = container_info_from_labels(config.labels, config.annotations)
    assert (info.name, info.pod_name, info.pod_namespace, info.pod_uid) == (
        "app",
        "web",
        "prod",
        "uid-1",
    )
    assert info.hash == container_hash(container)
    assert info.restart_count == 4
    assert info.termination_grace_period == 30 and info.deletion_grace_period is None
    assert info.termination_message_policy == "FallbackToLogsOnError"
    assert info.pre_stop == container.lifecycle.pre_stop  # type: ignore[union-attr]
    assert info.ports == container.ports
    assert info.container_type == "container"
    init = container_config(pod, pod.spec.init_containers[0], restart_count=0, env=[])
    assert container_info_from_labels(init.labels, init.annotations).container_type == "init"
    # Old or foreign containers: defaults instead of errors.
    info = container_info_from_labels(
        {kl.CONTAINER_NAME: "x"},
        {kl.CONTAINER_RESTART_COUNT: "many", kl.CONTAINER_PORTS: "{", kl.CONTAINER_HASH: "ABC"},
    )
    assert (info.name, info.restart_count, info.ports, info.hash, info.pre_stop) == (
        "x",
        0,
        (),
        "abc",
        None,
    )


def test_exec_prestop_handler_json() -> None:
    c = Container(
        name="c",
        lifecycle=Lifecycle(
            pre_stop=LifecycleHandler(exec=ExecAction(command=("sh", "-c", "sleep 1")))
        ),
    )
    config = container_config(_pod(containers=(c,)), c, restart_count=0, env=[])
    assert config.annotations[kl.CONTAINER_PRESTOP_HANDLER] == (
        '{"exec":{"command":["sh","-c","sleep 1"]}}'
    )


# ----------------------------------------------------------------------- env


def _field(path: str) -> EnvVarSource:
    return EnvVarSource(field_ref=ObjectFieldSelector(field_path=path))


def _env_pod(*env: EnvVar, **container: object) -> tuple[Pod, Container]:
    c = Container(name="app", env=env, **container)  # type: ignore[arg-type]
    pod = Pod(
        metadata=ObjectMeta(
            name="dapi-test-pod-name",
            namespace="downward-api",
            uid="u-1",
            labels={"tier": "web"},
            annotations={"owner": "ops"},
        ),
        spec=PodSpec(containers=(c,), service_account_name="special", node_name="node-name"),
    )
    return pod, c


def test_downward_api_fields() -> None:
    # Upstream TestMakeEnvironmentVariables, "downward api pod".
    pod, c = _env_pod(
        EnvVar(name="POD_NAME", value_from=_field("metadata.name")),
        EnvVar(name="POD_NAMESPACE", value_from=_field("metadata.namespace")),
        EnvVar(name="POD_NODE_NAME", value_from=_field("spec.nodeName")),
        EnvVar(name="POD_SERVICE_ACCOUNT_NAME", value_from=_field("spec.serviceAccountName")),
        EnvVar(name="POD_IP", value_from=_field("status.podIP")),
        EnvVar(name="POD_IPS", value_from=_field("status.podIPs")),
        EnvVar(name="HOST_IP", value_from=_field("status.hostIP")),
        EnvVar(name="HOST_IPS", value_from=_field("status.hostIPs")),
        EnvVar(name="UID", value_from=_field("metadata.uid")),
        EnvVar(name="TIER", value_from=_field("metadata.labels['tier']")),
        EnvVar(name="OWNER", value_from=_field("metadata.annotations['owner']")),
    )
    env = resolve_env(pod, c, pod_ips=["1.2.3.4", "fd00::6"], host_ips=["5.5.5.5", "fd01::1"])
    assert env == [
        KeyValue("POD_NAME", "dapi-test-pod-name"),
        KeyValue("POD_NAMESPACE", "downward-api"),
        KeyValue("POD_NODE_NAME", "node-name"),
        KeyValue("POD_SERVICE_ACCOUNT_NAME", "special"),
        KeyValue("POD_IP", "1.2.3.4"),
        KeyValue("POD_IPS", "1.2.3.4,fd00::6"),
        KeyValue("HOST_IP", "5.5.5.5"),
        KeyValue("HOST_IPS", "5.5.5.5,fd01::1"),
        KeyValue("UID", "u-1"),
        KeyValue("TIER", "web"),
        KeyValue("OWNER", "ops"),
    ]
    bad_pod, bad = _env_pod(EnvVar(name="X", value_from=_field("spec.nope")))
    with pytest.raises(PodSyncError) as err:
        resolve_env(bad_pod, bad)
    assert err.value.reason == "CreateContainerConfigError"
    assert err.value.message == "unsupported fieldPath: spec.nope"


def test_literal_values_expand_against_earlier_vars() -> None:
    # Upstream TestMakeEnvironmentVariables, "api server = Y, kubelet = Y" expansion.
    pod, c = _env_pod(
        EnvVar(name="TEST_LITERAL", value="test-test-test"),
        EnvVar(name="POD_NAME", value_from=_field("metadata.name")),
        EnvVar(name="OUT_OF_ORDER_TEST", value="$(OUT_OF_ORDER_TARGET)"),
        EnvVar(name="OUT_OF_ORDER_TARGET", value="FOO"),
        EnvVar(name="EMPTY_VAR"),
        EnvVar(name="EMPTY_TEST", value="foo-$(EMPTY_VAR)"),
        EnvVar(name="POD_NAME_TEST2", value="test2-$(POD_NAME)"),
        EnvVar(name="POD_NAME_TEST3", value="$(POD_NAME_TEST2)-3"),
        EnvVar(name="LITERAL_TEST", value="literal-$(TEST_LITERAL)"),
        EnvVar(name="TEST_UNDEFINED", value="$(UNDEFINED_VAR)"),
    )
    env = dict((kv.key, kv.value) for kv in resolve_env(pod, c))
    assert env == {
        "TEST_LITERAL": "test-test-test",
        "POD_NAME": "dapi-test-pod-name",
        "OUT_OF_ORDER_TEST": "$(OUT_OF_ORDER_TARGET)",
        "OUT_OF_ORDER_TARGET": "FOO",
        "EMPTY_VAR": "",
        "EMPTY_TEST": "foo-",
        "POD_NAME_TEST2": "test2-dapi-test-pod-name",
        "POD_NAME_TEST3": "test2-dapi-test-pod-name-3",
        "LITERAL_TEST": "literal-test-test-test",
        "TEST_UNDEFINED": "$(UNDEFINED_VAR)",
    }


def _res(resource: str, divisor: str | None = None, container: str = "") -> EnvVar:
    return EnvVar(
        name="V",
        value_from=EnvVarSource(
            resource_field_ref=ResourceFieldSelector(
                container_name=container,
                resource=resource,
                divisor=Quantity.parse(divisor) if divisor else None,
            )
        ),
    )


Q = Quantity.parse
LIMITED = ResourceRequirements(
    limits={"cpu": Q("2500m"), "memory": Q("1536Mi"), "ephemeral-storage": Q("1G")},
    requests={"cpu": Q("250m"), "memory": Q("1.5Mi")},
)
ALLOCATABLE = {"cpu": Q("8"), "memory": Q("32Gi"), "ephemeral-storage": Q("100Gi")}

# (resource, divisor, expected); the kubelet rounds up (ceil) after dividing.
RESOURCE_CASES = [
    ("limits.cpu", None, "3"),
    ("limits.cpu", "1m", "2500"),
    ("limits.cpu", "100m", "25"),
    ("limits.cpu", "1k", "1"),
    ("requests.cpu", None, "1"),
    ("requests.cpu", "1m", "250"),
    ("limits.memory", None, str(1536 * 1024 * 1024)),
    ("limits.memory", "1Mi", "1536"),
    ("limits.memory", "1Gi", "2"),
    ("requests.memory", "1Mi", "2"),
    ("requests.memory", "1Ki", "1536"),
    ("limits.ephemeral-storage", "1M", "1000"),
    ("requests.ephemeral-storage", None, "0"),
]


@pytest.mark.parametrize(("resource", "divisor", "expected"), RESOURCE_CASES)
def test_resource_field_ref(resource: str, divisor: str | None, expected: str) -> None:
    pod, c = _env_pod(_res(resource, divisor), resources=LIMITED)
    assert resolve_env(pod, c, allocatable=ALLOCATABLE) == [KeyValue("V", expected)]


def test_resource_limits_default_to_node_allocatable() -> None:
    pod, c = _env_pod(_res("limits.cpu"), _res("limits.memory", "1Gi"))
    env = resolve_env(pod, c, allocatable=ALLOCATABLE)
    assert env == [KeyValue("V", "32")]  # later V replaces earlier V
    pod, c = _env_pod(_res("limits.cpu", "1m"))
    assert resolve_env(pod, c, allocatable=ALLOCATABLE) == [KeyValue("V", "8000")]
    with pytest.raises(PodSyncError, match="allocatable"):
        resolve_env(pod, c)
    pod, c = _env_pod(_res("limits.nvidia.com/gpu"))
    with pytest.raises(PodSyncError, match="unsupported container resource"):
        resolve_env(pod, c, allocatable=ALLOCATABLE)


class _source:
    def __init__(self, store: Mapping[tuple[str, str], Mapping[str, str]]) -> None:
        self.store = store

    def _get(self, kind: str, namespace: str, name: str) -> Mapping[str, bytes] | None:
        assert namespace == "downward-api"
        data = self.store.get((kind, name))
        return None if data is None else {k: v.encode() for k, v in data.items()}

    def get_config_map(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        return self._get("ConfigMap", namespace, name)

    def get_secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        return self._get("Secret", namespace, name)


def test_config_map_and_secret_sources() -> None:
    store = {
        ("ConfigMap", "cfg"): {"a": "1", "b": "2", "bad=key": "x"},
        ("Secret", "sec"): {"password": "hunter2"},
    }
    pod, c = _env_pod(
        EnvVar(name="b", value="literal-wins"),
        EnvVar(
            name="PW",
            value_from=EnvVarSource(secret_key_ref=SecretKeySelector(name="sec", key="password")),
        ),
        EnvVar(
            name="A",
            value_from=EnvVarSource(config_map_key_ref=ConfigMapKeySelector(name="cfg", key="a")),
        ),
        EnvVar(
            name="OPT",
            value_from=EnvVarSource(
                config_map_key_ref=ConfigMapKeySelector(name="nope", key="a", optional=True)
            ),
        ),
        env_from=(
            EnvFromSource(prefix="", config_map_ref=ConfigMapEnvSource(name="cfg")),
            EnvFromSource(prefix="X_", config_map_ref=ConfigMapEnvSource(name="cfg")),
            EnvFromSource(config_map_ref=ConfigMapEnvSource(name="gone", optional=True)),
        ),
    )
    env = resolve_env(pod, c, config_source=_source(store))
    assert env == [
        KeyValue("a", "1"),
        KeyValue("b", "literal-wins"),
        KeyValue("X_a", "1"),
        KeyValue("X_b", "2"),
        KeyValue("PW", "hunter2"),
        KeyValue("A", "1"),
    ]


@pytest.mark.parametrize(
    ("var", "message"),
    [
        (
            EnvVar(
                name="A",
                value_from=EnvVarSource(
                    config_map_key_ref=ConfigMapKeySelector(name="cfg", key="zzz")
                ),
            ),
            "couldn't find key zzz in ConfigMap downward-api/cfg",
        ),
        (
            EnvVar(
                name="A",
                value_from=EnvVarSource(secret_key_ref=SecretKeySelector(name="sec", key="zzz")),
            ),
            "couldn't find key zzz in Secret downward-api/sec",
        ),
        (
            EnvVar(
                name="A",
                value_from=EnvVarSource(
                    config_map_key_ref=ConfigMapKeySelector(name="missing", key="a")
                ),
            ),
            'configmap "missing" not found',
        ),
        (
            EnvVar(
                name="A",
                value_from=EnvVarSource(secret_key_ref=SecretKeySelector(name="missing", key="a")),
            ),
            'secret "missing" not found',
        ),
    ],
)
def test_missing_sources_are_create_container_config_errors(var: EnvVar, message: str) -> None:
    store = {("ConfigMap", "cfg"): {"a": "1"}, ("Secret", "sec"): {"p": "x"}}
    pod, c = _env_pod(var)
    with pytest.raises(PodSyncError) as err:
        resolve_env(pod, c, config_source=_source(store))
    assert (err.value.reason, err.value.message, err.value.container) == (
        "CreateContainerConfigError",
        message,
        "app",
    )


def test_missing_env_from_without_source_is_an_error() -> None:
    pod, c = _env_pod(env_from=(EnvFromSource(config_map_ref=ConfigMapEnvSource(name="cfg")),))
    with pytest.raises(PodSyncError, match='configmap "cfg" not found'):
        resolve_env(pod, c)
