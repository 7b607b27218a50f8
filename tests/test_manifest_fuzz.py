"""Fuzz the manifest path: every hostile manifest loads or is a ValidationError.

The corpus is seeded (tests/manifest_fuzz.py), so a failure is reproducible from
its case name. ``KUBELET_KIT_FUZZ_CASES`` sets the number of cases (default 2000,
well under a minute on two cores); ``KUBELET_KIT_FUZZ_SEED`` another corpus. The
corpus goes through both YAML loaders: libyaml's C loader, which manifests are
read with when it is present, and the pure-Python one it falls back to.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from manifest_fuzz import corpus

from kubelet_kit.api import load_pod, loading
from kubelet_kit.api.loading import load_api_pod, parse_documents
from kubelet_kit.config import FileSource, HTTPSource
from kubelet_kit.errors import ValidationError

CASES = int(os.environ.get("KUBELET_KIT_FUZZ_CASES", "2000"))
SEED = int(os.environ.get("KUBELET_KIT_FUZZ_SEED", "20"))
#: Cases also fed to the file and URL sources (each reads the text once more).
SOURCE_CASES = min(CASES, 300)


def outcome(call: Callable[[], Any]) -> str | None:
    """None when ``call`` returns or raises ValidationError, else what escaped."""
    try:
        call()
    except ValidationError:
        pass
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    return None


def check(data: bytes, *, whole: bool = True) -> list[str]:
    """Every way the loader reads ``data``; what escaped from each. ``whole=False``
    skips reading the bytes through :func:`load_pod` (a second parse of the same
    text), which the corpus does for most cases to stay fast."""
    found = []
    if whole and (bad := outcome(lambda: load_pod(data, source="case.yaml"))) is not None:
        found.append(f"load_pod(bytes): {bad}")
    try:
        docs = parse_documents(data.decode("utf-8"), source="case.yaml")
    except (UnicodeDecodeError, ValidationError):
        return found
    except Exception as exc:
        return [*found, f"parse_documents: {type(exc).__name__}: {exc}"]
    for index, obj in docs:
        if (bad := outcome(lambda o=obj: load_pod(o, source="case.yaml"))) is not None:
            found.append(f"load_pod(document {index}): {bad}")
        if isinstance(obj, Mapping) and (bad := outcome(lambda o=obj: load_api_pod(o))) is not None:
            found.append(f"load_api_pod(document {index}): {bad}")
    return found


@pytest.fixture(params=["c", "pure"])
def yaml_loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs once with each YAML loader."""
    if request.param == "c":
        if loading._c_loader() is None:
            pytest.skip("PyYAML has no libyaml C loader here")
    else:
        monkeypatch.setattr(loading, "_yaml_loader", lambda: loading._ManifestLoader)
    return str(request.param)


def test_every_hostile_manifest_loads_or_is_a_validation_error(yaml_loader: str) -> None:
    crashes = {
        name: found
        for i, (name, data) in enumerate(corpus(SEED, CASES))
        if (found := check(data, whole=i % 4 == 0))
    }
    assert not crashes, f"{len(crashes)} of {CASES} cases crashed: {crashes}"


def test_the_sources_report_each_hostile_file_and_never_raise(
    tmp_path: Path, yaml_loader: str
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    http = HTTPSource("http://manifests.example/pods")
    escaped: dict[str, str] = {}
    for name, data in corpus(SEED, SOURCE_CASES):
        (manifests / f"{name}.yaml").write_bytes(data)
        if (bad := outcome(lambda d=data: http.parse(d))) is not None:
            escaped[name] = f"HTTPSource.parse: {bad}"
    assert not escaped, escaped
    source = FileSource(manifests, node_name="fuzz")
    snapshot = source.read()  # must not raise
    good = {Path(p.source).stem for p in snapshot.pods}
    named = {Path(line.split(":", 1)[0].split("[", 1)[0]).stem for line in snapshot.problems}
    # every file is either running or reported by name
    assert good | named == {f"{name}" for name, _ in corpus(SEED, SOURCE_CASES)}


def _read_with(loader: type[Any], data: bytes) -> str:
    """What the manifest path makes of ``data`` with one YAML loader: the pods'
    dicts, or that it failed."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8"
    original = loading._yaml_loader
    loading._yaml_loader = lambda: loader  # type: ignore[assignment]
    try:
        return repr([load_pod(obj).to_dict() for _, obj in parse_documents(text)])
    except ValidationError:
        return "rejected"
    finally:
        loading._yaml_loader = original  # type: ignore[assignment]


def test_both_yaml_loaders_read_the_same_pods_from_the_same_manifests() -> None:
    c_loader = loading._c_loader()
    if c_loader is None:
        pytest.skip("PyYAML has no libyaml C loader here")
    differ = {}
    for name, data in corpus(SEED, min(CASES, 500)):
        if len(data) > 100_000:  # the oversized cases: slow in pure Python, no news
            continue
        pure, fast = _read_with(loading._ManifestLoader, data), _read_with(c_loader, data)
        # the loaders may disagree on what is malformed YAML (libyaml is stricter
        # about a few characters), never on what a manifest they both read holds
        if "rejected" not in (pure, fast) and pure != fast:
            differ[name] = (pure[:200], fast[:200])
    assert not differ, differ


def test_manifests_are_read_with_the_c_loader_when_pyyaml_has_one() -> None:
    import yaml

    if not hasattr(yaml, "CSafeLoader"):
        pytest.skip("PyYAML has no libyaml C loader here")
    assert loading._yaml_loader() is loading._c_loader()
    assert issubclass(loading._yaml_loader(), yaml.CSafeLoader)


def test_the_c_loader_reports_nesting_past_libyamls_bound_as_too_deep() -> None:
    if loading._c_loader() is None:
        pytest.skip("PyYAML has no libyaml C loader here")
    with pytest.raises(ValidationError, match="nests deeper than 100 levels"):
        parse_documents("[" * 5000 + "]" * 5000)
    with pytest.raises(ValidationError, match="nests deeper than 100 levels"):
        load_pod("spec:\n  x: " + "[" * 300 + "]" * 300)
