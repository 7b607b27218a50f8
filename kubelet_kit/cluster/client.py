"""Connecting to the API server: kubeconfig or in-cluster credentials, and the
client's request budget (``kubeAPIQPS``/``kubeAPIBurst``).

The agent's parts share one ``kubernetes_asyncio`` ApiClient made by :func:`connect`,
and every request that client sends goes through its REST client's ``request``
method: the generated API classes (``call_api``), their ``GET``/``PATCH``/...
helpers and watches (each new watch request; not the events streamed on it) all
end there. That is where the token bucket is taken, once per request, so no
component using this client (or one made by :func:`client_like`) can send around it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client import rest
from kubernetes_asyncio.client.exceptions import ApiException

from kubelet_kit.clock import Clock
from kubelet_kit.cluster.ratelimit import TokenBucket
from kubelet_kit.errors import ConfigurationError

__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_QPS",
    "ApiException",
    "api_status",
    "client_like",
    "connect",
    "request_budget",
]

log = logging.getLogger(__name__)

DEFAULT_QPS = 50
"""The kubelet's ``kubeAPIQPS`` default (since Kubernetes 1.27; 5 before)."""
DEFAULT_BURST = 100
"""The kubelet's ``kubeAPIBurst`` default (since Kubernetes 1.27; 10 before)."""

# client-go's rest.DefaultQPS and rest.DefaultBurst: what a zero QPS or burst in
# rest.Config becomes (the kubelet hands kubeAPIQPS/kubeAPIBurst over as is).
_CLIENT_GO_QPS = 5.0
_CLIENT_GO_BURST = 10


def api_status(exc: BaseException) -> int:
    """The HTTP status of a failed API call; 0 for transport errors (no answer)."""
    return int(getattr(exc, "status", 0) or 0) if isinstance(exc, ApiException) else 0


class _RateLimitedRESTClient(rest.RESTClientObject):
    """The client's REST layer, taking a token before each request it sends."""

    limiter: TokenBucket | None = None

    async def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if self.limiter is not None:
            waited = await self.limiter.acquire()
            # client-go reports waits over a second, so a slow agent can be told
            # from a slow API server.
            if waited > 1.0:
                log.debug(
                    "waited %.3fs due to client-side throttling (kubeAPIQPS), request: %s %s",
                    waited,
                    method,
                    url,
                )
        return await super().request(method, url, *args, **kwargs)


class _PlainJSONApiClient(k8s.ApiClient):
    """The client, sending the project's request bodies as they are.

    Every body this project sends is already plain JSON data (dicts of strings,
    numbers, lists), never a generated model; the client's own
    ``sanitize_for_serialization`` would walk and copy each one, which on a busy
    node (or a simulated fleet) costs more than encoding it.
    """

    def sanitize_for_serialization(self, obj: Any) -> Any:
        if type(obj) is dict:
            return obj
        return super().sanitize_for_serialization(obj)


async def _limited_client(configuration: Any, limiter: TokenBucket | None) -> Any:
    client = _PlainJSONApiClient(configuration)
    # ApiClient always builds a plain REST client (with its own aiohttp session);
    # swap in the rate-limited one and close the unused session.
    plain = client.rest_client
    limited = _RateLimitedRESTClient(configuration)
    limited.limiter = limiter
    client.rest_client = limited
    await plain.close()
    return client


def request_budget(api_client: Any) -> TokenBucket | None:
    """The token bucket an ApiClient made by :func:`connect` takes before each
    request; None when it is not limited (or was not made by :func:`connect`)."""
    rest_client = getattr(api_client, "rest_client", None)
    return rest_client.limiter if isinstance(rest_client, _RateLimitedRESTClient) else None


async def client_like(api_client: Any) -> Any:
    """A new ApiClient with ``api_client``'s configuration and the same request
    budget (the very same token bucket, so both clients together stay within it).

    For a client that must live on another event loop (aiohttp sessions are bound
    to the loop they were made on): call it on that loop. The bucket is
    thread-safe. The caller closes the new client.
    """
    return await _limited_client(api_client.configuration, request_budget(api_client))


async def connect(
    kubeconfig: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    *,
    context: str | None = None,
    qps: float = DEFAULT_QPS,
    burst: int = DEFAULT_BURST,
    clock: Clock | None = None,
    connections: int | None = None,
) -> Any:
    """A ``kubernetes_asyncio`` ApiClient with the kubelet's credentials and budget.

    As the kubelet: a kubeconfig file when one is given (``--kubeconfig``), or a
    kubeconfig document as a mapping; otherwise the in-cluster service account
    (``KUBERNETES_SERVICE_HOST`` and the mounted token). The caller closes the
    client (``await client.close()``).

    Every request the client sends first takes a token from one bucket of
    ``burst`` tokens refilled at ``qps`` a second (client-go's token bucket, as
    the kubelet's ``kubeAPIQPS``/``kubeAPIBurst``); a watch takes one token per
    watch request, not per event. As client-go reads them: ``qps`` 0 means 5 and
    ``burst`` 0 means 10 (its defaults), a negative ``qps`` means no limit.

    Args:
        kubeconfig: Path to a kubeconfig, or its parsed content.
        context: The kubeconfig context to use (default: its current-context).
        qps: Requests per second after the burst (``kubeAPIQPS``).
        burst: Requests that may go at once (``kubeAPIBurst``).
        clock: The clock the bucket refills and waits on (default: the machine's).
        connections: The most connections the client keeps open to the server
            at once (default: the client library's, 100).

    Returns:
        The ApiClient.

    Raises:
        ConfigurationError: No credentials found, or the kubeconfig is unusable
            (naming the file), or ``burst`` is negative.
    """
    if burst < 0:
        raise ConfigurationError(f"burst: {burst} must not be a negative number")
    limiter = None
    if qps >= 0:
        limiter = TokenBucket(qps or _CLIENT_GO_QPS, burst or _CLIENT_GO_BURST, clock=clock)
    configuration = k8s.Configuration()
    if connections is not None:
        if connections < 1:
            raise ConfigurationError(f"connections: {connections} must be at least 1")
        configuration.connection_pool_maxsize = connections
    try:
        if isinstance(kubeconfig, Mapping):
            await k8s_config.load_kube_config_from_dict(
                dict(kubeconfig), context=context, client_configuration=configuration
            )
        elif kubeconfig is not None:
            if not os.path.isfile(kubeconfig):
                raise ConfigurationError(f"{os.fspath(kubeconfig)}: no such kubeconfig file")
            await k8s_config.load_kube_config(
                config_file=os.fspath(kubeconfig),
                context=context,
                client_configuration=configuration,
            )
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        else:
            raise ConfigurationError(
                "kubeconfig: none given and not running in a cluster "
                "(KUBERNETES_SERVICE_HOST is unset)"
            )
    except k8s_config.ConfigException as exc:
        where = (
            os.fspath(kubeconfig)
            if isinstance(kubeconfig, (str, os.PathLike))
            else ("kubeconfig" if kubeconfig is not None else "in-cluster config")
        )
        raise ConfigurationError(f"{where}: {exc}") from None
    return await _limited_client(configuration, limiter)
