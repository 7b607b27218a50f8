"""``run_in_vm``: run a command as root in a throwaway VM and get its exit code and
output.

The VM is ``scripts/test-vm``: qemu in TCG mode on a Debian kernel, this machine's
root shared read-only over 9p (so the checkout and its ``.venv`` are there, at the
same paths), tmpfs and overlays where it must write, a cgroup v2 hierarchy alone
(``cgroup="v2"``) or the v1 controllers (``cgroup="v1"``). Its init brackets the
command's output on the serial console with ``@@KUBELET_KIT_VM_BEGIN ...@@`` and
``@@KUBELET_KIT_VM_RESULT exit=N@@``, which this module reads.

A boot costs seconds: put the checks of one test in one command.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, NamedTuple

__all__ = [
    "REPO",
    "VM_TESTS_ENABLED",
    "VMBoot",
    "VMError",
    "VMRun",
    "VMTimeout",
    "boot_vm",
    "run_in_vm",
]

#: The checkout: the VM sees it at the same path.
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "test-vm"
#: ``KUBELET_KIT_VM=1`` runs the VM tests; without it they are skipped.
VM_TESTS_ENABLED = os.environ.get("KUBELET_KIT_VM") == "1"

_BEGIN = re.compile(r"^@@KUBELET_KIT_VM_BEGIN uptime=([0-9.]+)@@$", re.MULTILINE)
_RESULT = re.compile(r"@@KUBELET_KIT_VM_RESULT exit=(\d+)@@$", re.MULTILINE)
_ERROR = re.compile(r"^@@KUBELET_KIT_VM_ERROR (.*)@@$", re.MULTILINE)


class VMError(Exception):
    """The VM did not run the command to its end (no result on its console)."""

    def __init__(self, message: str, console: str) -> None:
        tail = "\n".join(console.splitlines()[-40:])
        super().__init__(f"{message}\n--- the VM's console, last lines ---\n{tail}")
        self.console = console


class VMTimeout(VMError):
    """The VM was stopped at its timeout."""


class VMRun(NamedTuple):
    """What :func:`run_in_vm` returns."""

    exit_code: int
    output: str


class VMBoot(NamedTuple):
    """One VM's run, with its timings.

    Attributes:
        exit_code: The command's exit code.
        output: What the command wrote (stdout and stderr, as the console shows them).
        console: The whole console: kernel and init messages around the output.
        kernel_uptime: The VM's uptime when the command started (kernel and init).
        boot_seconds: Wall time from starting qemu to the command's first byte.
        wall_seconds: Wall time of the whole run, qemu's start to its end.
    """

    exit_code: int
    output: str
    console: str
    kernel_uptime: float
    boot_seconds: float
    wall_seconds: float


def boot_vm(
    command: str | Sequence[str],
    *,
    cgroup: Literal["v2", "v1"] = "v2",
    timeout: float = 600,
    memory_mb: int = 1024,
    cpus: int = 1,
    cwd: str | os.PathLike[str] = REPO,
    env: Sequence[str] = (),
) -> VMBoot:
    """Boot a VM, run ``command`` in it as root, power it off.

    Args:
        command: A shell command line (run by ``sh -c``), or an argument vector.
        cgroup: ``"v2"``: cgroup2 alone (``cgroup_no_v1=all``); ``"v1"``: the v1
            controllers, and an empty cgroup2 at ``/sys/fs/cgroup/unified``.
        timeout: Seconds before the VM is stopped.
        memory_mb: The VM's memory.
        cpus: Its virtual CPUs.
        cwd: Where the command starts (a path of this machine: the VM sees it).
        env: Names of variables of this process to pass in (``KUBELET_KIT_*`` and
            ``PYTHON*`` always pass).

    Raises:
        VMTimeout: The command had not ended after ``timeout`` seconds.
        VMError: The VM could not boot or could not run the command.
    """
    argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
    args = [str(SCRIPT), "--cgroup", cgroup, "--timeout", str(int(timeout))]
    args += ["--memory", str(memory_mb), "--cpus", str(cpus), "--cwd", os.fspath(cwd)]
    for name in env:
        args += ["--env", name]
    args += ["--", *argv]
    start = time.monotonic()
    begun: float | None = None
    lines: list[str] = []
    with subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    ) as proc:
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                if begun is None and line.startswith("@@KUBELET_KIT_VM_BEGIN"):
                    begun = time.monotonic()
                lines.append(line)
            proc.wait(timeout=60)
        except BaseException:
            proc.kill()
            raise
    wall = time.monotonic() - start
    console = "".join(lines)
    if proc.returncode == 124 and not _RESULT.search(console):
        raise VMTimeout(f"{shlex.join(argv)}: no result after {timeout:g} s", console)
    error = _ERROR.search(console)
    if error:
        raise VMError(f"the VM's init: {error.group(1)}", console)
    head = _BEGIN.search(console)
    results = list(_RESULT.finditer(console))
    if head is None or not results:
        raise VMError(
            f"{shlex.join(argv)}: the VM ended without a result (exit {proc.returncode})",
            console,
        )
    tail = results[-1]
    return VMBoot(
        exit_code=int(tail.group(1)),
        output=console[head.end() + 1 : tail.start()],
        console=console,
        kernel_uptime=float(head.group(1)),
        boot_seconds=(begun if begun is not None else start) - start,
        wall_seconds=wall,
    )


def run_in_vm(
    command: str | Sequence[str],
    cgroup: Literal["v2", "v1"] = "v2",
    timeout: float = 600,
    *,
    memory_mb: int = 1024,
    cpus: int = 1,
    cwd: str | os.PathLike[str] = REPO,
    env: Sequence[str] = (),
) -> VMRun:
    """Run ``command`` as root in a throwaway VM: ``(exit_code, output)``.

    The arguments and errors are :func:`boot_vm`'s.
    """
    boot = boot_vm(
        command, cgroup=cgroup, timeout=timeout, memory_mb=memory_mb, cpus=cpus, cwd=cwd, env=env
    )
    return VMRun(boot.exit_code, boot.output)
