"""Loading pod manifests: dicts, YAML or JSON text, files and directories.

What a file may hold: one pod, several YAML documents (``---``), a ``kind: List``
whose ``items`` are pods, or the same in JSON. Empty documents are skipped. Every pod
remembers where it came from (``Pod.source``: the file path).

Bad input never escapes as anything but :class:`~kubelet_kit.errors.ValidationError`,
whose ``errors`` list every problem found (type errors while decoding and every
validation rule), each with its Kubernetes-style field path.

Unknown fields are tolerated and kept (``extra`` on each model; written back by
``to_dict``), like the kubelet's file source, which decodes without rejecting unknown
fields. ``strict=True`` reports them as errors instead (``unknown field "..."``), as
``kubectl --validate=strict`` does.

A pod without ``metadata.uid`` gets a deterministic one (:func:`static_pod_uid`),
derived like the kubelet derives it for static pods: an MD5 over the defaulted pod,
then ``host:<nodeName>`` and ``file:<source>`` (``url:<source>`` for URLs). The bytes
hashed are this package's canonical JSON of the pod, not Go's object dump, so the
values differ from the kubelet's; the properties are the same: same input, same uid;
other content, source or node, another uid.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml

from kubelet_kit.api.pod import OTHER_VOLUME_SOURCES, Container, Pod
from kubelet_kit.api.serde import child_path, decode
from kubelet_kit.api.validation import validate_pod
from kubelet_kit.errors import FieldError, ValidationError

__all__ = [
    "MANIFEST_SUFFIXES",
    "MAX_MANIFEST_BYTES",
    "ManifestResult",
    "apply_defaults",
    "load_api_pod",
    "load_manifests",
    "load_pod",
    "manifest_files",
    "parse_documents",
    "read_manifest_text",
    "read_manifests",
    "static_pod_uid",
]

#: File name endings read from a directory (other files there are ignored, and so
#: are hidden files, as the kubelet ignores them).
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

#: Kubernetes fields that this package keeps as data in ``extra`` rather than
#: modelling (paths without list indices); ``strict=True`` does not report them.
_PASSTHROUGH = frozenset(
    {
        "metadata.managedFields",
        "metadata.finalizers",
        "metadata.selfLink",
        "spec.ephemeralContainers",
        "spec.schedulingGates",
        "spec.hostUsers",
        "spec.setHostnameAsFQDN",
        "spec.topologySpreadConstraints",
        "spec.resourceClaims",
        "spec.serviceAccount",
        "spec.hostnameOverride",
        "spec.deprecatedServiceAccount",
        "status.resize",
        "status.resourceClaimStatuses",
        "status.observedGeneration",
        "status.extendedResourceClaimStatus",
        "spec.volumes.projected.sources.clusterTrustBundle",
        "spec.volumes.projected.sources.podCertificate",
        *(
            f"spec.{group}.{field}"
            for group in ("containers", "initContainers")
            for field in ("lifecycle.stopSignal", "restartPolicyRules")
        ),
        *(
            f"status.{group}.{field}"
            for group in ("containerStatuses", "initContainerStatuses")
            for field in ("user", "volumeMounts", "allocatedResourcesStatus", "stopSignal")
        ),
        *(f"spec.volumes.{kind}" for kind in OTHER_VOLUME_SOURCES),
    }
)
_INDEX = re.compile(r"\[[^\]]*\]")


def _is_passthrough(path: str) -> bool:
    return _INDEX.sub("", path) in _PASSTHROUGH


@attrs.frozen
class ManifestResult:
    """One pod document read from a file: the pod, or the problems found in it.

    Attributes:
        source: The file path (or ``"<input>"``).
        index: Position of the document within the file (0-based) or None when the
            file holds a single object.
        pod: The loaded pod, or None when there were errors.
        errors: Every problem found in this document.
    """

    source: str
    index: int | None
    pod: Pod | None
    errors: tuple[FieldError, ...] = ()

    @property
    def location(self) -> str:
        """``<file>`` or ``<file>[<index>]`` for multi-document files."""
        return self.source if self.index is None else f"{self.source}[{self.index}]"


def static_pod_uid(
    pod: Pod | Mapping[str, Any],
    *,
    source: str | None,
    node_name: str = "",
    is_file: bool = True,
) -> str:
    """A deterministic uid for a pod that came without one (static pods).

    Args:
        pod: The (defaulted) pod, or its JSON shape. Its own uid is ignored.
        source: The file path or URL it was read from.
        node_name: The node's name; the kubelet hashes ``host:<nodeName>`` for files.
        is_file: Whether ``source`` is a file (else a URL, hashed as ``url:<source>``).

    Returns:
        32 lowercase hex digits (an MD5 digest), as the kubelet's generated uids are.
    """
    raw = pod.to_dict() if isinstance(pod, Pod) else pod
    # String keys only: a key of another type beside string keys would break the
    # sorted dump below, and JSON would turn it into a string anyway.
    data = {_json_key(k): v for k, v in _hashable(raw).items()}
    meta = dict(data.get("metadata") or {})
    meta.pop("uid", None)
    data["metadata"] = meta
    hasher = hashlib.md5(usedforsecurity=False)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    hasher.update(text.encode("utf-8", "surrogatepass"))
    if is_file:
        hasher.update(f"host:{node_name}".encode())
        hasher.update(f"file:{source or ''}".encode())
    else:
        hasher.update(f"url:{source or ''}".encode())
    return hasher.hexdigest()


def _hashable(value: Any) -> Any:
    """``value`` with string keys throughout and every int printable, for hashing."""
    if isinstance(value, Mapping):
        return {_json_key(k): _hashable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_hashable(v) for v in value]
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        return hex(value)  # hex is never refused, unlike decimal
    return value


def apply_defaults(pod: Pod) -> Pod:
    """Apply the API defaults that depend on several fields (what attrs defaults cannot).

    The rules: a container resource (and a pod-level one) with a limit but no
    request gets the limit as its request; with ``hostNetwork`` a container port
    without ``hostPort`` gets its ``containerPort`` as ``hostPort``. The loader calls
    this; call it yourself for pods you build in code to get the API server's view.
    """
    spec = pod.spec

    def fix(cs: tuple[Container, ...]) -> tuple[Container, ...]:
        out = []
        for c in cs:
            c = attrs.evolve(c, resources=c.resources.with_defaults())
            if spec.host_network:
                ports = tuple(
                    p if p.host_port else attrs.evolve(p, host_port=p.container_port)
                    for p in c.ports
                )
                c = attrs.evolve(c, ports=ports)
            out.append(c)
        return tuple(out)

    spec = attrs.evolve(
        spec,
        containers=fix(spec.containers),
        init_containers=fix(spec.init_containers),
        resources=spec.resources.with_defaults() if spec.resources is not None else None,
    )
    return attrs.evolve(pod, spec=spec)


#: Largest manifest read, in bytes (characters for text): the kubelet's own cap on
#: a manifest URL's body (``maxConfigLength`` in ``pkg/kubelet/config``, 10 MiB),
#: applied here to files too, which the kubelet reads whole.
MAX_MANIFEST_BYTES = 10 * 1024 * 1024

#: Deepest nesting and most values accepted in one manifest. A real pod nests about
#: a dozen levels and holds hundreds of values; the limits keep recursive decoding far
#: from Python's recursion limit and stop YAML alias bombs (a few lines of aliases
#: that expand to billions of values): values are counted as expanded, each alias
#: as often as it is used, so the expansion is what is bounded. go-yaml bounds the
#: same attack with a ratio of aliases to values ("excessive aliasing").
_MAX_DEPTH = 100
_MAX_NODES = 200_000
#: Longest integer accepted, in decimal digits: far beyond int64 (so a quantity
#: written as a bare number still loads), well short of the 4300 digits past which
#: Python refuses to print an int (which every error message and hash would do).
_MAX_INT_DIGITS = 1000
_MAX_INT_BITS = int(_MAX_INT_DIGITS / 0.30103)  # log2(10) bits per digit
_TOO_DEEP = f"the manifest nests deeper than {_MAX_DEPTH} levels"
_TOO_BIG = f"the manifest holds more than {_MAX_NODES} values"
_TOO_LONG_INT = f"Invalid value: an integer of more than {_MAX_INT_DIGITS} digits"


def _too_large(size: int) -> str:
    return f"the manifest is larger than {MAX_MANIFEST_BYTES} bytes ({size})"


def _json_key(key: Any) -> str:
    """A mapping key as JSON spells it: YAML allows keys of any scalar type, and a
    manifest is a JSON object, so ``1.5``, ``true`` and ``null`` become the strings
    ``"1.5"``, ``"true"`` and ``"null"`` (as sigs.k8s.io/yaml converts them)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    return str(key)


def _normalize(value: Any) -> tuple[Any, str, str | None]:
    """``value`` as JSON shapes it (string keys), or the first limit it breaks.

    Returns:
        ``(normalized, path, problem)``: ``problem`` is None when every limit
        holds; otherwise it says which is broken, at ``path``.
    """
    seen = 0

    def walk(item: Any, depth: int) -> Any:
        nonlocal seen
        seen += 1
        if depth > _MAX_DEPTH:
            raise _Limit(_TOO_DEEP, located=False)
        if seen > _MAX_NODES:
            raise _Limit(_TOO_BIG, located=False)
        if isinstance(item, Mapping):
            out = {}
            for k, v in item.items():
                key = _json_key(k)
                try:
                    out[key] = walk(v, depth + 1)
                except _Limit as limit:
                    limit.steps.append(key)
                    raise
            return out
        if isinstance(item, list | tuple):
            items = []
            for i, v in enumerate(item):
                try:
                    items.append(walk(v, depth + 1))
                except _Limit as limit:
                    limit.steps.append(i)
                    raise
            return items
        if isinstance(item, int) and item.bit_length() > _MAX_INT_BITS:
            raise _Limit(_TOO_LONG_INT, located=True)
        return item

    try:
        # (depth is bounded by _MAX_DEPTH, so the recursion stays shallow)
        return walk(value, 0), "", None
    except _Limit as limit:
        return None, limit.path(), limit.message


class _Limit(Exception):
    """A limit of :func:`_normalize` was broken (internal; never escapes).

    The path is collected on the way out (innermost step first), so that the
    walk builds no path for the values that are fine; limits of the whole
    manifest (depth, size) are reported without one.
    """

    def __init__(self, message: str, *, located: bool) -> None:
        super().__init__(message)
        self.message = message
        self.located = located
        self.steps: list[str | int] = []

    def path(self) -> str:
        out = ""
        for step in reversed(self.steps if self.located else []):
            out = f"{out}[{step}]" if isinstance(step, int) else child_path(out, step)
        return out


class _Construction(yaml.constructor.SafeConstructor):
    """PyYAML's safe constructor, made to fail only with :class:`yaml.YAMLError`.

    PyYAML's scalar constructors trust the tag: ``!!int 0xZZ``, ``!!bool maybe``,
    ``!!float x``, an impossible ``!!timestamp`` or an int of more digits than
    Python converts raise ValueError, KeyError or IndexError from inside the
    library. Those become a ConstructorError at the node's line and column, like
    any other YAML mistake. Both loaders below construct through this class.
    """

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, KeyError, IndexError, TypeError, OverflowError) as exc:
            value = node.value if isinstance(node, yaml.ScalarNode) else ""
            shown = value if len(value) <= 40 else value[:40] + "..."
            tag = node.tag.rsplit(":", 1)[-1]
            reason = "too many digits" if "digits" in str(exc) else f"not a valid {tag}"
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {shown!r} as !!{tag}: {reason}", node.start_mark
            ) from None


class _ManifestLoader(_Construction, yaml.SafeLoader):
    """The pure-Python loader: nesting is bounded while composing, before Python's
    recursion limit is anywhere near (its composer recurses once per level)."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > _MAX_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(None, None, _TOO_DEEP, mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


#: libyaml's own bound on nesting, which its scanner enforces (since libyaml 0.2.5)
#: before the C composer, which recurses once per level in C, could exhaust the
#: stack. Deeper than _MAX_DEPTH but shallower than this is caught by _normalize.
_LIBYAML_NESTING_PROBLEM = "exceeded maximum nesting depth"
_C_LOADER: list[type[Any] | None] = []


def _c_loader() -> type[Any] | None:
    """libyaml's C loader with :class:`_Construction`, or None when it is missing
    or lets nesting grow without a bound (libyaml older than 0.2.5). The C parser
    reads the same YAML about ten times faster than the pure-Python one."""
    if not _C_LOADER:
        loader: type[Any] | None = None
        base = getattr(yaml, "CSafeLoader", None)
        if base is not None:
            candidate = type(
                "_CManifestLoader",
                (_Construction, base),
                {"__doc__": "libyaml's parser and composer with the safe construction."},
            )
            try:
                yaml.load("[" * 2000 + "]" * 2000, Loader=candidate)
            except yaml.YAMLError as exc:
                if _LIBYAML_NESTING_PROBLEM in str(exc):
                    loader = candidate
        _C_LOADER.append(loader)
    return _C_LOADER[0]


def _yaml_loader() -> type[Any]:
    """The YAML loader manifests are read with: libyaml's C loader when present (and
    it bounds nesting), else PyYAML's pure-Python one. Both take the same YAML to
    the same objects and fail only with :class:`yaml.YAMLError`."""
    return _c_loader() or _ManifestLoader


def _covered(path: str, bad: list[str]) -> bool:
    """Whether ``path`` lies at or under a path that already failed to decode."""
    return any(path == b or path.startswith((b + ".", b + "[")) for b in bad)


def _pod_from_object(
    data: Any, *, source: str | None, node_name: str, strict: bool
) -> tuple[Pod | None, list[FieldError]]:
    errors: list[FieldError] = []
    unknown: list[str] = []
    if not isinstance(data, Mapping):
        decode(Pod, data, errors=errors)
        return None, errors
    data, where, problem = _normalize(data)
    if problem:
        return None, [FieldError(where, problem)]
    pod = decode(Pod, data, errors=errors, unknown=unknown)
    # The model defaults apiVersion and kind; a manifest must still name them.
    for key in ("apiVersion", "kind"):
        if not data.get(key):
            errors.append(FieldError(key, "Required value"))
    bad = [e.path for e in errors]
    # Validation runs even after decode errors so that every problem is reported;
    # a field that failed to decode is not reported a second time.
    errors.extend(e for e in validate_pod(pod) if not _covered(e.path, bad))
    if strict:
        errors.extend(
            FieldError(p, f'unknown field "{p}"') for p in unknown if not _is_passthrough(p)
        )
    if errors:
        return None, errors
    pod = apply_defaults(pod)
    if not pod.metadata.uid:
        uid = static_pod_uid(pod, source=source, node_name=node_name)
        pod = attrs.evolve(pod, metadata=attrs.evolve(pod.metadata, uid=uid))
    return attrs.evolve(pod, source=source), []


def parse_documents(text: str, *, source: str = "<input>") -> list[tuple[int | None, Any]]:
    """Split manifest text into objects: JSON, or YAML with one or more documents.

    A ``kind: List`` (or ``PodList``) is expanded into its ``items``. Empty YAML
    documents are skipped.

    Args:
        text: The file's content.
        source: Name used in error messages.

    Returns:
        ``(index, object)`` pairs; ``index`` is None when the text holds one object.

    Raises:
        ValidationError: The text is not valid JSON/YAML (the message gives the line
            and column) or a List has no ``items`` list.
    """
    if len(text) > MAX_MANIFEST_BYTES:
        raise ValidationError.single("", _too_large(len(text)), source=source)
    stripped = text.lstrip()
    objects: list[Any]
    if stripped.startswith(("{", "[")):
        try:
            objects = [json.loads(text)]
        except json.JSONDecodeError as exc:
            raise ValidationError.single(
                "",
                f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
                source=source,
            ) from None
        except RecursionError:
            raise ValidationError.single("", _TOO_DEEP, source=source) from None
        except ValueError:
            # the one other failure of the decoder: an int past Python's digit limit
            raise ValidationError.single(
                "", f"invalid JSON: {_TOO_LONG_INT}", source=source
            ) from None
    else:
        try:
            objects = [d for d in yaml.load_all(text, Loader=_yaml_loader()) if d is not None]
        except RecursionError:
            raise ValidationError.single("", _TOO_DEEP, source=source) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            problem = getattr(exc, "problem", None) or str(exc)
            if _LIBYAML_NESTING_PROBLEM in problem:
                problem = _TOO_DEEP
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise ValidationError.single(
                "", f"invalid YAML: {problem}{where}", source=source
            ) from None
    expanded: list[Any] = []
    for obj in objects:
        if isinstance(obj, Mapping) and obj.get("kind") in ("List", "PodList"):
            items = obj.get("items")
            if not isinstance(items, list):
                raise ValidationError.single(
                    "items", "Required value: a List needs an items list", source=source
                )
            expanded.extend(items)
        else:
            expanded.append(obj)
    if (
        len(expanded) == 1
        and len(objects) == 1
        and not (isinstance(objects[0], Mapping) and objects[0].get("kind") in ("List", "PodList"))
    ):
        return [(None, expanded[0])]
    return list(enumerate(expanded))


def load_pod(
    data: Mapping[str, Any] | str | bytes,
    *,
    source: str | None = None,
    node_name: str = "",
    strict: bool = False,
) -> Pod:
    """Load one pod from a dict, or YAML or JSON text, applying Kubernetes' defaults.

    Args:
        data: Parsed JSON (a mapping in camelCase) or the manifest text.
        source: Where it came from (file path or URL); kept as ``Pod.source`` and
            used in the generated uid.
        node_name: The node's name, used in the generated uid.
        strict: Report unknown fields as errors instead of keeping them.

    Returns:
        The pod, with ``metadata.uid`` generated if it had none.

    Raises:
        ValidationError: Anything wrong with the input; ``errors`` lists it all.
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError.single("", f"not UTF-8 text: {exc}", source=source) from None
    obj: Any
    if isinstance(data, str):
        docs = parse_documents(data, source=source or "<input>")
        if len(docs) != 1:
            raise ValidationError.single(
                "",
                f"expected exactly one pod, found {len(docs)} objects "
                "(use load_manifests for several)",
                source=source,
            )
        obj = docs[0][1]
    else:
        obj = data
    pod, errors = _pod_from_object(obj, source=source, node_name=node_name, strict=strict)
    if pod is None:
        raise ValidationError(errors, source=source)
    return pod


def load_api_pod(data: Mapping[str, Any], *, source: str = "api", node_name: str = "") -> Pod:
    """Load a pod the API server serves: decoded and defaulted, never validated.

    The rule: the API server is the judge of the pods it serves. It validated
    each one when it was created, with its own version's rules, and the kubelet
    validates only the pods of its file and HTTP sources (its
    ``pkg/kubelet/config/common.go``), never those of the API server. So none of
    :func:`~kubelet_kit.api.validation.validate_pod`'s rules, upstream's or this
    package's stricter ones, is applied here: a rule of this package that the API
    server lacks (or lacks in its version) must not keep a pod the cluster accepted
    from running. What is left is what the agent cannot read at all: a value its
    model cannot hold (a field of another type, a quantity it cannot parse). Such
    a pod is still returned, with those problems in ``Pod.problems``, so that the
    agent rejects it at admission (phase Failed, an event, its status reported)
    instead of leaving it Pending in silence.

    Args:
        data: The pod as the API server sent it (camelCase, with kind and apiVersion).
        source: Kept as ``Pod.source``.
        node_name: The node's name, used in a generated uid.

    Returns:
        The pod; ``problems`` lists what could not be read (empty for a good pod).

    Raises:
        ValidationError: The pod cannot even be named (no metadata that says which
            pod it is), so there is nothing to reject and report on.
    """
    data, where, problem = _normalize(data)
    if problem:
        raise ValidationError.single(where, problem, source=source)
    errors: list[FieldError] = []
    pod = decode(Pod, data, errors=errors)
    if not pod.metadata.name or not pod.metadata.uid:
        named = [e for e in errors if e.path.startswith("metadata")]
        raise ValidationError(
            named
            or [
                FieldError(
                    "metadata",
                    "Required value: a pod served by the API server has a name and a uid",
                )
            ],
            source=source,
        )
    pod = apply_defaults(pod)
    return attrs.evolve(pod, source=source, problems=tuple(errors))


def manifest_files(path: str | os.PathLike[str]) -> list[Path]:
    """The manifest files :func:`read_manifests` reads for ``path``: the path itself,
    or for a directory its ``.yaml``/``.yml``/``.json`` files, hidden ones skipped,
    in name order."""
    path = Path(path)
    if path.is_dir():
        return sorted(
            p
            for p in path.iterdir()
            if p.is_file() and not p.name.startswith(".") and p.suffix in MANIFEST_SUFFIXES
        )
    return [path]


def _read_file(path: Path, *, node_name: str, strict: bool) -> Iterator[ManifestResult]:
    source = str(path)
    try:
        with path.open("rb") as f:
            # one byte past the cap tells an oversized file without reading it all
            data = f.read(MAX_MANIFEST_BYTES + 1)
        if len(data) > MAX_MANIFEST_BYTES:
            size = max(path.stat().st_size, len(data))
            yield ManifestResult(source, None, None, (FieldError("", _too_large(size)),))
            return
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        yield ManifestResult(source, None, None, (FieldError("", f"cannot read: {reason}"),))
        return
    yield from read_manifest_text(text, source=source, node_name=node_name, strict=strict)


def read_manifest_text(
    text: str, *, source: str = "<input>", node_name: str = "", strict: bool = False
) -> list[ManifestResult]:
    """Read every pod document in manifest text (what :func:`read_manifests` does per file).

    Never raises for bad content.

    Args:
        text: YAML (one or more documents) or JSON.
        source: Name of the input, kept as each pod's ``source`` and in messages.
        node_name: The node's name, used in generated uids.
        strict: Report unknown fields as errors.

    Returns:
        One result per document.
    """
    return list(_read_text(text, source=source, node_name=node_name, strict=strict))


def _read_text(text: str, *, source: str, node_name: str, strict: bool) -> Iterator[ManifestResult]:
    try:
        docs = parse_documents(text, source=source)
    except ValidationError as exc:
        yield ManifestResult(source, None, None, tuple(exc.errors))
        return
    if not docs:
        yield ManifestResult(source, None, None, (FieldError("", "no pod in file"),))
        return
    for index, obj in docs:
        pod, errors = _pod_from_object(obj, source=source, node_name=node_name, strict=strict)
        yield ManifestResult(source, index, pod, tuple(errors))


def read_manifests(
    *paths: str | os.PathLike[str], node_name: str = "", strict: bool = False
) -> list[ManifestResult]:
    """Read every pod document under the given files and directories.

    Never raises for bad content: each document's problems are in its result, so
    one bad pod does not hide the others. A directory is read one level deep, files
    ending in ``.yaml``, ``.yml`` or ``.json`` in name order, hidden files skipped.

    Args:
        paths: Files or directories.
        node_name: The node's name, used in generated uids.
        strict: Report unknown fields as errors.

    Returns:
        One result per document, in file order.
    """
    results: list[ManifestResult] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            results.append(
                ManifestResult(
                    str(path),
                    None,
                    None,
                    (FieldError("", "cannot read: no such file or directory"),),
                )
            )
            continue
        for file in manifest_files(path):
            results.extend(_read_file(file, node_name=node_name, strict=strict))
    return results


def load_manifests(
    path: str | os.PathLike[str], *, node_name: str = "", strict: bool = False
) -> list[Pod]:
    """Load every pod from a manifest file or a directory of them.

    Args:
        path: A file (one or several pods) or a directory (see :func:`read_manifests`).
        node_name: The node's name, used in generated uids.
        strict: Report unknown fields as errors.

    Returns:
        The pods, in file and document order, each with ``source`` set to its file.

    Raises:
        ValidationError: Some document was bad. ``errors`` lists the problems of every
            document, each path prefixed with ``<file>: `` or ``<file>[<index>]: ``.
    """
    results = read_manifests(path, node_name=node_name, strict=strict)
    problems = [
        FieldError(f"{r.location}: {e.path}" if e.path else r.location, e.message)
        for r in results
        for e in r.errors
    ]
    if problems:
        raise ValidationError(problems, source=os.fspath(path))
    return [r.pod for r in results if r.pod is not None]
