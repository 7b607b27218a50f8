"""Pod phase: upstream's TestPodPhase* tables (kubelet_pods_test.go) as data."""

from __future__ import annotations

import pytest

from kubelet_kit.api import (
    Container,
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStateWaiting,
    ContainerStatus,
    ObjectMeta,
    Pod,
    PodSpec,
)
from kubelet_kit.status.phase import pod_phase


def _status(name: str, kind: str) -> ContainerStatus:
    """Build a status the way upstream's test helpers do (waitingState, ...)."""
    waiting = ContainerState(waiting=ContainerStateWaiting())
    if kind == "waiting":
        return ContainerStatus(name=name, state=waiting)
    if kind == "waitingLastOK":
        return ContainerStatus(
            name=name,
            state=waiting,
            last_state=ContainerState(terminated=ContainerStateTerminated(exit_code=0)),
        )
    if kind == "waitingLastFail":
        return ContainerStatus(
            name=name,
            state=waiting,
            last_state=ContainerState(terminated=ContainerStateTerminated(exit_code=-1)),
        )
    if kind == "running":
        return ContainerStatus(name=name, state=ContainerState(running=ContainerStateRunning()))
    if kind == "started":
        return ContainerStatus(
            name=name, state=ContainerState(running=ContainerStateRunning()), started=True
        )
    if kind in ("stopped", "succeeded"):
        return ContainerStatus(
            name=name, state=ContainerState(terminated=ContainerStateTerminated(exit_code=0))
        )
    if kind == "failed":
        return ContainerStatus(
            name=name, state=ContainerState(terminated=ContainerStateTerminated(exit_code=-1))
        )
    raise AssertionError(kind)


def _pod(policy: str, init: str = "", static: bool = False) -> Pod:
    """init: "" none, "X" one regular init, "X*" one sidecar, "XY*" both."""
    inits = []
    if "X" in init:
        sidecar = "Always" if init == "X*" else None
        inits.append(Container(name="containerX", restart_policy=sidecar))
    if "Y*" in init:
        inits.append(Container(name="containerY", restart_policy="Always"))
    regular = (
        (Container(name="containerA"),)
        if "Y*" in init
        else (Container(name="containerA"), Container(name="containerB"))
    )
    annotations = {"kubernetes.io/config.source": "file"} if static else {}
    return Pod(
        metadata=ObjectMeta(name="p", annotations=annotations),
        spec=PodSpec(restart_policy=policy, init_containers=tuple(inits), containers=regular),
    )


# (test name, restartPolicy, init containers, init statuses, regular statuses,
#  podIsTerminal, expected phase). Names are upstream's.
CASES = [
    # TestPodPhaseWithRestartAlways
    ("waiting", "Always", "", {}, {}, False, "Pending"),
    ("all running", "Always", "", {}, {"A": "running", "B": "running"}, False, "Running"),
    (
        "all stopped with restart always",
        "Always",
        "",
        {},
        {"A": "stopped", "B": "stopped"},
        False,
        "Running",
    ),
    (
        "all succeeded with restart always, but the pod is terminal",
        "Always",
        "",
        {},
        {"A": "succeeded", "B": "succeeded"},
        True,
        "Succeeded",
    ),
    (
        "all stopped with restart always, but the pod is terminal",
        "Always",
        "",
        {},
        {"A": "succeeded", "B": "failed"},
        True,
        "Failed",
    ),
    (
        "mixed state #1 with restart always",
        "Always",
        "",
        {},
        {"A": "running", "B": "stopped"},
        False,
        "Running",
    ),
    ("mixed state #2 with restart always", "Always", "", {}, {"A": "running"}, False, "Pending"),
    (
        "mixed state #3 with restart always",
        "Always",
        "",
        {},
        {"A": "running", "B": "waiting"},
        False,
        "Pending",
    ),
    (
        "backoff crashloop container with restart always",
        "Always",
        "",
        {},
        {"A": "running", "B": "waitingLastOK"},
        False,
        "Running",
    ),
    # TestPodPhaseWithRestartAlwaysInitContainers
    ("always/init: empty, waiting", "Always", "X", {}, {}, False, "Pending"),
    ("always/init: init container running", "Always", "X", {"X": "running"}, {}, False, "Pending"),
    (
        "always/init: init container terminated non-zero",
        "Always",
        "X",
        {"X": "failed"},
        {},
        False,
        "Pending",
    ),
    (
        "always/init: init container waiting, terminated zero",
        "Always",
        "X",
        {"X": "waitingLastOK"},
        {},
        False,
        "Pending",
    ),
    (
        "always/init: init container waiting, terminated non-zero",
        "Always",
        "X",
        {"X": "waitingLastFail"},
        {},
        False,
        "Pending",
    ),
    (
        "always/init: init container waiting, not terminated",
        "Always",
        "X",
        {"X": "waiting"},
        {},
        False,
        "Pending",
    ),
    (
        "always/init: init container succeeded",
        "Always",
        "X",
        {"X": "succeeded"},
        {"A": "running", "B": "running"},
        False,
        "Running",
    ),
    # TestPodPhaseWithRestartAlwaysRestartableInitContainers
    ("always/sidecar: empty, waiting", "Always", "X*", {}, {}, False, "Pending"),
    (
        "always/sidecar: restartable init container running",
        "Always",
        "X*",
        {"X": "running"},
        {},
        False,
        "Pending",
    ),
    (
        "always/sidecar: restartable init container stopped",
        "Always",
        "X*",
        {"X": "stopped"},
        {},
        False,
        "Pending",
    ),
    (
        "always/sidecar: restartable init container waiting, terminated zero",
        "Always",
        "X*",
        {"X": "waitingLastOK"},
        {},
        False,
        "Pending",
    ),
    (
        "always/sidecar: restartable init container waiting, terminated non-zero",
        "Always",
        "X*",
        {"X": "waitingLastFail"},
        {},
        False,
        "Pending",
    ),
    (
        "always/sidecar: restartable init container waiting, not terminated",
        "Always",
        "X*",
        {"X": "waiting"},
        {},
        False,
        "Pending",
    ),
    (
        "always/sidecar: restartable init container started, 1/2 regular container running",
        "Always",
        "X*",
        {"X": "started"},
        {"A": "running"},
        False,
        "Pending",
    ),
    (
        "always/sidecar: restartable init container started, all regular containers running",
        "Always",
        "X*",
        {"X": "started"},
        {"A": "running", "B": "running"},
        False,
        "Running",
    ),
    (
        "always/sidecar: restartable init container running, all regular containers running",
        "Always",
        "X*",
        {"X": "running"},
        {"A": "running", "B": "running"},
        False,
        "Running",
    ),
    (
        "always/sidecar: restartable init container stopped, all regular containers running",
        "Always",
        "X*",
        {"X": "stopped"},
        {"A": "running", "B": "running"},
        False,
        "Running",
    ),
    (
        "always/sidecar: backoff crashloop restartable init container, all regular containers "
        "running",
        "Always",
        "X*",
        {"X": "waitingLastOK"},
        {"A": "running", "B": "running"},
        False,
        "Running",
    ),
    (
        "always/sidecar: all regular containers succeeded and restartable init container failed "
        "with restart always, but the pod is terminal",
        "Always",
        "X*",
        {"X": "failed"},
        {"A": "succeeded", "B": "succeeded"},
        True,
        "Succeeded",
    ),
    (
        "always/sidecar: all regular containers succeeded and restartable init container "
        "succeeded with restart always, but the pod is terminal",
        "Always",
        "X*",
        {"X": "succeeded"},
        {"A": "succeeded", "B": "succeeded"},
        True,
        "Succeeded",
    ),
    # TestPodPhaseWithRestartAlwaysAndPodHasRun
    (
        "regular init containers, restartable init container and regular container are all running",
        "Always",
        "XY*",
        {"X": "running", "Y": "running"},
        {"A": "running"},
        False,
        "Pending",
    ),
    (
        "regular containers is stopped, restartable init container and regular int container "
        "are both running",
        "Always",
        "XY*",
        {"X": "running", "Y": "running"},
        {"A": "stopped"},
        False,
        "Pending",
    ),
    (
        "regular init container is succeeded, restartable init container is running, regular "
        "containers is stopped",
        "Always",
        "XY*",
        {"X": "succeeded", "Y": "running"},
        {"A": "stopped"},
        False,
        "Running",
    ),
    (
        "regular init container is succeeded, restartable init container and regular "
        "containers are both running",
        "Always",
        "XY*",
        {"X": "succeeded", "Y": "running"},
        {"A": "running"},
        False,
        "Running",
    ),
    # TestPodPhaseWithRestartNever
    ("never: waiting", "Never", "", {}, {}, False, "Pending"),
    (
        "all running with restart never",
        "Never",
        "",
        {},
        {"A": "running", "B": "running"},
        False,
        "Running",
    ),
    (
        "all succeeded with restart never",
        "Never",
        "",
        {},
        {"A": "succeeded", "B": "succeeded"},
        False,
        "Succeeded",
    ),
    (
        "all failed with restart never",
        "Never",
        "",
        {},
        {"A": "failed", "B": "failed"},
        False,
        "Failed",
    ),
    (
        "mixed state #1 with restart never",
        "Never",
        "",
        {},
        {"A": "running", "B": "succeeded"},
        False,
        "Running",
    ),
    ("mixed state #2 with restart never", "Never", "", {}, {"A": "running"}, False, "Pending"),
    (
        "mixed state #3 with restart never",
        "Never",
        "",
        {},
        {"A": "running", "B": "waiting"},
        False,
        "Pending",
    ),
    # TestPodPhaseWithRestartNeverInitContainers
    ("never/init: empty, waiting", "Never", "X", {}, {}, False, "Pending"),
    ("never/init: init container running", "Never", "X", {"X": "running"}, {}, False, "Pending"),
    (
        "never/init: init container terminated non-zero",
        "Never",
        "X",
        {"X": "failed"},
        {},
        False,
        "Failed",
    ),
    (
        "never/init: init container waiting, terminated zero",
        "Never",
        "X",
        {"X": "waitingLastOK"},
        {},
        False,
        "Pending",
    ),
    (
        "never/init: init container waiting, terminated non-zero",
        "Never",
        "X",
        {"X": "waitingLastFail"},
        {},
        False,
        "Failed",
    ),
    (
        "never/init: init container waiting, not terminated",
        "Never",
        "X",
        {"X": "waiting"},
        {},
        False,
        "Pending",
    ),
    (
        "never/init: init container succeeded",
        "Never",
        "X",
        {"X": "succeeded"},
        {"A": "running", "B": "running"},
        False,
        "Running",
    ),
    # TestPodPhaseWithRestartNeverRestartableInitContainers
    ("never/sidecar: empty, waiting", "Never", "X*", {}, {}, False, "Pending"),
    (
        "never/sidecar: restartable init container running",
        "Never",
        "X*",
        {"X": "running"},
        {},
        False,
        "Pending",
    ),
    (
        "never/sidecar: restartable init container stopped",
        "Never",
        "X*",
        {"X": "stopped"},
        {},
        False,
        "Pending",
    ),
    (
        "never/sidecar: restartable init container waiting, terminated zero",
        "Never",
        "X*",
        {"X": "waitingLastOK"},
        {},
        False,
        "Pending",
    ),
    (
        "never/sidecar: restartable init container waiting, terminated non-zero",
        "Never",
        "X*",
        {"X": "waitingLastFail"},
        {},
        False,
        "Pending",
    ),
    (
        "never/sidecar: restartable init container waiting, not terminated",
        "Never",
        "X*",
        {"X": "waiting"},
        {},
        False,
        "Pending",
    ),
    (
        "never/sidecar: restartable init container started, one main container running",
        "Never",
        "X*",
        {"X": "started"},
        {"A": "running"},
        False,
        "Pending",
    ),
    (
        "never/sidecar: restartable init container started, main containers succeeded",
        "Never",
        "X*",
        {"X": "started"},
        {"A": "succeeded", "B": "succeeded"},
        False,
        "Running",
    ),
    (
        "never/sidecar: restartable init container running, main containers succeeded",
        "Never",
        "X*",
        {"X": "running"},
        {"A": "succeeded", "B": "succeeded"},
        False,
        "Running",
    ),
    (
        "never/sidecar: all containers succeeded",
        "Never",
        "X*",
        {"X": "succeeded"},
        {"A": "succeeded", "B": "succeeded"},
        False,
        "Succeeded",
    ),
    (
        "never/sidecar: restartable init container terminated non-zero, main containers succeeded",
        "Never",
        "X*",
        {"X": "failed"},
        {"A": "succeeded", "B": "succeeded"},
        False,
        "Succeeded",
    ),
    (
        "never/sidecar: backoff crashloop restartable init container, main containers succeeded",
        "Never",
        "X*",
        {"X": "waitingLastOK"},
        {"A": "succeeded", "B": "succeeded"},
        False,
        "Succeeded",
    ),
    (
        "never/sidecar: backoff crashloop with non-zero restartable init container, main "
        "containers succeeded",
        "Never",
        "X*",
        {"X": "waitingLastFail"},
        {"A": "succeeded", "B": "succeeded"},
        False,
        "Succeeded",
    ),
    # TestPodPhaseWithRestartOnFailure
    ("onfailure: waiting", "OnFailure", "", {}, {}, False, "Pending"),
    (
        "all running with restart onfailure",
        "OnFailure",
        "",
        {},
        {"A": "running", "B": "running"},
        False,
        "Running",
    ),
    (
        "all succeeded with restart onfailure",
        "OnFailure",
        "",
        {},
        {"A": "succeeded", "B": "succeeded"},
        False,
        "Succeeded",
    ),
    (
        "all failed with restart onfailure",
        "OnFailure",
        "",
        {},
        {"A": "failed", "B": "failed"},
        False,
        "Running",
    ),
    (
        "mixed state #1 with restart onfailure",
        "OnFailure",
        "",
        {},
        {"A": "running", "B": "succeeded"},
        False,
        "Running",
    ),
    (
        "mixed state #2 with restart onfailure",
        "OnFailure",
        "",
        {},
        {"A": "running"},
        False,
        "Pending",
    ),
    (
        "mixed state #3 with restart onfailure",
        "OnFailure",
        "",
        {},
        {"A": "running", "B": "waiting"},
        False,
        "Pending",
    ),
    (
        "backoff crashloop container with restart onfailure",
        "OnFailure",
        "",
        {},
        {"A": "running", "B": "waitingLastOK"},
        False,
        "Running",
    ),
]


@pytest.mark.parametrize(
    ("policy", "init", "init_states", "states", "terminal", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_pod_phase_upstream_table(
    policy: str,
    init: str,
    init_states: dict[str, str],
    states: dict[str, str],
    terminal: bool,
    expected: str,
) -> None:
    pod = _pod(policy, init)
    regular = [_status(f"container{n}", k) for n, k in states.items()]
    inits = [_status(f"container{n}", k) for n, k in init_states.items()]
    assert pod_phase(pod, regular, inits, pod_is_terminal=terminal) == expected


def test_static_pod_is_not_made_terminal_by_pod_is_terminal() -> None:
    # Upstream (TODO #116484) leaves static pods to the restart policy.
    pod = _pod("Always", static=True)
    statuses = [_status("containerA", "succeeded"), _status("containerB", "succeeded")]
    assert pod_phase(pod, statuses, pod_is_terminal=True) == "Running"
    assert pod_phase(_pod("Always"), statuses, pod_is_terminal=True) == "Succeeded"


def test_sidecar_restarting_after_initialisation_keeps_pod_running() -> None:
    # A sidecar that is running but not started again does not send an
    # initialised pod back to Pending.
    pod = _pod("Always", "X*")
    regular = [_status("containerA", "running"), _status("containerB", "running")]
    inits = [_status("containerX", "running")]
    assert pod_phase(pod, regular, inits, pod_has_initialized=True) == "Running"
    assert pod_phase(pod, regular, inits, pod_has_initialized=False) == "Pending"
