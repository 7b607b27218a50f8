"""Runtime pods: grouping by the pod-uid label, listing and inspecting pods."""

from __future__ import annotations

import pytest

from kubelet_kit.container import labels as kl
from kubelet_kit.container.interfaces import (
    ContainerConfig,
    ContainerInfo,
    ContainerMetadata,
    ContainerState,
    ContainerStatus,
    ImageSpec,
    NamespaceOptions,
    PodSandbox,
    PodSandboxConfig,
    PodSandboxMetadata,
    PodSandboxState,
)
from kubelet_kit.container.pods import (
    PodRuntimeStatus,
    RuntimePod,
    get_pod_status,
    get_pods,
    group_pods,
)
from kubelet_kit.errors import RuntimeUnavailableError
from kubelet_kit.testing import FakeClock
from kubelet_kit.testing.fake_runtime import FakeRuntime


def pod_labels(uid: str, name: str = "", ns: str = "default") -> dict[str, str]:
    return {kl.POD_UID: uid, kl.POD_NAME: name or f"pod-{uid}", kl.POD_NAMESPACE: ns}


def sandbox(sid: str, uid: str | None, created: float = 1.0, ready: bool = True) -> PodSandbox:
    return PodSandbox(
        id=sid,
        metadata=PodSandboxMetadata(f"pod-{uid}", "default", uid or ""),
        state=PodSandboxState.READY if ready else PodSandboxState.NOTREADY,
        created_at=created,
        labels=pod_labels(uid) if uid else {},
    )


def container(
    cid: str,
    uid: str | None,
    name: str = "app",
    state: ContainerState = ContainerState.RUNNING,
    created: float = 1.0,
    attempt: int = 0,
) -> ContainerInfo:
    labels = {**pod_labels(uid), kl.CONTAINER_NAME: name} if uid else {}
    return ContainerInfo(
        id=cid,
        pod_sandbox_id="s",
        metadata=ContainerMetadata(name, attempt),
        image="busybox",
        image_ref="sha256:1",
        state=state,
        created_at=created,
        labels=labels,
    )


def status(
    cid: str,
    name: str,
    created: float,
    state: ContainerState = ContainerState.RUNNING,
    attempt: int = 0,
) -> ContainerStatus:
    return ContainerStatus(
        id=cid,
        metadata=ContainerMetadata(name, attempt),
        state=state,
        created_at=created,
        image="busybox",
    )


# ------------------------------------------------------------------ group_pods


@pytest.mark.parametrize(
    ("sandboxes", "containers", "expected"),
    [
        pytest.param([], [], {}, id="empty"),
        pytest.param(
            [sandbox("s1", "u1")],
            [container("c1", "u1"), container("c2", "u1", "side")],
            {"u1": (["s1"], ["c1", "c2"])},
            id="one-pod",
        ),
        pytest.param(
            [sandbox("s1", "u1"), sandbox("s2", "u2")],
            [container("c1", "u1"), container("c2", "u2"), container("c3", "u1", "side")],
            {"u1": (["s1"], ["c1", "c3"]), "u2": (["s2"], ["c2"])},
            id="two-pods-interleaved",
        ),
        pytest.param(
            [sandbox("s1", None)],
            [container("c1", None), container("c2", "u1")],
            {"u1": ([], ["c2"])},
            id="unlabelled-ignored",
        ),
        pytest.param(
            [sandbox("s1", "u1")],
            [],
            {"u1": (["s1"], [])},
            id="sandbox-only",
        ),
        pytest.param(
            [],
            [container("c1", "u1", state=ContainerState.EXITED)],
            {"u1": ([], ["c1"])},
            id="container-without-sandbox",
        ),
        pytest.param(
            [sandbox("old", "u1", created=1.0, ready=False), sandbox("new", "u1", created=5.0)],
            [],
            {"u1": (["new", "old"], [])},
            id="sandboxes-newest-first",
        ),
    ],
)
def test_group_pods_by_uid_label(
    sandboxes: list[PodSandbox],
    containers: list[ContainerInfo],
    expected: dict[str, tuple[list[str], list[str]]],
) -> None:
    pods = group_pods(sandboxes, containers)
    got = {p.uid: ([s.id for s in p.sandboxes], [c.id for c in p.containers]) for p in pods}
    assert got == expected


def test_group_pods_takes_name_and_namespace_from_labels() -> None:
    sb = sandbox("s1", "u1")
    c = ContainerInfo(
        id="c9",
        pod_sandbox_id="x",
        metadata=ContainerMetadata("app"),
        image="i",
        image_ref="i",
        state=ContainerState.RUNNING,
        created_at=1.0,
        labels=pod_labels("u2", name="web", ns="prod"),
    )
    pods = {p.uid: p for p in group_pods([sb], [c])}
    assert (pods["u1"].name, pods["u1"].namespace) == ("pod-u1", "default")
    # A pod known only from its container still gets its identity.
    assert (pods["u2"].name, pods["u2"].namespace) == ("web", "prod")


def test_group_pods_orders_pods_newest_first() -> None:
    pods = group_pods(
        [sandbox("a", "old", created=1.0), sandbox("b", "new", created=9.0)],
        [],
    )
    assert [p.uid for p in pods] == ["new", "old"]
    assert pods[0].created_at == 9.0


def test_runtime_pod_helpers() -> None:
    pod = RuntimePod(
        "u1",
        "p",
        "ns",
        (sandbox("s1", "u1"),),
        (
            container("c0", "u1", "app", ContainerState.EXITED, created=1.0, attempt=0),
            container("c1", "u1", "app", ContainerState.RUNNING, created=2.0, attempt=1),
            container("c2", "u1", "side", ContainerState.CREATED, created=2.0),
        ),
    )
    found = pod.find_container("app")
    assert found is not None and found.id == "c1"
    assert pod.find_container("nope") is None
    by_id = pod.find_container_by_id("c2")
    assert by_id is not None and by_id.metadata.name == "side"
    assert pod.find_sandbox_by_id("s1") is not None
    assert pod.find_sandbox_by_id("c1") is None
    assert [c.id for c in pod.running_containers()] == ["c1"]


def test_pod_runtime_status_sorts_and_finds() -> None:
    st = PodRuntimeStatus(
        uid="u1",
        container_statuses=(
            status("a0", "app", 1.0, ContainerState.EXITED),
            status("s0", "side", 3.0),
            status("a1", "app", 2.0, ContainerState.RUNNING, attempt=1),
        ),
    )
    assert [s.id for s in st.container_statuses] == ["s0", "a1", "a0"]
    app = st.find_container_status("app")
    assert app is not None and app.id == "a1"
    assert st.find_container_status("db") is None
    by_id = st.find_container_status_by_id("a0")
    assert by_id is not None and by_id.state is ContainerState.EXITED
    assert {k: v.id for k, v in st.newest_by_name().items()} == {"side": "s0", "app": "a1"}
    assert [s.id for s in st.running_container_statuses()] == ["s0", "a1"]


# ---------------------------------------------------------- against FakeRuntime


def sandbox_config(uid: str, name: str = "", attempt: int = 0, host_net: bool = False):
    name = name or f"pod-{uid}"
    return PodSandboxConfig(
        metadata=PodSandboxMetadata(name, "default", uid, attempt),
        labels=pod_labels(uid, name),
        namespace_options=NamespaceOptions(host_network=host_net),
    )


def container_config(uid: str, name: str, pod_name: str = "", attempt: int = 0):
    return ContainerConfig(
        metadata=ContainerMetadata(name, attempt),
        image=ImageSpec("busybox"),
        labels={**pod_labels(uid, pod_name), kl.CONTAINER_NAME: name},
    )


async def start_pod(rt: FakeRuntime, uid: str, names: tuple[str, ...] = ("app",)) -> list[str]:
    sb_cfg = sandbox_config(uid)
    sid = await rt.run_pod_sandbox(sb_cfg)
    ids = [sid]
    for name in names:
        cid = await rt.create_container(sid, container_config(uid, name), sb_cfg)
        await rt.start_container(cid)
        ids.append(cid)
    return ids


async def test_get_pods_lists_all_or_only_running() -> None:
    rt = FakeRuntime(FakeClock())
    sid, app, side = await start_pod(rt, "u1", ("app", "side"))
    await rt.stop_container(side, 0)
    sid2, _ = await start_pod(rt, "u2")
    await rt.stop_pod_sandbox(sid2)

    every = {p.uid: p for p in await get_pods(rt)}
    assert set(every) == {"u1", "u2"}
    assert {c.id for c in every["u1"].containers} == {app, side}
    assert every["u1"].name == "pod-u1"

    running = {p.uid: p for p in await get_pods(rt, all=False)}
    assert set(running) == {"u1"}
    assert [c.id for c in running["u1"].containers] == [app]
    assert [s.id for s in running["u1"].sandboxes] == [sid]


async def test_get_pod_status_collects_one_pod() -> None:
    clock = FakeClock()
    rt = FakeRuntime(clock)
    sid, app = await start_pod(rt, "u1")
    await start_pod(rt, "other")
    clock.advance(5)
    st = await get_pod_status(rt, "u1", "pod-u1", "default", timestamp=clock.now())
    assert (st.uid, st.name, st.namespace) == ("u1", "pod-u1", "default")
    assert [s.id for s in st.sandbox_statuses] == [sid]
    assert [c.id for c in st.container_statuses] == [app]
    assert len(st.ips) == 1 and st.ips[0]
    assert st.timestamp == clock.now()


async def test_get_pod_status_sandboxes_newest_first_ips_from_newest_ready() -> None:
    clock = FakeClock()
    rt = FakeRuntime(clock)
    old = await rt.run_pod_sandbox(sandbox_config("u1", attempt=0))
    await rt.stop_pod_sandbox(old)
    clock.advance(1)
    new = await rt.run_pod_sandbox(sandbox_config("u1", attempt=1))
    st = await get_pod_status(rt, "u1", "pod-u1", "default")
    assert [s.id for s in st.sandbox_statuses] == [new, old]
    assert st.ips == (st.sandbox_statuses[0].ip,)

    await rt.stop_pod_sandbox(new)
    st = await get_pod_status(rt, "u1", "pod-u1", "default")
    assert st.ips == ()  # the newest sandbox is not ready: no IP


async def test_get_pod_status_host_network_has_no_ip() -> None:
    rt = FakeRuntime(FakeClock())
    await rt.run_pod_sandbox(sandbox_config("u1", host_net=True))
    st = await get_pod_status(rt, "u1", "pod-u1", "default")
    assert st.ips == ()


class VanishingRuntime(FakeRuntime):
    """Removes a container right after it was listed, before its status is asked."""

    vanish: str = ""

    async def container_status(self, container_id: str) -> ContainerStatus:
        if container_id == self.vanish:
            await self.remove_container(container_id)
        return await super().container_status(container_id)


async def test_container_vanishing_between_list_and_status_is_skipped() -> None:
    rt = VanishingRuntime(FakeClock())
    _, app, side = await start_pod(rt, "u1", ("app", "side"))
    rt.vanish = side
    st = await get_pod_status(rt, "u1", "pod-u1", "default")
    assert [c.id for c in st.container_statuses] == [app]


async def test_get_pod_status_propagates_other_errors() -> None:
    rt = FakeRuntime(FakeClock())
    await start_pod(rt, "u1")
    rt.inject_error("container_status", RuntimeUnavailableError("down"))
    with pytest.raises(RuntimeUnavailableError):
        await get_pod_status(rt, "u1", "pod-u1", "default")


async def test_get_pod_status_of_unknown_pod_is_empty_not_an_error() -> None:
    rt = FakeRuntime(FakeClock())
    st = await get_pod_status(rt, "ghost", "g", "default")
    assert st.sandbox_statuses == () and st.container_statuses == ()
