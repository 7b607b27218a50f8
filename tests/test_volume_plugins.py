"""Volume plugins on the real file system: hostPath types, emptyDir, configMap,
secret, downwardAPI, projected, tmpfs mounts (as root), and subPath safety."""

from __future__ import annotations

import os
import socket
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.api import Pod, Quantity
from kubelet_kit.errors import PodSyncError, ValidationError
from kubelet_kit.volume import mounter, plugins
from kubelet_kit.volume.plugins import (
    PluginEnv,
    check_host_path,
    set_up,
    set_volume_ownership,
    tear_down,
)
from kubelet_kit.volume.sources import StaticConfigSource
from kubelet_kit.volume.subpath import resolve_sub_path

RequireReal = Callable[[bool, str], None]


def make_pod(volumes: list[dict[str, Any]], **spec: Any) -> Pod:
    return Pod.from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p",
                "namespace": "ns",
                "uid": "uid-1",
                "labels": {"app": "web", "tier": "front"},
                "annotations": {"note": 'say "hi"'},
            },
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox",
                        "resources": {
                            "limits": {"cpu": "250m", "memory": "64Mi"},
                            "requests": {"memory": "32Mi"},
                        },
                    }
                ],
                "volumes": volumes,
                **spec,
            },
        }
    )


@pytest.fixture
def source() -> StaticConfigSource:
    s = StaticConfigSource()
    s.set_config_map("ns", "cm", {"a": "alpha", "b": "beta", "nested": "n"})
    s.set_secret("ns", "sec", {"user": "admin", "pass": b"\x00s3cret"})
    return s


@pytest.fixture
def mounts_made() -> Iterator[list[Path]]:
    """Paths a test may have mounted on: whatever is still mounted there is unmounted."""
    made: list[Path] = []
    yield made
    for path in made:
        for m in mounter.mount_points_under(path):
            mounter.unmount(m, detach=True)


# ------------------------------------------------------------------ hostPath


def test_host_path_every_type(tmp_path: Path) -> None:
    d = tmp_path / "dir"
    d.mkdir()
    f = tmp_path / "file"
    f.write_text("x")
    sock_path = tmp_path / "sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    try:
        # Directory / File / Socket / CharDevice accept their own kind only.
        check_host_path(str(d), "Directory")
        check_host_path(str(f), "File")
        check_host_path(str(sock_path), "Socket")
        check_host_path("/dev/null", "CharDevice")
        check_host_path(str(tmp_path / "missing"), "")  # no type: no check at all
        with pytest.raises(
            PodSyncError, match=f"hostPath type check failed: {f} is not a directory, it's a File"
        ):
            check_host_path(str(f), "Directory")
        with pytest.raises(PodSyncError, match=f"{d} is not a file, it's a Directory"):
            check_host_path(str(d), "File")
        with pytest.raises(PodSyncError, match="is not a socket file, it's a File"):
            check_host_path(str(f), "Socket")
        with pytest.raises(PodSyncError, match="is not a character device, it's a Directory"):
            check_host_path(str(d), "CharDevice")
        with pytest.raises(PodSyncError, match="is not a block device, it's a CharDevice"):
            check_host_path("/dev/null", "BlockDevice")
        for t in ("Directory", "File", "Socket", "CharDevice", "BlockDevice"):
            with pytest.raises(PodSyncError, match=f"hostPath {tmp_path}/missing doesn't exist"):
                check_host_path(str(tmp_path / "missing"), t)
        with pytest.raises(PodSyncError, match="Bogus is an invalid volume type"):
            check_host_path(str(d), "Bogus")
    finally:
        sock.close()


def test_host_path_block_device(require_real: RequireReal) -> None:
    devices = (
        [
            f"/dev/{n}"
            for n in sorted(os.listdir("/dev"))
            if stat.S_ISBLK(os.stat(f"/dev/{n}").st_mode)
        ]
        if os.path.isdir("/dev")
        else []
    )
    require_real(bool(devices), "a block device in /dev")
    check_host_path(devices[0], "BlockDevice")
    with pytest.raises(PodSyncError, match="is not a character device, it's a BlockDevice"):
        check_host_path(devices[0], "CharDevice")


def test_host_path_create_modes(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        new_dir = tmp_path / "a" / "b"
        check_host_path(str(new_dir), "DirectoryOrCreate")
        assert new_dir.is_dir() and stat.S_IMODE(new_dir.stat().st_mode) == 0o755
        check_host_path(str(new_dir), "DirectoryOrCreate")  # idempotent
        new_file = tmp_path / "f"
        check_host_path(str(new_file), "FileOrCreate")
        assert new_file.is_file() and new_file.read_bytes() == b""
        assert stat.S_IMODE(new_file.stat().st_mode) == 0o644
        new_file.write_text("kept")
        check_host_path(str(new_file), "FileOrCreate")
        assert new_file.read_text() == "kept"
        # FileOrCreate does not make the parent; the OrCreate types still check the kind.
        with pytest.raises(PodSyncError, match="cannot create file"):
            check_host_path(str(tmp_path / "nodir" / "f"), "FileOrCreate")
        with pytest.raises(PodSyncError, match="is not a directory, it's a File"):
            check_host_path(str(new_file), "DirectoryOrCreate")
        with pytest.raises(PodSyncError, match="is not a file, it's a Directory"):
            check_host_path(str(new_dir), "FileOrCreate")
    finally:
        os.umask(old)


def test_host_path_set_up_names_the_volume_and_leaves_host_alone(tmp_path: Path) -> None:
    pod = make_pod([{"name": "host", "hostPath": {"path": str(tmp_path / "x"), "type": "File"}}])
    with pytest.raises(PodSyncError, match=r'volume "host": hostPath .* doesn\'t exist') as err:
        set_up(pod, pod.spec.volumes[0], tmp_path / "root", PluginEnv())
    assert err.value.reason == "FailedMount"
    (tmp_path / "x").write_text("data")
    path = set_up(pod, pod.spec.volumes[0], tmp_path / "root", PluginEnv())
    assert path == tmp_path / "x"
    assert not (tmp_path / "root").exists()  # no pod directory for a hostPath


# ------------------------------------------------------------------ emptyDir


def test_empty_dir_on_disk_layout_and_teardown(tmp_path: Path) -> None:
    pod = make_pod([{"name": "scratch", "emptyDir": {}}])
    path = set_up(pod, pod.spec.volumes[0], tmp_path, PluginEnv())
    assert path == tmp_path / "pods" / "uid-1" / "volumes" / "kubernetes.io~empty-dir" / "scratch"
    assert stat.S_IMODE(path.stat().st_mode) == 0o777
    (path / "sub").mkdir()
    (path / "sub" / "file").write_text("x")
    assert set_up(pod, pod.spec.volumes[0], tmp_path, PluginEnv()) == path
    assert (path / "sub" / "file").read_text() == "x"  # set-up again keeps the content
    tear_down(path)
    assert not path.exists()
    tear_down(path)  # idempotent


def test_unsupported_empty_dir_medium(tmp_path: Path) -> None:
    pod = make_pod([{"name": "huge", "emptyDir": {"medium": "HugePages"}}])
    with pytest.raises(PodSyncError, match="emptyDir medium 'HugePages' is not supported"):
        set_up(pod, pod.spec.volumes[0], tmp_path, PluginEnv())


def test_memory_volumes_refused_without_mount_privilege(tmp_path: Path) -> None:
    pod = make_pod(
        [
            {"name": "mem", "emptyDir": {"medium": "Memory"}},
            {"name": "sec", "secret": {"secretName": "sec"}},
        ]
    )
    src = StaticConfigSource()
    src.set_secret("ns", "sec", {"k": "v"})
    env = PluginEnv(config_source=src, may_mount=False)
    for vol in pod.spec.volumes:
        with pytest.raises(PodSyncError, match=f'volume "{vol.name}": must be kept in memory'):
            set_up(pod, vol, tmp_path, env)
    # The secret's data was not written anywhere on disk.
    assert not any(p.is_file() for p in tmp_path.rglob("*"))
    allowed = PluginEnv(config_source=src, may_mount=False, allow_secrets_on_disk=True)
    path = set_up(pod, pod.spec.volumes[1], tmp_path, allowed)
    assert (path / "k").read_text() == "v"


def test_memory_empty_dir_is_a_sized_tmpfs(
    tmp_path: Path, require_real: RequireReal, mounts_made: list[Path]
) -> None:
    require_real(mounter.can_mount(), "root (CAP_SYS_ADMIN) to mount tmpfs")
    pod = make_pod([{"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}}])
    vol = pod.spec.volumes[0]
    mounts_made.append(tmp_path)
    path = set_up(pod, vol, tmp_path, PluginEnv(may_mount=True))
    assert mounter.is_mount_point(path)
    st = os.statvfs(path)
    assert st.f_blocks * st.f_frsize == 8 * 1024 * 1024
    set_up(pod, vol, tmp_path, PluginEnv(may_mount=True))  # no second mount on top
    assert mounter.mount_points_under(path) == [str(path)]
    tear_down(path)
    assert not mounter.is_mount_point(path) and not path.exists()


def test_empty_dir_memory_size_takes_the_smallest() -> None:
    pod = make_pod([{"name": "m", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}])
    vol = pod.spec.volumes[0]
    assert plugins.empty_dir_memory_size(pod, vol, {}) == 64 * 1024 * 1024  # pod limit
    small = make_pod([{"name": "m", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}])
    assert plugins.empty_dir_memory_size(small, small.spec.volumes[0], {}) == 1024 * 1024
    unlimited = make_pod([{"name": "m", "emptyDir": {"medium": "Memory"}}])
    unlimited = Pod.from_dict(
        {
            **unlimited.to_dict(),
            "spec": {
                "containers": [{"name": "c", "image": "i"}],
                "volumes": [{"name": "m", "emptyDir": {}}],
            },
        }
    )
    assert plugins.empty_dir_memory_size(unlimited, unlimited.spec.volumes[0], {}) is None
    assert (
        plugins.empty_dir_memory_size(
            unlimited, unlimited.spec.volumes[0], {"memory": Quantity.parse("2Mi")}
        )
        == 2 * 1024 * 1024
    )


# ------------------------------------------------------------------ configMap / secret


def read_tree(path: Path) -> dict[str, tuple[bytes, int]]:
    """User-visible files (through the links) with their modes."""
    out = {}
    for name in os.listdir(path):
        if name.startswith(".."):
            continue
        for dirpath, _, files in os.walk(path / name, followlinks=True):
            for f in files:
                p = Path(dirpath) / f
                out[str(p.relative_to(path))] = (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
        if (path / name).is_file():
            out[name] = ((path / name).read_bytes(), stat.S_IMODE((path / name).stat().st_mode))
    return dict(sorted(out.items()))


def test_config_map_all_keys_items_and_modes(tmp_path: Path, source: StaticConfigSource) -> None:
    pod = make_pod(
        [
            {"name": "all", "configMap": {"name": "cm", "defaultMode": 0o600}},
            {
                "name": "some",
                "configMap": {
                    "name": "cm",
                    "items": [
                        {"key": "a", "path": "dir/first"},
                        {"key": "b", "path": "second", "mode": 0o400},
                    ],
                },
            },
        ]
    )
    env = PluginEnv(config_source=source)
    every = set_up(pod, pod.spec.volumes[0], tmp_path, env)
    assert every.parent.name == "kubernetes.io~configmap"
    assert read_tree(every) == {
        "a": (b"alpha", 0o600),
        "b": (b"beta", 0o600),
        "nested": (b"n", 0o600),
    }
    some = set_up(pod, pod.spec.volumes[1], tmp_path, env)
    assert read_tree(some) == {"dir/first": (b"alpha", 0o644), "second": (b"beta", 0o400)}


def test_config_map_missing_and_optional(tmp_path: Path, source: StaticConfigSource) -> None:
    env = PluginEnv(config_source=source)
    missing = make_pod([{"name": "v", "configMap": {"name": "nope"}}])
    with pytest.raises(PodSyncError, match='volume "v": configmap "ns/nope" not found'):
        set_up(missing, missing.spec.volumes[0], tmp_path, env)
    assert not (tmp_path / "pods").exists()  # nothing made for a failed source
    optional = make_pod([{"name": "v", "configMap": {"name": "nope", "optional": True}}])
    path = set_up(optional, optional.spec.volumes[0], tmp_path, env)
    assert read_tree(path) == {}
    bad_key = make_pod(
        [{"name": "v", "configMap": {"name": "cm", "items": [{"key": "zzz", "path": "z"}]}}]
    )
    with pytest.raises(PodSyncError, match="configmap references non-existent config key: zzz"):
        set_up(bad_key, bad_key.spec.volumes[0], tmp_path / "other", env)
    opt_key = make_pod(
        [
            {
                "name": "v",
                "configMap": {
                    "name": "cm",
                    "optional": True,
                    "items": [{"key": "zzz", "path": "z"}, {"key": "a", "path": "a"}],
                },
            }
        ]
    )
    assert read_tree(set_up(opt_key, opt_key.spec.volumes[0], tmp_path / "o", env)) == {
        "a": (b"alpha", 0o644)
    }
    escape = make_pod(
        [{"name": "v", "configMap": {"name": "cm", "items": [{"key": "a", "path": "../../evil"}]}}]
    )
    with pytest.raises(PodSyncError, match=r"must not contain '\.\.'"):
        set_up(escape, escape.spec.volumes[0], tmp_path / "e", env)


def test_secret_on_tmpfs_as_root(
    tmp_path: Path,
    source: StaticConfigSource,
    require_real: RequireReal,
    mounts_made: list[Path],
) -> None:
    require_real(mounter.can_mount(), "root (CAP_SYS_ADMIN) to mount tmpfs")
    mounts_made.append(tmp_path)
    pod = make_pod(
        [
            {
                "name": "creds",
                "secret": {
                    "secretName": "sec",
                    "items": [{"key": "pass", "path": "p", "mode": 0o400}],
                },
            }
        ]
    )
    path = set_up(
        pod, pod.spec.volumes[0], tmp_path, PluginEnv(config_source=source, may_mount=True)
    )
    assert path.parent.name == "kubernetes.io~secret"
    assert mounter.is_mount_point(path)
    with open("/proc/self/mountinfo") as f:
        line = next(ln for ln in f if ln.split()[4] == str(path))
    assert " - tmpfs " in line
    assert read_tree(path) == {"p": (b"\x00s3cret", 0o400)}
    tear_down(path)
    assert not path.exists()


def test_secret_missing_key(tmp_path: Path, source: StaticConfigSource) -> None:
    pod = make_pod(
        [{"name": "s", "secret": {"secretName": "sec", "items": [{"key": "nope", "path": "x"}]}}]
    )
    env = PluginEnv(config_source=source, allow_secrets_on_disk=True)
    with pytest.raises(
        PodSyncError, match='secret "ns/sec": references non-existent secret key: nope'
    ):
        set_up(pod, pod.spec.volumes[0], tmp_path, env)


# ------------------------------------------------------------------ downwardAPI / projected


def test_downward_api_fields_and_resources(tmp_path: Path) -> None:
    pod = make_pod(
        [
            {
                "name": "info",
                "downwardAPI": {
                    "defaultMode": 0o440,
                    "items": [
                        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                        {"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}},
                        {"path": "uid", "fieldRef": {"fieldPath": "metadata.uid"}},
                        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                        {
                            "path": "annotations",
                            "fieldRef": {"fieldPath": "metadata.annotations"},
                            "mode": 0o400,
                        },
                        {"path": "app", "fieldRef": {"fieldPath": "metadata.labels['app']"}},
                        {
                            "path": "cpu",
                            "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu"},
                        },
                        {
                            "path": "cpu_m",
                            "resourceFieldRef": {
                                "containerName": "c",
                                "resource": "limits.cpu",
                                "divisor": "1m",
                            },
                        },
                        {
                            "path": "mem_mi",
                            "resourceFieldRef": {
                                "containerName": "c",
                                "resource": "limits.memory",
                                "divisor": "1Mi",
                            },
                        },
                        {
                            "path": "req_mem",
                            "resourceFieldRef": {
                                "containerName": "c",
                                "resource": "requests.memory",
                            },
                        },
                        {
                            "path": "storage",
                            "resourceFieldRef": {
                                "containerName": "c",
                                "resource": "limits.ephemeral-storage",
                            },
                        },
                    ],
                },
            }
        ]
    )
    env = PluginEnv(node_allocatable={"ephemeral-storage": Quantity.parse("10Gi")})
    path = set_up(pod, pod.spec.volumes[0], tmp_path, env)
    assert path.parent.name == "kubernetes.io~downward-api"
    tree = read_tree(path)
    assert tree["name"] == (b"p", 0o440)
    assert tree["ns"][0] == b"ns" and tree["uid"][0] == b"uid-1"
    assert tree["labels"][0] == b'app="web"\ntier="front"'
    assert tree["annotations"] == (b'note="say \\"hi\\""', 0o400)
    assert tree["app"][0] == b"web"
    assert tree["cpu"][0] == b"1"  # 250m rounded up to whole cores
    assert tree["cpu_m"][0] == b"250"
    assert tree["mem_mi"][0] == b"64"
    assert tree["req_mem"][0] == str(32 * 1024 * 1024).encode()
    assert tree["storage"][0] == str(10 * 1024**3).encode()  # unset limit: node allocatable
    bad = make_pod(
        [
            {
                "name": "info",
                "downwardAPI": {
                    "items": [{"path": "ip", "fieldRef": {"fieldPath": "status.podIP"}}]
                },
            }
        ]
    )
    with pytest.raises(PodSyncError, match=r"items\[0\]\.fieldRef\.fieldPath: unsupported"):
        set_up(bad, bad.spec.volumes[0], tmp_path / "b", env)


def test_projected_combines_sources(tmp_path: Path, source: StaticConfigSource) -> None:
    pod = make_pod(
        [
            {
                "name": "all",
                "projected": {
                    "defaultMode": 0o640,
                    "sources": [
                        {"configMap": {"name": "cm", "items": [{"key": "a", "path": "config/a"}]}},
                        {
                            "secret": {
                                "name": "sec",
                                "items": [{"key": "user", "path": "secret/user", "mode": 0o400}],
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}
                                ]
                            }
                        },
                        {"configMap": {"name": "absent", "optional": True}},
                    ],
                },
            }
        ]
    )
    env = PluginEnv(config_source=source, allow_secrets_on_disk=True)
    path = set_up(pod, pod.spec.volumes[0], tmp_path, env)
    assert path.parent.name == "kubernetes.io~projected"
    assert read_tree(path) == {
        "config/a": (b"alpha", 0o640),
        "secret/user": (b"admin", 0o400),
        "labels": (b'app="web"\ntier="front"', 0o640),
    }
    sat = make_pod(
        [{"name": "tok", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]
    )
    with pytest.raises(PodSyncError, match=r"sources\[0\]\.serviceAccountToken"):
        set_up(sat, sat.spec.volumes[0], tmp_path / "t", env)


def test_unsupported_source_names_the_volume(tmp_path: Path) -> None:
    pod = make_pod([{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}])
    with pytest.raises(
        PodSyncError, match="volume \"data\": no volume plugin for source 'persistentVolumeClaim'"
    ):
        set_up(pod, pod.spec.volumes[0], tmp_path, PluginEnv())


def test_source_update_propagates_on_set_up_again(
    tmp_path: Path, source: StaticConfigSource
) -> None:
    pod = make_pod([{"name": "cfg", "configMap": {"name": "cm"}}])
    env = PluginEnv(config_source=source)
    path = set_up(pod, pod.spec.volumes[0], tmp_path, env)
    source.set_config_map("ns", "cm", {"a": "alpha2", "c": "gamma"})
    set_up(pod, pod.spec.volumes[0], tmp_path, env)
    assert read_tree(path) == {"a": (b"alpha2", 0o644), "c": (b"gamma", 0o644)}
    assert not (path / "b").exists() and not (path / "b").is_symlink()


# ------------------------------------------------------------------ subPath


def test_sub_path_resolution_and_escapes(tmp_path: Path) -> None:
    volume = tmp_path / "vol"
    volume.mkdir(mode=0o750)
    os.chmod(volume, 0o750)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("host file")
    (volume / "inner").mkdir()
    os.symlink("inner", volume / "good-link")  # stays inside: allowed
    os.symlink(str(outside), volume / "abs-escape")
    os.symlink("../outside", volume / "rel-escape")
    os.symlink("inner/../../outside", volume / "nested-escape")

    assert resolve_sub_path(volume, "inner") == volume / "inner"
    assert resolve_sub_path(volume, "good-link") == volume / "inner"
    made = resolve_sub_path(volume, "new/deeper")
    assert made == volume / "new" / "deeper" and made.is_dir()
    assert stat.S_IMODE(made.stat().st_mode) == 0o750  # the volume directory's mode
    for bad, message in [
        ("../outside", r"must not contain '\.\.'"),
        ("inner/../../outside", r"must not contain '\.\.'"),
        ("/etc", "must not be an absolute path"),
        ("abs-escape", "outside the volume"),
        ("rel-escape/secret", "outside the volume"),
        ("nested-escape", "outside the volume"),
    ]:
        with pytest.raises(ValidationError, match=message) as err:
            resolve_sub_path(volume, bad, field="spec.containers[0].volumeMounts[0].subPath")
        assert err.value.errors[0].path == "spec.containers[0].volumeMounts[0].subPath"
    with pytest.raises(ValidationError, match="does not exist"):
        resolve_sub_path(volume, "absent", create=False)
    assert not (outside / "new").exists()


def test_sub_path_walk_refuses_a_symlink_the_check_did_not_see(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A symlink swapped in after the resolution check is caught by the
    O_NOFOLLOW walk (simulated by a resolution that does not follow links)."""
    volume = tmp_path / "vol"
    volume.mkdir()
    (tmp_path / "outside").mkdir()
    os.symlink(str(tmp_path / "outside"), volume / "swapped")
    monkeypatch.setattr(os.path, "realpath", lambda p: os.path.normpath(os.path.abspath(p)))
    with pytest.raises(ValidationError, match='"swapped" changed into a symlink'):
        resolve_sub_path(volume, "swapped/deeper")
    assert not (tmp_path / "outside" / "deeper").exists()


def test_fs_group_owns_the_volume_files(
    tmp_path: Path, source: StaticConfigSource, require_real: RequireReal
) -> None:
    require_real(os.geteuid() == 0, "root to change a file's group")
    pod = make_pod(
        [
            {
                "name": "cfg",
                "configMap": {
                    "name": "cm",
                    "items": [{"key": "a", "path": "dir/a", "mode": 0o400}],
                },
            },
            {"name": "scratch", "emptyDir": {}},
            {
                "name": "host",
                "hostPath": {"path": str(tmp_path / "host"), "type": "DirectoryOrCreate"},
            },
        ],
        securityContext={"fsGroup": 4321},
    )
    env = PluginEnv(config_source=source)
    cfg = set_up(pod, pod.spec.volumes[0], tmp_path, env)
    target = cfg / "dir" / "a"
    st = target.stat()
    assert (st.st_gid, stat.S_IMODE(st.st_mode)) == (4321, 0o440)  # group may read
    d = (cfg / "dir").stat()
    assert d.st_gid == 4321 and d.st_mode & stat.S_ISGID
    scratch = set_up(pod, pod.spec.volumes[1], tmp_path, env)
    s = scratch.stat()
    assert s.st_gid == 4321 and s.st_mode & stat.S_ISGID and stat.S_IMODE(s.st_mode) & 0o070
    host = set_up(pod, pod.spec.volumes[2], tmp_path, env)
    assert host.stat().st_gid != 4321  # hostPath is the host's: untouched


def test_fs_group_never_follows_a_symlink_swapped_in(
    tmp_path: Path, require_real: RequireReal
) -> None:
    # The workload writes into its emptyDir; a file it swaps for a symlink to a
    # host file while the agent walks the volume must not hand that host file to
    # the pod's group.
    require_real(os.geteuid() == 0, "root to change a file's group")
    volume = tmp_path / "volume"
    volume.mkdir()
    secret = tmp_path / "host-secret"
    secret.write_text("host only\n")
    secret.chmod(0o600)
    for i in range(200):
        (volume / f"f{i}").write_text("x")
    stop = threading.Event()

    def swap() -> None:
        victim, spare = volume / "f7", volume / "f7.tmp"
        while not stop.is_set():
            spare.symlink_to(secret)
            os.rename(spare, victim)  # f7 is a symlink to the host file
            spare.write_text("x")
            os.rename(spare, victim)  # f7 is a plain file again

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        for _ in range(200):
            set_volume_ownership(volume, 4321, read_only=False)
    finally:
        stop.set()
        swapper.join()
    st = secret.stat()
    assert (st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0o600)
