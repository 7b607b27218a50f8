"""The conformance suite's smoke subset against a kubelet-kit node, in the project's
own harness (``scripts/conformance --set smoke``): a real one-node cluster (etcd,
kube-apiserver, kube-controller-manager, kube-scheduler 1.20.2), the node
``kubelet-kit run`` on a real containerd, and the upstream ``e2e.test`` judging it.
With ``KUBELET_KIT_CONFORMANCE_SET=all`` (or ``node``, ``nodeconformance``) the same
test runs that whole set instead of the smoke subset; ``scripts/conformance`` runs
any of them by hand (docs/conformance.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from .kube_apiserver import kubernetes_bin_dir

REPO = Path(__file__).resolve().parents[2]
#: What scripts/conformance needs beyond the default peers (scripts/setup builds them).
BINARIES = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "e2e.test",
    "ginkgo",
    "agnhost",
    "nonewprivs",
    "pause",
)

pytestmark = pytest.mark.integration


def _missing() -> list[str]:
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    bin_dir = kubernetes_bin_dir()
    missing += [
        f"{bin_dir / b} (scripts/kubernetes)"
        for b in BINARIES
        if not os.access(bin_dir / b, os.X_OK)
    ]
    missing += [t for t in ("containerd", "etcd", "unshare", "openssl") if shutil.which(t) is None]
    return missing


#: The set this test runs: the smoke subset unless the environment names another.
SPEC_SET = os.environ.get("KUBELET_KIT_CONFORMANCE_SET", "smoke")


@pytest.mark.timeout(1800 if SPEC_SET == "smoke" else 5400)
def test_smoke_subset_passes_on_a_kubelet_kit_node(
    require_real: Callable[[bool, str], None],
) -> None:
    """Every smoke spec (logs, exec, downward API volumes and env, ConfigMap,
    Secret, projected and emptyDir volumes, probes, a lifecycle hook, init containers,
    termination messages, /etc/hosts, security contexts, variable expansion, the
    pod's host IP) passes as the upstream suite judges it; the harness leaves no
    process of its run behind."""
    missing = _missing()
    require_real(not missing, "the conformance harness (" + ", ".join(missing) + ")")
    # A short directory of its own: containerd's sockets live under it, and a unix
    # socket's path has at most 107 bytes (pytest's tmp_path is too deep).
    out = Path(tempfile.mkdtemp(prefix="kk-cf-")) / "run"
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "conformance"), "--set", SPEC_SET, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1700 if SPEC_SET == "smoke" else 5300,
        check=False,
    )
    summary_path = out / "summary.json"
    assert summary_path.is_file(), (
        f"no summary in {out}:\n" + done.stdout[-4000:] + done.stderr[-4000:]
    )
    summary = json.loads(summary_path.read_text())
    assert summary["set"] == SPEC_SET
    assert (
        summary["total"] == {"smoke": 20, "all": 155, "node": 149, "nodeconformance": 16}[SPEC_SET]
    ), summary
    assert summary["failed"] == {}, "\n".join(
        f"{name}:\n  {msg[:600]}" for name, msg in summary["failed"].items()
    )
    assert summary["passed"] == summary["total"]
    assert done.returncode == 0, done.stdout[-4000:]
    # Nothing of the run is left: no process names its directory.
    marker = str(out).encode()
    left = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes():
                    left.append(entry.name)
            except OSError:
                pass
    assert left == [], f"processes of the run left behind: {left}"
    # Kept when the test fails, for its logs and junit reports.
    shutil.rmtree(out.parent, ignore_errors=True)
