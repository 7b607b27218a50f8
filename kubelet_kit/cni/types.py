"""The CNI spec's values: errors, results and the checks every plugin makes.

These are plain attrs values with ``to_json``/``from_json`` in the spec's own
field names, shared by the plugin SDK (:mod:`kubelet_kit.cni`) and the caller
(:mod:`kubelet_kit.network`), so both speak exactly the same JSON.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from kubelet_kit.errors import CNIError

__all__ = [
    "DNS",
    "ERR_DECODING_FAILURE",
    "ERR_INCOMPATIBLE_CNI_VERSION",
    "ERR_INTERNAL",
    "ERR_INVALID_ENVIRONMENT_VARIABLES",
    "ERR_INVALID_NETNS",
    "ERR_INVALID_NETWORK_CONFIG",
    "ERR_IO_FAILURE",
    "ERR_LIMITED_CONNECTIVITY",
    "ERR_PLUGIN_NOT_AVAILABLE",
    "ERR_TRY_AGAIN_LATER",
    "ERR_UNKNOWN",
    "ERR_UNKNOWN_CONTAINER",
    "ERR_UNSUPPORTED_FIELD",
    "SPEC_VERSIONS",
    "CNIError",
    "IPConfig",
    "Interface",
    "Result",
    "Route",
    "format_cni_args",
    "parse_cni_args",
    "validate_container_id",
    "validate_interface_name",
    "validate_network_name",
    "version_tuple",
]

#: Spec versions whose results share the 1.0 shape this package reads and writes.
SPEC_VERSIONS: tuple[str, ...] = ("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

# Error codes of the spec ("Error" section); 1-99 are the spec's, 100+ the plugin's.
ERR_UNKNOWN = 0
ERR_INCOMPATIBLE_CNI_VERSION = 1
ERR_UNSUPPORTED_FIELD = 2
ERR_UNKNOWN_CONTAINER = 3
ERR_INVALID_ENVIRONMENT_VARIABLES = 4
ERR_IO_FAILURE = 5
ERR_DECODING_FAILURE = 6
ERR_INVALID_NETWORK_CONFIG = 7
ERR_INVALID_NETNS = 8
ERR_TRY_AGAIN_LATER = 11
ERR_PLUGIN_NOT_AVAILABLE = 50
ERR_LIMITED_CONNECTIVITY = 51
#: libcni's code for a plugin failure that carried no code of its own.
ERR_INTERNAL = 999

_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$")
_IFNAME_MAX = 15  # IFNAMSIZ less the terminating NUL


def _opt(data: Mapping[str, Any], key: str, value: Any) -> None:
    if value not in (None, "", (), [], {}):
        data[key] = value  # type: ignore[index]


@attrs.frozen
class Interface:
    """One interface a plugin made (the spec's ``interfaces`` entry).

    Attributes:
        name: Interface name.
        mac: Hardware address, if any.
        sandbox: The network namespace path for an interface inside the
            container; empty for one on the host.
        mtu: MTU, 0 when not reported.
    """

    name: str
    mac: str = ""
    sandbox: str = ""
    mtu: int = 0

    def to_json(self) -> dict[str, Any]:
        """The spec's JSON object."""
        data: dict[str, Any] = {"name": self.name}
        _opt(data, "mac", self.mac)
        if self.mtu:
            data["mtu"] = self.mtu
        _opt(data, "sandbox", self.sandbox)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Interface:
        """Read the spec's JSON object."""
        return cls(
            name=str(data.get("name", "")),
            mac=str(data.get("mac", "")),
            sandbox=str(data.get("sandbox", "")),
            mtu=int(data.get("mtu", 0) or 0),
        )


@attrs.frozen
class IPConfig:
    """One address (the spec's ``ips`` entry).

    Attributes:
        address: CIDR notation, e.g. ``10.250.0.5/24``.
        gateway: Default gateway for the subnet, if any.
        interface: Index into the result's ``interfaces``, or None.
    """

    address: str
    gateway: str = ""
    interface: int | None = None

    @property
    def ip(self) -> str:
        """The address without its prefix length."""
        return self.address.split("/", 1)[0]

    def to_json(self) -> dict[str, Any]:
        """The spec's JSON object."""
        data: dict[str, Any] = {"address": self.address}
        _opt(data, "gateway", self.gateway)
        if self.interface is not None:
            data["interface"] = self.interface
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IPConfig:
        """Read the spec's JSON object."""
        iface = data.get("interface")
        return cls(
            address=str(data.get("address", "")),
            gateway=str(data.get("gateway", "")),
            interface=int(iface) if iface is not None else None,
        )


@attrs.frozen
class Route:
    """One route (the spec's ``routes`` entry): ``dst`` via ``gw``."""

    dst: str
    gw: str = ""

    def to_json(self) -> dict[str, Any]:
        """The spec's JSON object."""
        data: dict[str, Any] = {"dst": self.dst}
        _opt(data, "gw", self.gw)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Route:
        """Read the spec's JSON object."""
        return cls(dst=str(data.get("dst", "")), gw=str(data.get("gw", "")))


@attrs.frozen
class DNS:
    """DNS settings (the spec's ``dns`` object)."""

    nameservers: tuple[str, ...] = ()
    domain: str = ""
    search: tuple[str, ...] = ()
    options: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The spec's JSON object."""
        data: dict[str, Any] = {}
        _opt(data, "nameservers", list(self.nameservers))
        _opt(data, "domain", self.domain)
        _opt(data, "search", list(self.search))
        _opt(data, "options", list(self.options))
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DNS:
        """Read the spec's JSON object."""
        return cls(
            nameservers=tuple(data.get("nameservers") or ()),
            domain=str(data.get("domain", "")),
            search=tuple(data.get("search") or ()),
            options=tuple(data.get("options") or ()),
        )


@attrs.frozen
class Result:
    """The result of ADD (the spec's "Success" object), also ``prevResult``.

    Attributes:
        cni_version: The version the result is written in.
        interfaces: Interfaces made, host side and container side.
        ips: Addresses assigned; ``interface`` indexes ``interfaces``.
        routes: Routes added in the container.
        dns: DNS settings.
    """

    cni_version: str = "1.0.0"
    interfaces: tuple[Interface, ...] = ()
    ips: tuple[IPConfig, ...] = ()
    routes: tuple[Route, ...] = ()
    dns: DNS = DNS()

    def to_json(self) -> dict[str, Any]:
        """The spec's JSON object (empty lists and objects left out)."""
        data: dict[str, Any] = {"cniVersion": self.cni_version}
        _opt(data, "interfaces", [i.to_json() for i in self.interfaces])
        _opt(data, "ips", [i.to_json() for i in self.ips])
        _opt(data, "routes", [r.to_json() for r in self.routes])
        _opt(data, "dns", self.dns.to_json())
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Result:
        """Read a result of any version in :data:`SPEC_VERSIONS` (0.3's per-address
        ``version`` field is ignored).

        Raises:
            CNIError: ERR_DECODING_FAILURE, naming the field that is malformed.
        """
        if not isinstance(data, Mapping):
            raise CNIError(ERR_DECODING_FAILURE, "result is not a JSON object")
        try:
            return cls(
                cni_version=str(data.get("cniVersion", "")),
                interfaces=tuple(Interface.from_json(i) for i in data.get("interfaces") or ()),
                ips=tuple(IPConfig.from_json(i) for i in data.get("ips") or ()),
                routes=tuple(Route.from_json(r) for r in data.get("routes") or ()),
                dns=DNS.from_json(data.get("dns") or {}),
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise CNIError(ERR_DECODING_FAILURE, f"malformed result: {exc}") from None

    def sandbox_ips(self, ifname: str = "") -> list[IPConfig]:
        """The addresses on interfaces inside the container (``sandbox`` set), on
        ``ifname`` only when given; addresses without an interface index count
        too, as the result names no other place for them."""
        found = []
        for ip in self.ips:
            if ip.interface is None:
                found.append(ip)
                continue
            if 0 <= ip.interface < len(self.interfaces):
                iface = self.interfaces[ip.interface]
                if iface.sandbox and (not ifname or iface.name == ifname):
                    found.append(ip)
        return found


def version_tuple(version: str) -> tuple[int, int, int]:
    """``"1.0.0"`` -> ``(1, 0, 0)``.

    Raises:
        CNIError: ERR_DECODING_FAILURE for a version that is not ``X.Y.Z``.
    """
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise CNIError(ERR_DECODING_FAILURE, f"invalid version {version!r}: expected X.Y.Z")
    return int(parts[0]), int(parts[1]), int(parts[2])


def validate_container_id(container_id: str) -> None:
    """The spec's container id rule.

    Raises:
        CNIError: ERR_UNKNOWN_CONTAINER when empty, ERR_INVALID_ENVIRONMENT_VARIABLES
            when it has characters outside ``[a-zA-Z0-9_.-]`` (or starts with ``_.-``).
    """
    if not container_id:
        raise CNIError(ERR_UNKNOWN_CONTAINER, "missing containerID")
    if not _NAME_RE.match(container_id):
        raise CNIError(
            ERR_INVALID_ENVIRONMENT_VARIABLES,
            "invalid characters in containerID",
            container_id,
        )


def validate_interface_name(ifname: str) -> None:
    """The spec's interface name rule (a Linux interface name).

    Raises:
        CNIError: ERR_INVALID_ENVIRONMENT_VARIABLES, saying which rule is broken.
    """
    if not ifname:
        raise CNIError(ERR_INVALID_ENVIRONMENT_VARIABLES, "interface name is empty")
    if len(ifname) > _IFNAME_MAX:
        raise CNIError(
            ERR_INVALID_ENVIRONMENT_VARIABLES,
            "interface name is too long",
            f"interface name should be less than {_IFNAME_MAX + 1} characters",
        )
    if ifname in (".", ".."):
        raise CNIError(ERR_INVALID_ENVIRONMENT_VARIABLES, "interface name is . or ..")
    if any(c in "/:" or c.isspace() for c in ifname):
        raise CNIError(
            ERR_INVALID_ENVIRONMENT_VARIABLES,
            "interface name contains / or : or whitespace characters",
        )


def validate_network_name(name: str) -> None:
    """The spec's network name rule.

    Raises:
        CNIError: ERR_INVALID_NETWORK_CONFIG when missing or malformed.
    """
    if not name:
        raise CNIError(ERR_INVALID_NETWORK_CONFIG, "missing network name")
    if not _NAME_RE.match(name):
        raise CNIError(ERR_INVALID_NETWORK_CONFIG, "invalid characters found in network name", name)


def parse_cni_args(value: str) -> list[tuple[str, str]]:
    """Split ``CNI_ARGS`` (``K1=V1;K2=V2``) into pairs, in order.

    Raises:
        CNIError: ERR_INVALID_ENVIRONMENT_VARIABLES for an item without ``=``.
    """
    pairs: list[tuple[str, str]] = []
    for item in value.split(";") if value else ():
        key, sep, val = item.partition("=")
        if not sep:
            raise CNIError(
                ERR_INVALID_ENVIRONMENT_VARIABLES, f"CNI_ARGS: invalid pair {item!r} (no '=')"
            )
        pairs.append((key, val))
    return pairs


def format_cni_args(pairs: Sequence[tuple[str, str]]) -> str:
    """Join pairs into ``CNI_ARGS`` form."""
    return ";".join(f"{k}={v}" for k, v in pairs)
