"""The server's settings read from a KubeletConfiguration, and a self-signed serving
certificate for agents given none.

Fields, with the kubelet's names: ``address``, ``port``, ``readOnlyPort``,
``healthzBindAddress``, ``healthzPort`` (a port of 0 is off), ``tlsCertFile``,
``tlsPrivateKeyFile``, ``enableDebuggingHandlers``, and::

    authentication:
      x509: {clientCAFile: /etc/kubelet-kit/ca.crt}
      anonymous: {enabled: false}        # the default here: no anonymous access
      tokenFile: /etc/kubelet-kit/tokens.csv   # kubelet-kit: static bearer tokens
    authorization:
      mode: AlwaysAllow                  # or kubelet-kit's Policy:
      policy:
        - {groups: [admins]}             # everything
        - {groups: [monitoring], subresources: [stats, metrics, pods, healthz], verbs: [get]}

``Webhook`` authentication and authorization need an API server, which
kubelet-kit does not talk to: ``authorization.mode: Webhook`` is refused, and
``authentication.webhook`` is ignored.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubelet_kit.errors import ConfigurationError, FieldError
from kubelet_kit.server.auth import (
    AlwaysAllowAuthorizer,
    Authenticator,
    Authorizer,
    PolicyAuthorizer,
    PolicyRule,
    load_token_file,
)

if TYPE_CHECKING:
    from kubelet_kit.api.kubeletconfig import KubeletConfiguration

__all__ = ["build_authenticator", "build_authorizer", "ensure_self_signed", "server_options"]


def _section(data: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = data.get(key) or {}
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"{path}: must be a mapping", [FieldError(path, "must be a mapping")]
        )
    return value


def build_authenticator(authentication: Mapping[str, Any]) -> Authenticator:
    """An Authenticator from the ``authentication`` section.

    Raises:
        ConfigurationError: a value has the wrong type (named by field path), or
            the token file cannot be read.
    """
    x509 = _section(authentication, "x509", "authentication.x509")
    anonymous = _section(authentication, "anonymous", "authentication.anonymous")
    enabled = anonymous.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ConfigurationError("authentication.anonymous.enabled: must be true or false")
    ca = x509.get("clientCAFile") or None
    token_file = authentication.get("tokenFile") or None
    for name, value in (
        ("authentication.x509.clientCAFile", ca),
        ("authentication.tokenFile", token_file),
    ):
        if value is not None and not isinstance(value, str):
            raise ConfigurationError(f"{name}: must be a file path")
    tokens = load_token_file(token_file) if token_file else None
    return Authenticator(client_ca_file=ca, tokens=tokens, anonymous=enabled)


def build_authorizer(authorization: Mapping[str, Any]) -> Authorizer:
    """An Authorizer from the ``authorization`` section (default ``AlwaysAllow``).

    Raises:
        ConfigurationError: an unknown or unsupported mode, or a malformed rule.
    """
    mode = authorization.get("mode") or "AlwaysAllow"
    if mode == "AlwaysAllow":
        return AlwaysAllowAuthorizer()
    if mode == "Policy":
        rules = authorization.get("policy") or []
        if not isinstance(rules, list):
            raise ConfigurationError("authorization.policy: must be a list of rules")
        out = []
        for i, rule in enumerate(rules):
            where = f"authorization.policy[{i}]"
            if not isinstance(rule, Mapping):
                raise ConfigurationError(f"{where}: must be a mapping")
            out.append(PolicyRule.from_dict(rule, where))
        return PolicyAuthorizer(out)
    if mode == "Webhook":
        raise ConfigurationError(
            'authorization.mode: "Webhook" needs an API server; use "AlwaysAllow" or "Policy"'
        )
    raise ConfigurationError(
        f'authorization.mode: Unsupported value: "{mode}": supported '
        'values: "AlwaysAllow", "Policy"'
    )


def server_options(config: KubeletConfiguration) -> dict[str, Any]:
    """Keyword arguments for :class:`~kubelet_kit.server.KubeletServer` from ``config``.

    Raises:
        ConfigurationError: see :func:`build_authenticator` and :func:`build_authorizer`.
    """
    extra = config.extra
    debugging = extra.get("enableDebuggingHandlers", True)
    return {
        "address": config.address,
        "port": config.port or None,
        "read_only_port": config.read_only_port or None,
        "healthz_address": config.healthz_bind_address,
        "healthz_port": config.healthz_port or None,
        "tls_cert_file": extra.get("tlsCertFile") or None,
        "tls_private_key_file": extra.get("tlsPrivateKeyFile") or None,
        "enable_debugging_handlers": bool(debugging),
        "authenticator": build_authenticator(_section(extra, "authentication", "authentication")),
        "authorizer": build_authorizer(_section(extra, "authorization", "authorization")),
    }


def ensure_self_signed(cert_dir: Path, host: str) -> tuple[Path, Path]:
    """A self-signed serving certificate ``kubelet.crt``/``kubelet.key`` in ``cert_dir``,
    made with the ``openssl`` command on first use (as the kubelet makes one when
    given none). Blocks: call it from a thread inside an event loop.

    Raises:
        ConfigurationError: ``openssl`` is missing or fails.
    """
    cert, key = cert_dir / "kubelet.crt", cert_dir / "kubelet.key"
    if cert.exists() and key.exists():
        return cert, key
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ConfigurationError(
            "tlsCertFile: none given and no openssl command to make a self-signed certificate"
        )
    cert_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    proc = subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "365",
            "-subj",
            f"/CN={host}@self-signed",
            "-addext",
            f"subjectAltName=DNS:{host},DNS:localhost,IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if proc.returncode != 0:
        raise ConfigurationError(
            f"tlsCertFile: making a self-signed certificate failed: {proc.stderr.strip()}"
        )
    key.chmod(0o600)
    return cert, key
