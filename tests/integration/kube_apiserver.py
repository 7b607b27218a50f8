"""A real kube-apiserver (1.20.2) on loopback for the cluster-mode tests.

etcd (Debian's ``etcd-server``) with a temporary data directory and
kube-apiserver built by ``scripts/kubernetes``, both on 127.0.0.1 ports chosen
free, with every certificate and key made here with the ``openssl`` command:

- a cluster CA, which signs the API server's serving certificate (SAN 127.0.0.1,
  localhost) and the admin client certificate (O=system:masters) of
  :attr:`KubeAPIServer.admin_kubeconfig`;
- a second CA, :attr:`KubeAPIServer.kubelet_client_ca`, which signs only the
  certificate the API server presents to nodes (``kubectl logs``, ``exec``): a node
  started with ``--client-ca-file`` naming it lets the API server in and no one else;
- the service-account key (one RSA key signs and verifies).

No controller manager or scheduler runs: tests bind pods to nodes themselves.
Everything stays on loopback, and :meth:`KubeAPIServer.cleanup` stops both
processes by their pids and removes the temporary directory.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

# The conformance runner's PKI (the package at the repository's root, importable
# as the suite runs from there); clean_env: nothing started here may reach a proxy
# (re-exported for real_kubelet).
from conformance.pki import PKI
from conformance.pki import clean_env as clean_env

KUBERNETES_VERSION = "1.20.2"
LOOPBACK = "127.0.0.1"
#: The binaries this harness runs from the Kubernetes build.
BINARIES = ("kube-apiserver", "kubectl")


def kubernetes_bin_dir() -> Path:
    """Where the Kubernetes binaries are: ``$KUBELET_KIT_KUBERNETES_BIN``, or the cache
    ``scripts/kubernetes`` builds into (it tells, building nothing)."""
    explicit = os.environ.get("KUBELET_KIT_KUBERNETES_BIN")
    if explicit:
        return Path(explicit)
    script = Path(__file__).resolve().parents[2] / "scripts" / "kubernetes"
    out = subprocess.run(
        ["bash", str(script), "--bin-dir"], capture_output=True, text=True, check=True, timeout=30
    )
    return Path(out.stdout.strip())


def https_get(
    port: int, context: ssl.SSLContext, path: str, timeout: float = 5.0
) -> tuple[int, bytes]:
    """GET ``path`` on ``127.0.0.1:port`` over TLS with ``context`` (no proxy):
    the status and the body."""
    conn = http.client.HTTPSConnection(LOOPBACK, port, timeout=timeout, context=context)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def missing_parts() -> list[str]:
    """What this machine lacks to run the harness (empty when it can). Root is not
    needed."""
    missing = []
    bin_dir = kubernetes_bin_dir()
    for name in BINARIES:
        if not os.access(bin_dir / name, os.X_OK):
            missing.append(f"{bin_dir / name} (built by scripts/kubernetes)")
    for tool in ("etcd", "openssl"):
        if shutil.which(tool) is None:
            missing.append(tool)
    return missing


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


@attrs.frozen
class Completed:
    """What a command printed and its exit status."""

    rc: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return f"rc={self.rc}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


# ------------------------------------------------------------------ certificates

_REQ_CONFIG = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""


class _PKI(PKI):
    """The harness's keys and certificates in one directory: loopback serving names."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory, _REQ_CONFIG)


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


# ------------------------------------------------------------------ the harness


class KubeAPIServer:
    """etcd and kube-apiserver on loopback, with their certificates, in ``base``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.bin_dir = kubernetes_bin_dir()
        self.pki_dir = base / "pki"
        self.etcd_dir = base / "etcd"
        self.etcd_log = base / "etcd.log"
        self.apiserver_log = base / "kube-apiserver.log"
        self.admin_kubeconfig = base / "admin.kubeconfig"
        self.kubectl_cache = base / "kubectl-cache"
        #: The CA that signed the API server's certificate (clients verify it with this).
        self.ca_file = self.pki_dir / "ca.crt"
        #: The CA of the certificate the API server presents to nodes: start a node with
        #: ``--client-ca-file`` naming it.
        self.kubelet_client_ca = self.pki_dir / "kubelet-client-ca.crt"
        self.admin_cert = self.pki_dir / "admin.crt"
        self.admin_key = self.pki_dir / "admin.key"
        self.etcd_port = 0
        self.port = 0
        self.etcd: subprocess.Popen[bytes] | None = None
        self.apiserver: subprocess.Popen[bytes] | None = None
        self._context: ssl.SSLContext | None = None

    @property
    def url(self) -> str:
        """``https://127.0.0.1:PORT``."""
        return f"https://{LOOPBACK}:{self.port}"

    # ---------------------------------------------------------------- setup

    def make_pki(self) -> None:
        """Make every key and certificate, and the admin kubeconfig."""
        pki = _PKI(self.pki_dir)
        ca = pki.ca("ca", "kubelet-kit-test-cluster-ca")
        pki.signed("apiserver", "/CN=kube-apiserver", "server", ca)
        pki.signed("admin", "/O=system:masters/CN=kubelet-kit-test-admin", "client", ca)
        kubelet_ca = pki.ca("kubelet-client-ca", "kubelet-kit-test-kubelet-client-ca")
        pki.signed(
            "apiserver-kubelet-client",
            "/O=system:masters/CN=kube-apiserver-kubelet-client",
            "client",
            kubelet_ca,
        )
        pki.public_key(pki.key("sa", rsa=True))

    def write_kubeconfig(self) -> None:
        # Embedded data, so the file works from any directory and on its own.
        self.admin_kubeconfig.write_text(f"""\
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: {self.url}
    certificate-authority-data: {_b64(self.ca_file)}
users:
- name: admin
  user:
    client-certificate-data: {_b64(self.admin_cert)}
    client-key-data: {_b64(self.admin_key)}
contexts:
- name: admin@test
  context: {{cluster: test, user: admin}}
current-context: admin@test
""")
        self.admin_kubeconfig.chmod(0o600)

    def start(self, wait: float = 120.0) -> None:
        """Make the PKI, start etcd, then kube-apiserver, and wait until the API server
        is ready; ports taken between choosing and binding are retried.

        Raises:
            RuntimeError: a process exited or did not get ready within ``wait``
                seconds; the message names its log.
        """
        if not self.ca_file.exists():
            self.make_pki()
        deadline = time.monotonic() + wait
        for attempt in range(3):
            try:
                self._start_etcd(deadline)
                self._start_apiserver(deadline)
                return
            except _PortTaken:
                self.stop()
                if attempt == 2:
                    raise RuntimeError("no free loopback ports after 3 attempts") from None

    def _spawn(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as out:
            # A session of its own: a Ctrl-C meant for pytest does not reach it first,
            # and stop() still ends it by its pid.
            return subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.base,
                env=clean_env(),
            )

    def _start_etcd(self, deadline: float) -> None:
        self.etcd_port, peer = free_port(), free_port()
        client = f"http://{LOOPBACK}:{self.etcd_port}"
        peer_url = f"http://{LOOPBACK}:{peer}"
        self.etcd = self._spawn(
            [
                "etcd",
                "--name",
                "kk",
                "--data-dir",
                str(self.etcd_dir),
                "--listen-client-urls",
                client,
                "--advertise-client-urls",
                client,
                "--listen-peer-urls",
                peer_url,
                "--initial-advertise-peer-urls",
                peer_url,
                "--initial-cluster",
                f"kk={peer_url}",
                "--initial-cluster-state",
                "new",
            ],
            self.etcd_log,
        )
        self._wait(self.etcd, self.etcd_log, deadline, self._etcd_healthy, "etcd")

    def _start_apiserver(self, deadline: float) -> None:
        self.port = free_port()
        pki = self.pki_dir
        self.apiserver = self._spawn(
            [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers=http://{LOOPBACK}:{self.etcd_port}",
                f"--bind-address={LOOPBACK}",
                f"--advertise-address={LOOPBACK}",
                f"--secure-port={self.port}",
                f"--cert-dir={self.base / 'apiserver-certs'}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={self.ca_file}",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
                "--kubelet-preferred-address-types=InternalIP",
                "--authorization-mode=RBAC",
                "--allow-privileged=true",
                # No kube-proxy runs, so nothing ever connects to a service IP; taking them
                # from the loopback block keeps even the addresses handed out on loopback.
                "--service-cluster-ip-range=127.0.100.0/28",
                # Endpoints may not hold loopback addresses, so the API server's own
                # `kubernetes` endpoints are not kept.
                "--endpoint-reconciler-type=none",
                # ServiceAccount admission waits for tokens the controller manager makes,
                # and without its node lifecycle controller the not-ready taint that
                # TaintNodesByCondition adds would never be lifted: neither runs here.
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            ],
            self.apiserver_log,
        )
        self._wait(
            self.apiserver, self.apiserver_log, deadline, self._apiserver_ready, "kube-apiserver"
        )
        self.write_kubeconfig()

    def _wait(
        self,
        proc: subprocess.Popen[bytes],
        log: Path,
        deadline: float,
        ready: Callable[[], bool],
        what: str,
    ) -> None:
        while True:
            if proc.poll() is not None:
                text = log.read_text(errors="replace")
                if "address already in use" in text:
                    raise _PortTaken(what)
                # The directory goes away with the harness: quote the log's end.
                raise RuntimeError(
                    f"{what} exited with {proc.returncode}; its log ends:\n" + text[-3000:]
                )
            if ready():
                return
            if time.monotonic() > deadline:
                text = log.read_text(errors="replace")
                raise RuntimeError(f"{what} not ready in time; its log ends:\n" + text[-3000:])
            time.sleep(0.2)

    def _etcd_healthy(self) -> bool:
        conn = http.client.HTTPConnection(LOOPBACK, self.etcd_port, timeout=2)
        try:
            conn.request("GET", "/health")
            resp = conn.getresponse()
            return resp.status == 200 and b'"true"' in resp.read()
        except OSError:
            return False
        finally:
            conn.close()

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that trusts the cluster CA and presents the admin
        certificate."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.load_cert_chain(str(self.admin_cert), str(self.admin_key))
        return ctx

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
        """GET ``path`` on the API server as admin (no proxy, loopback only)."""
        if self._context is None:
            self._context = self.ssl_context()
        return https_get(self.port, self._context, path, timeout)

    def get_json(self, path: str) -> dict[str, Any] | None:
        """The object at ``path`` (``/api/v1/nodes/NAME``), None when there is none.

        Raises:
            AssertionError: the API server answered something other than 200 or 404.
        """
        status, body = self.get(path)
        if status == 404:
            return None
        assert status == 200, f"GET {path}: {status} {body[:500]!r}"
        got: dict[str, Any] = json.loads(body)
        return got

    def _apiserver_ready(self) -> bool:
        try:
            status, body = self.get("/readyz", timeout=2)
        except (OSError, ssl.SSLError):
            return False
        return status == 200 and body.strip() == b"ok"

    # ---------------------------------------------------------------- use

    def kubectl_argv(self, *args: str, request_timeout: float | None = None) -> list[str]:
        """The command line of the built kubectl as admin (for a long-running one,
        such as ``logs -f`` or ``port-forward``, started by the caller)."""
        argv = [
            str(self.bin_dir / "kubectl"),
            f"--kubeconfig={self.admin_kubeconfig}",
            # Its discovery cache goes here rather than under the user's home.
            f"--cache-dir={self.kubectl_cache}",
        ]
        if request_timeout is not None:
            argv.append(f"--request-timeout={int(request_timeout)}s")
        return [*argv, *args]

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 60.0) -> Completed:
        """Run the built kubectl as admin.

        Raises:
            AssertionError: it did not finish within ``timeout`` seconds.
        """
        argv = self.kubectl_argv(*args, request_timeout=timeout)
        try:
            done = subprocess.run(
                argv,
                input=input,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=clean_env(),
                cwd=self.base,
            )
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(
                f"kubectl {' '.join(args)}: no answer within {timeout:g}s"
            ) from exc
        return Completed(done.returncode, done.stdout, done.stderr)

    # ---------------------------------------------------------------- teardown

    @staticmethod
    def _end(proc: subprocess.Popen[bytes] | None) -> None:
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def stop(self) -> None:
        """Stop kube-apiserver, then etcd (SIGTERM, then SIGKILL). Idempotent."""
        self._end(self.apiserver)
        self.apiserver = None
        self._end(self.etcd)
        self.etcd = None
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self.etcd_dir)

    def cleanup(self) -> None:
        """Stop both processes and remove the directory."""
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)


class _PortTaken(Exception):
    """A port chosen free was taken before the process bound it."""
