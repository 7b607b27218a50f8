"""A one-node Kubernetes 1.20.2 cluster inside network, mount and pid namespaces of
its own, for the conformance suite.

:class:`Cluster` runs in a process that ``scripts/conformance`` started with
``unshare --net --mount --pid --fork --kill-child --mount-proc``: every address it
uses exists only in that network namespace, every mount only in that mount
namespace, and when the namespace's first process ends the kernel ends whatever is
left in it. Inside:

- the network: ``lo`` up; a veth pair (``kk0``/``kk1``, the ``dummy`` link type is
  missing on these kernels) whose inner end ``kk0`` carries the node's address
  :data:`NODE_IP`; the default route points at an address nobody holds, so nothing
  is ever forwarded anywhere; the pods on a CNI bridge (``cni0``, host-local IPAM in
  :data:`POD_CIDR`, its state under the run directory);
- tmpfs over ``/var/lib`` (holding ``/var/lib/kubelet`` and ``/var/lib/cni``),
  ``/var/log`` (``/var/log/pods``, ``/var/log/containers``), ``/run/netns`` and
  ``/run/containerd``: the kubelet's fixed paths, and the runtime's, are this run's
  alone and vanish with it;
- etcd (Debian's) on loopback; kube-apiserver (``--allow-privileged=true``, Node and
  RBAC authorization, NodeRestriction), advertising :data:`NODE_IP`;
  kube-controller-manager (service-account tokens, namespace deletion, the taint
  manager); kube-scheduler;
- containerd with its own root, state, socket and config (``restrict_oom_score_adj``,
  the overlayfs snapshotter, the bridge network), the test images imported;
- image registries serving ``k8s.gcr.io`` and ``gcr.io`` on addresses of the
  namespace, those names in a hosts file over ``/etc/hosts`` (see
  :mod:`conformance.registries`);
- the node: ``kubelet-kit run`` (``node="kubelet-kit"``) or the real kubelet 1.20.2
  (``node="real"``), with the identity ``system:node:NAME``.

:meth:`Cluster.stop` ends the containers first (every task in the runtime, then the
shims), then the processes it recorded, in the reverse order of their start.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import images, pki, registries
from .pki import clean_env as clean_env  # re-exported: run.py imports it from here

NODE_IP = "10.199.0.2"
NODE_PREFIX = 24
#: An address in the node's subnet nobody holds: the default route's gateway.
DEAD_GATEWAY = "10.199.0.1"
POD_CIDR = "10.200.0.0/24"
SERVICE_CIDR = "10.96.0.0/24"
NODE_NAME = "conformance-node"
APISERVER_PORT = 6443
#: The prefix of each run's cgroup root (see :attr:`Cluster.cgroup_root`).
CGROUP_PREFIX = "/kubelet-kit-conformance"
NAMESPACE = "k8s.io"


def sh(*argv: str, check: bool = True, timeout: float = 60) -> str:
    done = subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout, env=clean_env()
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


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
subjectAltName = {sans}
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[registry]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = {registry_sans}
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""


class PKI(pki.PKI):
    """The cluster's keys and certificates, in one directory: serving names of the API
    server and of the image registries."""

    def __init__(self, directory: Path) -> None:
        names = [
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "localhost",
        ]
        sans = ", ".join(
            [f"IP:{ip}" for ip in ("127.0.0.1", NODE_IP, "10.96.0.1")] + [f"DNS:{n}" for n in names]
        )
        registry_sans = ", ".join(
            [f"DNS:{n}" for n in registries.REGISTRIES]
            + [f"IP:{a}" for a, _ in registries.REGISTRIES.values()]
        )
        super().__init__(directory, _REQ_CONFIG.format(sans=sans, registry_sans=registry_sans))


def kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path) -> Path:
    path.write_text(f"""\
apiVersion: v1
kind: Config
clusters:
- name: conformance
  cluster:
    server: {server}
    certificate-authority-data: {_b64(ca)}
users:
- name: user
  user:
    client-certificate-data: {_b64(cert)}
    client-key-data: {_b64(key)}
contexts:
- name: user@conformance
  context: {{cluster: conformance, user: user}}
current-context: user@conformance
""")
    path.chmod(0o600)
    return path


# ------------------------------------------------------------------ the cluster


class Cluster:
    """The one-node cluster, its files in ``base`` (logs in ``base/logs``)."""

    def __init__(
        self,
        base: Path,
        bin_dir: Path,
        tree: Path,
        node: str,
        repo: Path,
        log: Callable[[str], None] = print,
    ) -> None:
        assert node in ("kubelet-kit", "real"), node
        self.base = base
        self.bin = bin_dir
        self.tree = tree
        self.node = node
        self.repo = repo
        self.log = log
        self.logs = base / "logs"
        self.pki_dir = base / "pki"
        self.ctd = base / "containerd"
        self.socket = self.ctd / "containerd.sock"
        self.admin_kubeconfig = base / "admin.kubeconfig"
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.pid_file = base / "pids"
        # The machine's cgroup tree is not namespaced: each run's root is its own, so
        # that two runs at once (two output directories) never touch each other's
        # cgroups, at start or at teardown.
        digest = hashlib.sha256(str(base.resolve()).encode()).hexdigest()[:12]
        self.cgroup_root = f"{CGROUP_PREFIX}-{digest}"
        self.registries: registries.Registries | None = None

    # ---------------------------------------------------------------- helpers

    def _spawn(self, name: str, argv: list[str], **env: str) -> subprocess.Popen[bytes]:
        self.logs.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{name}.log").open("ab") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.base,
                env=clean_env(**env),
            )
        self.procs.append((name, proc))
        with self.pid_file.open("a") as f:
            f.write(f"{proc.pid} {name}\n")
        return proc

    def _wait(
        self, name: str, proc: subprocess.Popen[bytes], ready: Callable[[], bool], timeout: float
    ) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                tail = (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with {proc.returncode}; its log ends:\n{tail}")
            try:
                if ready():
                    return
            except Exception:  # not up yet
                pass
            if time.monotonic() > deadline:
                tail = (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} not ready in {timeout:g}s; its log ends:\n{tail}")
            time.sleep(0.5)

    def _https_ok(self, url: str, cert: tuple[Path, Path] | None = None) -> bool:
        ctx = ssl.create_default_context(cafile=str(self.pki_dir / "ca.crt"))
        if cert is None:
            cert = (self.pki_dir / "admin.crt", self.pki_dir / "admin.key")
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx)
        )
        with opener.open(url, timeout=3) as resp:
            return bool(resp.status == 200)

    def kubectl(self, *args: str, timeout: float = 60) -> str:
        return sh(
            str(self.bin / "kubectl"),
            f"--kubeconfig={self.admin_kubeconfig}",
            f"--cache-dir={self.base / 'kubectl-cache'}",
            *args,
            timeout=timeout,
        )

    def get_json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", "-o", "json", *args))

    # ---------------------------------------------------------------- start

    def start(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        if os.environ.get("KUBELET_KIT_CONFORMANCE_NS") != "1":
            raise RuntimeError(
                "the cluster runs only inside the namespaces that scripts/conformance makes"
            )
        self._network()
        self._mounts()
        self._pki()
        self._etcd()
        self._apiserver()
        self._controller_manager()
        self._scheduler()
        self._containerd()
        self._images()
        self._registries()
        self._node()
        self._wait_node_ready()

    def _network(self) -> None:
        self.log(f"network: lo, kk0 {NODE_IP}/{NODE_PREFIX} (namespace only)")
        sh("ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", "kk0", "type", "veth", "peer", "name", "kk1")
        sh("ip", "addr", "add", f"{NODE_IP}/{NODE_PREFIX}", "dev", "kk0")
        sh("ip", "link", "set", "kk0", "up")
        sh("ip", "link", "set", "kk1", "up")
        sh("ip", "route", "add", "default", "via", DEAD_GATEWAY, "dev", "kk0")
        for addr, _ in registries.REGISTRIES.values():
            sh("ip", "addr", "add", f"{addr}/32", "dev", "kk0")
        # Sanity: this is not the machine's network namespace.
        links = sh("ip", "-o", "link", "show")
        assert len(links.splitlines()) == 3, f"not a fresh network namespace:\n{links}"

    def _mounts(self) -> None:
        for point in ("/var/lib", "/var/log", "/run/netns", "/run/containerd"):
            if not Path(point).is_dir():
                continue
            sh("mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", point)
        for d in ("/var/lib/kubelet", "/var/lib/cni", "/var/log/pods", "/var/log/containers"):
            Path(d).mkdir(parents=True, exist_ok=True)
        # The registries' names, for containerd and ctr (Go's resolver reads
        # /etc/hosts first): a bind mount, seen in this mount namespace only.
        hosts = self.base / "hosts"
        hosts.write_text(registries.hosts_file(Path("/etc/hosts").read_text()))
        sh("mount", "--bind", str(hosts), "/etc/hosts")

    def _pki(self) -> None:
        pki = PKI(self.pki_dir)
        ca = pki.ca("ca", "kubelet-kit-conformance-ca")
        pki.signed("apiserver", "/CN=kube-apiserver", "server", ca)
        pki.signed("admin", "/O=system:masters/CN=conformance-admin", "client", ca)
        pki.signed("node", f"/O=system:nodes/CN=system:node:{NODE_NAME}", "client", ca)
        kca = pki.ca("kubelet-client-ca", "kubelet-kit-conformance-kubelet-client-ca")
        pki.signed(
            "apiserver-kubelet-client",
            "/O=system:masters/CN=kube-apiserver-kubelet-client",
            "client",
            kca,
        )
        pki.public_key(pki.key("sa", rsa=True))
        pki.signed("registry", "/CN=conformance-registry", "registry", ca)
        p = self.pki_dir
        kubeconfig(
            self.admin_kubeconfig,
            f"https://127.0.0.1:{APISERVER_PORT}",
            p / "ca.crt",
            p / "admin.crt",
            p / "admin.key",
        )
        kubeconfig(
            self.base / "node.kubeconfig",
            f"https://{NODE_IP}:{APISERVER_PORT}",
            p / "ca.crt",
            p / "node.crt",
            p / "node.key",
        )

    def _etcd(self) -> None:
        self.log("etcd")
        proc = self._spawn(
            "etcd",
            [
                "etcd",
                "--name",
                "conformance",
                "--data-dir",
                str(self.base / "etcd"),
                "--listen-client-urls",
                "http://127.0.0.1:2379",
                "--advertise-client-urls",
                "http://127.0.0.1:2379",
                "--listen-peer-urls",
                "http://127.0.0.1:2380",
                "--initial-advertise-peer-urls",
                "http://127.0.0.1:2380",
                "--initial-cluster",
                "conformance=http://127.0.0.1:2380",
                "--initial-cluster-state",
                "new",
                "--unsafe-no-fsync",
            ],
        )

        def ready() -> bool:
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with opener.open("http://127.0.0.1:2379/health", timeout=2) as r:
                return b"true" in r.read()

        self._wait("etcd", proc, ready, 60)

    def _apiserver(self) -> None:
        self.log("kube-apiserver")
        p = self.pki_dir
        proc = self._spawn(
            "kube-apiserver",
            [
                str(self.bin / "kube-apiserver"),
                "--etcd-servers=http://127.0.0.1:2379",
                "--bind-address=0.0.0.0",
                f"--advertise-address={NODE_IP}",
                f"--secure-port={APISERVER_PORT}",
                f"--cert-dir={self.base / 'apiserver-certs'}",
                f"--tls-cert-file={p / 'apiserver.crt'}",
                f"--tls-private-key-file={p / 'apiserver.key'}",
                f"--client-ca-file={p / 'ca.crt'}",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={p / 'sa.pub'}",
                f"--service-account-signing-key-file={p / 'sa.key'}",
                f"--kubelet-client-certificate={p / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={p / 'apiserver-kubelet-client.key'}",
                "--kubelet-preferred-address-types=InternalIP",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                "--allow-privileged=true",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
            ],
        )
        self._wait(
            "kube-apiserver",
            proc,
            lambda: self._https_ok(f"https://127.0.0.1:{APISERVER_PORT}/readyz"),
            180,
        )

    def _controller_manager(self) -> None:
        self.log("kube-controller-manager")
        p = self.pki_dir
        proc = self._spawn(
            "kube-controller-manager",
            [
                str(self.bin / "kube-controller-manager"),
                f"--kubeconfig={self.admin_kubeconfig}",
                f"--authentication-kubeconfig={self.admin_kubeconfig}",
                f"--authorization-kubeconfig={self.admin_kubeconfig}",
                f"--service-account-private-key-file={p / 'sa.key'}",
                f"--root-ca-file={p / 'ca.crt'}",
                f"--cert-dir={self.base / 'kcm-certs'}",
                "--leader-elect=false",
                "--use-service-account-credentials=false",
                "--bind-address=127.0.0.1",
                "--port=0",
            ],
        )
        time.sleep(1)
        if proc.poll() is not None:
            self._wait("kube-controller-manager", proc, lambda: False, 0)

    def _scheduler(self) -> None:
        self.log("kube-scheduler")
        proc = self._spawn(
            "kube-scheduler",
            [
                str(self.bin / "kube-scheduler"),
                f"--kubeconfig={self.admin_kubeconfig}",
                f"--authentication-kubeconfig={self.admin_kubeconfig}",
                f"--authorization-kubeconfig={self.admin_kubeconfig}",
                f"--cert-dir={self.base / 'scheduler-certs'}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--port=0",
            ],
        )
        time.sleep(1)
        if proc.poll() is not None:
            self._wait("kube-scheduler", proc, lambda: False, 0)

    def _containerd(self) -> None:
        self.log("containerd")
        for d in ("root", "state", "cni", "cni-state"):
            (self.ctd / d).mkdir(parents=True, exist_ok=True)
        (self.ctd / "cni" / "10-conformance.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "0.4.0",
                    "name": "conformance",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": "cni0",
                            "isGateway": True,
                            "ipMasq": False,
                            "hairpinMode": True,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [[{"subnet": POD_CIDR}]],
                                "routes": [{"dst": "0.0.0.0/0"}],
                                "dataDir": str(self.ctd / "cni-state"),
                            },
                        },
                        {"type": "portmap", "capabilities": {"portMappings": True}},
                    ],
                },
                indent=1,
            )
        )
        cri = '[plugins."io.containerd.grpc.v1.cri"]'
        (self.ctd / "config.toml").write_text(
            "version = 2\n"
            f'root = "{self.ctd / "root"}"\n'
            f'state = "{self.ctd / "state"}"\n'
            f'\n[grpc]\n  address = "{self.socket}"\n'
            f'\n[ttrpc]\n  address = "{self.socket}.ttrpc"\n'
            '\n[debug]\n  level = "info"\n'
            f"\n{cri}\n"
            "  restrict_oom_score_adj = true\n"
            f'  sandbox_image = "{images.PAUSE}"\n'
            f"\n{cri[:-1]}.containerd]\n"
            '  snapshotter = "overlayfs"\n'
            f"\n{cri[:-1]}.cni]\n"
            '  bin_dir = "/usr/lib/cni"\n'
            f'  conf_dir = "{self.ctd / "cni"}"\n'
            + registries.containerd_config(self.pki_dir / "ca.crt")
        )
        proc = self._spawn("containerd", ["containerd", "--config", str(self.ctd / "config.toml")])
        self._wait(
            "containerd",
            proc,
            lambda: (
                self.socket.exists()
                and bool(sh("ctr", "-a", str(self.socket), "version", timeout=10))
            ),
            60,
        )

    def ctr(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        return sh(
            "ctr", "-a", str(self.socket), "-n", NAMESPACE, *args, check=check, timeout=timeout
        )

    def _images(self) -> None:
        self.log("test images: assembling and importing")
        tars = images.build_all(self.bin, self.tree, self.base / "images")
        for tar in tars.values():
            self.ctr("images", "import", "--snapshotter", "overlayfs", str(tar))
        have = self.ctr("images", "ls", "-q").split()
        missing = [n for n in tars if n not in have]
        assert not missing, f"images not imported: {missing}"
        for tar in tars.values():
            tar.unlink()

    def _registries(self) -> None:
        if not registries.available():
            self.log(
                f"no {registries.PROGRAM} or htpasswd (scripts/setup installs them): "
                "the image-pull specs will fail"
            )
            return
        self.log(
            "image registries: "
            + ", ".join(f"{n} on {a}:443" for n, (a, _) in registries.REGISTRIES.items())
        )
        p = self.pki_dir
        regs = registries.Registries(
            self.base / "registries", p / "ca.crt", (p / "registry.crt", p / "registry.key")
        )
        regs.start(self._spawn, self._wait, sh)
        regs.push(self.ctr)
        self.registries = regs

    def _node(self) -> None:
        p = self.pki_dir
        root_dir = "/var/lib/kubelet"
        if self.node == "real":
            self.log("node: the real kubelet 1.20.2")
            proc = self._spawn(
                "node",
                [
                    str(self.bin / "kubelet"),
                    f"--kubeconfig={self.base / 'node.kubeconfig'}",
                    f"--hostname-override={NODE_NAME}",
                    f"--node-ip={NODE_IP}",
                    f"--root-dir={root_dir}",
                    f"--cert-dir={root_dir}/pki",
                    "--container-runtime=remote",
                    f"--container-runtime-endpoint=unix://{self.socket}",
                    "--runtime-request-timeout=5m",
                    f"--client-ca-file={p / 'kubelet-client-ca.crt'}",
                    "--anonymous-auth=false",
                    "--authorization-mode=AlwaysAllow",
                    "--fail-swap-on=false",
                    "--cgroups-per-qos=false",
                    "--enforce-node-allocatable=",
                    f"--cgroup-root={self.cgroup_root}",
                    "--cgroup-driver=cgroupfs",
                    "--read-only-port=0",
                    "--healthz-bind-address=127.0.0.1",
                    f"--pod-manifest-path={self.base / 'manifests'}",
                    "--v=2",
                ],
            )
        else:
            self.log("node: kubelet-kit run")
            config = self.base / "kubelet.yaml"
            config.write_text(
                json.dumps(
                    {
                        "apiVersion": "kubelet.config.k8s.io/v1beta1",
                        "kind": "KubeletConfiguration",
                        "containerRuntimeEndpoint": f"unix://{self.socket}",
                        "cgroupsPerQOS": False,
                        "cgroupRoot": self.cgroup_root,
                        "staticPodPath": str(self.base / "manifests"),
                        "authentication": {
                            "anonymous": {"enabled": False},
                            "x509": {"clientCAFile": str(p / "kubelet-client-ca.crt")},
                        },
                        "authorization": {"mode": "AlwaysAllow"},
                    },
                    indent=1,
                )
            )
            proc = self._spawn(
                "node",
                [
                    str(self.repo / ".venv/bin/kubelet-kit"),
                    "run",
                    "--kubeconfig",
                    str(self.base / "node.kubeconfig"),
                    "--config",
                    str(config),
                    "--hostname-override",
                    NODE_NAME,
                    "--node-ip",
                    NODE_IP,
                    "--root-dir",
                    root_dir,
                    "--client-ca-file",
                    str(p / "kubelet-client-ca.crt"),
                ],
            )
        (self.base / "manifests").mkdir(exist_ok=True)
        self._node_proc = proc

    def _wait_node_ready(self) -> None:
        def ready() -> bool:
            node = self.get_json("node", NODE_NAME)
            return any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in node["status"].get("conditions", [])
            )

        self._wait("node", self._node_proc, ready, 180)
        self.log(f"node {NODE_NAME} Ready")

    # ---------------------------------------------------------------- stop

    def node_alive(self) -> bool:
        return self._node_proc.poll() is None

    def stop(self) -> None:
        """The node first (nothing starts containers again), then the containers (every
        task in the runtime, then the shims), then every other recorded process, last
        started first; then what is left under the run directory is unmounted."""
        self.log("teardown: the node, the containers, then the recorded processes")
        for name, proc in self.procs:
            if name == "node":
                self._end(proc)
        if self.socket.exists() and any(
            n == "containerd" and p.poll() is None for n, p in self.procs
        ):
            ids = self.ctr("tasks", "ls", "-q", check=False, timeout=30).split()
            self._ids = self.ctr("containers", "ls", "-q", check=False, timeout=30).split()
            for cid in ids:
                self.ctr("tasks", "kill", "-a", "-s", "SIGKILL", cid, check=False, timeout=30)
            for cid in ids:
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    self.ctr("tasks", "delete", "-f", cid, check=False, timeout=30)
                    if cid not in self.ctr("tasks", "ls", "-q", check=False, timeout=30):
                        break
                    time.sleep(0.2)
            for cid in self.ctr("containers", "ls", "-q", check=False, timeout=30).split():
                self.ctr("containers", "delete", cid, check=False, timeout=30)
        # Shims that name our directory, before containerd goes.
        self._kill_marked(b"containerd-shim")
        for _name, proc in reversed(self.procs):
            self._end(proc)
        self._kill_marked()
        self._remove_cgroups()
        mounts = []
        with contextlib.suppress(OSError):
            for line in Path("/proc/self/mountinfo").read_text().splitlines():
                point = line.split()[4]
                if point.startswith(str(self.base) + "/"):
                    mounts.append(point)
        for point in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", point], check=False, capture_output=True)

    @staticmethod
    def _end(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def _kill_marked(self, kind: bytes = b"") -> None:
        """SIGKILL every process whose command line names the run directory (and
        ``kind``)."""
        marker = str(self.base).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in (1, os.getpid()):
                continue
            with contextlib.suppress(OSError):
                cmdline = (entry / "cmdline").read_bytes()
                if marker in cmdline and kind in cmdline:
                    os.kill(int(entry.name), signal.SIGKILL)

    def _remove_cgroups(self) -> None:
        """The (empty by now) cgroups under this run's cgroup root, deepest first."""
        name = self.cgroup_root.strip("/")
        # containerd's default place, for a node that names no cgroup parent.
        for cid in getattr(self, "_ids", []):
            for leftover in Path("/sys/fs/cgroup").glob(f"*/k8s.io/{cid}"):
                with contextlib.suppress(OSError):
                    leftover.rmdir()
        for hierarchy in Path("/sys/fs/cgroup").iterdir():
            top = hierarchy / name
            if not top.is_dir():
                continue
            dirs = [d for d in top.rglob("*") if d.is_dir()]
            for d in [*sorted(dirs, key=lambda d: len(d.parts), reverse=True), top]:
                with contextlib.suppress(OSError):
                    d.rmdir()
