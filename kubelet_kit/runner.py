"""``kubelet-kit run``: a node agent from the command line.

::

    kubelet-kit run --pod-manifest-path examples/pods
    kubelet-kit run --config kubelet.yaml --container-runtime-endpoint unix:///run/containerd/containerd.sock

Without a runtime endpoint the agent runs containers as host processes (the
embedded HostProcessRuntime). Each pod transition is logged on one line. SIGINT or
SIGTERM stops the agent and leaves its pods running (the next agent adopts them);
``--drain-on-exit`` stops the pods first.

The node API is served as the kubelet serves it (see :mod:`kubelet_kit.server`):
HTTPS on ``--address``:``--port`` (10250; 0 turns it off) with the certificate of
``--tls-cert-file``/``--tls-private-key-file`` (or a self-signed one made in
``--cert-dir``), ``/healthz`` on ``--healthz-bind-address``:``--healthz-port``
(127.0.0.1:10248), and the plain read-only port only when ``--read-only-port`` is
set. Authentication and authorization come from the configuration file's
``authentication``/``authorization`` sections, or from ``--client-ca-file``,
``--token-auth-file``, ``--anonymous-auth`` and ``--authorization-mode``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import attrs
from prometheus_client import CollectorRegistry

from kubelet_kit.errors import ConfigurationError, KubeletKitError, ValidationError

__all__ = ["GC_GEN0_THRESHOLD", "prepare_gc", "register", "run_agent", "server_settings"]

#: The first-generation collection threshold of a running agent (Python's is 700).
GC_GEN0_THRESHOLD = 10_000

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
    parser.add_argument("--cni-conf-dir", metavar="DIR",
                        help="host-process runtime, as root: give pods without hostNetwork "
                        "their own network namespace through the CNI config in DIR")
    parser.add_argument("--cni-bin-dir", metavar="DIR", action="append",
                        help="where CNI plugins are (repeatable; default /opt/cni/bin and "
                        "/usr/lib/cni)")
    parser.add_argument("--root-dir", metavar="DIR", help="the agent's state directory")
    cgroups = parser.add_argument_group("pod cgroups (KubeletConfiguration names in brackets)")
    cgroups.add_argument("--cgroups-per-qos", type=_flag_bool, metavar="BOOL",
                         help="make the QoS and pod cgroup hierarchy (needs root; default "
                              "true) [cgroupsPerQOS]")
    cgroups.add_argument("--cgroup-root", metavar="PATH",
                         help="the cgroup the hierarchy goes under (default /) [cgroupRoot]")
    cgroups.add_argument("--cgroup-driver", choices=("cgroupfs", "systemd"),
                         help="cgroup naming (default cgroupfs) [cgroupDriver]")
    parser.add_argument("--pod-logs-dir", metavar="DIR", help="where container logs go")
    parser.add_argument("--hostname-override", metavar="NAME", help="this node's name")
    api = parser.add_argument_group("node API (KubeletConfiguration names in brackets)")
    api.add_argument("--address", metavar="IP", help="address to serve on [address]")
    api.add_argument("--port", type=int, metavar="PORT",
                     help="HTTPS port [port] (default 10250; 0: off)")
    api.add_argument("--read-only-port", type=int, metavar="PORT",
                     help="plain-HTTP read-only port, never logs or run [readOnlyPort] "
                     "(default 0: off)")
    api.add_argument("--healthz-bind-address", metavar="IP",
                     help="address of the healthz port [healthzBindAddress]")
    api.add_argument("--healthz-port", type=int, metavar="PORT",
                     help="plain-HTTP /healthz port [healthzPort] (default 10248; 0: off)")
    api.add_argument("--tls-cert-file", metavar="FILE", help="serving certificate [tlsCertFile]")
    api.add_argument("--tls-private-key-file", metavar="FILE",
                     help="its private key [tlsPrivateKeyFile]")
    api.add_argument("--cert-dir", metavar="DIR",
                     help="where a self-signed certificate is made when none is given "
                     "(default ROOT_DIR/pki)")
    api.add_argument("--client-ca-file", metavar="FILE",
                     help="CA of client certificates [authentication.x509.clientCAFile]")
    api.add_argument("--token-auth-file", metavar="FILE",
                     help="static bearer tokens, token,user,uid,\"groups\" "
                     "[authentication.tokenFile]")
    api.add_argument("--anonymous-auth", type=_flag_bool, metavar="BOOL",
                     help="let requests without credentials in as system:anonymous "
                     "[authentication.anonymous.enabled] (default false)")
    api.add_argument("--authorization-mode", choices=("AlwaysAllow", "Policy"),
                     help="[authorization.mode] (default AlwaysAllow)")
    parser.add_argument("--drain-on-exit", action="store_true",
                        help="stop every pod before exiting")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.set_defaults(func=_run)
    return parser


def _flag_bool(value: str) -> bool:
    lowered = value.lower()
    if lowered in ("1", "t", "true"):
        return True
    if lowered in ("0", "f", "false"):
        return False
    raise argparse.ArgumentTypeError(f"{value!r} is not true or false")


def server_settings(args: argparse.Namespace, config: Any) -> dict[str, Any]:
    """The KubeletServer keyword arguments: the configuration file's settings with
    the command line's flags on top.

    Raises:
        ConfigurationError: a setting is malformed (named by its field path).
    """
    from kubelet_kit.server.config import build_authenticator, build_authorizer, server_options

    options = server_options(config)
    for flag, key in (("address", "address"), ("healthz_bind_address", "healthz_address"),
                      ("tls_cert_file", "tls_cert_file"),
                      ("tls_private_key_file", "tls_private_key_file")):
        if getattr(args, flag, None):
            options[key] = getattr(args, flag)
    for flag in ("port", "read_only_port", "healthz_port"):
        value = getattr(args, flag, None)
        if value is not None:
            if not 0 <= value <= 65535:
                raise ConfigurationError(f"--{flag.replace('_', '-')}: {value} is not a port")
            options[flag] = value or None
    authentication = dict(config.extra.get("authentication") or {})
    if getattr(args, "client_ca_file", None):
        authentication["x509"] = {**(authentication.get("x509") or {}),
                                  "clientCAFile": args.client_ca_file}
    if getattr(args, "token_auth_file", None):
        authentication["tokenFile"] = args.token_auth_file
    if getattr(args, "anonymous_auth", None) is not None:
        authentication["anonymous"] = {"enabled": args.anonymous_auth}
    options["authenticator"] = build_authenticator(authentication)
    if getattr(args, "authorization_mode", None):
        authorization = dict(config.extra.get("authorization") or {})
        authorization["mode"] = args.authorization_mode
        options["authorizer"] = build_authorizer(authorization)
    return options


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


def prepare_gc(gen0_threshold: int = GC_GEN0_THRESHOLD) -> None:
    """Tune the garbage collector for a long-running agent; call once it is built.

    Everything built so far lives as long as the agent: ``gc.freeze()`` keeps it
    out of the collector's sight, so full collections stay short and probe timers
    stay on time. A pod sync allocates many short-lived objects (statuses,
    configs), most of them acyclic: a larger first-generation threshold runs the
    collector less often for the same garbage.
    """
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0_threshold, gen1, gen2)


async def run_agent(args: argparse.Namespace) -> int:
    """Build the agent the arguments describe and run it until a signal."""
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration, load_kubelet_config
    from kubelet_kit.clock import RealClock
    from kubelet_kit.config import FileSource, HTTPSource
    from kubelet_kit.container import Runtime
    from kubelet_kit.kubelet import Kubelet, default_node_name, default_root_dir
    from kubelet_kit.metrics import InstrumentedRuntime, KubeletMetrics
    from kubelet_kit.server import KubeletServer

    config = load_kubelet_config(args.config) if args.config else KubeletConfiguration()
    flags = {"cgroups_per_qos": args.cgroups_per_qos, "cgroup_root": args.cgroup_root,
             "cgroup_driver": args.cgroup_driver}
    config = attrs.evolve(config, **{k: v for k, v in flags.items() if v is not None})
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
    settings = server_settings(args, config)
    clock = RealClock()
    registry = CollectorRegistry(auto_describe=True)
    metrics = KubeletMetrics.for_registry(registry, node_name=node_name)
    root_dir = Path(args.root_dir) if args.root_dir else default_root_dir()
    base: Runtime
    if args.container_runtime_endpoint:
        from kubelet_kit.cri import CRIRuntime

        base = CRIRuntime(args.container_runtime_endpoint,
                          timeout=config.seconds("runtime_request_timeout"))
    else:
        from kubelet_kit.runtimes.host import HostProcessRuntime

        network = None
        if args.cni_conf_dir:
            from kubelet_kit.network import CNINetwork

            bins = args.cni_bin_dir or ["/opt/cni/bin", "/usr/lib/cni"]
            network = CNINetwork(args.cni_conf_dir, bins, cache_dir=root_dir / "cni",
                                 clock=clock)
        base = HostProcessRuntime(root_dir / "runtime", clock=clock, network=network)
    # Every runtime call is counted under the kubelet's runtime operation metrics.
    runtime = InstrumentedRuntime(base, metrics, clock)
    kubelet = Kubelet.from_config(config, runtime=runtime, sources=sources, clock=clock,
                                  registry=registry, **overrides)
    log.info("kubelet-kit agent on node %s: runtime %s, state in %s, logs in %s",
             node_name, type(base).__name__, kubelet.root_dir, kubelet.pod_logs_dir)
    if settings["port"] is not None and not (settings["tls_cert_file"]
                                             and settings["tls_private_key_file"]):
        from kubelet_kit.server.config import ensure_self_signed

        cert_dir = Path(args.cert_dir) if args.cert_dir else kubelet.root_dir / "pki"
        try:
            cert, key = await asyncio.to_thread(ensure_self_signed, cert_dir, node_name)
        except ConfigurationError as exc:
            log.warning("not serving the secure port: %s", exc)
            settings["port"] = None
        else:
            settings["tls_cert_file"], settings["tls_private_key_file"] = cert, key
    server = KubeletServer(kubelet, metrics=metrics, **settings)
    try:
        await server.start()
    except OSError as exc:
        print(f"kubelet-kit run: cannot serve the node API: {exc}", file=sys.stderr)
        await runtime.close()
        return 1

    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop_requested.set)
    prepare_gc()
    agent = asyncio.create_task(kubelet.run(), name="kubelet")
    stopper = asyncio.create_task(stop_requested.wait())
    await asyncio.wait([agent, stopper], return_when=asyncio.FIRST_COMPLETED)
    if agent.done():
        stopper.cancel()
        await server.stop()
        agent.result()  # a component failed: raise it
        return 1
    log.info("stopping%s", ", draining pods first" if args.drain_on_exit else
             "; pods keep running")
    if args.drain_on_exit:
        await kubelet.drain()
    kubelet.stop()
    await agent
    await server.stop()
    await runtime.close()
    return 0
