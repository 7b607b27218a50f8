"""The cluster's Services, kept current from the API server: what an agent's
containers get their service-link variables from (``KUBERNETES_SERVICE_HOST``,
and with ``enableServiceLinks`` one set per service of the pod's namespace)."""

from __future__ import annotations

import logging
from typing import Any

from kubelet_kit.api import Service
from kubelet_kit.clock import Clock
from kubelet_kit.config.apiserver import ListWatch
from kubelet_kit.errors import KubeletKitError, ValidationError

__all__ = ["APIServices", "ServicesNotSyncedError"]

log = logging.getLogger(__name__)


class ServicesNotSyncedError(KubeletKitError):
    """The services were not listed yet: no container can get its variables."""


class APIServices:
    """Every Service of the cluster, listed and watched through the API server.

    Pass the object as ``Kubelet(services=...)`` and run :meth:`run` beside the
    agent. Until the first list arrives, calling it raises (as the kubelet
    refuses to build a container's environment before its service informer has
    synced), so containers wait with CreateContainerConfigError rather than
    start without their variables.

    Args:
        api_client: A ``kubernetes_asyncio`` ApiClient (not closed here).
        clock: Time for the back-off between failed attempts.
        watch_timeout: Seconds one watch stays open before it is made again.
    """

    def __init__(
        self, api_client: Any, *, clock: Clock | None = None, watch_timeout: float = 300.0
    ) -> None:
        self.api_client = api_client
        self.watch = ListWatch(
            "list_service_for_all_namespaces",
            what="service",
            clock=clock,
            watch_timeout=watch_timeout,
        )
        self._services: tuple[Service, ...] | None = None

    def __call__(self) -> list[Service]:
        """The services now.

        Raises:
            ServicesNotSyncedError: before the first list.
        """
        if self._services is None:
            raise ServicesNotSyncedError(
                "services have not yet been read at least once, cannot construct envvars"
            )
        return list(self._services)

    async def run(self) -> None:
        """Keep the services current until cancelled."""
        async for _ in self.watch.changes(self.api_client):
            services = []
            for uid, raw in self.watch.objects.items():
                try:
                    services.append(Service.from_dict(raw))
                except ValidationError as exc:
                    log.warning("service %s left out: %s", uid, exc)
            self._services = tuple(services)
