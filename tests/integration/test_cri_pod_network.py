"""The runtime kit's network checks against containerd on a real pod network: port
mappings through CNI's portmap plugin, a network namespace of the pod's own, and
network sysctls, which the session containerd (loopback-only, host networking)
cannot show. Everything runs in a network namespace of the test's own
(``pod_network_run.py``), so the bridge and NAT rules never reach the machine's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from .containerd import missing_parts

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

RUNNER = Path(__file__).with_name("pod_network_run.py")
#: The checks that need a pod network to show what they check.
CHECKS = ["port_mappings", "pod_namespaces", "sysctls", "dns_config", "port_forward"]


def test_network_checks_pass_on_a_pod_network(
    require_real: Callable[[bool, str], None],
) -> None:
    missing = missing_parts()
    require_real(not missing, "containerd harness (" + ", ".join(missing) + ")")
    require_real(os.geteuid() == 0, "root (a network namespace and a bridge in it)")
    for tool in ("unshare", "ip", "iptables"):
        require_real(shutil.which(tool) is not None, f"{tool} (a pod network of its own)")
    base = Path(tempfile.mkdtemp(prefix="kk-podnet-"))
    try:
        done = subprocess.run(
            ["unshare", "--net", "--", sys.executable, str(RUNNER), str(base), *CHECKS],
            capture_output=True,
            text=True,
            timeout=540,
            cwd=RUNNER.parents[2],
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    said = done.stdout[-4000:] + done.stderr[-4000:]
    assert done.returncode == 0, said
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(results) == sorted(CHECKS), said
    not_passed = {n: r for n, r in results.items() if r["status"] != "passed"}
    assert not not_passed, json.dumps(not_passed, indent=1)
