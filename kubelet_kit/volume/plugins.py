"""Volume plugins on the kubelet's directory layout.

Each volume of a pod lives at
``<root_dir>/pods/<pod uid>/volumes/kubernetes.io~<plugin>/<volume name>``
(hostPath excepted: its directory is the host path itself). The plugins:

``kubernetes.io/empty-dir``
    A directory (mode 0777) on the agent's disk; ``medium: Memory`` mounts a tmpfs
    there, sized by the smallest of ``sizeLimit``, the pod's memory limit (when
    every container has one) and the node's allocatable memory (when known).
``kubernetes.io/host-path``
    The host path, checked (and created) per ``type``, with the kubelet's messages.
``kubernetes.io/configmap``, ``kubernetes.io/downward-api``
    Files written by the :class:`~kubelet_kit.volume.atomic_writer.AtomicWriter`
    into a directory on disk.
``kubernetes.io/secret``
    The same on a tmpfs, so secret data never reaches a disk. An agent that may
    not mount gets a clear error instead, unless the manager was told
    ``allow_secrets_on_disk``.
``kubernetes.io/projected``
    Secrets, configMaps and downward API files together; on a tmpfs when any
    secret is projected (same rule as secret volumes), else on disk.
    ``serviceAccountToken`` sources need a token issuer this package does not
    have, and are refused with an error naming the field.

The payload builders (:func:`config_map_payload`, :func:`secret_payload`,
:func:`downward_api_payload`, :func:`projected_payload`) and
:func:`check_host_path` are plain functions, usable on their own. Set-up and
tear-down block on file I/O and mounts: the manager runs them in a thread.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs

from kubelet_kit.api import (
    ConfigMapProjection,
    ConfigMapVolumeSource,
    DownwardAPIVolumeFile,
    KeyToPath,
    Pod,
    Quantity,
    SecretProjection,
    SecretVolumeSource,
    Volume,
)
from kubelet_kit.container.poddirs import pod_dir
from kubelet_kit.errors import PodSyncError
from kubelet_kit.volume import mounter
from kubelet_kit.volume.atomic_writer import AtomicWriter, FileProjection, PayloadError
from kubelet_kit.volume.sources import ConfigSource

__all__ = [
    "CONFIG_MAP",
    "DOWNWARD_API",
    "EMPTY_DIR",
    "FAILED_MOUNT",
    "HOST_PATH",
    "HOST_PATH_TYPES",
    "PROJECTED",
    "REFRESHED_PLUGINS",
    "SECRET",
    "PluginEnv",
    "check_host_path",
    "config_map_payload",
    "downward_api_payload",
    "empty_dir_memory_size",
    "ephemeral_volume_dirs",
    "host_file_type",
    "plugin_dir_name",
    "plugin_name",
    "projected_payload",
    "secret_payload",
    "set_up",
    "set_volume_ownership",
    "tear_down",
    "uses_tmpfs",
    "volume_path",
]

log = logging.getLogger(__name__)

EMPTY_DIR = "kubernetes.io/empty-dir"
HOST_PATH = "kubernetes.io/host-path"
CONFIG_MAP = "kubernetes.io/configmap"
SECRET = "kubernetes.io/secret"
DOWNWARD_API = "kubernetes.io/downward-api"
PROJECTED = "kubernetes.io/projected"

#: Plugins whose content follows its source: rewritten on every refresh.
REFRESHED_PLUGINS = frozenset({CONFIG_MAP, SECRET, DOWNWARD_API, PROJECTED})

#: The kubelet's event reason for a volume that could not be set up.
FAILED_MOUNT = "FailedMount"

#: ``hostPath.type`` values and what the check expects.
HOST_PATH_TYPES = (
    "",
    "DirectoryOrCreate",
    "Directory",
    "FileOrCreate",
    "File",
    "Socket",
    "CharDevice",
    "BlockDevice",
)

_KIND_TO_PLUGIN = {
    "emptyDir": EMPTY_DIR,
    "hostPath": HOST_PATH,
    "configMap": CONFIG_MAP,
    "secret": SECRET,
    "downwardAPI": DOWNWARD_API,
    "projected": PROJECTED,
}


def _fail(message: str) -> PodSyncError:
    return PodSyncError(FAILED_MOUNT, message)


def plugin_name(volume: Volume) -> str:
    """The kubelet's plugin name for ``volume`` (``kubernetes.io/configmap``, ...).

    Raises:
        PodSyncError: ``FailedMount`` for a source no plugin here handles (for
            example persistentVolumeClaim, csi, nfs), naming the volume.
    """
    kind = volume.kind
    if kind in _KIND_TO_PLUGIN:
        return _KIND_TO_PLUGIN[kind]
    raise _fail(
        f'volume "{volume.name}": no volume plugin for source {kind or "(none)"!r} '
        "(supported: emptyDir, hostPath, configMap, secret, downwardAPI, projected)"
    )


def plugin_dir_name(plugin: str) -> str:
    """``kubernetes.io/configmap`` -> ``kubernetes.io~configmap`` (the directory name)."""
    return plugin.replace("/", "~")


def volume_path(root_dir: Path, pod: Pod, volume: Volume) -> Path:
    """Where ``volume`` of ``pod`` lives on the host (for hostPath: the host path)."""
    plugin = plugin_name(volume)
    if plugin == HOST_PATH:
        assert volume.host_path is not None
        return Path(volume.host_path.path)
    return pod_dir(root_dir, pod.uid) / "volumes" / plugin_dir_name(plugin) / volume.name


def ephemeral_volume_dirs(root_dir: Path, pod: Pod) -> dict[str, str]:
    """The host directories of ``pod``'s volumes that use the node's disk under
    ``root_dir``, by volume name: what counts toward the pod's ephemeral storage
    (emptyDir on disk, configMap, downwardAPI). hostPath (the host's own files),
    memory-backed volumes and unsupported kinds are left out."""
    dirs: dict[str, str] = {}
    for volume in pod.spec.volumes:
        if volume.host_path is not None or uses_tmpfs(volume):
            continue
        try:
            dirs[volume.name] = str(volume_path(root_dir, pod, volume))
        except PodSyncError:
            continue  # a kind no plugin serves: it was never set up either
    return dirs


def uses_tmpfs(volume: Volume) -> bool:
    """Whether the volume's content must stay in memory (a tmpfs)."""
    if volume.empty_dir is not None:
        return volume.empty_dir.medium == "Memory"
    if volume.secret is not None:
        return True
    if volume.projected is not None:
        return any(
            s.secret is not None or s.service_account_token is not None
            for s in volume.projected.sources
        )
    return False


@attrs.frozen
class PluginEnv:
    """What the plugins need from the manager.

    Attributes:
        config_source: Source of ConfigMaps and Secrets (None: every lookup misses).
        may_mount: Whether tmpfs mounts may be made (root / CAP_SYS_ADMIN).
        allow_secrets_on_disk: Put memory-only volumes on disk when no tmpfs can be
            mounted, instead of failing.
        node_allocatable: The node's allocatable resources, for downward API
            limits a container leaves unset and for tmpfs sizes.
        now: Wall-clock time source (names the atomic writer's directories).
    """

    config_source: ConfigSource | None = None
    may_mount: bool = False
    allow_secrets_on_disk: bool = False
    node_allocatable: Mapping[str, Quantity] = attrs.field(factory=dict)
    now: Callable[[], float] | None = None


# ------------------------------------------------------------------ hostPath


def host_file_type(path: str | Path) -> str:
    """The kubelet's name for what is at ``path`` (following symlinks):
    ``Directory``, ``File``, ``Socket``, ``CharDevice``, ``BlockDevice``, or
    ``Unknown``. Raises OSError when nothing is there."""
    mode = os.stat(path).st_mode
    for test, name in (
        (stat.S_ISDIR, "Directory"),
        (stat.S_ISREG, "File"),
        (stat.S_ISSOCK, "Socket"),
        (stat.S_ISCHR, "CharDevice"),
        (stat.S_ISBLK, "BlockDevice"),
    ):
        if test(mode):
            return name
    return "Unknown"


_TYPE_WORDS = {
    "Directory": "directory",
    "File": "file",
    "Socket": "socket file",
    "CharDevice": "character device",
    "BlockDevice": "block device",
}


def check_host_path(path: str, type_: str) -> None:
    """Check (and for the ``*OrCreate`` types make) a hostPath, as the kubelet does.

    ``DirectoryOrCreate`` makes the directory (mode 0755, parents too);
    ``FileOrCreate`` makes an empty file (mode 0644) but not its parent. Blocks on
    file I/O; idempotent.

    Raises:
        PodSyncError: ``FailedMount`` with the kubelet's message (``hostPath X
            doesn't exist``, ``hostPath type check failed: X is not a directory,
            it's a File``, ``T is an invalid volume type``).
    """
    if type_ == "":
        return
    if type_ == "DirectoryOrCreate" and not os.path.exists(path):
        try:
            os.makedirs(path, mode=0o755, exist_ok=True)
        except OSError as exc:
            raise _fail(f"hostPath {path}: cannot create directory: {exc.strerror}") from None
        type_ = "Directory"
    elif type_ == "FileOrCreate" and not os.path.exists(path):
        try:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
            os.close(fd)
        except OSError as exc:
            raise _fail(f"hostPath {path}: cannot create file: {exc.strerror}") from None
        type_ = "File"
    elif type_ in ("DirectoryOrCreate", "FileOrCreate"):
        type_ = type_.removesuffix("OrCreate")
    if type_ not in _TYPE_WORDS:
        raise _fail(f"{type_} is an invalid volume type")
    if not os.path.exists(path):
        raise _fail(f"hostPath {path} doesn't exist")
    actual = host_file_type(path)
    if actual != type_:
        raise _fail(
            f"hostPath type check failed: {path} is not a {_TYPE_WORDS[type_]}, it's a {actual}"
        )


# ------------------------------------------------------------------ payloads


def _key_payload(
    kind: str,
    ref: str,
    data: Mapping[str, bytes] | None,
    items: Sequence[KeyToPath],
    default_mode: int,
    optional: bool,
) -> dict[str, FileProjection]:
    if data is None:
        if optional:
            return {}
        raise _fail(f'{kind} "{ref}" not found')
    if not items:
        return {k: FileProjection(v, default_mode) for k, v in data.items()}
    payload: dict[str, FileProjection] = {}
    for item in items:
        if item.key not in data:
            if optional:
                continue
            word = (
                "configmap references non-existent config key"
                if kind == "configmap"
                else ("references non-existent secret key")
            )
            raise _fail(f'{kind} "{ref}": {word}: {item.key}')
        mode = item.mode if item.mode is not None else default_mode
        payload[item.path] = FileProjection(data[item.key], mode)
    return payload


def config_map_payload(
    source: ConfigMapVolumeSource | ConfigMapProjection,
    namespace: str,
    data: Mapping[str, bytes] | None,
    default_mode: int,
) -> dict[str, FileProjection]:
    """The files of a configMap volume or projection: every key (or only
    ``items``, at their paths and modes), ``defaultMode`` otherwise.

    Raises:
        PodSyncError: ``FailedMount``: the ConfigMap or a listed key is missing and
            the source is not ``optional``.
    """
    return _key_payload(
        "configmap",
        f"{namespace}/{source.name}",
        data,
        source.items,
        default_mode,
        bool(source.optional),
    )


def secret_payload(
    source: SecretVolumeSource | SecretProjection,
    namespace: str,
    data: Mapping[str, bytes] | None,
    default_mode: int,
) -> dict[str, FileProjection]:
    """The files of a secret volume or projection; as :func:`config_map_payload`.

    Raises:
        PodSyncError: ``FailedMount``: the Secret or a listed key is missing and the
            source is not ``optional``.
    """
    name = source.secret_name if isinstance(source, SecretVolumeSource) else source.name
    return _key_payload(
        "secret", f"{namespace}/{name}", data, source.items, default_mode, bool(source.optional)
    )


def _format_map(values: Mapping[str, str]) -> str:
    # The kubelet's FormatMap: sorted key="quoted value" lines, no final newline.
    return "\n".join(f"{k}={json.dumps(values[k], ensure_ascii=False)}" for k in sorted(values))


def _field_value(pod: Pod, field_path: str, where: str) -> str:
    meta = pod.metadata
    simple = {
        "metadata.name": meta.name,
        "metadata.namespace": meta.namespace,
        "metadata.uid": meta.uid,
    }
    if field_path in simple:
        return simple[field_path]
    if field_path == "metadata.labels":
        return _format_map(meta.labels)
    if field_path == "metadata.annotations":
        return _format_map(meta.annotations)
    for prefix, values in (
        ("metadata.labels", meta.labels),
        ("metadata.annotations", meta.annotations),
    ):
        if field_path.startswith(prefix + "['") and field_path.endswith("']"):
            return values.get(field_path[len(prefix) + 2 : -2], "")
    raise _fail(f"{where}.fieldRef.fieldPath: unsupported fieldPath {field_path!r}")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _resource_value(
    pod: Pod, item: DownwardAPIVolumeFile, allocatable: Mapping[str, Quantity], where: str
) -> str:
    ref = item.resource_field_ref
    assert ref is not None
    container = next((c for c in pod.spec.all_containers() if c.name == ref.container_name), None)
    if container is None:
        raise _fail(
            f"{where}.resourceFieldRef.containerName: container {ref.container_name!r} "
            "not found in the pod"
        )
    section, _, resource = ref.resource.partition(".")
    if section not in ("limits", "requests") or (
        resource not in ("cpu", "memory", "ephemeral-storage")
        and not resource.startswith("hugepages-")
    ):
        raise _fail(
            f"{where}.resourceFieldRef.resource: unsupported container resource {ref.resource!r}"
        )
    values = container.resources.limits if section == "limits" else container.resources.requests
    quantity = values.get(resource)
    if quantity is None and section == "limits":
        # As the kubelet: an unset limit reads as the node's allocatable amount.
        quantity = allocatable.get(resource)
    if quantity is None:
        quantity = Quantity.parse("0")
    divisor = (
        ref.divisor
        if ref.divisor is not None and not ref.divisor.is_zero()
        else (Quantity.parse("1"))
    )
    if resource == "cpu":
        return str(_ceil_div(quantity.milli_value(), divisor.milli_value()))
    return str(_ceil_div(quantity.value(), divisor.value()))


def downward_api_payload(
    pod: Pod,
    items: Sequence[DownwardAPIVolumeFile],
    default_mode: int,
    *,
    allocatable: Mapping[str, Quantity] | None = None,
    field: str = "downwardAPI",
) -> dict[str, FileProjection]:
    """The files of a downwardAPI volume or projection.

    ``fieldRef`` supports ``metadata.name``, ``.namespace``, ``.uid``, ``.labels``,
    ``.annotations`` (as ``key="value"`` lines, sorted) and single
    ``metadata.labels['k']``/``metadata.annotations['k']``; ``resourceFieldRef``
    gives a container's limit or request divided by ``divisor`` and rounded up
    (CPU in millicores against the divisor's), an unset limit reading as the
    node's allocatable amount.

    Raises:
        PodSyncError: ``FailedMount`` naming the item's field.
    """
    payload: dict[str, FileProjection] = {}
    for i, item in enumerate(items):
        where = f"{field}.items[{i}]"
        if item.field_ref is not None:
            value = _field_value(pod, item.field_ref.field_path, where)
        elif item.resource_field_ref is not None:
            value = _resource_value(pod, item, allocatable or {}, where)
        else:
            raise _fail(f"{where}: one of fieldRef and resourceFieldRef is required")
        mode = item.mode if item.mode is not None else default_mode
        payload[item.path] = FileProjection(value.encode(), mode)
    return payload


def projected_payload(pod: Pod, volume: Volume, env: PluginEnv) -> dict[str, FileProjection]:
    """The files of a projected volume: every source's files together (a later
    source wins a path two of them share). Blocks on the config source.

    Raises:
        PodSyncError: ``FailedMount`` naming the source at fault.
    """
    assert volume.projected is not None
    mode = volume.projected.default_mode
    payload: dict[str, FileProjection] = {}
    for i, source in enumerate(volume.projected.sources):
        where = f'volume "{volume.name}": projected.sources[{i}]'
        if source.config_map is not None:
            data = _lookup(env, "configmap", pod.namespace, source.config_map.name)
            payload.update(config_map_payload(source.config_map, pod.namespace, data, mode))
        elif source.secret is not None:
            data = _lookup(env, "secret", pod.namespace, source.secret.name)
            payload.update(secret_payload(source.secret, pod.namespace, data, mode))
        elif source.downward_api is not None:
            payload.update(
                downward_api_payload(
                    pod,
                    source.downward_api.items,
                    mode,
                    allocatable=env.node_allocatable,
                    field=f"{where}.downwardAPI",
                )
            )
        elif source.service_account_token is not None:
            raise _fail(
                f"{where}.serviceAccountToken: no service account token issuer "
                "is available to this agent"
            )
    return payload


def _lookup(env: PluginEnv, kind: str, namespace: str, name: str) -> Mapping[str, bytes] | None:
    if env.config_source is None:
        return None
    if kind == "configmap":
        return env.config_source.get_config_map(namespace, name)
    return env.config_source.get_secret(namespace, name)


def _payload(pod: Pod, volume: Volume, env: PluginEnv) -> dict[str, FileProjection]:
    if volume.config_map is not None:
        src = volume.config_map
        data = _lookup(env, "configmap", pod.namespace, src.name)
        return config_map_payload(src, pod.namespace, data, src.default_mode)
    if volume.secret is not None:
        sec = volume.secret
        data = _lookup(env, "secret", pod.namespace, sec.secret_name)
        return secret_payload(sec, pod.namespace, data, sec.default_mode)
    if volume.downward_api is not None:
        return downward_api_payload(
            pod,
            volume.downward_api.items,
            volume.downward_api.default_mode,
            allocatable=env.node_allocatable,
            field=f'volume "{volume.name}": downwardAPI',
        )
    return projected_payload(pod, volume, env)


# ------------------------------------------------------------------ set-up / tear-down


def empty_dir_memory_size(
    pod: Pod, volume: Volume, allocatable: Mapping[str, Quantity]
) -> int | None:
    """Bytes for a memory-backed emptyDir: the smallest of its ``sizeLimit``, the
    pod's memory limit (when every container has one) and the node's allocatable
    memory; None when none is known (the tmpfs default then applies)."""
    sizes: list[int] = []
    ed = volume.empty_dir
    if ed is not None and ed.size_limit is not None and ed.size_limit.value() > 0:
        sizes.append(ed.size_limit.value())
    containers = list(pod.spec.containers)
    if containers and all("memory" in c.resources.limits for c in containers):
        sizes.append(sum(c.resources.limits["memory"].value() for c in containers))
    if "memory" in allocatable and allocatable["memory"].value() > 0:
        sizes.append(allocatable["memory"].value())
    return min(sizes) if sizes else None


def set_volume_ownership(path: Path, fs_group: int, read_only: bool) -> None:
    """Give a volume's files to the pod's ``fsGroup``, as the kubelet does: every
    file and directory gets group ``fs_group`` and group read (and write, unless
    ``read_only``) permission; directories also get group search and the setgid
    bit, so files created later belong to the group too. Symlinks are left alone.
    Blocks on file I/O.

    A volume's content may be the workload's, so the walk goes by directory file
    descriptors and opens each entry with ``O_NOFOLLOW`` before changing it: a
    file swapped for a symlink meanwhile is skipped, never followed to a host
    file.

    Raises:
        OSError: a change was refused.
    """
    mask = 0o440 if read_only else 0o660
    for _dirpath, dirnames, filenames, dir_fd in os.fwalk(path):
        for name in (".", *filenames, *dirnames):
            try:
                fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            except FileNotFoundError:
                continue  # removed since the listing
            try:
                st = os.fstat(fd)
                if stat.S_ISLNK(st.st_mode):
                    continue
                # An O_PATH descriptor takes no fchown/fchmod; its /proc link
                # names the very inode opened, whatever the name points to now.
                here = f"/proc/self/fd/{fd}"
                os.chown(here, -1, fs_group)
                extra = mask | (stat.S_ISGID | 0o110 if stat.S_ISDIR(st.st_mode) else 0)
                os.chmod(here, stat.S_IMODE(st.st_mode) | extra)
            finally:
                os.close(fd)


def _make_dir(path: Path, mode: int) -> None:
    # The pod's directories are the agent's own: 0750, as the kubelet makes them.
    path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
    path.mkdir(exist_ok=True)
    os.chmod(path, mode)


def _ensure_tmpfs(pod: Pod, volume: Volume, path: Path, env: PluginEnv, mode: int) -> bool:
    """Mount a tmpfs on ``path`` if none is there; False if it stays on disk."""
    if mounter.is_mount_point(path):
        return True
    if not env.may_mount:
        if env.allow_secrets_on_disk:
            log.warning(
                'volume "%s" of pod %s: memory-backed but kept on disk '
                "(no mount privilege; allowed by allow_secrets_on_disk)",
                volume.name,
                pod.uid,
            )
            return False
        raise _fail(
            f'volume "{volume.name}": must be kept in memory (a tmpfs) but this agent may '
            "not mount (it needs root or CAP_SYS_ADMIN); allow_secrets_on_disk=True puts it "
            "on disk instead"
        )
    size = (
        empty_dir_memory_size(pod, volume, env.node_allocatable)
        if (volume.empty_dir is not None)
        else None
    )
    try:
        mounter.mount_tmpfs(path, size, mode)
    except OSError as exc:
        raise _fail(f'volume "{volume.name}": {exc.strerror or exc}') from None
    return True


def set_up(pod: Pod, volume: Volume, root_dir: Path, env: PluginEnv) -> Path:
    """Make ``volume`` of ``pod`` ready (or refresh its content) and return its path.

    Blocks on file I/O, mounts and the config source. Idempotent: a second call
    refreshes projected content (unchanged content is not rewritten) and
    mounts nothing twice. With a pod ``fsGroup``, the volume's files are given
    to that group (:func:`set_volume_ownership`; not for hostPath).

    Raises:
        PodSyncError: ``FailedMount`` with a message naming the volume and cause.
    """
    plugin = plugin_name(volume)
    path = volume_path(root_dir, pod, volume)
    # hostPath volumes belong to the host: the kubelet applies no fsGroup to them.
    fs_group = pod.spec.security_context.fs_group
    if plugin == HOST_PATH:
        assert volume.host_path is not None
        try:
            check_host_path(volume.host_path.path, volume.host_path.type)
        except PodSyncError as exc:
            raise _fail(f'volume "{volume.name}": {exc.message}') from None
        return path
    try:
        if plugin == EMPTY_DIR:
            assert volume.empty_dir is not None
            if volume.empty_dir.medium not in ("", "Memory"):
                raise _fail(
                    f'volume "{volume.name}": emptyDir medium {volume.empty_dir.medium!r} is '
                    'not supported (supported: "" for disk, "Memory")'
                )
            _make_dir(path, 0o777)
            if uses_tmpfs(volume):
                _ensure_tmpfs(pod, volume, path, env, 0o777)
            if fs_group is not None:
                set_volume_ownership(path, fs_group, read_only=False)
            return path
        # Compute the payload before touching the directory: a missing source
        # leaves nothing half made.
        payload = _payload(pod, volume, env)
        _make_dir(path, 0o755)
        if uses_tmpfs(volume):
            _ensure_tmpfs(pod, volume, path, env, 0o755)
        writer = AtomicWriter(path, now=env.now) if env.now else AtomicWriter(path)
        if fs_group is None:
            writer.write(payload)
        else:
            group = fs_group  # API data volumes are read-only to the pod
            writer.write(payload, lambda d: set_volume_ownership(d, group, read_only=True))
    except PayloadError as exc:
        raise _fail(f'volume "{volume.name}": {exc}') from None
    except PodSyncError as exc:
        if exc.message.startswith(f'volume "{volume.name}"'):
            raise
        raise _fail(f'volume "{volume.name}": {exc.message}') from None
    except OSError as exc:
        raise _fail(f'volume "{volume.name}": {exc}') from None
    return path


def tear_down(path: Path) -> None:
    """Unmount whatever is mounted at or below a volume directory and delete it.

    Blocks on file I/O; idempotent (a missing directory is fine). Never call it on
    a hostPath: those belong to the host.

    Raises:
        OSError: a mount could not be removed (the directory is then kept, so no
            file beneath a live mount is deleted).
    """
    mounter.unmount_all_under(path)
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
