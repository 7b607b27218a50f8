"""A test PKI made with the ``openssl`` command, and the environment test programs run in.

:class:`PKI` makes keys and certificates in one directory from an OpenSSL config
whose sections name the certificate kinds (``ca``, ``server``, ``client`` and any
other the config defines). The conformance cluster and the cluster-mode tests'
kube-apiserver each write their own config (their own serving names) and share
the rest.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["PKI", "clean_env"]

# Nothing started for a test cluster may reach a proxy: every address is local.
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without proxy settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in _PROXY_VARS}
    env.update(extra)
    return env


class PKI:
    """Keys and certificates made with the ``openssl`` command in one directory.

    Args:
        directory: Where keys, requests and certificates go (made if missing).
        config: The OpenSSL config, written to ``openssl.cnf`` there; its sections
            are the ``kind`` of :meth:`signed`.
    """

    def __init__(self, directory: Path, config: str) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = directory / "openssl.cnf"
        self.config.write_text(config)

    def _openssl(self, *args: str) -> None:
        done = subprocess.run(
            ["openssl", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(OPENSSL_CONF=str(self.config)),
        )
        if done.returncode != 0:
            raise RuntimeError(f"openssl {' '.join(args)} failed:\n{done.stderr}")

    def key(self, name: str, rsa: bool = False) -> Path:
        """A new key ``NAME.key``: EC P-256, or RSA 2048 when ``rsa``."""
        path = self.dir / f"{name}.key"
        if rsa:  # the service-account key: RS256 is what every client verifies
            self._openssl(
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-out",
                str(path),
            )
        else:
            self._openssl(
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-out",
                str(path),
            )
        return path

    def ca(self, name: str, common_name: str) -> tuple[Path, Path]:
        """A new self-signed CA ``NAME.crt`` valid for two days: its certificate and key."""
        key = self.key(name)
        cert = self.dir / f"{name}.crt"
        self._openssl(
            "req",
            "-x509",
            "-new",
            "-config",
            str(self.config),
            "-extensions",
            "ca",
            "-key",
            str(key),
            "-subj",
            f"/CN={common_name}",
            "-days",
            "2",
            "-out",
            str(cert),
        )
        return cert, key

    def signed(
        self, name: str, subject: str, kind: str, ca: tuple[Path, Path]
    ) -> tuple[Path, Path]:
        """A certificate of ``kind`` (a section of the config) signed by ``ca``."""
        key = self.key(name)
        csr = self.dir / f"{name}.csr"
        cert = self.dir / f"{name}.crt"
        self._openssl(
            "req",
            "-new",
            "-config",
            str(self.config),
            "-key",
            str(key),
            "-subj",
            subject,
            "-out",
            str(csr),
        )
        self._openssl(
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
            str(self.config),
            "-extensions",
            kind,
            "-out",
            str(cert),
        )
        return cert, key

    def public_key(self, key: Path) -> Path:
        """The public half of ``key``, written beside it as ``.pub``."""
        path = key.with_suffix(".pub")
        self._openssl("pkey", "-in", str(key), "-pubout", "-out", str(path))
        return path
