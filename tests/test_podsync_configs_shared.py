"""Pod -> runtime configs: the shortcuts for common pods give what the general path gives.

Sandbox DNS, container security contexts, ports annotations, log directories,
command expansion and environments are built along a shorter way (or looked up
once built) for the usual pod; each test here checks such a pod against one
that takes the general way, or against the plain definition.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import pytest

from kubelet_kit.api import (
    Container,
    ContainerPort,
    EnvVar,
    ObjectMeta,
    Pod,
    PodSecurityContext,
    PodSpec,
    SecurityContext,
)
from kubelet_kit.api.expand import expand_all
from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import DNSConfig, KeyValue
from kubelet_kit.podsync.configs import (
    container_annotations,
    container_config,
    pod_log_directory,
    resolve_env,
    sandbox_config,
)
from kubelet_kit.podsync.images import ImagePuller
from kubelet_kit.testing import FakeClock, FakeRuntime


def _pod(namespace: str = "prod", **spec: object) -> Pod:
    base: dict[str, object] = {"containers": (Container(name="app", image="nginx:1"),)}
    base.update(spec)
    return Pod(
        metadata=ObjectMeta(
            name="web", namespace=namespace, uid="uid-1", annotations={"note": "x"}
        ),
        spec=PodSpec(**base),  # type: ignore[arg-type]
    )


# ------------------------------------------------------------------------ DNS

# Duplicates, as a hand-edited resolv.conf may hold them: the sandbox gets each once.
RESOLV = DNSConfig(
    ("192.0.2.53", "192.0.2.53", "192.0.2.54"),
    ("corp.example", "corp.example"),
    ("ndots:1", "edns0", "ndots:2"),
)


def _dns(pod: Pod, resolv: DNSConfig = RESOLV, **kw: Any) -> DNSConfig:
    config = sandbox_config(pod, attempt=0, pod_logs_dir="/l", resolv_conf=resolv, **kw)
    assert config.dns_config is not None
    return config.dns_config


@pytest.mark.parametrize(
    "policy", ["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None", "Other"]
)
@pytest.mark.parametrize("host_network", [False, True])
@pytest.mark.parametrize(
    "cluster", [{}, {"cluster_dns": ["10.96.0.10"], "cluster_domain": "cluster.local"}]
)
def test_dns_without_a_pod_dns_config_is_the_general_result(
    policy: str, host_network: bool, cluster: dict[str, Any]
) -> None:
    # A dnsConfig with nothing in it takes the general way and adds nothing.
    for namespace in ("prod", "dev"):
        plain = _pod(namespace, dns_policy=policy, host_network=host_network)
        general = attrs.evolve(plain, spec=attrs.evolve(plain.spec, dns_config={"options": []}))
        assert _dns(plain, **cluster) == _dns(general, **cluster)


def test_dns_follows_the_values_of_the_resolver_and_the_namespace() -> None:
    assert _dns(_pod(dns_policy="Default")) == DNSConfig(
        ("192.0.2.53", "192.0.2.54"), ("corp.example",), ("ndots:2", "edns0")
    )
    # An equal resolver config given as lists (not hashable) is read by value.
    as_lists = DNSConfig(
        list(RESOLV.servers),  # type: ignore[arg-type]
        list(RESOLV.searches),  # type: ignore[arg-type]
        list(RESOLV.options),  # type: ignore[arg-type]
    )
    assert _dns(_pod(dns_policy="Default"), as_lists) == _dns(_pod(dns_policy="Default"))
    edited = DNSConfig(("198.51.100.1",), (), ())
    assert _dns(_pod(dns_policy="Default"), edited) == edited
    cluster: dict[str, Any] = {"cluster_dns": ["10.96.0.10"], "cluster_domain": "cluster.local"}
    assert _dns(_pod("dev"), **cluster).searches[0] == "dev.svc.cluster.local"
    assert _dns(_pod("prod"), **cluster).searches[0] == "prod.svc.cluster.local"


def test_resolv_conf_edits_reach_the_next_sandbox(tmp_path: Path) -> None:
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 10.0.0.2\n")

    def config() -> DNSConfig:
        from kubelet_kit.podsync.configs import read_resolv_conf

        return _dns(_pod(dns_policy="Default"), read_resolv_conf(str(resolv)))

    assert config().servers == ("10.0.0.2",)
    resolv.write_text("nameserver 10.0.0.3\nnameserver 10.0.0.4\n")
    assert config().servers == ("10.0.0.3", "10.0.0.4")


# ------------------------------------------------------------ security context


@pytest.mark.parametrize(
    "psc",
    [
        PodSecurityContext(),
        PodSecurityContext(run_as_user=1, run_as_group=2, supplemental_groups=(5, 7), fs_group=7),
        PodSecurityContext(supplemental_groups=(5,), fs_group=9),
    ],
)
def test_a_container_without_security_context_gets_the_general_result(
    psc: PodSecurityContext,
) -> None:
    plain = Container(name="app", image="nginx:1")
    # An empty securityContext of its own takes the general way and changes nothing.
    general = attrs.evolve(plain, security_context=SecurityContext())
    pod = _pod(containers=(plain,), security_context=psc)

    def context(container: Container) -> object:
        return container_config(pod, container, restart_count=0, env=[]).security_context

    assert context(plain) == context(general)
    sc = context(plain)
    groups = list(psc.supplemental_groups)
    if psc.fs_group is not None and psc.fs_group not in groups:
        groups.append(psc.fs_group)
    assert sc == attrs.evolve(
        sc,  # type: ignore[misc]
        run_as_user=psc.run_as_user,
        run_as_group=psc.run_as_group,
        privileged=False,
        readonly_rootfs=False,
        no_new_privs=False,
        capabilities_add=(),
        capabilities_drop=(),
        supplemental_groups=tuple(groups),
    )


# ------------------------------------------------------------------- ports


def test_ports_annotation_follows_each_ports_values() -> None:
    def ports_json(*ports: ContainerPort) -> str:
        container = Container(name="app", image="nginx:1", ports=ports)
        return container_annotations(_pod(containers=(container,)), container, 0)[
            kl.CONTAINER_PORTS
        ]

    http = ContainerPort(name="http", container_port=8080)
    assert ports_json(http) == '[{"name":"http","containerPort":8080,"protocol":"TCP"}]'
    # Equal ports of another container: the same text; any field changed: its own.
    assert ports_json(ContainerPort(name="http", container_port=8080)) == ports_json(http)
    assert ports_json(attrs.evolve(http, host_port=80)) == (
        '[{"name":"http","hostPort":80,"containerPort":8080,"protocol":"TCP"}]'
    )
    assert ports_json(attrs.evolve(http, host_ip="127.0.0.1", protocol="UDP")) == (
        '[{"name":"http","containerPort":8080,"protocol":"UDP","hostIP":"127.0.0.1"}]'
    )
    assert ports_json(attrs.evolve(http, name=""), http) == (
        '[{"containerPort":8080,"protocol":"TCP"},'
        '{"name":"http","containerPort":8080,"protocol":"TCP"}]'
    )


# ----------------------------------------------------------- log directory


@pytest.mark.parametrize("root", ["/var/log/pods", "/var/log/pods/", "", "logs", "/"])
@pytest.mark.parametrize("namespace", ["prod", "/abs"])
def test_pod_log_directory_is_os_path_join(root: str, namespace: str) -> None:
    pod = _pod(namespace)
    expected = os.path.join(root, f"{namespace}_web_uid-1")
    assert pod_log_directory(root, pod) == expected
    assert pod_log_directory(Path(root) if root else root, pod) == os.path.join(  # type: ignore[arg-type]
        Path(root) if root else root, f"{namespace}_web_uid-1"
    )


# ------------------------------------------------------- command expansion


def test_expand_all_without_references_gives_the_strings_as_a_tuple() -> None:
    assert expand_all(iter(["sleep", "infinity"]), {"A": "x"}) == ("sleep", "infinity")
    assert expand_all(["a", "$(A)", "$$(A)"], {"A": "x"}) == ("a", "x", "$(A)")
    assert expand_all([], {}) == ()


def test_command_is_expanded_only_where_it_references() -> None:
    container = Container(
        name="app", image="nginx:1", command=("echo", "$(A)"), args=("plain", "$(B)")
    )
    env = [KeyValue("A", "1"), KeyValue("B", "2")]
    config = container_config(_pod(containers=(container,)), container, restart_count=0, env=env)
    assert (config.command, config.args) == (("echo", "1"), ("plain", "2"))
    plain = Container(name="app", image="nginx:1", command=("sleep",), args=("9",))
    config = container_config(_pod(containers=(plain,)), plain, restart_count=0, env=env)
    assert (config.command, config.args) == (("sleep",), ("9",))
    assert type(config.command) is tuple and type(config.args) is tuple


# -------------------------------------------------------------- environment


def test_a_container_without_env_gets_the_service_links_only() -> None:
    from kubelet_kit.api import Service

    service = Service.from_dict(
        {
            "metadata": {"name": "db", "namespace": "prod"},
            "spec": {"clusterIP": "10.96.0.7", "ports": [{"port": 5432}]},
        }
    )
    bare = Container(name="app", image="nginx:1")
    pod = _pod(containers=(bare,))
    links = resolve_env(pod, bare, services=[service])
    # With a variable of its own, the links follow it, unchanged.
    with_env = attrs.evolve(bare, env=(EnvVar(name="X", value="1"),))
    assert resolve_env(pod, with_env, services=[service]) == [KeyValue("X", "1"), *links]
    assert KeyValue("DB_SERVICE_HOST", "10.96.0.7") in links
    assert resolve_env(pod, bare) == []


# ---------------------------------------------------------------- images


async def test_image_spec_carries_a_copy_of_the_pod_annotations() -> None:
    runtime = FakeRuntime(FakeClock())
    runtime.add_image("nginx:1", present=True)
    pod = _pod()
    await ImagePuller(runtime, FakeClock()).ensure_image(pod, pod.spec.containers[0])
    (call,) = [c for c in runtime.calls if c.method == "image_status"]
    spec = call.args[0]
    assert dict(spec.annotations) == {"note": "x"}
    assert spec.annotations is not pod.metadata.annotations
