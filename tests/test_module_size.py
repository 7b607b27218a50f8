"""No Python module of the project is over 800 lines.

A module that grows past that holds more than one concept: split it along the
concepts inside (one class, or one family of helpers, per module), not by cutting
it in half. Generated protobuf code is exempt: it is regenerated, never edited.
The agent core has a tighter cap of its own (tests/test_layering.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Most lines in one module.
MAX_MODULE_LINES = 800
#: Where the project's Python lives.
TREES = ("kubelet_kit", "tests", "benchmarks", "examples", "scripts", "conformance")
#: Generated code (scripts/gen_protos.py writes it).
GENERATED = ("kubelet_kit/cri/gen/", "kubelet_kit/cm/devicemanager/gen/")


def python_files() -> list[Path]:
    """The project's Python files: tracked or new (not ignored), under TREES."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *TREES],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk the trees
        listed = [str(p.relative_to(ROOT)) for t in TREES for p in (ROOT / t).rglob("*")]
    files = []
    for name in listed:
        path = ROOT / name
        if not path.is_file() or name.startswith(GENERATED):
            continue
        if path.suffix == ".py" or (path.suffix == "" and _is_python_script(path)):
            files.append(path)
    return sorted(files)


def _is_python_script(path: Path) -> bool:
    with path.open("rb") as f:
        first = f.readline(200)
    return first.startswith(b"#!") and b"python" in first


def test_the_files_are_found() -> None:
    files = {str(p.relative_to(ROOT)) for p in python_files()}
    assert "kubelet_kit/agent/kubelet.py" in files
    assert "tests/test_module_size.py" in files
    assert not any(f.startswith(GENERATED) for f in files)


def test_no_module_is_over_the_cap() -> None:
    big = []
    for path in python_files():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            big.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not big, f"over {MAX_MODULE_LINES} lines: {big}"
