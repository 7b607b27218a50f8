"""The public face of kubelet_kit.pleg: exports and the no-cross-import rule."""

from __future__ import annotations

import subprocess
import sys

import kubelet_kit.pleg as pleg


def test_all_is_honest() -> None:
    assert sorted(pleg.__all__) == sorted(set(pleg.__all__)), "duplicates in __all__"
    for name in pleg.__all__:
        assert hasattr(pleg, name), f"kubelet_kit.pleg.__all__ names {name!r}, which is missing"
    public = {
        n
        for n, v in vars(pleg).items()
        if not n.startswith("_") and getattr(v, "__module__", "").startswith("kubelet_kit.pleg")
    }
    assert public <= set(pleg.__all__), f"exported but not in __all__: {public - set(pleg.__all__)}"


def test_importing_pleg_pulls_in_no_other_subsystem() -> None:
    code = (
        "import sys, kubelet_kit.pleg\n"
        "bad = sorted(m for m in sys.modules if m.startswith('kubelet_kit.') and m.split('.')[1]"
        " not in {'pleg', 'api', 'container', 'clock', 'errors', '_version', '_lazy'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""
