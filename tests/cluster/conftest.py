"""Fixtures for cluster mode: the API server stand-in and a real client on it.

Cluster mode needs the optional extra ``kubelet-kit[cluster]``; without the client
library these tests are not collected.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from typing import Any

import pytest

from .apiserver_standin import StandInAPIServer

if importlib.util.find_spec("kubernetes_asyncio") is None:
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture
async def standin() -> AsyncIterator[StandInAPIServer]:
    server = StandInAPIServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def api_client(standin: StandInAPIServer) -> AsyncIterator[Any]:
    from kubelet_kit.cluster import connect

    client = await connect(standin.kubeconfig())
    try:
        yield client
    finally:
        await client.close()
