"""A private containerd for the integration tests.

Started in the background with its own root, state, socket and config (the CRI
plugin with restrict_oom_score_adj, the native snapshotter, CNI from the system
but no network config, so sandboxes use the host network), fed a busybox image
built here as an OCI layout tar, and cleaned up completely afterwards: pods
removed through the CRI, containerd stopped by its pid, leftover shims killed,
leftover mounts under its root unmounted.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import tarfile
import time
from pathlib import Path

#: Names the images are imported under (nothing is ever pulled).
PAUSE_IMAGE = "kubelet-kit.test/pause:1"
BUSYBOX_IMAGE = "kubelet-kit.test/busybox:1"
NAMESPACE = "k8s.io"

_APPLETS = (
    "sh", "sleep", "echo", "cat", "env", "ls", "true", "false", "printf", "id", "kill",
    "httpd", "wc", "head", "grep", "hostname", "ps", "mkdir", "touch", "test", "seq",
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


def _goarch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(machine, machine)


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


def build_image_tar(path: Path, name: str, entrypoint: list[str], cmd: list[str]) -> None:
    """Write an OCI image layout tar of busybox, referenced as ``name``."""
    blobs: dict[str, bytes] = {}

    def add(data: bytes) -> dict[str, object]:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": digest, "size": len(data)}

    layer = _layer_tar()
    layer_desc = add(layer)
    arch = _goarch()
    config = {
        "architecture": arch,
        "os": "linux",
        "config": {"Env": ["PATH=/bin"], "Entrypoint": entrypoint, "Cmd": cmd,
                   "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [layer_desc["digest"]]},
    }
    config_desc = add(json.dumps(config).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config_desc},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer_desc}],
    }
    manifest_desc = add(json.dumps(manifest).encode())
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                **manifest_desc,
                "platform": {"architecture": arch, "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                },
            }
        ],
    }
    with tarfile.open(path, "w") as tar:

        def put(member: str, data: bytes) -> None:
            info = tarfile.TarInfo(member)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))

        put("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        put("index.json", json.dumps(index).encode())
        for digest, data in blobs.items():
            put(f"blobs/sha256/{digest.split(':', 1)[1]}", data)


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

    @property
    def endpoint(self) -> str:
        """The CRI endpoint, ``unix://...``."""
        return f"unix://{self.socket}"

    def write_config(self) -> None:
        """Write the TOML config; top-level keys come before any table header."""
        for d in (self.root, self.state, self.cni_conf, self.logs):
            d.mkdir(parents=True, exist_ok=True)
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
        )

    def start(self, wait: float = 30.0) -> None:
        """Start containerd in the background and wait until its socket answers."""
        if not self.config.exists():
            self.write_config()
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        log = self.log_file.open("ab")
        self.proc = subprocess.Popen(
            ["containerd", "--config", str(self.config)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
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
        with socket.socket(socket.AF_UNIX) as s:
            try:
                s.connect(str(self.socket))
            except OSError:
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
            check=True, capture_output=True, timeout=120,
        )
        return out.stdout.decode()

    def import_images(self) -> None:
        """Build and import the pause and busybox images."""
        pause = self.base / "pause.tar"
        busybox = self.base / "busybox.tar"
        build_image_tar(pause, PAUSE_IMAGE, ["sleep", "infinity"], [])
        build_image_tar(busybox, BUSYBOX_IMAGE, [], ["sh"])
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

    def cleanup(self) -> None:
        """Kill leftover shims, unmount leftovers, remove the directory."""
        self.stop()
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
        shutil.rmtree(self.base, ignore_errors=True)
