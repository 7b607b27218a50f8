"""Lazy re-exports for package ``__init__`` modules (PEP 562).

A package names what it offers in a table of ``name -> defining module``; a name
is imported the first time it is asked for, so importing the package (or one of
its light submodules) does not import what its heavier names need. Used as::

    __getattr__, __dir__ = lazy_exports(__name__, {"Kubelet": "kubelet_kit.agent"})

with ``if TYPE_CHECKING:`` imports of the same names for type checkers.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    module_name: str, exports: Mapping[str, str], public: Iterable[str] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package with lazy names.

    Args:
        module_name: The package's ``__name__``.
        exports: Each lazy name and the module that defines it.
        public: Further names ``dir()`` lists (the package's ``__all__``).

    Returns:
        ``(__getattr__, __dir__)``: the first imports the defining module, caches
        the value in the package (later lookups never reach it) and raises
        AttributeError for any other name; the second lists every public name,
        loaded or not, as ``dir()`` of an eager package would.
    """
    names = sorted(set(exports) | set(public))

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where), name)
        setattr(sys.modules[module_name], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[module_name])) | set(names))

    return __getattr__, __dir__
