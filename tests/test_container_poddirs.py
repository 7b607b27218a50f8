"""The pod directory layout (the kubelet's ``getPodDir`` / ``getPodContainerDir``):
the Path and the string forms name the same place, whatever the root is spelt as."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet_kit.container import poddirs

ROOTS = ["/var/lib/kubelet", "/var/lib/kubelet/", "//srv", "/", "///", "rel", "./rel/", "a//b/./c"]
ROOTS += ["", ".", "..", "/x/../y"]
UIDS = ["uid-1", "6f1c0d3e-2a44-4bb0-9a57-5b8b3f6c2d11", "..", ".", "", "a/b", "/abs", "a//b/"]


@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("uid", UIDS)
def test_strings_are_the_paths_spelt_out(root: str, uid: str) -> None:
    """pod_dir_str is str(Path(root, "pods", uid)) (a Path's own normalising
    included), and pod_dir the Path of it; likewise for a container's directory."""
    assert poddirs.pod_dir_str(root, uid) == str(Path(root, "pods", uid))
    assert poddirs.pod_dir(root, uid) == Path(root, "pods", uid)
    for name in ("app", "..", "", "x/y"):
        expected = Path(root, "pods", uid, "containers", name)
        assert poddirs.pod_container_dir_str(root, uid, name) == str(expected)
        assert poddirs.pod_container_dir(root, uid, name) == expected


def test_path_like_root() -> None:
    root = Path("/var/lib/kubelet")
    assert poddirs.pod_dir_str(root, "u") == "/var/lib/kubelet/pods/u"
    assert (
        poddirs.pod_container_dir_str(root, "u", "app") == "/var/lib/kubelet/pods/u/containers/app"
    )
    assert poddirs.pod_dir(root, "u") == Path("/var/lib/kubelet/pods/u")


def test_a_bytes_root_is_refused_as_a_path_refuses_it() -> None:
    with pytest.raises(TypeError):
        Path(b"/var", "pods", "u")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        poddirs.pod_dir_str(b"/var", "u")  # type: ignore[arg-type]
