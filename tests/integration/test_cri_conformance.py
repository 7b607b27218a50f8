"""The Runtime conformance kit over the CRI: against a real containerd (the
control), through the project's CRIServer proxying it, and against
``kubelet-kit cri-server`` serving the fake and the host-process runtime."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from kubelet_kit.container import NamespaceOptions, PodSandboxConfig, PodSandboxMetadata
from kubelet_kit.cri import CRIRuntime, CRIServer
from kubelet_kit.testing.conformance import ConformanceReport, run_conformance

from .containerd import BUSYBOX_IMAGE, REGISTRY_HOST, SAME_IMAGE_REFS, USER_IMAGES, Containerd
from .cri_server_process import start_cri_server, stop_cri_server

pytestmark = pytest.mark.integration

#: Failures that are containerd's behaviour, not the client's, by check: a part of
#: the failure message. containerd records a container's start time after Start
#: returns, so a container that exits at once (``exit 3``) may show a finish time a
#: fraction of a millisecond before its start time.
KNOWN_QUIRKS: dict[str, str] = {
    "exit_codes_and_logs": "before started_at",
}
#: The images the image checks take: the test registry serves them to containerd,
#: and the served fake knows them by the same names.
IMAGES = {"same_image_refs": SAME_IMAGE_REFS, "user_images": USER_IMAGES}
#: Checks the host runtime has no images for: its images have no config (see
#: kubelet_kit.runtimes._host_images), so the kit is given none and they skip.
HOST_SKIPS = frozenset({"image_tags", "image_user"})
#: Checks the served fake declines, with a part of the reason it gives: its
#: containers cannot make mounts, so it refuses Bidirectional propagation.
FAKE_SKIPS: dict[str, str] = {
    "mount_propagation_bidirectional": "PROPAGATION_BIDIRECTIONAL is not offered by the fake",
}
#: Why each target skips port_mappings (a part of the reason), which needs a pod
#: network of its own: the containerd template puts sandboxes on the host's
#: network, the fake publishes no host ports, and the served host runtime (no CNI
#: networking) declines a mapping to another host port.
PORT_MAPPINGS_SKIPS = {
    "containerd": "the sandboxes share the host's network (sandbox_template)",
    "fake": "the fake runtime publishes no ports on the host",
    "host": "the sandbox shares the host's network",
}
#: The security checks each target skips, with a part of the reason: AppArmor
#: where the node has none (it is looked for inside a container); the host
#: runtime's processes share the host's PID and IPC namespaces (its sandbox status
#: says so) and it declines sandbox sysctls and seccomp profiles.
_NO_APPARMOR = (
    {"apparmor": "the node has no AppArmor"}
    if not Path("/sys/module/apparmor/parameters/enabled").is_file()
    else {}
)
SECURITY_SKIPS: dict[str, dict[str, str]] = {
    "containerd": _NO_APPARMOR,
    "fake": {"apparmor": "the node has no AppArmor"},
    "host": {
        **_NO_APPARMOR,
        "pod_namespaces": "the sandbox's status says host_network=True, host_pid=True",
        "sysctls": "the host runtime cannot set sandbox sysctls",
        "seccomp": "the host runtime has no seccomp profile to apply",
    },
}


def _assert_security_skips(report: ConformanceReport, target: str) -> None:
    for name, reason in SECURITY_SKIPS[target].items():
        result = report.result(name)
        assert result.status == "skipped" and reason in result.message, report.summary()


#: Checks that need root on the kit's side (it mounts on the host), which every
#: target here must pass rather than skip: containerd and the host runtime honour
#: every propagation (Bidirectional in a privileged container).
MOUNT_CHECKS = (
    "volumes",
    "mount_propagation_private",
    "mount_propagation_host_to_container",
    "mount_propagation_bidirectional",
)


def _template(containerd: Containerd) -> PodSandboxConfig:
    # No CNI configuration is installed: sandboxes share the host's network (the
    # kubelet leaves the hostname empty for those). A cgroup parent, as the kubelet
    # always gives one: containerd measures sandbox stats through it.
    return PodSandboxConfig(
        metadata=PodSandboxMetadata("template", "template", "template"),
        namespace_options=NamespaceOptions(host_network=True),
        cgroup_parent=f"{containerd.cgroup_parent}/conformance",
    )


async def _conformance(rt: CRIRuntime, containerd: Containerd) -> None:
    report = await run_conformance(
        rt,
        log_root=containerd.logs,
        image=BUSYBOX_IMAGE,
        missing_image=f"{REGISTRY_HOST}/no-such-image:0",
        sandbox_template=_template(containerd),
        timeout=30,
        **IMAGES,
    )
    unexpected = [r for r in report.failures if KNOWN_QUIRKS.get(r.name, "\0") not in r.message]
    assert not unexpected, report.summary()
    # containerd 1.6 has no GetContainerEvents: the one optional check is skipped.
    assert report.result("events").status == "skipped", report.summary()
    assert report.result("port_mappings").status == "skipped", report.summary()
    assert PORT_MAPPINGS_SKIPS["containerd"] in report.result("port_mappings").message
    for name in MOUNT_CHECKS:
        assert report.result(name).status == "passed", report.summary()
    _assert_security_skips(report, "containerd")


async def test_conformance_on_containerd(containerd: Containerd) -> None:
    async with CRIRuntime(containerd.endpoint, timeout=60) as rt:
        await _conformance(rt, containerd)


async def test_conformance_through_cri_server_proxying_containerd(
    containerd: Containerd,
) -> None:
    sock_dir = Path(tempfile.mkdtemp(prefix="kkproxy-"))
    try:
        async with (
            CRIRuntime(containerd.endpoint, timeout=60) as inner,
            CRIServer(inner, sock_dir / "proxy.sock") as server,
            CRIRuntime(server.endpoint, timeout=60) as rt,
        ):
            await _conformance(rt, containerd)
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)


@pytest.mark.parametrize("runtime", ["fake", "host"])
async def test_conformance_through_kubelet_kit_cri_server(
    runtime: str, require_real: Callable[[bool, str], None]
) -> None:
    """The kit over the CRI against ``kubelet-kit cri-server`` serving the fake and
    the host-process runtime: every check passes through the wire protocol, as it
    does against containerd (the served fake pulls any image and knows the image
    checks' images; the host runtime runs the busybox of the host, and has no
    image configs for the image checks)."""
    require_real(os.geteuid() == 0, "root (the run_as check runs a process as another user)")
    base = Path(tempfile.mkdtemp(prefix=f"kk-kit-{runtime}-"))
    server, endpoint = await asyncio.to_thread(start_cri_server, runtime, base)
    try:
        async with CRIRuntime(endpoint, timeout=60) as rt:
            report = await run_conformance(
                rt,
                log_root=base / "logs",
                image=BUSYBOX_IMAGE,
                timeout=30,
                **(IMAGES if runtime == "fake" else {}),
            )
        assert report.ok, report.summary()
        # Both runtimes offer container events, stats and log reopening.
        skipped = {r.name for r in report.results if r.status == "skipped"}
        expected = HOST_SKIPS if runtime == "host" else set(FAKE_SKIPS)
        assert skipped == expected | {"port_mappings"} | set(SECURITY_SKIPS[runtime]), (
            report.summary()
        )
        _assert_security_skips(report, runtime)
        assert PORT_MAPPINGS_SKIPS[runtime] in report.result("port_mappings").message
        if runtime == "fake":
            for name, reason in FAKE_SKIPS.items():
                assert reason in report.result(name).message, report.summary()
    finally:
        await asyncio.to_thread(stop_cri_server, server)
        shutil.rmtree(base, ignore_errors=True)
