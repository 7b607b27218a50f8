"""CPU manager: the kubelet's ``none`` and ``static`` CPU policies, with a checkpoint.

``none`` (the default) pins nothing: every container gets "" and the kernel's
scheduler decides. ``static`` gives each container of a Guaranteed pod whose CPU
request is a whole number of CPUs that many CPUs of its own; every other container
runs on the shared pool (all CPUs not given out, the reserved ones included).
Reserved CPUs (``ceil(systemReserved.cpu + kubeReserved.cpu)`` lowest-numbered
CPUs, or an explicit list) are never given out. CPUs of a finished init container
are reused by the pod's later containers, as upstream does.

The state (default set and assignments) is saved in a checkpoint file after every
change, as JSON with a checksum; a file whose checksum does not match is refused
with the kubelet's "checkpoint is corrupted" error, and a checkpoint that does not
fit the configured policy or CPUs is refused too. Upstream computes its checksum
over a Go-specific dump of the struct; here it is FNV-1a (32 bit) over the
canonical JSON of the same fields, so files are not interchangeable with a real
kubelet's.

Simplification: CPUs are taken lowest-numbered first; upstream packs by socket,
core and thread (topology), which this module does not model.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

from kubelet_kit.api import Container, Pod, qos_class
from kubelet_kit.api.admission import AdmitResult
from kubelet_kit.errors import ConfigurationError

__all__ = [
    "CHECKPOINT_NAME",
    "CPUManager",
    "checkpoint_checksum",
    "format_cpuset",
    "guaranteed_cpus",
    "parse_cpuset",
]

CHECKPOINT_NAME: Final = "cpu_manager_state"
CPUPolicy = Literal["none", "static"]


def parse_cpuset(text: str) -> frozenset[int]:
    """Parse the kernel's list format (``"0-3,6"``); "" is the empty set.

    Raises:
        ValueError: Not a CPU list.
    """
    out: set[int] = set()
    text = text.strip()
    if not text:
        return frozenset()
    for chunk in text.split(","):
        lo, sep, hi = chunk.partition("-")
        try:
            start = int(lo)
            end = int(hi) if sep else start
        except ValueError:
            raise ValueError(f"invalid CPU list {text!r}") from None
        if start < 0 or end < start:
            raise ValueError(f"invalid CPU list {text!r}")
        out.update(range(start, end + 1))
    return frozenset(out)


def format_cpuset(cpus: Iterable[int]) -> str:
    """The kernel's list format, ranges collapsed: {0,1,2,3,6} -> ``"0-3,6"``."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def checkpoint_checksum(
    policy: str, default_cpuset: str, entries: Mapping[str, Mapping[str, str]]
) -> int:
    """FNV-1a 32-bit over the canonical JSON of the checkpoint's fields."""
    body = json.dumps(
        {"policyName": policy, "defaultCpuSet": default_cpuset, "entries": entries},
        sort_keys=True,
        separators=(",", ":"),
    )
    h = 0x811C9DC5
    for byte in body.encode("utf-8"):
        h ^= byte
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def guaranteed_cpus(pod: Pod, container: Container) -> int:
    """Exclusive CPUs the static policy gives ``container``: its whole-CPU request
    in a Guaranteed pod, else 0 (upstream ``guaranteedCPUs``)."""
    if qos_class(pod) != "Guaranteed":
        return 0
    qty = container.resources.requests.get("cpu")
    if qty is None:
        return 0
    value = qty.value()
    if value * 1000 != qty.milli_value():
        return 0
    return value


class CPUManager:
    """The CPU manager with the ``none`` or ``static`` policy.

    Args:
        policy: ``"none"`` or ``"static"`` (the kubelet's ``cpuManagerPolicy``).
        cpus: The node's CPU ids (default: the CPUs this process may run on).
        reserved_milli_cpu: systemReserved.cpu + kubeReserved.cpu in milli-CPU; the
            static policy reserves the ceiling of it in whole CPUs and needs it > 0.
        reserved_cpus: An explicit reserved list (``reservedSystemCPUs``) instead.
        state_dir: Where to keep the checkpoint (None: memory only).

    Raises:
        ConfigurationError: An unknown policy, or ``static`` without reserved CPUs.
    """

    def __init__(
        self,
        policy: str = "none",
        *,
        cpus: Sequence[int] | None = None,
        reserved_milli_cpu: int = 0,
        reserved_cpus: Iterable[int] | None = None,
        state_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if policy not in ("none", "static"):
            raise ConfigurationError(
                f'cpuManagerPolicy: Unsupported value: "{policy}": supported values: '
                '"none", "static"'
            )
        self.policy: str = policy
        all_cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
        self.cpus: frozenset[int] = frozenset(all_cpus)
        if reserved_cpus is not None:
            reserved = frozenset(reserved_cpus)
            if not reserved <= self.cpus:
                raise ConfigurationError(
                    f'reservedSystemCPUs: "{format_cpuset(reserved)}" is not a subset of the '
                    f'node\'s CPUs "{format_cpuset(self.cpus)}"'
                )
        else:
            count = math.ceil(reserved_milli_cpu / 1000) if reserved_milli_cpu > 0 else 0
            if count > len(all_cpus):
                raise ConfigurationError(
                    f"not enough CPUs to reserve {count}: the node has {len(all_cpus)}"
                )
            reserved = frozenset(all_cpus[:count])
        if policy == "static" and not reserved:
            raise ConfigurationError(
                "[cpumanager] the static policy requires systemreserved.cpu + "
                "kubereserved.cpu to be greater than zero"
            )
        self.reserved: frozenset[int] = reserved
        self.state_file: Path | None = (
            Path(state_dir) / CHECKPOINT_NAME if state_dir is not None else None
        )
        self.default_cpuset: frozenset[int] = frozenset()
        self.assignments: dict[str, dict[str, frozenset[int]]] = {}
        self._reuse: dict[str, frozenset[int]] = {}

    # ------------------------------------------------------------------ state

    def start(self) -> None:
        """Restore the checkpoint (or start fresh) and check it fits.

        Raises:
            ConfigurationError: The checkpoint is corrupt, was written by another
                policy, or does not match this node's CPUs and reservations.
        """
        if self.state_file is not None and self.state_file.exists():
            self._restore(self.state_file)
        if self.policy == "static":
            self._validate()
        else:
            self.default_cpuset = self.cpus
        self._store()

    def _corrupt(self, why: str) -> ConfigurationError:
        return ConfigurationError(
            f"could not restore state from checkpoint: {why}, please drain this node and "
            f'delete the CPU manager checkpoint file "{self.state_file}" before restarting '
            "the agent"
        )

    def _restore(self, path: Path) -> None:
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
            policy = data["policyName"]
            default = data["defaultCpuSet"]
            entries = data.get("entries") or {}
            checksum = data["checksum"]
            ok = (
                isinstance(policy, str)
                and isinstance(default, str)
                and isinstance(entries, dict)
                and isinstance(checksum, int)
                and all(isinstance(v, dict) for v in entries.values())
            )
        except (OSError, ValueError, KeyError, TypeError):
            ok = False
        if not ok or checksum != checkpoint_checksum(policy, default, entries):
            raise self._corrupt("checkpoint is corrupted")
        if policy != self.policy:
            raise self._corrupt(
                f'configured policy "{self.policy}" differs from state checkpoint policy "{policy}"'
            )
        try:
            self.default_cpuset = parse_cpuset(default)
            self.assignments = {
                uid: {name: parse_cpuset(text) for name, text in containers.items()}
                for uid, containers in entries.items()
            }
        except ValueError as exc:
            raise self._corrupt(f"could not parse cpu set: {exc}") from None

    def _validate(self) -> None:
        if not self.default_cpuset:
            if self.assignments:
                raise self._corrupt("default cpuset cannot be empty")
            self.default_cpuset = self.cpus
            return
        if not self.reserved <= self.default_cpuset:
            raise self._corrupt(
                f'not all reserved cpus: "{format_cpuset(self.reserved)}" are present in '
                f'defaultCpuSet: "{format_cpuset(self.default_cpuset)}"'
            )
        known = set(self.default_cpuset)
        for uid, containers in self.assignments.items():
            for name, cset in containers.items():
                if cset & self.default_cpuset:
                    raise self._corrupt(
                        f'pod: {uid}, container: {name} cpuset: "{format_cpuset(cset)}" '
                        f'overlaps with default cpuset "{format_cpuset(self.default_cpuset)}"'
                    )
                known |= cset
        if known != self.cpus:
            raise self._corrupt(
                f'current set of available CPUs "{format_cpuset(self.cpus)}" doesn\'t match '
                f'with CPUs in state "{format_cpuset(known)}"'
            )

    def checkpoint(self) -> dict[str, Any]:
        """The checkpoint as written: policyName, defaultCpuSet, entries, checksum."""
        default = format_cpuset(self.default_cpuset)
        entries = {
            uid: {name: format_cpuset(c) for name, c in sorted(cs.items())}
            for uid, cs in sorted(self.assignments.items())
            if cs
        }
        return {
            "policyName": self.policy,
            "defaultCpuSet": default,
            "entries": entries,
            "checksum": checkpoint_checksum(self.policy, default, entries),
        }

    def _store(self) -> None:
        if self.state_file is None:
            return
        # Write-then-rename so a crash never leaves half a checkpoint behind. The
        # file is a few hundred bytes; writing it inline does not stall the loop.
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.state_file.parent, prefix=".cpu_manager_state.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.checkpoint(), f, sort_keys=True)
            os.replace(tmp, self.state_file)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # ------------------------------------------------------------------ policy

    def available(self) -> frozenset[int]:
        """CPUs that may still be given out exclusively (shared pool less reserved)."""
        return self.default_cpuset - self.reserved

    def _allocate(self, pod: Pod, container: Container) -> str | None:
        uid = pod.uid
        count = guaranteed_cpus(pod, container)
        if count == 0:
            return None
        have = self.assignments.get(uid, {}).get(container.name)
        if have is not None:
            self._update_reuse(pod, container, have)
            return None
        reusable = self._reuse.get(uid, frozenset())
        allocatable = self.available() | reusable
        if count > len(allocatable):
            return (
                f"not enough cpus available to satisfy request: requested={count}, "
                f"available={len(allocatable)}"
            )
        chosen = frozenset(sorted(allocatable)[:count])
        self.assignments.setdefault(uid, {})[container.name] = chosen
        self.default_cpuset -= chosen
        self._update_reuse(pod, container, chosen)
        return None

    def _update_reuse(self, pod: Pod, container: Container, cset: frozenset[int]) -> None:
        uid = pod.uid
        self._reuse = {uid: self._reuse.get(uid, frozenset())}
        for init in pod.spec.init_containers:
            if init.name == container.name:
                if not init.is_sidecar:
                    self._reuse[uid] |= cset
                return
        self._reuse[uid] -= cset

    def allocate_pod(self, pod: Pod) -> AdmitResult:
        """Give the pod's containers their CPUs (init containers first), all or none.

        Returns:
            An admitting result, or ``UnexpectedAdmissionError`` with the kubelet's
            message when the CPUs are not there.
        """
        if self.policy != "static":
            return AdmitResult.ok()
        before_default = self.default_cpuset
        before = {u: dict(c) for u, c in self.assignments.items()}
        for container in (*pod.spec.init_containers, *pod.spec.containers):
            err = self._allocate(pod, container)
            if err is not None:
                self.default_cpuset, self.assignments = before_default, before
                self._reuse.pop(pod.uid, None)
                return AdmitResult.refuse(
                    "UnexpectedAdmissionError", f"Allocate failed due to {err}, which is unexpected"
                )
        self._store()
        return AdmitResult.ok()

    def cpuset(self, pod: Pod, container: Container) -> str:
        """The container's ``cpuset.cpus``: its own CPUs, else the shared pool
        ("" under the ``none`` policy)."""
        if self.policy != "static":
            return ""
        own = self.assignments.get(pod.uid, {}).get(container.name)
        return format_cpuset(own if own is not None else self.default_cpuset)

    def remove_container(self, pod_uid: str, name: str) -> None:
        """Release one container's CPUs (those no sibling still holds). Idempotent."""
        containers = self.assignments.get(pod_uid)
        if containers is None or name not in containers:
            return
        release = containers.pop(name)
        for other in containers.values():
            release -= other
        if not containers:
            del self.assignments[pod_uid]
            self._reuse.pop(pod_uid, None)
        self.default_cpuset |= release
        self._store()

    def remove_pod(self, pod_uid: str) -> None:
        """Release every CPU the pod holds. Idempotent."""
        for name in list(self.assignments.get(pod_uid, {})):
            self.remove_container(pod_uid, name)
        self._reuse.pop(pod_uid, None)
