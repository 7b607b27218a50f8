"""The ground of pod validation: the error collector and the checks every part shares.

:class:`ValidatorBase` collects :class:`~kubelet_kit.errors.FieldError` values with
one method per Kubernetes error type (``Required value``, ``Invalid value``,
``Unsupported value``, ...), the small checks of numbers, ports, file modes and
relative paths, and the checks of the selectors that both environment variables
and downwardAPI volumes use (``fieldRef``, ``resourceFieldRef`` and its divisor).
The checks of each part of a pod build on it.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence

from kubelet_kit.api._names import is_qualified_name, is_valid_port_name
from kubelet_kit.api.pod import ObjectFieldSelector, ResourceFieldSelector
from kubelet_kit.api.quantity import Quantity
from kubelet_kit.api.serde import format_value as _show
from kubelet_kit.errors import FieldError

__all__ = ["ZERO", "ValidatorBase"]

_PORT_RANGE_MSG = "must be between 1 and 65535, inclusive"
_MODE_MSG = "must be a number between 0 and 0777 (octal), both inclusive"


def _supported(values: Iterable[str]) -> str:
    return ", ".join(f'"{v}"' for v in sorted(values))


_RESOURCE_FIELDS = (
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
)
_SUBSCRIPT_FIELD = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")
ZERO = Quantity.parse("0")
#: The divisors a resourceFieldRef may have (besides zero, which reads as 1), by
#: their canonical spelling.
_CPU_DIVISORS: tuple[str, ...] = ("1m", "1")
_BYTE_DIVISORS: tuple[str, ...] = (
    "1",
    "1k",
    "1M",
    "1G",
    "1T",
    "1P",
    "1E",
    "1Ki",
    "1Mi",
    "1Gi",
    "1Ti",
    "1Pi",
    "1Ei",
)
#: Resources counted in bytes, and how upstream's divisor message names them.
_BYTE_RESOURCE_NAMES = {"memory": "memory", "ephemeral-storage": "local ephemeral storage"}


class ValidatorBase:
    """Collects errors; one method per Kubernetes error type."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def required(self, path: str, detail: str = "") -> None:
        self.errors.append(FieldError(path, "Required value" + (f": {detail}" if detail else "")))

    def invalid(self, path: str, value: object, detail: str) -> None:
        self.errors.append(FieldError(path, f"Invalid value: {_show(value)}: {detail}"))

    def not_supported(self, path: str, value: str, supported: Iterable[str]) -> None:
        self.errors.append(
            FieldError(
                path,
                f"Unsupported value: {_show(value)}: supported values: {_supported(supported)}",
            )
        )

    def duplicate(self, path: str, value: object) -> None:
        self.errors.append(FieldError(path, f"Duplicate value: {_show(value)}"))

    def not_found(self, path: str, value: object) -> None:
        self.errors.append(FieldError(path, f"Not found: {_show(value)}"))

    def forbidden(self, path: str, detail: str) -> None:
        self.errors.append(FieldError(path, f"Forbidden: {detail}"))

    def each(self, path: str, value: str, problems: Iterable[str]) -> None:
        for msg in problems:
            self.invalid(path, value, msg)

    def enum(self, path: str, value: str, supported: Sequence[str]) -> None:
        if value == "" and "" not in supported:
            self.required(path)
        elif value not in supported:
            self.not_supported(path, value, supported)

    def nonnegative(self, path: str, value: int) -> None:
        if value < 0:
            self.invalid(path, value, "must be greater than or equal to 0")

    def port_number(self, path: str, value: int) -> None:
        if not 1 <= value <= 65535:
            self.invalid(path, value, _PORT_RANGE_MSG)

    def port_num_or_name(self, path: str, value: int | str) -> None:
        if isinstance(value, int):
            self.port_number(path, value)
        elif value == "":
            self.required(path)
        else:
            self.each(path, value, is_valid_port_name(value))

    def mode(self, path: str, value: int | None) -> None:
        if value is not None and not 0 <= value <= 0o777:
            self.invalid(path, value, _MODE_MSG)

    def relative_path(self, path: str, value: str, *, item: bool = False) -> None:
        # Kubernetes' validateLocalDescendingPath; file items of configMap, secret and
        # downwardAPI volumes may not even start with "..".
        if posixpath.isabs(value):
            self.invalid(path, value, "must be a relative path")
        if ".." in value.split("/"):
            self.invalid(path, value, "must not contain '..'")
        if item and value.startswith(".."):
            self.invalid(path, value, "must not start with '..'")

    # ------------------------------------------------------------------ selectors

    def field_ref(self, ref: ObjectFieldSelector, path: str, supported: Sequence[str]) -> None:
        if not ref.api_version:
            self.required(f"{path}.apiVersion")
        if not ref.field_path:
            self.required(f"{path}.fieldPath")
            return
        m = _SUBSCRIPT_FIELD.match(ref.field_path)
        if m:
            key = m.group(2)
            problems = is_qualified_name(key.lower() if m.group(1) == "annotations" else key)
            self.each(f"{path}.fieldPath", ref.field_path, problems)
        elif ref.field_path not in supported:
            self.not_supported(f"{path}.fieldPath", ref.field_path, supported)

    def resource_field_ref(
        self, ref: ResourceFieldSelector, path: str, *, container_required: bool
    ) -> None:
        if container_required and not ref.container_name:
            self.required(f"{path}.containerName")
        if not ref.resource:
            self.required(f"{path}.resource")
        elif ref.resource not in _RESOURCE_FIELDS and not ref.resource.startswith(
            ("limits.hugepages-", "requests.hugepages-")
        ):
            self.not_supported(f"{path}.resource", ref.resource, _RESOURCE_FIELDS)
        self.divisor(ref, path)

    def divisor(self, ref: ResourceFieldSelector, path: str) -> None:
        # Upstream validateContainerResourceDivisor. A zero divisor is the unset
        # Quantity, which the API server writes for a divisor nobody gave; it reads
        # as 1 (ExtractContainerResourceValue). Any other divisor must be one of the
        # unit values of its resource, shown with the resource as the bad value.
        divisor = ref.divisor
        if divisor is None or divisor.is_zero():
            return
        section, _, name = ref.resource.partition(".")
        if section not in ("limits", "requests"):
            return  # an unsupported resource, reported as such already
        if name == "cpu":
            allowed, what = _CPU_DIVISORS, "1m and 1 are supported with the cpu resource"
        elif name in _BYTE_RESOURCE_NAMES or name.startswith("hugepages-"):
            noun = _BYTE_RESOURCE_NAMES.get(name, "hugepages")
            allowed = _BYTE_DIVISORS
            what = f"{', '.join(allowed)} are supported with the {noun} resource"
        else:
            return  # an unsupported resource, reported as such already
        if str(divisor) not in allowed:
            self.invalid(f"{path}.divisor", ref.resource, f"only divisor's values {what}")
