"""``kubelet-kit cri-server`` and :func:`serve_cri`: a runtime on a socket, v1 and v1alpha2."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import grpc.aio
import pytest

from kubelet_kit.cri import CRIRuntime
from kubelet_kit.cri.gen import api_pb2 as pb
from kubelet_kit.cri.gen import api_pb2_grpc as v1_grpc
from kubelet_kit.cri.gen import api_v1alpha2_pb2 as pb_v1alpha2
from kubelet_kit.cri.gen import api_v1alpha2_pb2_grpc as v1alpha2_grpc
from kubelet_kit.cri_server import load_runtime, serve_cri, socket_path_of
from kubelet_kit.errors import ConfigurationError
from kubelet_kit.runtimes.host import HostProcessRuntime
from kubelet_kit.testing import FakeRuntime

#: RPCs runtime.v1 has and v1alpha2 never had.
V1_ONLY = {
    "StreamPodSandboxes",
    "StreamContainers",
    "StreamContainerStats",
    "StreamPodSandboxStats",
    "StreamImages",
    "CheckpointContainer",
    "GetContainerEvents",
    "ListMetricDescriptors",
    "ListPodSandboxMetrics",
    "StreamPodSandboxMetrics",
    "RuntimeConfig",
    "UpdatePodSandboxResources",
}


def _methods(module: object, service: str) -> dict[str, object]:
    return dict(module.DESCRIPTOR.services_by_name[service].methods_by_name)  # type: ignore[attr-defined]


# ------------------------------------------------------------------ naming


def test_listen_takes_a_unix_socket_path() -> None:
    assert socket_path_of("unix:///run/x.sock") == Path("/run/x.sock")
    assert socket_path_of("/run/x.sock") == Path("/run/x.sock")
    for bad in ("tcp://127.0.0.1:1", "unix://relative.sock", "x.sock"):
        with pytest.raises(ConfigurationError, match=r"--listen: .* is not a unix socket"):
            socket_path_of(bad)


async def test_runtimes_by_name(tmp_path: Path) -> None:
    host = await load_runtime("host", root_dir=tmp_path / "host")
    assert isinstance(host, HostProcessRuntime)
    fake = await load_runtime("fake", root_dir=tmp_path / "fake")
    assert isinstance(fake, FakeRuntime)
    # A kubelet needs one image filesystem on a real path.
    [fs] = await fake.image_fs_info()
    assert fs.mountpoint == str(tmp_path / "fake") and (tmp_path / "fake").is_dir()


@pytest.fixture
def runtime_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "my_runtimes.py").write_text(
        textwrap.dedent(
            """
            from kubelet_kit.testing import FakeRuntime

            INSTANCE = FakeRuntime()

            def make():
                return FakeRuntime()

            async def make_async():
                return FakeRuntime()

            def not_a_runtime():
                return object()

            class Half:
                async def version(self): ...
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_runtimes"


async def test_runtimes_from_a_module(runtime_module: str) -> None:
    import my_runtimes  # type: ignore[import-not-found]

    assert await load_runtime(f"{runtime_module}:INSTANCE") is my_runtimes.INSTANCE
    for name in ("make", "make_async"):
        made = await load_runtime(f"{runtime_module}:{name}")
        assert isinstance(made, FakeRuntime) and made is not my_runtimes.INSTANCE


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("docker", r"--runtime: 'docker' is neither host nor fake nor MODULE:NAME"),
        ("no_such_module_here:make", r"--runtime: cannot import 'no_such_module_here'"),
        ("my_runtimes:absent", r"--runtime: 'my_runtimes' has no 'absent'"),
        (
            "my_runtimes:not_a_runtime",
            r"gave a object, which is not a Runtime \(missing: .*run_pod_sandbox",
        ),
        ("my_runtimes:Half", r"gave a Half, which is not a Runtime \(missing: [^)]*status"),
    ],
)
async def test_bad_runtime_names_are_errors_naming_the_flag(
    runtime_module: str, spec: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        await load_runtime(spec)


# ------------------------------------------------------------------ serving


def test_v1alpha2_declares_every_rpc_of_v1alpha2_over_the_v1_messages() -> None:
    for service in ("RuntimeService", "ImageService"):
        v1 = _methods(pb, service)
        old = _methods(pb_v1alpha2, service)
        assert set(old) == set(v1) - V1_ONLY
        for name, method in old.items():
            assert method.input_type is v1[name].input_type  # type: ignore[attr-defined]
            assert method.output_type is v1[name].output_type  # type: ignore[attr-defined]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[FakeRuntime, str]]:
    runtime = FakeRuntime(events=True, image_fs=str(tmp_path))
    endpoint = f"unix://{tmp_path}/cri.sock"
    stop, started = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve_cri(endpoint, runtime, stop=stop, started=started))
    await asyncio.wait_for(started.wait(), 10)
    yield runtime, endpoint
    stop.set()
    await asyncio.wait_for(task, 10)
    assert not (tmp_path / "cri.sock").exists()


async def test_both_versions_drive_one_runtime(served: tuple[FakeRuntime, str]) -> None:
    runtime, endpoint = served
    async with grpc.aio.insecure_channel(endpoint) as channel:
        old = v1alpha2_grpc.RuntimeServiceStub(channel)
        new = v1_grpc.RuntimeServiceStub(channel)
        # Each version answers Version as itself; the CRI version stays 0.1.0.
        for stub, api in ((old, "v1alpha2"), (new, "v1")):
            v = await stub.Version(pb.VersionRequest(version="0.1.0"))
            assert (v.version, v.runtime_name, v.runtime_api_version) == ("0.1.0", "fake", api)
        config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name="web", uid="u1", namespace="default", attempt=0)
        )
        made = await old.RunPodSandbox(pb.RunPodSandboxRequest(config=config))
        assert made.pod_sandbox_id
        listed = await new.ListPodSandbox(pb.ListPodSandboxRequest())
        assert [s.id for s in listed.items] == [made.pod_sandbox_id]
        status = await old.PodSandboxStatus(
            pb.PodSandboxStatusRequest(pod_sandbox_id=made.pod_sandbox_id)
        )
        assert status.status.state == pb.SANDBOX_READY
        images = v1alpha2_grpc.ImageServiceStub(channel)
        info = await images.ImageFsInfo(pb.ImageFsInfoRequest())
        assert len(info.image_filesystems) == 1
    assert [c.method for c in runtime.calls if c.method == "run_pod_sandbox"] == ["run_pod_sandbox"]


async def test_every_v1alpha2_rpc_is_served(served: tuple[FakeRuntime, str]) -> None:
    _, endpoint = served
    async with grpc.aio.insecure_channel(endpoint) as channel:
        for service in ("RuntimeService", "ImageService"):
            for name, method in _methods(pb_v1alpha2, service).items():
                request_cls = getattr(pb, method.input_type.name)  # type: ignore[attr-defined]
                response_cls = getattr(pb, method.output_type.name)  # type: ignore[attr-defined]
                call = channel.unary_unary(
                    f"/runtime.v1alpha2.{service}/{name}",
                    request_serializer=request_cls.SerializeToString,
                    response_deserializer=response_cls.FromString,
                )
                try:
                    await call(request_cls(), timeout=10)
                except grpc.aio.AioRpcError as exc:
                    # An empty request may be refused (no such id, no command), but
                    # the method itself is there.
                    assert exc.code() != grpc.StatusCode.UNIMPLEMENTED, (name, exc.details())


async def test_the_project_client_works_against_it(served: tuple[FakeRuntime, str]) -> None:
    _, endpoint = served
    async with CRIRuntime(endpoint) as client:
        assert (await client.version()).runtime_name == "fake"


# ------------------------------------------------------------------ the command


def _kubelet_kit(*args: str) -> list[str]:
    return [sys.executable, "-m", "kubelet_kit.cli", *args]


def test_the_command_serves_until_sigterm(tmp_path: Path) -> None:
    sock = tmp_path / "cri.sock"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = ["cri-server", "--listen", f"unix://{sock}", "--runtime", "fake"]
    proc = subprocess.Popen(
        _kubelet_kit(*command, "--root-dir", str(tmp_path / "state")),
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.strip() == (
            "kubelet-kit cri-server: serving FakeRuntime as runtime.v1 and runtime.v1alpha2 "
            f"on unix://{sock}"
        )
        version = subprocess.run(
            _kubelet_kit("cri", "-r", f"unix://{sock}", "version"),
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert version.returncode == 0, version.stderr
        assert "RuntimeName:  fake" in version.stdout
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert not sock.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_command_rejects_a_bad_runtime(tmp_path: Path) -> None:
    done = subprocess.run(
        _kubelet_kit("cri-server", "--listen", f"unix://{tmp_path}/x.sock", "--runtime", "nope"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "kubelet-kit cri-server: --runtime: 'nope' is neither host nor fake nor MODULE:NAME"
    )
    assert "Traceback" not in done.stderr


async def test_stats_carry_the_attributes_a_kubelet_names_them_by(
    served: tuple[FakeRuntime, str],
) -> None:
    # A kubelet's /stats/summary reads attributes.metadata of every container's stats
    # (and dereferences it: a kubelet 1.20 panics without it).
    _, endpoint = served
    async with grpc.aio.insecure_channel(endpoint) as channel:
        rt = v1alpha2_grpc.RuntimeServiceStub(channel)
        config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name="web", uid="u1", namespace="default"),
            labels={"io.kubernetes.pod.name": "web"},
        )
        sandbox = (await rt.RunPodSandbox(pb.RunPodSandboxRequest(config=config))).pod_sandbox_id
        created = await rt.CreateContainer(
            pb.CreateContainerRequest(
                pod_sandbox_id=sandbox,
                sandbox_config=config,
                config=pb.ContainerConfig(
                    metadata=pb.ContainerMetadata(name="main", attempt=2),
                    image=pb.ImageSpec(image="busybox"),
                    command=["sleep", "3600"],
                    labels={"io.kubernetes.container.name": "main"},
                    annotations={"note": "kept"},
                ),
            )
        )
        await rt.StartContainer(pb.StartContainerRequest(container_id=created.container_id))
        [listed] = (await rt.ListContainerStats(pb.ListContainerStatsRequest())).stats
        one = (
            await rt.ContainerStats(pb.ContainerStatsRequest(container_id=created.container_id))
        ).stats
        for stats in (listed, one):
            attrs_ = stats.attributes
            assert attrs_.id == created.container_id
            assert (attrs_.metadata.name, attrs_.metadata.attempt) == ("main", 2)
            assert attrs_.labels["io.kubernetes.container.name"] == "main"
            assert attrs_.annotations["note"] == "kept"
        [pod] = (await rt.ListPodSandboxStats(pb.ListPodSandboxStatsRequest())).stats
        assert (pod.attributes.id, pod.attributes.metadata.name) == (sandbox, "web")
        assert pod.attributes.labels["io.kubernetes.pod.name"] == "web"
        assert [c.attributes.metadata.name for c in pod.linux.containers] == ["main"]
