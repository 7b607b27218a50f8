"""The conformance suite's test images, assembled here from local binaries.

Each image is one layer in an OCI image-layout tar, named as
``test/utils/image/manifest.go`` (Kubernetes 1.20.2) names it by default, so that
the suite does not pull them (every tag is pinned, pull policy IfNotPresent):

- ``k8s.gcr.io/pause:3.2``: the static ``pause`` built from ``build/pause/linux/pause.c``
  (also containerd's ``sandbox_image``);
- ``docker.io/library/busybox:1.29``: Debian's static busybox with all its applets;
- ``k8s.gcr.io/e2e-test-images/agnhost:2.21``: ``/agnhost`` (and ``/agnhost-2``), the
  porter's ``/localhost.crt`` and ``/localhost.key``, ``/uploads``, busybox's applets,
  and, with their shared libraries, ``dash`` as ``/bin/sh`` (Debian's busybox shell
  runs its own applets before ``PATH``), ``curl`` and netcat-openbsd's ``nc`` when
  the machine has them;
- ``gcr.io/kubernetes-e2e-test-images/nonewprivs:1.0``: the set-uid
  ``/usr/local/bin/nnp``;
- ``docker.io/library/nginx:1.14-alpine`` and ``docker.io/library/httpd:2.4.38-alpine``:
  stand-ins, busybox plus agnhost serving HTTP on port 80 (``agnhost
  test-webserver``). The node-set specs only run them, exec ``sh`` in them
  (PreStop) and swap one image for the other;
- ``gcr.io/authenticated-image-pulling/alpine:3.7``: a stand-in, busybox and an
  ``/etc/alpine-release`` (a layer of its own, so that its pull downloads it). It
  is only pushed to the private registry (:mod:`conformance.registries`) and then
  removed from the node: its specs pull it with ``PullAlways`` and run
  ``/bin/sh -c 'while true; do sleep 1; done'``.

Nothing is pulled from any network: the four image-pull specs pull from the
harness's own registries, inside its namespaces.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import shutil
import subprocess
import tarfile
from collections.abc import Iterable
from pathlib import Path

import attrs

PAUSE = "k8s.gcr.io/pause:3.2"
BUSYBOX = "docker.io/library/busybox:1.29"
AGNHOST = "k8s.gcr.io/e2e-test-images/agnhost:2.21"
NONEWPRIVS = "gcr.io/kubernetes-e2e-test-images/nonewprivs:1.0"
NGINX = "docker.io/library/nginx:1.14-alpine"
HTTPD = "docker.io/library/httpd:2.4.38-alpine"
AUTHENTICATED_ALPINE = "gcr.io/authenticated-image-pulling/alpine:3.7"

PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BUSYBOX_BIN = Path("/bin/busybox")


def goarch() -> str:
    """This machine's architecture as Go (and OCI) name it."""
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(machine, machine)


@attrs.define
class Layer:
    """The files of one layer, by path inside the image (no leading slash)."""

    entries: dict[str, tuple[str, bytes | str, int]] = attrs.field(factory=dict)

    def dir(self, path: str, mode: int = 0o755) -> None:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            if p not in self.entries:
                self.entries[p] = ("dir", b"", mode if i == len(parts) else 0o755)

    def file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        path = path.strip("/")
        if "/" in path:
            self.dir(path.rsplit("/", 1)[0])
        self.entries[path] = ("file", data, mode)

    def host_file(self, path: str, source: Path, mode: int | None = None) -> None:
        data = source.read_bytes()
        self.file(path, data, mode if mode is not None else (source.stat().st_mode & 0o7777))

    def symlink(self, path: str, target: str) -> None:
        path = path.strip("/")
        if "/" in path:
            self.dir(path.rsplit("/", 1)[0])
        self.entries[path] = ("symlink", target, 0o777)

    def host_program(self, path: str, source: Path) -> None:
        """A dynamically linked program of this machine at ``path``, with the
        shared libraries ``ldd`` names, each at the path ``ldd`` prints."""
        self.host_file(path, source, 0o755)
        out = subprocess.run(["ldd", str(source)], capture_output=True, text=True, timeout=30)
        for line in out.stdout.splitlines():
            words = line.split()
            lib = None
            if "=>" in words:
                i = words.index("=>")
                if i + 1 < len(words) and words[i + 1].startswith("/"):
                    lib = words[i + 1]
            elif words and words[0].startswith("/"):
                lib = words[0]  # the dynamic loader
            if lib and lib.lstrip("/") not in self.entries:
                self.host_file(lib, Path(os.path.realpath(lib)), 0o755)

    def tar(self) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name in sorted(self.entries):
                kind, data, mode = self.entries[name]
                info = tarfile.TarInfo(name)
                info.mode = mode
                if kind == "dir":
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif kind == "symlink":
                    info.type = tarfile.SYMTYPE
                    info.linkname = str(data)
                    tar.addfile(info)
                else:
                    assert isinstance(data, bytes)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()


def base_layer() -> Layer:
    """The directories and account files every image has."""
    layer = Layer()
    for d in (
        "bin",
        "sbin",
        "usr/bin",
        "usr/sbin",
        "usr/local/bin",
        "etc",
        "proc",
        "sys",
        "dev",
        "root",
        "var",
        "run",
        "home",
    ):
        layer.dir(d)
    layer.dir("tmp", 0o1777)
    layer.file(
        "etc/passwd",
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
    )
    layer.file("etc/group", b"root:x:0:\nnogroup:x:65534:\n")
    return layer


def add_busybox(layer: Layer, skip: Iterable[str] = ()) -> None:
    """Debian's static busybox at /bin/busybox, every applet a link to it."""
    layer.host_file("bin/busybox", BUSYBOX_BIN, 0o755)
    applets = subprocess.run(
        [str(BUSYBOX_BIN), "--list"], capture_output=True, text=True, check=True, timeout=30
    ).stdout.split()
    skipped = set(skip)
    for applet in applets:
        if applet in skipped or applet == "busybox":
            continue
        layer.symlink(f"bin/{applet}", "busybox")


def write_image(path: Path, name: str, layer: Layer, entrypoint: list[str], cmd: list[str]) -> None:
    """Write ``layer`` as a one-layer OCI image-layout tar referenced as ``name``."""
    write_layout(
        path, name, layer.tar(), env=[PATH_ENV], entrypoint=entrypoint or None, cmd=cmd or None
    )


def write_layout(
    path: Path,
    name: str,
    layer: bytes,
    *,
    env: list[str],
    entrypoint: list[str] | None,
    cmd: list[str] | None,
    user: str | None = None,
) -> tuple[dict[str, bytes], str]:
    """Write the layer tar ``layer`` as a one-layer OCI image-layout tar referenced as
    ``name``, for this machine's architecture, running ``entrypoint`` and ``cmd``
    (None: unset) with ``env``, as ``user`` (the config's ``User``; None: unset).

    Returns:
        The blobs by digest and the manifest's digest (what a registry serves).
    """
    blobs: dict[str, bytes] = {}

    def add(data: bytes) -> dict[str, object]:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": digest, "size": len(data)}

    layer_desc = add(layer)
    arch = goarch()
    config = {
        "architecture": arch,
        "os": "linux",
        "config": {
            "Env": env,
            "Entrypoint": entrypoint,
            "Cmd": cmd,
            "WorkingDir": "/",
            **({"User": user} if user is not None else {}),
        },
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
    return blobs, str(manifest_desc["digest"])


def _nc() -> Path | None:
    for candidate in ("/bin/nc.openbsd", "/usr/bin/nc.openbsd"):
        if Path(candidate).is_file():
            return Path(candidate)
    return None


def build_all(bin_dir: Path, tree: Path, out: Path) -> dict[str, Path]:
    """Write every test image's tar into ``out``.

    Args:
        bin_dir: where scripts/kubernetes put ``pause``, ``agnhost``, ``nonewprivs``.
        tree: the Kubernetes source tree (for the porter's certificate and key).

    Returns:
        The tar of each image, by image name.
    """
    out.mkdir(parents=True, exist_ok=True)
    tars: dict[str, Path] = {}

    def emit(name: str, layer: Layer, entrypoint: list[str], cmd: list[str]) -> None:
        path = out / (name.rsplit("/", 1)[-1].replace(":", "-") + ".tar")
        write_image(path, name, layer, entrypoint, cmd)
        tars[name] = path

    pause = base_layer()
    pause.host_file("pause", bin_dir / "pause", 0o755)
    emit(PAUSE, pause, ["/pause"], [])

    busybox = base_layer()
    add_busybox(busybox)
    emit(BUSYBOX, busybox, [], ["sh"])

    agnhost = base_layer()
    shell = shutil.which("dash")
    nc = _nc()
    curl = shutil.which("curl")
    add_busybox(agnhost, skip=[a for a, p in (("sh", shell), ("nc", nc), ("curl", curl)) if p])
    if shell:
        agnhost.host_program("bin/dash", Path(shell))
        agnhost.symlink("bin/sh", "dash")
    if nc:
        agnhost.host_program("usr/bin/nc", nc)
    if curl:
        agnhost.host_program("usr/bin/curl", Path(curl))
    agnhost.host_file("agnhost", bin_dir / "agnhost", 0o755)
    agnhost.symlink("agnhost-2", "agnhost")
    porter = tree / "test/images/agnhost/porter"
    agnhost.host_file("localhost.crt", porter / "localhost.crt", 0o644)
    agnhost.host_file("localhost.key", porter / "localhost.key", 0o644)
    agnhost.dir("uploads")
    emit(AGNHOST, agnhost, ["/agnhost"], ["pause"])

    nnp = base_layer()
    add_busybox(nnp)
    nnp.host_file("usr/local/bin/nnp", bin_dir / "nonewprivs", 0o4755)
    emit(NONEWPRIVS, nnp, [], ["nnp"])

    for name in (NGINX, HTTPD):
        web = base_layer()
        add_busybox(web)
        web.host_file("agnhost", bin_dir / "agnhost", 0o755)
        emit(name, web, ["/agnhost", "test-webserver"], ["--port", "80"])

    alpine = base_layer()
    add_busybox(alpine)
    alpine.file("etc/alpine-release", b"3.7.0 (conformance stand-in)\n")
    emit(AUTHENTICATED_ALPINE, alpine, [], ["/bin/sh"])
    return tars
