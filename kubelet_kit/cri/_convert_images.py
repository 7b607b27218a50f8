"""Conversions of the image service's messages: images and filesystem usage.

An :class:`Image` as ``ListImages`` and ``ImageStatus`` answer it (its user as
``uid``, an ``Int64Value`` that is unset for no uid, or ``username``), and the
:class:`FilesystemUsage` of ``ImageFsInfo``.
"""

from __future__ import annotations

from kubelet_kit.container.interfaces import FilesystemUsage, Image
from kubelet_kit.cri._convert_values import Message, ns_to_seconds, seconds_to_ns
from kubelet_kit.cri.gen import api_pb2 as pb

# ------------------------------------------------------------------ images


def image_to_pb(image: Image) -> Message:
    """An :class:`Image` as ``runtime.v1.Image``."""
    msg = pb.Image(
        id=image.id,
        repo_tags=list(image.repo_tags),
        repo_digests=list(image.repo_digests),
        size=image.size,
        pinned=image.pinned,
        username=image.username,
    )
    if image.uid is not None:
        # Set as a message, so that uid 0 (root) is present, not unset.
        msg.uid.CopyFrom(pb.Int64Value(value=image.uid))
    return msg


def image_from_pb(msg: Message) -> Image:
    """A ``runtime.v1.Image`` as :class:`Image`."""
    return Image(
        id=msg.id,
        repo_tags=tuple(msg.repo_tags),
        repo_digests=tuple(msg.repo_digests),
        size=int(msg.size),
        pinned=msg.pinned,
        uid=int(msg.uid.value) if msg.HasField("uid") else None,
        username=msg.username,
    )


def filesystem_usage_to_pb(usage: FilesystemUsage) -> Message:
    """A :class:`FilesystemUsage` as ``runtime.v1.FilesystemUsage``."""
    msg = pb.FilesystemUsage(
        timestamp=seconds_to_ns(usage.timestamp),
        fs_id=pb.FilesystemIdentifier(mountpoint=usage.mountpoint),
    )
    if usage.used_bytes is not None:
        msg.used_bytes.value = usage.used_bytes
    if usage.inodes_used is not None:
        msg.inodes_used.value = usage.inodes_used
    return msg


def filesystem_usage_from_pb(msg: Message) -> FilesystemUsage:
    """A ``runtime.v1.FilesystemUsage`` as :class:`FilesystemUsage` (unset counts: None)."""
    return FilesystemUsage(
        mountpoint=msg.fs_id.mountpoint,
        used_bytes=int(msg.used_bytes.value) if msg.HasField("used_bytes") else None,
        inodes_used=int(msg.inodes_used.value) if msg.HasField("inodes_used") else None,
        timestamp=ns_to_seconds(msg.timestamp),
    )
