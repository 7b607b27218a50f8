"""The /proc scanner behind :class:`~kubelet_kit.runtimes.host.HostProcessRuntime`'s stats.

A container is its main process's group and every descendant of it: this
module reads the process table once (pid, parent, group, CPU ticks, resident
pages of each live process) and sums the CPU time, resident memory and process
count of one such tree.
"""

from __future__ import annotations

import os

import attrs


@attrs.frozen
class _Proc:
    pid: int
    ppid: int
    pgid: int
    cpu_ticks: int
    rss_pages: int


def _scan_procs() -> list[_Proc]:
    procs = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields[0] in (b"Z", b"X"):
            continue
        procs.append(
            _Proc(
                int(entry),
                int(fields[1]),
                int(fields[2]),
                int(fields[11]) + int(fields[12]),
                int(fields[21]),
            )
        )
    return procs


def _tree_usage(root_pid: int, procs: list[_Proc]) -> tuple[int, int, int]:
    """(cpu ns, rss bytes, process count) of ``root_pid``'s group and descendants."""
    children: dict[int, list[_Proc]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p)
    members = {p.pid: p for p in procs if p.pgid == root_pid or p.pid == root_pid}
    stack = list(members.values())
    while stack:
        for child in children.get(stack.pop().pid, ()):
            if child.pid not in members:
                members[child.pid] = child
                stack.append(child)
    ticks = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    cpu = sum(p.cpu_ticks for p in members.values()) * 1_000_000_000 // ticks
    rss = sum(p.rss_pages for p in members.values()) * page
    return cpu, rss, len(members)
