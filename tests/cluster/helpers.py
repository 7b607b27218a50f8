"""Helpers for the cluster tests: pod objects and bounded waits."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from kubelet_kit.testing import FakeClock


def pod_object(
    name: str,
    node: str = "node-1",
    *,
    namespace: str = "default",
    command: str = "sleep infinity",
    restart: str = "Always",
    grace: int = 30,
    **meta: Any,
) -> dict[str, Any]:
    """A pod as a user would create it, already bound to ``node``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, **meta},
        "spec": {
            "nodeName": node,
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": grace,
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", command]}],
        },
    }


async def eventually(
    predicate: Callable[[], bool | Awaitable[bool]],
    *,
    clock: FakeClock | None = None,
    step: float = 0.5,
    timeout: float = 30.0,
    what: str = "condition",
) -> None:
    """Wait until ``predicate()`` holds, letting real I/O with the stand-in proceed
    and, with a FakeClock, agent time pass ``step`` seconds at a time. Bounded by
    ``timeout`` real seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout:g}s")
        if clock is not None:
            await clock.run_for(step)
        # Real time for the loopback HTTP exchanges to complete.
        await asyncio.sleep(0.005)
