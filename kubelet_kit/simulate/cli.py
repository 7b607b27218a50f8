"""``kubelet-kit simulate``: many simulated nodes against an API server."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from typing import Any

import attrs

from kubelet_kit.errors import ConfigurationError

__all__ = ["register", "simulate"]


async def simulate(
    kubeconfig: str,
    *,
    nodes: int,
    context: str | None = None,
    duration: float | None = None,
    report_every: float = 10.0,
    qps: float = -1,
    connections: int = 64,
    json_lines: bool = False,
    **options: Any,
) -> int:
    """Run a :class:`~kubelet_kit.simulate.Simulator` from a kubeconfig until
    SIGINT/SIGTERM or ``duration`` seconds, printing a report every
    ``report_every`` seconds (one JSON object per line with ``json_lines``).

    Args:
        kubeconfig: The kubeconfig file the nodes use.
        nodes: How many nodes.
        context: Its context (default its current-context).
        duration: Stop after this many seconds (None: run until signalled).
        report_every: Seconds between reports.
        qps: The shared client's request budget (negative: no limit).
        connections: Connections the shared client may keep open.
        json_lines: Reports as JSON lines instead of text.
        options: Passed to :class:`~kubelet_kit.simulate.Simulator`.

    Returns:
        The exit status (0).
    """
    from kubelet_kit.cluster import connect
    from kubelet_kit.simulate.fleet import SimulationReport, Simulator

    client = await connect(kubeconfig, context=context, qps=qps, connections=connections)
    try:
        sim = Simulator(client, nodes=nodes, **options)
        # As `kubelet-kit run` does once its agent is built: what exists now lives
        # as long as the process, so full collections skip it.
        from kubelet_kit.runner import prepare_gc

        prepare_gc()

        def show(report: SimulationReport) -> None:
            text = json.dumps(attrs.asdict(report)) if json_lines else report.line()
            print(text, flush=True)

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, sim.stop)
        if duration is not None:
            loop.call_later(duration, sim.stop)
        await sim.run(on_report=show, report_every=report_every)
        show(sim.report())
    finally:
        await client.close()
    return 0


def _run(args: argparse.Namespace) -> int:
    from kubelet_kit.simulate.node import NodeTemplate

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        template = (
            NodeTemplate.from_file(args.node_template) if args.node_template else NodeTemplate()
        )
        template = template.with_resources(
            cpu=args.cpu, memory=args.memory, max_pods=args.pods_per_node
        )
        return asyncio.run(
            simulate(
                args.kubeconfig,
                nodes=args.nodes,
                context=args.context,
                duration=args.duration,
                report_every=args.report_every,
                qps=args.qps,
                connections=args.connections,
                json_lines=args.json,
                prefix=args.prefix,
                template=template,
                keep=args.keep,
                flap_percent=args.flap_percent,
                kill_percent=args.kill_percent,
                fault_period=args.fault_period,
                flap_seconds=args.flap_seconds,
                root_dir=args.root_dir,
                seed=args.seed,
            )
        )
    except ConfigurationError as exc:
        print(f"kubelet-kit simulate: {exc}", file=sys.stderr)
        return 2


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``simulate`` subcommand to an ``argparse`` subparsers object."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "simulate",
        help="run many simulated nodes against an API server",
        description="Join N simulated nodes to the API server of a kubeconfig, all in "
        "this process: each registers its Node, renews its Lease and runs the pods "
        "bound to it through the agent's real sync loop, PLEG, status manager, prober "
        "and eviction manager over the fake runtime (docs/simulate.md). Stops on "
        "SIGINT or SIGTERM (or after --duration) and deletes its Nodes unless --keep.",
    )
    add = parser.add_argument
    add("--kubeconfig", required=True, metavar="FILE", help="the nodes' kubeconfig")
    add("--context", metavar="NAME", help="its context (default: its current-context)")
    add("--nodes", type=int, required=True, metavar="N", help="how many nodes")
    add("--prefix", default="sim-node-", help="node name prefix (default: %(default)s)")
    add(
        "--node-template",
        metavar="FILE",
        help="a Node object (YAML or JSON): labels, taints and status.capacity of every node",
    )
    add("--pods-per-node", type=int, metavar="N", help="maxPods of each node (default 110)")
    add("--cpu", metavar="QUANTITY", help="CPU capacity of each node (default 4)")
    add("--memory", metavar="QUANTITY", help="memory capacity of each node (default 16Gi)")
    add(
        "--flap-percent",
        type=float,
        default=0.0,
        metavar="P",
        help="percent of nodes that go silent (NotReady) each fault period",
    )
    add(
        "--kill-percent",
        type=float,
        default=0.0,
        metavar="P",
        help="percent of nodes that lose their pod sandboxes each fault period",
    )
    add(
        "--fault-period",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds between fault rounds (default: %(default)s)",
    )
    add(
        "--flap-seconds",
        type=float,
        default=60.0,
        metavar="S",
        help="how long a flapping node stays silent (default: %(default)s)",
    )
    add("--keep", action="store_true", help="leave the Nodes and Leases registered at the end")
    add("--duration", type=float, metavar="S", help="stop after S seconds")
    add(
        "--report-every",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds between report lines (default: %(default)s)",
    )
    add("--json", action="store_true", help="reports as JSON lines")
    add(
        "--qps",
        type=float,
        default=-1,
        metavar="QPS",
        help="request budget of the shared client (default: no limit)",
    )
    add(
        "--connections",
        type=int,
        default=64,
        metavar="N",
        help="connections the shared client keeps open (default: %(default)s)",
    )
    add("--root-dir", metavar="DIR", help="state directory (default: a temporary one)")
    add("--seed", type=int, help="seed of the fault mode's choices")
    add("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.set_defaults(func=_run)
    return parser
