"""Fuzz a RUNNING agent: hostile files dropped into its static-pod directory.

The corpus is the seeded one of tests/manifest_fuzz.py. Its cases are written
into the directory of a running agent in batches (``case-NNNNN.yaml``, each batch
replacing the one before), and after each batch, once the agent has read it:

* the agent still runs (its task is not done, nothing raised),
* a sentinel pod that ran before the first batch still runs with the same
  container (never restarted), and
* every file is either running or reported by name (a file the loader rejects
  is never running, so each rejected case is reported), the file source never
  failed, and nothing was logged with a traceback.

Valid pods among the cases run (on the fake runtime) and are stopped once their
file is gone.

``KUBELET_KIT_FUZZ_AGENT_CASES`` sets the number of cases of the in-process test
(default 1000), ``KUBELET_KIT_FUZZ_SEED`` the corpus (as in test_manifest_fuzz.py).
The process-level test runs ``kubelet-kit run`` on the host-process runtime and
drops the crash regressions (tests/test_manifest_crashes.py) and
``KUBELET_KIT_FUZZ_PROCESS_CASES`` (default 100) rejected fuzz cases.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hostproc import start_agent, stop_host_pods
from manifest_fuzz import case, corpus

from kubelet_kit.agent import Kubelet
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.api.loading import read_manifest_text, read_manifests
from kubelet_kit.clock import RealClock
from kubelet_kit.config import FileSource
from kubelet_kit.container import ContainerState, labels
from kubelet_kit.testing import FakeRuntime
from kubelet_kit.testing.env import stub_parts
from kubelet_kit.volume.reconciler import ReconcilingVolumeManager

CASES = int(os.environ.get("KUBELET_KIT_FUZZ_AGENT_CASES", "1000"))
PROCESS_CASES = int(os.environ.get("KUBELET_KIT_FUZZ_PROCESS_CASES", "100"))
SEED = int(os.environ.get("KUBELET_KIT_FUZZ_SEED", "20"))
BATCH = 200
NODE = "fuzz-node"
#: Seconds the agent may take to read a batch, or to stop a batch's pods.
SYNC_TIMEOUT = 120.0

SENTINEL = """\
apiVersion: v1
kind: Pod
metadata: {name: sentinel, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: busybox, command: [sleep, "3600"]}
"""
SENTINEL_NAME = f"sentinel-{NODE}"

_HEAD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"


def _pod(container_extra: str = "", tail: str = "") -> str:
    return (
        f"{_HEAD}spec:\n  containers:\n  - name: c\n    image: busybox\n"
        f"    command: [sleep, '3600']\n{container_extra}{tail}"
    )


#: One manifest per crash the loader's fuzzer found (tests/test_manifest_crashes.py):
#: each used to escape the loader and, in a static-pod directory, end the agent.
CRASH_REGRESSIONS: dict[str, str | bytes] = {
    "bad-int-tag.yaml": _pod(tail="  terminationGracePeriodSeconds: !!int 0xZZ\n"),
    "bad-int-tag-digits.yaml": _pod(tail="  terminationGracePeriodSeconds: !!int 12abc\n"),
    "bad-int-tag-binary.yaml": _pod(tail="  terminationGracePeriodSeconds: !!int 0b2\n"),
    "bad-int-tag-sexagesimal.yaml": _pod(tail="  terminationGracePeriodSeconds: !!int 1:x\n"),
    "empty-int-tag.yaml": _pod(tail="  terminationGracePeriodSeconds: !!int ''\n"),
    "bool-tag.yaml": _pod(tail="  hostNetwork: !!bool maybe\n"),
    "float-tag.yaml": _pod(tail="  terminationGracePeriodSeconds: !!float nope\n"),
    **{
        f"timestamp-{i}.yaml": (
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"
            f"  creationTimestamp: {value}\nspec: {{containers: [{{name: c, image: b}}]}}\n"
        )
        for i, value in enumerate(
            [
                "!!timestamp 2020-13-45",
                "2020-02-30",
                "!!timestamp 2020-01-01T25:00:00Z",
                "2001-12-14t21:59:43.10-99:99",
                "!!timestamp 0000-01-01",
            ]
        )
    },
    "long-int.yaml": _pod(tail=f"  terminationGracePeriodSeconds: {'9' * 5000}\n"),
    "long-int.json": (
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, '
        '"spec": {"containers": [{"name": "c", "image": "b", "ports": '
        '[{"containerPort": ' + "9" * 5000 + "}]}]}}"
    ),
    "huge-hex.yaml": _pod(tail=f"  terminationGracePeriodSeconds: 0x{'f' * 5000}\n"),
    "long-quantity.yaml": _pod(f'    resources: {{limits: {{cpu: "{"9" * 5000}"}}}}\n'),
    "huge-hex-unknown-field.yaml": _pod(tail=f"x: 0x{'f' * 5000}\n"),
    "oversized.yaml": _pod().encode() + b"#" * (10 * 1024 * 1024),
    # valid: a key JSON spells as a string (it used to break the uid's hash)
    "float-key.yaml": _pod(tail="x: {1.5: a, b: c, null: d, true: e}\n").replace(
        "name: p}", "name: float-key}"
    ),
}
#: The regressions that load: they run, the others are reported.
VALID_REGRESSIONS = {"float-key.yaml"}


def write_atomically(directory: Path, name: str, data: str | bytes) -> None:
    """Write ``directory/name`` whole at once (a hidden file renamed into place), so
    the agent never reads half a case."""
    raw = data.encode() if isinstance(data, str) else data
    hidden = directory / f".{name}.tmp"
    hidden.write_bytes(raw)
    os.replace(hidden, directory / name)


def named_files(problems: Iterable[str]) -> set[str]:
    """The file names problem lines start with (``<path>[<doc>]: ...``)."""
    return {Path(line.split(": ", 1)[0].split("[", 1)[0]).name for line in problems}


def rejected_by_loader(path: Path) -> bool:
    """Whether the loader refuses some document of ``path`` (then it must not run)."""
    results = read_manifests(path, node_name=NODE)
    return not results or any(r.pod is None for r in results)


class TracebackRecorder(logging.Handler):
    """Records every log record that carries an exception (a bug that was caught)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(self.format(record))


@pytest.fixture
def tracebacks() -> Iterator[TracebackRecorder]:
    handler = TracebackRecorder()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


class FuzzedAgent:
    """The agent (the real Kubelet, its file source and volume manager, the
    reference PLEG, prober and pod workers) over a FakeRuntime on real time."""

    def __init__(self, tmp: Path, tracebacks: TracebackRecorder) -> None:
        self.manifests = tmp / "manifests"
        self.manifests.mkdir()
        self.problems: list[str] = []
        self.tracebacks = tracebacks
        clock = RealClock()
        self.runtime = FakeRuntime(clock)
        self.runtime.add_image("busybox")
        config = KubeletConfiguration(
            cgroups_per_qos=False,
            port=0,
            healthz_port=0,
            static_pod_path=str(self.manifests),
            file_check_frequency="0.05s",
        )
        root = tmp / "state"
        self.kubelet = Kubelet(
            config,
            **stub_parts(
                runtime=self.runtime,
                clock=clock,
                node_name=NODE,
                root_dir=root,
                pod_logs_dir=tmp / "logs",
                on_pod_problem=self.problems.append,
                # the real volume code, without mounts (a tmpfs would outlive the test)
                volume_manager=ReconcilingVolumeManager(
                    root, clock=clock, may_mount=False, allow_secrets_on_disk=True
                ),
            ),
        )
        (self.source,) = (s for s in self.kubelet.sources if isinstance(s, FileSource))
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.kubelet.run(), name="fuzzed-kubelet")

    async def stop(self) -> None:
        if self.task is not None and not self.task.done():
            self.kubelet.stop()
            await asyncio.wait_for(self.task, 60)

    def alive(self) -> str:
        """ "" while the agent runs, else how it ended."""
        assert self.task is not None
        if not self.task.done():
            return ""
        if self.task.cancelled():
            return "the agent's task was cancelled"
        exc = self.task.exception()
        return f"the agent ended: {exc!r}" if exc is not None else "the agent returned"

    def file_problems(self) -> tuple[str, ...]:
        return self.kubelet.pod_config.problems.get(self.source.name, ())

    def accounted(self) -> tuple[set[str], set[str]]:
        """(files whose pods the agent has, files it reports) as it stands now."""
        running = {Path(p.source).name for p in self.kubelet.pods() if p.source}
        return running, named_files(self.file_problems())

    async def containers(self, pod_name: str | None = None) -> list[Any]:
        return [
            c
            for c in await self.runtime.list_containers()
            if c.state is ContainerState.RUNNING
            and (pod_name is None or c.labels.get(labels.POD_NAME) == pod_name)
        ]

    def check(self, what: str) -> None:
        """Fail at once if the agent ended, its file source failed or a bug was
        caught and logged."""
        assert not (dead := self.alive()), f"{dead} ({what})"
        failed = [p for p in self.problems if p.startswith("pod source ")]
        assert not failed, f"the file source failed ({what}): {failed}"
        assert not self.tracebacks.records, f"({what}): {self.tracebacks.records[0]}"

    async def wait(self, predicate: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + SYNC_TIMEOUT
        while not predicate():
            self.check(f"waiting for {what}")
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.02)

    async def wait_synced(self, files: set[str], what: str) -> None:
        """Until every file of the directory is running or reported, and no other."""

        def synced() -> bool:
            running, reported = self.accounted()
            return running | reported == files

        await self.wait(synced, what)

    async def wait_stopped_but_sentinel(self, what: str) -> None:
        deadline = time.monotonic() + SYNC_TIMEOUT
        while others := [
            c for c in await self.containers() if c.labels.get(labels.POD_NAME) != SENTINEL_NAME
        ]:
            self.check(f"waiting for {what}")
            assert time.monotonic() < deadline, (
                f"timed out waiting for {what}: still running "
                f"{sorted({c.labels.get(labels.POD_NAME) for c in others})}"
            )
            await asyncio.sleep(0.05)


async def run_cases(agent: FuzzedAgent, cases: Iterable[tuple[str, str | bytes]]) -> dict[str, Any]:
    """Feed ``cases`` (file name, content) to the running agent in batches; returns
    figures. Asserts the agent's invariants after each batch."""
    write_atomically(agent.manifests, "sentinel.yaml", SENTINEL)
    agent.start()
    deadline = time.monotonic() + SYNC_TIMEOUT
    while not (sentinel := await agent.containers(SENTINEL_NAME)):
        agent.check("waiting for the sentinel")
        assert time.monotonic() < deadline, "the sentinel pod never ran"
        await asyncio.sleep(0.02)
    (sentinel_container,) = sentinel
    figures = {"cases": 0, "reported": 0, "ran": 0, "batches": 0}
    pending = iter(cases)  # made a batch at a time: the oversized cases are 10 MB each
    while batch := dict(itertools.islice(pending, BATCH)):
        label = f"batch {figures['batches']} ({min(batch)}..{max(batch)})"
        for name, data in batch.items():
            write_atomically(agent.manifests, name, data)
        files = {"sentinel.yaml", *batch}
        await agent.wait_synced(files, f"the agent to read {label}")
        # Synced: every file runs or is reported. A file runs only if the loader
        # takes all of it, so each file the loader rejects is reported by name.
        running, reported = agent.accounted()
        wrongly = [
            n
            for n in running - {"sentinel.yaml"}
            if await asyncio.to_thread(rejected_by_loader, agent.manifests / n)
        ]
        assert not wrongly, f"{label}: files the loader rejects run: {wrongly}"
        agent.check(label)
        figures["reported"] += len(reported)
        figures["ran"] += len(running & set(batch))
        for name in batch:
            (agent.manifests / name).unlink()
        await agent.wait_synced({"sentinel.yaml"}, f"the agent to drop {label}")
        await agent.wait_stopped_but_sentinel(f"the pods of {label} to stop")
        agent.check(label)
        now = [c.id for c in await agent.containers(SENTINEL_NAME)]
        assert now == [sentinel_container.id], (
            f"{label}: the sentinel pod was restarted or stopped: {now}"
        )
        figures["cases"] += len(batch)
        figures["batches"] += 1
    return figures


async def test_a_running_agent_survives_the_fuzz_corpus_in_its_pod_directory(
    tmp_path: Path, tracebacks: TracebackRecorder
) -> None:
    agent = FuzzedAgent(tmp_path, tracebacks)
    started = time.monotonic()
    try:
        figures = await run_cases(
            agent, ((f"case-{i:05d}.yaml", data) for i, (_, data) in enumerate(corpus(SEED, CASES)))
        )
    finally:
        await agent.stop()
    figures["seconds"] = round(time.monotonic() - started, 1)
    print(f"fuzzed agent: {figures}")
    assert figures["cases"] == CASES
    assert figures["reported"] > 0 and figures["ran"] > 0  # the corpus has both


async def test_the_crash_regressions_never_stop_a_running_agent(
    tmp_path: Path, tracebacks: TracebackRecorder
) -> None:
    agent = FuzzedAgent(tmp_path, tracebacks)
    try:
        figures = await run_cases(agent, list(CRASH_REGRESSIONS.items()))
    finally:
        await agent.stop()
    assert figures["reported"] == len(CRASH_REGRESSIONS) - len(VALID_REGRESSIONS)
    assert figures["ran"] == len(VALID_REGRESSIONS)


# -- the agent as a process -----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return int(resp.status), resp.read().decode()


def sentinel_container_id(read_only_port: int) -> str:
    """The sentinel's running container, from the read-only port's /pods ("" if none)."""
    _, body = get(f"http://127.0.0.1:{read_only_port}/pods")
    for item in json.loads(body)["items"]:
        if item["metadata"]["name"] == SENTINEL_NAME:
            for status in (item.get("status") or {}).get("containerStatuses") or []:
                if "running" in (status.get("state") or {}):
                    return f"{status['containerID']}#{status['restartCount']}"
    return ""


def rejected_fuzz_cases(count: int) -> Iterator[tuple[str, bytes]]:
    """The first ``count`` cases of the corpus the loader rejects whole (the valid
    ones would run real processes, as root with tmpfs mounts, on this machine)."""
    found = 0
    index = 0
    while found < count:
        name, data = case(SEED, index)
        index += 1
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            results = read_manifest_text(text, source=name, node_name=NODE)
            if results and any(r.pod is not None for r in results):
                continue
        found += 1
        yield f"case-{index - 1:05d}.yaml", data


def test_kubelet_kit_run_survives_hostile_files_in_its_pod_directory(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    write_atomically(manifests, "sentinel.yaml", SENTINEL)
    read_only, healthz = free_port(), free_port()
    root = tmp_path / "state"
    proc = None
    log: list[str] = []
    try:
        proc, log = start_agent(
            tmp_path,
            NODE,
            "--address",
            "127.0.0.1",
            "--port",
            "0",
            "--read-only-port",
            str(read_only),
            "--healthz-port",
            str(healthz),
            "--cgroups-per-qos=false",  # the host's cgroups stay as they are
            until=f"pod default/{SENTINEL_NAME}: Running",
        )
        stderr = proc.stderr
        assert stderr is not None
        # The agent logs a line per bad file: read them, or its pipe fills and it blocks.
        reader = threading.Thread(target=lambda: log.extend(iter(stderr.readline, "")), daemon=True)
        reader.start()
        assert get(f"http://127.0.0.1:{healthz}/healthz") == (200, "ok")
        deadline = time.monotonic() + 30
        while not (before := sentinel_container_id(read_only)):
            assert time.monotonic() < deadline, "the sentinel never showed as running"
            time.sleep(0.1)
        cases: dict[str, str | bytes] = {
            **CRASH_REGRESSIONS,
            **dict(rejected_fuzz_cases(PROCESS_CASES)),
        }
        for name, data in cases.items():
            write_atomically(manifests, name, data)
        expected_reports = set(cases) - VALID_REGRESSIONS
        deadline = time.monotonic() + SYNC_TIMEOUT
        while missing := expected_reports - named_files(
            line.split("pod source file: ", 1)[1]
            for line in list(log)
            if "pod source file: " in line
        ):
            assert proc.poll() is None, "the agent exited:\n" + "".join(log)
            assert "Traceback" not in "".join(log), "".join(log)
            assert time.monotonic() < deadline, (
                f"not reported: {sorted(missing)[:10]} ...\n" + "".join(log[-50:])
            )
            time.sleep(0.1)
        time.sleep(1.5)  # a few more checks of the directory and syncs
        assert proc.poll() is None, "the agent exited:\n" + "".join(log)
        assert get(f"http://127.0.0.1:{healthz}/healthz") == (200, "ok")
        assert sentinel_container_id(read_only) == before, "the sentinel was restarted"
        _, pods = get(f"http://127.0.0.1:{read_only}/pods")
        assert '"float-key-' in pods  # the valid regression runs beside it
        assert "Traceback" not in "".join(log), "".join(log)
        assert "internal error" not in "".join(log), "".join(log)
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        asyncio.run(stop_host_pods(root / "runtime"))
