"""Standalone nodes for the integration tests, on the test containerd: the real
kubelet (1.20.2) as the reference, and ``kubelet-kit run`` beside it.

Neither has an API server: pods come from a static-pod directory of the node's
own, and the node API (HTTPS on a free 127.0.0.1 port) lets in only clients with
a certificate of a CA made here (``--anonymous-auth=false``, ``--client-ca-file``;
the kubelet's webhook authentication would need an API server). What the two
share is :class:`StandaloneNode`; :class:`RealKubelet` and :class:`KubeletKitNode`
only say how each is started.

The kubelet assumes it owns the machine. What it would otherwise change outside
this harness's directory, and how it is kept inside:

- It hard-codes ``/var/log/pods`` (and ``/var/log/containers``) and
  garbage-collects what it does not know there, and it keeps device-plugin
  sockets under ``/var/lib/kubelet`` whatever ``--root-dir`` says. It runs in a
  private mount namespace (``unshare -m --propagation private``) in which
  ``/var/log`` and ``/var/lib`` are overlays whose writes land in this directory,
  and ``/var/log/pods`` is a directory of ours.
- containerd runs outside that namespace and opens container logs under the
  sandbox's log directory itself (creating it): a small CRI proxy between the two
  (:class:`LogDirectoryProxy`) forwards every call unchanged except that it maps
  ``/var/log/pods/X`` to our directory's ``pod-logs/X``, which is what the
  kubelet's namespace shows at ``/var/log/pods``. Both sides then see the same
  files, and the streaming URLs (Exec, Attach, PortForward) are containerd's own.
- At start it sets six kernel tunables (``vm.overcommit_memory``,
  ``kernel.panic``...). In its namespace those six ``/proc/sys`` files are files
  of ours holding the values it wants, and ``--protect-kernel-defaults`` makes it
  refuse to start rather than write should one of them not be covered.
- ``--make-iptables-util-chains=false``: it adds no iptables chains.

While it runs it treats every kubelet-labelled pod in the runtime as its own: it
stops those not in its static-pod directory (and would collect their exited
containers but for ``--minimum-container-ttl-duration``). Never run other pods on
the same containerd at the same time. Everything is on loopback; cleanup stops a
node by its pid, removes its pods from containerd through the CRI, and removes the
directory (the kubelet's mounts vanish with its namespace).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from kubelet_kit.container import labels as kl
from kubelet_kit.cri import CRIRuntime
from kubelet_kit.cri.gen import api_pb2

from .containerd import BUSYBOX_IMAGE, PAUSE_IMAGE
from .kube_apiserver import (
    _PKI,
    LOOPBACK,
    clean_env,
    free_port,
    https_get,
    kubernetes_bin_dir,
)

#: Where the kubelet puts container logs, whatever its flags say.
KUBELET_POD_LOGS = "/var/log/pods"

#: The kernel tunables the kubelet sets at start, and the values it wants.
_KERNEL_TUNABLES = {
    "vm/overcommit_memory": 1,
    "vm/panic_on_oom": 0,
    "kernel/panic": 10,
    "kernel/panic_on_oops": 1,
    "kernel/keys/root_maxkeys": 1000000,
    "kernel/keys/root_maxbytes": 25000000,
}

#: Longer than this (in seconds) is no deadline at all, for the CRI proxy.
_NO_DEADLINE = 10 * 365 * 24 * 3600

#: Directories the kubelet writes to outside --root-dir; overlays in its namespace.
_OVERLAID = ("/var/log", "/var/lib")


def missing_parts() -> list[str]:
    """What this machine lacks to run the harness (empty when it can)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    kubelet = kubernetes_bin_dir() / "kubelet"
    if not os.access(kubelet, os.X_OK):
        missing.append(f"{kubelet} (built by scripts/kubernetes)")
    for tool in ("openssl", "unshare", "mount"):
        if shutil.which(tool) is None:
            missing.append(tool)
    if "overlay" not in Path("/proc/filesystems").read_text():
        missing.append("overlayfs")
    return missing


# ------------------------------------------------------------------ the CRI proxy


class LogDirectoryProxy:
    """A CRI proxy on a unix socket that forwards every call, as raw bytes, to
    ``upstream``, except that the log directory of RunPodSandbox and
    CreateContainer is moved from under ``/var/log/pods`` to under ``log_root``.

    Every RPC of both CRI versions is unary, so one generic handler serves all of
    them; errors come back with the upstream's code and message.
    """

    def __init__(self, upstream: str, socket: Path, log_root: Path) -> None:
        self.upstream = upstream
        self.socket = socket
        self.log_root = log_root
        #: Method names seen, in order (to tell what the kubelet asked).
        self.calls: collections.deque[str] = collections.deque(maxlen=2000)
        self._channel: grpc.Channel | None = None
        self._server: grpc.Server | None = None

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    def _move(self, directory: str) -> str:
        root = KUBELET_POD_LOGS + "/"
        if directory.startswith(root):
            return str(self.log_root / directory[len(root) :])
        return directory

    def _rewrite(self, method: str, request: bytes) -> bytes:
        if method.endswith("/RunPodSandbox"):
            run = api_pb2.RunPodSandboxRequest.FromString(request)
            run.config.log_directory = self._move(run.config.log_directory)
            return bytes(run.SerializeToString())
        if method.endswith("/CreateContainer"):
            create = api_pb2.CreateContainerRequest.FromString(request)
            create.sandbox_config.log_directory = self._move(create.sandbox_config.log_directory)
            return bytes(create.SerializeToString())
        return request

    def start(self) -> None:
        channel = grpc.insecure_channel(
            self.upstream,
            options=[
                ("grpc.max_receive_message_length", 64 << 20),
                ("grpc.max_send_message_length", 64 << 20),
            ],
        )
        self._channel = channel
        proxy = self

        class Handler(grpc.GenericRpcHandler):  # type: ignore[misc]  # grpc is untyped
            def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
                method: str = details.method
                forward = channel.unary_unary(method)

                def call(request: bytes, context: grpc.ServicerContext) -> bytes:
                    proxy.calls.append(method.rsplit("/", 1)[-1])
                    # A call without a deadline (the kubelet's PullImage) reports an
                    # infinite time remaining, which gRPC would take as already past.
                    remaining: float | None = context.time_remaining()
                    if remaining is not None and remaining > _NO_DEADLINE:
                        remaining = None
                    try:
                        reply: bytes = forward(proxy._rewrite(method, request), timeout=remaining)
                    except grpc.RpcError as exc:
                        context.abort(exc.code(), exc.details() or "")
                    return reply

                return grpc.unary_unary_rpc_method_handler(call)

        server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(max_workers=16),
            options=[
                ("grpc.max_receive_message_length", 64 << 20),
                ("grpc.max_send_message_length", 64 << 20),
            ],
        )
        server.add_generic_rpc_handlers((Handler(),))
        server.add_insecure_port(self.endpoint)
        server.start()
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=1).wait(5)
            self._server = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None


# ------------------------------------------------------------------ static pods


def busybox_container(name: str, script: str, **extra: Any) -> dict[str, Any]:
    """A busybox container running ``script`` with ``sh -c``."""
    return {
        "name": name,
        "image": BUSYBOX_IMAGE,
        # IfNotPresent: an earlier test may have removed the image, and the
        # harness's registry serves it again.
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", script],
        **extra,
    }


def static_pod(name: str, *containers: dict[str, Any]) -> dict[str, Any]:
    """A static pod in ``default`` on the host's network (the harness's CNI is
    loopback only)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "hostNetwork": True,
            "terminationGracePeriodSeconds": 1,
            "containers": list(containers),
        },
    }


# ------------------------------------------------------------------ nodes


class StandaloneNode:
    """What every standalone node of these tests has: a directory, a static-pod
    directory, a PKI, a node API on a loopback port that lets in only the client
    certificate made here, and a log read into a bounded buffer."""

    #: What the node is, for messages and test ids.
    kind = "node"

    def __init__(self, base: Path, runtime_endpoint: str, name_prefix: str) -> None:
        self.base = base
        self.runtime_endpoint = runtime_endpoint
        self.name = f"{name_prefix}-{uuid.uuid4().hex[:8]}"
        self.manifests = base / "manifests"
        self.pki_dir = base / "pki"
        self.ca_file = self.pki_dir / "ca.crt"
        self.serving_cert = self.pki_dir / "serving.crt"
        self.serving_key = self.pki_dir / "serving.key"
        self.client_cert = self.pki_dir / "client.crt"
        self.client_key = self.pki_dir / "client.key"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        #: The end of its log (stderr), bounded.
        self.log: collections.deque[str] = collections.deque(maxlen=3000)
        self._reader: threading.Thread | None = None
        self._context: ssl.SSLContext | None = None

    @property
    def url(self) -> str:
        """``https://127.0.0.1:PORT``, the node API."""
        return f"https://{LOOPBACK}:{self.port}"

    def static_pod_name(self, name: str) -> str:
        """The name a static pod gets on this node (``NAME-NODE``)."""
        return f"{name}-{self.name}"

    def log_tail(self, lines: int = 80) -> str:
        return "".join(list(self.log)[-lines:])

    # ---------------------------------------------------------------- setup

    def make_pki(self) -> None:
        """A CA that signs the serving certificate (SAN 127.0.0.1) and the one
        client certificate the node lets in."""
        pki = _PKI(self.pki_dir)
        ca = pki.ca("ca", f"kubelet-kit-test-{self.kind}-ca")
        pki.signed("serving", f"/CN={self.name}", "server", ca)
        pki.signed("client", "/O=system:masters/CN=kubelet-kit-test-client", "client", ca)

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that trusts the node's serving certificate and presents
        the client certificate."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.load_cert_chain(str(self.client_cert), str(self.client_key))
        return ctx

    def add_pod(self, pod: dict[str, Any]) -> str:
        """Write a static pod manifest; returns the pod's name on this node."""
        name = str(pod["metadata"]["name"])
        self.manifests.mkdir(parents=True, exist_ok=True)
        tmp = self.manifests / f".{name}.json.tmp"  # dot files are ignored
        tmp.write_text(json.dumps(pod))
        tmp.rename(self.manifests / f"{name}.json")
        return self.static_pod_name(name)

    def argv(self) -> list[str]:
        """The command that runs the node (``self.port`` is chosen by then)."""
        raise NotImplementedError

    def _prepare(self) -> None:
        """Everything the node needs before its process starts."""

    def start(self, wait: float = 90.0) -> None:
        """Start the node and wait until its node API answers ``/healthz``.

        Raises:
            RuntimeError: it exited, or did not answer within ``wait`` seconds; the
                message holds the end of its log.
        """
        self.manifests.mkdir(parents=True, exist_ok=True)
        if not self.ca_file.exists():
            self.make_pki()
        self._prepare()
        self.port = free_port()
        self.proc = subprocess.Popen(
            self.argv(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            # A session of its own: a Ctrl-C meant for pytest does not reach it first.
            start_new_session=True,
            cwd=self.base,
            env=clean_env(PYTHONUNBUFFERED="1"),
        )
        # Keep reading its log, so that a full pipe never stalls it and a failure
        # can show what it said.
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + wait
        while not self._healthy():
            if self.proc.poll() is not None:
                self._reader.join(5)
                raise RuntimeError(
                    f"the {self.kind} exited with {self.proc.returncode}; "
                    f"its log ends:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the {self.kind}'s node API did not answer within "
                    f"{wait:g}s; its log ends:\n{self.log_tail()}"
                )
            time.sleep(0.2)

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line.decode("utf-8", "replace"))

    def check(self) -> None:
        """Fail at once, with its log, if the node has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(
                f"the {self.kind} exited with {self.proc.returncode}:\n" + self.log_tail()
            )

    # ---------------------------------------------------------------- the node API

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
        """GET ``path`` on the node API with the client certificate."""
        if self._context is None:
            self._context = self.ssl_context()
        return https_get(self.port, self._context, path, timeout)

    def _healthy(self) -> bool:
        try:
            status, body = self.get("/healthz", timeout=2)
        except (OSError, ssl.SSLError):
            return False
        return status == 200 and body.strip() == b"ok"

    def pods(self) -> list[dict[str, Any]]:
        """The node's ``/pods`` (static pods, with their status in standalone mode)."""
        status, body = self.get("/pods")
        assert status == 200, f"/pods: {status} {body[:300]!r}"
        items: list[dict[str, Any]] = json.loads(body).get("items") or []
        return items

    def pod(self, name: str) -> dict[str, Any] | None:
        """The pod ``name`` (as named on this node) from ``/pods``."""
        for pod in self.pods():
            if pod.get("metadata", {}).get("name") == name:
                return pod
        return None

    def running(self, name: str) -> bool:
        """Whether the pod is Running with every container started."""
        status = (self.pod(name) or {}).get("status") or {}
        containers = status.get("containerStatuses") or []
        return (
            status.get("phase") == "Running"
            and bool(containers)
            and all("running" in (c.get("state") or {}) for c in containers)
        )

    def wait_running(self, name: str, timeout: float = 90.0) -> None:
        """Wait (bounded, polled) until the pod runs; the failure shows its status
        and the node's log.

        Raises:
            AssertionError: not within ``timeout`` seconds, or the node exited.
        """
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            if self.running(name):
                return
            if time.monotonic() > deadline:
                status = (self.pod(name) or {}).get("status")
                raise AssertionError(
                    f"pod {name} not Running within {timeout:g}s on the {self.kind}\n"
                    f"its status: {status}\nlog (tail):\n{self.log_tail()}"
                )
            time.sleep(0.2)

    # ---------------------------------------------------------------- teardown

    def stop(self) -> None:
        """SIGTERM, a bounded wait, then SIGKILL. Idempotent."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self._reader is not None:
            self._reader.join(5)
            self._reader = None

    async def remove_pods(self) -> None:
        """Stop and remove, through the CRI, every sandbox of this node's static
        pods (named ``NAME-NODE``)."""
        async with CRIRuntime(self.runtime_endpoint, timeout=30) as rt:
            for sandbox in await rt.list_pod_sandboxes():
                if not sandbox.labels.get(kl.POD_NAME, "").endswith(f"-{self.name}"):
                    continue
                with contextlib.suppress(Exception):
                    await rt.stop_pod_sandbox(sandbox.id)
                with contextlib.suppress(Exception):
                    await rt.remove_pod_sandbox(sandbox.id)

    def cleanup(self, runtime_up: Callable[[], bool] = lambda: True) -> None:
        """Stop the node, remove its pods (when the runtime is up; call from outside
        an event loop) and the directory."""
        self.stop()
        if runtime_up():
            with contextlib.suppress(Exception):
                asyncio.run(self.remove_pods())
        shutil.rmtree(self.base, ignore_errors=True)


class RealKubelet(StandaloneNode):
    """The real kubelet, standalone, in its private mount namespace, on the
    runtime at ``runtime_endpoint`` (through a :class:`LogDirectoryProxy`)."""

    kind = "kubelet"

    def __init__(self, base: Path, runtime_endpoint: str) -> None:
        super().__init__(base, runtime_endpoint, "kk-real")
        self.binary = kubernetes_bin_dir() / "kubelet"
        self.root_dir = base / "root"
        self.pod_logs = base / "pod-logs"
        self.proxy = LogDirectoryProxy(runtime_endpoint, base / "cri-proxy.sock", self.pod_logs)

    def _prepare(self) -> None:
        for d in (self.root_dir, self.pod_logs):
            d.mkdir(parents=True, exist_ok=True)
        self.proxy.start()

    def _namespace_script(self) -> str:
        """The shell that builds the private mount namespace, then becomes the
        kubelet (so the pid started is the kubelet's)."""
        lines = ["set -eu"]
        for i, directory in enumerate(_OVERLAID):
            upper = self.base / f"overlay{i}" / "upper"
            work = self.base / f"overlay{i}" / "work"
            upper.mkdir(parents=True, exist_ok=True)
            work.mkdir(parents=True, exist_ok=True)
            lines.append(
                f"mount -t overlay kk-real-kubelet -o lowerdir={directory},"
                f"upperdir={upper},workdir={work} {directory}"
            )
        lines += [
            f"mkdir -p {KUBELET_POD_LOGS} /var/log/containers",
            f"mount --bind {self.pod_logs} {KUBELET_POD_LOGS}",
        ]
        tunables = self.base / "sysctl"
        tunables.mkdir(exist_ok=True)
        for key, value in _KERNEL_TUNABLES.items():
            stand_in = tunables / key.replace("/", ".")
            stand_in.write_text(f"{value}\n")
            lines.append(f"mount --bind {stand_in} /proc/sys/{key}")
        lines.append('exec "$@"')
        return "\n".join(lines)

    def argv(self) -> list[str]:
        kubelet = [
            str(self.binary),
            "--container-runtime=remote",
            f"--container-runtime-endpoint={self.proxy.endpoint}",
            "--runtime-request-timeout=60s",
            f"--pod-manifest-path={self.manifests}",
            "--file-check-frequency=1s",
            "--sync-frequency=10s",
            f"--hostname-override={self.name}",
            f"--root-dir={self.root_dir}",
            f"--cert-dir={self.pki_dir}",
            f"--seccomp-profile-root={self.root_dir / 'seccomp'}",
            f"--volume-plugin-dir={self.base / 'volume-plugins'}",
            # The host's cgroups stay as they are.
            "--cgroups-per-qos=false",
            "--enforce-node-allocatable=",
            "--cgroup-driver=cgroupfs",
            "--fail-swap-on=false",
            # Refuse to start rather than write a kernel tunable (they are covered).
            "--protect-kernel-defaults=true",
            "--make-iptables-util-chains=false",
            "--oom-score-adj=0",
            f"--pod-infra-container-image={PAUSE_IMAGE}",
            # Never remove images or evict pods, and never collect another test's
            # exited containers from the shared runtime.
            "--image-gc-high-threshold=100",
            "--image-gc-low-threshold=99",
            "--eviction-hard=",
            "--minimum-container-ttl-duration=1h",
            f"--address={LOOPBACK}",
            f"--port={self.port}",
            "--healthz-port=0",
            "--read-only-port=0",
            f"--tls-cert-file={self.serving_cert}",
            f"--tls-private-key-file={self.serving_key}",
            f"--client-ca-file={self.ca_file}",
            "--anonymous-auth=false",
            "--authorization-mode=AlwaysAllow",
            "--v=2",
        ]
        return [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            self._namespace_script(),
            "kubelet",
            *kubelet,
        ]

    def stop(self) -> None:
        super().stop()
        self.proxy.stop()


class KubeletKitNode(StandaloneNode):
    """``kubelet-kit run``, standalone, on the runtime at ``runtime_endpoint``, with
    the same node API settings as :class:`RealKubelet`."""

    kind = "kubelet-kit"

    def __init__(self, base: Path, runtime_endpoint: str) -> None:
        super().__init__(base, runtime_endpoint, "kk-kit")

    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "kubelet_kit.cli",
            "run",
            "--pod-manifest-path",
            str(self.manifests),
            "--file-check-frequency",
            "0.3",
            "--container-runtime-endpoint",
            self.runtime_endpoint,
            "--root-dir",
            str(self.base / "state"),
            "--pod-logs-dir",
            str(self.base / "logs"),
            "--hostname-override",
            self.name,
            "--cgroups-per-qos",
            "false",
            "--address",
            LOOPBACK,
            "--port",
            str(self.port),
            "--healthz-port",
            "0",
            "--tls-cert-file",
            str(self.serving_cert),
            "--tls-private-key-file",
            str(self.serving_key),
            "--client-ca-file",
            str(self.ca_file),
            "--anonymous-auth",
            "false",
            "--authorization-mode",
            "AlwaysAllow",
        ]


def start_node(kind: str, base: Path, runtime_endpoint: str) -> StandaloneNode:
    """A started node of ``kind`` (``kubelet`` or ``kubelet-kit``); on failure
    everything is cleaned up before the error is raised."""
    node: StandaloneNode = (RealKubelet if kind == "kubelet" else KubeletKitNode)(
        base, runtime_endpoint
    )
    try:
        node.start()
    except BaseException:
        node.cleanup()
        raise
    return node
