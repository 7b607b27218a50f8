"""FakeDevicePlugin: a device plugin whose devices and answers a test sets.

It is the project's plugin SDK (:class:`kubelet_kit.deviceplugin.DevicePlugin`)
with scripted hooks, so it serves the real v1beta1 ``DevicePlugin`` service on a
unix socket and registers with a kubelet's (or the agent's
:class:`~kubelet_kit.cm.devicemanager.DeviceManager`'s) socket like any plugin:

* devices are given by id; ``set_health(id, "Unhealthy")`` (or
  :meth:`FakeDevicePlugin.flip`) reaches every ``ListAndWatch`` at once;
* ``Allocate`` records each container's device ids in :attr:`allocations` and
  answers the configured ``allocation`` (by default an environment variable
  ``FAKE_DEVICE_IDS`` listing them); unknown ids are refused as the SDK refuses
  them;
* ``GetPreferredAllocation`` is offered when ``preferred`` is given (a fixed
  answer, a function, or True for the SDK's own choice);
  ``PreStartContainer`` when ``pre_start_required``; both are recorded;
* the call log and ``inject_error(method, exc)`` of every fake, by hook name
  (``list_devices``, ``allocate``, ``get_preferred_allocation``,
  ``pre_start_container``); an injected error fails the RPC with its message,
  as a plugin's own failure does.

For example::

    plugin = FakeDevicePlugin("example.com/widget", ["w0", "w1"], plugins_dir=d)
    async with DeviceManager(plugins_dir=d, clock=clock) as dm, plugin:
        ...
        plugin.flip("w0")              # the manager sees w0 unhealthy
        assert plugin.allocations == [("w1",)]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar

from kubelet_kit.cm.devicemanager.constants import DEVICE_PLUGIN_PATH, HEALTHY, UNHEALTHY
from kubelet_kit.deviceplugin.plugin import ContainerAllocation, Device, DevicePlugin
from kubelet_kit.testing._fake_log import FakeCallLog

if TYPE_CHECKING:
    from kubelet_kit.clock import Clock

__all__ = ["FakeDevicePlugin"]

#: ``allocation``: a fixed answer, or one made from the device ids.
Allocation = ContainerAllocation | Callable[[Sequence[str]], ContainerAllocation]
#: ``preferred``: a fixed answer, ``fn(available, must_include, size)``, or True.
Preferred = Sequence[str] | Callable[[Sequence[str], Sequence[str], int], Sequence[str]] | bool


def _default_allocation(device_ids: Sequence[str]) -> ContainerAllocation:
    return ContainerAllocation(envs={"FAKE_DEVICE_IDS": ",".join(device_ids)})


class FakeDevicePlugin(FakeCallLog, DevicePlugin):
    """A :class:`~kubelet_kit.deviceplugin.DevicePlugin` with scripted answers.

    Args:
        resource_name: The extended resource (``vendor-domain/name``).
        devices: The devices (ids, or :class:`~kubelet_kit.deviceplugin.Device`
            values), all healthy when given by id.
        allocation: What ``Allocate`` answers for a container (default: the env
            variable ``FAKE_DEVICE_IDS``).
        preferred: Offer ``GetPreferredAllocation``: a fixed answer (returned as
            is, even if not among the available ids), ``fn(available,
            must_include, size)``, or True for the SDK's choice. None: not offered.
        pre_start_required: Ask for ``PreStartContainer`` before each start.
        plugins_dir: The kubelet's device plugins directory.
        socket_name: This plugin's socket file name there.
        clock: Time for the watch loop of :meth:`run`.
        watch_interval: Seconds between checks for a restarted kubelet.
    """

    _METHODS: ClassVar[frozenset[str]] = frozenset(
        {"list_devices", "allocate", "get_preferred_allocation", "pre_start_container"}
    )

    def __init__(
        self,
        resource_name: str = "example.com/fake",
        devices: Sequence[Device | str] = ("dev-0", "dev-1"),
        *,
        allocation: Allocation = _default_allocation,
        preferred: Preferred | None = None,
        pre_start_required: bool = False,
        plugins_dir: str | os.PathLike[str] = DEVICE_PLUGIN_PATH,
        socket_name: str | None = None,
        clock: Clock | None = None,
        watch_interval: float = 1.0,
    ) -> None:
        FakeCallLog.__init__(self)
        DevicePlugin.__init__(
            self,
            resource_name,
            devices=[d if isinstance(d, Device) else Device(d) for d in devices],
            plugins_dir=plugins_dir,
            socket_name=socket_name,
            pre_start_required=pre_start_required,
            clock=clock,
            watch_interval=watch_interval,
        )
        self.allocation = allocation
        self.preferred = preferred
        self.preferred_allocation_available = preferred is not None and preferred is not False
        #: The device ids of every Allocate, one tuple per container, in order.
        self.allocations: list[tuple[str, ...]] = []
        #: ``(available, must_include, size)`` of every preferred-allocation request.
        self.preferred_requests: list[tuple[tuple[str, ...], tuple[str, ...], int]] = []
        #: The device ids of every PreStartContainer, in order.
        self.pre_starts: list[tuple[str, ...]] = []

    def flip(self, device_id: str) -> None:
        """Toggle one device's health; every ``ListAndWatch`` hears of it.

        Raises:
            KeyError: No device ``device_id``.
        """
        found = [d for d in self.devices if d.id == device_id]
        if not found:
            raise KeyError(device_id)
        self.set_health(device_id, UNHEALTHY if found[0].health == HEALTHY else HEALTHY)

    async def list_devices(self) -> Sequence[Device]:
        """The devices given to the constructor."""
        self._enter("list_devices", ())
        return await super().list_devices()

    async def allocate(self, device_ids: Sequence[str]) -> ContainerAllocation:
        """Record the ids and answer the configured allocation."""
        ids = tuple(device_ids)
        self._enter("allocate", (ids,), {"device_ids": ids})
        self.allocations.append(ids)
        if isinstance(self.allocation, ContainerAllocation):
            return self.allocation
        return self.allocation(ids)

    async def get_preferred_allocation(
        self, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> Sequence[str]:
        """Record the request and answer as ``preferred`` says."""
        request = (tuple(available), tuple(must_include), size)
        self._enter(
            "get_preferred_allocation",
            request,
            {"available": request[0], "must_include": request[1], "size": size},
        )
        self.preferred_requests.append(request)
        preferred = self.preferred
        if callable(preferred):
            return list(preferred(available, must_include, size))
        if preferred is None or isinstance(preferred, bool):
            return await super().get_preferred_allocation(available, must_include, size)
        return list(preferred)

    async def pre_start_container(self, device_ids: Sequence[str]) -> None:
        """Record the ids."""
        ids = tuple(device_ids)
        self._enter("pre_start_container", (ids,), {"device_ids": ids})
        self.pre_starts.append(ids)
