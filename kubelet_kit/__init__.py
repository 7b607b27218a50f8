"""kubelet-kit: the kubelet's subsystems as importable, swappable, testable parts.

Import the piece you need (``kubelet_kit.api``, ``kubelet_kit.pleg``, ...); this
top-level module stays light and imports no subsystem.
"""

from kubelet_kit._version import __version__

__all__ = ["__version__"]
