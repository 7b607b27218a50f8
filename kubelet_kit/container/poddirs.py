"""Where a pod's files live on the node: ``<root_dir>/pods/<uid>``.

The kubelet keeps one directory per pod under its root directory
(``getPodDir``): the pod's volumes (``volumes/``, ``volume-subpaths/``), the
``/etc/hosts`` it manages for the pod (``etc-hosts``) and one directory per
container holding the containers' termination-message files
(``containers/<name>/``). Several subsystems write there (the volume manager,
the pod sync), so the layout is named once, here.

Each place comes two ways: as a :class:`~pathlib.Path` (:func:`pod_dir`,
:func:`pod_container_dir`) and as the same path's string (:func:`pod_dir_str`,
:func:`pod_container_dir_str`), for the per-container file work that goes
straight to ``os`` calls and need not parse a Path for every new pod.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Final

__all__ = [
    "ETC_HOSTS_FILE",
    "POD_CONTAINERS_DIR",
    "pod_container_dir",
    "pod_container_dir_str",
    "pod_dir",
    "pod_dir_str",
]

#: The pod's kubelet-managed hosts file, inside the pod directory.
ETC_HOSTS_FILE: Final = "etc-hosts"
#: The directory of per-container files, inside the pod directory.
POD_CONTAINERS_DIR: Final = "containers"
# The directory of the pods' directories, inside the root directory.
_PODS_DIR: Final = "pods"


def pod_dir(root_dir: str | os.PathLike[str], uid: str) -> Path:
    """``<root_dir>/pods/<uid>``, the pod's directory (the kubelet's ``getPodDir``)."""
    return _pod_dir(os.fspath(root_dir), uid)


def pod_container_dir(root_dir: str | os.PathLike[str], uid: str, container_name: str) -> Path:
    """``<root_dir>/pods/<uid>/containers/<name>`` (the kubelet's ``getPodContainerDir``)."""
    return _pod_container_dir(os.fspath(root_dir), uid, container_name)


def pod_dir_str(root_dir: str | os.PathLike[str], uid: str) -> str:
    """:func:`pod_dir` as a string: ``str(pod_dir(root_dir, uid))``."""
    return _below(os.fspath(root_dir), _PODS_DIR, uid)


def pod_container_dir_str(root_dir: str | os.PathLike[str], uid: str, container_name: str) -> str:
    """:func:`pod_container_dir` as a string: ``str(pod_container_dir(...))``."""
    return _below(os.fspath(root_dir), _PODS_DIR, uid, POD_CONTAINERS_DIR, container_name)


# Each container start asks for both, and a Path costs microseconds to parse: the
# few live pods' paths (immutable values) are kept. Built from the strings, so
# the layout is spelt once (a Path parses its own string back to itself).
@functools.lru_cache(maxsize=1024)
def _pod_dir(root_dir: str, uid: str) -> Path:
    return Path(_below(root_dir, _PODS_DIR, uid))


@functools.lru_cache(maxsize=2048)
def _pod_container_dir(root_dir: str, uid: str, container_name: str) -> Path:
    return Path(_below(root_dir, _PODS_DIR, uid, POD_CONTAINERS_DIR, container_name))


def _below(root_dir: str, *names: str) -> str:
    """``str(Path(root_dir, *names))``, without parsing a Path when it need not.

    ``root_dir`` is spelt as a Path spells it (its own small cache: a node has one
    root), then each name is appended after a slash. That is what the Path would
    give as long as every name is one plain component: a string with no slash
    that is neither empty nor ``"."`` (which a Path drops). A uid or a name of
    any other kind (never seen from a valid pod) takes the Path itself.
    """
    for name in names:
        if type(name) is not str or "/" in name or name in ("", "."):
            return str(Path(root_dir, *names))
    return _root_prefix(root_dir) + "/".join(names)


@functools.lru_cache(maxsize=64)
def _root_prefix(root_dir: str) -> str:
    """``root_dir`` as a Path spells it, ready for names to follow: "" for the
    current directory (a Path drops it: ``Path(".", "pods")`` is ``pods``),
    else with one slash at its end (``"/"`` and ``"//"`` have theirs)."""
    root = str(Path(root_dir))
    if root == ".":
        return ""
    return root if root.endswith("/") else root + "/"
