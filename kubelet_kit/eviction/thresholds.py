"""Eviction signals and thresholds: parsing, defaults and the pure decision helpers.

The rules are the kubelet's (``pkg/kubelet/eviction/helpers.go``):

* A threshold is ``<signal> < <value>``; the value is a quantity (``100Mi``) or a
  percentage of the signal's capacity (``10%``). ``0%`` and ``100%`` disable it.
* Percentages are held as float32 fractions and applied as
  ``int(capacity * fraction)``, so 10% of 100Gi is 10737418400 bytes, as upstream
  computes it, not 10737418240.
* A hard threshold has no grace period; a soft one must name one. A minimum
  reclaim raises the bar a met threshold must clear before it is resolved.
* With ``pods`` in ``enforceNodeAllocatable``, every hard ``memory.available``
  threshold is copied to ``allocatableMemory.available``.

Everything here is synchronous and free of I/O, so it can be unit-tested (and
used in a user's own policy tests) without an event loop. Times are monotonic
seconds from the manager's clock.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs

from kubelet_kit.api.duration import parse_duration
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.api.quantity import Format, Quantity
from kubelet_kit.errors import FieldError, QuantityError, ValidationError

__all__ = [
    "ALLOCATABLE_MEMORY_AVAILABLE",
    "DEFAULT_EVICTION_HARD",
    "DEFAULT_MONITORING_INTERVAL",
    "DEFAULT_PRESSURE_TRANSITION_PERIOD",
    "DISK_PRESSURE",
    "IMAGEFS_AVAILABLE",
    "IMAGEFS_INODES_FREE",
    "MEMORY_AVAILABLE",
    "MEMORY_PRESSURE",
    "NODEFS_AVAILABLE",
    "NODEFS_INODES_FREE",
    "NODE_ALLOCATABLE_ENFORCEMENT_KEY",
    "OP_LESS_THAN",
    "PID_AVAILABLE",
    "PID_PRESSURE",
    "RESOURCE_EPHEMERAL_STORAGE",
    "RESOURCE_INODES",
    "RESOURCE_MEMORY",
    "RESOURCE_PIDS",
    "SIGNALS",
    "SIGNAL_TO_CONDITION",
    "SIGNAL_TO_RESOURCE",
    "EvictionConfig",
    "Observation",
    "Threshold",
    "ThresholdValue",
    "add_allocatable_thresholds",
    "merge_thresholds",
    "node_conditions",
    "node_conditions_last_observed_at",
    "node_conditions_observed_since",
    "parse_percentage",
    "parse_threshold_config",
    "sort_by_eviction_priority",
    "thresholds_first_observed_at",
    "thresholds_met",
    "thresholds_met_grace_period",
    "thresholds_updated_stats",
]

# ------------------------------------------------------------------ vocabulary

MEMORY_AVAILABLE: Final = "memory.available"
ALLOCATABLE_MEMORY_AVAILABLE: Final = "allocatableMemory.available"
NODEFS_AVAILABLE: Final = "nodefs.available"
NODEFS_INODES_FREE: Final = "nodefs.inodesFree"
IMAGEFS_AVAILABLE: Final = "imagefs.available"
IMAGEFS_INODES_FREE: Final = "imagefs.inodesFree"
PID_AVAILABLE: Final = "pid.available"

#: Every signal kubelet-kit observes, in a fixed order.
SIGNALS: Final = (
    MEMORY_AVAILABLE,
    ALLOCATABLE_MEMORY_AVAILABLE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    PID_AVAILABLE,
)

MEMORY_PRESSURE: Final = "MemoryPressure"
DISK_PRESSURE: Final = "DiskPressure"
PID_PRESSURE: Final = "PIDPressure"
#: Conditions in the order they are reported.
_CONDITION_ORDER: Final = (MEMORY_PRESSURE, DISK_PRESSURE, PID_PRESSURE)

RESOURCE_MEMORY: Final = "memory"
RESOURCE_EPHEMERAL_STORAGE: Final = "ephemeral-storage"
#: Internal resource names upstream uses for inode and pid accounting.
RESOURCE_INODES: Final = "inodes"
RESOURCE_PIDS: Final = "pids"

SIGNAL_TO_CONDITION: Final[Mapping[str, str]] = {
    MEMORY_AVAILABLE: MEMORY_PRESSURE,
    ALLOCATABLE_MEMORY_AVAILABLE: MEMORY_PRESSURE,
    NODEFS_AVAILABLE: DISK_PRESSURE,
    NODEFS_INODES_FREE: DISK_PRESSURE,
    IMAGEFS_AVAILABLE: DISK_PRESSURE,
    IMAGEFS_INODES_FREE: DISK_PRESSURE,
    PID_AVAILABLE: PID_PRESSURE,
}

SIGNAL_TO_RESOURCE: Final[Mapping[str, str]] = {
    MEMORY_AVAILABLE: RESOURCE_MEMORY,
    ALLOCATABLE_MEMORY_AVAILABLE: RESOURCE_MEMORY,
    NODEFS_AVAILABLE: RESOURCE_EPHEMERAL_STORAGE,
    NODEFS_INODES_FREE: RESOURCE_INODES,
    IMAGEFS_AVAILABLE: RESOURCE_EPHEMERAL_STORAGE,
    IMAGEFS_INODES_FREE: RESOURCE_INODES,
    PID_AVAILABLE: RESOURCE_PIDS,
}

#: The only operator upstream has.
OP_LESS_THAN: Final = "LessThan"

#: The kubelet's Linux defaults for ``evictionHard`` (used when it is not set at all;
#: giving any key drops the others, as upstream).
DEFAULT_EVICTION_HARD: Final[Mapping[str, str]] = {
    MEMORY_AVAILABLE: "100Mi",
    NODEFS_AVAILABLE: "10%",
    NODEFS_INODES_FREE: "5%",
    IMAGEFS_AVAILABLE: "15%",
    IMAGEFS_INODES_FREE: "5%",
}
DEFAULT_PRESSURE_TRANSITION_PERIOD: Final = 300.0
DEFAULT_MONITORING_INTERVAL: Final = 10.0
NODE_ALLOCATABLE_ENFORCEMENT_KEY: Final = "pods"

_PERCENT_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _float32(value: float) -> float:
    """``value`` rounded to the nearest float32, as Go's ``float32(...)``."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


# ----------------------------------------------------------------------- values


@attrs.frozen
class ThresholdValue:
    """A threshold's value: a quantity, or a fraction of the signal's capacity.

    Attributes:
        quantity: The literal amount, when given as a quantity.
        percentage: The fraction (0.1 for ``10%``), a float32 value as upstream;
            used only when ``quantity`` is None.
    """

    quantity: Quantity | None = None
    percentage: float = 0.0

    def amount(self, capacity: int) -> int:
        """The value in the signal's unit for a signal of ``capacity`` (upstream
        ``GetThresholdQuantity``)."""
        if self.quantity is not None:
            return self.quantity.value()
        return int(float(capacity) * self.percentage)

    def display(self, capacity: int, fmt: Format = Format.BINARY_SI) -> str:
        """The value as the kubelet prints it in messages (``100Mi``)."""
        if self.quantity is not None:
            return str(self.quantity)
        return str(Quantity.from_int(self.amount(capacity), fmt))

    def __str__(self) -> str:
        if self.quantity is not None:
            return str(self.quantity)
        return f"{self.percentage * 100:g}%"


@attrs.frozen
class Threshold:
    """One eviction threshold: ``signal < value``.

    Attributes:
        signal: One of :data:`SIGNALS`.
        value: The level below which the threshold is met.
        grace_period: Seconds it must stay met before acting (0 for a hard one).
        min_reclaim: Extra headroom required before a met threshold is resolved.
        operator: Always ``LessThan``.
    """

    signal: str
    value: ThresholdValue
    grace_period: float = 0.0
    min_reclaim: ThresholdValue | None = None
    operator: str = OP_LESS_THAN

    @property
    def hard(self) -> bool:
        """True when eviction acts at once (no grace period)."""
        return self.grace_period == 0

    def __str__(self) -> str:
        kind = "hard" if self.hard else f"soft({self.grace_period:g}s)"
        return f"{self.signal}<{self.value} {kind}"


@attrs.frozen
class Observation:
    """What was observed of one signal.

    Attributes:
        available: Amount left (bytes, inodes or pids).
        capacity: Total, against which percentages are taken.
        time: When the underlying stats were taken (wall seconds; 0 = unknown).
    """

    available: int
    capacity: int
    time: float = 0.0


# --------------------------------------------------------------------- parsing


def parse_percentage(text: str) -> float:
    """``"25.5%"`` -> the float32 fraction 0.255 (upstream ``parsePercentage``).

    Raises:
        ValueError: the part before ``%`` is not a number.
    """
    number = text.rstrip("%")
    if not _PERCENT_NUMBER.fullmatch(number):
        raise ValueError(f'strconv.ParseFloat: parsing "{number}": invalid syntax')
    return _float32(_float32(float(number)) / 100)


def _parse_value(
    field: str, signal: str, text: str, errors: list[FieldError]
) -> ThresholdValue | None:
    path = f"{field}[{signal}]"
    if text.endswith("%"):
        if text in ("0%", "100%"):
            return None
        try:
            pct = parse_percentage(text)
        except ValueError as exc:
            errors.append(FieldError(path, f'"{text}": {exc}'))
            return None
        if pct < 0:
            errors.append(
                FieldError(path, f"eviction percentage threshold {signal} must be >= 0%: {text}")
            )
            return None
        if pct > 1:
            errors.append(
                FieldError(path, f"eviction percentage threshold {signal} must be <= 100%: {text}")
            )
            return None
        return ThresholdValue(percentage=pct)
    try:
        qty = Quantity.parse(text)
    except QuantityError as exc:
        errors.append(FieldError(path, f'"{text}": {exc}'))
        return None
    if qty.sign() <= 0:
        errors.append(FieldError(path, f"eviction threshold {signal} must be positive: {qty}"))
        return None
    return ThresholdValue(quantity=qty)


def _check_signal(field: str, signal: str, errors: list[FieldError]) -> bool:
    if signal in SIGNAL_TO_RESOURCE:
        return True
    errors.append(FieldError(f"{field}[{signal}]", f"unsupported eviction signal {signal}"))
    return False


def _statements(
    field: str, statements: Mapping[str, str], errors: list[FieldError]
) -> list[Threshold]:
    out = []
    for signal, text in statements.items():
        if not _check_signal(field, signal, errors):
            continue
        value = _parse_value(field, signal, str(text), errors)
        if value is not None:
            out.append(Threshold(signal, value))
    return out


def parse_threshold_config(
    *,
    eviction_hard: Mapping[str, str] | None = None,
    eviction_soft: Mapping[str, str] | None = None,
    eviction_soft_grace_period: Mapping[str, str] | None = None,
    eviction_minimum_reclaim: Mapping[str, str] | None = None,
    enforce_node_allocatable: Iterable[str] = (),
) -> list[Threshold]:
    """Thresholds from the KubeletConfiguration's maps (upstream ``ParseThresholdConfig``).

    ``eviction_hard=None`` means "not configured" and gives
    :data:`DEFAULT_EVICTION_HARD`; an empty mapping means no hard thresholds.

    Returns:
        Hard thresholds, then soft ones, then (with ``pods`` enforced) the
        ``allocatableMemory.available`` copies of the hard memory thresholds.

    Raises:
        ValidationError: every bad entry, each named like
            ``evictionSoft[memory.available]``.
    """
    errors: list[FieldError] = []
    hard = _statements(
        "evictionHard", DEFAULT_EVICTION_HARD if eviction_hard is None else eviction_hard, errors
    )
    soft = _statements("evictionSoft", eviction_soft or {}, errors)
    grace: dict[str, float] = {}
    for signal, text in (eviction_soft_grace_period or {}).items():
        if not _check_signal("evictionSoftGracePeriod", signal, errors):
            continue
        path = f"evictionSoftGracePeriod[{signal}]"
        try:
            seconds = parse_duration(str(text))
        except ValueError as exc:
            errors.append(FieldError(path, str(exc)))
            continue
        if seconds < 0:
            errors.append(
                FieldError(
                    path,
                    f"invalid eviction grace period specified: {text}, must be a positive value",
                )
            )
            continue
        grace[signal] = seconds
    reclaim: dict[str, ThresholdValue] = {}
    for signal, text in (eviction_minimum_reclaim or {}).items():
        if not _check_signal("evictionMinimumReclaim", signal, errors):
            continue
        path = f"evictionMinimumReclaim[{signal}]"
        text = str(text)
        if text.endswith("%"):
            try:
                pct = parse_percentage(text)
            except ValueError as exc:
                errors.append(FieldError(path, f'"{text}": {exc}'))
                continue
            if pct <= 0:
                errors.append(
                    FieldError(
                        path,
                        f"eviction percentage minimum reclaim {signal} must be positive: {text}",
                    )
                )
                continue
            reclaim[signal] = ThresholdValue(percentage=pct)
            continue
        try:
            qty = Quantity.parse(text)
        except QuantityError as exc:
            errors.append(FieldError(path, f'"{text}": {exc}'))
            continue
        if qty.sign() < 0:
            errors.append(
                FieldError(path, f"negative eviction minimum reclaim specified for {signal}")
            )
            continue
        reclaim[signal] = ThresholdValue(quantity=qty)
    for i, t in enumerate(soft):
        if t.signal not in grace:
            errors.append(
                FieldError(
                    f"evictionSoftGracePeriod[{t.signal}]",
                    f"grace period must be specified for the soft eviction threshold {t.signal}",
                )
            )
            continue
        soft[i] = attrs.evolve(t, grace_period=grace[t.signal])
    if errors:
        raise ValidationError(errors)
    results = [attrs.evolve(t, min_reclaim=reclaim.get(t.signal)) for t in (*hard, *soft)]
    if NODE_ALLOCATABLE_ENFORCEMENT_KEY in tuple(enforce_node_allocatable):
        results = add_allocatable_thresholds(results)
    return results


def add_allocatable_thresholds(thresholds: Sequence[Threshold]) -> list[Threshold]:
    """``thresholds`` plus an ``allocatableMemory.available`` copy of each hard
    ``memory.available`` threshold (upstream ``addAllocatableThresholds``)."""
    extra = [
        Threshold(ALLOCATABLE_MEMORY_AVAILABLE, t.value, min_reclaim=t.min_reclaim)
        for t in thresholds
        if t.signal == MEMORY_AVAILABLE and t.hard
    ]
    return [*thresholds, *extra]


@attrs.frozen(kw_only=True)
class EvictionConfig:
    """The eviction manager's configuration (upstream ``eviction.Config``).

    Attributes:
        thresholds: What to enforce.
        pressure_transition_period: Seconds a pressure condition stays reported
            after its threshold was last met.
        max_pod_grace_period: Cap (seconds) on a pod's grace period in a soft
            eviction: the pod gets ``min(this, terminationGracePeriodSeconds)``;
            negative counts as 0.
        monitoring_interval: Seconds between synchronize rounds (the kubelet's 10 s).
        local_storage_capacity_isolation: Evict pods over their own local-storage
            limits (``localStorageCapacityIsolation``).
    """

    thresholds: tuple[Threshold, ...] = ()
    pressure_transition_period: float = DEFAULT_PRESSURE_TRANSITION_PERIOD
    max_pod_grace_period: int = 0
    monitoring_interval: float = DEFAULT_MONITORING_INTERVAL
    local_storage_capacity_isolation: bool = True

    @classmethod
    def from_kubelet_config(cls, config: KubeletConfiguration) -> EvictionConfig:
        """Read the ``eviction*`` fields (and ``enforceNodeAllocatable``).

        An ``evictionPressureTransitionPeriod`` of 0 means the 5m default, as in
        the kubelet (Go cannot tell an explicit zero from an unset field).

        Raises:
            ValidationError: every bad value, with its field named.
        """
        errors: list[FieldError] = []
        thresholds: list[Threshold] = []
        try:
            thresholds = parse_threshold_config(
                eviction_hard=config.eviction_hard,
                eviction_soft=config.eviction_soft,
                eviction_soft_grace_period=config.eviction_soft_grace_period,
                eviction_minimum_reclaim=config.eviction_minimum_reclaim,
                enforce_node_allocatable=config.enforce_node_allocatable,
            )
        except ValidationError as exc:
            errors.extend(exc.errors)
        transition = DEFAULT_PRESSURE_TRANSITION_PERIOD
        try:
            transition = config.seconds("eviction_pressure_transition_period")
        except ValueError as exc:
            errors.append(FieldError("evictionPressureTransitionPeriod", str(exc)))
        if transition < 0:
            errors.append(
                FieldError(
                    "evictionPressureTransitionPeriod",
                    f'Invalid value: "{config.eviction_pressure_transition_period}": must be >= 0',
                )
            )
        if errors:
            raise ValidationError(errors)
        return cls(
            thresholds=tuple(thresholds),
            pressure_transition_period=transition or DEFAULT_PRESSURE_TRANSITION_PERIOD,
            max_pod_grace_period=config.eviction_max_pod_grace_period,
            local_storage_capacity_isolation=config.local_storage_capacity_isolation,
        )


# ------------------------------------------------------------ decision helpers


def thresholds_met(
    thresholds: Iterable[Threshold],
    observations: Mapping[str, Observation],
    enforce_min_reclaim: bool,
) -> list[Threshold]:
    """The thresholds whose signal is below their value (plus their minimum
    reclaim when ``enforce_min_reclaim``); signals not observed are skipped."""
    out = []
    for t in thresholds:
        obs = observations.get(t.signal)
        if obs is None:
            continue
        level = t.value.amount(obs.capacity)
        if enforce_min_reclaim and t.min_reclaim is not None:
            level += t.min_reclaim.amount(obs.capacity)
        if level > obs.available:
            out.append(t)
    return out


def merge_thresholds(a: Sequence[Threshold], b: Iterable[Threshold]) -> list[Threshold]:
    """``a`` plus the thresholds of ``b`` not already in it (compared by signal,
    value, grace period and operator, as upstream)."""
    out = list(a)
    for t in b:
        if not any(_same(t, x) for x in out):
            out.append(t)
    return out


def _same(a: Threshold, b: Threshold) -> bool:
    if (a.signal, a.grace_period, a.operator) != (b.signal, b.grace_period, b.operator):
        return False
    if a.value.quantity is not None or b.value.quantity is not None:
        return (
            a.value.quantity is not None
            and b.value.quantity is not None
            and a.value.quantity.cmp(b.value.quantity) == 0
        )
    return a.value.percentage == b.value.percentage


def thresholds_first_observed_at(
    thresholds: Iterable[Threshold], last: Mapping[Threshold, float], now: float
) -> dict[Threshold, float]:
    """When each of ``thresholds`` was first met: its earlier time, or ``now``."""
    return {t: last.get(t, now) for t in thresholds}


def thresholds_met_grace_period(
    observed_at: Mapping[Threshold, float], now: float
) -> list[Threshold]:
    """The thresholds met for at least their grace period by ``now``."""
    return [t for t, at in observed_at.items() if now - at >= t.grace_period]


def thresholds_updated_stats(
    thresholds: Iterable[Threshold],
    observations: Mapping[str, Observation],
    last: Mapping[str, Observation],
) -> list[Threshold]:
    """The thresholds whose signal has newer stats than at the last round (or no
    time at all): acting twice on the same stale numbers would over-evict."""
    out = []
    for t in thresholds:
        obs = observations.get(t.signal)
        if obs is None:
            continue
        prev = last.get(t.signal)
        if prev is None or obs.time == 0 or obs.time > prev.time:
            out.append(t)
    return out


def node_conditions(thresholds: Iterable[Threshold]) -> list[str]:
    """The pressure conditions the thresholds imply, each once, in report order."""
    found = {SIGNAL_TO_CONDITION[t.signal] for t in thresholds if t.signal in SIGNAL_TO_CONDITION}
    return [c for c in _CONDITION_ORDER if c in found]


def node_conditions_last_observed_at(
    conditions: Iterable[str], last: Mapping[str, float], now: float
) -> dict[str, float]:
    """``conditions`` observed ``now``; the others keep their earlier time."""
    out = dict(last)
    out.update({c: now for c in conditions})
    return out


def node_conditions_observed_since(
    observed_at: Mapping[str, float], period: float, now: float
) -> list[str]:
    """The conditions observed less than ``period`` seconds before ``now``."""
    return [c for c in _CONDITION_ORDER if c in observed_at and now - observed_at[c] < period]


def sort_by_eviction_priority(thresholds: Iterable[Threshold]) -> list[Threshold]:
    """Memory signals first, signals with no resource to reclaim last (stable)."""

    def key(t: Threshold) -> int:
        if t.signal in (MEMORY_AVAILABLE, ALLOCATABLE_MEMORY_AVAILABLE):
            return 0
        return 1 if t.signal in SIGNAL_TO_RESOURCE else 2

    return sorted(thresholds, key=key)
