"""subPathExpr expands against the container's resolved environment, downward API
and device-plugin values included, as the kubelet's makeMounts does."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet_kit.errors import ValidationError
from kubelet_kit.testing import FakeClock, KubeletEnv
from kubelet_kit.volume import ReconcilingVolumeManager
from kubelet_kit.volume.reconciler import expand_sub_path_expr

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-0", "namespace": "shop", "uid": "u-web-0"},
    "spec": {
        "volumes": [{"name": "logs", "emptyDir": {}}],
        "containers": [
            {
                "name": "app",
                "image": "busybox",
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                ],
                "volumeMounts": [
                    {
                        "name": "logs",
                        "mountPath": "/var/log/app",
                        "subPathExpr": "$(NS)/$(POD_NAME)",
                    }
                ],
            }
        ],
    },
}


async def test_sub_path_expr_sees_downward_api_values(tmp_path: Path) -> None:
    clock = FakeClock()
    volumes = ReconcilingVolumeManager(tmp_path, clock=clock, may_mount=False)
    async with KubeletEnv(clock=clock, root_dir=tmp_path, volume_manager=volumes) as env:
        env.add_pod(POD)
        await env.wait_for(lambda: env.phase("web-0") == "Running")
        (call,) = env.runtime.calls_to("create_container")
        # The volume's mount, then the kubelet's own (/etc/hosts, termination log).
        mount, *kubelets = call.args[1].mounts
    assert [m.container_path for m in kubelets] == ["/etc/hosts", "/dev/termination-log"]
    empty_dir = tmp_path / "pods/u-web-0/volumes/kubernetes.io~empty-dir/logs"
    assert mount.container_path == "/var/log/app"
    assert Path(mount.host_path) == empty_dir / "shop" / "web-0"
    assert (empty_dir / "shop" / "web-0").is_dir()


def test_sub_path_expr_expansion_rules() -> None:
    env = {"POD_NAME": "web-0", "EMPTY": ""}
    assert expand_sub_path_expr("logs/$(POD_NAME)/$$(X)", env, "f") == "logs/web-0/$(X)"
    # Unlike in commands, an undefined or empty variable is an error, naming them all.
    with pytest.raises(ValidationError) as err:
        expand_sub_path_expr("$(NOPE)/$(EMPTY)", env, "spec.containers[0].volumeMounts[0]")
    assert [str(e) for e in err.value.errors] == [
        "spec.containers[0].volumeMounts[0]: missing value for EMPTY, NOPE"
    ]
