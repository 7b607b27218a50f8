"""Termination messages: what an exited container left for its status.

The kubelet gives every container with a ``terminationMessagePath`` an empty,
world-writable file of the pod's directory mounted at that path (see
:mod:`kubelet_kit.podsync.podfiles`). Once the container has exited, the
kubelet reads the file back and puts what it holds into the container's status
message (``getPodContainerStatuses`` with ``getTerminationMessage`` in
``kuberuntime_container.go``):

* the file is the host path of the container's mount whose container path is
  the ``terminationMessagePath`` (as the runtime reports the mounts); at most
  its last 4096 bytes are read;
* with ``terminationMessagePolicy: FallbackToLogsOnError``, a container that
  failed (exit code not 0, and not ``ContainerCannotRun``: such a container
  never ran, so it has no logs) and left the file empty or missing gets the
  tail of its log instead: its last 80 log lines, at most their last 2048 bytes;
* a file that exists but cannot be read gives the message ``Error on reading
  termination log <path>: <error>``;
* the message is appended to the runtime's own message, after ``": "`` when
  that is not empty.

The path and policy come from the container's annotations
(``io.kubernetes.container.terminationMessagePath`` and ``...Policy``), so a
container made by another agent is read the same way. Across a whole pod the
status manager then cuts each message to an even share of 12 KiB
(:data:`MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH`).

Reads are of small local files and run inline.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Final

import attrs

from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import ContainerState, ContainerStatus, Mount
from kubelet_kit.container.logs import join_output, parse_line, tail_start
from kubelet_kit.errors import go_path_error

__all__ = [
    "CONTAINER_CANNOT_RUN",
    "FALLBACK_TO_LOGS_ON_ERROR",
    "MAX_CONTAINER_TERMINATION_MESSAGE_LENGTH",
    "MAX_CONTAINER_TERMINATION_MESSAGE_LOG_LENGTH",
    "MAX_CONTAINER_TERMINATION_MESSAGE_LOG_LINES",
    "MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH",
    "log_tail_message",
    "read_at_most",
    "termination_message",
    "termination_message_from_file",
    "with_termination_message",
]

#: The most bytes of termination messages one pod's statuses carry, shared evenly
#: between its containers (the kubelet's MaxPodTerminationMessageLogLength).
MAX_POD_TERMINATION_MESSAGE_LOG_LENGTH: Final = 12 * 1024
#: The most bytes read from one termination-message file (its last ones).
MAX_CONTAINER_TERMINATION_MESSAGE_LENGTH: Final = 4 * 1024
#: The most bytes of log text a message falls back to (the last ones).
MAX_CONTAINER_TERMINATION_MESSAGE_LOG_LENGTH: Final = 2 * 1024
#: The most log lines a message falls back to.
MAX_CONTAINER_TERMINATION_MESSAGE_LOG_LINES: Final = 80

#: The terminationMessagePolicy that falls back to the log on failure.
FALLBACK_TO_LOGS_ON_ERROR: Final = "FallbackToLogsOnError"
#: The exit reason of a container that could not even be started (no logs).
CONTAINER_CANNOT_RUN: Final = "ContainerCannotRun"


def read_at_most(path: str, limit: int) -> bytes:
    """The last ``limit`` bytes of the file at ``path`` (all of a shorter one), as
    the kubelet's ``tail.ReadAtMost``.

    Raises:
        OSError: the file cannot be opened or read.
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            f.seek(size - limit)
        return f.read()


def termination_message_from_file(
    mounts: Sequence[Mount], message_path: str, fallback_to_logs: bool
) -> tuple[str, bool]:
    """Read the termination-message file behind ``message_path`` (``getTerminationMessage``).

    Args:
        mounts: The container's mounts, as the runtime reports them.
        message_path: The container's terminationMessagePath.
        fallback_to_logs: Whether the log may stand in for an empty message.

    Returns:
        The message read (or the read error's message), and whether the log
        should be read instead: only with ``fallback_to_logs``, when there is no
        path, no such mount, no such file, or an empty one.
    """
    if not message_path:
        return "", fallback_to_logs
    for mount in mounts:
        if mount.container_path != message_path:
            continue
        path = mount.host_path
        try:
            data = read_at_most(path, MAX_CONTAINER_TERMINATION_MESSAGE_LENGTH)
        except FileNotFoundError:
            return "", fallback_to_logs
        except OSError as exc:
            # Go opens a directory and fails reading it; Python fails the open.
            op = "read" if isinstance(exc, IsADirectoryError) else "open"
            return f"Error on reading termination log {path}: {go_path_error(op, path, exc)}", False
        return data.decode("utf-8", "replace"), fallback_to_logs and not data
    return "", fallback_to_logs


def log_tail_message(
    log_path: str,
    *,
    lines: int = MAX_CONTAINER_TERMINATION_MESSAGE_LOG_LINES,
    limit: int = MAX_CONTAINER_TERMINATION_MESSAGE_LOG_LENGTH,
) -> str:
    """The end of a container's CRI log, as a termination message
    (``readLastStringFromContainerLogs``).

    The container's output (both streams, in order) of the log's last ``lines``
    lines, of which the last ``limit`` bytes are kept. Lines that do not parse
    are skipped, as the kubelet's log reader skips them.

    Returns:
        The text, or ``Error on reading termination message from logs: <error>``
        when the log cannot be read.
    """
    try:
        # The kubelet resolves symlinks first; an empty path stays empty, as in Go.
        real = os.path.realpath(log_path, strict=True) if log_path else log_path
    except OSError as exc:
        return (
            "Error on reading termination message from logs: failed to try resolving "
            f"symlinks in path {json.dumps(log_path)}: {go_path_error('lstat', log_path, exc)}"
        )
    try:
        with open(real, "rb") as f:
            f.seek(tail_start(f, lines))
            raw = f.read()
    except OSError as exc:
        return (
            "Error on reading termination message from logs: failed to open log file "
            f"{json.dumps(real)}: {go_path_error('open', real, exc)}"
        )
    records = []
    for line in raw.splitlines(keepends=True):
        try:
            records.append(parse_line(line))
        except ValueError:
            continue
    return join_output(records)[-limit:].decode("utf-8", "replace")


def termination_message(status: ContainerStatus) -> str:
    """The termination message of an exited container; "" for one that has not
    exited or left none (see the module docstring)."""
    if status.state is not ContainerState.EXITED:
        return ""
    annotations = status.annotations
    policy = annotations.get(kl.CONTAINER_TERMINATION_MESSAGE_POLICY, "")
    fallback = (
        policy == FALLBACK_TO_LOGS_ON_ERROR
        and status.exit_code != 0
        and status.reason != CONTAINER_CANNOT_RUN
    )
    message, check_logs = termination_message_from_file(
        status.mounts, annotations.get(kl.CONTAINER_TERMINATION_MESSAGE_PATH, ""), fallback
    )
    if check_logs:
        message = log_tail_message(status.log_path)
    return message


def with_termination_message(status: ContainerStatus) -> ContainerStatus:
    """``status`` with its termination message appended to its message (after
    ``": "`` when the runtime gave one); the same object when there is none."""
    extra = termination_message(status)
    if not extra:
        return status
    joined = f"{status.message}: {extra}" if status.message else extra
    return attrs.evolve(status, message=joined)
