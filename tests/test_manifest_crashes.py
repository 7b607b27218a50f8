"""One test per distinct crash the manifest fuzzer found (tests/test_manifest_fuzz.py).

Each input used to escape the loader as something other than ValidationError (a
ValueError, KeyError, IndexError or TypeError from PyYAML's constructors, the JSON
decoder, ``format_value``, ``Quantity.parse`` or ``static_pod_uid``), and dropped
into a static-pod directory it ended the agent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet_kit.api import load_pod
from kubelet_kit.api.loading import read_manifests, static_pod_uid
from kubelet_kit.api.quantity import Quantity
from kubelet_kit.api.serde import format_value
from kubelet_kit.config import FileSource, HTTPSource
from kubelet_kit.errors import QuantityError, ValidationError

MAX_MANIFEST_BYTES = 10 * 1024 * 1024
HEAD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"


def pod_yaml(container_extra: str = "", tail: str = "") -> str:
    return f"{HEAD}spec:\n  containers:\n  - name: c\n    image: busybox\n{container_extra}{tail}"


def rejected(text: str | bytes) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        load_pod(text, source="m.yaml")
    return info.value


def http_rejects(text: str) -> None:
    with pytest.raises(ValidationError):
        HTTPSource("http://h/m").parse(text.encode())


@pytest.mark.parametrize("value", ["!!int 0xZZ", "!!int 12abc", "!!int 0b2", "!!int 1:x"])
def test_a_bad_int_tag_is_a_validation_error(value: str) -> None:
    err = rejected(pod_yaml(tail=f"  terminationGracePeriodSeconds: {value}\n"))
    assert "line 8" in str(err)
    http_rejects(pod_yaml(tail=f"  terminationGracePeriodSeconds: {value}\n"))


def test_an_empty_int_tag_is_a_validation_error() -> None:
    # PyYAML indexes the empty string (IndexError)
    rejected(pod_yaml(tail="  terminationGracePeriodSeconds: !!int ''\n"))


def test_a_bool_tag_on_a_non_boolean_is_a_validation_error() -> None:
    # PyYAML looks "maybe" up in its table of booleans (KeyError)
    err = rejected(pod_yaml(tail="  hostNetwork: !!bool maybe\n"))
    assert "maybe" in str(err)


def test_a_float_tag_on_a_non_number_is_a_validation_error() -> None:
    rejected(pod_yaml(tail="  terminationGracePeriodSeconds: !!float nope\n"))


@pytest.mark.parametrize(
    "value",
    [
        "!!timestamp 2020-13-45",
        "2020-02-30",
        "!!timestamp 2020-01-01T25:00:00Z",
        "2001-12-14t21:59:43.10-99:99",
        "!!timestamp 0000-01-01",
    ],
)
def test_an_impossible_timestamp_is_a_validation_error(value: str) -> None:
    rejected(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"
        f"  creationTimestamp: {value}\nspec: {{containers: [{{name: c, image: b}}]}}\n"
    )


def test_an_integer_of_thousands_of_digits_in_yaml_is_a_validation_error() -> None:
    err = rejected(pod_yaml(tail=f"  terminationGracePeriodSeconds: {'9' * 5000}\n"))
    assert "line 8" in str(err)


def test_an_integer_of_thousands_of_digits_in_json_is_a_validation_error() -> None:
    text = (
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": '
        '{"containers": [{"name": "c", "image": "b", "ports": [{"containerPort": '
        + "9" * 5000
        + "}]}]}}"
    )
    err = rejected(text)
    assert "invalid JSON" in str(err)


def test_a_huge_hex_integer_in_a_typed_field_is_reported_with_its_path() -> None:
    # Hex digits convert without Python's decimal-digit limit, so the value is
    # built, and then printing it in the error message used to fail.
    err = rejected(pod_yaml(tail=f"  terminationGracePeriodSeconds: 0x{'f' * 5000}\n"))
    assert any(e.path == "spec.terminationGracePeriodSeconds" for e in err.errors), err.errors


def test_format_value_prints_a_huge_integer() -> None:
    text = format_value(1 << 20000)
    assert "digits" in text and len(text) < 100


def test_quantity_parse_of_thousands_of_digits_is_a_quantity_error() -> None:
    with pytest.raises(QuantityError):
        Quantity.parse("9" * 5000)
    with pytest.raises(QuantityError):
        Quantity.parse("1." + "9" * 5000 + "Mi")


def test_a_quantity_of_thousands_of_digits_is_reported_with_its_path() -> None:
    err = rejected(pod_yaml(f'    resources: {{limits: {{cpu: "{"9" * 5000}"}}}}\n'))
    assert [e.path for e in err.errors] == ["spec.containers[0].resources.limits.cpu"]


def test_a_float_key_beside_string_keys_loads_and_hashes() -> None:
    # A pod that came without a uid gets one hashed from its content; mixed key
    # types used to make the canonical JSON's key sort fail (TypeError).
    pod = load_pod(pod_yaml(tail="x: {1.5: a, b: c, null: d, true: e}\n"), source="m.yaml")
    assert len(pod.metadata.uid) == 32
    assert set(pod.extra["x"]) == {"1.5", "b", "null", "true"}
    assert len(static_pod_uid({"metadata": {}, "x": {1.5: "a", "b": "c"}}, source="f")) == 32


def test_a_huge_integer_in_an_unknown_field_does_not_break_the_uid() -> None:
    err = rejected(pod_yaml(tail=f"x: 0x{'f' * 5000}\n"))
    assert [e.path for e in err.errors] == ["x"]


def test_an_oversized_file_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(pod_yaml().encode() + b"#" * MAX_MANIFEST_BYTES)
    (result,) = read_manifests(big)
    assert result.pod is None
    assert "larger than" in str(result.errors[0])
    snapshot = FileSource(big).read()
    assert snapshot.pods == () and "big.yaml" in snapshot.problems[0]
