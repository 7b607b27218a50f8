"""The ``cri`` subcommand: formatting and commands against CRIServer(FakeRuntime)."""

from __future__ import annotations

import argparse
import io
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kubelet_kit.container import (
    ContainerConfig,
    ContainerInfo,
    ContainerMetadata,
    ContainerState,
    ExecResult,
    Image,
    ImageSpec,
    PodSandbox,
    PodSandboxConfig,
    PodSandboxMetadata,
    PodSandboxState,
)
from kubelet_kit.cri import CRIRuntime, CRIServer
from kubelet_kit.cri.cli import (
    format_age,
    format_table,
    images_table,
    parse_cri_log,
    pods_table,
    ps_table,
    register,
    run,
)
from kubelet_kit.testing.fake_runtime import FakeRuntime


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kubelet-kit")
    register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["cri", *argv])


@pytest.mark.parametrize(
    ("age", "text"),
    [
        (0, "0 seconds ago"),
        (1, "1 second ago"),
        (59, "59 seconds ago"),
        (60, "1 minute ago"),
        (7200, "2 hours ago"),
        (86400 * 3 + 5, "3 days ago"),
    ],
)
def test_age(age: int, text: str) -> None:
    assert format_age(1000.0, 1000.0 + age) == text
    assert format_age(0.0, 5.0) == "unknown"


def test_table_columns_are_aligned() -> None:
    out = format_table(["A", "LONG HEADER"], [["xxxxx", "1"], ["y", "22"]])
    assert out.splitlines() == ["A       LONG HEADER", "xxxxx   1", "y       22"]


def test_pods_and_ps_tables_look_like_crictl() -> None:
    meta = PodSandboxMetadata("web", "default", "u1", 2)
    pod = PodSandbox("0123456789abcdef", meta, PodSandboxState.READY, 100.0)
    lines = pods_table([pod], 130.0).splitlines()
    assert lines[0].split() == [
        "POD",
        "ID",
        "CREATED",
        "STATE",
        "NAME",
        "NAMESPACE",
        "ATTEMPT",
        "RUNTIME",
    ]
    assert lines[1].split() == [
        "0123456789abc",
        "30",
        "seconds",
        "ago",
        "Ready",
        "web",
        "default",
        "2",
        "(default)",
    ]
    c = ContainerInfo(
        "fedcba9876543210",
        "0123456789abcdef",
        ContainerMetadata("app", 1),
        "busybox",
        "sha256:1",
        ContainerState.EXITED,
        100.0,
    )
    row = ps_table([c], 100.0).splitlines()[1].split()
    assert row == [
        "fedcba9876543",
        "busybox",
        "0",
        "seconds",
        "ago",
        "Exited",
        "app",
        "1",
        "0123456789abc",
    ]


def test_images_table_splits_tags_and_keeps_registry_ports() -> None:
    images = [
        Image("sha256:abcdef0123456789", ("docker.io/library/busybox:1.36",), size=4_260_000),
        Image("sha256:0000", ("localhost:5000/app",), size=12),
    ]
    rows = [line.split() for line in images_table(images).splitlines()[1:]]
    assert rows == [
        ["docker.io/library/busybox", "1.36", "abcdef0123456", "4.26MB"],
        ["localhost:5000/app", "<none>", "0000", "12B"],
    ]


def test_cri_log_parsing_joins_partial_lines() -> None:
    text = (
        "2026-01-01T00:00:00.000000001Z stdout P hel\n"
        "2026-01-01T00:00:00.000000002Z stderr F oops\n"
        "2026-01-01T00:00:00.000000003Z stdout F lo\n"
        "2026-01-01T00:00:00.000000004Z stdout F \n"
        "garbage\n"
    )
    assert parse_cri_log(text) == [("stderr", "oops"), ("stdout", "hello"), ("stdout", "")]


# --------------------------------------------------------------------- commands


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="kkcli-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
async def pod(sock_dir: Path) -> AsyncIterator[tuple[str, FakeRuntime, str, str]]:
    fake = FakeRuntime(images=["busybox"])
    fake.set_exec_handler(lambda cid, cmd: ExecResult(4, b"out\n", b""))
    config = PodSandboxConfig(
        metadata=PodSandboxMetadata("web", "default", "u1"),
        log_directory=str(sock_dir / "logs"),
    )
    async with CRIServer(fake, sock_dir / "cri.sock") as srv, CRIRuntime(srv.endpoint) as rt:
        sb = await rt.run_pod_sandbox(config)
        cid = await rt.create_container(
            sb,
            ContainerConfig(
                ContainerMetadata("app"),
                ImageSpec("busybox"),
                args=("sh", "-c", "echo hi; echo bad >&2; sleep infinity"),
                log_path="app/0.log",
            ),
            config,
        )
        await rt.start_container(cid)
        yield srv.endpoint, fake, sb, cid


async def test_pods_ps_images_version(pod: tuple[str, FakeRuntime, str, str]) -> None:
    endpoint, _, sb, cid = pod
    out = io.StringIO()
    assert await run(parse("-r", endpoint, "pods"), out) == 0
    assert sb[:13] in out.getvalue() and "web" in out.getvalue()
    out = io.StringIO()
    assert await run(parse("-r", endpoint, "ps", "-o", "json"), out) == 0
    data = json.loads(out.getvalue())
    assert [(c["id"], c["state"]) for c in data] == [(cid, "CONTAINER_RUNNING")]
    out = io.StringIO()
    await run(parse("-r", endpoint, "images"), out)
    assert "busybox" in out.getvalue()
    out = io.StringIO()
    await run(parse("-r", endpoint, "version"), out)
    assert "RuntimeName:  fake" in out.getvalue()


async def test_imagefsinfo(pod: tuple[str, FakeRuntime, str, str], sock_dir: Path) -> None:
    endpoint, fake, _, _ = pod
    fake.image_fs = str(sock_dir)
    out = io.StringIO()
    assert await run(parse("-r", endpoint, "imagefsinfo"), out) == 0
    header, row = out.getvalue().splitlines()
    assert header.split() == ["MOUNTPOINT", "USED", "INODES"]
    assert row.split() == [str(sock_dir), "1.05MB", "1"]  # busybox: 1 MiB in the fake
    out = io.StringIO()
    assert await run(parse("-r", endpoint, "imagefsinfo", "-o", "json"), out) == 0
    (fs,) = json.loads(out.getvalue())
    assert (fs["mountpoint"], fs["used_bytes"], fs["inodes_used"]) == (str(sock_dir), 1 << 20, 1)


async def test_inspect_exec_logs(pod: tuple[str, FakeRuntime, str, str]) -> None:
    endpoint, _, sb, cid = pod
    out = io.StringIO()
    await run(parse("-r", endpoint, "inspect", cid), out)
    assert json.loads(out.getvalue())["metadata"]["name"] == "app"
    out = io.StringIO()
    await run(parse("-r", endpoint, "inspect", sb), out)
    assert json.loads(out.getvalue())["state"] == "SANDBOX_READY"
    out = io.StringIO()
    assert await run(parse("-r", endpoint, "exec", cid, "--", "anything"), out) == 4
    assert out.getvalue().startswith("out\n")
    out = io.StringIO()
    await run(parse("-r", endpoint, "logs", cid), out)
    assert out.getvalue().splitlines() == ["hi", "bad"]
    out = io.StringIO()
    await run(parse("-r", endpoint, "logs", "--tail", "1", cid), out)
    assert out.getvalue().splitlines() == ["bad"]


def test_main_reports_errors_as_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse("-r", "tcp://nohost", "version")  # not a valid endpoint
    assert args.func(args) == 1
    assert "runtime endpoint 'tcp://nohost'" in capsys.readouterr().err
