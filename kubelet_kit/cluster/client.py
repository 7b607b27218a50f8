"""Connecting to the API server: kubeconfig or in-cluster credentials."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException

from kubelet_kit.errors import ConfigurationError

__all__ = ["ApiException", "api_status", "connect"]


def api_status(exc: BaseException) -> int:
    """The HTTP status of a failed API call; 0 for transport errors (no answer)."""
    return int(getattr(exc, "status", 0) or 0) if isinstance(exc, ApiException) else 0


async def connect(
    kubeconfig: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    *,
    context: str | None = None,
) -> Any:
    """A ``kubernetes_asyncio`` ApiClient with the kubelet's credentials.

    As the kubelet: a kubeconfig file when one is given (``--kubeconfig``), or a
    kubeconfig document as a mapping; otherwise the in-cluster service account
    (``KUBERNETES_SERVICE_HOST`` and the mounted token). The caller closes the
    client (``await client.close()``).

    Args:
        kubeconfig: Path to a kubeconfig, or its parsed content.
        context: The kubeconfig context to use (default: its current-context).

    Returns:
        The ApiClient.

    Raises:
        ConfigurationError: No credentials found, or the kubeconfig is unusable
            (naming the file).
    """
    configuration = k8s.Configuration()
    try:
        if isinstance(kubeconfig, Mapping):
            await k8s_config.load_kube_config_from_dict(
                dict(kubeconfig), context=context, client_configuration=configuration)
        elif kubeconfig is not None:
            if not os.path.isfile(kubeconfig):
                raise ConfigurationError(f"{os.fspath(kubeconfig)}: no such kubeconfig file")
            await k8s_config.load_kube_config(
                config_file=os.fspath(kubeconfig), context=context,
                client_configuration=configuration)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration)
        else:
            raise ConfigurationError(
                "kubeconfig: none given and not running in a cluster "
                "(KUBERNETES_SERVICE_HOST is unset)")
    except k8s_config.ConfigException as exc:
        where = os.fspath(kubeconfig) if isinstance(kubeconfig, (str, os.PathLike)) else (
            "kubeconfig" if kubeconfig is not None else "in-cluster config")
        raise ConfigurationError(f"{where}: {exc}") from None
    return k8s.ApiClient(configuration)
