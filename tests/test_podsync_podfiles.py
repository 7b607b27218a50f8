"""The kubelet's own files in a pod's directory: the managed /etc/hosts and the
termination-message files, and their removal with the pod.

Each test names the kubelet function (1.20, ``kubelet_pods.go`` or
``kuberuntime_container.go``) whose rule it checks.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kubelet_kit.api import Container, ObjectMeta, Pod, PodSpec, VolumeMount, load_pod
from kubelet_kit.container.interfaces import Mount
from kubelet_kit.podsync import podfiles
from kubelet_kit.podsync.configs import pod_hostname_and_domain

LOCAL = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)
ALIASES = (
    {"ip": "10.1.2.3", "hostnames": ["foo", "bar"]},
    {"ip": "10.1.2.4", "hostnames": ["baz"]},
)


def _pod(**spec: object) -> Pod:
    base: dict[str, object] = {"containers": (Container(name="app", image="busybox"),)}
    base.update(spec)
    return Pod(
        metadata=ObjectMeta(name="web", namespace="prod", uid="uid-1"),
        spec=PodSpec(**base),  # type: ignore[arg-type]
    )


# ------------------------------------------------------------------ contents


def test_managed_content_without_domain_lists_each_pod_ip() -> None:
    """managedHostsFileContent: header, localhost entries, ``IP\\thostname`` per pod IP."""
    content = podfiles.managed_hosts_content(["10.0.0.5", "fd00::5"], "web", "")
    assert content.decode() == (
        "# Kubernetes-managed hosts file.\n" + LOCAL + "10.0.0.5\tweb\n" + "fd00::5\tweb\n"
    )


def test_managed_content_with_domain_and_aliases() -> None:
    """managedHostsFileContent with a domain (``IP\\thost.domain\\thost``) and
    hostsEntriesFromHostAliases (a blank line, a comment, one line per alias)."""
    content = podfiles.managed_hosts_content(
        ["10.0.0.5"], "web", "sub.prod.svc.cluster.local", ALIASES
    )
    assert content.decode() == (
        "# Kubernetes-managed hosts file.\n"
        + LOCAL
        + "10.0.0.5\tweb.sub.prod.svc.cluster.local\tweb\n"
        + "\n# Entries added by HostAliases.\n"
        + "10.1.2.3\tfoo\tbar\n"
        + "10.1.2.4\tbaz\n"
    )


def test_node_content_is_the_node_file_under_its_own_header() -> None:
    """nodeHostsFileContent: the host-network header, the node's file as is,
    then the aliases; it never carries the non-host-network header."""
    node = b"127.0.0.1 localhost\n192.168.1.9 node-a\n"
    content = podfiles.node_hosts_content(node, ALIASES[:1])
    assert content == (
        b"# Kubernetes-managed hosts file (host network).\n"
        + node
        + b"\n# Entries added by HostAliases.\n10.1.2.3\tfoo\tbar\n"
    )
    assert b"# Kubernetes-managed hosts file." not in content


def test_no_aliases_no_block() -> None:
    """hostsEntriesFromHostAliases: nothing at all for no aliases."""
    assert podfiles.host_aliases_entries(()) == ""


def test_hostname_and_domain() -> None:
    """GeneratePodHostNameAndDomain: spec.hostname or the name (63 chars at most);
    ``<subdomain>.<namespace>.svc.<clusterDomain>`` only with a subdomain."""
    assert pod_hostname_and_domain(_pod(), "cluster.local") == ("web", "")
    pod = _pod(hostname="h1", subdomain="sub")
    assert pod_hostname_and_domain(pod, "cluster.local") == ("h1", "sub.prod.svc.cluster.local")
    # As upstream, the domain is made even without a cluster domain.
    assert pod_hostname_and_domain(pod, "") == ("h1", "sub.prod.svc.")
    long = Pod(metadata=ObjectMeta(name="a" * 62 + "-b", namespace="n", uid="u"), spec=PodSpec())
    assert pod_hostname_and_domain(long)[0] == "a" * 62


# --------------------------------------------------------------- the mount


def test_hosts_mount_needs_a_pod_ip_and_no_own_etc_hosts() -> None:
    """makeMounts: only once the pod has an IP, and not for a container that
    mounts something at exactly /etc/hosts."""
    plain = Container(name="a", image="busybox")
    own = Container(
        name="b", image="busybox", volume_mounts=(VolumeMount(name="h", mount_path="/etc/hosts"),)
    )
    near = Container(
        name="c", image="busybox", volume_mounts=(VolumeMount(name="h", mount_path="/etc/hosts.d"),)
    )
    assert podfiles.wants_hosts_mount(plain, ["10.0.0.5"])
    assert not podfiles.wants_hosts_mount(plain, [])
    assert not podfiles.wants_hosts_mount(own, ["10.0.0.5"])
    assert podfiles.wants_hosts_mount(near, ["10.0.0.5"])


def test_hosts_mount_writes_etc_hosts_0644_and_mounts_it_read_write(tmp_path: Path) -> None:
    """makeHostsMount/ensureHostsFile: ``<podDir>/etc-hosts``, mode 0644, mounted at
    /etc/hosts read-write with SELinux relabelling; rewritten for each container."""
    pod = _pod()
    old_umask = os.umask(0o077)
    try:
        mount = podfiles.hosts_mount(tmp_path, pod, pod.spec.containers[0], ["10.0.0.5"], "web", "")
    finally:
        os.umask(old_umask)
    path = tmp_path / "pods" / "uid-1" / "etc-hosts"
    assert mount == Mount(
        container_path="/etc/hosts", host_path=str(path), readonly=False, selinux_relabel=True
    )
    assert path.read_bytes() == podfiles.managed_hosts_content(["10.0.0.5"], "web", "")
    # The umask narrows the create mode as it does for the kubelet's WriteFile.
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    podfiles.hosts_mount(tmp_path, pod, pod.spec.containers[0], ["10.0.0.6"], "web", "")
    assert b"10.0.0.6\tweb\n" in path.read_bytes()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_host_network_pod_gets_the_node_file(tmp_path: Path) -> None:
    """ensureHostsFile: a host-network pod's file is the node's hosts file."""
    node = tmp_path / "node-hosts"
    node.write_text("192.168.1.9 node-a\n")
    pod = _pod(host_network=True, host_aliases=ALIASES[1:])
    mount = podfiles.hosts_mount(
        tmp_path, pod, pod.spec.containers[0], ["192.168.1.9"], "web", "", node_hosts_path=str(node)
    )
    assert mount is not None
    assert Path(mount.host_path).read_text() == (
        "# Kubernetes-managed hosts file (host network).\n192.168.1.9 node-a\n"
        "\n# Entries added by HostAliases.\n10.1.2.4\tbaz\n"
    )


def test_unreadable_node_file_is_an_error_with_go_text(tmp_path: Path) -> None:
    """ensureHostsFile: the node file's read error fails the container's config."""
    pod = _pod(host_network=True)
    missing = tmp_path / "nope"
    with pytest.raises(OSError) as info:
        podfiles.hosts_mount(
            tmp_path,
            pod,
            pod.spec.containers[0],
            ["1.2.3.4"],
            "web",
            "",
            node_hosts_path=str(missing),
        )
    assert info.value.strerror == f"open {missing}: no such file or directory"


def test_termination_file_is_new_empty_and_world_writable(tmp_path: Path) -> None:
    """kuberuntime makeMounts: a new empty file ``<podDir>/containers/<name>/<8 hex>``,
    chmod 0666 whatever the umask, mounted at terminationMessagePath; each
    container instance its own."""
    container = Container(
        name="app", image="busybox", termination_message_path="/dev/termination-log"
    )
    pod = _pod(containers=(container,))
    old_umask = os.umask(0o077)
    try:
        first = podfiles.termination_message_mount(tmp_path, pod, container)
        second = podfiles.termination_message_mount(tmp_path, pod, container)
    finally:
        os.umask(old_umask)
    assert first is not None and second is not None
    assert first.host_path != second.host_path
    path = Path(first.host_path)
    assert path.parent == tmp_path / "pods" / "uid-1" / "containers" / "app"
    assert len(path.name) == 8 and int(path.name, 16) >= 0
    assert path.read_bytes() == b""
    assert stat.S_IMODE(path.stat().st_mode) == 0o666
    assert first.container_path == "/dev/termination-log" and not first.readonly


def test_no_termination_path_no_file(tmp_path: Path) -> None:
    """kuberuntime makeMounts: nothing for an empty terminationMessagePath."""
    container = Container(name="app", image="busybox", termination_message_path="")
    assert podfiles.termination_message_mount(tmp_path, _pod(), container) is None
    assert not (tmp_path / "pods").exists()


def test_files_go_with_the_pod_but_volumes_are_left(tmp_path: Path) -> None:
    """The pod directory goes once the pod's files are removed and no volume is
    left (cleanupOrphanedPodDirs); a volume still there keeps it."""
    pod = load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": "prod", "uid": "uid-1"},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]},
        }
    )
    container = pod.spec.containers[0]
    podfiles.hosts_mount(tmp_path, pod, container, ["10.0.0.5"], "web", "")
    podfiles.termination_message_mount(tmp_path, pod, container)
    base = tmp_path / "pods" / pod.uid
    (base / "volumes").mkdir()
    podfiles.remove_pod_files(tmp_path, pod.uid)
    assert sorted(p.name for p in base.iterdir()) == ["volumes"]
    (base / "volumes").rmdir()
    podfiles.remove_pod_files(tmp_path, pod.uid)
    assert not base.exists()
    podfiles.remove_pod_files(tmp_path, pod.uid)  # idempotent


# ------------------------------------------------------------------ directories


def test_make_dir_says_whether_it_made_the_directory(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        target = tmp_path / "a" / "b" / "c"
        assert podfiles.make_dir(str(target), 0o750) is True
        assert podfiles.make_dir(str(target), 0o750) is False
    finally:
        os.umask(old)
    # The leaf has the mode asked for; the parents made on the way, the default
    # (what os.makedirs gives them).
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o755


def test_make_dir_refuses_what_is_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        podfiles.make_dir(str(tmp_path / "file"), 0o750)
    with pytest.raises(NotADirectoryError):
        podfiles.make_dir(str(tmp_path / "file" / "below"), 0o750)
