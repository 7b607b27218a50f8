"""The two messages of gRPC's health checking protocol (``grpc.health.v1``).

The service is tiny (one request with a service name, one response with a serving
status), so its descriptor is built here with protobuf's runtime API instead of
depending on a generated package. The wire format is the protocol's: a server
implemented with ``grpcio-health-checking`` (or any other language's health
library) answers these messages.
"""

from __future__ import annotations

import enum
from typing import Final

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

__all__ = [
    "CHECK_METHOD",
    "ServingStatus",
    "decode_check_response",
    "encode_check_request",
]

#: Full method name of ``grpc.health.v1.Health/Check``.
CHECK_METHOD: Final = "/grpc.health.v1.Health/Check"


class ServingStatus(enum.IntEnum):
    """``HealthCheckResponse.ServingStatus``; names as the protocol spells them."""

    UNKNOWN = 0
    SERVING = 1
    NOT_SERVING = 2
    SERVICE_UNKNOWN = 3


def _build() -> tuple[type[message.Message], type[message.Message]]:
    fdp = descriptor_pb2.FileDescriptorProto(
        # A private pool and a file name of our own: a process that also imports
        # the generated grpc_health module (same message names) must not clash.
        name="kubelet_kit/prober/health.proto",
        package="grpc.health.v1",
        syntax="proto3",
    )
    req = fdp.message_type.add(name="HealthCheckRequest")
    req.field.add(
        name="service",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    resp = fdp.message_type.add(name="HealthCheckResponse")
    status_enum = resp.enum_type.add(name="ServingStatus")
    for status in ServingStatus:
        status_enum.value.add(name=status.name, number=status.value)
    resp.field.add(
        name="status",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_ENUM,
        type_name=".grpc.health.v1.HealthCheckResponse.ServingStatus",
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    request_cls = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("grpc.health.v1.HealthCheckRequest")
    )
    response_cls = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("grpc.health.v1.HealthCheckResponse")
    )
    return request_cls, response_cls


_Request, _Response = _build()


def encode_check_request(service: str) -> bytes:
    """Serialize a ``HealthCheckRequest`` for ``service`` (``""``: the whole server)."""
    msg = _Request()
    msg.service = service
    data: bytes = msg.SerializeToString()
    return data


def decode_check_response(data: bytes) -> int:
    """Parse a ``HealthCheckResponse`` and return its raw status number.

    The number is returned as is (not as :class:`ServingStatus`) because a newer
    server may send a value this module does not know.

    Raises:
        google.protobuf.message.DecodeError: ``data`` is not a response.
    """
    msg = _Response()
    msg.ParseFromString(data)
    return int(msg.status)
