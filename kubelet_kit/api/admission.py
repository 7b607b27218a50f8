"""The answer of an admission check: may this pod run on this node?"""

from __future__ import annotations

import attrs

__all__ = ["AdmitResult"]


@attrs.frozen
class AdmitResult:
    """Outcome of admitting a pod (the kubelet's ``PodAdmitResult``).

    Attributes:
        admit: Whether the pod may run.
        reason: One CamelCase word when refused (e.g. ``Evicted``, ``OutOfcpu``,
            ``UnexpectedAdmissionError``); the pod is then Failed with this reason.
        message: A sentence for people.
    """

    admit: bool
    reason: str = ""
    message: str = ""

    @classmethod
    def ok(cls) -> AdmitResult:
        """An admitting result."""
        return cls(True)

    @classmethod
    def refuse(cls, reason: str, message: str) -> AdmitResult:
        """A refusing result."""
        return cls(False, reason, message)
