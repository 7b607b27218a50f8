"""The Status objects an exec or attach session ends with, on its error stream
(protocol ``v4.channel.k8s.io`` and later; older versions carry the message alone)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["exit_code_of", "status_exit", "status_failure", "status_success"]


def status_success() -> dict[str, Any]:
    """The command exited 0 (or the attach ended)."""
    return {"metadata": {}, "status": "Success"}


def status_exit(code: int, cmd: Sequence[str] = ()) -> dict[str, Any]:
    """The command ``cmd`` exited ``code`` (0 is :func:`status_success`); the
    message words it as containerd's streaming server does."""
    if code == 0:
        return status_success()
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: error executing command "
        f"[{' '.join(cmd)}], exit code {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def status_failure(message: str) -> dict[str, Any]:
    """The session failed for another reason (no such container, not running...)."""
    return {"metadata": {}, "status": "Failure", "message": message}


def exit_code_of(status: bytes | str | dict[str, Any]) -> int | None:
    """The exit code a Status reports: 0 for Success, the ExitCode cause for a
    non-zero exit, None for another failure (or text that is not a Status).

    Raises:
        RuntimeError: never; malformed input gives None.
    """
    if isinstance(status, bytes | str):
        try:
            data = json.loads(status) if status else {}
        except ValueError:
            return None
    else:
        data = status
    if not isinstance(data, dict):
        return None
    if data.get("status") == "Success":
        return 0
    if data.get("reason") == "NonZeroExitCode":
        for cause in (data.get("details") or {}).get("causes") or ():
            if cause.get("reason") == "ExitCode":
                try:
                    return int(cause.get("message", ""))
                except ValueError:
                    return None
    return None
