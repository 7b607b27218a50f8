"""A runtime call that makes something runs to its end when its sync is cancelled.

``_uninterrupted`` is the pod sync's shield around RunPodSandbox, CreateContainer
and StartContainer (see ``tests/test_kubelet.py`` for the pod-level rule); these
tests pin its asyncio behaviour: the call's own futures are never cancelled, the
cancellation is delivered once the call has ended, and a call that answers at
once costs no turn of the event loop.
"""

from __future__ import annotations

import asyncio

import pytest

from kubelet_kit.podsync._start import _uninterrupted


async def test_the_result_of_a_call_that_waits_is_returned() -> None:
    async def call() -> str:
        await asyncio.sleep(0.01)
        await asyncio.sleep(0)  # a bare turn of the loop as well
        return "made"

    assert await _uninterrupted(call()) == "made"


async def test_a_call_answering_at_once_takes_no_turn_of_the_loop() -> None:
    async def call() -> int:
        return 7

    other_ran = False

    def other() -> None:
        nonlocal other_ran
        other_ran = True

    asyncio.get_running_loop().call_soon(other)
    assert await _uninterrupted(call()) == 7
    # Nothing else ran meanwhile: the call did not go through a task of its own.
    assert not other_ran


async def test_a_cancelled_caller_lets_the_call_end_then_is_cancelled() -> None:
    gate: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    steps: list[str] = []

    async def call() -> str:
        steps.append("sent")
        value = await gate  # the runtime working
        steps.append("landed")
        return value

    async def sync() -> None:
        await _uninterrupted(call())
        steps.append("after")  # never: nothing else is started

    task = asyncio.create_task(sync())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()  # a second request changes nothing
    await asyncio.sleep(0)
    assert not gate.cancelled()
    assert not task.done()
    gate.set_result("container")
    with pytest.raises(asyncio.CancelledError):
        await task
    assert steps == ["sent", "landed"]


async def test_a_failure_after_the_cancellation_is_the_cancellation() -> None:
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def call() -> None:
        await gate
        raise RuntimeError("the runtime failed")

    async def sync() -> None:
        await _uninterrupted(call())

    task = asyncio.create_task(sync())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)
    gate.set_result(None)
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_failure_without_cancellation_is_raised() -> None:
    async def call() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("the runtime failed")

    with pytest.raises(RuntimeError, match="the runtime failed"):
        await _uninterrupted(call())


async def test_a_cancellation_while_the_call_takes_a_bare_turn_is_kept() -> None:
    finished: list[str] = []

    async def call() -> str:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        finished.append("call")
        return "done"

    landed: list[str] = []

    async def sync() -> None:
        landed.append(await _uninterrupted(call()))

    task = asyncio.create_task(sync())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished == ["call"]  # the call ran to its end
    assert landed == []  # its value is not used: the sync was cancelled
