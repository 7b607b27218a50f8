"""Merging source snapshots into incremental pod updates (pure, no I/O).

The kubelet's podStorage: per source, the pods last seen; a new snapshot is
compared with it pod by pod (by uid) and turned into REMOVE, ADD, UPDATE, DELETE
and RECONCILE updates, sent in that order.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable

import attrs

from kubelet_kit.api import Pod
from kubelet_kit.config.interfaces import (
    CONFIG_SEEN_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
    PodOperation,
    PodUpdate,
)

__all__ = ["PodStorage", "differs_semantically"]

_ORDER = (
    PodOperation.REMOVE,
    PodOperation.ADD,
    PodOperation.UPDATE,
    PodOperation.DELETE,
    PodOperation.RECONCILE,
)


def differs_semantically(old: Pod, new: Pod) -> bool:
    """Whether a change between two versions of a pod needs the pod re-synced:
    its spec, labels, annotations (other than the first-seen time), deletion
    timestamp or deletion grace period changed. Status alone does not count."""
    if old.spec != new.spec or old.metadata.labels != new.metadata.labels:
        return True
    if (old.metadata.deletion_timestamp, old.metadata.deletion_grace_period_seconds) != (
        new.metadata.deletion_timestamp,
        new.metadata.deletion_grace_period_seconds,
    ):
        return True
    a = {k: v for k, v in old.metadata.annotations.items() if k != CONFIG_SEEN_ANNOTATION}
    b = {k: v for k, v in new.metadata.annotations.items() if k != CONFIG_SEEN_ANNOTATION}
    return a != b


class PodStorage:
    """The pods of every source, and the merge of a new snapshot into them."""

    def __init__(self) -> None:
        self._by_source: dict[str, dict[str, Pod]] = {}

    def pods(self) -> list[Pod]:
        """Every pod of every source."""
        return [p for pods in self._by_source.values() for p in pods.values()]

    def source_pods(self, source: str) -> list[Pod]:
        """The pods of one source."""
        return list(self._by_source.get(source, {}).values())

    def merge(
        self, source: str, snapshot: Iterable[Pod], *, now: _dt.datetime
    ) -> tuple[list[PodUpdate], list[str]]:
        """Replace ``source``'s pods with ``snapshot``.

        Pods are stamped with the source annotation and, when first seen, the
        ``kubernetes.io/config.seen`` time. A pod whose namespace/name another pod
        (of any source) already uses under another uid is refused.

        Returns:
            The updates in the kubelet's order, and one problem line per refusal.
        """
        old = self._by_source.get(source, {})
        taken = {
            (p.metadata.namespace, p.metadata.name): uid
            for other, pods in self._by_source.items()
            if other != source
            for uid, p in pods.items()
        }
        new: dict[str, Pod] = {}
        problems: list[str] = []
        buckets: dict[PodOperation, list[Pod]] = {op: [] for op in _ORDER}
        for pod in snapshot:
            uid = pod.metadata.uid
            key = (pod.metadata.namespace, pod.metadata.name)
            if uid in new or taken.get(key, uid) != uid:
                problems.append(
                    f'{pod.source or source}: metadata.name: Duplicate value: "{key[0]}/{key[1]}"'
                )
                continue
            taken[key] = uid
            previous = old.get(uid)
            pod = _stamp(pod, source, previous, now)
            new[uid] = pod
            if previous is None:
                buckets[PodOperation.ADD].append(pod)
            elif differs_semantically(previous, pod):
                deleting = (
                    pod.metadata.deletion_timestamp is not None
                    and previous.metadata.deletion_timestamp is None
                )
                buckets[PodOperation.DELETE if deleting else PodOperation.UPDATE].append(pod)
            elif previous.status != pod.status:
                buckets[PodOperation.RECONCILE].append(pod)
        buckets[PodOperation.REMOVE] = [p for uid, p in old.items() if uid not in new]
        self._by_source[source] = new
        updates = [PodUpdate(op, tuple(buckets[op]), source) for op in _ORDER if buckets[op]]
        return updates, problems


def _stamp(pod: Pod, source: str, previous: Pod | None, now: _dt.datetime) -> Pod:
    annotations = dict(pod.metadata.annotations)
    annotations.setdefault(CONFIG_SOURCE_ANNOTATION, source)
    seen = previous.metadata.annotations.get(CONFIG_SEEN_ANNOTATION) if previous else None
    annotations[CONFIG_SEEN_ANNOTATION] = seen or _rfc3339_nano(now)
    if annotations == pod.metadata.annotations:
        return pod
    return attrs.evolve(pod, metadata=attrs.evolve(pod.metadata, annotations=annotations))


def _rfc3339_nano(t: _dt.datetime) -> str:
    """The kubelet's seen-time format, e.g. ``2026-01-01T00:00:00.123456000Z``."""
    return t.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
