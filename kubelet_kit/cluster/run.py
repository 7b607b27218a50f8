"""Running an agent in cluster mode: ``python -m kubelet_kit.cluster``.

Builds the Kubelet from a KubeletConfiguration (as ``kubelet-kit run`` does) with
the API server as one more pod source, ConfigMaps/Secrets read through it and its
Services giving containers their service-link variables, and runs a
:class:`~kubelet_kit.cluster.ClusterNode` beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from kubelet_kit.api.kubeletconfig import KubeletConfiguration, load_kubelet_config
from kubelet_kit.cluster.agent import ClusterNode
from kubelet_kit.cluster.client import connect
from kubelet_kit.cluster.configsource import APIConfigSource
from kubelet_kit.cluster.services import APIServices
from kubelet_kit.config.apiserver import APIServerSource
from kubelet_kit.errors import ConfigurationError, KubeletKitError

__all__ = ["main", "parse_taint", "run_cluster_node"]

log = logging.getLogger(__name__)

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_taint(text: str) -> dict[str, str]:
    """A taint in the kubelet's ``--register-with-taints`` form, ``key[=value]:Effect``.

    Raises:
        ConfigurationError: Not of that form, or an unknown effect (naming the text).
    """
    spec, sep, effect = text.rpartition(":")
    if not sep or not spec or effect not in _EFFECTS:
        raise ConfigurationError(
            f"register-with-taints: {text!r}: want key[=value]:Effect with Effect one of "
            f"{', '.join(_EFFECTS)}")
    key, _, value = spec.partition("=")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


async def run_cluster_node(
    kubeconfig: str | Mapping[str, Any] | None,
    config: KubeletConfiguration,
    *,
    context: str | None = None,
    taints: Sequence[Mapping[str, Any]] = (),
    lease_duration: int = 40,
    **kubelet_options: Any,
) -> None:
    """Join the cluster and run until cancelled (or SIGTERM/SIGINT in :func:`main`).

    Args:
        kubeconfig: The node's kubeconfig (path or content); None for in-cluster.
        config: The KubeletConfiguration (node labels, status frequencies, ...).
        context: Kubeconfig context.
        taints: Taints to register with.
        lease_duration: nodeLeaseDurationSeconds.
        kubelet_options: Passed to :meth:`Kubelet.from_config` (``node_name``,
            ``root_dir``, ``runtime``, ...).
    """
    from kubelet_kit.kubelet import Kubelet, default_node_name

    api_client = await connect(kubeconfig, context=context)
    config_source: APIConfigSource | None = None
    services: APIServices | None = None
    try:
        node_name = kubelet_options.pop("node_name", None) or default_node_name()
        clock = kubelet_options.get("clock")
        source = APIServerSource(api_client, node_name, clock=clock)
        kubelet_options["sources"] = [source, *kubelet_options.get("sources", ())]
        if "config_source" not in kubelet_options:
            config_source = kubelet_options["config_source"] = APIConfigSource(api_client)
        if "services" not in kubelet_options:
            services = kubelet_options["services"] = APIServices(api_client, clock=clock)
        kubelet = Kubelet.from_config(config, node_name=node_name, **kubelet_options)
        node = ClusterNode(
            kubelet, api_client, labels=config.node_labels, taints=taints,
            lease_duration=lease_duration,
            node_status_update_frequency=config.seconds("node_status_update_frequency"),
            node_status_report_frequency=config.seconds("node_status_report_frequency"))
        async with kubelet, node:
            if services is None:
                await asyncio.Event().wait()  # until cancelled
            else:
                await services.run()  # until cancelled
    finally:
        if config_source is not None:
            await asyncio.to_thread(config_source.close)
        await api_client.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kubelet_kit.cluster``: join a cluster as a Node and run its pods."""
    parser = argparse.ArgumentParser(prog="python -m kubelet_kit.cluster",
                                     description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--kubeconfig", help="the node's kubeconfig (default: in-cluster)")
    parser.add_argument("--context", help="kubeconfig context")
    parser.add_argument("--config", help="KubeletConfiguration file (YAML or JSON)")
    parser.add_argument("--node-name", help="this node's name (default: the host name)")
    parser.add_argument("--root-dir", help="state directory")
    parser.add_argument("--register-with-taints", default="",
                        help="comma-separated key[=value]:Effect")
    parser.add_argument("--node-lease-duration-seconds", type=int, default=40)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: "
                        "%(message)s")
    try:
        config = load_kubelet_config(args.config) if args.config else KubeletConfiguration()
        taints = [parse_taint(t) for t in args.register_with_taints.split(",") if t]
    except KubeletKitError as exc:
        parser.error(str(exc))
    options: dict[str, Any] = {"node_name": args.node_name}
    if args.root_dir:
        options["root_dir"] = args.root_dir

    async def run() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await run_cluster_node(args.kubeconfig, config, context=args.context,
                                   taints=taints,
                                   lease_duration=args.node_lease_duration_seconds, **options)

    try:
        asyncio.run(run())
    except ConfigurationError as exc:
        log.error("%s", exc)
        return 2
    return 0
