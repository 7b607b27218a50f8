"""Where configMap and secret volumes get their data: the ``ConfigSource`` protocol.

An embedding agent implements :class:`ConfigSource` over whatever holds its
configuration (an API server, a key-value store, a message bus). Two
implementations ship here: :class:`StaticConfigSource` (in memory, changeable at
run time) and :class:`ManifestConfigSource` (Kubernetes ConfigMap and Secret
manifests in a directory, re-read when the files change).

Both are also callable as ``source(kind, namespace, name)`` returning text values,
the shape the pod syncer uses to resolve ``configMapKeyRef``/``secretKeyRef``
environment variables, so one source can feed volumes and environment alike.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import attrs
import yaml

from kubelet_kit.errors import FieldError, ValidationError

__all__ = [
    "ConfigObject",
    "ConfigSource",
    "ManifestConfigSource",
    "StaticConfigSource",
    "parse_config_object",
]

log = logging.getLogger(__name__)

_SUFFIXES = (".yaml", ".yml", ".json")


@runtime_checkable
class ConfigSource(Protocol):
    """Looks up ConfigMaps and Secrets by namespace and name.

    The volume manager calls these from a worker thread, so they may block (read
    files, make a request); they are called again on every refresh, which is how
    changed data reaches mounted volumes.
    """

    def get_config_map(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        """The ConfigMap's ``data`` and ``binaryData`` merged, as bytes; None if it
        does not exist. May block; idempotent; raises only for a source that is
        unreachable or holds an invalid object (naming it)."""
        ...

    def get_secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        """The Secret's ``data`` (decoded from base64) and ``stringData``, as bytes;
        None if it does not exist. May block; idempotent; raises as
        :meth:`get_config_map`."""
        ...


def _as_text(data: Mapping[str, bytes] | None) -> Mapping[str, str] | None:
    if data is None:
        return None
    return {k: v.decode("utf-8", errors="replace") for k, v in data.items()}


class StaticConfigSource:
    """ConfigMaps and Secrets held in memory; :meth:`set_config_map` and
    :meth:`set_secret` change them (mounted volumes follow at their next refresh).

    Thread-safe: the manager reads from worker threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[tuple[str, str, str], dict[str, bytes]] = {}

    @staticmethod
    def _encode(data: Mapping[str, str | bytes]) -> dict[str, bytes]:
        return {k: v.encode() if isinstance(v, str) else bytes(v) for k, v in data.items()}

    def set_config_map(self, namespace: str, name: str, data: Mapping[str, str | bytes]) -> None:
        """Create or replace a ConfigMap (text values are stored as UTF-8)."""
        with self._lock:
            self._objects[("ConfigMap", namespace, name)] = self._encode(data)

    def set_secret(self, namespace: str, name: str, data: Mapping[str, str | bytes]) -> None:
        """Create or replace a Secret (values given decoded, not base64)."""
        with self._lock:
            self._objects[("Secret", namespace, name)] = self._encode(data)

    def delete(self, kind: Literal["ConfigMap", "Secret"], namespace: str, name: str) -> None:
        """Remove an object; a missing one is ignored."""
        with self._lock:
            self._objects.pop((kind, namespace, name), None)

    def get_config_map(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        """See :meth:`ConfigSource.get_config_map`. Never blocks for long."""
        with self._lock:
            found = self._objects.get(("ConfigMap", namespace, name))
            return dict(found) if found is not None else None

    def get_secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        """See :meth:`ConfigSource.get_secret`. Never blocks for long."""
        with self._lock:
            found = self._objects.get(("Secret", namespace, name))
            return dict(found) if found is not None else None

    def __call__(
        self, kind: Literal["ConfigMap", "Secret"], namespace: str, name: str
    ) -> Mapping[str, str] | None:
        """The pod syncer's lookup shape: text values, None when missing."""
        if kind == "ConfigMap":
            return _as_text(self.get_config_map(namespace, name))
        return _as_text(self.get_secret(namespace, name))


@attrs.frozen
class ConfigObject:
    """A ConfigMap or Secret read from a manifest.

    Attributes:
        kind: ``ConfigMap`` or ``Secret``.
        namespace: ``metadata.namespace`` (default ``default``).
        name: ``metadata.name``.
        data: Every key's value as bytes.
        source: The file it came from.
    """

    kind: str
    namespace: str
    name: str
    data: Mapping[str, bytes]
    source: str


def _b64(value: Any, path: str, errors: list[FieldError]) -> bytes:
    if not isinstance(value, str):
        errors.append(FieldError(path, "must be a base64 string"))
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        errors.append(FieldError(path, f"{value[:20]!r} is not valid base64"))
        return b""


def parse_config_object(doc: Any, source: str) -> ConfigObject | None:
    """Turn one manifest document into a :class:`ConfigObject`.

    Returns None for documents of another kind.

    Raises:
        ValidationError: naming the file and the field paths at fault.
    """
    if not isinstance(doc, dict) or doc.get("kind") not in ("ConfigMap", "Secret"):
        return None
    kind = str(doc["kind"])
    errors: list[FieldError] = []
    meta = doc.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        errors.append(FieldError("metadata.name", "Required value"))
        name = ""
    namespace = (meta.get("namespace") if isinstance(meta, dict) else None) or "default"
    data: dict[str, bytes] = {}

    def section(key: str) -> dict[str, Any]:
        value = doc.get(key) or {}
        if not isinstance(value, dict):
            errors.append(FieldError(key, "must be a map"))
            return {}
        return value

    if kind == "ConfigMap":
        for k, v in section("data").items():
            if not isinstance(v, str):
                errors.append(FieldError(f"data[{k}]", "must be a string"))
                continue
            data[str(k)] = v.encode()
        for k, v in section("binaryData").items():
            if str(k) in data:
                errors.append(FieldError(f"binaryData[{k}]", "duplicate of key in data"))
            data[str(k)] = _b64(v, f"binaryData[{k}]", errors)
    else:
        for k, v in section("data").items():
            data[str(k)] = _b64(v, f"data[{k}]", errors)
        # As the API server: stringData is merged over data.
        for k, v in section("stringData").items():
            if not isinstance(v, str):
                errors.append(FieldError(f"stringData[{k}]", "must be a string"))
                continue
            data[str(k)] = v.encode()
    if errors:
        raise ValidationError(errors, source=source)
    return ConfigObject(kind, str(namespace), name, data, source)


def _load_file(path: Path) -> list[ConfigObject]:
    text = path.read_text(encoding="utf-8")
    docs: list[Any]
    docs = [json.loads(text)] if path.suffix == ".json" else list(yaml.safe_load_all(text))
    found = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List":
            items = doc.get("items") or []
        else:
            items = [doc]
        for item in items:
            obj = parse_config_object(item, str(path))
            if obj is not None:
                found.append(obj)
    return found


class ManifestConfigSource:
    """ConfigMaps and Secrets from manifest files (``.yaml``, ``.yml``, ``.json``;
    several documents per file and ``kind: List`` allowed) in one directory.

    Files are re-read when their modification time or size changes, so editing a
    manifest updates the volumes that use it. A file that cannot be parsed is
    logged and skipped, and its objects count as missing until it is fixed; the
    error is kept in :attr:`errors` under the file's path.

    Args:
        directory: The manifest directory (need not exist yet).
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.errors: dict[str, str] = {}
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple[int, int], list[ConfigObject]]] = {}

    def _objects(self) -> list[ConfigObject]:
        with self._lock:
            try:
                paths = sorted(
                    p for p in self.directory.iterdir() if p.suffix in _SUFFIXES and p.is_file()
                )
            except OSError:
                paths = []
            seen: set[str] = set()
            result: list[ConfigObject] = []
            for path in paths:
                key = str(path)
                seen.add(key)
                try:
                    st = path.stat()
                except OSError:
                    continue
                stamp = (st.st_mtime_ns, st.st_size)
                cached = self._cache.get(key)
                if cached is None or cached[0] != stamp:
                    try:
                        objects = _load_file(path)
                        self.errors.pop(key, None)
                    except (OSError, ValueError, yaml.YAMLError, ValidationError) as exc:
                        log.warning("config manifest %s skipped: %s", path, exc)
                        self.errors[key] = str(exc)
                        objects = []
                    cached = (stamp, objects)
                    self._cache[key] = cached
                result.extend(cached[1])
            for gone in set(self._cache) - seen:
                del self._cache[gone]
                self.errors.pop(gone, None)
            return result

    def _get(self, kind: str, namespace: str, name: str) -> Mapping[str, bytes] | None:
        found = None
        for obj in self._objects():
            if (obj.kind, obj.namespace, obj.name) == (kind, namespace, name):
                found = obj  # the last file (in name order) wins
        return dict(found.data) if found is not None else None

    def get_config_map(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        """See :meth:`ConfigSource.get_config_map`. Blocks on file reads."""
        return self._get("ConfigMap", namespace, name)

    def get_secret(self, namespace: str, name: str) -> Mapping[str, bytes] | None:
        """See :meth:`ConfigSource.get_secret`. Blocks on file reads."""
        return self._get("Secret", namespace, name)

    def __call__(
        self, kind: Literal["ConfigMap", "Secret"], namespace: str, name: str
    ) -> Mapping[str, str] | None:
        """The pod syncer's lookup shape: text values, None when missing."""
        return _as_text(self._get(kind, namespace, name))
