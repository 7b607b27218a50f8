"""The machinery every conformance kit is built from: results by check, the step a
failure names, skips, fresh implementations, cleanups, and the pytest base class."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kubelet_kit.testing.kit import KitContext, run_kit


class Counter:
    closed = 0

    def __init__(self) -> None:
        self.value = 0

    async def aclose(self) -> None:
        Counter.closed += 1


async def _adds(ctx: KitContext[Counter]) -> None:
    ctx.at("add one")
    ctx.subject.value += 1
    ctx.expect_eq("value after one add", ctx.subject.value, 1)


async def _wrong(ctx: KitContext[Counter]) -> None:
    ctx.at("compare")
    ctx.expect_eq("value", ctx.subject.value, 5)


async def _skips(ctx: KitContext[Counter]) -> None:
    ctx.skip(f"needs {ctx.options.get('need', 'something')}")


async def _raises(ctx: KitContext[Counter]) -> None:
    ctx.at("divide")
    ctx.defer(lambda: setattr(ctx.subject, "value", -1))
    _ = 1 // ctx.subject.value


CHECKS = {"adds": _adds, "wrong": _wrong, "skips": _skips, "raises": _raises}


def test_each_check_gets_a_fresh_implementation_and_its_own_result() -> None:
    made: list[Counter] = []

    def factory() -> Counter:
        made.append(Counter())
        return made[-1]

    Counter.closed = 0
    report = asyncio.run(run_kit(CHECKS, factory, options={"need": "a GPU"}))
    assert [(r.name, r.status) for r in report.results] == [
        ("adds", "passed"),
        ("wrong", "failed"),
        ("skips", "skipped"),
        ("raises", "failed"),
    ]
    assert report.result("wrong").message == "compare: value: expected 5, got 0"
    assert report.result("skips").message == "needs a GPU"
    assert report.result("raises").message.startswith("divide: unexpected ZeroDivisionError")
    # One implementation per check, each closed; the deferred cleanup ran.
    assert len(made) == 4 and Counter.closed == 4
    assert made[3].value == -1


def test_the_factory_may_take_the_context_and_be_async() -> None:
    seen: list[str] = []

    async def factory(ctx: KitContext[Counter]) -> Counter:
        seen.append(ctx.check)
        return Counter()

    report = asyncio.run(run_kit(CHECKS, factory, names=["adds"]))
    assert report.ok and seen == ["adds"]
    with pytest.raises(ValueError, match="unknown check"):
        asyncio.run(run_kit(CHECKS, factory, names=["nope"]))


def test_the_pytest_base_class_runs_one_case_per_check(tmp_path: Path) -> None:
    # In a project of its own, with no asyncio plugin configured: the cases are sync.
    (tmp_path / "test_mine.py").write_text(
        textwrap.dedent(
            """
            from kubelet_kit.testing.kit import kit_test_class

            async def adds(ctx):
                ctx.subject.append(1)
                ctx.expect_eq("length", len(ctx.subject), 1)

            async def skips(ctx):
                ctx.skip("not here")

            async def fails(ctx):
                ctx.expect(ctx.options["ok"], "the option said no")

            ListConformance = kit_test_class(
                "ListConformance", {"adds": adds, "skips": skips, "fails": fails}, doc="x"
            )

            class TestList(ListConformance):
                def make(self):
                    return []

                def kit_options(self):
                    return {"ok": False}
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfs", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = result.stdout
    assert "1 failed, 1 passed, 1 skipped" in out, out + result.stderr
    assert "not here" in out and "the option said no" in out, out
    assert "TestList::test_check[fails]" in out, out


def test_options_made_afresh_for_each_check() -> None:
    made: list[dict[str, object]] = []

    def options() -> dict[str, object]:
        made.append({"parts": []})
        return made[-1]

    async def uses_parts(ctx: KitContext[Counter]) -> None:
        parts = ctx.options["parts"]
        assert isinstance(parts, list)
        ctx.expect_eq("parts left by an earlier check", parts, [])
        parts.append(ctx.check)

    checks = {"one": uses_parts, "two": uses_parts}
    report = asyncio.run(run_kit(checks, Counter, options=options))
    assert report.ok, report.summary()
    assert len(made) == 2
