"""The conformance kit of a pod source (:class:`~kubelet_kit.config.PodSource`).

What the agent's :class:`~kubelet_kit.config.PodConfig` relies on when it reads
a source's ``snapshots()``:

* the first snapshot comes at once, without time passing, even when the source
  holds no pod (until every source delivered one the agent must not remove
  pods it cannot match to a source);
* each snapshot is the complete set of pods the source wants, not a diff, and
  the next snapshot after a change is the changed set (a pod removed is gone
  from it, a pod changed is there in its new form, once);
* an invalid pod is reported with its field path (in the snapshot's
  ``problems``, or to the caller that handed it over) and stops neither the
  pods the source already runs nor the source itself;
* cancelling the reader ends ``snapshots()`` promptly and cleanly.

A source is fed in its own way (files written, a URL's body changed, code
calling it), so the kit drives a :class:`SourceHarness`: the source plus a way
to make it want given manifests and to let its clock run. The kit ships
harnesses for the project's sources (:class:`ProgrammaticHarness`,
:class:`DirectoryHarness`); a third party writes one for theirs::

    from kubelet_kit.testing.source_kit import PodSourceConformance

    class TestMySource(PodSourceConformance):
        def make(self):
            return MyHarness()          # .source, async publish(), async tick()

The kit identifies pods by their label ``kit-pod`` (a source may rename pods,
as static pods get their node's name appended).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from kubelet_kit.config.file import FileSource
from kubelet_kit.config.interfaces import PodSource, SourceSnapshot
from kubelet_kit.config.programmatic import ProgrammaticSource
from kubelet_kit.errors import ValidationError
from kubelet_kit.testing.clock import FakeClock
from kubelet_kit.testing.conformance import ConformanceReport
from kubelet_kit.testing.fake_source import FakePodSource
from kubelet_kit.testing.kit import KitCheck, KitContext, kit_test_class, run_kit

__all__ = [
    "CHECKS",
    "LABEL",
    "DirectoryHarness",
    "PodSourceConformance",
    "ProgrammaticHarness",
    "SourceHarness",
    "check_pod_source",
    "pod_manifest",
]

#: The label naming each pod the kit publishes.
LABEL = "kit-pod"
#: The field the kit's invalid manifest is missing.
_INVALID_FIELD = "spec.containers[0].image"


class SourceHarness(Protocol):
    """What the kit drives: a source and a way to feed it.

    Attributes:
        source: The source under test; the kit reads its ``snapshots()``.
    """

    source: PodSource

    async def publish(self, manifests: Sequence[Mapping[str, Any]]) -> None:
        """Make the source want exactly the pods of ``manifests`` (v1 Pod dicts,
        possibly invalid) from now on. A source told its pods by code may refuse
        invalid ones by raising :class:`~kubelet_kit.errors.ValidationError`
        (naming their fields) and change nothing."""
        ...

    async def tick(self) -> None:
        """Let time pass for the source so that it looks again (advance its
        FakeClock past its check period); a no-op for a source that is told of
        changes. The kit calls it while it waits for a snapshot."""
        ...


def pod_manifest(name: str, image: str = "busybox:1") -> dict[str, Any]:
    """The manifest of the kit's pod ``name`` (labelled ``kit-pod: name``)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"kit-{name}",
            "namespace": "default",
            "uid": f"kit-uid-{name}",
            "labels": {LABEL: name},
        },
        "spec": {"containers": [{"name": "app", "image": image}]},
    }


def _invalid(name: str) -> dict[str, Any]:
    manifest = pod_manifest(name)
    del manifest["spec"]["containers"][0]["image"]
    return manifest


class ProgrammaticHarness:
    """Feeds a :class:`~kubelet_kit.config.ProgrammaticSource` (or a
    :class:`~kubelet_kit.testing.FakePodSource`, through its ``set_manifests``).

    A plain ProgrammaticSource takes pods, not manifests: the harness loads them
    and, if any is invalid, raises the ValidationError and publishes nothing,
    as code handing the source a bad pod is told.

    Args:
        source: The source (default: a new ProgrammaticSource).
    """

    def __init__(self, source: ProgrammaticSource | None = None) -> None:
        self.source: ProgrammaticSource = source if source is not None else ProgrammaticSource()

    async def publish(self, manifests: Sequence[Mapping[str, Any]]) -> None:
        """See :meth:`SourceHarness.publish`."""
        if isinstance(self.source, FakePodSource):
            self.source.set_manifests(manifests)
            return
        from kubelet_kit.api.loading import load_pod

        pods, errors = [], []
        for manifest in manifests:
            try:
                pods.append(load_pod(manifest, source=self.source.name))
            except ValidationError as exc:
                errors.extend(exc.errors)
        if errors:
            raise ValidationError(errors, source=self.source.name)
        self.source.set_pods(pods)

    async def tick(self) -> None:
        """Nothing to do: the source publishes as it is told."""


class DirectoryHarness:
    """Feeds a :class:`~kubelet_kit.config.FileSource` on a directory: each
    manifest is a JSON file named after its ``kit-pod`` label, a pod no longer
    wanted has its file removed.

    Args:
        directory: The static-pod directory (made if missing; the harness owns
            the ``*.json`` files in it).
        clock: The source's clock (default: a new FakeClock).
        check_frequency: The source's check period; :meth:`tick` moves the clock
            by this much.
        node_name: The node's name given to the source.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        clock: FakeClock | None = None,
        check_frequency: float = 20.0,
        node_name: str = "kit-node",
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.clock = clock if clock is not None else FakeClock()
        self.check_frequency = check_frequency
        self.source = FileSource(
            self.directory, node_name=node_name, clock=self.clock, check_frequency=check_frequency
        )
        self._stamp = time.time_ns()

    async def publish(self, manifests: Sequence[Mapping[str, Any]]) -> None:
        """See :meth:`SourceHarness.publish`."""
        wanted: dict[str, bytes] = {}
        for i, manifest in enumerate(manifests):
            name = (manifest.get("metadata") or {}).get("labels", {}).get(LABEL) or f"pod-{i}"
            wanted[f"{name}.json"] = json.dumps(manifest, indent=1).encode()
        for path in self.directory.glob("*.json"):
            if path.name not in wanted:
                path.unlink()
        for name, data in wanted.items():
            path = self.directory / name
            if path.exists() and path.read_bytes() == data:
                continue
            path.write_bytes(data)
            # A distinct mtime for every write: a rewrite of the same size within
            # the filesystem's timestamp granularity must still be seen.
            self._stamp += 1_000_000
            os.utime(path, ns=(self._stamp, self._stamp))

    async def tick(self) -> None:
        """Move the source's clock by its check period."""
        self.clock.advance(self.check_frequency)
        await asyncio.sleep(0)


# ------------------------------------------------------------------- the checks


def _labels(snapshot: SourceSnapshot) -> list[str]:
    return sorted(str(p.metadata.labels.get(LABEL, "?")) for p in snapshot.pods)


class _Reader:
    """The kit's single consumer of ``snapshots()``, waiting in real time while
    ticking the harness, up to the ``timeout`` option."""

    def __init__(self, ctx: KitContext[Any]) -> None:
        self.ctx = ctx
        self.harness: SourceHarness = ctx.subject
        self.stream: AsyncIterator[SourceSnapshot] = aiter(self.harness.source.snapshots())
        self.pending: asyncio.Future[SourceSnapshot] | None = None
        self.timeout = float(ctx.options.get("timeout", 5.0))
        ctx.defer(self.close)

    async def next(self, what: str, *, tick: bool = True) -> SourceSnapshot:
        if self.pending is None:
            self.pending = asyncio.ensure_future(anext(self.stream))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while True:
            done, _ = await asyncio.wait({self.pending}, timeout=0.01)
            if done:
                future, self.pending = self.pending, None
                if future.exception() is not None:
                    self.ctx.fail(f"snapshots() raised {future.exception()!r}")
                return future.result()
            if loop.time() > deadline:
                moved = " although its clock moved" if tick else ""
                self.ctx.fail(f"no snapshot within {self.timeout:g}s{moved}: {what}")
            if tick:
                await self.harness.tick()

    async def close(self) -> None:
        if self.pending is not None:
            self.pending.cancel()
            with contextlib.suppress(BaseException):
                await self.pending
        close = getattr(self.stream, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()


async def _publish(ctx: KitContext[Any], manifests: Sequence[Mapping[str, Any]]) -> None:
    await ctx.subject.publish(manifests)


async def _expect_next(ctx: KitContext[Any], reader: _Reader, want: list[str]) -> SourceSnapshot:
    snapshot = await reader.next(f"the pods {want}")
    ctx.expect_eq("pods of the next snapshot (by label)", _labels(snapshot), sorted(want))
    return snapshot


async def _check_first_snapshot_is_prompt(ctx: KitContext[Any]) -> None:
    ctx.at("publish two pods before reading")
    await _publish(ctx, [pod_manifest("a"), pod_manifest("b")])
    ctx.at("read the first snapshot without moving the clock")
    first = await _Reader(ctx).next("the first snapshot", tick=False)
    ctx.expect_eq("pods of the first snapshot", _labels(first), ["a", "b"])


async def _check_first_snapshot_comes_when_empty(ctx: KitContext[Any]) -> None:
    ctx.at("publish no pod")
    await _publish(ctx, [])
    ctx.at("read the first snapshot without moving the clock")
    first = await _Reader(ctx).next("the first snapshot of an empty source", tick=False)
    ctx.expect_eq("pods of the first snapshot", _labels(first), [])


async def _check_snapshots_are_complete_sets(ctx: KitContext[Any]) -> None:
    reader = _Reader(ctx)
    ctx.at("publish pod a")
    await _publish(ctx, [pod_manifest("a")])
    await _expect_next(ctx, reader, ["a"])
    ctx.at("add pod b")
    await _publish(ctx, [pod_manifest("a"), pod_manifest("b")])
    await _expect_next(ctx, reader, ["a", "b"])
    ctx.at("add pod c")
    await _publish(ctx, [pod_manifest("a"), pod_manifest("b"), pod_manifest("c")])
    await _expect_next(ctx, reader, ["a", "b", "c"])


async def _check_removed_pod_disappears(ctx: KitContext[Any]) -> None:
    reader = _Reader(ctx)
    ctx.at("publish pods a and b")
    await _publish(ctx, [pod_manifest("a"), pod_manifest("b")])
    await _expect_next(ctx, reader, ["a", "b"])
    ctx.at("remove pod a")
    await _publish(ctx, [pod_manifest("b")])
    await _expect_next(ctx, reader, ["b"])
    ctx.at("remove the last pod")
    await _publish(ctx, [])
    await _expect_next(ctx, reader, [])


async def _check_changed_pod_is_replaced(ctx: KitContext[Any]) -> None:
    reader = _Reader(ctx)
    ctx.at("publish pod a with busybox:1")
    await _publish(ctx, [pod_manifest("a", "busybox:1"), pod_manifest("b")])
    await _expect_next(ctx, reader, ["a", "b"])
    ctx.at("change pod a's image to busybox:2")
    await _publish(ctx, [pod_manifest("a", "busybox:2"), pod_manifest("b")])
    snapshot = await _expect_next(ctx, reader, ["a", "b"])
    [a] = [p for p in snapshot.pods if p.metadata.labels.get(LABEL) == "a"]
    ctx.expect_eq("pod a's image", a.spec.containers[0].image, "busybox:2")


async def _check_invalid_pod_is_reported(ctx: KitContext[Any]) -> None:
    reader = _Reader(ctx)
    ctx.at("publish pod a")
    await _publish(ctx, [pod_manifest("a")])
    await _expect_next(ctx, reader, ["a"])
    ctx.at("publish pod a and an invalid pod x (a container without an image)")
    try:
        await _publish(ctx, [pod_manifest("a"), _invalid("x")])
    except ValidationError as exc:
        # Refused to the caller: it must name the field, and the source go on.
        ctx.expect(
            any(_INVALID_FIELD in str(e) for e in exc.errors),
            f"the error does not name {_INVALID_FIELD}: {exc}",
        )
    else:
        snapshot = await reader.next("a snapshot reporting pod x")
        ctx.expect(
            any(_INVALID_FIELD in line for line in snapshot.problems),
            f"no problem names {_INVALID_FIELD}: {list(snapshot.problems)}",
        )
        ctx.expect_eq("pods running beside the invalid one", _labels(snapshot), ["a"])
    ctx.at("publish pods a and c: the source goes on")
    await _publish(ctx, [pod_manifest("a"), pod_manifest("c")])
    snapshot = await _expect_next(ctx, reader, ["a", "c"])
    ctx.expect_eq("problems once the invalid pod is gone", list(snapshot.problems), [])


async def _check_cancel_ends_snapshots(ctx: KitContext[Any]) -> None:
    harness: SourceHarness = ctx.subject
    ctx.at("read the first snapshot in a task")
    await _publish(ctx, [pod_manifest("a")])
    first = asyncio.Event()

    async def consume() -> None:
        async for _ in harness.source.snapshots():
            first.set()

    task = asyncio.ensure_future(consume())
    ctx.defer(task.cancel)
    timeout = float(ctx.options.get("timeout", 5.0))
    try:
        await asyncio.wait_for(first.wait(), timeout)
    except TimeoutError:
        ctx.fail(f"no first snapshot within {timeout:g}s")
    ctx.at("cancel the reader while the source waits")
    await asyncio.sleep(0.01)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=timeout)
    ctx.expect(bool(done), f"snapshots() still runs {timeout:g}s after its reader was cancelled")
    ctx.expect(task.cancelled(), f"the reader ended with {task!r}, not cancelled")


#: The kit's checks by name, in the order they run.
CHECKS: dict[str, KitCheck[Any]] = {
    "first_snapshot_is_prompt": _check_first_snapshot_is_prompt,
    "first_snapshot_comes_when_empty": _check_first_snapshot_comes_when_empty,
    "snapshots_are_complete_sets": _check_snapshots_are_complete_sets,
    "removed_pod_disappears": _check_removed_pod_disappears,
    "changed_pod_is_replaced": _check_changed_pod_is_replaced,
    "invalid_pod_is_reported": _check_invalid_pod_is_reported,
    "cancel_ends_snapshots": _check_cancel_ends_snapshots,
}


async def check_pod_source(
    factory: Callable[..., Any],
    *,
    names: Sequence[str] | None = None,
    **options: Any,
) -> ConformanceReport:
    """Run the pod source kit against harnesses made by ``factory``.

    Args:
        factory: Builds a fresh :class:`SourceHarness` per check (called with the
            check's :class:`~kubelet_kit.testing.kit.KitContext` if it takes an
            argument, e.g. to ``ctx.defer`` a cleanup; may be async).
        names: The checks to run (default: all of :data:`CHECKS`).
        **options: ``timeout``: real seconds a check waits for one snapshot
            (default 5).

    Returns:
        The report of every check.

    Raises:
        ConformanceFailure: A check failed.
    """
    report = await run_kit(CHECKS, factory, names=names, options=options)
    report.raise_for_failures()
    return report


#: The pytest base class: subclass it and define ``make(self[, ctx])`` returning
#: a :class:`SourceHarness`.
PodSourceConformance = kit_test_class(
    "PodSourceConformance",
    CHECKS,
    doc="""Conformance of a pod source: one test case per check of
    :mod:`kubelet_kit.testing.source_kit`. Define ``make(self)`` (or
    ``make(self, ctx)``) returning a fresh :class:`SourceHarness`.""",
)
