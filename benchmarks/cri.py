#!/usr/bin/env python3
"""CRIRuntime overhead against the bare generated gRPC stub, on a real containerd.

Measures, on the same channel settings and the same runtime:

* a loop of ListContainers (N calls),
* a loop of ContainerStatus on one running container (N calls),
* one full pod start (RunPodSandbox + CreateContainer + StartContainer), repeated,

once through :class:`kubelet_kit.cri.CRIRuntime` (attrs conversion, deadlines on the
clock, error mapping) and once through ``RuntimeServiceStub`` with prebuilt
messages, and prints both and the ratio (CRIRuntime time / stub time).

Usage::

    python benchmarks/cri.py --endpoint unix:///run/containerd/containerd.sock
    sudo python benchmarks/cri.py --start-containerd [--json] [-n 300]

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

from kubelet_kit.container import (  # noqa: E402
    ContainerConfig,
    ContainerMetadata,
    ImageSpec,
    NamespaceOptions,
    PodSandboxConfig,
    PodSandboxMetadata,
)
from kubelet_kit.cri import CRIRuntime, convert  # noqa: E402
from kubelet_kit.cri.gen import api_pb2 as pb  # noqa: E402

#: Alternating rounds per measured operation.
ROUNDS = 10


async def _timed(n: int, fn: Callable[[], Awaitable[Any]]) -> float:
    """Seconds per call over ``n`` calls (after one warm-up call)."""
    await fn()
    start = time.perf_counter()
    for _ in range(n):
        await fn()
    return (time.perf_counter() - start) / n


def _pod(log_root: Path) -> PodSandboxConfig:
    uid = str(uuid.uuid4())
    name = f"bench-{uid[:8]}"
    return PodSandboxConfig(
        metadata=PodSandboxMetadata(name, "default", uid),
        log_directory=str(log_root / f"default_{name}_{uid}"),
        labels={"io.kubernetes.pod.uid": uid},
        namespace_options=NamespaceOptions(host_network=True),
    )


def _container(image: str) -> ContainerConfig:
    return ContainerConfig(
        metadata=ContainerMetadata("app"), image=ImageSpec(image), args=("sleep", "3600"),
        log_path="app/0.log",
    )


async def bench(endpoint: str, image: str, n: int, pods: int, log_root: Path) -> dict[str, float]:
    """Run every measurement; returns seconds per operation and the ratios."""
    results: dict[str, float] = {}
    async with CRIRuntime(endpoint, timeout=60) as rt:
        stub = rt.runtime_stub
        config = _pod(log_root)
        sb = await rt.run_pod_sandbox(config)
        cid = await rt.create_container(sb, _container(image), config)
        await rt.start_container(cid)
        try:
            list_req = pb.ListContainersRequest()
            status_req = pb.ContainerStatusRequest(container_id=cid)
            pairs = {
                "list_containers": (lambda: stub.ListContainers(list_req, timeout=60),
                                    rt.list_containers),
                "container_status": (lambda: stub.ContainerStatus(status_req, timeout=60),
                                     lambda: rt.container_status(cid)),
            }
            # Alternate the two sides in rounds and keep each side's median: a
            # runtime's speed drifts during a run, and one long loop per side
            # would charge that drift to whichever side ran second.
            for op, (bare, ours) in pairs.items():
                stub_runs, cri_runs = [], []
                for _ in range(ROUNDS):
                    stub_runs.append(await _timed(max(1, n // ROUNDS), bare))
                    cri_runs.append(await _timed(max(1, n // ROUNDS), ours))
                results[f"stub_{op}"] = statistics.median(stub_runs)
                results[f"cri_{op}"] = statistics.median(cri_runs)
        finally:
            await rt.stop_pod_sandbox(sb)
            await rt.remove_pod_sandbox(sb)

        async def start_with_stub() -> float:
            cfg = _pod(log_root)
            sandbox_pb = convert.sandbox_config_to_pb(cfg)
            container_pb = convert.container_config_to_pb(_container(image), cfg)
            t0 = time.perf_counter()
            resp = await stub.RunPodSandbox(pb.RunPodSandboxRequest(config=sandbox_pb), timeout=60)
            created = await stub.CreateContainer(
                pb.CreateContainerRequest(pod_sandbox_id=resp.pod_sandbox_id,
                                          config=container_pb, sandbox_config=sandbox_pb),
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
            cfg = _pod(log_root)
            t0 = time.perf_counter()
            sid = await rt.run_pod_sandbox(cfg)
            c = await rt.create_container(sid, _container(image), cfg)
            await rt.start_container(c)
            elapsed = time.perf_counter() - t0
            await rt.stop_pod_sandbox(sid)
            await rt.remove_pod_sandbox(sid)
            return elapsed

        stub_times, cri_times = [], []
        for _ in range(pods):  # interleaved, so drift hits both alike
            stub_times.append(await start_with_stub())
            cri_times.append(await start_with_cri())
        results["stub_pod_start"] = statistics.median(stub_times)
        results["cri_pod_start"] = statistics.median(cri_times)

    for op in ("list_containers", "container_status", "pod_start"):
        results[f"ratio_{op}"] = results[f"cri_{op}"] / results[f"stub_{op}"]
    return results


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--endpoint", help="CRI endpoint of a running runtime")
    where.add_argument("--start-containerd", action="store_true",
                       help="start a private containerd for the run (root)")
    parser.add_argument("--image", default="", help="image for the container (with --endpoint)")
    parser.add_argument("-n", type=int, default=200, help="calls per loop (default 200)")
    parser.add_argument("--pods", type=int, default=5, help="pod starts per side (default 5)")
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
        results = asyncio.run(bench(endpoint, image, opts.n, opts.pods, log_root))
    finally:
        if harness is not None:
            harness.cleanup()
        else:
            shutil.rmtree(log_root, ignore_errors=True)
    if opts.json:
        print(json.dumps(results, indent=2, sort_keys=True))
        return 0
    print(f"{'operation':<18} {'stub':>12} {'CRIRuntime':>12} {'ratio':>7}")
    for op in ("list_containers", "container_status", "pod_start"):
        stub_s, cri_s = results[f"stub_{op}"], results[f"cri_{op}"]
        print(f"{op:<18} {stub_s * 1e3:>10.3f}ms {cri_s * 1e3:>10.3f}ms "
              f"{results[f'ratio_{op}']:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
