"""gRPC status codes <-> :mod:`kubelet_kit.errors`: the one place they meet.

The client turns every failed call into a typed error here; the server turns
every typed error back into a status code here. Nothing else in kubelet-kit
looks at gRPC codes, and nothing anywhere matches error strings: a decision is
made from the code and from which call failed.

Client side, by code:

===================  =====================================================
NOT_FOUND            NotFoundError (ImageNotFoundError for PullImage)
ALREADY_EXISTS       AlreadyExistsError
INVALID_ARGUMENT     InvalidArgumentError (ImagePullError for PullImage)
UNAVAILABLE          RuntimeUnavailableError (retryable)
DEADLINE_EXCEEDED    DeadlineExceededError (ImagePullError for PullImage)
UNIMPLEMENTED        UnimplementedError
RESOURCE_EXHAUSTED   ResourceExhaustedError
anything else        ImagePullError for PullImage, ContainerStartError for
                     CreateContainer/StartContainer, else ContainerRuntimeError
===================  =====================================================

A pull that fails for any reason but an unreachable runtime is ErrImagePull to
the kubelet, so every code but UNAVAILABLE becomes an :class:`ImagePullError`
there.
"""

from __future__ import annotations

import grpc

from kubelet_kit.errors import (
    AlreadyExistsError,
    ConfigurationError,
    ContainerRuntimeError,
    ContainerStartError,
    DeadlineExceededError,
    ImageNotFoundError,
    ImagePullError,
    InvalidArgumentError,
    KubeletKitError,
    NotFoundError,
    ResourceExhaustedError,
    RuntimeUnavailableError,
    UnimplementedError,
    ValidationError,
)

__all__ = ["RETRYABLE_CODES", "error_from_status", "from_rpc_error", "to_status"]

#: Codes after which an idempotent call may be sent again.
RETRYABLE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE})

_BY_CODE: dict[grpc.StatusCode, type[ContainerRuntimeError]] = {
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.UNAVAILABLE: RuntimeUnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.UNIMPLEMENTED: UnimplementedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
}

_START_METHODS = frozenset({"CreateContainer", "StartContainer"})


def error_from_status(
    code: grpc.StatusCode, details: str, method: str, target: str = ""
) -> ContainerRuntimeError:
    """The typed error for a call that ended with ``code``.

    Args:
        code: The gRPC status code.
        details: The runtime's message, kept verbatim in the error text.
        method: The CRI method name (``PullImage``, ``ContainerStatus``...).
        target: What the call was about (an id or image), named in the message.

    Returns:
        An instance of the class chosen by the table in this module's docstring.
    """
    where = f"{method} {target}".strip()
    message = f"{where}: {code.name}: {details}" if details else f"{where}: {code.name}"
    cls: type[ContainerRuntimeError]
    if method == "PullImage" and code is not grpc.StatusCode.UNAVAILABLE:
        cls = ImageNotFoundError if code is grpc.StatusCode.NOT_FOUND else ImagePullError
    elif code in _BY_CODE:
        cls = _BY_CODE[code]
    elif method in _START_METHODS:
        cls = ContainerStartError
    else:
        cls = ContainerRuntimeError
    return cls(message)


def from_rpc_error(exc: grpc.RpcError, method: str, target: str = "") -> ContainerRuntimeError:
    """Translate a failed gRPC call (``grpc.aio.AioRpcError`` or a sync ``RpcError``)."""
    code_fn = getattr(exc, "code", None)
    details_fn = getattr(exc, "details", None)
    code = code_fn() if callable(code_fn) else grpc.StatusCode.UNKNOWN
    details = details_fn() if callable(details_fn) else ""
    return error_from_status(code or grpc.StatusCode.UNKNOWN, details or "", method, target)


def to_status(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status code and details a CRI server answers for ``exc``.

    The inverse of :func:`error_from_status` as far as the codes allow: a client
    of this module maps the code back to the same class (``UNKNOWN`` from
    CreateContainer/StartContainer is a ContainerStartError again, from
    PullImage an ImagePullError).
    """
    table: list[tuple[type[BaseException], grpc.StatusCode]] = [
        (ImageNotFoundError, grpc.StatusCode.NOT_FOUND),
        (ImagePullError, grpc.StatusCode.UNKNOWN),
        (NotFoundError, grpc.StatusCode.NOT_FOUND),
        (AlreadyExistsError, grpc.StatusCode.ALREADY_EXISTS),
        (InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
        (ValidationError, grpc.StatusCode.INVALID_ARGUMENT),
        (RuntimeUnavailableError, grpc.StatusCode.UNAVAILABLE),
        (DeadlineExceededError, grpc.StatusCode.DEADLINE_EXCEEDED),
        (TimeoutError, grpc.StatusCode.DEADLINE_EXCEEDED),
        (UnimplementedError, grpc.StatusCode.UNIMPLEMENTED),
        (ResourceExhaustedError, grpc.StatusCode.RESOURCE_EXHAUSTED),
        (NotImplementedError, grpc.StatusCode.UNIMPLEMENTED),
        (ConfigurationError, grpc.StatusCode.FAILED_PRECONDITION),
        (ContainerStartError, grpc.StatusCode.UNKNOWN),
        (KubeletKitError, grpc.StatusCode.UNKNOWN),
    ]
    for cls, code in table:
        if isinstance(exc, cls):
            return code, str(exc) or type(exc).__name__
    return grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}"
