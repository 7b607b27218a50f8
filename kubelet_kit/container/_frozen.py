"""The maps of the runtime's frozen values (labels, annotations, sysctls...).

A value of :mod:`kubelet_kit.container.interfaces` is frozen, and so is each map
it holds: :func:`frozen_map` gives it an unchangeable copy of what it was handed.
Being unchangeable, such a map is shared, not copied again, when a value is made
from another's (a container's status from its config's labels).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn

__all__ = ["frozen_map"]


class _FrozenDict(dict[str, str]):
    """The map a frozen value holds (its labels, annotations, sysctls...): a dict
    that refuses every change, so that it is as frozen as the value.

    Being unchangeable, one is shared rather than copied when a value is made
    from another's map (a container's status from its config's labels): nobody
    can change one value through it. It reads, compares, prints and serialises as
    the dict it is.
    """

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("the map of a frozen value cannot be changed")

    __setitem__ = _refuse
    __delitem__ = _refuse
    __ior__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse

    def __reduce__(self) -> tuple[type[_FrozenDict], tuple[dict[str, str]]]:
        # Copied and pickled through its contents, not item by item (which the
        # refusals above would stop).
        return (_FrozenDict, (dict(self),))


# Every empty map of a frozen value: it cannot change, so one does for all.
EMPTY: Mapping[str, str] = _FrozenDict()


def frozen_map(value: Mapping[str, str] | None) -> Mapping[str, str]:
    """A frozen value's own unchangeable copy of ``value``, so the caller's later
    changes do not reach the value; another frozen value's map is taken as it is."""
    if not value:
        return EMPTY
    kind = type(value)
    if kind is _FrozenDict:
        return value
    if kind is dict:
        return _FrozenDict(value)
    # Other mappings (protobuf maps from a CRI response, among them) copy faster
    # key by key than through dict(), which goes the long way via keys().
    return _FrozenDict({k: value[k] for k in value})
