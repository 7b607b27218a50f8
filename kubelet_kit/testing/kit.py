"""What every conformance kit of :mod:`kubelet_kit.testing` is built from.

A kit is a table of named checks of one interface (PLEG, ContainerManager, ...).
Each check is an ``async`` function taking a :class:`KitContext`, which holds the
implementation under test (built afresh for the check by the user's factory),
names the step that runs, and fails or skips the check with a message.
:func:`run_kit` runs the checks and returns a
:class:`~kubelet_kit.testing.conformance.ConformanceReport` (the report of the
runtime kit, shared by every kit); :func:`kit_test_class` turns a kit into a base
class for pytest::

    from kubelet_kit.testing.pleg_kit import PLEGConformance

    class TestMyPLEG(PLEGConformance):
        def make(self, ctx):            # one fresh implementation per check
            return MyPLEG(ctx.options["runtime"], clock=ctx.options["clock"])

Its tests are synchronous (each runs its check on an event loop of its own), so
they need no asyncio plugin or configuration in the user's project.

A kit author writes::

    async def _check_relist_reports_a_start(ctx: KitContext[PLEG]) -> None:
        ctx.at("start a container")
        ...
        ctx.expect_eq("event type", event.type, PodLifecycleEventType.CONTAINER_STARTED)

    CHECKS = {"relist_reports_a_start": _check_relist_reports_a_start, ...}
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, NoReturn, TypeVar

import attrs

from kubelet_kit.testing.conformance import CheckResult, ConformanceReport

__all__ = [
    "KitCheck",
    "KitContext",
    "KitFailure",
    "KitSkip",
    "kit_test_class",
    "run_kit",
]

S = TypeVar("S")


class KitFailure(Exception):
    """Raised by :meth:`KitContext.fail` and the ``expect`` helpers: the check failed."""


class KitSkip(Exception):
    """Raised by :meth:`KitContext.skip`: the check cannot run here, for this reason."""


@attrs.define
class KitContext(Generic[S]):
    """What one check of a kit runs with.

    Attributes:
        check: The check's name.
        subject: The implementation under test, built for this check.
        options: The kit's options as the user gave them (clock, runtime, ...).
        step: The step that runs now; a failure is reported against it.
        cleanups: Callables run (and awaited) after the check, last first, even
            when it fails.
    """

    check: str
    subject: S
    options: Mapping[str, Any] = attrs.field(factory=dict)
    step: str = "setup"
    cleanups: list[Callable[[], object]] = attrs.field(factory=list)

    def at(self, step: str) -> None:
        """Name the step that runs next."""
        self.step = step

    def fail(self, message: str) -> NoReturn:
        """Fail the check with ``message``."""
        raise KitFailure(message)

    def skip(self, reason: str) -> NoReturn:
        """Skip the check, saying why."""
        raise KitSkip(reason)

    def expect(self, ok: bool, message: str) -> None:
        """Fail with ``message`` unless ``ok``."""
        if not ok:
            raise KitFailure(message)

    def expect_eq(self, what: str, got: object, want: object) -> None:
        """Fail unless ``got == want``, naming ``what`` and both values."""
        if got != want:
            raise KitFailure(f"{what}: expected {want!r}, got {got!r}")

    def defer(self, cleanup: Callable[[], object]) -> None:
        """Run ``cleanup`` (awaited if it returns an awaitable) after the check."""
        self.cleanups.append(cleanup)

    async def run_cleanups(self) -> None:
        """Run the deferred cleanups, last first; their errors are ignored (the
        check's own result stands)."""
        while self.cleanups:
            cleanup = self.cleanups.pop()
            try:
                outcome = cleanup()
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:  # best effort, see above
                continue


#: One check of a kit.
KitCheck = Callable[[KitContext[S]], Awaitable[None]]


async def _build(factory: Callable[..., Any], ctx: KitContext[Any]) -> Any:
    made = factory(ctx) if _takes_argument(factory) else factory()
    return await made if inspect.isawaitable(made) else made


def _takes_argument(factory: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    # Only a required positional parameter takes the context: ``list`` or a class
    # whose arguments all have defaults is called with none.
    return any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        for p in parameters
    )


async def run_kit(
    checks: Mapping[str, KitCheck[S]],
    factory: Callable[..., S | Awaitable[S]],
    *,
    names: Sequence[str] | None = None,
    options: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
    close: Callable[[S], object] | None = None,
) -> ConformanceReport:
    """Run the ``checks`` of a kit, each against a fresh implementation.

    Args:
        checks: The kit's table of checks, by name, in the order they run.
        factory: Builds the implementation under test. Called with the check's
            :class:`KitContext` (whose ``subject`` is still None, and whose
            ``options`` it may read) if it has a required positional parameter,
            else with none; may be async.
        names: The checks to run (default: all).
        options: Settings the checks read from ``ctx.options``, or a callable
            returning them afresh for each check (a clock, a fake runtime: parts
            one check must not leave to the next).
        close: Called (and awaited) with the implementation after each check;
            by default its ``aclose()``, ``close()`` or ``stop()`` if it has one.

    Returns:
        Every check's result; never raises for a failed check.

    Raises:
        ValueError: an unknown check name.
    """
    wanted = list(checks) if names is None else list(names)
    unknown = [n for n in wanted if n not in checks]
    if unknown:
        raise ValueError(f"checks: unknown check(s) {unknown}; known: {', '.join(checks)}")
    results: list[CheckResult] = []
    for name in wanted:
        given = options() if callable(options) else options
        ctx: KitContext[Any] = KitContext(check=name, subject=None, options=dict(given or {}))
        try:
            ctx.at("build the implementation")
            subject = await _build(factory, ctx)
            ctx.subject = subject
            ctx.at("start")
            ctx.defer(functools.partial(_close, subject, close))
            await checks[name](ctx)
        except KitFailure as exc:
            results.append(CheckResult(name, "failed", f"{ctx.step}: {exc}"))
        except KitSkip as exc:
            results.append(CheckResult(name, "skipped", str(exc)))
        except Exception as exc:
            results.append(
                CheckResult(name, "failed", f"{ctx.step}: unexpected {type(exc).__name__}: {exc}")
            )
        else:
            results.append(CheckResult(name, "passed"))
        finally:
            await ctx.run_cleanups()
    return ConformanceReport(tuple(results))


async def _close(subject: object, close: Callable[[Any], object] | None) -> None:
    if close is not None:
        outcome = close(subject)
    else:
        method = next(
            (
                getattr(subject, n)
                for n in ("aclose", "close", "stop")
                if callable(getattr(subject, n, None))
            ),
            None,
        )
        if method is None:
            return
        outcome = method()
    if inspect.isawaitable(outcome):
        await outcome


def kit_test_class(
    name: str,
    checks: Mapping[str, KitCheck[Any]],
    *,
    doc: str,
    options: Callable[[Any], Mapping[str, Any]] | None = None,
) -> type:
    """A base class for pytest with one test per check of a kit.

    A subclass defines ``make(self, ctx)`` (or ``make(self)``), returning the
    implementation under test or an awaitable of it, and may override
    ``kit_options(self)`` to give the kit its options. Each check is one case of
    ``test_check``, parametrised by the check's name; a skipped check is a pytest
    skip with its reason.

    Args:
        name: The class's name (e.g. ``PLEGConformance``).
        checks: The kit's table of checks.
        doc: The class's docstring.
        options: The default ``kit_options`` (called with the test instance).
    """
    import pytest

    def kit_options(self: Any) -> Mapping[str, Any]:
        return options(self) if options is not None else {}

    def make(self: Any, ctx: KitContext[Any]) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define make(self, ctx)")

    @pytest.mark.parametrize("check", list(checks))
    def test_check(self: Any, check: str) -> None:
        report = asyncio.run(
            run_kit(
                checks,
                lambda ctx: _call_make(self.make, ctx),
                names=[check],
                options=self.kit_options(),
            )
        )
        result = report.result(check)
        if result.status == "skipped":
            pytest.skip(result.message)
        report.raise_for_failures()

    # Named after the kit's module, not this one (``PLEGConformance.__module__`` is
    # kubelet_kit.testing.pleg_kit), as a class statement there would be.
    module = sys._getframe(1).f_globals.get("__name__", __name__)
    return type(
        name,
        (),
        {
            "__doc__": doc,
            "__module__": module,
            "make": make,
            "kit_options": kit_options,
            "test_check": test_check,
        },
    )


def _call_make(make: Callable[..., Any], ctx: KitContext[Any]) -> Any:
    return make(ctx) if _takes_argument(make) else make()
