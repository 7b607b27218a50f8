"""Running an agent in cluster mode from Python: :func:`run_cluster_node`.

The agent is the wiring root's (:func:`kubelet_kit.agent.build_agent` with
cluster options): the API server as one more pod source, ConfigMaps/Secrets read
through it, its Services giving containers their service-link variables, a
:class:`~kubelet_kit.cluster.ClusterNode` beside the Kubelet, and the node API
served on the configured port, which the Node publishes. From the command line
it is ``kubelet-kit run --kubeconfig``; ``python -m kubelet_kit.cluster`` is the
same command under its first name.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.errors import ConfigurationError

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
            f"{', '.join(_EFFECTS)}"
        )
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
    """Join the cluster and run until cancelled: the agent of
    :func:`kubelet_kit.agent.build_agent` in cluster mode, node API included.

    Args:
        kubeconfig: The node's kubeconfig (path or content); None for in-cluster.
        config: The KubeletConfiguration (node labels, status frequencies, ports...).
        context: Kubeconfig context.
        taints: Taints to register with.
        lease_duration: nodeLeaseDurationSeconds.
        kubelet_options: Passed to :func:`~kubelet_kit.agent.build_agent`
            (``node_name``, ``root_dir``, ``runtime``, ``node_ip``, ...).
    """
    from kubelet_kit.agent import ClusterOptions, build_agent

    agent = await build_agent(
        config,
        cluster=ClusterOptions(
            kubeconfig=kubeconfig, context=context, taints=taints, lease_duration=lease_duration
        ),
        **kubelet_options,
    )
    await agent.run()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kubelet_kit.cluster``: ``kubelet-kit run --kubeconfig`` under its
    first name (the flags are the same; see ``kubelet-kit run --help``)."""
    from kubelet_kit.cli import main as cli_main

    args = list(sys.argv[1:] if argv is None else argv)
    if not any(a == "--kubeconfig" or a.startswith("--kubeconfig=") for a in args):
        print(
            "python -m kubelet_kit.cluster: give --kubeconfig (the node's kubeconfig); "
            "this is kubelet-kit run --kubeconfig",
            file=sys.stderr,
        )
        return 2
    # Its first flag for the node's name, under the kubelet's name now.
    args = ["--hostname-override" if a == "--node-name" else a for a in args]
    return cli_main(["run", *args])
