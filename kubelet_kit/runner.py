"""``kubelet-kit run``: a node agent from the command line.

::

    kubelet-kit run --pod-manifest-path examples/pods
    kubelet-kit run --config kubelet.yaml --container-runtime-endpoint unix:///run/containerd/containerd.sock
    kubelet-kit run --kubeconfig node.kubeconfig --config kubelet.yaml   # join a cluster

The flags are folded into the KubeletConfiguration (a flag wins over the file, as
with the kubelet), and the agent is built from it by the wiring root,
:func:`kubelet_kit.agent.build_agent`, exactly as an embedding program builds it.
With ``--kubeconfig`` the agent joins that API server as a Node (it needs
``kubelet-kit[cluster]``): pods come from the API server as well as from the
static-pod sources, and the Node publishes the node API's port, so ``kubectl
logs`` reaches this node.

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
from typing import TYPE_CHECKING, Any

import attrs

from kubelet_kit.errors import ConfigurationError, KubeletKitError, ValidationError

if TYPE_CHECKING:
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration

__all__ = [
    "GC_GEN0_THRESHOLD",
    "configuration_from_args",
    "prepare_gc",
    "register",
    "run_agent",
]

#: The first-generation collection threshold of a running agent (Python's is 700).
#: Measured on a burst of 1,000 pod starts: at 50,000 the collector runs three
#: young collections of about 10 ms each and no middle-generation one; at 10,000,
#: fourteen young ones and a middle one of 20-30 ms, for about 5 % more CPU.
GC_GEN0_THRESHOLD = 50_000

log = logging.getLogger("kubelet_kit")


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``run`` subcommand to an ``argparse`` subparsers object."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="run a node agent",
        description="Run pods from a static-pod directory, a manifest URL or a "
        "KubeletConfiguration, on the embedded host-process runtime or a CRI runtime.",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="a KubeletConfiguration (kubelet.config.k8s.io/v1beta1) file",
    )
    parser.add_argument(
        "--pod-manifest-path", metavar="PATH", help="static-pod directory or file (staticPodPath)"
    )
    parser.add_argument("--manifest-url", metavar="URL", help="manifest URL (staticPodURL)")
    parser.add_argument(
        "--file-check-frequency",
        type=float,
        metavar="SECONDS",
        help="seconds between checks of the manifest path (default 20)",
    )
    parser.add_argument(
        "--container-runtime-endpoint",
        metavar="ENDPOINT",
        help="a CRI runtime (unix:///path or tcp://host:port); default: "
        "containers are host processes",
    )
    parser.add_argument(
        "--runtime-request-timeout",
        metavar="DURATION",
        help="deadline of each runtime call, a duration such as 2m0s "
        "(runtimeRequestTimeout; default 2m0s)",
    )
    cluster = parser.add_argument_group("cluster mode")
    cluster.add_argument(
        "--kubeconfig", metavar="FILE", help="join the API server of this kubeconfig as a Node"
    )
    cluster.add_argument("--context", metavar="NAME", help="the kubeconfig context")
    cluster.add_argument(
        "--node-ip",
        metavar="IP",
        help="the node's address (its InternalIP and pods' hostIP); default "
        "the address of the default route's interface",
    )
    cluster.add_argument(
        "--register-with-taints",
        metavar="TAINTS",
        default="",
        help="comma-separated key[=value]:Effect taints to register with",
    )
    cluster.add_argument(
        "--node-lease-duration-seconds",
        type=int,
        metavar="SECONDS",
        help="the node Lease's duration (default 40)",
    )
    cluster.add_argument(
        "--kube-api-qps",
        type=int,
        metavar="QPS",
        help="API requests per second after the burst (default 50) [kubeAPIQPS]",
    )
    cluster.add_argument(
        "--kube-api-burst",
        type=int,
        metavar="N",
        help="API requests that may go at once (default 100) [kubeAPIBurst]",
    )
    parser.add_argument(
        "--cni-conf-dir",
        metavar="DIR",
        help="host-process runtime, as root: give pods without hostNetwork "
        "their own network namespace through the CNI config in DIR",
    )
    parser.add_argument(
        "--cni-bin-dir",
        metavar="DIR",
        action="append",
        help="where CNI plugins are (repeatable; default /opt/cni/bin and /usr/lib/cni)",
    )
    parser.add_argument("--root-dir", metavar="DIR", help="the agent's state directory")
    cgroups = parser.add_argument_group("pod cgroups (KubeletConfiguration names in brackets)")
    cgroups.add_argument(
        "--cgroups-per-qos",
        type=_flag_bool,
        metavar="BOOL",
        help="make the QoS and pod cgroup hierarchy (needs root; default true) [cgroupsPerQOS]",
    )
    cgroups.add_argument(
        "--cgroup-root",
        metavar="PATH",
        help="the cgroup the hierarchy goes under (default /) [cgroupRoot]",
    )
    cgroups.add_argument(
        "--cgroup-driver",
        choices=("cgroupfs", "systemd"),
        help="cgroup naming (default cgroupfs) [cgroupDriver]",
    )
    parser.add_argument("--pod-logs-dir", metavar="DIR", help="where container logs go")
    parser.add_argument("--hostname-override", metavar="NAME", help="this node's name")
    api = parser.add_argument_group("node API (KubeletConfiguration names in brackets)")
    api.add_argument("--address", metavar="IP", help="address to serve on [address]")
    api.add_argument(
        "--port", type=int, metavar="PORT", help="HTTPS port [port] (default 10250; 0: off)"
    )
    api.add_argument(
        "--read-only-port",
        type=int,
        metavar="PORT",
        help="plain-HTTP read-only port, never logs or run [readOnlyPort] (default 0: off)",
    )
    api.add_argument(
        "--healthz-bind-address",
        metavar="IP",
        help="address of the healthz port [healthzBindAddress]",
    )
    api.add_argument(
        "--healthz-port",
        type=int,
        metavar="PORT",
        help="plain-HTTP /healthz port [healthzPort] (default 10248; 0: off)",
    )
    api.add_argument("--tls-cert-file", metavar="FILE", help="serving certificate [tlsCertFile]")
    api.add_argument(
        "--tls-private-key-file", metavar="FILE", help="its private key [tlsPrivateKeyFile]"
    )
    api.add_argument(
        "--cert-dir",
        metavar="DIR",
        help="where a self-signed certificate is made when none is given (default ROOT_DIR/pki)",
    )
    api.add_argument(
        "--client-ca-file",
        metavar="FILE",
        help="CA of client certificates [authentication.x509.clientCAFile]",
    )
    api.add_argument(
        "--token-auth-file",
        metavar="FILE",
        help='static bearer tokens, token,user,uid,"groups" [authentication.tokenFile]',
    )
    api.add_argument(
        "--anonymous-auth",
        type=_flag_bool,
        metavar="BOOL",
        help="let requests without credentials in as system:anonymous "
        "[authentication.anonymous.enabled] (default false)",
    )
    api.add_argument(
        "--authorization-mode",
        choices=("AlwaysAllow", "Policy"),
        help="[authorization.mode] (default AlwaysAllow)",
    )
    parser.add_argument(
        "--drain-on-exit", action="store_true", help="stop every pod before exiting"
    )
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


def configuration_from_args(args: argparse.Namespace) -> KubeletConfiguration:
    """The KubeletConfiguration of ``--config`` (or the kubelet's defaults, on the
    embedded runtime) with the command line's flags on top.

    Raises:
        ConfigurationError: a setting or flag is malformed (named by its field path
            or flag).
    """
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration, load_kubelet_config

    config = load_kubelet_config(args.config) if args.config else KubeletConfiguration()
    fields: dict[str, Any] = {
        "cgroups_per_qos": args.cgroups_per_qos,
        "cgroup_root": args.cgroup_root,
        "cgroup_driver": args.cgroup_driver,
        "container_runtime_endpoint": args.container_runtime_endpoint,
        "static_pod_path": args.pod_manifest_path,
        "static_pod_url": args.manifest_url,
        "address": args.address,
        "healthz_bind_address": args.healthz_bind_address,
        "pod_logs_dir": args.pod_logs_dir,
    }
    if args.runtime_request_timeout is not None:
        from kubelet_kit.api.duration import parse_duration

        try:
            timeout = parse_duration(args.runtime_request_timeout)
        except ValueError as exc:
            raise ConfigurationError(f"--runtime-request-timeout: {exc}") from None
        if timeout <= 0:
            raise ConfigurationError(
                f'--runtime-request-timeout: "{args.runtime_request_timeout}" must be a '
                "positive duration"
            )
        fields["runtime_request_timeout"] = args.runtime_request_timeout
    if args.file_check_frequency is not None:
        fields["file_check_frequency"] = f"{args.file_check_frequency:g}s"
    for flag in ("port", "read_only_port", "healthz_port"):
        value = getattr(args, flag, None)
        if value is not None and not 0 <= value <= 65535:
            raise ConfigurationError(f"--{flag.replace('_', '-')}: {value} is not a port")
        fields[flag] = value
    for flag in ("kube_api_qps", "kube_api_burst"):
        value = getattr(args, flag, None)
        if value is not None and value < 0:
            raise ConfigurationError(
                f"--{flag.replace('_', '-')}: {value} must not be a negative number"
            )
        fields[flag] = value
    extra = dict(config.extra)
    for flag, key in (
        ("tls_cert_file", "tlsCertFile"),
        ("tls_private_key_file", "tlsPrivateKeyFile"),
    ):
        if getattr(args, flag, None):
            extra[key] = getattr(args, flag)
    authentication = dict(extra.get("authentication") or {})
    if args.client_ca_file:
        authentication["x509"] = {
            **(authentication.get("x509") or {}),
            "clientCAFile": args.client_ca_file,
        }
    if args.token_auth_file:
        authentication["tokenFile"] = args.token_auth_file
    if args.anonymous_auth is not None:
        authentication["anonymous"] = {"enabled": args.anonymous_auth}
    if authentication:
        extra["authentication"] = authentication
    if args.authorization_mode:
        extra["authorization"] = {
            **(extra.get("authorization") or {}),
            "mode": args.authorization_mode,
        }
    return attrs.evolve(config, extra=extra, **{k: v for k, v in fields.items() if v is not None})


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
        return asyncio.run(run_agent(args, **getattr(args, "parts", {})))
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


async def run_agent(args: argparse.Namespace, **parts: Any) -> int:
    """Build the agent the arguments describe (with ``parts``, keyword arguments of
    :class:`kubelet_kit.agent.Kubelet`, in place of the defaults) and run it until
    SIGINT or SIGTERM."""
    from kubelet_kit.agent import ClusterOptions, build_agent

    config = configuration_from_args(args)
    if not (
        config.static_pod_path or config.static_pod_url or args.kubeconfig or parts.get("sources")
    ):
        print(
            "kubelet-kit run: give --pod-manifest-path, --manifest-url, --kubeconfig or a "
            "--config with staticPodPath/staticPodURL",
            file=sys.stderr,
        )
        return 2
    cluster = None
    if args.kubeconfig:
        from kubelet_kit.cluster.run import parse_taint

        cluster = ClusterOptions(
            kubeconfig=args.kubeconfig,
            context=args.context,
            taints=[parse_taint(t) for t in args.register_with_taints.split(",") if t],
            lease_duration=args.node_lease_duration_seconds or 40,
        )
    if args.hostname_override:
        parts.setdefault("node_name", args.hostname_override)
    if args.root_dir:
        parts.setdefault("root_dir", args.root_dir)
    if not args.config and not args.pod_logs_dir:
        parts.setdefault("pod_logs_dir", None)  # the agent's own default for its user
    agent = await build_agent(
        config,
        cluster=cluster,
        cert_dir=args.cert_dir,
        node_ip=args.node_ip,
        cni_conf_dir=args.cni_conf_dir,
        cni_bin_dirs=args.cni_bin_dir or (),
        **parts,
    )
    kubelet = agent.kubelet
    log.info(
        "kubelet-kit agent on node %s: runtime %s, state in %s, logs in %s%s",
        kubelet.node_name,
        type(kubelet.base_runtime).__name__,
        kubelet.root_dir,
        kubelet.pod_logs_dir,
        f", API server of {args.kubeconfig}" if cluster else "",
    )
    try:
        await agent.start_server()
    except OSError as exc:
        print(f"kubelet-kit run: cannot serve the node API: {exc}", file=sys.stderr)
        await agent.close()
        return 1

    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop_requested.set)
    prepare_gc()
    task = asyncio.create_task(agent.run(), name="agent")
    stopper = asyncio.create_task(stop_requested.wait())
    await asyncio.wait([task, stopper], return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        stopper.cancel()
        task.result()  # a component failed: raise it
        return 1
    log.info("stopping%s", ", draining pods first" if args.drain_on_exit else "; pods keep running")
    if args.drain_on_exit:
        await agent.drain()
    agent.stop()
    await task
    return 0
