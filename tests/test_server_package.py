"""kubelet_kit.server, .nodestatus and .metrics: honest __all__, no subsystem pulled in."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "name",
    [
        "kubelet_kit.server",
        "kubelet_kit.server.auth",
        "kubelet_kit.server.logs",
        "kubelet_kit.node.nodestatus",
        "kubelet_kit.node.metrics",
    ],
)
def test_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    for attr in module.__all__:
        assert hasattr(module, attr), f"{name}.{attr}"


def test_importing_the_server_pulls_in_no_subsystem() -> None:
    code = (
        "import sys, kubelet_kit.server, kubelet_kit.node.nodestatus, "
        "kubelet_kit.node.metrics; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('kubelet_kit.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    for subsystem in (
        "cri",
        "pleg",
        "cm",
        "volume",
        "prober",
        "eviction",
        "status",
        "podworkers",
        "podsync",
        "kubelet",
        "runtimes",
        "testing",
        "agent",
        "node.kubelet",
        "node.podworkers",
    ):
        assert not [
            m
            for m in out
            if m == f"kubelet_kit.{subsystem}" or m.startswith(f"kubelet_kit.{subsystem}.")
        ], subsystem
