"""Service-link variables (KUBERNETES_SERVICE_HOST, ...), as the kubelet makes them."""

from __future__ import annotations

from typing import Any

from kubelet_kit.api import Container, EnvVar, ObjectMeta, Pod, PodSpec, Service
from kubelet_kit.podsync.configs import resolve_env, service_env
from kubelet_kit.testing import KubeletEnv


def _service(name: str, namespace: str, ip: str, *ports: dict[str, Any]) -> Service:
    return Service.from_dict(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterIP": ip, "ports": list(ports)},
        }
    )


MASTER = _service(
    "kubernetes", "default", "10.96.0.1", {"name": "https", "port": 443, "protocol": "TCP"}
)
SERVICES = [
    MASTER,
    _service(
        "web-cache",
        "shop",
        "10.96.0.7",
        {"port": 80},
        {"name": "metrics", "port": 9090, "protocol": "TCP"},
        {"name": "dns-udp", "port": 53, "protocol": "UDP"},
    ),
    _service("headless", "shop", "None", {"port": 80}),
    _service("elsewhere", "other", "10.96.0.9", {"port": 80}),
]


def _pod(namespace: str = "shop", links: bool = True, env: tuple[EnvVar, ...] = ()) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="p", namespace=namespace, uid="u"),
        spec=PodSpec(
            enable_service_links=links,
            containers=(Container(name="app", image="busybox", env=env),),
        ),
    )


def test_a_service_gives_host_port_and_docker_link_variables() -> None:
    env = service_env(_pod(), SERVICES)
    assert {k: v for k, v in env.items() if k.startswith("WEB_CACHE_")} == {
        "WEB_CACHE_SERVICE_HOST": "10.96.0.7",
        "WEB_CACHE_SERVICE_PORT": "80",
        "WEB_CACHE_SERVICE_PORT_METRICS": "9090",
        "WEB_CACHE_SERVICE_PORT_DNS_UDP": "53",
        "WEB_CACHE_PORT": "tcp://10.96.0.7:80",
        "WEB_CACHE_PORT_80_TCP": "tcp://10.96.0.7:80",
        "WEB_CACHE_PORT_80_TCP_PROTO": "tcp",
        "WEB_CACHE_PORT_80_TCP_PORT": "80",
        "WEB_CACHE_PORT_80_TCP_ADDR": "10.96.0.7",
        "WEB_CACHE_PORT_9090_TCP": "tcp://10.96.0.7:9090",
        "WEB_CACHE_PORT_9090_TCP_PROTO": "tcp",
        "WEB_CACHE_PORT_9090_TCP_PORT": "9090",
        "WEB_CACHE_PORT_9090_TCP_ADDR": "10.96.0.7",
        "WEB_CACHE_PORT_53_UDP": "udp://10.96.0.7:53",
        "WEB_CACHE_PORT_53_UDP_PROTO": "udp",
        "WEB_CACHE_PORT_53_UDP_PORT": "53",
        "WEB_CACHE_PORT_53_UDP_ADDR": "10.96.0.7",
    }
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert env["KUBERNETES_SERVICE_PORT_HTTPS"] == "443"
    assert env["KUBERNETES_PORT"] == "tcp://10.96.0.1:443"
    # Headless services and other namespaces give nothing.
    assert not any(k.startswith(("HEADLESS_", "ELSEWHERE_")) for k in env)


def test_without_service_links_only_the_master_service_remains() -> None:
    env = service_env(_pod(links=False), SERVICES)
    assert env and all(k.startswith("KUBERNETES_") for k in env)


def test_a_service_of_the_pods_namespace_wins_over_the_master_of_that_name() -> None:
    own = _service("kubernetes", "shop", "10.96.0.50", {"port": 8443})
    assert service_env(_pod(), [MASTER, own])["KUBERNETES_SERVICE_HOST"] == "10.96.0.50"
    assert service_env(_pod(), [own, MASTER])["KUBERNETES_SERVICE_HOST"] == "10.96.0.50"


def test_an_ipv6_cluster_ip_is_bracketed_in_urls() -> None:
    v6 = _service("api", "shop", "fd00::1", {"port": 443})
    env = service_env(_pod(), [v6])
    assert env["API_PORT"] == "tcp://[fd00::1]:443"
    assert env["API_PORT_443_TCP_ADDR"] == "fd00::1"


def test_the_containers_own_variables_come_first_win_and_may_refer_to_links() -> None:
    pod = _pod(
        env=(
            EnvVar(name="WEB_CACHE_SERVICE_PORT", value="8080"),
            EnvVar(name="CACHE_URL", value="http://$(WEB_CACHE_SERVICE_HOST)/"),
        )
    )
    env = resolve_env(pod, pod.spec.containers[0], services=SERVICES)
    names = [kv.key for kv in env]
    assert names[:2] == ["WEB_CACHE_SERVICE_PORT", "CACHE_URL"]
    values = {kv.key: kv.value for kv in env}
    assert values["WEB_CACHE_SERVICE_PORT"] == "8080"
    assert names.count("WEB_CACHE_SERVICE_PORT") == 1
    assert values["CACHE_URL"] == "http://10.96.0.7/"


async def test_the_agent_gives_its_containers_the_service_links() -> None:
    async with KubeletEnv(services=lambda: SERVICES) as env:
        env.add_pod(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "namespace": "shop"},
                "spec": {"containers": [{"name": "app", "image": "busybox"}]},
            }
        )
        await env.wait_for(lambda: env.phase("p") == "Running")
        (call,) = env.runtime.calls_to("create_container")
    values = {kv.key: kv.value for kv in call.args[1].envs}
    assert values["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert values["WEB_CACHE_SERVICE_HOST"] == "10.96.0.7"


async def test_containers_wait_while_the_services_are_unknown() -> None:
    from kubelet_kit.errors import KubeletKitError

    known: list[Service] | None = None

    def services() -> list[Service]:
        if known is None:
            raise KubeletKitError(
                "services have not yet been read at least once, cannot construct envvars"
            )
        return known

    async with KubeletEnv(services=services) as env:
        env.add_pod(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "app", "image": "busybox"}]},
            }
        )

        def waiting() -> tuple[str, str]:
            statuses = env.status("p").container_statuses
            state = statuses[0].state.waiting if statuses else None
            return (state.reason, state.message) if state else ("", "")

        await env.wait_for(lambda: waiting()[0] == "CreateContainerConfigError")
        assert "services have not yet been read" in waiting()[1]
        known = [MASTER]
        await env.wait_for(lambda: env.phase("p") == "Running")
