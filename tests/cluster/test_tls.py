"""A node's kubeconfig with a client certificate, against the stand-in over HTTPS
(certificates made with the openssl command for the test)."""

from __future__ import annotations

import base64
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from kubelet_kit.cluster import connect
from kubelet_kit.cluster.lease import LeaseController

from .apiserver_standin import StandInAPIServer

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(where: Path) -> None:
    """A CA, a server certificate for 127.0.0.1 and a node's client certificate."""
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl(
        "req",
        "-x509",
        *key,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "1",
        "-subj",
        "/CN=standin-ca",
        cwd=where,
    )
    (where / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name, subject, ext in (
        ("server", "/CN=127.0.0.1", ["-extfile", "san.ext"]),
        ("client", "/O=system:nodes/CN=system:node:node-1", []),
    ):
        openssl(
            "req",
            *key,
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            subject,
            cwd=where,
        )
        openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            "1",
            *ext,
            cwd=where,
        )


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


async def test_a_node_kubeconfig_with_a_client_certificate(tmp_path: Path) -> None:
    make_certificates(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=tmp_path / "ca.crt")
    context.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    context.verify_mode = ssl.CERT_REQUIRED  # as an API server with --client-ca-file
    async with StandInAPIServer(ssl_context=context) as standin:
        kubeconfig = standin.kubeconfig(
            "system:node:node-1",
            ca_data=b64(tmp_path / "ca.crt"),
            credentials={
                "client-certificate-data": b64(tmp_path / "client.crt"),
                "client-key-data": b64(tmp_path / "client.key"),
            },
        )
        api = await connect(kubeconfig)
        try:
            assert await LeaseController(api, "node-1").renew()
        finally:
            await api.close()
        assert standin.get("leases", "kube-node-lease", "node-1") is not None
        assert standin.client_subjects
        assert all(
            s == "organizationName=system:nodes,commonName=system:node:node-1"
            for s in standin.client_subjects
        )
