"""The call log and fault injection the small fakes share.

:class:`FakeCallLog` gives a fake what the fake convention asks of it, in the
same shapes as :class:`~kubelet_kit.testing.FakeRuntime`: ``calls`` (a list of
:class:`~kubelet_kit.testing.Call`), ``calls_to(method)``, ``clear_calls()``,
``inject_error(method, exc, times=1, when=...)``, ``pending_errors()`` and
``clear_errors()``. A fake names the methods it records in ``_METHODS`` and
starts each recorded method with ``self._enter(method, args, kwargs)``, which
records the call and raises the fault due for it, if any.

The log is guarded by a lock, so a fake whose methods run in threads (a CNI
plugin run the way separate plugin processes would be) keeps an exact log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from kubelet_kit.testing._fake_records import Call, InjectedError, _Fault, _take


class FakeCallLog:
    """Call log and ``inject_error`` for a fake; see the module docstring."""

    #: The methods a subclass records (the names ``inject_error`` accepts).
    _METHODS: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        #: Every recorded call, oldest first.
        self.calls: list[Call] = []
        self._faults: list[_Fault] = []
        self._log_lock = threading.Lock()

    def inject_error(
        self,
        method: str,
        exc: BaseException,
        times: int = 1,
        *,
        when: Callable[..., bool] | None = None,
    ) -> None:
        """Make the next ``times`` calls of ``method`` raise ``exc``.

        The same exception instance is raised each time. Faults of one method are
        used in the order they were injected; one with ``when`` applies only to
        calls for which ``when(*args)`` is true (``args`` as recorded in
        :class:`~kubelet_kit.testing.Call`).

        Raises:
            ValueError: ``method`` is not one this fake records, or ``times < 1``.
        """
        self._check_method(method)
        if times < 1:
            raise ValueError(f"inject_error: times must be >= 1, got {times}")
        with self._log_lock:
            self._faults.append(_Fault(method, exc, times, when))

    def pending_errors(self, method: str | None = None) -> list[InjectedError]:
        """Injected faults not yet raised (all of them, or those of ``method``)."""
        with self._log_lock:
            return [
                InjectedError(f.method, f.exc, f.remaining, f.when)
                for f in self._faults
                if method is None or f.method == method
            ]

    def clear_errors(self) -> None:
        """Drop every pending injected fault."""
        with self._log_lock:
            self._faults.clear()

    def calls_to(self, method: str) -> list[Call]:
        """The recorded calls of ``method``, oldest first."""
        with self._log_lock:
            return [c for c in self.calls if c.method == method]

    def clear_calls(self) -> None:
        """Forget the recorded calls."""
        with self._log_lock:
            self.calls.clear()

    def _enter(
        self, method: str, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None = None
    ) -> None:
        """Record a call of ``method``; raise the fault injected for it, if one is due."""
        with self._log_lock:
            self.calls.append(Call(method, args, dict(kwargs or {})))
            fault = _take(self._faults, method, args)
        if fault is not None:
            raise fault.exc

    def _raise_due(self, method: str, args: tuple[Any, ...] = ()) -> None:
        """Raise the fault injected for ``method`` if one is due, recording nothing."""
        with self._log_lock:
            fault = _take(self._faults, method, args)
        if fault is not None:
            raise fault.exc

    def _check_method(self, method: str) -> None:
        if method not in self._METHODS:
            raise ValueError(
                f"{type(self).__name__} has no method {method!r}; expected one of "
                f"{', '.join(sorted(self._METHODS))}"
            )
