#!/usr/bin/env python3
"""CRIRuntime overhead against the bare generated gRPC stub, on a real containerd.

Measures, on the same channel settings and the same runtime, with ``--running``
pods running (started with the configs the kubelet builds):

* a loop of ListContainers (N calls),
* a loop of ContainerStatus on one running container (N calls),
* one full pod start (RunPodSandbox + CreateContainer + StartContainer), repeated,

once through :class:`kubelet_kit.cri.CRIRuntime` (attrs conversion, deadlines,
error mapping, the conversion memo) and once through ``RuntimeServiceStub`` with
prebuilt messages, the two taking turns call by call; prints each side's median
and the ratio CRIRuntime / stub (target: at most 1.10). The loops run again with
``memo_size=0`` (``*_unmemoized``), which converts every answer.

Usage::

    python benchmarks/cri.py --endpoint unix:///run/containerd/containerd.sock
    sudo python benchmarks/cri.py --start-containerd [--json] [-n 1000]

``--start-containerd`` runs a private containerd with the integration tests'
harness (root, containerd, runc, /bin/busybox needed) and removes it afterwards;
with ``--endpoint`` the runtime must already hold an image named by ``--image``
(also used as the sandbox image by that runtime's configuration).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubelet_kit.api import Container, ObjectMeta, Pod, PodSpec  # noqa: E402
from kubelet_kit.container import ContainerConfig, DNSConfig, PodSandboxConfig  # noqa: E402
from kubelet_kit.cri import CRIRuntime, convert  # noqa: E402
from kubelet_kit.cri.gen import api_pb2 as pb  # noqa: E402
from kubelet_kit.podsync.configs import container_config, resolve_env, sandbox_config  # noqa: E402


async def _paired(
    n: int, bare: Callable[[], Awaitable[Any]], ours: Callable[[], Awaitable[Any]]
) -> tuple[list[float], list[float]]:
    """Seconds of each of ``n`` calls per side, the sides taking turns call by call.

    The order within each pair swaps every time, so neither side always runs on
    the heels of the other. One warm-up call per side first.
    """
    await bare()
    await ours()
    bare_times: list[float] = []
    our_times: list[float] = []
    clock = time.perf_counter
    for i in range(n):
        for fn, times in (
            ((ours, our_times), (bare, bare_times))
            if i % 2
            else ((bare, bare_times), (ours, our_times))
        ):
            t0 = clock()
            await fn()
            times.append(clock() - t0)
    return bare_times, our_times


def _configs(log_root: Path, image: str) -> tuple[PodSandboxConfig, ContainerConfig]:
    """What the kubelet sends to start a one-container pod, labels and annotations
    included (so the runtime's answers carry as much as a real node's do)."""
    uid = str(uuid.uuid4())
    app = Container(name="app", image=image, args=("sleep", "3600"))
    pod = Pod(
        metadata=ObjectMeta(name=f"bench-{uid[:8]}", namespace="default", uid=uid),
        spec=PodSpec(containers=(app,), host_network=True),
    )
    sandbox = sandbox_config(pod, attempt=0, pod_logs_dir=str(log_root), resolv_conf=DNSConfig())
    container = container_config(pod, app, restart_count=0, env=resolve_env(pod, app))
    return sandbox, container


async def bench(
    endpoint: str, image: str, n: int, pods: int, running: int, log_root: Path
) -> dict[str, float]:
    """Run every measurement; returns seconds per operation and the ratios."""
    results: dict[str, float] = {}
    async with (
        CRIRuntime(endpoint, timeout=60) as rt,
        CRIRuntime(endpoint, timeout=60, memo_size=0) as unmemoized,
    ):
        stub = rt.runtime_stub
        sandboxes, containers = [], []
        try:
            for _ in range(running):
                sandbox, container = _configs(log_root, image)
                sandboxes.append(await rt.run_pod_sandbox(sandbox))
                containers.append(await rt.create_container(sandboxes[-1], container, sandbox))
                await rt.start_container(containers[-1])
            cid = containers[0]
            list_req = pb.ListContainersRequest()
            status_req = pb.ContainerStatusRequest(container_id=cid)

            def list_with_stub() -> Awaitable[Any]:
                return stub.ListContainers(list_req, timeout=60)

            def status_with_stub() -> Awaitable[Any]:
                return stub.ContainerStatus(status_req, timeout=60)

            pairs = {
                "list_containers": (list_with_stub, rt.list_containers),
                "container_status": (status_with_stub, lambda: rt.container_status(cid)),
                "list_containers_unmemoized": (list_with_stub, unmemoized.list_containers),
                "container_status_unmemoized": (
                    status_with_stub,
                    lambda: unmemoized.container_status(cid),
                ),
            }
            # The sides take turns call by call and each keeps the median of its
            # calls: on a shared machine the runtime's answer time drifts by tens
            # of per cent within a second (its own garbage collector, other work),
            # and only calls next to each other see the same conditions. Medians
            # leave out the odd call that a pause stretched tenfold.
            for op, (bare, ours) in pairs.items():
                stub_times, cri_times = await _paired(n, bare, ours)
                results[f"stub_{op}"] = statistics.median(stub_times)
                results[f"cri_{op}"] = statistics.median(cri_times)
                results[f"ratio_{op}"] = results[f"cri_{op}"] / results[f"stub_{op}"]
        finally:
            for sb in sandboxes:
                await rt.stop_pod_sandbox(sb)
                await rt.remove_pod_sandbox(sb)

        async def start_with_stub() -> float:
            cfg, container = _configs(log_root, image)
            sandbox_pb = convert.sandbox_config_to_pb(cfg)
            container_pb = convert.container_config_to_pb(container, cfg)
            t0 = time.perf_counter()
            resp = await stub.RunPodSandbox(pb.RunPodSandboxRequest(config=sandbox_pb), timeout=60)
            created = await stub.CreateContainer(
                pb.CreateContainerRequest(
                    pod_sandbox_id=resp.pod_sandbox_id,
                    config=container_pb,
                    sandbox_config=sandbox_pb,
                ),
                timeout=60,
            )
            await stub.StartContainer(
                pb.StartContainerRequest(container_id=created.container_id), timeout=60
            )
            elapsed = time.perf_counter() - t0
            await rt.stop_pod_sandbox(resp.pod_sandbox_id)
            await rt.remove_pod_sandbox(resp.pod_sandbox_id)
            return elapsed

        async def start_with_cri() -> float:
            cfg, container = _configs(log_root, image)
            t0 = time.perf_counter()
            sid = await rt.run_pod_sandbox(cfg)
            c = await rt.create_container(sid, container, cfg)
            await rt.start_container(c)
            elapsed = time.perf_counter() - t0
            await rt.stop_pod_sandbox(sid)
            await rt.remove_pod_sandbox(sid)
            return elapsed

        stub_times, cri_times, ratios = [], [], []
        for i in range(pods):  # paired and interleaved, as the loops above
            first, second = (
                (start_with_cri, start_with_stub) if i % 2 else (start_with_stub, start_with_cri)
            )
            a, b = await first(), await second()
            stub_s, cri_s = (b, a) if i % 2 else (a, b)
            stub_times.append(stub_s)
            cri_times.append(cri_s)
            ratios.append(cri_s / stub_s)
        results["stub_pod_start"] = statistics.median(stub_times)
        results["cri_pod_start"] = statistics.median(cri_times)
        results["ratio_pod_start"] = statistics.median(ratios)
    return results


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--endpoint", help="CRI endpoint of a running runtime")
    where.add_argument(
        "--start-containerd",
        action="store_true",
        help="start a private containerd for the run (root)",
    )
    parser.add_argument("--image", default="", help="image for the container (with --endpoint)")
    parser.add_argument("-n", type=int, default=1000, help="calls per loop and side (default 1000)")
    parser.add_argument("--pods", type=int, default=8, help="pod starts per side (default 8)")
    parser.add_argument(
        "--running", type=int, default=10, help="pods running while the loops list (default 10)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    opts = parser.parse_args(argv)

    harness = None
    endpoint, image = opts.endpoint, opts.image
    log_root = Path(tempfile.gettempdir()) / "kk-bench-logs"
    if opts.start_containerd:
        sys.path.insert(0, str(ROOT / "tests"))
        from integration.containerd import BUSYBOX_IMAGE, Containerd, missing_parts

        missing = missing_parts()
        if missing:
            parser.error("--start-containerd needs " + ", ".join(missing))
        harness = Containerd(Path(tempfile.mkdtemp(prefix="kk-bench-")))
        harness.write_config()
        harness.start()
        harness.import_images()
        endpoint, image = harness.endpoint, BUSYBOX_IMAGE
        log_root = harness.logs
    elif not image:
        parser.error("--image is required with --endpoint")
    try:
        results = asyncio.run(bench(endpoint, image, opts.n, opts.pods, opts.running, log_root))
    finally:
        if harness is not None:
            harness.cleanup()
        else:
            shutil.rmtree(log_root, ignore_errors=True)
    if opts.json:
        print(json.dumps(results, indent=2, sort_keys=True))
        return 0
    print(f"{'operation':<28} {'stub':>12} {'CRIRuntime':>12} {'ratio':>7}")
    for op in (
        "list_containers",
        "container_status",
        "pod_start",
        "list_containers_unmemoized",
        "container_status_unmemoized",
    ):
        stub_s, cri_s = results[f"stub_{op}"], results[f"cri_{op}"]
        print(
            f"{op:<28} {stub_s * 1e3:>10.3f}ms {cri_s * 1e3:>10.3f}ms "
            f"{results[f'ratio_{op}']:>7.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
