"""``kubelet-kit cri``: a small crictl for any CRI endpoint.

Subcommands: ``pods``, ``ps``, ``images``, ``imagefsinfo``, ``inspect``, ``logs``, ``exec``,
``version``; tables are aligned like crictl's, ``-o json`` prints JSON instead.
The command-line owner wires it in with :func:`register`::

    sub = parser.add_subparsers()
    kubelet_kit.cri.cli.register(sub)
    args = parser.parse_args()
    sys.exit(args.func(args))
"""

from __future__ import annotations

import argparse
import asyncio
import enum
import json
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs

from kubelet_kit.container.interfaces import (
    ContainerFilter,
    ContainerInfo,
    ContainerState,
    FilesystemUsage,
    Image,
    ImageSpec,
    PodSandbox,
    PodSandboxFilter,
    PodSandboxState,
)
from kubelet_kit.cri.remote import DEFAULT_ENDPOINT, CRIRuntime
from kubelet_kit.errors import KubeletKitError, NotFoundError

__all__ = [
    "format_age",
    "format_table",
    "images_table",
    "parse_cri_log",
    "pods_table",
    "ps_table",
    "register",
    "to_jsonable",
]

#: crictl shows the first 13 characters of ids.
_SHORT_ID = 13

_LOG_LINE = re.compile(r"^(\S+) (stdout|stderr) ([PF]) ?(.*)$")


# -------------------------------------------------------------- formatting


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, three spaces apart (crictl's look)."""
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = []
    for row in (header, *rows):
        cells = [cell.ljust(w) for cell, w in zip(row, widths, strict=True)]
        lines.append("   ".join(cells).rstrip())
    return "\n".join(lines)


def format_age(created_at: float, now: float) -> str:
    """``created_at`` as crictl prints it: ``5 seconds ago``, ``3 hours ago``..."""
    if created_at <= 0:
        return "unknown"
    seconds = max(0, int(now - created_at))
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return f"{seconds} second{'s' if seconds != 1 else ''} ago"


def _state(value: enum.Enum) -> str:
    # crictl prints the state without its prefix: Ready, NotReady, Running, Exited.
    name = str(value.value).split("_", 1)[1]
    return {"READY": "Ready", "NOTREADY": "NotReady"}.get(name, name.title())


def pods_table(pods: Sequence[PodSandbox], now: float) -> str:
    """The ``pods`` table."""
    rows = [
        [
            p.id[:_SHORT_ID],
            format_age(p.created_at, now),
            _state(p.state),
            p.metadata.name,
            p.metadata.namespace,
            str(p.metadata.attempt),
            p.runtime_handler or "(default)",
        ]
        for p in pods
    ]
    return format_table(
        ["POD ID", "CREATED", "STATE", "NAME", "NAMESPACE", "ATTEMPT", "RUNTIME"], rows
    )


def ps_table(containers: Sequence[ContainerInfo], now: float) -> str:
    """The ``ps`` table."""
    rows = [
        [
            c.id[:_SHORT_ID],
            c.image,
            format_age(c.created_at, now),
            _state(c.state),
            c.metadata.name,
            str(c.metadata.attempt),
            c.pod_sandbox_id[:_SHORT_ID],
        ]
        for c in containers
    ]
    return format_table(
        ["CONTAINER", "IMAGE", "CREATED", "STATE", "NAME", "ATTEMPT", "POD ID"], rows
    )


def _human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000:
            return f"{value:.3g}{unit}"
        value /= 1000
    return f"{value:.3g}TB"


def images_table(images: Sequence[Image]) -> str:
    """The ``images`` table: one row per tag (untagged images show ``<none>``)."""
    rows = []
    for image in images:
        short_id = image.id.removeprefix("sha256:")[:_SHORT_ID]
        for ref in image.repo_tags or ("<none>:<none>",):
            repo, _, tag = ref.rpartition(":")
            if "/" in tag or not repo:  # a registry port, not a tag
                repo, tag = ref, "<none>"
            rows.append([repo, tag, short_id, _human_size(image.size)])
    return format_table(["IMAGE", "TAG", "IMAGE ID", "SIZE"], rows)


def imagefs_table(filesystems: Sequence[FilesystemUsage]) -> str:
    """The ``imagefsinfo`` table: where the runtime keeps images, and what they use."""
    rows = [
        [
            fs.mountpoint,
            _human_size(fs.used_bytes) if fs.used_bytes is not None else "-",
            str(fs.inodes_used) if fs.inodes_used is not None else "-",
        ]
        for fs in filesystems
    ]
    return format_table(["MOUNTPOINT", "USED", "INODES"], rows)


def to_jsonable(value: Any) -> Any:
    """attrs values, enums, mappings and sequences as plain JSON data."""
    if attrs.has(type(value)):
        return {k: to_jsonable(v) for k, v in attrs.asdict(value, recurse=False).items()}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


def parse_cri_log(text: str) -> list[tuple[str, str]]:
    """``(stream, line)`` pairs from a CRI-format log; partial (``P``) chunks are
    joined with what follows them on the same stream."""
    out: list[tuple[str, str]] = []
    pending: dict[str, str] = {}
    for raw in text.splitlines():
        m = _LOG_LINE.match(raw)
        if m is None:
            continue
        _, stream, tag, body = m.groups()
        if tag == "P":
            pending[stream] = pending.get(stream, "") + body
            continue
        out.append((stream, pending.pop(stream, "") + body))
    out.extend((stream, body) for stream, body in pending.items())
    return out


# ------------------------------------------------------------------ commands


def _emit(args: argparse.Namespace, table: str, data: Any, out: TextIO) -> None:
    if args.output == "json":
        out.write(json.dumps(to_jsonable(data), indent=2, sort_keys=True) + "\n")
    else:
        out.write(table + "\n")


async def _pods(rt: CRIRuntime, args: argparse.Namespace, out: TextIO) -> int:
    flt = PodSandboxFilter(
        state=PodSandboxState.READY if args.ready else None,
        label_selector=dict(kv.split("=", 1) for kv in args.label),
    )
    pods = sorted(await rt.list_pod_sandboxes(flt), key=lambda p: -p.created_at)
    if args.name:
        pods = [p for p in pods if args.name in p.metadata.name]
    _emit(args, pods_table(pods, time.time()), pods, out)
    return 0


async def _ps(rt: CRIRuntime, args: argparse.Namespace, out: TextIO) -> int:
    flt = ContainerFilter(
        state=None if args.all else ContainerState.RUNNING,
        pod_sandbox_id=args.pod or None,
        label_selector=dict(kv.split("=", 1) for kv in args.label),
    )
    containers = sorted(await rt.list_containers(flt), key=lambda c: -c.created_at)
    if args.name:
        containers = [c for c in containers if args.name in c.metadata.name]
    _emit(args, ps_table(containers, time.time()), containers, out)
    return 0


async def _images(rt: CRIRuntime, args: argparse.Namespace, out: TextIO) -> int:
    images = await rt.list_images()
    _emit(args, images_table(images), images, out)
    return 0


async def _imagefsinfo(rt: CRIRuntime, args: argparse.Namespace, out: TextIO) -> int:
    filesystems = await rt.image_fs_info()
    _emit(args, imagefs_table(filesystems), filesystems, out)
    return 0


async def _inspect(rt: CRIRuntime, args: argparse.Namespace, out: TextIO) -> int:
    target: Any
    try:
        target = await rt.container_status(args.id)
    except NotFoundError:
        try:
            target = await rt.pod_sandbox_status(args.id)
        except NotFoundError:
            target = await rt.image_status(ImageSpec(args.id))
            if target is None:
                raise NotFoundError(f"inspect: no container, pod or image {args.id!r}") from None
    out.write(json.dumps(to_jsonable(target), indent=2, sort_keys=True) + "\n")
    return 0


async def _logs(rt: CRIRuntime, args: argparse.Namespace, out: TextIO) -> int:
    status = await rt.container_status(args.id)
    if not status.log_path:
        raise NotFoundError(f"logs: container {args.id} has no log file")
    path = Path(status.log_path)
    text = await asyncio.to_thread(path.read_text, errors="replace")
    lines = parse_cri_log(text)
    if args.tail is not None and args.tail >= 0:
        lines = lines[len(lines) - args.tail :] if args.tail else []
    err = sys.stderr if out is sys.stdout else out
    for stream, line in lines:
        (err if stream == "stderr" else out).write(line + "\n")
    return 0


async def _exec(rt: CRIRuntime, args: argparse.Namespace, out: TextIO) -> int:
    cmd = list(args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd)
    if not cmd:
        raise KubeletKitError("exec: a command is required")
    result = await rt.exec_sync(args.id, cmd, timeout=args.timeout or None)
    out.write(result.stdout.decode(errors="replace"))
    err = sys.stderr if out is sys.stdout else out
    err.write(result.stderr.decode(errors="replace"))
    return result.exit_code


async def _version(rt: CRIRuntime, args: argparse.Namespace, out: TextIO) -> int:
    v = await rt.version()
    if args.output == "json":
        out.write(json.dumps(to_jsonable(v), indent=2, sort_keys=True) + "\n")
    else:
        out.write(
            f"Version:  {v.version}\nRuntimeName:  {v.runtime_name}\n"
            f"RuntimeVersion:  {v.runtime_version}\nRuntimeApiVersion:  {v.runtime_api_version}\n"
        )
    return 0


_COMMANDS = {
    "pods": _pods,
    "ps": _ps,
    "images": _images,
    "imagefsinfo": _imagefsinfo,
    "inspect": _inspect,
    "logs": _logs,
    "exec": _exec,
    "version": _version,
}


async def run(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Run a parsed ``cri`` command; returns the exit code (exec: the command's)."""
    async with CRIRuntime(args.runtime_endpoint, timeout=args.request_timeout) as rt:
        return await _COMMANDS[args.cri_command](rt, args, out)


def _main(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(run(args))
    except KubeletKitError as exc:
        sys.stderr.write(f"kubelet-kit cri: {exc}\n")
        return 1


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``cri`` subcommand to an ``argparse`` subparsers object.

    The parser sets ``func`` (``func(args) -> int``, the exit code).

    Returns:
        The ``cri`` parser.
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "cri",
        help="inspect a CRI runtime (a small crictl)",
        description="Talk to any CRI (runtime.v1) runtime.",
    )
    parser.add_argument(
        "--runtime-endpoint",
        "-r",
        default=os.environ.get("CONTAINER_RUNTIME_ENDPOINT", DEFAULT_ENDPOINT),
        help="unix:///path, /path or tcp://host:port (default: %(default)s)",
    )
    parser.add_argument("--request-timeout", type=float, default=30.0, metavar="SECONDS")
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    sub = parser.add_subparsers(dest="cri_command", required=True, metavar="COMMAND")

    pods = sub.add_parser("pods", help="list pod sandboxes")
    pods.add_argument("--name", default="", help="only pods whose name contains this")
    pods.add_argument("--ready", action="store_true", help="only ready pods")
    pods.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")

    ps = sub.add_parser("ps", help="list containers (running unless -a)")
    ps.add_argument("-a", "--all", action="store_true", help="include exited containers")
    ps.add_argument("-p", "--pod", default="", help="only containers of this pod id")
    ps.add_argument("--name", default="", help="only containers whose name contains this")
    ps.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")

    images = sub.add_parser("images", help="list images")
    imagefs = sub.add_parser("imagefsinfo", help="where the runtime keeps its images")

    inspect = sub.add_parser("inspect", help="status of a container, pod or image as JSON")
    inspect.add_argument("id")

    logs = sub.add_parser("logs", help="print a container's log")
    logs.add_argument("id")
    logs.add_argument("--tail", type=int, default=None, metavar="N")

    ex = sub.add_parser("exec", help="run a command in a container and wait")
    ex.add_argument("--timeout", type=float, default=0.0, metavar="SECONDS")
    ex.add_argument("id")
    ex.add_argument("cmd", nargs=argparse.REMAINDER)

    version = sub.add_parser("version", help="runtime name and version")
    for child in (pods, ps, images, imagefs, version):
        child.add_argument("-o", "--output", choices=["table", "json"], default=argparse.SUPPRESS)
    parser.set_defaults(func=_main)
    return parser
