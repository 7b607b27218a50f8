"""ImagePuller: pull policies, the pull back-off timeline, the kubelet's reasons and messages."""

from __future__ import annotations

import itertools
import json

import attrs
import pytest

from kubelet_kit.api import Container, ObjectMeta, Pod, PodSpec
from kubelet_kit.errors import ImagePullError, PodSyncError, RuntimeUnavailableError
from kubelet_kit.podsync.backoff import Backoff
from kubelet_kit.podsync.images import (
    ImagePuller,
    apply_default_image_tag,
    image_backoff_key,
)
from kubelet_kit.testing import FakeClock, FakeRuntime
from kubelet_kit.volume.sources import StaticConfigSource


def mkpod(image: str, policy: str | None = None) -> tuple[Pod, Container]:
    kwargs = {"image_pull_policy": policy} if policy else {}
    container = Container(name="app", image=image, **kwargs)
    pod = Pod(
        metadata=ObjectMeta(name="web", namespace="ns", uid="u1", annotations={"a": "b"}),
        spec=PodSpec(containers=(container,)),
    )
    return pod, container


def methods(runtime: FakeRuntime) -> list[str]:
    calls = [c.method for c in runtime.calls if c.method in ("image_status", "pull_image")]
    runtime.clear_calls()
    return calls


INSPECT = ["image_status"]
PULL = ["image_status", "pull_image"]


async def outcome(puller: ImagePuller, pod: Pod, container: Container) -> str:
    try:
        await puller.ensure_image(pod, container)
    except PodSyncError as exc:
        return exc.reason
    return "ok"


# Upstream image_manager_test pullerTestCases, ported: (image on node, registry
# knows it, policy, pull error, expected (calls, outcome) per attempt), with the
# clock advanced 1 s between attempts and a 1 s initial back-off.
PULLER_CASES = [
    ("image missing, pull", False, True, "IfNotPresent", None, [(PULL, "ok")]),
    (
        "image present, don't pull",
        True,
        True,
        "IfNotPresent",
        None,
        [(INSPECT, "ok")] * 3,
    ),
    ("image present, pull", True, True, "Always", None, [(PULL, "ok")] * 3),
    (
        "image missing, never pull",
        False,
        True,
        "Never",
        None,
        [(INSPECT, "ErrImageNeverPull")] * 3,
    ),
    (
        "image missing, unable to fetch",
        False,
        True,
        "IfNotPresent",
        ImagePullError("404"),
        [
            (PULL, "ErrImagePull"),
            (PULL, "ErrImagePull"),
            (INSPECT, "ImagePullBackOff"),
            (PULL, "ErrImagePull"),
            (INSPECT, "ImagePullBackOff"),
            (INSPECT, "ImagePullBackOff"),
        ],
    ),
]


@pytest.mark.parametrize(
    ("present", "known", "policy", "pull_error", "expected"),
    [case[1:] for case in PULLER_CASES],
    ids=[case[0] for case in PULLER_CASES],
)
async def test_puller_table(
    present: bool,
    known: bool,
    policy: str,
    pull_error: Exception | None,
    expected: list[tuple[list[str], str]],
) -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    image = "registry.example/app:1"
    if known:
        runtime.add_image(image, present=present)
    if pull_error is not None:
        runtime.fail_pull(image, pull_error)
    puller = ImagePuller(runtime, clock, Backoff(clock, initial=1.0, cap=60.0, reset_after=None))
    pod, container = mkpod(image, policy)
    for i, (calls, result) in enumerate(expected):
        assert await outcome(puller, pod, container) == result, i
        assert methods(runtime) == calls, i
        clock.advance(1)


async def test_inspect_error_is_image_inspect_error() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    runtime.inject_error("image_status", RuntimeUnavailableError("socket closed"))
    pod, container = mkpod("registry.example/app:1")
    with pytest.raises(PodSyncError) as info:
        await ImagePuller(runtime, clock).ensure_image(pod, container)
    assert info.value.reason == "ImageInspectError"
    assert info.value.message == 'Failed to inspect image "registry.example/app:1": socket closed'


async def test_returns_the_runtime_image_id_and_passes_annotations() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    image = runtime.add_image("registry.example/app:1")
    pod, container = mkpod("registry.example/app:1")
    ref = await ImagePuller(runtime, clock).ensure_image(pod, container)
    assert ref == image.id
    pull = runtime.calls_to("pull_image")[0]
    assert pull.args[0].image == "registry.example/app:1"
    assert dict(pull.args[0].annotations) == {"a": "b"}


async def test_image_specs_with_and_without_annotations() -> None:
    # Pods without annotations share one spec per image; pods with them get
    # their own, carrying them. Either way the spec holds the tagged image.
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    runtime.add_image("busybox:latest", present=True)
    events: list[tuple[str, str, str]] = []
    puller = ImagePuller(
        runtime, clock, on_event=lambda p, c, kind, reason, m: events.append((kind, reason, m))
    )
    annotated, container = mkpod("busybox", "IfNotPresent")
    bare = [attrs.evolve(annotated, metadata=ObjectMeta(name=f"p{i}", uid=f"u{i}")) for i in (1, 2)]
    for pod in (annotated, *bare, annotated):
        await puller.ensure_image(pod, container)
    specs = [call.args[0] for call in runtime.calls_to("image_status")]
    assert [(s.image, dict(s.annotations)) for s in specs] == [
        ("busybox:latest", {"a": "b"}),
        ("busybox:latest", {}),
        ("busybox:latest", {}),
        ("busybox:latest", {"a": "b"}),
    ]
    assert specs[1] is specs[2] and specs[0] is not specs[3]
    message = 'Container image "busybox" already present on machine'
    assert events == [("Normal", "Pulled", message)] * 4


async def test_untagged_image_is_pulled_as_latest_and_always() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    runtime.add_image("busybox", present=True)
    pod, container = mkpod("busybox")
    assert container.image_pull_policy == "Always"
    await ImagePuller(runtime, clock).ensure_image(pod, container)
    assert runtime.calls_to("pull_image")[0].args[0].image == "busybox:latest"


async def test_never_pull_message_is_the_kubelets() -> None:
    clock = FakeClock()
    pod, container = mkpod("registry.example/app:1", "Never")
    with pytest.raises(PodSyncError) as info:
        await ImagePuller(FakeRuntime(clock), clock).ensure_image(pod, container)
    assert info.value.message == (
        'Container image "registry.example/app:1" is not present with pull policy of Never'
    )
    assert info.value.container == "app"


async def test_pull_backoff_timeline_doubles_from_ten_seconds() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    runtime.fail_pull("registry.example/app:1", ImagePullError("manifest unknown"))
    puller = ImagePuller(runtime, clock)
    pod, container = mkpod("registry.example/app:1", "IfNotPresent")
    start = clock.now()
    pulls: list[float] = []
    for _ in range(400):
        before = len(runtime.calls_to("pull_image"))
        try:
            await puller.ensure_image(pod, container)
        except PodSyncError as exc:
            if len(runtime.calls_to("pull_image")) > before:
                assert exc.reason == "ErrImagePull"
                assert exc.message == "manifest unknown"
                pulls.append(clock.now() - start)
            else:
                assert exc.reason == "ImagePullBackOff"
                assert exc.message == 'Back-off pulling image "registry.example/app:1"'
                expiry = puller.backoff_expiry(pod, container)
                assert expiry is not None and expiry > clock.now()
        clock.advance(5)
    # Pulls at 0, then after 10, 20, 40, 80, 160, 300, 300, ... seconds.
    gaps = [b - a for a, b in itertools.pairwise(pulls)]
    assert gaps[:8] == [10, 20, 40, 80, 160, 300, 300, 300]


async def test_successful_pull_after_failures_and_forget_pod() -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    runtime.fail_pull("registry.example/app:1", ImagePullError("timeout"))
    puller = ImagePuller(runtime, clock)
    pod, container = mkpod("registry.example/app:1", "IfNotPresent")
    assert await outcome(puller, pod, container) == "ErrImagePull"
    assert image_backoff_key(pod, container) in puller.backoff
    runtime.add_image("registry.example/app:1")
    assert await outcome(puller, pod, container) == "ImagePullBackOff"
    clock.advance(10)
    assert await outcome(puller, pod, container) == "ok"
    puller.forget_pod(pod)
    assert image_backoff_key(pod, container) not in puller.backoff


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("busybox", "busybox:latest"),
        ("busybox:1.36", "busybox:1.36"),
        ("registry.example:5000/team/app", "registry.example:5000/team/app:latest"),
        ("localhost/app:dev", "localhost/app:dev"),
        ("app@sha256:" + "a" * 64, "app@sha256:" + "a" * 64),
        ("[::1]:5000/app", "[::1]:5000/app:latest"),
        ("Registry.Example/app", "Registry.Example/app:latest"),
    ],
)
def test_default_tag(image: str, expected: str) -> None:
    assert apply_default_image_tag(image) == expected


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ("", "repository name must have at least one component"),
        ("Busybox", "invalid reference format: repository name must be lowercase"),
        ("docker.io/Library/busybox", "invalid reference format: repository name"),
        ("busy box", "invalid reference format"),
        ("app:", "invalid reference format"),
        ("a" * 64, "cannot specify 64-byte hexadecimal strings"),
    ],
)
async def test_invalid_image_name(image: str, why: str) -> None:
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    pod, container = mkpod(image, "IfNotPresent")
    with pytest.raises(PodSyncError) as info:
        await ImagePuller(runtime, clock).ensure_image(pod, container)
    assert info.value.reason == "InvalidImageName"
    assert info.value.message.startswith(
        f'Failed to apply default image tag "{image}": couldn\'t parse image reference "{image}": '
    )
    assert why in info.value.message
    assert runtime.calls == []  # rejected before the runtime is asked


# ------------------------------------------------------------- pull secrets


def secret_pod(image: str, *names: str) -> tuple[Pod, Container]:
    container = Container(name="app", image=image, image_pull_policy="IfNotPresent")
    pod = Pod(
        metadata=ObjectMeta(name="web", namespace="ns", uid="u1"),
        spec=PodSpec(containers=(container,), image_pull_secrets=tuple({"name": n} for n in names)),
    )
    return pod, container


def dockerconfig(**auths: tuple[str, str]) -> dict[str, str]:
    """A .dockerconfigjson secret; keyword names stand for keys with '_' as '.'."""
    entries = {k.replace("_", "."): {"username": u, "password": p} for k, (u, p) in auths.items()}
    return {".dockerconfigjson": json.dumps({"auths": entries})}


def pulled_with(runtime: FakeRuntime) -> list[str | None]:
    return [
        None if c.kwargs["auth"] is None else c.kwargs["auth"].username
        for c in runtime.calls_to("pull_image")
    ]


async def test_each_matching_credential_is_tried_and_never_anonymously() -> None:
    """kuberuntime pullImage: every credential the keyring matches is tried in
    turn (most specific key first, across secrets in order); the first success
    wins; when none works there is no anonymous attempt, and the error is the
    aggregate of every attempt's."""
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    runtime.add_image("registry.example/team/app:1")
    runtime.require_auth("registry.example/team/app:1", "right", "pw")
    source = StaticConfigSource()
    source.set_secret("ns", "a", dockerconfig(registry_example=("wrong", "pw")))
    source.set_secret("ns", "b", dockerconfig(**{"registry_example/team": ("right", "pw")}))
    source.set_secret("ns", "c", dockerconfig(other_example=("unrelated", "pw")))
    pod, container = secret_pod("registry.example/team/app:1", "a", "b", "c")
    await ImagePuller(runtime, clock, config_source=source).ensure_image(pod, container)
    assert pulled_with(runtime) == ["right"]

    # No credential works: each is tried, nothing more; one attempt's error is itself.
    runtime.clear_calls()
    runtime.require_auth("registry.example/other:1", "nobody", "x")
    runtime.add_image("registry.example/other:1")
    pod, container = secret_pod("registry.example/other:1", "a", "b")
    with pytest.raises(PodSyncError) as info:
        await ImagePuller(runtime, clock, config_source=source).ensure_image(pod, container)
    assert pulled_with(runtime) == ["wrong"]
    assert info.value.reason == "ErrImagePull"
    assert "unauthorized" in info.value.message

    # Two credentials that both fail: the kubelet's aggregate of both errors.
    runtime.clear_calls()
    source.set_secret("ns", "d", dockerconfig(registry_example=("also-wrong", "pw")))
    pod, container = secret_pod("registry.example/other:1", "a", "d")
    with pytest.raises(PodSyncError) as info:
        await ImagePuller(runtime, clock, config_source=source).ensure_image(pod, container)
    assert sorted(str(u) for u in pulled_with(runtime)) == ["also-wrong", "wrong"]
    assert info.value.message.count("unauthorized") == 2
    assert "[" in info.value.message


async def test_missing_pull_secret_is_skipped_with_the_kubelets_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """getPullSecretsForPod: a secret that cannot be read is skipped with
    "Unable to retrieve pull secret ..." and the pull goes on."""
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    runtime.add_image("registry.example/app:1")
    source = StaticConfigSource()
    source.set_secret("ns", "there", dockerconfig(registry_example=("u", "p")))
    pod, container = secret_pod("registry.example/app:1", "gone", "there")
    await ImagePuller(runtime, clock, config_source=source).ensure_image(pod, container)
    assert pulled_with(runtime) == ["u"]
    assert (
        'Unable to retrieve pull secret ns/gone for ns/web due to secret "gone" not found.  '
        "The image pull may not succeed." in caplog.text
    )


async def test_without_a_config_source_pulls_are_anonymous() -> None:
    """No secret source: every pull secret is missing, so the pull has no auth."""
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    runtime.add_image("registry.example/app:1")
    pod, container = secret_pod("registry.example/app:1", "regcred")
    await ImagePuller(runtime, clock).ensure_image(pod, container)
    assert pulled_with(runtime) == [None]


async def test_invalid_pull_secret_fails_the_pull_and_backs_off() -> None:
    """MakeDockerKeyring's error fails PullImage: ErrImagePull, back-off started,
    and the runtime is not asked to pull."""
    clock = FakeClock()
    runtime = FakeRuntime(clock)
    runtime.add_image("registry.example/app:1")
    source = StaticConfigSource()
    source.set_secret("ns", "bad", {".dockerconfigjson": "{not json"})
    pod, container = secret_pod("registry.example/app:1", "bad")
    puller = ImagePuller(runtime, clock, config_source=source)
    assert await outcome(puller, pod, container) == "ErrImagePull"
    assert runtime.calls_to("pull_image") == []
    assert await outcome(puller, pod, container) == "ImagePullBackOff"
