"""The node's HTTP API: health, pods, metrics, summary stats, logs and run.

::

    server = KubeletServer(kubelet, port=10250, tls_cert_file="kubelet.crt",
                           tls_private_key_file="kubelet.key",
                           authenticator=Authenticator(client_ca_file="ca.crt"))
    async with server:
        await kubelet.run()

See :mod:`kubelet_kit.server.server` for the endpoints and
:mod:`kubelet_kit.server.auth` for authentication and authorization.
"""

from __future__ import annotations

from kubelet_kit.server.auth import (
    AlwaysAllowAuthorizer,
    Attributes,
    Authenticator,
    Authorizer,
    PolicyAuthorizer,
    PolicyRule,
    TokenFile,
    UserInfo,
    load_token_file,
    read_only_rule,
)
from kubelet_kit.server.server import KubeletServer, ServerLimits

__all__ = [
    "AlwaysAllowAuthorizer",
    "Attributes",
    "Authenticator",
    "Authorizer",
    "KubeletServer",
    "PolicyAuthorizer",
    "PolicyRule",
    "ServerLimits",
    "TokenFile",
    "UserInfo",
    "load_token_file",
    "read_only_rule",
]
