"""A CNI plugin written with ``kubelet_kit.cni``: addresses from a fixed list.

``kk-static`` gives each attachment the first free address of the list in its
configuration and puts it on an interface named ``CNI_IFNAME`` inside the
container's network namespace (one end of a veth pair whose other end,
``<ifname>-peer``, stays in the namespace too). The address is reachable only inside that
namespace, which is all a demonstration or a test needs; chained after another
plugin it adds its interface and address to the previous result.

Install it where a runtime looks for plugins, e.g. as ``/opt/cni/bin/kk-static``
(a two-line shell wrapper that runs this file with a Python that has
kubelet-kit), and name it in a configuration list::

    {
      "cniVersion": "1.0.0",
      "name": "static-demo",
      "plugins": [
        {"type": "kk-static",
         "addresses": ["10.251.3.10/24", "10.251.3.11/24"],
         "dataDir": "/var/lib/cni/kk-static"}
      ]
    }

Leases are files ``<dataDir>/<network>/<address>`` holding the container id and
interface, written under a lock, so concurrent ADDs never hand out one address
twice and DEL releases exactly what ADD took. ADD, DEL, CHECK, STATUS and
VERSION follow the spec (see ``kubelet_kit.cni.plugin_main``).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from kubelet_kit.cni import (
    ERR_INVALID_NETWORK_CONFIG,
    ERR_IO_FAILURE,
    ERR_PLUGIN_NOT_AVAILABLE,
    ERR_UNKNOWN_CONTAINER,
    CmdArgs,
    CNIError,
    Interface,
    IPConfig,
    PluginBase,
    Result,
    plugin_main,
)

DEFAULT_DATA_DIR = "/var/lib/cni/kk-static"
#: A plugin's own error codes start at 100; this one means "the list is used up".
ERR_NO_FREE_ADDRESS = 100


def _addresses(args: CmdArgs) -> list[ipaddress.IPv4Interface | ipaddress.IPv6Interface]:
    raw = args.config.get("addresses")
    if not isinstance(raw, list) or not raw:
        raise CNIError(ERR_INVALID_NETWORK_CONFIG, "addresses: a non-empty list is required")
    out = []
    for i, a in enumerate(raw):
        try:
            out.append(ipaddress.ip_interface(str(a)))
        except ValueError:
            raise CNIError(
                ERR_INVALID_NETWORK_CONFIG, f"addresses[{i}]: {a!r} is not an address/prefix"
            ) from None
    return out


def _lease_dir(args: CmdArgs) -> Path:
    return Path(str(args.config.get("dataDir") or DEFAULT_DATA_DIR)) / args.name


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / "lock", os.O_CREAT | os.O_RDWR, 0o600)
    except OSError as exc:
        raise CNIError(ERR_IO_FAILURE, f"dataDir {directory}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _owner(args: CmdArgs) -> str:
    return f"{args.container_id}\n{args.ifname}\n"


def _held_by(directory: Path, owner: str) -> list[Path]:
    held = []
    for p in directory.iterdir():
        if p.name != "lock":
            with contextlib.suppress(OSError):
                if p.read_text() == owner:
                    held.append(p)
    return held


def _lease_name(address: ipaddress.IPv4Interface | ipaddress.IPv6Interface) -> str:
    return str(address.ip)


def _peer_name(ifname: str) -> str:
    # The peer's name must differ from ifname and fit in 15 characters.
    return f"{ifname[:10]}-peer"


def _configure_link(netns: str, ifname: str, address: str) -> str:
    """Make the interface in ``netns`` with ``address``; returns its MAC."""
    from pyroute2 import NetNS

    ip = ipaddress.ip_interface(address)
    with NetNS(netns) as ns:
        if not ns.link_lookup(ifname=ifname):
            # A veth pair with both ends inside the namespace: it needs no kernel
            # module beyond the one every container runtime uses, changes
            # nothing on the host, and goes away with the namespace.
            ns.link("add", ifname=ifname, kind="veth", peer=_peer_name(ifname))
            for peer in ns.link_lookup(ifname=_peer_name(ifname)):
                ns.link("set", index=peer, state="up")
        index = ns.link_lookup(ifname=ifname)[0]
        with contextlib.suppress(Exception):  # already there on a retried ADD
            ns.addr("add", index=index, address=str(ip.ip), prefixlen=ip.network.prefixlen)
        ns.link("set", index=index, state="up")
        link = ns.get_links(index)[0]
        return str(link.get_attr("IFLA_ADDRESS") or "")


def _link_addresses(netns: str, ifname: str) -> set[str]:
    from pyroute2 import NetNS

    with NetNS(netns) as ns:
        found = ns.link_lookup(ifname=ifname)
        if not found:
            return set()
        return {
            f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}" for a in ns.get_addr(index=found[0])
        }


def _remove_link(netns: str, ifname: str) -> None:
    from pyroute2 import NetNS

    with NetNS(netns) as ns:
        for index in ns.link_lookup(ifname=ifname):
            ns.link("del", index=index)


class StaticAddressPlugin(PluginBase):
    """Addresses from the configuration's ``addresses`` list, on a veth link."""

    def add(self, args: CmdArgs) -> Result:
        """Lease an address (the one this attachment already holds, if any) and
        put it on ``CNI_IFNAME`` inside ``CNI_NETNS``."""
        addresses = _addresses(args)
        directory = _lease_dir(args)
        with _locked(directory):
            held = _held_by(directory, _owner(args))
            chosen = next((a for a in addresses if held and _lease_name(a) == held[0].name), None)
            if chosen is None:
                taken = {p.name for p in directory.iterdir()}
                chosen = next((a for a in addresses if _lease_name(a) not in taken), None)
                if chosen is None:
                    raise CNIError(
                        ERR_NO_FREE_ADDRESS,
                        "no free address",
                        f"all {len(addresses)} addresses of network {args.name!r} are leased",
                    )
                (directory / _lease_name(chosen)).write_text(_owner(args))
        try:
            mac = _configure_link(args.netns, args.ifname, str(chosen))
        except Exception as exc:
            raise CNIError(
                ERR_IO_FAILURE, f"configure {args.ifname} in {args.netns}: {exc}"
            ) from None
        prev = args.prev_result or Result()
        ours = Interface(name=args.ifname, mac=mac, sandbox=args.netns)
        gateway = str(args.config.get("gateway") or "")
        return Result(
            interfaces=(*prev.interfaces, ours),
            ips=(*prev.ips, IPConfig(str(chosen), gateway, len(prev.interfaces))),
            routes=prev.routes,
            dns=prev.dns,
        )

    def delete(self, args: CmdArgs) -> None:
        """Release the lease and remove the link; whatever is already gone is fine."""
        directory = _lease_dir(args)
        if directory.is_dir():
            with _locked(directory):
                for lease in _held_by(directory, _owner(args)):
                    lease.unlink()
        if args.netns and os.path.exists(args.netns):
            with contextlib.suppress(Exception):  # the namespace may be on its way out
                _remove_link(args.netns, args.ifname)

    def check(self, args: CmdArgs) -> None:
        """The address of prevResult is still leased to us and still on the link."""
        prev = args.prev_result
        mine = prev.sandbox_ips(args.ifname) if prev else []
        if not mine:
            raise CNIError(ERR_UNKNOWN_CONTAINER, f"no address of {args.ifname} in prevResult")
        directory = _lease_dir(args)
        held = {p.name for p in _held_by(directory, _owner(args))} if directory.is_dir() else set()
        present = _link_addresses(args.netns, args.ifname)
        for ip in mine:
            if ip.ip not in held:
                raise CNIError(ERR_UNKNOWN_CONTAINER, f"{ip.ip} is not leased to this container")
            if ip.address not in present:
                raise CNIError(ERR_UNKNOWN_CONTAINER, f"{ip.address} is not on {args.ifname}")

    def status(self, args: CmdArgs) -> None:
        """Unavailable (50) when every address is leased."""
        addresses = _addresses(args)
        directory = _lease_dir(args)
        taken = {p.name for p in directory.iterdir()} if directory.is_dir() else set()
        if all(_lease_name(a) in taken for a in addresses):
            raise CNIError(ERR_PLUGIN_NOT_AVAILABLE, "no free address")


if __name__ == "__main__":
    sys.exit(plugin_main(StaticAddressPlugin(), about="kk-static: addresses from a fixed list"))
