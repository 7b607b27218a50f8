"""The kubelet's own files in a pod's directory: the managed /etc/hosts and the
termination-message files, and their removal with the pod.

Each test names the kubelet function (1.20, ``kubelet_pods.go`` or
``kuberuntime_container.go``) whose rule it checks.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.api import (
    Container,
    EmptyDirVolumeSource,
    ObjectMeta,
    Pod,
    PodSpec,
    Volume,
    VolumeMount,
    load_pod,
)
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


# ------------------------------------------- the same files, with or without hints
#
# The files of a pod's next container skip the calls that would fail, from what
# this process made before (podfiles._DirHints). Each scenario below runs twice,
# in two fresh roots: with the hints, and with every call going the ordinary way
# (open first, make the directories when it fails): the files, directories,
# modes, contents, mounts, errors and log lines match.


class _OrdinaryWay(podfiles._DirHints):
    """Hints that send every call the ordinary way: each pod's directory is
    "there", with nothing known below it, and nothing is learnt."""

    def get(self, key: tuple[str, str]) -> str:
        return podfiles._THERE

    def put(self, key: tuple[str, str], hint: str | set[str]) -> None:
        pass


HEX8 = re.compile(r"[0-9a-f]{8}$")  # a termination file's name
HEX8_IN = re.compile(r"/[0-9a-f]{8}\b")  # ... in a path in a text


def _tree(root: Path) -> list[tuple[str, int, bytes | None]]:
    """Every path below ``root`` (a termination file's random name as ``<hex>``),
    its mode and, for a file, its contents."""
    out = []
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if HEX8.search(path.name):
            rel = rel[:-8] + "<hex>"
        mode = path.lstat().st_mode
        out.append((rel, mode, path.read_bytes() if stat.S_ISREG(mode) else None))
    return sorted(out)


def _start(root: Path, pod: Pod, container: Container, ips: tuple[str, ...]) -> list[object]:
    """What _start does for a container: its hosts file, then its termination file;
    what came of each, with the root and random names taken out."""
    out: list[object] = []
    try:
        out.append(podfiles.hosts_mount(root, pod, container, ips, "web", ""))
    except OSError as exc:
        out.append(("error", exc.errno, exc.strerror))
    out.append(podfiles.termination_message_mount(root, pod, container))
    return [str(x).replace(str(root), "<root>") if x is not None else None for x in out]


def _containers(*names: str) -> tuple[Container, ...]:
    return tuple(
        Container(name=n, image="busybox", termination_message_path="/dev/termination-log")
        for n in names
    )


def _scenario_plain(root: Path) -> list[object]:
    pod = _pod(containers=_containers("app", "helper"))
    app, helper = pod.spec.containers
    return [
        *_start(root, pod, app, ("10.0.0.5",)),
        *_start(root, pod, helper, ("10.0.0.5",)),
        *_start(root, pod, app, ("10.0.0.5",)),  # a restart
    ]


def _scenario_volumes(root: Path) -> list[object]:
    pod = load_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": "prod", "uid": "uid-1"},
            "spec": {
                "containers": [{"name": "app", "image": "busybox"}, {"name": "b", "image": "x"}],
                "volumes": [{"name": "data", "emptyDir": {}}],
            },
        }
    )
    # The volume manager made the pod's directory (0750) for its volumes.
    (root / "pods" / pod.uid / "volumes").mkdir(mode=0o750, parents=True)
    out = []
    for container in (*pod.spec.containers, pod.spec.containers[0]):
        out += _start(root, pod, container, ("10.0.0.5",))
    return out


def _scenario_no_ip(root: Path) -> list[object]:
    # No hosts file: the termination file makes the pod's directory, as a parent.
    pod = _pod(containers=_containers("app", "helper"))
    return [
        x for c in (*pod.spec.containers, pod.spec.containers[1]) for x in _start(root, pod, c, ())
    ]


def _scenario_pod_dir_removed(root: Path) -> list[object]:
    # Something else removes the pod's directory between two containers.
    pod = _pod(containers=_containers("app", "helper"))
    app, helper = pod.spec.containers
    out = _start(root, pod, app, ("10.0.0.5",))
    shutil.rmtree(root / "pods" / "uid-1")
    out += _start(root, pod, helper, ("10.0.0.5",))
    shutil.rmtree(root / "pods" / "uid-1" / "containers")
    return out + _start(root, pod, app, ("10.0.0.5",))


def _scenario_made_elsewhere(root: Path) -> list[object]:
    # Something else makes a container's directory, or all of containers/.
    pod = _pod(containers=_containers("app", "helper", "third"))
    app, helper, third = pod.spec.containers
    out = _start(root, pod, app, ("10.0.0.5",))
    (root / "pods" / "uid-1" / "containers" / "helper").mkdir(mode=0o700)
    out += _start(root, pod, helper, ("10.0.0.5",))
    other = _pod(containers=_containers("app"))
    other = Pod(metadata=ObjectMeta(name="web", namespace="prod", uid="uid-2"), spec=other.spec)
    out += _start(root, other, other.spec.containers[0], ())
    (root / "pods" / "uid-3" / "containers" / "app").mkdir(mode=0o700, parents=True)
    third_pod = Pod(metadata=ObjectMeta(name="w", namespace="prod", uid="uid-3"), spec=pod.spec)
    out += _start(root, third_pod, third, ("10.0.0.5",))
    return out + _start(root, third_pod, app, ("10.0.0.5",))


def _scenario_not_directories(root: Path) -> list[object]:
    # What should be directories are files: errors and warnings, the same ones.
    pod = _pod(containers=_containers("app", "helper"))
    app, helper = pod.spec.containers
    out = _start(root, pod, app, ("10.0.0.5",))
    (root / "pods" / "uid-1" / "containers" / "helper").write_text("x")
    out += _start(root, pod, helper, ("10.0.0.5",))
    second = Pod(metadata=ObjectMeta(name="w", namespace="prod", uid="uid-2"), spec=pod.spec)
    podfiles.hosts_mount(root, second, app, ["10.0.0.5"], "web", "")  # the pod's directory
    (root / "pods" / "uid-2" / "containers").write_text("x")
    out += _start(root, second, app, ("10.0.0.5",))
    third = Pod(metadata=ObjectMeta(name="w", namespace="prod", uid="uid-3"), spec=pod.spec)
    (root / "pods" / "uid-3").write_text("x")
    return out + _start(root, third, app, ("10.0.0.5",))


def _scenario_removed_with_the_pod(root: Path) -> list[object]:
    # The same uid again after its files were removed (a static pod comes back).
    pod = _pod(containers=_containers("app", "helper"))
    app, helper = pod.spec.containers
    out = [*_start(root, pod, app, ("10.0.0.5",)), *_start(root, pod, helper, ("10.0.0.5",))]
    podfiles.remove_pod_files(root, pod.uid)
    return [*out, *_start(root, pod, helper, ("10.0.0.5",)), *_start(root, pod, app, ())]


@pytest.mark.parametrize(
    "scenario",
    [
        _scenario_plain,
        _scenario_volumes,
        _scenario_no_ip,
        _scenario_pod_dir_removed,
        _scenario_made_elsewhere,
        _scenario_not_directories,
        _scenario_removed_with_the_pod,
    ],
)
@pytest.mark.parametrize("pods_dir", [True, False], ids=["pods-dir", "no-pods-dir"])
def test_hints_change_nothing_but_the_calls(
    scenario: Callable[[Path], list[object]],
    pods_dir: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    results = []
    old_umask = os.umask(0o022)
    try:
        for hints in (podfiles._DirHints(4096), _OrdinaryWay(0)):
            monkeypatch.setattr(podfiles, "_hints", hints)
            root = tmp_path / type(hints).__name__
            root.mkdir()
            if pods_dir:  # as the volume manager makes it when it starts
                (root / "pods").mkdir()
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger=podfiles.__name__):
                outcome = scenario(root)
            logged = [
                HEX8_IN.sub("/<hex>", r.getMessage().replace(str(root), "<root>"))
                for r in caplog.records
            ]
            outcome = [HEX8_IN.sub("/<hex>", x) if isinstance(x, str) else x for x in outcome]
            results.append((outcome, logged, _tree(root)))
    finally:
        os.umask(old_umask)
    assert results[0] == results[1]


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The directories podfiles makes (below tmp_path) and the opens and mkdirs
    that fail, in order."""
    made: list[tuple[str, str]] = []
    real_open, real_mkdir = os.open, os.mkdir

    def logged_open(path: str, *args: Any, **kwargs: Any) -> int:
        try:
            return real_open(path, *args, **kwargs)
        except OSError as exc:
            made.append(("open failed", type(exc).__name__))
            raise

    def logged_mkdir(path: str, *args: Any, **kwargs: Any) -> None:
        try:
            real_mkdir(path, *args, **kwargs)
        except OSError as exc:
            made.append(("mkdir failed", type(exc).__name__))
            raise
        made.append(("mkdir", str(Path(path).relative_to(tmp_path))))

    (tmp_path / "pods").mkdir()
    monkeypatch.setattr("kubelet_kit.podsync.podfiles.os.open", logged_open)
    monkeypatch.setattr("kubelet_kit.podsync.podfiles.os.mkdir", logged_mkdir)
    return made


def _start_all(
    root: Path, pod: Pod, *containers: Container, ips: Sequence[str] = ("1.2.3.4",)
) -> None:
    for container in containers:
        podfiles.hosts_mount(root, pod, container, ips, "web", "")
        assert podfiles.termination_message_mount(root, pod, container)


def test_first_container_files_skip_the_failing_calls(
    tmp_path: Path, calls: list[tuple[str, str]]
) -> None:
    """A pod's first container: its directory, containers/ and the container's
    directory are made straight away, no open or mkdir fails first; the second
    container's directory likewise; a restart opens its file straight away."""
    pod = _pod(containers=_containers("app", "helper"))
    app, helper = pod.spec.containers
    _start_all(tmp_path, pod, app, helper, app, helper)
    assert calls == [
        ("mkdir", "pods/uid-1"),
        ("mkdir", "pods/uid-1/containers"),
        ("mkdir", "pods/uid-1/containers/app"),
        ("mkdir", "pods/uid-1/containers/helper"),
    ]
    # The same without a pod IP (no hosts file): only the first file fails first.
    calls.clear()
    other = Pod(metadata=ObjectMeta(name="o", namespace="p", uid="uid-2"), spec=pod.spec)
    _start_all(tmp_path, other, app, helper, app, ips=())
    assert calls == [
        ("open failed", "FileNotFoundError"),
        ("mkdir failed", "FileNotFoundError"),
        ("mkdir failed", "FileNotFoundError"),
        ("mkdir", "pods/uid-2"),
        ("mkdir", "pods/uid-2/containers"),
        ("mkdir", "pods/uid-2/containers/app"),
        ("mkdir", "pods/uid-2/containers/helper"),
    ]
    # And again once the pod's files were removed (the same uid back).
    podfiles.remove_pod_files(tmp_path, pod.uid)
    assert (str(tmp_path), pod.uid) not in podfiles._hints._pods
    calls.clear()
    _start_all(tmp_path, pod, helper, app)
    assert calls == [
        ("mkdir", "pods/uid-1"),
        ("mkdir", "pods/uid-1/containers"),
        ("mkdir", "pods/uid-1/containers/helper"),
        ("mkdir", "pods/uid-1/containers/app"),
    ]


def test_the_first_pod_makes_the_pods_directory(
    tmp_path: Path, calls: list[tuple[str, str]]
) -> None:
    """No pods/ yet: the first hosts file goes the ordinary way, the rest as usual."""
    (tmp_path / "pods").rmdir()
    pod = _pod(containers=_containers("app", "helper"))
    _start_all(tmp_path, pod, *pod.spec.containers)
    assert calls == [
        ("mkdir failed", "FileNotFoundError"),  # pods/uid-1, from the hint
        ("open failed", "FileNotFoundError"),
        ("mkdir failed", "FileNotFoundError"),
        ("mkdir", "pods"),
        ("mkdir", "pods/uid-1"),
        ("mkdir", "pods/uid-1/containers"),
        ("mkdir", "pods/uid-1/containers/app"),
        ("mkdir", "pods/uid-1/containers/helper"),
    ]


def test_a_hint_gone_stale_is_dropped(tmp_path: Path, calls: list[tuple[str, str]]) -> None:
    """Something else made containers/ after the pod's directory: the hint's mkdir
    fails once, then the pod's files go the ordinary way."""
    pod = _pod(containers=_containers("app", "helper"))
    app, helper = pod.spec.containers
    podfiles.hosts_mount(tmp_path, pod, app, ["1.2.3.4"], "web", "")
    (tmp_path / "pods" / "uid-1" / "containers").mkdir()
    calls.clear()
    _start_all(tmp_path, pod, app, helper)
    assert calls == [
        ("mkdir failed", "FileExistsError"),
        ("open failed", "FileNotFoundError"),
        ("mkdir", "pods/uid-1/containers/app"),
        ("open failed", "FileNotFoundError"),
        ("mkdir", "pods/uid-1/containers/helper"),
    ]


def test_a_pod_with_volumes_has_its_directory_already(
    tmp_path: Path, calls: list[tuple[str, str]]
) -> None:
    """The volume manager made the pod's directory: its hosts file is opened
    straight away; the first termination file finds no containers/ (the
    ordinary way), the next container's directory is made straight away."""
    spec = _pod(containers=_containers("app", "helper")).spec
    spec = PodSpec(
        containers=spec.containers, volumes=(Volume(name="data", empty_dir=EmptyDirVolumeSource()),)
    )
    pod = Pod(metadata=ObjectMeta(name="web", namespace="prod", uid="uid-1"), spec=spec)
    (tmp_path / "pods" / "uid-1" / "volumes").mkdir(parents=True)
    calls.clear()
    app, helper = pod.spec.containers
    _start_all(tmp_path, pod, app, helper, app, helper)
    assert calls == [
        ("open failed", "FileNotFoundError"),
        ("mkdir failed", "FileNotFoundError"),
        ("mkdir", "pods/uid-1/containers"),
        ("mkdir", "pods/uid-1/containers/app"),
        ("mkdir", "pods/uid-1/containers/helper"),
    ]


def test_an_agent_restarted_finds_the_directories_there(
    tmp_path: Path, calls: list[tuple[str, str]]
) -> None:
    """A pod this process did not make the directories of: one mkdir of the
    pod's directory fails (it is there), then the files are opened straight
    away, and a new container's directory is made the ordinary way."""
    pod = _pod(containers=_containers("app", "helper", "third"))
    app, helper, third = pod.spec.containers
    (tmp_path / "pods" / "uid-1" / "containers" / "helper").mkdir(parents=True)
    calls.clear()
    _start_all(tmp_path, pod, helper, app, helper)
    assert calls == [
        ("mkdir failed", "FileExistsError"),
        ("open failed", "FileNotFoundError"),
        ("mkdir", "pods/uid-1/containers/app"),
    ]
    calls.clear()
    _start_all(tmp_path, pod, third, app)
    assert calls == [
        ("open failed", "FileNotFoundError"),
        ("mkdir", "pods/uid-1/containers/third"),
    ]


def test_a_name_taken_fails_as_any_file_that_cannot_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The names are random (not secret): one already there is not overwritten
    (O_EXCL), the container gets no mount and the error is logged."""
    container = _containers("app")[0]
    pod = _pod(containers=(container,))
    monkeypatch.setattr(podfiles._names, "getrandbits", lambda bits: 0xAB)
    first = podfiles.termination_message_mount(tmp_path, pod, container)
    assert first is not None and first.host_path.endswith("/containers/app/000000ab")
    Path(first.host_path).write_text("kept")
    with caplog.at_level(logging.WARNING, logger=podfiles.__name__):
        assert podfiles.termination_message_mount(tmp_path, pod, container) is None
    assert Path(first.host_path).read_text() == "kept"
    assert caplog.messages == [
        f"pod uid-1: error on creating termination-log file {first.host_path}: "
        f"[Errno 17] File exists: '{first.host_path}'"
    ]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_draws_other_names() -> None:
    """The generator is seeded again in a child: parent and child, drawing next,
    do not both name their files alike (as both would without the reseed)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.write(write, podfiles._names.getrandbits(64).to_bytes(8, "big"))
        os._exit(0)
    os.close(write)
    child = int.from_bytes(os.read(read, 8), "big")
    os.close(read)
    os.waitpid(pid, 0)
    assert child != podfiles._names.getrandbits(64)


def test_make_dir_of_an_existing_directory_makes_nothing(tmp_path: Path) -> None:
    """_make_dirs counts what it made: the path, then each parent made on the way."""
    assert podfiles._make_dirs(str(tmp_path / "a" / "b" / "c"), 0o750) == 3
    assert podfiles._make_dirs(str(tmp_path / "a" / "b" / "d"), 0o750) == 1
    assert podfiles._make_dirs(str(tmp_path / "a" / "b"), 0o750) == 0
