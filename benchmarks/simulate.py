"""Simulator benchmark: simulated nodes and their pods against a real API server.

Starts etcd (Debian's) and kube-apiserver 1.20.2 (the build the cluster tests use,
``scripts/kubernetes``) on loopback with their data in memory, then for each
scale (100 and 1,000 nodes by default):

1. runs ``kubelet-kit simulate --nodes N --json`` as a process of its own (so its
   CPU and memory are its own), and waits until every Node is Ready;
2. creates ``pods_per_node`` pods per node with a real client (kubernetes_asyncio,
   32 requests in flight), each bound at creation (``spec.nodeName``, round
   robin: no scheduler runs, so creation is the binding), and watches them: a
   pod's startup latency is the time from its create call's answer to the watch
   event showing it Running (the SLO's "pod startup latency", which excludes
   scheduling and image pulls: the fake runtime pulls at once);
3. holds for ``--hold`` seconds, sampling every 10 s: nodes Ready in the API,
   Leases older than their duration (a node the node lifecycle controller would
   mark NotReady), and the simulator's own report (late renewals, requests by
   verb, CPU, resident memory);
4. stops the simulator (its nodes leave) and deletes the pods.

Figures (per scale, ``n<N>_`` prefixed in ``--json``): ``nodes_ready``,
``pods_running``, ``startup_p50_s``, ``startup_p99_s``, ``create_per_s``,
``leases_expired_max`` (most Leases expired at once while holding),
``late_renewals``, ``longest_lease_gap_s``, ``requests_per_s`` (by verb, over
the hold), ``cpu_pct`` (simulator, over the hold, percent of one core),
``rss_mib`` (simulator, at the end) and ``rss_kib_per_node``.

Targets at 1,000 nodes and 11,000 pods: every node Ready and no Lease expired,
startup p99 under 5 s, simulator RSS under 2 GiB.

Usage: ``python benchmarks/simulate.py [--json] [--nodes 100,1000]
[--pods-per-node 11] [--hold 600] [--quick]`` (``--quick``: 10 nodes, 3 pods
each, a 20 s hold).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration.kube_apiserver import KubeAPIServer, missing_parts  # noqa: E402

TARGET_STARTUP_P99_S = 5.0
TARGET_RSS_MIB = 2048.0
NAMESPACE = "simulate-bench"


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values``, nearest rank (0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))
    return ordered[index]


def pod_object(name: str, node: str) -> dict[str, Any]:
    """A pod bound to ``node``: one container that runs until stopped, with
    requests as a small web server's."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "bench"}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example/app:1.0",
                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                }
            ],
        },
    }


class SimulatorProcess:
    """``kubelet-kit simulate`` as a child process, its JSON report lines read."""

    def __init__(self, kubeconfig: Path, nodes: int, prefix: str) -> None:
        self.argv = [
            str(REPO / ".venv" / "bin" / "kubelet-kit"),
            "simulate",
            "--kubeconfig",
            str(kubeconfig),
            "--nodes",
            str(nodes),
            "--prefix",
            prefix,
            "--json",
            "--report-every",
            "5",
        ]
        self.proc: asyncio.subprocess.Process | None = None
        self.latest: dict[str, Any] = {}
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stdout=subprocess.PIPE, stderr=None, start_new_session=True
        )
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.latest = json.loads(line)

    def rss_mib(self) -> float:
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    def cpu_seconds(self) -> float:
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    async def stop(self) -> dict[str, Any]:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(self.proc.wait(), 300)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader, 10)
        return self.latest


def _ready(node: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or ()
    )


async def run_scale(
    kubeconfig: Path, nodes: int, pods_per_node: int, hold: float, latency_rate: float, say: Any
) -> dict[str, Any]:
    """One scale: the simulator, the pods, the hold; its figures."""
    from kubernetes_asyncio import client as k8s
    from kubernetes_asyncio import watch as k8s_watch

    from kubelet_kit.cluster import connect
    from kubelet_kit.config.apiserver import RAW_REQUEST, api_json

    prefix = f"bench{nodes}-"
    names = [f"{prefix}{i}" for i in range(nodes)]
    api = await connect(kubeconfig, qps=-1, connections=64)
    core = k8s.CoreV1Api(api)
    coordination = k8s.CoordinationV1Api(api)
    sim = SimulatorProcess(kubeconfig, nodes, prefix)
    figures: dict[str, Any] = {}
    try:
        with contextlib.suppress(Exception):
            await api_json(core.create_namespace({"metadata": {"name": NAMESPACE}}, **RAW_REQUEST))
        started = time.monotonic()
        await sim.start()
        while True:
            listing = await api_json(core.list_node(**RAW_REQUEST))
            ready = sum(
                1
                for n in listing.get("items") or ()
                if n["metadata"]["name"].startswith(prefix) and _ready(n)
            )
            if ready == nodes:
                break
            if time.monotonic() - started > 600:
                raise RuntimeError(f"only {ready} of {nodes} nodes Ready after 600 s")
            await asyncio.sleep(2)
        say(f"{nodes} nodes Ready in {time.monotonic() - started:.1f}s")

        # Pods are watched from before the first create.
        total = nodes * pods_per_node
        created_at: dict[str, float] = {}
        running_at: dict[str, float] = {}
        listing = await api_json(core.list_namespaced_pod(NAMESPACE, limit=1, **RAW_REQUEST))
        rv = listing["metadata"]["resourceVersion"]
        wanted = {"count": total}
        enough = asyncio.Event()

        async def watch_pods() -> None:
            watcher = k8s_watch.Watch()
            async with watcher:
                async for event in watcher.stream(
                    core.list_namespaced_pod,
                    NAMESPACE,
                    resource_version=rv,
                    timeout_seconds=3600,
                    _request_timeout=(30, 3700),
                ):
                    obj = event["raw_object"]
                    name = obj["metadata"]["name"]
                    if (
                        name not in running_at
                        and (obj.get("status") or {}).get("phase") == "Running"
                    ):
                        running_at[name] = time.monotonic()
                        if len(running_at) >= wanted["count"]:
                            enough.set()

        async def create(pods: list[tuple[str, str]], in_flight: int, rate: float) -> float:
            """Create ``pods`` with ``in_flight`` requests at once, at most ``rate``
            a second (0: as fast as they go); the seconds it took."""
            queue = list(reversed(pods))
            t_start = time.monotonic()

            async def creator() -> None:
                while queue:
                    name, node = queue.pop()
                    if rate:
                        due = t_start + (len(pods) - len(queue) - 1) / rate
                        await asyncio.sleep(max(0.0, due - time.monotonic()))
                    # From before the call: the latency includes the create itself.
                    created_at[name] = time.monotonic()
                    await api_json(
                        core.create_namespaced_pod(NAMESPACE, pod_object(name, node), **RAW_REQUEST)
                    )

            await asyncio.gather(*(creator() for _ in range(in_flight)))
            return time.monotonic() - t_start

        def latencies(names_: list[str]) -> list[float]:
            return [running_at[n] - created_at[n] for n in names_ if n in running_at]

        watch_task = asyncio.create_task(watch_pods())
        # Saturation: every node's pods as fast as the API server takes them.
        saturation = [(f"p{nodes}-{i}", names[i % nodes]) for i in range(total)]
        t0 = time.monotonic()
        create_s = await create(saturation, 32, 0.0)
        say(f"{total} pods created in {create_s:.1f}s")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(enough.wait(), 1200)
        saturation_s = time.monotonic() - t0
        sat = latencies([n for n, _ in saturation])
        say(
            f"{len(sat)}/{total} Running, {saturation_s:.1f}s after the first create "
            f"({len(sat) / saturation_s:.0f} pods/s); startup p50 {percentile(sat, 0.5):.2f}s "
            f"p99 {percentile(sat, 0.99):.2f}s"
        )
        # Latency: with the nodes full, pods one at a time at a steady rate.
        count = max(10, nodes // 2)
        latency_pods = [(f"l{nodes}-{i}", names[(i * 7) % nodes]) for i in range(count)]
        enough.clear()
        wanted["count"] = total + count
        await create(latency_pods, 4, latency_rate)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(enough.wait(), 300)
        lat = latencies([n for n, _ in latency_pods])
        say(
            f"{len(lat)}/{count} latency pods Running at {latency_rate:g}/s: startup p50 "
            f"{percentile(lat, 0.5):.2f}s p90 {percentile(lat, 0.9):.2f}s "
            f"p99 {percentile(lat, 0.99):.2f}s"
        )

        # Hold: sample every 10 s.
        report0 = dict(sim.latest)
        cpu0, t_hold = sim.cpu_seconds(), time.monotonic()
        expired_max = 0
        ready_min = nodes
        while time.monotonic() - t_hold < hold:
            await asyncio.sleep(min(10.0, max(0.0, hold - (time.monotonic() - t_hold))))
            leases = await api_json(
                coordination.list_namespaced_lease("kube-node-lease", **RAW_REQUEST)
            )
            now = time.time()
            expired = 0
            for lease in leases.get("items") or ():
                if not lease["metadata"]["name"].startswith(prefix):
                    continue
                renew = lease["spec"].get("renewTime") or ""
                with contextlib.suppress(ValueError):
                    at = datetime.fromisoformat(renew).timestamp()
                    if now - at > lease["spec"].get("leaseDurationSeconds", 40):
                        expired += 1
            listing = await api_json(core.list_node(**RAW_REQUEST))
            ready = sum(
                1
                for n in listing.get("items") or ()
                if n["metadata"]["name"].startswith(prefix) and _ready(n)
            )
            expired_max = max(expired_max, expired)
            ready_min = min(ready_min, ready)
            latest = sim.latest
            say(
                f"  hold {time.monotonic() - t_hold:5.0f}s: nodes Ready {ready}/{nodes}, "
                f"leases expired {expired}, late renewals {latest.get('late_renewals')}, "
                f"sim rss {sim.rss_mib():.0f} MiB"
            )
        held = time.monotonic() - t_hold
        cpu = sim.cpu_seconds() - cpu0
        rss = sim.rss_mib()
        report1 = dict(sim.latest)
        requests0 = report0.get("requests") or {}
        requests1 = report1.get("requests") or {}
        per_s = {
            verb: round((requests1.get(verb, 0) - requests0.get(verb, 0)) / held, 1)
            for verb in sorted(requests1)
        }
        figures = {
            "nodes_ready": ready_min,
            "pods_running": len(running_at),
            "startup_p50_s": round(percentile(lat, 0.5), 3),
            "startup_p90_s": round(percentile(lat, 0.9), 3),
            "startup_p99_s": round(percentile(lat, 0.99), 3),
            "saturation_pods_per_s": round(len(sat) / saturation_s, 1),
            "saturation_p50_s": round(percentile(sat, 0.5), 3),
            "saturation_p99_s": round(percentile(sat, 0.99), 3),
            "create_per_s": round(total / create_s, 1),
            "leases_expired_max": expired_max,
            "late_renewals": report1.get("late_renewals"),
            "longest_lease_gap_s": round(float(report1.get("longest_lease_gap") or 0), 2),
            "requests_per_s": per_s,
            "cpu_pct": round(100 * cpu / held, 1) if held else 0.0,
            "rss_mib": round(rss, 1),
            "rss_kib_per_node": round(rss * 1024 / nodes, 1),
        }
        watch_task.cancel()
    finally:
        final = await sim.stop() if sim.proc is not None else {}
        if final:
            figures.setdefault("late_renewals", final.get("late_renewals"))
        with contextlib.suppress(Exception):
            await api_json(
                core.delete_collection_namespaced_pod(
                    NAMESPACE, grace_period_seconds=0, **RAW_REQUEST
                )
            )
        await api.close()
    return figures


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    missing = missing_parts()
    if missing:
        raise SystemExit(f"benchmarks/simulate.py: missing: {', '.join(missing)}")
    say = (lambda _text: None) if args.json else (lambda text: print(text, flush=True))
    base = Path(tempfile.mkdtemp(prefix="kubelet-kit-simulate-bench-", dir="/dev/shm"))
    server = KubeAPIServer(base)
    results: dict[str, Any] = {}
    try:
        await asyncio.to_thread(server.start)
        say(f"etcd and kube-apiserver up at {server.url}")
        for nodes in args.nodes:
            say(f"== {nodes} nodes, {args.pods_per_node} pods each")
            figures = await run_scale(
                server.admin_kubeconfig,
                nodes,
                args.pods_per_node,
                args.hold,
                args.latency_rate,
                say,
            )
            for key, value in figures.items():
                results[f"n{nodes}_{key}"] = value
            if not args.json:
                for key, value in figures.items():
                    print(f"  {key}: {value}")
    finally:
        await asyncio.to_thread(server.cleanup)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--nodes",
        default="100,1000",
        type=lambda s: [int(x) for x in s.split(",")],
        help="the scales, comma-separated (default: 100,1000)",
    )
    parser.add_argument("--pods-per-node", type=int, default=11)
    parser.add_argument("--hold", type=float, default=600.0, help="seconds to hold each scale")
    parser.add_argument(
        "--latency-rate", type=float, default=10.0, help="latency pods created a second (10)"
    )
    parser.add_argument("--quick", action="store_true", help="10 nodes, 3 pods each, 20 s")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.pods_per_node, args.hold = [10], 3, 20.0
    results = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(results))
    else:
        last = max(args.nodes)
        p99 = results.get(f"n{last}_startup_p99_s")
        rss = results.get(f"n{last}_rss_mib")
        print(
            f"targets at {last} nodes: startup p99 {p99}s (< {TARGET_STARTUP_P99_S}), "
            f"rss {rss} MiB (< {TARGET_RSS_MIB:.0f}), leases expired "
            f"{results.get(f'n{last}_leases_expired_max')} (0)"
        )


if __name__ == "__main__":
    main()
