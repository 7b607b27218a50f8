"""What the kubelet does to a pod read from a file or URL before running it."""

from __future__ import annotations

from typing import Any

import attrs

from kubelet_kit.api import Pod
from kubelet_kit.config.interfaces import CONFIG_HASH_ANNOTATION, CONFIG_SOURCE_ANNOTATION

__all__ = ["static_pod_defaults"]

# Static pods tolerate every NoExecute taint, so the node's own taints never evict them.
_TOLERATE_NO_EXECUTE: dict[str, Any] = {"operator": "Exists", "effect": "NoExecute"}


def static_pod_defaults(pod: Pod, *, node_name: str, source: str) -> Pod:
    """Apply the kubelet's static-pod defaults (``config/common.go`` applyDefaults).

    The name gets ``-<nodeName>`` appended (so the same manifest on two nodes gives
    two pods), ``spec.nodeName`` is set, the pod tolerates all NoExecute taints,
    and the annotations ``kubernetes.io/config.hash`` (the uid) and
    ``kubernetes.io/config.source`` are added. The uid itself was derived from the
    content and source by the loader.

    Args:
        pod: The pod as loaded (with its uid).
        node_name: This node's name ("" leaves the name unchanged).
        source: ``file`` or ``http``.
    """
    meta = pod.metadata
    name = f"{meta.name}-{node_name}" if node_name else meta.name
    annotations = dict(meta.annotations)
    annotations[CONFIG_HASH_ANNOTATION] = meta.uid
    annotations[CONFIG_SOURCE_ANNOTATION] = source
    tolerations = pod.spec.tolerations
    if _TOLERATE_NO_EXECUTE not in [dict(t) for t in tolerations]:
        tolerations = (*tolerations, dict(_TOLERATE_NO_EXECUTE))
    return attrs.evolve(
        pod,
        metadata=attrs.evolve(meta, name=name, annotations=annotations),
        spec=attrs.evolve(
            pod.spec, node_name=node_name or pod.spec.node_name, tolerations=tolerations
        ),
    )
