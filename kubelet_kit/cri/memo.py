"""Converted values of CRI messages, remembered by the messages' encoding.

A kubelet asks its runtime the same questions over and over: the PLEG lists
every container each relist period, and the pod workers read the status of
containers that have not changed since the last time. The runtime answers with
the same message each time, and turning a message into the SDK's frozen attrs
values costs more CPU than the gRPC call itself spends on the client side.

:class:`ConversionMemo` keeps the values converted from the latest answers under
a key that names the message exactly:

* by default the message's deterministic encoding: equal encodings are an equal
  message. (Encoded again rather than the bytes on the wire: a runtime written
  in Go sends map entries in a random order, so the same container arrives as
  different bytes from one call to the next.)
* :func:`listed_key` for the items of ListContainers and ListPodSandbox: the id
  and state. Every other field of a listed container or sandbox (metadata,
  sandbox, image, creation time, labels, annotations) is fixed when it is
  created, as the CRI has no call that changes them; only the state moves.
  This key costs a tenth of an encoding, which on a relist of every container
  on the node is most of the memo's cost.

Either way the remembered value is what a fresh conversion would give. The values are
frozen and shared between the calls that return them; their mappings are plain
dicts typed read-only (``Mapping``), and must not be changed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from kubelet_kit.errors import ConfigurationError

__all__ = ["DEFAULT_MEMO_SIZE", "ConversionMemo", "encoded_key", "listed_key"]

T = TypeVar("T")

#: Values kept per memo: a full node's containers (110 pods of a few each) with
#: room for their changes, in a few megabytes.
DEFAULT_MEMO_SIZE = 1024


def encoded_key(message: Any) -> Hashable:
    """The message's deterministic encoding (map entries in key order)."""
    data: bytes = message.SerializeToString(deterministic=True)
    return data


def listed_key(message: Any) -> Hashable:
    """Id and state of a listed container or sandbox: all that changes in one."""
    return (message.id, message.state)


class ConversionMemo(Generic[T]):
    """A bounded map from a message's key to its converted value.

    Args:
        convert: The pure conversion of one message to its value.
        size: How many values to keep; 0 turns the memo off (every lookup
            converts). When full, the oldest half is dropped.
        key: Names a message exactly (see the module's notes); its encoding
            by default.
    """

    def __init__(
        self,
        convert: Callable[[Any], T],
        size: int = DEFAULT_MEMO_SIZE,
        key: Callable[[Any], Hashable] = encoded_key,
    ) -> None:
        if size < 0:
            raise ConfigurationError(f"size: must not be negative, got {size!r}")
        self._convert = convert
        self._size = size
        self._key = key
        self._values: dict[Hashable, T] = {}

    def __len__(self) -> int:
        return len(self._values)

    def of_message(self, message: Any) -> T:
        """The value of ``message``: remembered, or converted and remembered."""
        if not self._size:
            return self._convert(message)
        key = self._key(message)
        value = self._values.get(key)
        if value is None:
            value = self._values[key] = self._convert(message)
            self._trim()
        return value

    def clear(self) -> None:
        """Forget every value."""
        self._values.clear()

    def _trim(self) -> None:
        if len(self._values) > self._size:
            # Dicts keep insertion order: the first half is the oldest.
            for key in list(itertools.islice(self._values, len(self._values) // 2)):
                del self._values[key]
