"""The API client's request budget (``kubeAPIQPS``/``kubeAPIBurst``): client-go's
token bucket on the injected clock, taken once by every request the agent's
client sends."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kubelet_kit.agent import ClusterOptions, build_agent
from kubelet_kit.api.kubeletconfig import KubeletConfiguration
from kubelet_kit.cluster import ClusterNode
from kubelet_kit.cluster.client import client_like, connect, request_budget
from kubelet_kit.cluster.ratelimit import TokenBucket
from kubelet_kit.config.apiserver import APIServerSource
from kubelet_kit.errors import ConfigurationError
from kubelet_kit.kubelet import Kubelet
from kubelet_kit.node.nodestatus import NodeStatusProvider
from kubelet_kit.runner import configuration_from_args, register
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.env import stub_parts
from kubelet_kit.testing.fake_runtime import FakeRuntime

from .apiserver_standin import StandInAPIServer
from .helpers import eventually, pod_object


def within_budget(times: list[float], qps: float, burst: int) -> bool:
    """Whether every stretch of these (sorted) send times holds at most what a full
    bucket allows: ``burst`` at once plus ``qps`` a second."""
    return all(
        j - i + 1 <= burst + qps * (times[j] - times[i]) + 1e-9
        for i in range(len(times))
        for j in range(i, len(times))
    )


# -- the bucket ----------------------------------------------------------------------


async def test_the_burst_passes_at_once_then_requests_go_at_qps() -> None:
    # client-go's NewTokenBucketRateLimiter(qps, burst): a full bucket of `burst`
    # tokens, refilled at `qps` a second.
    clock = FakeClock()
    bucket = TokenBucket(100, 10, clock=clock)
    start = clock.monotonic()
    sent: list[float] = []

    async def request() -> None:
        await bucket.acquire()
        sent.append(clock.monotonic() - start)

    tasks = [asyncio.create_task(request()) for _ in range(110)]
    await clock.settle()
    assert len(sent) == 10  # the burst, without time passing
    await clock.run_for(0.5)
    assert len(sent) == 60
    await clock.run_for(0.5)
    assert len(sent) == 110  # 100 requests after the burst take one second
    await asyncio.gather(*tasks)
    assert sent[:10] == [0.0] * 10
    assert sent[10:] == pytest.approx([k / 100 for k in range(1, 101)])
    assert within_budget(sent, 100, 10)


async def test_an_idle_bucket_refills_to_its_burst_and_no_further() -> None:
    clock = FakeClock()
    bucket = TokenBucket(2, 3, clock=clock)
    for _ in range(3):
        assert bucket.reserve() == 0
    assert bucket.reserve() == pytest.approx(0.5)  # in debt: due in half a second
    await clock.run_for(60)  # a minute idle refills three tokens, not 120
    assert bucket.tokens() == pytest.approx(3)
    assert [bucket.reserve() for _ in range(4)] == pytest.approx([0, 0, 0, 0.5])


async def test_waiters_are_let_through_in_the_order_they_came() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1, 1, clock=clock)
    order: list[int] = []

    async def request(n: int) -> None:
        await bucket.acquire()
        order.append(n)

    tasks = []
    for n in range(5):
        tasks.append(asyncio.create_task(request(n)))
        await clock.settle()
    await clock.run_for(10)
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]


async def test_a_cancelled_waiter_never_lets_others_over_the_budget() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1, 1, clock=clock)
    sent: list[float] = []

    async def request() -> None:
        await bucket.acquire()
        sent.append(clock.monotonic())

    first, second, third = (asyncio.create_task(request()) for _ in range(3))
    await clock.settle()
    second.cancel()
    await clock.run_for(5)
    await asyncio.gather(first, third)
    assert second.cancelled()
    assert within_budget(sent, 1, 1) and len(sent) == 2


def test_the_bucket_is_shared_safely_by_threads() -> None:
    # One budget over clients on different event loops and threads: reservations
    # made at the same instant from many threads get distinct, consecutive slots.
    clock = FakeClock()
    bucket = TokenBucket(10, 5, clock=clock)
    delays: list[float] = []
    lock = threading.Lock()

    def reserve_many() -> None:
        mine = [bucket.reserve() for _ in range(200)]
        with lock:
            delays.extend(mine)

    threads = [threading.Thread(target=reserve_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(delays) == pytest.approx([0.0] * 5 + [k / 10 for k in range(1, 796)])


def test_a_bucket_names_a_bad_argument() -> None:
    with pytest.raises(ValueError, match="qps"):
        TokenBucket(0, 10)
    with pytest.raises(ValueError, match="burst"):
        TokenBucket(5, 0)


# -- the client ----------------------------------------------------------------------


async def test_connect_limits_as_client_go_reads_qps_and_burst(standin: StandInAPIServer) -> None:
    cases: list[tuple[Mapping[str, Any], tuple[float, int] | None]] = [
        ({}, (50, 100)),  # the kubelet's defaults
        ({"qps": 7, "burst": 9}, (7, 9)),
        ({"qps": 0, "burst": 0}, (5, 10)),  # client-go's rest.DefaultQPS/DefaultBurst
        ({"qps": -1}, None),  # negative: no rate limiter
    ]
    for options, expected in cases:
        api = await connect(standin.kubeconfig(), **options)
        try:
            bucket = request_budget(api)
            if expected is None:
                assert bucket is None
            else:
                assert bucket is not None and (bucket.qps, bucket.burst) == expected
        finally:
            await api.close()
    with pytest.raises(ConfigurationError, match="burst: -1 must not be a negative number"):
        await connect(standin.kubeconfig(), burst=-1)


async def test_every_request_of_the_client_waits_for_its_token(standin: StandInAPIServer) -> None:
    from kubernetes_asyncio import client as k8s

    clock = FakeClock()
    api = await connect(standin.kubeconfig(), qps=2, burst=3, clock=clock)
    sibling = await client_like(api)
    try:
        assert request_budget(sibling) is request_budget(api)
        core, other = k8s.CoreV1Api(api), k8s.CoreV1Api(sibling)
        calls = [
            asyncio.create_task(c.list_namespaced_pod("default", _preload_content=False))
            for c in (core, other, core, other, core, other)
        ]
        await eventually(lambda: len(standin.requests) >= 3, what="the burst")
        for _ in range(20):  # real time for more to arrive, if they could
            await asyncio.sleep(0.005)
        assert len(standin.requests) == 3  # both clients draw on the one budget
        await eventually(
            lambda: all(c.done() for c in calls), clock=clock, step=0.25, what="all requests sent"
        )
        assert len(standin.requests) == 6
        assert clock.monotonic() >= 1000.0 + 1.5  # three more at two a second
        for call in calls:
            call.result().release()
    finally:
        await sibling.close()
        await api.close()


async def test_a_burst_of_pods_stays_within_the_budget(
    standin: StandInAPIServer, tmp_path: Path
) -> None:
    # The whole cluster side (pod source, Node, Lease, pod statuses, events) on one
    # client with a small budget: the stand-in must never see more than it allows,
    # and every request it sees was let through by the bucket.
    qps, burst, pods = 5, 4, 12
    clock = FakeClock()
    api = await connect(standin.kubeconfig(), qps=qps, burst=burst, clock=clock)
    bucket = request_budget(api)
    assert bucket is not None
    let_through: list[float] = []
    take_token = bucket.acquire

    async def stamped() -> float:
        waited = await take_token()
        let_through.append(clock.monotonic())
        return waited

    bucket.acquire = stamped  # type: ignore[method-assign]
    runtime = FakeRuntime(clock)
    runtime.add_image("busybox")
    kubelet = Kubelet(
        **stub_parts(
            runtime=runtime,
            clock=clock,
            node_name="node-1",
            sources=[APIServerSource(api, "node-1", clock=clock)],
            root_dir=tmp_path,
            pod_logs_dir=tmp_path / "logs",
        )
    )
    provider = NodeStatusProvider(kubelet, addresses=lambda: ["127.0.0.1"])

    async def node_status() -> Mapping[str, Any]:
        return (await provider.status()).to_dict()

    for n in range(pods):
        standin.put("pods", pod_object(f"web-{n}"))

    def running() -> int:
        return sum(
            1
            for n in range(pods)
            if ((standin.get("pods", "default", f"web-{n}") or {}).get("status") or {}).get("phase")
            == "Running"
        )

    try:
        async with kubelet, ClusterNode(kubelet, api, node_status=node_status):
            await eventually(
                lambda: running() == pods,
                clock=clock,
                step=0.1,
                timeout=60,
                what="every pod Running on the server",
            )
            await clock.run_for(1)
        await clock.settle()
    finally:
        await api.close()
    assert len(let_through) > burst + pods  # a status for each pod at least
    assert within_budget(let_through, qps, burst)
    # The bucket, not the agent, set the pace: once the burst was spent, requests
    # went one every 1/qps seconds.
    gaps = [b - a for a, b in itertools.pairwise(let_through)]
    assert sum(1 for g in gaps if g == pytest.approx(1 / qps)) >= pods - burst
    # Nothing went around the bucket: the stand-in saw no request it did not let by.
    assert 0 < len(standin.requests) <= len(let_through)


# -- the wiring ----------------------------------------------------------------------


async def test_the_agent_takes_its_budget_from_the_configuration(
    standin: StandInAPIServer, tmp_path: Path
) -> None:
    clock = FakeClock()
    config = KubeletConfiguration(
        cgroups_per_qos=False, kube_api_qps=3, kube_api_burst=4, port=0, healthz_port=0
    )
    agent = await build_agent(
        config,
        cluster=ClusterOptions(kubeconfig=standin.kubeconfig()),
        node_ip="127.0.0.1",
        runtime=FakeRuntime(clock),
        clock=clock,
        node_name="node-1",
        root_dir=tmp_path / "root",
        pod_logs_dir=tmp_path / "logs",
        serve=False,
    )
    try:
        bucket = request_budget(agent.api_client)
        assert bucket is not None
        assert (bucket.qps, bucket.burst, bucket.clock) == (3, 4, clock)
    finally:
        await agent.close()


def test_the_kubelets_flags_fold_into_the_configuration() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    run = register(parser.add_subparsers())
    config = configuration_from_args(
        run.parse_args(["--kube-api-qps", "20", "--kube-api-burst", "40"])
    )
    assert (config.kube_api_qps, config.kube_api_burst) == (20, 40)
    defaults = configuration_from_args(run.parse_args([]))
    assert (defaults.kube_api_qps, defaults.kube_api_burst) == (50, 100)
    with pytest.raises(ConfigurationError, match="--kube-api-qps: -1 must not be a negative"):
        configuration_from_args(run.parse_args(["--kube-api-qps", "-1"]))
