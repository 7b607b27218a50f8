"""Where a pod's files live on the node: ``<root_dir>/pods/<uid>``.

The kubelet keeps one directory per pod under its root directory
(``getPodDir``): the pod's volumes (``volumes/``, ``volume-subpaths/``), the
``/etc/hosts`` it manages for the pod (``etc-hosts``) and one directory per
container holding the containers' termination-message files
(``containers/<name>/``). Several subsystems write there (the volume manager,
the pod sync), so the layout is named once, here.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Final

__all__ = ["ETC_HOSTS_FILE", "POD_CONTAINERS_DIR", "pod_container_dir", "pod_dir"]

#: The pod's kubelet-managed hosts file, inside the pod directory.
ETC_HOSTS_FILE: Final = "etc-hosts"
#: The directory of per-container files, inside the pod directory.
POD_CONTAINERS_DIR: Final = "containers"


def pod_dir(root_dir: str | os.PathLike[str], uid: str) -> Path:
    """``<root_dir>/pods/<uid>``, the pod's directory (the kubelet's ``getPodDir``)."""
    return _pod_dir(os.fspath(root_dir), uid)


def pod_container_dir(root_dir: str | os.PathLike[str], uid: str, container_name: str) -> Path:
    """``<root_dir>/pods/<uid>/containers/<name>`` (the kubelet's ``getPodContainerDir``)."""
    return _pod_container_dir(os.fspath(root_dir), uid, container_name)


# Each container start asks for both, and a Path costs microseconds to parse: the
# few live pods' paths (immutable values) are kept.
@functools.lru_cache(maxsize=1024)
def _pod_dir(root_dir: str, uid: str) -> Path:
    return Path(root_dir, "pods", uid)


@functools.lru_cache(maxsize=2048)
def _pod_container_dir(root_dir: str, uid: str, container_name: str) -> Path:
    return Path(root_dir, "pods", uid, POD_CONTAINERS_DIR, container_name)
