"""Pod sources and the updates they produce (the kubelet's ``pkg/kubelet/config``).

Every source (a static-pod directory, a manifest URL, the API server, an embedding
agent's own code) yields *snapshots*: the full set of pods it wants, each time it
changes. :class:`kubelet_kit.config.PodConfig` diffs the snapshots into the
kubelet's incremental operations (ADD, UPDATE, DELETE, REMOVE, RECONCILE) for the
sync loop.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from kubelet_kit.api.podsource import (
    CONFIG_HASH_ANNOTATION,
    CONFIG_MIRROR_ANNOTATION,
    CONFIG_SEEN_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
)

if TYPE_CHECKING:
    from kubelet_kit.api import Pod

__all__ = [
    "CONFIG_HASH_ANNOTATION",
    "CONFIG_MIRROR_ANNOTATION",
    "CONFIG_SEEN_ANNOTATION",
    "CONFIG_SOURCE_ANNOTATION",
    "PodOperation",
    "PodSource",
    "PodUpdate",
    "SourceSnapshot",
]


class PodOperation(enum.Enum):
    """What a :class:`PodUpdate` asks of the agent (the kubelet's PodOperation)."""

    #: New pods to run.
    ADD = "ADD"
    #: Pods whose spec, labels or annotations changed.
    UPDATE = "UPDATE"
    #: Pods being deleted gracefully (a deletion timestamp was set).
    DELETE = "DELETE"
    #: Pods gone from their source: stop them now.
    REMOVE = "REMOVE"
    #: Pods whose status alone changed.
    RECONCILE = "RECONCILE"


@attrs.frozen
class PodUpdate:
    """One incremental change for the sync loop."""

    op: PodOperation
    pods: tuple[Pod, ...]
    source: str


@attrs.frozen
class SourceSnapshot:
    """Everything one source wants running now, and what it could not read.

    Attributes:
        pods: The valid pods, in a stable order.
        problems: One line per rejected manifest, naming the file (or URL) and the
            field path, e.g. ``web.yaml: spec.containers[0].image: Required value``.
    """

    pods: tuple[Pod, ...]
    problems: tuple[str, ...] = ()


@runtime_checkable
class PodSource(Protocol):
    """A source of pods.

    Attributes:
        name: The source's name as the kubelet's annotation ``kubernetes.io/
            config.source`` spells it (``file``, ``http``, ``api``) or your own.
    """

    name: str

    def snapshots(self) -> AsyncIterator[SourceSnapshot]:
        """Yield a snapshot whenever the set of pods changes (the first one as soon
        as the source has been read once). Runs until cancelled; a source that
        cannot be read yields nothing new and keeps its last pods. Single consumer."""
