"""Kubernetes camelCase JSON <-> attrs models, driven by the models' type hints.

Every model is an attrs class deriving from :class:`Model`. Its snake_case attribute
names map to Kubernetes' JSON names by rule (``image_pull_policy`` ->
``imagePullPolicy``; the acronyms ``ip``, ``ips``, ``id``, ``pid``, ``ipc``, ``api``
and ``uid`` are upper-cased after the first word, as Kubernetes spells them:
``host_ip`` -> ``hostIP``, ``downward_api`` -> ``downwardAPI``). A field whose JSON
name breaks the rule says so with ``json_name(...)`` in its metadata.

Decoding never raises on bad input: every problem (a string where an integer belongs,
an unparsable quantity, a list where an object belongs) is appended to an error list
as a :class:`~kubelet_kit.errors.FieldError` naming the field path, and the field
falls back to its default so that decoding (and later validation) goes on and every
problem is reported at once.

Unknown fields are kept, not dropped: they land in the model's ``extra`` mapping and
:meth:`Model.to_dict` writes them back, so a manifest survives a round trip even when
it uses fields this package does not model. Their paths are also reported to the
caller (``unknown`` list), which a strict check can turn into errors.

Encoding (:func:`encode`) follows Kubernetes' ``omitempty`` habit: ``None``, empty
strings, empty lists and maps, and ``False`` where ``False`` is the field's default
are left out (except fields marked ``always_written()``, which Kubernetes declares
without ``omitempty``, such as a container status' ``ready``); every other value,
defaults included, is written.
"""

from __future__ import annotations

import datetime as _dt
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, Union

import attrs

from kubelet_kit.api.quantity import Quantity
from kubelet_kit.errors import FieldError, QuantityError, ValidationError

__all__ = [
    "Model",
    "always_written",
    "child_path",
    "decode",
    "encode",
    "format_time",
    "format_value",
    "json_name",
    "json_names",
    "not_serialized",
    "parse_time",
]

M = TypeVar("M", bound="Model")

_JSON_NAME = "kubelet_kit.json_name"
_SKIP = "kubelet_kit.skip"
_ALWAYS = "kubelet_kit.always"
_ACRONYMS = {"ip": "IP", "ips": "IPs", "id": "ID", "pid": "PID", "ipc": "IPC", "api": "API"}
_SIMPLE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def json_name(name: str) -> dict[str, str]:
    """Field metadata giving a JSON name that the camelCase rule would not produce."""
    return {_JSON_NAME: name}


def not_serialized() -> dict[str, bool]:
    """Field metadata for attributes that are not part of the Kubernetes object."""
    return {_SKIP: True}


def always_written() -> dict[str, bool]:
    """Field metadata for fields Kubernetes writes even when empty (no ``omitempty``)."""
    return {_ALWAYS: True}


@attrs.frozen(kw_only=True)
class Model:
    """Base of every API model: unknown JSON fields and ``to_dict``.

    Attributes:
        extra: Fields of the input that this model does not know, kept verbatim
            (camelCase keys) so that a round trip loses nothing.
    """

    extra: Mapping[str, Any] = attrs.field(factory=dict, repr=False)

    @classmethod
    def from_dict(cls: type[M], data: Mapping[str, Any]) -> M:
        """Decode this model from Kubernetes' camelCase JSON shape.

        Only decodes: no validation and no cross-field defaulting (use
        :func:`kubelet_kit.api.load_pod` for whole pods from manifests).

        Raises:
            ValidationError: A value has the wrong type; ``errors`` lists them all.
        """
        return decode(cls, data)

    def to_dict(self) -> dict[str, Any]:
        """Return this object in Kubernetes' camelCase JSON shape.

        Returns:
            A new dict of plain JSON values (str, int, bool, list, dict); quantities
            and timestamps are written as Kubernetes writes them.
        """
        out = encode(self)
        assert isinstance(out, dict)
        return out


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(_ACRONYMS.get(part, part[:1].upper() + part[1:]) for part in rest)


_FieldInfo = tuple[str, str, Any, "attrs.Attribute[Any]"]
_FIELDS_CACHE: dict[type, tuple[_FieldInfo, ...]] = {}


def json_names(cls: type) -> dict[str, str]:
    """Each field of a model: attribute name -> its name in Kubernetes' JSON."""
    return {name: json for name, json, *_ in _fields(cls)}


def _fields(cls: type) -> tuple[_FieldInfo, ...]:
    """(attribute name, JSON name, resolved type, attrs attribute) of a model class."""
    cached = _FIELDS_CACHE.get(cls)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(cls)
    out = []
    for a in attrs.fields(cls):
        if a.name == "extra" or a.metadata.get(_SKIP):
            continue
        out.append((a.name, a.metadata.get(_JSON_NAME, _camel(a.name)), hints[a.name], a))
    _FIELDS_CACHE[cls] = result = tuple(out)
    return result


def child_path(parent: str, key: str) -> str:
    """Append a field name to a Kubernetes-style path (``a.b`` or ``a[x.y/z]``)."""
    if not parent:
        return key
    if _SIMPLE_KEY.match(key):
        return f"{parent}.{key}"
    return f"{parent}[{key}]"


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def format_value(value: Any) -> str:
    """A value as Kubernetes prints it in error messages: strings quoted, numbers bare."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number_text(value)
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "{...}"
    if isinstance(value, list | tuple):
        return "[...]"
    return type(value).__name__


#: Longest integer printed in full in a message; longer ones are abbreviated (and
#: Python refuses to print ints beyond 4300 digits at all).
_MAX_PRINTED_DIGITS = 100


def _number_text(value: int | float) -> str:
    if isinstance(value, int) and value.bit_length() > _MAX_PRINTED_DIGITS * 3:
        # bit_length * log10(2) estimates the digit count without converting
        return f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>"
    return str(value)


def _type_error(path: str, value: Any, expected: str) -> FieldError:
    return FieldError(
        path, f"Invalid value: {format_value(value)}: expected {expected}, got {_describe(value)}"
    )


def parse_time(value: str) -> _dt.datetime:
    """Parse an RFC 3339 timestamp into a timezone-aware datetime.

    Raises:
        ValueError: The string is not RFC 3339 with a time zone.
    """
    if not re.match(
        r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$", value
    ):
        raise ValueError("not an RFC 3339 timestamp")
    parsed = _dt.datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    return parsed


def format_time(value: _dt.datetime) -> str:
    """Write a datetime as Kubernetes does (RFC 3339, UTC, ``Z``).

    Whole seconds are written without a fraction, as ``metav1.Time`` does; a value
    with microseconds keeps them so that nothing is lost.
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.UTC)
    value = value.astimezone(_dt.UTC)
    if value.microsecond:
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


class _Invalid:
    """Marker: the value could not be decoded (an error was recorded)."""


_INVALID = _Invalid()


def _decode_value(
    tp: Any, value: Any, path: str, errors: list[FieldError], unknown: list[str]
) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        non_none = [a for a in args if a is not type(None)]
        if set(non_none) == {int, str}:
            # IntOrString (ports): either is fine, nothing else is.
            if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
                return value
            errors.append(_type_error(path, value, "an integer or a string"))
            return _INVALID
        return _decode_value(non_none[0], value, path, errors, unknown)
    if tp is Any:
        return value
    if origin is tuple:
        (item_tp, _ellipsis) = typing.get_args(tp)
        if not isinstance(value, list | tuple):
            errors.append(_type_error(path, value, "a list"))
            return _INVALID
        items = []
        for i, item in enumerate(value):
            decoded = _decode_value(item_tp, item, f"{path}[{i}]", errors, unknown)
            if decoded is not _INVALID:
                items.append(decoded)
        return tuple(items)
    if origin in (Mapping, dict):
        (_key_tp, val_tp) = typing.get_args(tp)
        if not isinstance(value, Mapping):
            errors.append(_type_error(path, value, "an object"))
            return _INVALID
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                errors.append(
                    FieldError(path, f"Invalid value: {format_value(key)}: keys must be strings")
                )
                continue
            decoded = _decode_value(val_tp, item, child_path(path, key), errors, unknown)
            if decoded is not _INVALID:
                out[key] = decoded
        return out
    if isinstance(tp, type) and attrs.has(tp) and issubclass(tp, Model):
        if not isinstance(value, Mapping):
            errors.append(_type_error(path, value, "an object"))
            return _INVALID
        return _decode_model(tp, value, path, errors, unknown)
    if tp is bool:
        if isinstance(value, bool):
            return value
        errors.append(_type_error(path, value, "a boolean"))
        return _INVALID
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        errors.append(_type_error(path, value, "an integer"))
        return _INVALID
    if tp is str:
        if isinstance(value, str):
            return value
        errors.append(_type_error(path, value, "a string"))
        return _INVALID
    if tp is Quantity:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            errors.append(_type_error(path, value, "a quantity"))
            return _INVALID
        text = value if isinstance(value, str) else _number_text(value)
        try:
            return Quantity.from_json(value)
        except QuantityError as exc:
            # Keep only the reason ("quantities must match ..."), Kubernetes' words.
            reason = str(exc).rsplit(" is not a quantity: ", 1)[-1]
            errors.append(FieldError(path, f"Invalid value: {format_value(text)}: {reason}"))
            return _INVALID
    if tp is _dt.datetime:
        if isinstance(value, _dt.datetime):
            # YAML decodes unquoted timestamps itself; YAML without a zone means UTC.
            return value if value.tzinfo else value.replace(tzinfo=_dt.UTC)
        if isinstance(value, str):
            try:
                return parse_time(value)
            except ValueError:
                pass
        errors.append(
            FieldError(
                path,
                f"Invalid value: {format_value(value)}: expected an "
                "RFC 3339 timestamp (e.g. 2006-01-02T15:04:05Z)",
            )
        )
        return _INVALID
    raise TypeError(f"serde: unsupported field type {tp!r} at {path}")  # a bug, not bad input


def _decode_model(
    cls: type[M],
    data: Mapping[str, Any],
    path: str,
    errors: list[FieldError],
    unknown: list[str],
) -> M:
    kwargs: dict[str, Any] = {}
    known: set[str] = set()
    for attr_name, key, tp, _a in _fields(cls):
        known.add(key)
        if key not in data or data[key] is None:
            continue  # absent and null both mean "use the default", as in Kubernetes
        decoded = _decode_value(tp, data[key], child_path(path, key), errors, unknown)
        if decoded is not _INVALID:
            kwargs[attr_name] = decoded
    extra = {k: v for k, v in data.items() if k not in known}
    for key in extra:
        unknown.append(child_path(path, str(key)))
    return cls(extra=extra, **kwargs)


def decode(
    cls: type[M],
    data: Any,
    *,
    path: str = "",
    errors: list[FieldError] | None = None,
    unknown: list[str] | None = None,
) -> M:
    """Decode Kubernetes JSON (already parsed) into the model class ``cls``.

    Args:
        cls: A :class:`Model` subclass.
        data: The parsed JSON/YAML value; anything not a mapping is an error.
        path: Field path of ``data`` itself, prefixed to every reported path.
        errors: List that receives every problem found; when ``None`` the first
            problems are raised instead.
        unknown: List that receives the path of every unknown field.

    Returns:
        The decoded model; fields with bad values keep their defaults.

    Raises:
        ValidationError: Only when ``errors`` is ``None`` and something was wrong.
    """
    own: list[FieldError] = [] if errors is None else errors
    sink: list[str] = [] if unknown is None else unknown
    if not isinstance(data, Mapping):
        own.append(_type_error(path, data, "an object"))
        result = cls()
    else:
        result = _decode_model(cls, data, path, own, sink)
    if errors is None and own:
        raise ValidationError(own)
    return result


def _is_empty(value: Any, default: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str | tuple | list | dict | Mapping) and len(value) == 0:
        return True
    return value is False and default is False


def encode(value: Any) -> Any:
    """Turn a model (or a value inside one) into plain JSON values."""
    if isinstance(value, Model):
        out: dict[str, Any] = {}
        for attr_name, key, _tp, a in _fields(type(value)):
            field_value = getattr(value, attr_name)
            if field_value is None or (
                not a.metadata.get(_ALWAYS) and _is_empty(field_value, a.default)
            ):
                continue
            out[key] = encode(field_value)
        for key, raw in value.extra.items():
            out.setdefault(key, encode(raw))
        return out
    if isinstance(value, Quantity):
        return str(value)
    if isinstance(value, _dt.datetime):
        return format_time(value)
    if isinstance(value, Mapping):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [encode(v) for v in value]
    return value
