"""What the node API tests share: a test PKI made with ``openssl``, a pod, and a
KubeletServer over a KubeletEnv with a client that speaks to it."""

from __future__ import annotations

import contextlib
import os
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubelet_kit.server import (
    Authenticator,
    KubeletServer,
    PolicyAuthorizer,
    PolicyRule,
    load_token_file,
    read_only_rule,
)
from kubelet_kit.testing.env import KubeletEnv

OPENSSL = shutil.which("openssl")

ADMIN_TOKEN = "admin-token-0123456789"
MONITOR_TOKEN = "monitor-token-0123456789"

WEB_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default", "uid": "uid-web"},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "busybox",
                "command": ["sh", "-c", "echo one; echo two; echo three; sleep 3600"],
            }
        ]
    },
}


def _openssl(*args: str) -> None:
    assert OPENSSL is not None
    subprocess.run([OPENSSL, *args], check=True, capture_output=True)


def _make_ca(d: Path, name: str) -> tuple[Path, Path]:
    key, crt = d / f"{name}.key", d / f"{name}.crt"
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "2",
        "-subj",
        f"/CN={name}",
        "-keyout",
        str(key),
        "-out",
        str(crt),
    )
    return crt, key


def _make_leaf(
    d: Path, name: str, subject: str, ca: tuple[Path, Path], usage: str
) -> tuple[str, str]:
    key, csr, crt, ext = (
        d / f"{name}.key",
        d / f"{name}.csr",
        d / f"{name}.crt",
        d / f"{name}.ext",
    )
    ext.write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
        f"extendedKeyUsage={usage}\nsubjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
    )
    _openssl(
        "req",
        "-new",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-subj",
        subject,
        "-keyout",
        str(key),
        "-out",
        str(csr),
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca[0]),
        "-CAkey",
        str(ca[1]),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        str(ext),
        "-out",
        str(crt),
    )
    return str(crt), str(key)


def make_pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A CA, a rogue CA, server and client certificates and a token file, made with the
    ``openssl`` command (the test skips without it, or fails where real parts are required)."""
    if OPENSSL is None:  # the test PKI is made with the openssl command
        if os.environ.get("KUBELET_KIT_REQUIRE_REAL") == "1":
            pytest.fail("openssl is required here (KUBELET_KIT_REQUIRE_REAL=1) but missing")
        pytest.skip("openssl not available")
    d = tmp_path_factory.mktemp("pki")
    ca = _make_ca(d, "ca")
    rogue_ca = _make_ca(d, "rogue-ca")
    tokens = d / "tokens.csv"
    tokens.write_text(
        f'{ADMIN_TOKEN},alice,1001,"admins"\n'
        f"# monitoring\n{MONITOR_TOKEN},scraper,1002,monitoring\n"
    )
    return {
        "ca": str(ca[0]),
        "server": _make_leaf(d, "server", "/CN=fake-node", ca, "serverAuth"),
        "admin": _make_leaf(d, "admin", "/O=admins/CN=admin", ca, "clientAuth"),
        "monitor": _make_leaf(d, "monitor", "/O=monitoring/CN=prometheus", ca, "clientAuth"),
        "rogue": _make_leaf(d, "rogue", "/O=admins/CN=admin", rogue_ca, "clientAuth"),
        "tokens": str(tokens),
    }


def client_ssl(pki: dict[str, Any], identity: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki["ca"])
    if identity is not None:
        ctx.load_cert_chain(*pki[identity])
    return ctx


class Served:
    def __init__(self, env: KubeletEnv, server: KubeletServer, pki: dict[str, Any]) -> None:
        self.env = env
        self.server = server
        self.pki = pki

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.server.port}{path}"

    async def get(
        self,
        path: str,
        identity: str | None = "admin",
        *,
        method: str = "GET",
        headers: dict[str, str] | None = None,
        data: bytes | None = None,
    ) -> tuple[int, str, Any]:
        connector = aiohttp.TCPConnector(ssl=client_ssl(self.pki, identity))
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.request(method, self.url(path), headers=headers, data=data) as resp,
        ):
            return resp.status, await resp.text(), resp.headers


def policy() -> PolicyAuthorizer:
    return PolicyAuthorizer([PolicyRule(groups=["admins"]), read_only_rule(groups=["monitoring"])])


@contextlib.asynccontextmanager
async def serve(pki: dict[str, Any]) -> AsyncIterator[Served]:
    """A KubeletEnv running WEB_POD behind a KubeletServer on ephemeral ports."""
    async with KubeletEnv() as env:
        env.add_pod(WEB_POD)
        await env.wait_for(lambda: env.phase("web") == "Running")
        server = KubeletServer(
            env.kubelet,
            address="127.0.0.1",
            port=0,
            tls_cert_file=pki["server"][0],
            tls_private_key_file=pki["server"][1],
            authenticator=Authenticator(
                client_ca_file=pki["ca"], tokens=load_token_file(pki["tokens"])
            ),
            authorizer=policy(),
            read_only_port=0,
            healthz_port=0,
        )
        async with server:
            yield Served(env, server, pki)
