"""Image registries inside the cluster's namespaces, for the image-pull specs.

Four ``[NodeConformance]`` specs ("Container Runtime blackbox test when running a
container with a new image") pull with ``PullAlways`` from real registries:
``k8s.gcr.io/e2e-test-images/agnhost:2.21`` must pull, ``invalid.com/invalid/alpine:3.1``
must fail, and ``gcr.io/authenticated-image-pulling/alpine:3.7`` must fail without a
pull secret and pull with one. Here the two names are served by Debian's
``docker-registry`` (the distribution registry 2.8), one process per name:

- each listens on port 443 of an address of its own on ``kk0`` (:data:`REGISTRIES`),
  and the names resolve to those addresses through a hosts file bind-mounted over
  ``/etc/hosts`` in the cluster's mount namespace only;
- TLS with a certificate from the cluster's CA, which containerd trusts for exactly
  these hosts (its CRI ``registry.configs."HOST".tls.ca_file``);
- ``gcr.io`` asks for basic authentication (an htpasswd file, bcrypt): the pull
  secret's docker config, which the suite reads from ``--docker-config-file``, holds
  the one account. It has to be the name ``gcr.io`` itself, on the default port:
  containerd hands a pull secret's credentials only to the host the credential
  names, so a mirror under another name would never see them;
- ``invalid.com`` resolves nowhere (no hosts entry, no reachable DNS server), so its
  pull fails as upstream's does.

The images are the local ones (:mod:`conformance.images`), pushed with ``ctr`` after
containerd imported them; the stand-in for ``alpine:3.7`` is busybox with a layer of
its own (the spec only runs ``/bin/sh -c 'while true; do sleep 1; done'`` in it),
removed from the node once pushed, so that the spec's pull downloads it through the
authentication. No traffic leaves the namespace.
"""

from __future__ import annotations

import base64
import functools
import json
import secrets
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from . import images

#: Each registry's name, its address in the node's subnet and whether it asks for
#: credentials.
REGISTRIES = {
    "k8s.gcr.io": ("10.199.0.3", False),
    "gcr.io": ("10.199.0.4", True),
}
PROGRAM = "docker-registry"
USER = "conformance"


def available() -> bool:
    """Whether this machine has the registry and ``htpasswd`` (scripts/setup
    installs both)."""
    return bool(shutil.which(PROGRAM) and shutil.which("htpasswd"))


def hosts_file(original: str) -> str:
    """The machine's hosts file with the registries' names added."""
    lines = [original.rstrip("\n"), "# conformance image registries (this namespace only)"]
    lines += [f"{addr} {name}" for name, (addr, _) in REGISTRIES.items()]
    return "\n".join(lines) + "\n"


def containerd_config(ca: Path) -> str:
    """The CRI plugin's registry section: trust ``ca`` for the registries' hosts."""
    out = []
    for name in REGISTRIES:
        out.append(
            f'\n[plugins."io.containerd.grpc.v1.cri".registry.configs."{name}".tls]\n'
            f'  ca_file = "{ca}"\n'
        )
    return "".join(out)


class Registries:
    """The registries' files in ``directory``; processes started with ``spawn``
    (the cluster's, so they are recorded and ended with the rest)."""

    def __init__(self, directory: Path, ca: Path, cert: tuple[Path, Path]) -> None:
        self.dir = directory
        self.ca = ca
        self.cert = cert
        self.password = secrets.token_hex(16)
        #: The pull secret's contents, for the suite's ``--docker-config-file``.
        self.docker_config = directory / "docker-config.json"

    def start(
        self,
        spawn: Callable[[str, list[str]], subprocess.Popen[bytes]],
        wait: Callable[[str, subprocess.Popen[bytes], Callable[[], bool], float], None],
        run: Callable[..., str],
    ) -> None:
        """Write the configuration, start one registry per name and wait until each
        answers on its ``/v2/`` endpoint."""
        self.dir.mkdir(parents=True, exist_ok=True)
        htpasswd = self.dir / "htpasswd"
        # -B bcrypt (the only scheme the registry accepts), -b the password from the
        # command line, -n to stdout.
        htpasswd.write_text(run("htpasswd", "-Bbn", USER, self.password))
        auth = base64.b64encode(f"{USER}:{self.password}".encode()).decode()
        # The key is the form upstream's own secret uses; the kubelet's keyring
        # strips the scheme and matches gcr.io/... images with it.
        self.docker_config.write_text(
            json.dumps({"auths": {"https://gcr.io": {"auth": auth}}}, indent=1)
        )
        for name, (addr, authenticated) in REGISTRIES.items():
            config = {
                "version": 0.1,
                "log": {"level": "info", "accesslog": {"disabled": False}},
                "storage": {
                    "filesystem": {"rootdirectory": str(self.dir / name / "data")},
                    "maintenance": {"uploadpurging": {"enabled": False}},
                },
                "http": {
                    "addr": f"{addr}:443",
                    "tls": {"certificate": str(self.cert[0]), "key": str(self.cert[1])},
                },
            }
            if authenticated:
                config["auth"] = {"htpasswd": {"realm": name, "path": str(htpasswd)}}
            path = self.dir / name / "config.yml"
            path.parent.mkdir(parents=True, exist_ok=True)
            # JSON is YAML: the registry reads it as its configuration file.
            path.write_text(json.dumps(config, indent=1))
            proc = spawn(f"registry-{name}", [PROGRAM, "serve", str(path)])
            wait(f"registry-{name}", proc, functools.partial(self._answers, name), 60)

    def _answers(self, name: str) -> bool:
        """``/v2/`` answers over TLS checked against the CA (401 for the
        authenticated one: it is up, and refuses the anonymous)."""
        ctx = ssl.create_default_context(cafile=str(self.ca))
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx)
        )
        try:
            with opener.open(f"https://{name}/v2/", timeout=3) as resp:
                return bool(resp.status == 200)
        except urllib.error.HTTPError as e:
            return e.code == 401 and REGISTRIES[name][1]

    def push(self, ctr: Callable[..., str]) -> None:
        """Push agnhost to ``k8s.gcr.io`` and the alpine stand-in to ``gcr.io`` from
        containerd's store, then remove the stand-in and its content from the node,
        so that the spec with the secret pulls every blob and the one without has
        nothing to fall back on."""
        ca = f"--tlscacert={self.ca}"
        ctr("images", "push", ca, images.AGNHOST)
        ctr("images", "push", ca, f"--user={USER}:{self.password}", images.AUTHENTICATED_ALPINE)
        # Every name of its manifest: the CRI plugin adds one of its own (the image
        # id, sha256:...) that would keep the content. --sync: once the garbage
        # collector has removed it.
        rows = [line.split() for line in ctr("images", "ls").splitlines()[1:]]
        digest = next(r[2] for r in rows if r and r[0] == images.AUTHENTICATED_ALPINE)
        ctr("images", "rm", "--sync", *[r[0] for r in rows if len(r) > 2 and r[2] == digest])
