"""``kubelet-kit cri-server``: any Runtime as a CRI endpoint that a kubelet can use.

From the command line::

    kubelet-kit cri-server --listen unix:///run/kubelet-kit/cri.sock --runtime host
    kubelet-kit cri-server --listen unix:///tmp/fake.sock --runtime fake
    kubelet-kit cri-server --listen unix:///tmp/mine.sock --runtime my_pkg.rt:make_runtime

and the same from Python::

    await serve_cri("unix:///tmp/fake.sock", "fake")         # until cancelled
    await serve_cri("unix:///tmp/mine.sock", MyRuntime())

The socket answers runtime.v1 and runtime.v1alpha2 (:class:`~kubelet_kit.cri.CRIServer`),
so a kubelet of any version since 1.20, crictl or a :class:`~kubelet_kit.cri.CRIRuntime`
drive it; point a kubelet at it with ``--container-runtime=remote
--container-runtime-endpoint=unix:///...``. ``Exec``, ``Attach`` and ``PortForward``
hand out URLs of the streaming server started beside it (``--streaming-address``,
``--streaming-port``).

A runtime is named by :func:`load_runtime`: ``host`` (the embedded host-process
runtime, state under ``--root-dir``), ``fake`` (the in-memory
:class:`~kubelet_kit.testing.FakeRuntime` on the real clock: its containers "run"
the small shell its docs describe, any image pulls, and its registry knows the
images the conformance kit's image checks take, ``CONFORMANCE_SAME_IMAGE_REFS``
and ``CONFORMANCE_USER_IMAGES`` of :mod:`kubelet_kit.testing.fake_runtime`) or
``MODULE:NAME``, where ``NAME`` is a Runtime or a callable that returns one (or an
awaitable of one) when called without arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import inspect
import os
import signal
import sys
from pathlib import Path
from typing import Any, cast

from kubelet_kit.container.interfaces import Runtime, RuntimeCore
from kubelet_kit.container.optional import protocol_methods
from kubelet_kit.errors import ConfigurationError

__all__ = ["RUNTIME_NAMES", "load_runtime", "register", "serve_cri", "socket_path_of"]

#: The runtimes ``--runtime`` knows by name; anything else is ``MODULE:NAME``.
RUNTIME_NAMES = ("host", "fake")


def socket_path_of(listen: str) -> Path:
    """The socket path of a ``--listen`` value: ``unix:///abs/path`` or ``/abs/path``.

    Raises:
        ConfigurationError: another scheme, or a relative path (the message names
            ``--listen``).
    """
    path = listen.removeprefix("unix://")
    if "://" in path or not path.startswith("/"):
        raise ConfigurationError(
            f"--listen: {listen!r} is not a unix socket; give unix:///absolute/path"
        )
    return Path(path)


def _missing_methods(obj: object) -> list[str]:
    # The core's methods are the public callables it declares; the rest are
    # capabilities a runtime may leave out (their RPCs answer UNIMPLEMENTED).
    wanted = sorted(protocol_methods(RuntimeCore))
    return [n for n in wanted if not callable(getattr(obj, n, None))]


async def load_runtime(spec: str, *, root_dir: str | os.PathLike[str] | None = None) -> Runtime:
    """The Runtime that ``spec`` names (see the module docstring).

    Args:
        spec: ``host``, ``fake`` or ``MODULE:NAME``.
        root_dir: The state directory of ``host`` (the fake's image filesystem);
            by default ``<agent state directory>/cri-server``.

    Raises:
        ConfigurationError: the name is unknown, the module or attribute cannot be
            imported, or what it gives is not a Runtime (the message says which
            methods it lacks).
    """
    if spec in RUNTIME_NAMES:
        from kubelet_kit.node.defaults import default_root_dir

        root = Path(root_dir) if root_dir is not None else default_root_dir() / "cri-server"
    if spec == "host":
        from kubelet_kit.runtimes.host import HostProcessRuntime

        return HostProcessRuntime(root)
    if spec == "fake":
        # The one place outside the tests that loads the testing package, and only
        # when the fake is asked for by name.
        from kubelet_kit.clock import RealClock
        from kubelet_kit.testing import FakeRuntime

        # Events on, so a kubelet's evented PLEG (or GetContainerEvents) has a
        # stream; the image filesystem is the state directory, as a kubelet wants
        # one (ImageFsInfo) on a real path it can measure; any image pulls; and
        # the call log stays bounded, as the kubelet polls for ever.
        # Its registry also knows the images the conformance kit's image checks
        # take (one image under several references, images whose config names
        # a user), so the kit can be run against it over the CRI.
        root.mkdir(parents=True, exist_ok=True)
        # Host ports are declined: a real kubelet's pods would expect them published.
        fake = FakeRuntime(
            RealClock(),
            events=True,
            image_fs=str(root),
            pull_any=True,
            call_history=1000,
            host_ports="decline",
        )
        fake.add_conformance_images()
        return fake
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(
            f"--runtime: {spec!r} is neither {' nor '.join(RUNTIME_NAMES)} nor MODULE:NAME"
        )
    try:
        found: Any = getattr(importlib.import_module(module_name), attr)
    except ImportError as exc:
        raise ConfigurationError(f"--runtime: cannot import {module_name!r}: {exc}") from None
    except AttributeError:
        raise ConfigurationError(f"--runtime: {module_name!r} has no {attr!r}") from None
    runtime = found
    if not isinstance(found, RuntimeCore) and callable(found):
        runtime = found()
        if inspect.isawaitable(runtime):
            runtime = await runtime
    if not isinstance(runtime, RuntimeCore):
        missing = ", ".join(_missing_methods(runtime))
        raise ConfigurationError(
            f"--runtime: {spec!r} gave a {type(runtime).__name__}, which is not a Runtime "
            f"(missing: {missing})"
        )
    return cast(Runtime, runtime)


async def serve_cri(
    listen: str,
    runtime: Runtime | str,
    *,
    root_dir: str | os.PathLike[str] | None = None,
    streaming_address: str = "127.0.0.1",
    streaming_port: int = 0,
    stop: asyncio.Event | None = None,
    started: asyncio.Event | None = None,
) -> None:
    """Serve ``runtime`` on ``listen`` until ``stop`` is set (or the task is cancelled).

    The runtime is closed on the way out when it has a ``close()`` coroutine (as
    :class:`~kubelet_kit.cri.CRIRuntime` does); containers it runs are not stopped.

    Args:
        listen: ``unix:///abs/path`` (or ``/abs/path``) of the socket.
        runtime: A Runtime, or a name for :func:`load_runtime`.
        root_dir: Passed to :func:`load_runtime` when ``runtime`` is a name.
        streaming_address: Where the streaming server for exec, attach and
            port-forward listens.
        streaming_port: Its port (0: any free one).
        stop: Set it to stop serving; None serves until cancelled.
        started: Set once the socket accepts calls.
    """
    from kubelet_kit.cri import CRIServer

    path = socket_path_of(listen)
    if isinstance(runtime, str):
        runtime = await load_runtime(runtime, root_dir=root_dir)
    server = CRIServer(
        runtime, path, streaming_address=streaming_address, streaming_port=streaming_port
    )
    try:
        await server.start()
        if started is not None:
            started.set()
        await (stop or asyncio.Event()).wait()
    finally:
        await server.stop(grace=5.0)
        close = getattr(runtime, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                result = close()
                if inspect.isawaitable(result):
                    await result


async def _main(args: argparse.Namespace) -> int:
    try:
        runtime = await load_runtime(args.runtime, root_dir=args.root_dir)
        path = socket_path_of(args.listen)
    except ConfigurationError as exc:
        print(f"kubelet-kit cri-server: {exc}", file=sys.stderr)
        return 2
    stop, started = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    task = asyncio.create_task(
        serve_cri(
            args.listen,
            runtime,
            streaming_address=args.streaming_address,
            streaming_port=args.streaming_port,
            stop=stop,
            started=started,
        )
    )
    # Say where it serves once the socket accepts calls, for people and for
    # scripts that wait for this line.
    ready = asyncio.create_task(started.wait())
    await asyncio.wait([task, ready], return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if started.is_set():
        print(
            f"kubelet-kit cri-server: serving {type(runtime).__name__} as runtime.v1 and "
            f"runtime.v1alpha2 on unix://{path}",
            file=sys.stderr,
            flush=True,
        )
    try:
        await task
    except ConfigurationError as exc:
        print(f"kubelet-kit cri-server: {exc}", file=sys.stderr)
        return 1
    return 0


def _run(args: argparse.Namespace) -> int:
    return asyncio.run(_main(args))


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``cri-server`` subcommand to an ``argparse`` subparsers object.

    Returns:
        The ``cri-server`` parser (it sets ``func``: ``func(args) -> exit status``).
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "cri-server",
        help="serve a runtime as a CRI endpoint (runtime.v1 and v1alpha2)",
        description="Serve a Runtime on a unix socket as the CRI's RuntimeService and "
        "ImageService, runtime.v1 and runtime.v1alpha2, for a kubelet, crictl or "
        "kubelet-kit's own CRI client. Stops on SIGINT or SIGTERM; containers keep "
        "running.",
    )
    parser.add_argument(
        "--listen", required=True, metavar="unix:///PATH", help="the socket to serve on"
    )
    parser.add_argument(
        "--runtime",
        default="host",
        metavar="host|fake|MODULE:NAME",
        help="the runtime to serve (default: %(default)s)",
    )
    parser.add_argument(
        "--root-dir",
        metavar="DIR",
        help="state directory of the host runtime (default: <agent state dir>/cri-server)",
    )
    parser.add_argument(
        "--streaming-address",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="where the exec/attach/port-forward server listens (default: %(default)s)",
    )
    parser.add_argument(
        "--streaming-port", type=int, default=0, metavar="PORT", help="its port (0: any free one)"
    )
    parser.set_defaults(func=_run)
    return parser
