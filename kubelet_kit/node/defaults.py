"""Where an agent lives when nobody says: its node name, state and log directories."""

from __future__ import annotations

import os
import socket
from pathlib import Path

__all__ = ["default_node_name", "default_pod_logs_dir", "default_root_dir"]


def default_node_name() -> str:
    """The node name the kubelet would pick: the host name, lower-cased."""
    return socket.gethostname().lower()


def default_root_dir() -> Path:
    """Where the agent keeps its state: ``/var/lib/kubelet-kit`` as root, else
    ``$XDG_STATE_HOME/kubelet-kit`` (``~/.local/state/kubelet-kit``)."""
    if os.geteuid() == 0:
        return Path("/var/lib/kubelet-kit")
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "kubelet-kit"


def default_pod_logs_dir(root_dir: Path) -> Path:
    """Where container logs go: the kubelet's ``/var/log/pods`` as root (so log
    shippers find them), else ``root_dir/logs``."""
    return Path("/var/log/pods") if os.geteuid() == 0 else root_dir / "logs"
