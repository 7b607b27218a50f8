"""Print the results of conformance runs side by side: ``python -m conformance.compare
DIR...``, each DIR an output directory of ``scripts/conformance`` (its
``summary.json``). ``scripts/conformance --node both`` ends with it, so the two nodes'
pass counts and times, and the ratio of the times, are on one screen."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def load(directory: Path) -> dict[str, Any]:
    """The summary a run wrote into ``directory``."""
    data: dict[str, Any] = json.loads((directory / "summary.json").read_text())
    return data


def table(summaries: list[dict[str, Any]]) -> str:
    """One line per run, then the time of each kubelet-kit run against the real
    kubelet's (the first real run), as a ratio."""
    lines = [f"{'node':<12} {'passed':>9} {'specs min':>10} {'run min':>8}  commit"]
    for s in summaries:
        commit = s["commit"] + ("+" if s.get("local_changes") else "")
        lines.append(
            f"{s['node']:<12} {s['passed']:>4}/{s['total']:<4} "
            f"{s['spec_minutes']:>10.1f} {s.get('run_minutes', 0):>8.1f}  {commit}"
        )
    real = next((s for s in summaries if s["node"] == "real"), None)
    for s in summaries:
        if s["node"] != "real" and real is not None and real["spec_minutes"] > 0:
            ratio = s["spec_minutes"] / real["spec_minutes"]
            lines.append(f"{s['node']} takes {ratio:.2f}x the real kubelet's time")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Print the table of the runs in ``argv``; 0 when every run passed every spec."""
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    summaries = [load(Path(d)) for d in argv]
    print(table(summaries))
    return 0 if all(s["passed"] == s["total"] > 0 for s in summaries) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
