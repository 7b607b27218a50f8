"""Pod sources: static-pod directory, manifest URL, programmatic; and their merge."""

from kubelet_kit.config.file import FileSource
from kubelet_kit.config.http import HTTPSource
from kubelet_kit.config.interfaces import (
    CONFIG_HASH_ANNOTATION,
    CONFIG_MIRROR_ANNOTATION,
    CONFIG_SEEN_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
    PodOperation,
    PodSource,
    PodUpdate,
    SourceSnapshot,
)
from kubelet_kit.config.merge import PodStorage, differs_semantically
from kubelet_kit.config.podconfig import PodConfig
from kubelet_kit.config.programmatic import ProgrammaticSource
from kubelet_kit.config.static import static_pod_defaults

__all__ = [
    "CONFIG_HASH_ANNOTATION",
    "CONFIG_MIRROR_ANNOTATION",
    "CONFIG_SEEN_ANNOTATION",
    "CONFIG_SOURCE_ANNOTATION",
    "FileSource",
    "HTTPSource",
    "PodConfig",
    "PodOperation",
    "PodSource",
    "PodStorage",
    "PodUpdate",
    "ProgrammaticSource",
    "SourceSnapshot",
    "differs_semantically",
    "static_pod_defaults",
]
