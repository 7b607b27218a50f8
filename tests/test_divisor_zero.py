"""A zero divisor reads as 1 wherever a ``resourceFieldRef`` appears.

The kubelet's rule (upstream ``pkg/apis/core/validation``
``validateContainerResourceDivisor`` and ``pkg/api/v1/resource``
``ExtractContainerResourceValue``): a divisor equal to the zero Quantity is the
unset divisor, what the API server writes for a divisor nobody gave, and it is
read as 1. Any other divisor must be one of the unit values of its resource
(``1m`` or ``1`` for cpu; ``1``, ``1k`` ... ``1Ei`` for byte resources).
"""

from __future__ import annotations

from typing import Any

import pytest

from kubelet_kit.api import Pod, load_pod
from kubelet_kit.api.loading import load_api_pod
from kubelet_kit.api.validation import validate_pod
from kubelet_kit.container.interfaces import KeyValue
from kubelet_kit.podsync.configs import resolve_env
from kubelet_kit.testing.env import KubeletEnv
from kubelet_kit.volume.plugins import PluginEnv, downward_api_payload, projected_payload


def ref(resource: str, divisor: str | None, *, container: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"resource": resource}
    if container:
        out["containerName"] = container
    if divisor is not None:
        out["divisor"] = divisor
    return out


def pod_manifest(divisor: str | None, resource: str = "limits.memory") -> dict[str, Any]:
    """A pod using one resourceFieldRef in each place one can appear: an env var,
    a downwardAPI volume and a projected downwardAPI source."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "dapi", "namespace": "default", "uid": "uid-dapi"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "command": ["sh", "-c", "exit 0"],
                    "resources": {
                        "limits": {"cpu": "1250m", "memory": "64Mi"},
                        "requests": {"cpu": "250m", "memory": "32Mi"},
                    },
                    "env": [
                        {"name": "VALUE", "valueFrom": {"resourceFieldRef": ref(resource, divisor)}}
                    ],
                    "volumeMounts": [
                        {"name": "info", "mountPath": "/info"},
                        {"name": "all", "mountPath": "/all"},
                    ],
                }
            ],
            "volumes": [
                {
                    "name": "info",
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "value",
                                "resourceFieldRef": ref(resource, divisor, container="c"),
                            },
                        ]
                    },
                },
                {
                    "name": "all",
                    "projected": {
                        "sources": [
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "value",
                                            "resourceFieldRef": ref(
                                                resource, divisor, container="c"
                                            ),
                                        },
                                    ]
                                }
                            }
                        ]
                    },
                },
            ],
        },
    }


def values(pod: Pod) -> tuple[str, str, str]:
    """The value of the env var, the downwardAPI file and the projected file."""
    container = pod.spec.containers[0]
    env = {kv.key: kv.value for kv in resolve_env(pod, container)}
    volume, projected = pod.spec.volumes
    assert volume.downward_api is not None
    file = downward_api_payload(pod, volume.downward_api.items, 0o644)["value"]
    proj = projected_payload(pod, projected, PluginEnv())["value"]
    return env["VALUE"], file.data.decode(), proj.data.decode()


@pytest.mark.parametrize("zero", ["0", "0m", "0Ki"])
def test_a_zero_divisor_is_valid_and_reads_as_one_everywhere(zero: str) -> None:
    # Static pods go through every validation rule: zero is still the unset divisor.
    pod = load_pod(pod_manifest(zero))
    assert validate_pod(pod) == []
    assert values(pod) == (str(64 * 1024 * 1024),) * 3
    assert values(pod) == values(load_pod(pod_manifest(None)))


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        ("limits.cpu", "2"),  # 1250m rounded up
        ("requests.cpu", "1"),
        ("requests.memory", str(32 * 1024 * 1024)),
    ],
)
def test_a_zero_divisor_reads_as_one_for_each_resource(resource: str, expected: str) -> None:
    assert values(load_pod(pod_manifest("0", resource))) == (expected,) * 3


def test_the_api_servers_zero_divisor_is_served_without_problems() -> None:
    # What the API server returns for a pod created without divisors.
    pod = load_api_pod(pod_manifest("0"))
    assert pod.problems == ()
    assert values(pod) == (str(64 * 1024 * 1024),) * 3


@pytest.mark.parametrize(
    ("resource", "divisor", "message"),
    [
        ("limits.cpu", "3", "only divisor's values 1m and 1 are supported with the cpu resource"),
        (
            "requests.cpu",
            "-1",
            "only divisor's values 1m and 1 are supported with the cpu resource",
        ),
        (
            "limits.memory",
            "2Mi",
            "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, "
            "1Ti, 1Pi, 1Ei are supported with the memory resource",
        ),
        (
            "limits.ephemeral-storage",
            "1m",
            "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, "
            "1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the local "
            "ephemeral storage resource",
        ),
        (
            "requests.hugepages-2Mi",
            "1e3",
            "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, "
            "1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the hugepages "
            "resource",
        ),
    ],
)
def test_another_divisor_must_be_a_unit_of_its_resource(
    resource: str, divisor: str, message: str
) -> None:
    errors = validate_pod(Pod.from_dict(pod_manifest(divisor, resource)))
    # The bad value shown is the resource, as upstream shows it.
    expected = f'Invalid value: "{resource}": {message}'
    assert [(e.path, e.message) for e in errors] == [
        ("spec.volumes[0].downwardAPI.items[0].resourceFieldRef.divisor", expected),
        (
            "spec.volumes[1].projected.sources[0].downwardAPI.items[0].resourceFieldRef.divisor",
            expected,
        ),
        ("spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor", expected),
    ]


@pytest.mark.parametrize(
    ("resource", "divisor"),
    [
        ("limits.cpu", "1m"),
        ("limits.cpu", "1"),
        ("limits.cpu", "1000m"),  # canonically "1"
        ("limits.memory", "1Mi"),
        ("limits.memory", "1k"),
        ("requests.memory", "1Ei"),
    ],
)
def test_unit_divisors_are_valid(resource: str, divisor: str) -> None:
    assert validate_pod(Pod.from_dict(pod_manifest(divisor, resource))) == []


async def test_a_pod_with_zero_divisors_runs_with_the_values_read_as_one() -> None:
    async with KubeletEnv() as env:
        env.add_pod(pod_manifest("0"))
        await env.wait_for(lambda: env.phase("dapi") == "Succeeded", what="dapi Succeeded")
        config = env.runtime.calls_to("create_container")[0].args[1]
        assert KeyValue("VALUE", str(64 * 1024 * 1024)) in config.envs
