"""FakeCNIPlugin: a CNI plugin that hands out addresses from a range, in memory.

It fills in the :class:`kubelet_kit.cni.Plugin` protocol the way a real IPAM
plugin behaves, without touching a network namespace:

* ADD leases the first free address of its range to the attachment (network,
  container id, interface) and answers an interface ``CNI_IFNAME`` inside
  ``CNI_NETNS`` with that address, extending ``prevResult`` when chained; an
  attachment that already holds a lease gets the same answer again;
* DEL releases the attachment's lease; DEL of what is not there succeeds, as
  the spec requires;
* CHECK fails (ERR_UNKNOWN_CONTAINER) when ``prevResult``'s address on the
  interface is not leased to the attachment; STATUS fails
  (ERR_PLUGIN_NOT_AVAILABLE) when the range is used up;
* every failure is a :class:`~kubelet_kit.cni.CNIError` with the spec's code, so
  through :func:`~kubelet_kit.cni.run_plugin` it prints what a real plugin prints.

Calls are recorded (``Call("add", (args,))`` with the
:class:`~kubelet_kit.cni.CmdArgs`) and ``inject_error(method, exc)`` makes one
fail. The fake is thread-safe, so runs made concurrently (as separate plugin
processes would be) never share an address::

    plugin = FakeCNIPlugin("10.88.0.0/24")
    code, out, _ = run_plugin(plugin, environ=env, stdin=conf)
"""

from __future__ import annotations

import hashlib
import ipaddress
import threading
from typing import ClassVar

from kubelet_kit.cni.plugin import CmdArgs
from kubelet_kit.cni.types import (
    ERR_PLUGIN_NOT_AVAILABLE,
    ERR_UNKNOWN_CONTAINER,
    CNIError,
    Interface,
    IPConfig,
    Result,
    Route,
)
from kubelet_kit.testing._fake_log import FakeCallLog

__all__ = ["ERR_NO_FREE_ADDRESS", "FakeCNIPlugin"]

#: The fake's own error code (a plugin's start at 100): the range is used up.
ERR_NO_FREE_ADDRESS = 100

_Key = tuple[str, str, str]  # (network name, container id, interface)


def _mac(key: _Key) -> str:
    digest = hashlib.sha256("/".join(key).encode()).digest()
    # A locally administered unicast address.
    return ":".join(f"{b:02x}" for b in (0x02, *digest[:5]))


class FakeCNIPlugin(FakeCallLog):
    """A :class:`kubelet_kit.cni.Plugin` leasing addresses of ``subnet``.

    Args:
        subnet: The range, e.g. ``10.88.0.0/24``; its first host address is the
            gateway, the others are handed out in order.
        size: Hand out at most this many addresses (default: the whole range),
            to make "the range is used up" easy to reach.
    """

    _METHODS: ClassVar[frozenset[str]] = frozenset({"add", "delete", "check", "status"})

    def __init__(self, subnet: str = "10.88.0.0/24", *, size: int | None = None) -> None:
        super().__init__()
        self.network = ipaddress.ip_network(subnet)
        hosts = self.network.hosts()
        self.gateway = str(next(hosts))
        pool: list[str] = []
        for host in hosts:
            if size is not None and len(pool) >= size:
                break
            pool.append(str(host))
        self.pool: tuple[str, ...] = tuple(pool)
        self._leases: dict[_Key, str] = {}
        self._lock = threading.Lock()

    # -- test helpers -----------------------------------------------------------

    def leases(self) -> dict[str, tuple[str, str, str]]:
        """Address -> (network, container id, interface) of every lease held."""
        with self._lock:
            return {address: key for key, address in self._leases.items()}

    def free(self, network: str = "") -> list[str]:
        """The addresses not leased (on ``network``, or on any network)."""
        with self._lock:
            taken = {a for k, a in self._leases.items() if not network or k[0] == network}
        return [a for a in self.pool if a not in taken]

    # -- Plugin -----------------------------------------------------------------

    def add(self, args: CmdArgs) -> Result:
        """ADD: lease an address (the one held already, if any); see the module.

        Raises:
            CNIError: ERR_NO_FREE_ADDRESS (100) when the range is used up.
        """
        self._enter("add", (args,), {"args": args})
        key = (args.name, args.container_id, args.ifname)
        with self._lock:
            address = self._leases.get(key)
            if address is None:
                taken = {a for k, a in self._leases.items() if k[0] == args.name}
                address = next((a for a in self.pool if a not in taken), None)
                if address is None:
                    raise CNIError(
                        ERR_NO_FREE_ADDRESS,
                        "no free address",
                        f"all {len(self.pool)} addresses of network {args.name!r} are leased",
                    )
                self._leases[key] = address
        prev = args.prev_result or Result()
        ours = Interface(name=args.ifname, mac=_mac(key), sandbox=args.netns)
        cidr = f"{address}/{self.network.prefixlen}"
        default = "::/0" if self.network.version == 6 else "0.0.0.0/0"
        return Result(
            interfaces=(*prev.interfaces, ours),
            ips=(*prev.ips, IPConfig(cidr, self.gateway, len(prev.interfaces))),
            routes=(*prev.routes, Route(default, self.gateway)),
            dns=prev.dns,
        )

    def delete(self, args: CmdArgs) -> None:
        """DEL: release the attachment's lease; nothing held is fine."""
        self._enter("delete", (args,), {"args": args})
        with self._lock:
            self._leases.pop((args.name, args.container_id, args.ifname), None)

    def check(self, args: CmdArgs) -> None:
        """CHECK: ``prevResult``'s address on the interface is leased to us.

        Raises:
            CNIError: ERR_UNKNOWN_CONTAINER when it is not (or there is none).
        """
        self._enter("check", (args,), {"args": args})
        prev = args.prev_result
        mine = prev.sandbox_ips(args.ifname) if prev is not None else []
        if not mine:
            raise CNIError(ERR_UNKNOWN_CONTAINER, f"no address of {args.ifname} in prevResult")
        with self._lock:
            held = self._leases.get((args.name, args.container_id, args.ifname))
        for ip in mine:
            if ip.ip != held:
                raise CNIError(ERR_UNKNOWN_CONTAINER, f"{ip.ip} is not leased to this container")

    def status(self, args: CmdArgs) -> None:
        """STATUS: available while the range has a free address.

        Raises:
            CNIError: ERR_PLUGIN_NOT_AVAILABLE (50) when it is used up.
        """
        self._enter("status", (args,), {"args": args})
        if not self.free(args.name):
            raise CNIError(ERR_PLUGIN_NOT_AVAILABLE, "no free address")
