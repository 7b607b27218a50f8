"""``kubelet-kit run``: a node agent from the command line.

::

    kubelet-kit run --pod-manifest-path examples/pods
    kubelet-kit run --config kubelet.yaml --container-runtime-endpoint unix:///run/containerd/containerd.sock

Without a runtime endpoint the agent runs containers as host processes (the
embedded HostProcessRuntime). Each pod transition is logged on one line. SIGINT or
SIGTERM stops the agent and leaves its pods running (the next agent adopts them);
``--drain-on-exit`` stops the pods first.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from typing import Any

from kubelet_kit.errors import KubeletKitError, ValidationError

__all__ = ["register", "run_agent"]

log = logging.getLogger("kubelet_kit")


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``run`` subcommand to an ``argparse`` subparsers object."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="run a node agent",
        description="Run pods from a static-pod directory, a manifest URL or a "
        "KubeletConfiguration, on the embedded host-process runtime or a CRI runtime.",
    )
    parser.add_argument("--config", metavar="FILE",
                        help="a KubeletConfiguration (kubelet.config.k8s.io/v1beta1) file")
    parser.add_argument("--pod-manifest-path", metavar="PATH",
                        help="static-pod directory or file (staticPodPath)")
    parser.add_argument("--manifest-url", metavar="URL", help="manifest URL (staticPodURL)")
    parser.add_argument("--file-check-frequency", type=float, metavar="SECONDS",
                        help="seconds between checks of the manifest path (default 20)")
    parser.add_argument("--container-runtime-endpoint", metavar="ENDPOINT",
                        help="a CRI runtime (unix:///path or tcp://host:port); default: "
                        "containers are host processes")
    parser.add_argument("--root-dir", metavar="DIR", help="the agent's state directory")
    parser.add_argument("--pod-logs-dir", metavar="DIR", help="where container logs go")
    parser.add_argument("--hostname-override", metavar="NAME", help="this node's name")
    parser.add_argument("--drain-on-exit", action="store_true",
                        help="stop every pod before exiting")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.set_defaults(func=_run)
    return parser


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)-7s %(message)s",
        stream=sys.stderr,
    )
    # Library chatter (HTTP clients, gRPC) stays at warnings.
    for noisy in ("aiohttp", "asyncio", "grpc"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return asyncio.run(run_agent(args))
    except (ValidationError, KubeletKitError) as exc:
        print(f"kubelet-kit run: {exc}", file=sys.stderr)
        return 1


async def run_agent(args: argparse.Namespace) -> int:
    """Build the agent the arguments describe and run it until a signal."""
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration, load_kubelet_config
    from kubelet_kit.config import FileSource, HTTPSource
    from kubelet_kit.container import Runtime
    from kubelet_kit.kubelet import Kubelet, default_node_name

    config = load_kubelet_config(args.config) if args.config else KubeletConfiguration()
    if not (args.pod_manifest_path or args.manifest_url or config.static_pod_path
            or config.static_pod_url):
        print("kubelet-kit run: give --pod-manifest-path, --manifest-url or a --config "
              "with staticPodPath/staticPodURL", file=sys.stderr)
        return 2
    node_name = args.hostname_override or default_node_name()
    overrides: dict[str, Any] = {"node_name": node_name}
    if args.root_dir:
        overrides["root_dir"] = args.root_dir
    if args.pod_logs_dir:
        overrides["pod_logs_dir"] = args.pod_logs_dir
    elif not args.config:
        overrides["pod_logs_dir"] = None  # the agent's own default for its user
    sources: list[Any] = []
    check = args.file_check_frequency
    if args.pod_manifest_path:
        sources.append(FileSource(
            args.pod_manifest_path, node_name=node_name,
            check_frequency=check if check is not None else config.seconds("file_check_frequency"),
        ))
    if args.manifest_url:
        sources.append(HTTPSource(args.manifest_url, node_name=node_name,
                                  check_frequency=config.seconds("http_check_frequency")))
    runtime: Runtime | None = None
    if args.container_runtime_endpoint:
        from kubelet_kit.cri import CRIRuntime

        runtime = CRIRuntime(args.container_runtime_endpoint,
                             timeout=config.seconds("runtime_request_timeout"))
    kubelet = Kubelet.from_config(config, runtime=runtime, sources=sources, **overrides)
    log.info("kubelet-kit agent on node %s: runtime %s, state in %s, logs in %s",
             node_name, type(kubelet.runtime).__name__, kubelet.root_dir, kubelet.pod_logs_dir)

    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop_requested.set)
    agent = asyncio.create_task(kubelet.run(), name="kubelet")
    stopper = asyncio.create_task(stop_requested.wait())
    await asyncio.wait([agent, stopper], return_when=asyncio.FIRST_COMPLETED)
    if agent.done():
        stopper.cancel()
        agent.result()  # a component failed: raise it
        return 1
    log.info("stopping%s", ", draining pods first" if args.drain_on_exit else
             "; pods keep running")
    if args.drain_on_exit:
        await kubelet.drain()
    kubelet.stop()
    await agent
    close = getattr(kubelet.runtime, "close", None)
    if close is not None:
        await close()
    return 0
