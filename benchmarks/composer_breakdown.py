"""Where a pod start's CPU goes: the composer benchmark's start burst, with one
part at a time replaced by a double that does nothing.

``benchmarks/composer.py`` measures how fast the agent starts pods on a
zero-latency FakeRuntime. This script says what that speed is made of. It runs
the same burst (1,000 pods of two containers, added at once, each timed to its
published ``Running`` status) several times per variant, the variants
interleaved round by round, and reports the process CPU per pod of each
variant's burst (median over the rounds):

* ``everything``: the agent as it is (the composer benchmark's burst);
* ``no_runtime_metrics``: runtime calls are forwarded without being timed and
  counted (``InstrumentedRuntime``);
* ``no_events``: the pods' events are dropped instead of kept (``EventLog``);
* ``no_fake_call_log``: the FakeRuntime records no call and checks no injected
  fault or latency;
* ``no_kubelet_files``: no pod log directories, hosts files or termination
  message files (the kubelet's own files, 19 system calls per pod);
* ``no_image_check``: containers use their image as named, without asking the
  runtime whether it is present;
* ``no_gc``: the cyclic garbage collector is off during the burst;
* ``none_of_these``: all of the above at once. What remains is the sync's own
  logic (configs, actions, status) and the FakeRuntime's work.

Each part's cost is ``everything`` minus its variant; ``ceiling_pods_per_s`` is
the start rate one core allows at a variant's CPU per pod (1 / CPU per pod). The
doubles are for measuring only: every part they replace is behaviour the kubelet
has and people rely on.

Usage: ``python benchmarks/composer_breakdown.py [--json] [--rounds N] [--pods N]
[--root DIR]``. With ``--json`` only one JSON object is printed: per variant,
``cpu_ms_per_pod`` and ``ceiling_pods_per_s``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))

import composer  # the benchmark beside this one

from kubelet_kit.api import Container, Pod
from kubelet_kit.container.interfaces import PodSandboxConfig
from kubelet_kit.node.instrumented import InstrumentedRuntime
from kubelet_kit.podsync import _events, podfiles
from kubelet_kit.podsync.images import ImagePuller
from kubelet_kit.runner import prepare_gc
from kubelet_kit.testing import _fake_base


def _forward(self: InstrumentedRuntime, operation: str, call: Awaitable[Any]) -> Awaitable[Any]:
    return call


def _drop_event(self: _events.EventLog, *args: object, **kwargs: object) -> None:
    return None


async def _no_call_log(self: _fake_base._FakeRuntimeBase, method: str, args: object) -> None:
    return None


async def _image_as_named(
    self: ImagePuller, pod: Pod, container: Container, sandbox_config: PodSandboxConfig
) -> str:
    return container.image


def _made(*args: object, **kwargs: object) -> bool:
    return True


def _no_mount(*args: object, **kwargs: object) -> None:
    return None


@contextlib.contextmanager
def _gc_off() -> Iterator[None]:
    # prepare_gc() runs at the start of each burst and sets the thresholds; the
    # collector is switched off after it and on again once the burst is over.
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@contextlib.contextmanager
def _all(*managers: contextlib.AbstractContextManager[Any]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for manager in managers:
            stack.enter_context(manager)
        yield


#: Each variant's doubles (patches of one part each), by name.
PARTS: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "no_runtime_metrics": lambda: mock.patch.object(InstrumentedRuntime, "_record", _forward),
    "no_events": lambda: mock.patch.object(_events.EventLog, "event", _drop_event),
    "no_fake_call_log": lambda: mock.patch.object(
        _fake_base._FakeRuntimeBase, "_enter", _no_call_log
    ),
    "no_kubelet_files": lambda: _all(
        mock.patch.object(podfiles, "hosts_mount", _no_mount),
        mock.patch.object(podfiles, "termination_message_mount", _no_mount),
        mock.patch.object(podfiles, "make_dir", _made),
    ),
    "no_image_check": lambda: mock.patch.object(ImagePuller, "ensure_image", _image_as_named),
}
VARIANTS = ("everything", *PARTS, "no_gc", "none_of_these")


@contextlib.contextmanager
def _variant(name: str) -> Iterator[bool]:
    """Apply variant ``name``'s doubles; yields whether the burst runs without GC."""
    if name == "everything":
        yield False
    elif name == "no_gc":
        yield True
    elif name == "none_of_these":
        with _all(*(make() for make in PARTS.values())):
            yield True
    else:
        with PARTS[name]():
            yield False


async def burst_cpu_ms_per_pod(variant: str, pods: int, root: Path) -> float:
    """CPU milliseconds per pod of one start burst of ``pods`` pods under ``variant``."""
    with _variant(variant) as no_gc:
        async with composer.Agent(root, max_pods=pods) as agent:
            prepare_gc()
            batch = composer.make_pods(pods, variant.replace("_", "-"))
            with _gc_off() if no_gc else contextlib.nullcontext():
                cpu0 = composer.cpu_seconds()
                await agent.run_pods(batch, timeout=max(120.0, pods * 0.3))
                cpu1 = composer.cpu_seconds()
    return (cpu1 - cpu0) / pods * 1000


async def main_async(rounds: int, pods: int, root: str | None) -> dict[str, dict[str, float]]:
    """Run every variant ``rounds`` times, interleaved; figures per variant."""
    samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
    # One burst first, not counted: the first pods import what the agent loads
    # lazily and fill its caches, which every variant after it finds done.
    with tempfile.TemporaryDirectory(prefix="kubelet-kit-bench-", dir=root) as tmp:
        await burst_cpu_ms_per_pod("everything", pods, Path(tmp))
    for r in range(rounds):
        for variant in VARIANTS:
            with tempfile.TemporaryDirectory(prefix="kubelet-kit-bench-", dir=root) as tmp:
                samples[variant].append(
                    await burst_cpu_ms_per_pod(variant, pods, Path(tmp) / str(r))
                )
            gc.collect()
    results = {}
    for variant, values in samples.items():
        ms = statistics.median(values)
        results[variant] = {
            "cpu_ms_per_pod": ms,
            "cpu_ms_per_pod_min": min(values),
            "cpu_ms_per_pod_max": max(values),
            "ceiling_pods_per_s": 1000.0 / ms,
        }
    return results


def report(results: dict[str, dict[str, float]], rounds: int, pods: int) -> str:
    """The figures as a table for people."""
    whole = results["everything"]["cpu_ms_per_pod"]
    lines = [
        f"start burst of {pods} pods, CPU per pod, median of {rounds} rounds (min-max)",
        f"{'variant':<20}{'ms/pod (min-max)':>24}{'part costs':>12}{'ceiling pods/s':>16}",
    ]
    for variant, figures in results.items():
        ms = figures["cpu_ms_per_pod"]
        spread = f"({figures['cpu_ms_per_pod_min']:.3f}-{figures['cpu_ms_per_pod_max']:.3f})"
        cost = "" if variant == "everything" else f"{whole - ms:+.3f}"
        ceiling = figures["ceiling_pods_per_s"]
        lines.append(f"{variant:<20}{ms:>9.3f} {spread:>14}{cost:>12}{ceiling:>16.0f}")
    lines.append(
        f"target: {composer.TARGET_PODS_PER_S:.0f} pods/s, "
        f"{1000.0 / composer.TARGET_PODS_PER_S:.3f} ms of CPU per pod"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the variants, print the figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object only")
    parser.add_argument("--rounds", type=int, default=5, help="bursts per variant (5)")
    parser.add_argument("--pods", type=int, default=1000, help="pods per burst (1,000)")
    parser.add_argument(
        "--root", default=composer.default_root(), help="where the agents' directories go"
    )
    args = parser.parse_args(argv)
    results = asyncio.run(main_async(args.rounds, args.pods, args.root))
    if args.json:
        print(json.dumps(results))
    else:
        print(report(results, args.rounds, args.pods))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
