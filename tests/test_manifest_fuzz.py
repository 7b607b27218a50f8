"""Fuzz the manifest path: every hostile manifest loads or is a ValidationError.

The corpus is seeded (tests/manifest_fuzz.py), so a failure is reproducible from
its case name. ``KUBELET_KIT_FUZZ_CASES`` sets the number of cases (default 2000,
well under a minute on two cores); ``KUBELET_KIT_FUZZ_SEED`` another corpus.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from manifest_fuzz import corpus

from kubelet_kit.api import load_pod
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
        if isinstance(obj, Mapping) and (
                bad := outcome(lambda o=obj: load_api_pod(o))) is not None:
            found.append(f"load_api_pod(document {index}): {bad}")
    return found


def test_every_hostile_manifest_loads_or_is_a_validation_error() -> None:
    crashes = {name: found for i, (name, data) in enumerate(corpus(SEED, CASES))
               if (found := check(data, whole=i % 4 == 0))}
    assert not crashes, f"{len(crashes)} of {CASES} cases crashed: {crashes}"


def test_the_sources_report_each_hostile_file_and_never_raise(tmp_path: Path) -> None:
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
