"""ConversionMemo: an unchanged CRI message is converted once, a changed one again."""

from __future__ import annotations

import pytest

from kubelet_kit.cri.gen import api_pb2 as pb
from kubelet_kit.cri.memo import ConversionMemo, encoded_key, listed_key
from kubelet_kit.errors import ConfigurationError


class CountingConvert:
    """A conversion that records each message it converts."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, message: pb.Container) -> tuple[str, int]:
        self.seen.append(message.id)
        return (message.id, message.state)


def _container(cid: str, state: int = pb.CONTAINER_RUNNING, **labels: str) -> pb.Container:
    return pb.Container(id=cid, state=state, labels=labels)


def test_an_equal_message_is_converted_once_and_gets_the_same_value() -> None:
    convert = CountingConvert()
    memo: ConversionMemo[tuple[str, int]] = ConversionMemo(convert)
    first = memo.of_message(_container("a", app="web"))
    again = memo.of_message(_container("a", app="web"))
    assert again is first
    assert convert.seen == ["a"]


def test_any_changed_field_is_converted_afresh() -> None:
    convert = CountingConvert()
    memo: ConversionMemo[tuple[str, int]] = ConversionMemo(convert)
    memo.of_message(_container("a", app="web"))
    assert memo.of_message(_container("a", pb.CONTAINER_EXITED, app="web")) == (
        "a",
        pb.CONTAINER_EXITED,
    )
    memo.of_message(_container("a", app="db"))
    assert convert.seen == ["a", "a", "a"]


def test_the_encoded_key_ignores_the_order_map_entries_arrived_in() -> None:
    # A runtime written in Go sends map entries in a random order; the same
    # message must find the same value.
    one = _container("a", x="1").SerializeToString()
    two = pb.Container(labels={"y": "2"}).SerializeToString()
    forward = pb.Container.FromString(one + two)
    backward = pb.Container.FromString(two + one)
    assert dict(forward.labels) == dict(backward.labels) == {"x": "1", "y": "2"}
    assert encoded_key(forward) == encoded_key(backward)
    convert = CountingConvert()
    memo: ConversionMemo[tuple[str, int]] = ConversionMemo(convert)
    assert memo.of_message(forward) is memo.of_message(backward)
    assert convert.seen == ["a"]


def test_the_listed_key_is_id_and_state() -> None:
    assert listed_key(_container("a", app="web")) == ("a", pb.CONTAINER_RUNNING)
    assert listed_key(_container("a", pb.CONTAINER_EXITED)) != listed_key(_container("a"))
    assert listed_key(pb.PodSandbox(id="s", state=pb.SANDBOX_NOTREADY)) == (
        "s",
        pb.SANDBOX_NOTREADY,
    )


def test_a_full_memo_drops_its_oldest_half() -> None:
    convert = CountingConvert()
    memo: ConversionMemo[tuple[str, int]] = ConversionMemo(convert, size=4)
    for cid in "abcde":
        memo.of_message(_container(cid))
    assert len(memo) <= 4
    memo.of_message(_container("e"))  # the newest stays
    assert convert.seen == list("abcde")
    memo.of_message(_container("a"))  # the oldest went
    assert convert.seen == [*"abcde", "a"]


def test_size_zero_converts_every_time_and_remembers_nothing() -> None:
    convert = CountingConvert()
    memo: ConversionMemo[tuple[str, int]] = ConversionMemo(convert, size=0)
    memo.of_message(_container("a"))
    memo.of_message(_container("a"))
    assert convert.seen == ["a", "a"]
    assert len(memo) == 0


def test_clear_forgets_every_value() -> None:
    convert = CountingConvert()
    memo: ConversionMemo[tuple[str, int]] = ConversionMemo(convert)
    memo.of_message(_container("a"))
    memo.clear()
    memo.of_message(_container("a"))
    assert convert.seen == ["a", "a"]


def test_a_negative_size_is_refused_naming_it() -> None:
    with pytest.raises(ConfigurationError, match="size"):
        ConversionMemo(CountingConvert(), size=-1)
