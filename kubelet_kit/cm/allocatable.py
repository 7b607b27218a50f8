"""Node allocatable: what is left for pods after the node's reservations.

Upstream ``node_container_manager_linux.go``: allocatable = capacity - systemReserved
- kubeReserved - the hard eviction reservation, floored at zero. The eviction part
counts only hard ``memory.available`` (memory) and ``nodefs.available``
(ephemeral-storage) thresholds; percentages are float32 fractions of capacity, as
the kubelet parses them. The ``kubepods`` cgroup itself is limited to capacity -
systemReserved - kubeReserved (eviction is the kubelet's job, not the kernel's).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Final

from kubelet_kit.api import Quantity
from kubelet_kit.errors import ConfigurationError, FieldError

__all__ = [
    "DEFAULT_EVICTION_HARD",
    "allocatable_absolute",
    "hard_eviction_reservation",
    "node_allocatable",
    "node_allocatable_reservation",
    "parse_reserved",
    "validate_reservations",
]

#: The kubelet's Linux defaults for ``evictionHard``.
DEFAULT_EVICTION_HARD: Final[Mapping[str, str]] = {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%",
    "imagefs.available": "15%",
}

_SIGNAL_RESOURCE: Final = {
    "memory.available": "memory",
    "nodefs.available": "ephemeral-storage",
}

_ZERO = Quantity.parse("0")


def _f32(x: float) -> float:
    """Round a float to the nearest float32, as Go's float32 conversions do."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def parse_reserved(values: Mapping[str, str], field: str) -> dict[str, Quantity]:
    """Parse ``systemReserved``/``kubeReserved`` values into quantities.

    Raises:
        ConfigurationError: A value is not a quantity or is negative, naming
            ``<field>[<resource>]``.
    """
    out: dict[str, Quantity] = {}
    errors: list[FieldError] = []
    for name, text in values.items():
        path = f"{field}[{name}]"
        try:
            qty = Quantity.parse(str(text))
        except ValueError as exc:
            errors.append(FieldError(path, f'Invalid value: "{text}": {exc}'))
            continue
        if qty.sign() < 0:
            errors.append(FieldError(path, f'Invalid value: "{text}": must be >= 0'))
            continue
        out[name] = qty
    if errors:
        raise ConfigurationError("; ".join(str(e) for e in errors), errors)
    return out


def _threshold_quantity(text: str, capacity: Quantity | None, path: str) -> Quantity:
    if text.endswith("%"):
        try:
            pct = _f32(_f32(float(text[:-1])) / 100)
        except ValueError:
            raise ConfigurationError(
                f'{path}: Invalid value: "{text}"', [FieldError(path, f'Invalid value: "{text}"')]
            ) from None
        if pct < 0 or pct > 1:
            raise ConfigurationError(
                f'{path}: Invalid value: "{text}": percentage must be between 0 and 100',
                [FieldError(path, "percentage must be between 0 and 100")],
            )
        cap = capacity.value() if capacity is not None else 0
        # Go: int64(float64(capacity.Value()) * float64(percentage)), truncating.
        return Quantity.from_int(int(float(cap) * pct))
    try:
        qty = Quantity.parse(text)
    except ValueError as exc:
        raise ConfigurationError(
            f'{path}: Invalid value: "{text}": {exc}', [FieldError(path, str(exc))]
        ) from None
    if qty.sign() < 0:
        raise ConfigurationError(
            f'{path}: Invalid value: "{text}": must be >= 0', [FieldError(path, "must be >= 0")]
        )
    return qty


def hard_eviction_reservation(
    eviction_hard: Mapping[str, str] | None, capacity: Mapping[str, Quantity]
) -> dict[str, Quantity]:
    """What hard eviction thresholds hold back from pods.

    Args:
        eviction_hard: The kubelet's ``evictionHard`` (None: the Linux defaults).
            Only ``memory.available`` and ``nodefs.available`` count; "0%" and
            "100%" disable a threshold, as the kubelet reads them.
        capacity: Node capacity (for percentages).
    """
    thresholds = DEFAULT_EVICTION_HARD if eviction_hard is None else eviction_hard
    out: dict[str, Quantity] = {}
    for signal, text in thresholds.items():
        resource = _SIGNAL_RESOURCE.get(signal)
        if resource is None or str(text).strip() in ("0%", "100%"):
            # The kubelet reads "0%" and "100%" as "no threshold".
            continue
        out[resource] = _threshold_quantity(
            str(text).strip(), capacity.get(resource), f"evictionHard[{signal}]"
        )
    return out


def _add(into: dict[str, Quantity], values: Mapping[str, Quantity]) -> None:
    for k, v in values.items():
        into[k] = into[k] + v if k in into else v


def node_allocatable_reservation(
    capacity: Mapping[str, Quantity],
    *,
    system_reserved: Mapping[str, Quantity] = {},
    kube_reserved: Mapping[str, Quantity] = {},
    eviction_reservation: Mapping[str, Quantity] = {},
) -> dict[str, Quantity]:
    """Everything held back, per resource of ``capacity`` (zero totals are left out)."""
    out: dict[str, Quantity] = {}
    for name in capacity:
        total = _ZERO
        for part in (system_reserved, kube_reserved, eviction_reservation):
            if name in part:
                total = total + part[name]
        if not total.is_zero():
            out[name] = total
    return out


def validate_reservations(
    capacity: Mapping[str, Quantity], reservation: Mapping[str, Quantity]
) -> None:
    """Refuse reservations larger than capacity, as the kubelet refuses to start.

    Raises:
        ConfigurationError: ``invalid Node Allocatable configuration. Resource "memory"
            has a reservation of ... but capacity of ...``.
    """
    problems: list[str] = []
    errors: list[FieldError] = []
    for name in sorted(reservation):
        have = capacity.get(name, _ZERO)
        if (have - reservation[name]).sign() < 0:
            msg = (
                f'Resource "{name}" has a reservation of {reservation[name]} but capacity '
                f"of {have}. Expected capacity >= reservation."
            )
            problems.append(msg)
            errors.append(FieldError(name, msg))
    if problems:
        raise ConfigurationError(
            "invalid Node Allocatable configuration. " + " ".join(problems), errors
        )


def _subtract(
    capacity: Mapping[str, Quantity], reserved: Iterable[Mapping[str, Quantity]]
) -> dict[str, Quantity]:
    total: dict[str, Quantity] = {}
    for part in reserved:
        _add(total, part)
    out: dict[str, Quantity] = {}
    for name, cap in capacity.items():
        value = cap - total[name] if name in total else cap
        out[name] = value if value.sign() >= 0 else _ZERO
    return out


def node_allocatable(
    capacity: Mapping[str, Quantity],
    *,
    system_reserved: Mapping[str, Quantity] = {},
    kube_reserved: Mapping[str, Quantity] = {},
    eviction_hard: Mapping[str, str] | None = None,
) -> dict[str, Quantity]:
    """Node allocatable as the kubelet reports it (each resource floored at 0)."""
    eviction = hard_eviction_reservation(eviction_hard, capacity)
    return _subtract(capacity, (system_reserved, kube_reserved, eviction))


def allocatable_absolute(
    capacity: Mapping[str, Quantity],
    *,
    system_reserved: Mapping[str, Quantity] = {},
    kube_reserved: Mapping[str, Quantity] = {},
) -> dict[str, Quantity]:
    """Capacity less system and kube reservations: the ``kubepods`` cgroup's limits."""
    return _subtract(capacity, (system_reserved, kube_reserved))
