"""A private containerd for the integration tests.

Started in the background with its own root, state, socket and config (the CRI
plugin with restrict_oom_score_adj, the native snapshotter, CNI from the system
with a loopback-only network), fed a busybox image
built here as an OCI layout tar, and cleaned up completely afterwards: pods
removed through the CRI, containerd stopped by its pid, leftover shims killed,
leftover mounts under its root unmounted.
"""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tarfile
import threading
import time
from pathlib import Path

# The conformance runner's image writer (the package at the repository's root,
# importable as the suite runs from there).
from conformance import images
from kubelet_kit.testing.fake_runtime import CONFORMANCE_SAME_IMAGE_REFS, CONFORMANCE_USER_IMAGES

#: Names the images are imported under (and served by the test registry).
PAUSE_IMAGE = "kubelet-kit.test/pause:1"
BUSYBOX_IMAGE = "kubelet-kit.test/busybox:1"
NAMESPACE = "k8s.io"

_APPLETS = (
    "sh",
    "sleep",
    "echo",
    "cat",
    "env",
    "ls",
    "true",
    "false",
    "printf",
    "id",
    "kill",
    "httpd",
    "wc",
    "head",
    "grep",
    "hostname",
    "ps",
    "mkdir",
    "touch",
    "test",
    "seq",
    "tar",
    "stty",
)


def missing_parts() -> list[str]:
    """What this machine lacks to run the harness (empty when it can)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    for tool in ("containerd", "ctr", "runc"):
        if shutil.which(tool) is None:
            missing.append(tool)
    if not Path("/bin/busybox").is_file():
        missing.append("/bin/busybox")
    return missing


# ------------------------------------------------------------------ the image


def _layer_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("bin", "tmp", "etc", "proc", "sys", "dev", "root"):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        data = Path("/bin/busybox").read_bytes()
        info = tarfile.TarInfo("bin/busybox")
        info.size = len(data)
        info.mode = 0o755
        tar.addfile(info, io.BytesIO(data))
        for applet in _APPLETS:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type = tarfile.SYMTYPE
            info.linkname = "busybox"
            info.mode = 0o777
            tar.addfile(info)
        passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
        group = b"root:x:0:\nnogroup:x:65534:\n"
        for name, body in (("etc/passwd", passwd), ("etc/group", group)):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


def build_image_tar(
    path: Path, name: str, entrypoint: list[str], cmd: list[str], user: str | None = None
) -> tuple[dict[str, bytes], str]:
    """Write an OCI image layout tar of busybox, referenced as ``name``, whose
    config names ``user`` as its ``User`` (None: none).

    Returns:
        The blobs by digest and the manifest's digest (what a registry serves).
    """
    return images.write_layout(
        path, name, _layer_tar(), env=["PATH=/bin"], entrypoint=entrypoint, cmd=cmd, user=user
    )


# -------------------------------------------------------------------- registry

#: The registry host the images are named under; containerd mirrors it to
#: :class:`Registry` on a loopback port.
REGISTRY_HOST = "kubelet-kit.test"
#: An image only the registry holds (never imported), for real pulls.
REGISTRY_ONLY_IMAGE = f"{REGISTRY_HOST}/registry-only:1"
#: One image the registry serves under several references (only there), and
#: images whose config names a user, by reference with that user: the
#: conformance kit's ``same_image_refs`` and ``user_images``, under the names
#: the served fake knows them by.
SAME_IMAGE_REFS = CONFORMANCE_SAME_IMAGE_REFS
USER_IMAGES = CONFORMANCE_USER_IMAGES

_MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


class Registry:
    """A read-only OCI distribution registry (the v2 API subset containerd uses to
    pull: manifests and blobs by tag or digest), on 127.0.0.1, in a thread."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.tags: dict[tuple[str, str], str] = {}  # (repository, tag) -> manifest digest
        self.requests: list[str] = []
        registry = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                self._serve(body=False)

            def do_GET(self) -> None:
                self._serve(body=True)

            def _serve(self, body: bool) -> None:
                path = self.path.split("?", 1)[0]
                registry.requests.append(f"{self.command} {path}")
                if path in ("/v2", "/v2/"):
                    return self._reply(200, b"{}", "application/json", body)
                m = re.match(r"^/v2/(.+)/(manifests|blobs)/([^/]+)$", path)
                if m is None:
                    return self._reply(404, b"{}", "application/json", body)
                repo, kind, ref = m.groups()
                digest = ref if ref.startswith("sha256:") else registry.tags.get((repo, ref), "")
                data = registry.blobs.get(digest)
                if data is None or (
                    kind == "manifests"
                    and (repo, ref) not in registry.tags
                    and digest not in registry.tags.values()
                ):
                    code = "MANIFEST_UNKNOWN" if kind == "manifests" else "BLOB_UNKNOWN"
                    err = json.dumps({"errors": [{"code": code, "message": "unknown"}]})
                    return self._reply(404, err.encode(), "application/json", body)
                ctype = _MANIFEST_TYPE if kind == "manifests" else "application/octet-stream"
                self._reply(200, data, ctype, body, digest)

            def _reply(
                self, status: int, data: bytes, ctype: str, body: bool, digest: str = ""
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Docker-Distribution-API-Version", "registry/2.0")
                if digest:
                    self.send_header("Docker-Content-Digest", digest)
                self.end_headers()
                if body:
                    self.wfile.write(data)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def add(self, name: str, blobs: dict[str, bytes], manifest_digest: str) -> None:
        """Serve an image as ``name`` (``REGISTRY_HOST/<repository>:<tag>``)."""
        repo, _, tag = name.removeprefix(f"{REGISTRY_HOST}/").rpartition(":")
        self.blobs.update(blobs)
        self.tags[(repo, tag)] = manifest_digest

    def start(self) -> None:
        """Serve in a background thread. Idempotent."""
        if not self._thread.is_alive():
            self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the port."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


# ------------------------------------------------------------------ containerd


class Containerd:
    """One private containerd process and everything it leaves behind."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "root"
        self.state = base / "state"
        self.socket = base / "containerd.sock"
        self.cni_conf = base / "cni"
        self.logs = base / "pod-logs"
        self.config = base / "config.toml"
        self.log_file = base / "containerd.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.registry = Registry()

    @property
    def endpoint(self) -> str:
        """The CRI endpoint, ``unix://...``."""
        return f"unix://{self.socket}"

    @property
    def cgroup_parent(self) -> str:
        """A cgroup parent of this run's own (cgroupfs syntax) for the sandboxes:
        containerd measures sandbox stats through it, and :meth:`cleanup` removes it."""
        return f"/kubelet-kit-it-{self.base.name}"

    def write_config(self) -> None:
        """Write the TOML config; top-level keys come before any table header."""
        for d in (self.root, self.state, self.cni_conf, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        # A loopback-only network: the runtime reports NetworkReady, and a sandbox
        # without host networking gets a namespace with just "lo", so no bridge or
        # other interface is ever made on the host.
        (self.cni_conf / "10-kubelet-kit-loopback.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "0.4.0",
                    "name": "kubelet-kit-loopback",
                    "plugins": [{"type": "loopback"}],
                }
            )
        )
        cri = '[plugins."io.containerd.grpc.v1.cri"]'
        self.config.write_text(
            "version = 2\n"
            f'root = "{self.root}"\n'
            f'state = "{self.state}"\n'
            "\n[grpc]\n"
            f'  address = "{self.socket}"\n'
            "\n[ttrpc]\n"
            f'  address = "{self.socket}.ttrpc"\n'
            "\n[debug]\n"
            '  level = "info"\n'
            f"\n{cri}\n"
            "  restrict_oom_score_adj = true\n"
            f'  sandbox_image = "{PAUSE_IMAGE}"\n'
            f"\n{cri[:-1]}.containerd]\n"
            '  snapshotter = "native"\n'
            f"\n{cri[:-1]}.cni]\n"
            '  bin_dir = "/usr/lib/cni"\n'
            f'  conf_dir = "{self.cni_conf}"\n'
            f'\n{cri[:-1]}.registry.mirrors."{REGISTRY_HOST}"]\n'
            f'  endpoint = ["{self.registry.url}"]\n'
        )

    def start(self, wait: float = 30.0) -> None:
        """Start the registry and containerd in the background; wait for the socket."""
        self.registry.start()
        if not self.config.exists():
            self.write_config()
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        log = self.log_file.open("ab")
        self.proc = subprocess.Popen(
            ["containerd", "--config", str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"containerd exited at start; see {self.log_file}")
            if self.socket.exists() and self._answers():
                return
            time.sleep(0.05)
        raise RuntimeError(f"containerd did not open {self.socket} within {wait}s")

    def _answers(self) -> bool:
        """Whether the CRI plugin serves requests. Just after start the socket
        accepts connections while the CRI still answers "server is not initialized
        yet"; wait until Version and Status both succeed."""
        with socket.socket(socket.AF_UNIX) as s:
            try:
                s.connect(str(self.socket))
            except OSError:
                return False
        import grpc

        from kubelet_kit.cri.gen import api_pb2, api_pb2_grpc

        with grpc.insecure_channel(f"unix://{self.socket}") as channel:
            stub = api_pb2_grpc.RuntimeServiceStub(channel)
            try:
                stub.Version(api_pb2.VersionRequest(), timeout=2)
                stub.Status(api_pb2.StatusRequest(), timeout=2)
            except grpc.RpcError:
                return False
        return True

    def kill(self) -> None:
        """SIGKILL containerd (a crash); shims and containers keep running."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        """Stop containerd gracefully (SIGTERM, then SIGKILL)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def ctr(self, *args: str) -> str:
        """Run ``ctr`` against this containerd in the k8s.io namespace."""
        out = subprocess.run(
            ["ctr", "-a", str(self.socket), "-n", NAMESPACE, *args],
            check=True,
            capture_output=True,
            timeout=120,
        )
        return out.stdout.decode()

    def import_images(self) -> None:
        """Build the pause and busybox images, import them, and serve both (and
        :data:`REGISTRY_ONLY_IMAGE`, :data:`SAME_IMAGE_REFS` and
        :data:`USER_IMAGES`, which are not imported) from the registry."""
        pause = self.base / "pause.tar"
        busybox = self.base / "busybox.tar"
        pause_image = build_image_tar(pause, PAUSE_IMAGE, ["sleep", "infinity"], [])
        self.registry.add(PAUSE_IMAGE, *pause_image)
        blobs, digest = build_image_tar(busybox, BUSYBOX_IMAGE, [], ["sh"])
        self.registry.add(BUSYBOX_IMAGE, blobs, digest)
        self.registry.add(REGISTRY_ONLY_IMAGE, blobs, digest)
        # An image of its own (its command differs), so removing it leaves busybox.
        tagged = build_image_tar(self.base / "tagged.tar", SAME_IMAGE_REFS[0], [], ["true"])
        for ref in SAME_IMAGE_REFS:
            self.registry.add(ref, *tagged)
        for i, (ref, user) in enumerate(USER_IMAGES.items()):
            self.registry.add(
                ref, *build_image_tar(self.base / f"user{i}.tar", ref, [], ["sh"], user)
            )
        for tar in (pause, busybox):
            self.ctr("images", "import", "--snapshotter", "native", str(tar))

    # -------------------------------------------------------------- cleanup

    def _our_pids(self) -> list[int]:
        """Shims (and anything else) whose command line names our directory."""
        marker = str(self.base).encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker in cmdline:
                pids.append(int(entry.name))
        return pids

    def _remove_cgroups(self) -> None:
        """Remove the (by now empty) cgroups under :attr:`cgroup_parent`, deepest
        first, in every hierarchy; nothing outside it is touched."""
        name = self.cgroup_parent.strip("/")
        for hierarchy in Path("/sys/fs/cgroup").iterdir():
            top = hierarchy / name
            if not top.is_dir():
                continue
            dirs = [p for p in top.rglob("*") if p.is_dir()]
            for d in [*sorted(dirs, key=lambda p: len(p.parts), reverse=True), top]:
                with contextlib.suppress(OSError):
                    d.rmdir()

    def cleanup(self) -> None:
        """Kill leftover shims, unmount leftovers, remove the directory."""
        self.stop()
        with contextlib.suppress(Exception):
            self.registry.stop()
        for pid in self._our_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        mounts = []
        with contextlib.suppress(OSError):
            for line in Path("/proc/self/mountinfo").read_text().splitlines():
                point = line.split()[4]
                if point.startswith(str(self.base)):
                    mounts.append(point)
        for point in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", point], check=False, capture_output=True)
        self._remove_cgroups()
        shutil.rmtree(self.base, ignore_errors=True)
