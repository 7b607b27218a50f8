"""Every error kubelet-kit raises, in one tree.

::

    KubeletKitError
    ├── ValidationError            bad manifest or configuration; ``.errors`` lists
    │                              every (field path, message) found
    ├── QuantityError (ValueError) a string that is not a resource.Quantity
    ├── ConfigurationError         a component was configured wrongly
    ├── PodSyncError               a step of syncing a pod failed; ``.reason`` is the
    │                              kubelet's reason (ErrImagePull, CrashLoopBackOff, ...)
    ├── CNIError                   a CNI plugin failed, with the spec's code, msg, details
    └── ContainerRuntimeError      a Runtime operation failed
        ├── NotFoundError          no sandbox, container or image with that id
        ├── AlreadyExistsError     the name or id is taken
        ├── InvalidArgumentError   the runtime refused the request as malformed
        ├── RuntimeUnavailableError  the runtime cannot be reached (retry later)
        ├── DeadlineExceededError  the call did not finish within its deadline
        ├── UnimplementedError     the runtime does not offer this operation
        ├── ResourceExhaustedError a limit of the runtime's is reached (retry later)
        ├── ImagePullError         an image could not be pulled (ErrImagePull)
        │   └── ImageNotFoundError the image reference does not exist
        └── ContainerStartError    a container could not be created or started

Runtimes raise these typed errors and nothing else for expected failures, so the
composer decides (retry, back off, report a reason) without matching strings. The
CRI client maps gRPC status codes to this tree in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

__all__ = [
    "AlreadyExistsError",
    "CNIError",
    "ConfigurationError",
    "ContainerRuntimeError",
    "ContainerStartError",
    "DeadlineExceededError",
    "FieldError",
    "ImageNotFoundError",
    "ImagePullError",
    "InvalidArgumentError",
    "KubeletKitError",
    "NotFoundError",
    "PodSyncError",
    "QuantityError",
    "ResourceExhaustedError",
    "RuntimeUnavailableError",
    "UnimplementedError",
    "ValidationError",
    "go_path_error",
]


class KubeletKitError(Exception):
    """Base of every error raised by kubelet-kit."""


@attrs.frozen
class FieldError:
    """One problem found in a manifest or configuration.

    Attributes:
        path: Kubernetes-style field path, e.g. ``spec.containers[1].image``.
        message: What is wrong with the value at ``path``.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ValidationError(KubeletKitError):
    """A manifest or configuration was rejected.

    Attributes:
        errors: Every problem found, each with its field path.
        source: Where the input came from (a file path or URL), if known.
    """

    def __init__(self, errors: Iterable[FieldError], source: str | None = None) -> None:
        self.errors: list[FieldError] = list(errors)
        self.source = source
        prefix = f"{source}: " if source else ""
        super().__init__("; ".join(prefix + str(e) for e in self.errors) or "invalid")

    @classmethod
    def single(cls, path: str, message: str, source: str | None = None) -> ValidationError:
        """Build an error holding one field problem."""
        return cls([FieldError(path, message)], source=source)


class QuantityError(KubeletKitError, ValueError):
    """A string could not be parsed as a Kubernetes resource quantity."""


class ConfigurationError(KubeletKitError):
    """A component was given a configuration it cannot work with."""

    def __init__(self, message: str, errors: Sequence[FieldError] = ()) -> None:
        self.errors = list(errors)
        super().__init__(message)


class PodSyncError(KubeletKitError):
    """A step of syncing a pod failed, for one of the kubelet's reasons.

    The reason is what the kubelet reports (a container's waiting reason such as
    ``ErrImagePull``, ``ImagePullBackOff``, ``ErrImageNeverPull``,
    ``InvalidImageName``, ``CrashLoopBackOff``, ``CreateContainerConfigError``,
    ``CreateContainerError``, ``RunContainerError``, ``PostStartHookError``, or a pod
    event reason such as ``FailedMount`` and ``FailedCreatePodSandBox``); callers
    branch on :attr:`reason`, never on the message.

    Attributes:
        reason: The kubelet's reason string.
        message: The kubelet's message for it.
        container: The container it concerns ("" for the pod as a whole).
    """

    def __init__(self, reason: str, message: str, *, container: str = "") -> None:
        self.reason = reason
        self.message = message
        self.container = container
        super().__init__(f"{reason}: {message}" if message else reason)


class CNIError(KubeletKitError):
    """A CNI error: what a plugin prints on failure, and what a caller raises
    (``kubelet_kit.cni`` has the spec's ``ERR_*`` codes).

    Attributes:
        code: The spec's error code (see the ``ERR_*`` constants).
        msg: Short message, the spec's ``msg``.
        details: Longer explanation, the spec's ``details`` (may be empty).
        plugin: For errors seen by a caller, the plugin ``type`` that failed.
    """

    def __init__(self, code: int, msg: str, details: str = "", *, plugin: str = "") -> None:
        self.code = code
        self.msg = msg
        self.details = details
        self.plugin = plugin
        text = f"{msg}; {details}" if details else msg
        super().__init__(f"plugin type={plugin!r} failed: {text}" if plugin else text)

    def to_json(self, cni_version: str) -> dict[str, Any]:
        """The spec's error object for ``cni_version``."""
        data: dict[str, Any] = {"cniVersion": cni_version, "code": self.code, "msg": self.msg}
        if self.details:
            data["details"] = self.details
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, plugin: str = "") -> CNIError:
        """Read an error object a plugin printed (missing fields are tolerated)."""
        code = data.get("code", 0)  # the spec's ERR_UNKNOWN
        return cls(
            int(code) if isinstance(code, int) else 0,
            str(data.get("msg", "")),
            str(data.get("details", "")),
            plugin=plugin,
        )


class ContainerRuntimeError(KubeletKitError):
    """A Runtime operation failed."""


class NotFoundError(ContainerRuntimeError):
    """The sandbox, container or image does not exist."""


class AlreadyExistsError(ContainerRuntimeError):
    """The sandbox or container name (or id) is already taken."""


class InvalidArgumentError(ContainerRuntimeError):
    """The runtime refused the request as malformed."""


class RuntimeUnavailableError(ContainerRuntimeError):
    """The runtime cannot be reached right now; the call may be retried."""


class DeadlineExceededError(ContainerRuntimeError):
    """The call did not complete within its deadline."""


class UnimplementedError(ContainerRuntimeError):
    """The runtime does not implement this (optional) operation."""


class ResourceExhaustedError(ContainerRuntimeError):
    """A limit of the runtime's is reached (too many requests in flight)."""


class ImagePullError(ContainerRuntimeError):
    """The image could not be pulled; the kubelet reports ErrImagePull."""


class ImageNotFoundError(ImagePullError):
    """The image reference does not exist in its registry."""


class ContainerStartError(ContainerRuntimeError):
    """The container could not be created or started (RunContainerError)."""


def go_path_error(op: str, path: object, exc: OSError) -> str:
    """The text Go gives a failed file operation (an ``*os.PathError``), e.g.
    ``open /x: no such file or directory``: where the kubelet's messages embed
    such an error, ours read the same. Python's ``strerror`` differs only in its
    capital letter."""
    text = exc.strerror or str(exc)
    return f"{op} {path}: {text[:1].lower()}{text[1:]}"
