"""Name and format checks of Kubernetes objects, in the API server's words.

The string rules every part of a pod reuses: RFC 1123 labels and subdomains
(:func:`is_dns1123_label`, :func:`is_dns1123_subdomain`), IANA service names for
ports (:func:`is_valid_port_name`), qualified names of label and annotation keys,
label values, HTTP header names and environment variable names. Each check returns
the list of problems (empty when the value is valid), with Kubernetes' messages,
regular expression and examples included as ``validation.RegexError`` writes them.
"""

from __future__ import annotations

import re

__all__ = [
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "ENV_NAME_RE",
    "HTTP_HEADER_MSG",
    "HTTP_HEADER_RE",
    "LABEL_VALUE_MSG",
    "LABEL_VALUE_RE",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_port_name",
    "max_len",
]

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(f"^{_LABEL_FMT}$")
_SUBDOMAIN_FMT = _LABEL_FMT + r"(\." + _LABEL_FMT + ")*"
_SUBDOMAIN_RE = re.compile(f"^{_SUBDOMAIN_FMT}$")
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_RE = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_HTTP_HEADER_FMT = "[-A-Za-z0-9]+"
HTTP_HEADER_RE = re.compile(f"^{_HTTP_HEADER_FMT}$")
_PORT_NAME_CHARSET = re.compile("^[-a-z0-9]+$")
_PORT_NAME_LETTER = re.compile("[a-z]")
ENV_NAME_RE = re.compile(r"^[\x20-\x3c\x3e-\x7e]+$")  # printable ASCII but '='


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # Kubernetes' validation.RegexError, spacing included.
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


_LABEL_MSG = _regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
    "'-', and must start and end with an alphanumeric character",
    _LABEL_FMT,
    "my-name",
    "123-abc",
)
_SUBDOMAIN_MSG = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character",
    _SUBDOMAIN_FMT,
    "example.com",
)
_QUALIFIED_NAME_MSG = _regex_error(
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character",
    _QUALIFIED_NAME_FMT,
    "MyName",
    "my.name",
    "123-abc",
)
LABEL_VALUE_MSG = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character",
    _LABEL_VALUE_FMT,
    "MyValue",
    "my_value",
    "12345",
)
HTTP_HEADER_MSG = _regex_error(
    "a valid HTTP header must consist of alphanumeric characters or '-'",
    _HTTP_HEADER_FMT,
    "X-Header-Name",
)


def max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def is_dns1123_label(value: str) -> list[str]:
    """Problems with ``value`` as an RFC 1123 label (empty list when valid)."""
    errs = []
    if len(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len(DNS1123_LABEL_MAX_LENGTH))
    if not _LABEL_RE.match(value):
        errs.append("must not contain dots" if _SUBDOMAIN_RE.match(value) else _LABEL_MSG)
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """Problems with ``value`` as an RFC 1123 subdomain (empty list when valid)."""
    errs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _SUBDOMAIN_RE.match(value):
        errs.append(_SUBDOMAIN_MSG)
    return errs


def is_valid_port_name(value: str) -> list[str]:
    """Problems with ``value`` as an IANA_SVC_NAME port name (empty when valid)."""
    errs = []
    if len(value) > 15:
        errs.append(max_len(15))
    if not _PORT_NAME_CHARSET.match(value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_LETTER.search(value):
        errs.append("must contain at least one letter (a-z)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value and (value[0] == "-" or value[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def is_qualified_name(value: str) -> list[str]:
    errs = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [
            _regex_error(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character",
                _QUALIFIED_NAME_FMT,
                "MyName",
                "my.name",
                "123-abc",
            )
            + " with an optional DNS subdomain prefix and "
            "'/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len(63))
    if name and not _QUALIFIED_NAME_RE.match(name):
        errs.append(_QUALIFIED_NAME_MSG)
    return errs
