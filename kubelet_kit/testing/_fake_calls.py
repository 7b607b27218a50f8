"""Call log, latency, fault injection and conditions of the fake runtime.

The part of :class:`~kubelet_kit.testing.FakeRuntime` a test uses to look at the
calls made and to make them slow, failing or unavailable (``set_latency``,
``inject_error``, ``inject_latency``, ``set_unavailable``), and the runtime info
methods (``version``, ``status`` with its settable conditions).
"""

from __future__ import annotations

from collections.abc import Callable

from kubelet_kit.container.interfaces import RuntimeCondition, RuntimeStatus, VersionInfo
from kubelet_kit.errors import RuntimeUnavailableError
from kubelet_kit.testing._fake_base import _FakeRuntimeBase
from kubelet_kit.testing._fake_records import (
    _DELAY,
    RUNTIME_METHODS,
    STREAMING_METHODS,
    Call,
    InjectedError,
    _Fault,
)


class _CallsPart(_FakeRuntimeBase):
    """Recorded calls, latency, injected faults, availability; version and status."""

    # ================================================================ test controls

    def set_latency(self, method: str, seconds: float) -> None:
        """Make every later call of ``method`` take ``seconds`` of clock time.

        ``method`` ``"*"`` sets the default for methods without their own latency.

        Raises:
            ValueError: ``method`` is not a Runtime method.
        """
        if method == "*":
            self._default_latency = float(seconds)
            return
        self._check_method(method)
        self._latency[method] = float(seconds)

    def inject_error(
        self,
        method: str,
        exc: BaseException,
        times: int = 1,
        *,
        when: Callable[..., bool] | None = None,
    ) -> None:
        """Make the next ``times`` calls of ``method`` raise ``exc``.

        The same exception instance is raised each time (with a fresh traceback),
        so a test may check ``excinfo.value is exc``. Faults for one method are
        used in the order they were injected; a fault with ``when`` applies only to
        calls for which ``when(*args)`` is true (``args`` in signature order, as in
        :class:`Call`). The fault is raised after the call's latency.

        Raises:
            ValueError: ``method`` is not a Runtime method, or ``times < 1``.
        """
        self._check_method(method)
        if times < 1:
            raise ValueError(f"inject_error: times must be >= 1, got {times}")
        self._faults.append(_Fault(method, exc, times, when))

    def inject_latency(
        self,
        method: str,
        seconds: float,
        times: int = 1,
        *,
        when: Callable[..., bool] | None = None,
    ) -> None:
        """Make the next ``times`` calls of ``method`` (those for which
        ``when(*args)`` is true, if given) take ``seconds`` more clock time.

        Unlike :meth:`set_latency` this hits chosen calls only, e.g. one container's
        ``container_status`` hanging while the others answer. A delay is used up
        when the call starts, even if the call is then cancelled.

        Raises:
            ValueError: ``method`` is not a Runtime method, or ``times < 1``.
        """
        self._check_method(method)
        if times < 1:
            raise ValueError(f"inject_latency: times must be >= 1, got {times}")
        self._delays.append(_Fault(method, _DELAY, times, when, seconds))

    def pending_errors(self, method: str | None = None) -> list[InjectedError]:
        """Injected faults not yet raised (all of them, or those of ``method``)."""
        return [
            InjectedError(f.method, f.exc, f.remaining, f.when)
            for f in self._faults
            if method is None or f.method == method
        ]

    def clear_errors(self) -> None:
        """Drop every pending injected fault."""
        self._faults.clear()

    def calls_to(self, method: str) -> list[Call]:
        """The recorded calls of ``method``, oldest first."""
        return [c for c in self.calls if c.method == method]

    def clear_calls(self) -> None:
        """Forget the recorded calls."""
        self.calls.clear()

    def set_unavailable(self, unavailable: bool = True) -> None:
        """While on, every call raises RuntimeUnavailableError (a dead runtime)."""
        self._unavailable = unavailable
        if unavailable:
            for stream in list(self._streams):
                stream.fail(RuntimeUnavailableError("the runtime went away"))

    def set_condition(self, type: str, status: bool, reason: str = "", message: str = "") -> None:
        """Set a runtime condition reported by :meth:`status`."""
        self._conditions[type] = RuntimeCondition(type, status, reason, message)

    # ================================================================ Runtime: info

    async def version(self) -> VersionInfo:
        """Name and version of the fake runtime. Never blocks beyond its latency."""
        await self._enter("version", ())
        return VersionInfo(runtime_name="fake", runtime_version="0.1.0", runtime_api_version="v1")

    async def status(self) -> RuntimeStatus:
        """RuntimeReady and NetworkReady (true unless :meth:`set_condition` says not)."""
        await self._enter("status", ())
        return RuntimeStatus(conditions=tuple(self._conditions.values()))

    def _check_method(self, method: str) -> None:
        if method not in RUNTIME_METHODS and method not in STREAMING_METHODS:
            raise ValueError(
                f"{method!r} is not a Runtime method; expected one of "
                f"{', '.join(sorted(RUNTIME_METHODS | STREAMING_METHODS))}"
            )
