"""ConfigSource implementations: ConfigMap/Secret manifests from a directory, and in memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubelet_kit.errors import ValidationError
from kubelet_kit.volume import ConfigSource, ManifestConfigSource, StaticConfigSource
from kubelet_kit.volume.sources import parse_config_object

MANIFESTS = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: prod}
data:
  settings.ini: "[main]\\nmode=fast\\n"
binaryData:
  logo.bin: AAEC/w==
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
type: Opaque
data:
  user: YWRtaW4=
  pass: b2xk
stringData:
  pass: new-pass
---
apiVersion: v1
kind: Pod
metadata: {name: ignored}
"""


def test_reads_config_maps_and_secrets(tmp_path: Path) -> None:
    (tmp_path / "objects.yaml").write_text(MANIFESTS)
    (tmp_path / "list.json").write_text(
        json.dumps(
            {
                "kind": "List",
                "items": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": "from-json"},
                        "data": {"k": "v"},
                    },
                ],
            }
        )
    )
    (tmp_path / "notes.txt").write_text("kind: ConfigMap")  # not a manifest suffix
    source = ManifestConfigSource(tmp_path)
    assert isinstance(source, ConfigSource)
    assert source.get_config_map("prod", "app") == {
        "settings.ini": b"[main]\nmode=fast\n",
        "logo.bin": b"\x00\x01\x02\xff",
    }
    assert source.get_config_map("default", "app") is None  # namespaced
    # stringData is merged over data, as the API server does.
    assert source.get_secret("default", "creds") == {"user": b"admin", "pass": b"new-pass"}
    assert source.get_config_map("default", "from-json") == {"k": b"v"}
    assert source.get_secret("default", "nope") is None
    # The pod syncer's lookup shape: text values.
    assert source("Secret", "default", "creds") == {"user": "admin", "pass": "new-pass"}
    assert source("ConfigMap", "default", "missing") is None


def test_changes_to_files_are_seen(tmp_path: Path) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text("kind: ConfigMap\nmetadata: {name: c}\ndata: {k: one}\n")
    source = ManifestConfigSource(tmp_path)
    assert source.get_config_map("default", "c") == {"k": b"one"}
    path.write_text("kind: ConfigMap\nmetadata: {name: c}\ndata: {k: two, extra: x}\n")
    os.utime(path, ns=(1, 2_000_000_000))  # a different mtime even on a coarse clock
    assert source.get_config_map("default", "c") == {"k": b"two", "extra": b"x"}
    path.unlink()
    assert source.get_config_map("default", "c") is None


def test_a_bad_file_is_skipped_and_reported(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "kind: Secret\nmetadata: {name: s}\ndata: {token: 'not base64!'}\n"
    )
    (tmp_path / "good.yaml").write_text("kind: ConfigMap\nmetadata: {name: c}\ndata: {k: v}\n")
    source = ManifestConfigSource(tmp_path)
    assert source.get_secret("default", "s") is None
    assert source.get_config_map("default", "c") == {"k": b"v"}
    [(where, message)] = source.errors.items()
    assert where.endswith("bad.yaml") and "data[token]" in message and "base64" in message


def test_parse_errors_name_the_fields() -> None:
    with pytest.raises(ValidationError) as err:
        parse_config_object(
            {"kind": "ConfigMap", "metadata": {}, "data": {"n": 5}, "binaryData": {"b": "%%"}},
            "x.yaml",
        )
    paths = [e.path for e in err.value.errors]
    assert paths == ["metadata.name", "data[n]", "binaryData[b]"]
    assert err.value.source == "x.yaml"
    assert parse_config_object({"kind": "Pod"}, "x") is None


def test_static_source_is_changeable() -> None:
    source = StaticConfigSource()
    assert isinstance(source, ConfigSource)
    source.set_config_map("ns", "c", {"a": "1", "b": b"\x00"})
    assert source.get_config_map("ns", "c") == {"a": b"1", "b": b"\x00"}
    source.set_secret("ns", "s", {"p": "x"})
    assert source("Secret", "ns", "s") == {"p": "x"}
    source.delete("Secret", "ns", "s")
    assert source.get_secret("ns", "s") is None


def test_the_volume_package_imports_no_other_subsystem() -> None:
    code = (
        "import sys, kubelet_kit.volume\n"
        "others = ('cri', 'pleg', 'cm', 'prober', 'eviction', 'status', 'podsync', 'runtimes',"
        " 'config', 'server', 'kubelet', 'podworkers', 'testing')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[:2] in "
        "[['kubelet_kit', o] for o in others]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
