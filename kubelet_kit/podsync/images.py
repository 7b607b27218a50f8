"""Making sure a container's image is on the node (the kubelet's image manager).

``imagePullPolicy`` decides: ``Always`` pulls on every container start,
``IfNotPresent`` only when the runtime does not hold the image, ``Never`` never
(and fails with ``ErrImageNeverPull`` when the image is absent). A failed pull
reports ``ErrImagePull`` and starts a back-off per pod and image (10 s doubling to
300 s): until it expires, the container waits with ``ImagePullBackOff`` and no
pull is tried. A reference that is not a valid image name fails with
``InvalidImageName`` before the runtime is asked anything.

A pull uses the pod's ``imagePullSecrets``: every credential whose registry key
matches the image (:mod:`kubelet_kit.podsync.credentials`) is tried in turn
until one pulls; when none works the pull fails with every attempt's error (the
kubelet's aggregate, ``[e1, e2]``; one error alone as itself). The pull is
anonymous only when no credential matches, as the kubelet's ``pullImage`` does.

On a runtime without an image service (one that does not offer ``images``, see
:func:`~kubelet_kit.container.runtime_capabilities`) nothing is inspected or
pulled: every valid image is taken as present, under its reference, whatever
the policy, and one line says so in the log.

Failures raise :class:`~kubelet_kit.errors.PodSyncError` with the kubelet's reason
and message; nothing here matches error strings.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

import attrs

from kubelet_kit.api.duration import format_duration
from kubelet_kit.clock import Clock
from kubelet_kit.container.interfaces import (
    AuthConfig,
    ImageService,
    ImageSpec,
    PodSandboxConfig,
    RuntimeCore,
)
from kubelet_kit.container.optional import IMAGES, not_offered, runtime_capabilities
from kubelet_kit.errors import ContainerRuntimeError, ImagePullError, PodSyncError
from kubelet_kit.podsync.backoff import (
    IMAGE_BACKOFF_CAP,
    IMAGE_BACKOFF_INITIAL,
    Backoff,
    go_quote,
)
from kubelet_kit.podsync.credentials import DockerKeyring, image_repository, parse_docker_config

if TYPE_CHECKING:
    from kubelet_kit.api import Container, Pod
    from kubelet_kit.volume.sources import ConfigSource

__all__ = [
    "ERR_IMAGE_INSPECT",
    "ERR_IMAGE_NEVER_PULL",
    "ERR_IMAGE_PULL",
    "ERR_INVALID_IMAGE_NAME",
    "IMAGE_PULL_BACK_OFF",
    "ImageEventHandler",
    "ImagePuller",
    "apply_default_image_tag",
    "image_backoff_key",
]

ERR_IMAGE_PULL = "ErrImagePull"
IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
ERR_INVALID_IMAGE_NAME = "InvalidImageName"
ERR_IMAGE_INSPECT = "ImageInspectError"

# The grammar of distribution/reference (docker's image reference).
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"^((?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::({_TAG}))?(?:@({_DIGEST}))?$"
)
_HEX64 = re.compile(r"^[a-f0-9]{64}$")
_NAME_TOTAL_MAX = 255

log = logging.getLogger(__name__)


def _parse_error(image: str) -> str | None:
    """Why ``image`` is not a valid reference (docker's messages), or None."""
    if _HEX64.match(image):
        return f"invalid repository name ({image}), cannot specify 64-byte hexadecimal strings"
    match = _REFERENCE.match(image)
    if match is None:
        if not image:
            return "repository name must have at least one component"
        if _REFERENCE.match(image.lower()):
            return "invalid reference format: repository name must be lowercase"
        return "invalid reference format"
    name = match.group(1)
    if len(name) > _NAME_TOTAL_MAX:
        return f"repository name must not be more than {_NAME_TOTAL_MAX} characters"
    first, sep, rest = name.partition("/")
    # A first component without '.' or ':' that is not "localhost" and is all
    # lower case is a Docker Hub path, not a registry host.
    is_domain = bool(sep) and (
        any(ch in first for ch in ".:") or first == "localhost" or first.lower() != first
    )
    remote = rest if is_domain else name
    if remote.lower() != remote:
        return f"invalid reference format: repository name ({remote}) must be lowercase"
    return None


# Every container start checks its image name; a node runs few distinct images,
# and the answer depends on the string alone (errors are raised, never cached).
@functools.lru_cache(maxsize=1024)
def apply_default_image_tag(image: str) -> str:
    """The image with ``:latest`` appended when it has neither tag nor digest.

    Raises:
        ValueError: ``image`` is not a valid image reference; the message is the
            kubelet's ``couldn't parse image reference "<image>": <why>``.
    """
    why = _parse_error(image)
    if why is not None:
        raise ValueError(f"couldn't parse image reference {go_quote(image)}: {why}")
    match = _REFERENCE.match(image)
    assert match is not None
    if match.group(2) is None and match.group(3) is None:
        return image + ":latest"
    return image


@attrs.frozen
class _KnownImage:
    """What checking a container's image needs of a valid image name, worked
    out once per name (see :func:`_known_image`).

    Attributes:
        ref: The image with its default tag (:func:`apply_default_image_tag`).
        bare_spec: Its ImageSpec without annotations, for pods that have none.
        present: The message of the event saying the image is already present.
    """

    ref: str
    bare_spec: ImageSpec
    present: str


# Every container start checks its image, and with images present (the usual
# case) that check is little more than this: the tag applied, the spec asked
# about, one event. A node runs few distinct images, and all three depend on the
# name alone; the spec is a frozen value, so one serves every pod without
# annotations. (Errors are raised, never cached.)
@functools.lru_cache(maxsize=1024)
def _known_image(image: str) -> _KnownImage:
    """The facts of ``image`` that :meth:`ImagePuller.ensure_image` needs.

    Raises:
        ValueError: ``image`` is not a valid image reference (as
            :func:`apply_default_image_tag`).
    """
    ref = apply_default_image_tag(image)
    return _KnownImage(
        ref=ref,
        bare_spec=ImageSpec(ref),
        present=f"Container image {go_quote(image)} already present on machine",
    )


#: ``(pod, container, event type, reason, message)``: receives the kubelet's image
#: events (``Pulling``, ``Pulled``, ``Failed``, ``BackOff``, ``ErrImageNeverPull``,
#: ``InspectFailed``).
ImageEventHandler = Callable[["Pod", "Container", str, str, str], None]


def image_backoff_key(pod: Pod, container: Container) -> str:
    """The pull back-off key: ``<pod uid>_<image>``, as the kubelet's."""
    return f"{pod.metadata.uid}_{container.image}"


class ImagePuller:
    """Pulls images by the container's policy, with the kubelet's pull back-off.

    Args:
        runtime: Where images are inspected and pulled (none are when it offers
            no image service: every image is taken as present).
        clock: Source of time for the back-off.
        backoff: The pull back-off; default 10 s doubling to 300 s.
        on_event: Receives the kubelet's image events, if given.
        config_source: Where the pods' ``imagePullSecrets`` are read (None: every
            secret is missing, so every pull is anonymous).
    """

    def __init__(
        self,
        runtime: RuntimeCore,
        clock: Clock,
        backoff: Backoff | None = None,
        *,
        on_event: ImageEventHandler | None = None,
        config_source: ConfigSource | None = None,
    ) -> None:
        self.runtime = runtime
        self._said_no_images = False
        self.clock = clock
        self.on_event = on_event
        self.config_source = config_source
        if backoff is None:
            backoff = Backoff(
                clock, initial=IMAGE_BACKOFF_INITIAL, cap=IMAGE_BACKOFF_CAP, reset_after=None
            )
        self.backoff = backoff

    def backoff_expiry(self, pod: Pod, container: Container) -> float | None:
        """Wall-clock time the pull back-off of this container's image ends, if it
        is in back-off now; None otherwise."""
        key = image_backoff_key(pod, container)
        entry = self.backoff.entry(key)
        if entry is None or not self.backoff.is_in_backoff_since_update(key, self.clock.now()):
            return None
        return entry.last_update + entry.delay

    def _event(
        self, pod: Pod, container: Container, event_type: str, reason: str, message: str
    ) -> None:
        if self.on_event is not None:
            self.on_event(pod, container, event_type, reason, message)

    def _pull_secrets(self, pod: Pod) -> list[Mapping[str, bytes]]:
        # getPullSecretsForPod: a secret that cannot be read is skipped with a
        # warning, and the pull goes on without it.
        found: list[Mapping[str, bytes]] = []
        for ref in pod.spec.image_pull_secrets:
            name = str(ref.get("name") or "")
            if not name:
                continue
            data: Mapping[str, bytes] | None = None
            why = f'secret "{name}" not found'
            if self.config_source is not None:
                try:
                    data = self.config_source.get_secret(pod.namespace, name)
                except Exception as exc:  # an unreachable source too: skipped, as the kubelet
                    why = str(exc)
            if data is None:
                log.warning(
                    "Unable to retrieve pull secret %s/%s for %s/%s due to %s.  "
                    "The image pull may not succeed.",
                    pod.namespace,
                    name,
                    pod.namespace,
                    pod.metadata.name,
                    why,
                )
                continue
            found.append(data)
        return found

    async def pull_credentials(self, pod: Pod, image: str) -> list[AuthConfig]:
        """The credentials to try for pulling ``image`` for ``pod``: those of its
        ``imagePullSecrets`` whose key matches the image, most specific first.

        Raises:
            ValueError: a pull secret holds an invalid docker config (the kubelet
                fails the pull with it).
        """
        if not pod.spec.image_pull_secrets:
            return []
        # A ConfigSource may block (files, an API server): read it off the loop.
        secrets = await asyncio.to_thread(self._pull_secrets, pod)
        keyring = DockerKeyring(parse_docker_config(data) for data in secrets)
        return keyring.lookup(image_repository(image))

    def _image_service(self) -> ImageService | None:
        """The runtime as an image service, or None (said once in the log)."""
        if IMAGES in runtime_capabilities(self.runtime):
            return cast(ImageService, self.runtime)
        if not self._said_no_images:
            self._said_no_images = True
            log.info(
                "%s: images are not pulled; every image is taken as present",
                not_offered(self.runtime, IMAGES),
            )
        return None

    async def _pull(
        self, pod: Pod, spec: ImageSpec, sandbox_config: PodSandboxConfig | None
    ) -> str:
        images = cast(ImageService, self.runtime)
        # Anonymous only when nothing matches; else each matching credential in
        # turn, and no anonymous attempt after them (kuberuntime's pullImage).
        try:
            auths: list[AuthConfig | None] = list(await self.pull_credentials(pod, spec.image))
        except ValueError as exc:
            raise ImagePullError(str(exc)) from exc
        if not auths:
            return await images.pull_image(spec, sandbox_config, None)
        failures: list[ContainerRuntimeError] = []
        for auth in auths:
            try:
                return await images.pull_image(spec, sandbox_config, auth)
            except ContainerRuntimeError as exc:
                failures.append(exc)
        if len(failures) == 1:
            raise failures[0]
        # utilerrors.NewAggregate's text: the messages in brackets, comma-separated.
        raise ImagePullError("[" + ", ".join(str(f) for f in failures) + "]") from failures[-1]

    def forget_pod(self, pod: Pod) -> None:
        """Drop the pull back-off of every image of ``pod``. Idempotent."""
        self.backoff.forget_prefix(f"{pod.metadata.uid}_")

    async def ensure_image(
        self,
        pod: Pod,
        container: Container,
        sandbox_config: PodSandboxConfig | None = None,
    ) -> str:
        """Make sure the container's image is present, pulling it if the policy says.

        Blocks while a pull runs. Not idempotent in effect: ``Always`` pulls each
        call (outside back-off).

        Args:
            pod: The pod (its uid keys the back-off, its annotations go with the
                image spec).
            container: The container whose image is wanted.
            sandbox_config: The pod's sandbox config, passed to the pull.

        Returns:
            The image reference the runtime holds (its image id), or the image
            with its default tag on a runtime without an image service.

        Raises:
            PodSyncError: reason ``InvalidImageName``, ``ImageInspectError``,
                ``ErrImageNeverPull``, ``ImagePullBackOff`` or ``ErrImagePull``,
                with the kubelet's message.
        """
        try:
            known = _known_image(container.image)
        except ValueError as exc:
            message = f"Failed to apply default image tag {go_quote(container.image)}: {exc}"
            self._event(pod, container, "Warning", "InspectFailed", message)
            raise PodSyncError(ERR_INVALID_IMAGE_NAME, message, container=container.name) from exc
        service = self._image_service()
        if service is None:
            return known.ref
        # ImageSpec keeps a copy of the annotations of its own: none made here.
        # A pod without annotations shares its image's spec (a frozen value).
        annotations = pod.metadata.annotations
        spec = ImageSpec(known.ref, annotations) if annotations else known.bare_spec
        try:
            held = await service.image_status(spec)
        except ContainerRuntimeError as exc:
            message = f"Failed to inspect image {go_quote(container.image)}: {exc}"
            self._event(pod, container, "Warning", "InspectFailed", message)
            raise PodSyncError(ERR_IMAGE_INSPECT, message, container=container.name) from exc
        policy = container.image_pull_policy
        should_pull = policy == "Always" or (policy == "IfNotPresent" and held is None)
        if not should_pull and held is not None:
            # The usual case: present, and the policy does not pull it again.
            self._event(pod, container, "Normal", "Pulled", known.present)
            return held.id
        quoted = go_quote(container.image)
        if not should_pull:
            message = f"Container image {quoted} is not present with pull policy of Never"
            self._event(pod, container, "Warning", ERR_IMAGE_NEVER_PULL, message)
            raise PodSyncError(ERR_IMAGE_NEVER_PULL, message, container=container.name)
        key = image_backoff_key(pod, container)
        if self.backoff.is_in_backoff_since_update(key, self.clock.now()):
            message = f"Back-off pulling image {quoted}"
            self._event(pod, container, "Normal", "BackOff", message)
            raise PodSyncError(IMAGE_PULL_BACK_OFF, message, container=container.name)
        self._event(pod, container, "Normal", "Pulling", f"Pulling image {quoted}")
        started = self.clock.monotonic()
        try:
            ref = await self._pull(pod, spec, sandbox_config)
        except ContainerRuntimeError as exc:
            self._event(
                pod, container, "Warning", "Failed", f"Failed to pull image {quoted}: {exc}"
            )
            self.backoff.next(key, self.clock.now())
            raise PodSyncError(ERR_IMAGE_PULL, str(exc), container=container.name) from exc
        took = format_duration(self.clock.monotonic() - started)
        self._event(
            pod,
            container,
            "Normal",
            "Pulled",
            f"Successfully pulled image {quoted} in {took} ({took} including waiting)",
        )
        self.backoff.gc()
        return ref
