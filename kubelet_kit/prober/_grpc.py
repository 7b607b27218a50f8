"""The gRPC health probe handler: ``grpc.health.v1.Health/Check`` over plaintext.

The kubelet's messages are in :mod:`kubelet_kit.prober.probers`' docstring; this
module holds the handler alone because it is the one that needs grpc, which the
dispatcher imports only for a probe with ``grpc``.
"""

from __future__ import annotations

from typing import Final

import grpc
import grpc.aio

from kubelet_kit.clock import Clock
from kubelet_kit.prober.health import CHECK_METHOD, ServingStatus, decode_check_response
from kubelet_kit.prober.health import encode_check_request as _encode_check_request
from kubelet_kit.prober.probers import (
    KUBE_PROBE_USER_AGENT,
    ProbeOutcome,
    _bounded,
    _failure,
    _go_seconds,
    _success,
    join_host_port,
)

__all__ = ["grpc_probe"]

# Go's codes.Code names, which the kubelet's messages print.
_GO_CODE_NAMES: Final = {
    grpc.StatusCode.CANCELLED: "Canceled",
}


def _go_code(code: grpc.StatusCode) -> str:
    if code in _GO_CODE_NAMES:
        return _GO_CODE_NAMES[code]
    return "".join(part.capitalize() for part in code.name.split("_"))


def _status_name(value: int) -> str:
    try:
        return ServingStatus(value).name
    except ValueError:
        return str(value)  # Go prints an unknown enum value as its number


async def grpc_probe(
    host: str,
    port: int,
    service: str,
    timeout: float,
    *,
    clock: Clock,
    user_agent: str = KUBE_PROBE_USER_AGENT,
) -> ProbeOutcome:
    """Call ``grpc.health.v1.Health/Check`` for ``service`` on ``host:port``.

    Connecting and the call share ``timeout``. Plaintext only, as the kubelet.
    """
    addr = join_host_port(host, port)
    deadline = clock.monotonic() + timeout
    channel = grpc.aio.insecure_channel(
        addr,
        options=[
            ("grpc.primary_user_agent", user_agent),
            ("grpc.enable_retries", 0),
            ("grpc.use_local_subchannel_pool", 1),
        ],
    )
    try:
        try:
            await _bounded(clock, channel.channel_ready(), timeout)
        except TimeoutError:
            return _failure(
                f'timeout: failed to connect service "{addr}" within {_go_seconds(timeout)}: '
                "context deadline exceeded"
            )
        remaining = max(deadline - clock.monotonic(), 0.001)
        check = channel.unary_unary(CHECK_METHOD)
        try:
            data = await _bounded(
                clock, check(_encode_check_request(service), timeout=remaining), remaining
            )
        except TimeoutError:
            return _failure(f"timeout: health rpc did not complete within {_go_seconds(timeout)}")
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            if code is grpc.StatusCode.UNIMPLEMENTED:
                return _failure(
                    "error: this server does not implement the grpc health protocol "
                    f"(grpc.health.v1.Health): {exc.details()}"
                )
            if code is grpc.StatusCode.DEADLINE_EXCEEDED:
                return _failure(
                    f"timeout: health rpc did not complete within {_go_seconds(timeout)}"
                )
            return _failure(
                "error: health rpc probe failed: "
                f"rpc error: code = {_go_code(code)} desc = {exc.details()}"
            )
        try:
            status = decode_check_response(data)
        except Exception as exc:  # a malformed answer is the server's failure
            return _failure(f"error: health rpc probe failed: {exc}")
        if status != ServingStatus.SERVING:
            return _failure(f'service unhealthy (responded with "{_status_name(status)}")')
        return _success("service healthy")
    finally:
        await channel.close()
