"""The one log line per pod transition an agent prints (``pod default/web: Running``)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from kubelet_kit.api import Pod, PodStatus

__all__ = ["describe_status", "log_transitions", "pod_name"]

log = logging.getLogger("kubelet_kit")


def pod_name(pod: Pod) -> str:
    """``namespace/name``, as the kubelet's log lines name a pod."""
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


def describe_status(status: PodStatus) -> str:
    """One readable line: phase, then each container that is not simply running."""
    parts = [status.phase or "Pending"]
    if status.reason:
        parts.append(f"({status.reason})")
    regular = {cs.name for cs in status.container_statuses}
    for cs in (*status.init_container_statuses, *status.container_statuses):
        if cs.state.waiting is not None and cs.state.waiting.reason:
            parts.append(f"{cs.name}={cs.state.waiting.reason}")
        elif cs.state.terminated is not None:
            parts.append(
                f"{cs.name}={cs.state.terminated.reason or 'Terminated'}"
                f"({cs.state.terminated.exit_code})"
            )
        elif cs.state.running is not None:
            # Readiness is news for app containers; an init container is never "ready".
            unready = cs.name in regular and not cs.ready
            parts.append(f"{cs.name}=Running{'(not ready)' if unready else ''}")
        if cs.restart_count:
            parts.append(f"restarts={cs.restart_count}")
    return " ".join(parts)


async def log_transitions(statuses: AsyncIterator[tuple[Pod, PodStatus]]) -> None:
    """Log a line for each pod whose description changed; runs until cancelled."""
    last: dict[str, str] = {}
    async for pod, status in statuses:
        line = describe_status(status)
        uid = pod.metadata.uid
        if last.get(uid) != line:
            last[uid] = line
            log.info("pod %s: %s", pod_name(pod), line)
