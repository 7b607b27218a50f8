"""Where a pod came from: the kubelet's config annotations, static and mirror pods.

The kubelet stamps every pod with ``kubernetes.io/config.source`` (``file``,
``http`` or ``api``). Pods from files and URLs are *static*: the node owns them,
they are never evicted and the API server only sees their *mirror* pods, which
carry ``kubernetes.io/config.mirror``.
"""

from __future__ import annotations

from typing import Final

from kubelet_kit.api.pod import Pod

__all__ = [
    "CONFIG_HASH_ANNOTATION",
    "CONFIG_MIRROR_ANNOTATION",
    "CONFIG_SEEN_ANNOTATION",
    "CONFIG_SOURCE_ANNOTATION",
    "is_mirror_pod",
    "is_static_pod",
]

CONFIG_SOURCE_ANNOTATION: Final = "kubernetes.io/config.source"
CONFIG_HASH_ANNOTATION: Final = "kubernetes.io/config.hash"
CONFIG_SEEN_ANNOTATION: Final = "kubernetes.io/config.seen"
CONFIG_MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"


def is_static_pod(pod: Pod) -> bool:
    """Whether the pod came from a non-API source (a file or an HTTP URL): its
    ``kubernetes.io/config.source`` annotation is present and is not ``api``."""
    source = pod.metadata.annotations.get(CONFIG_SOURCE_ANNOTATION)
    return source is not None and source != "api"


def is_mirror_pod(pod: Pod) -> bool:
    """Whether the pod is the API server's mirror of a static pod."""
    return CONFIG_MIRROR_ANNOTATION in pod.metadata.annotations
