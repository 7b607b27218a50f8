"""APIServices: the cluster's Services, listed and watched for service-link variables."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubelet_kit.cluster import APIServices, ServicesNotSyncedError

from .apiserver_standin import StandInAPIServer
from .helpers import eventually


def _service(name: str, namespace: str, ip: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterIP": ip, "ports": [{"port": 80}]},
    }


async def test_services_follow_the_api_server_and_refuse_before_the_first_list(
    standin: StandInAPIServer, api_client: Any
) -> None:
    standin.put("services", _service("kubernetes", "default", "10.96.0.1"))
    services = APIServices(api_client)
    with pytest.raises(
        ServicesNotSyncedError,
        match="services have not yet been read at least once, cannot construct envvars",
    ):
        services()
    task = asyncio.create_task(services.run())
    try:

        def names() -> set[str]:
            try:
                return {f"{s.metadata.namespace}/{s.metadata.name}" for s in services()}
            except ServicesNotSyncedError:
                return set()

        await eventually(lambda: names() == {"default/kubernetes"}, what="listed")
        standin.put("services", _service("cache", "shop", "10.96.0.7"))
        await eventually(
            lambda: names() == {"default/kubernetes", "shop/cache"}, what="watched: added"
        )
        standin.remove("services", "shop", "cache")
        await eventually(lambda: names() == {"default/kubernetes"}, what="watched: deleted")
        (master,) = services()
        assert master.spec.cluster_ip == "10.96.0.1" and master.spec.ports[0].port == 80
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
