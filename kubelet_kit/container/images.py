"""Image references, normalised as container runtimes normalise them."""

from __future__ import annotations

import re

from kubelet_kit.errors import ImagePullError

__all__ = ["IMAGE_ID_RE", "image_user", "normalize_image_ref"]

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE_RE = re.compile(
    rf"^(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$"
)
#: An image id (with or without ``sha256:``), as a runtime reports one.
IMAGE_ID_RE = re.compile(r"^(?:sha256:)?[0-9a-f]{64}$")


def normalize_image_ref(ref: str) -> str:
    """Normalise an image reference as containerd and Docker do.

    ``busybox`` -> ``docker.io/library/busybox:latest``; ``quay.io/a/b`` ->
    ``quay.io/a/b:latest``; a reference with a digest keeps it and gets no tag.

    Raises:
        ImagePullError: ``ref`` is not a valid image reference.
    """
    m = _REFERENCE_RE.match(ref)
    if m is None or len(m.group("name")) > 255:
        raise ImagePullError(f'failed to pull image "{ref}": invalid reference format')
    name, tag, digest = m.group("name"), m.group("tag"), m.group("digest")
    first, sep, rest = name.partition("/")
    # As in Docker: the first component names a registry only if it looks like a
    # host name (a dot, a port, "localhost", or upper case, which a path may not have).
    if not sep or (
        "." not in first and ":" not in first and first != "localhost" and first == first.lower()
    ):
        name = f"docker.io/{name}"
        first, rest = "docker.io", name.partition("/")[2]
    if first == "docker.io" and "/" not in rest:
        name = f"docker.io/library/{rest}"
    if digest:
        return f"{name}:{tag}@{digest}" if tag else f"{name}@{digest}"
    return f"{name}:{tag or 'latest'}"


def image_user(user: str) -> tuple[int | None, str]:
    """The ``(uid, username)`` an image whose config says ``User: user`` reports,
    as the CRI's ``Image`` carries them (and containerd reads them).

    Only the part before a ``:`` (the group) counts: a number is the uid (with
    no name), anything else the user name (with no uid); an empty ``User``
    gives neither. ``"1000"`` -> ``(1000, "")``, ``"1000:1000"`` -> ``(1000, "")``,
    ``"www-data"`` -> ``(None, "www-data")``, ``""`` -> ``(None, "")``.
    """
    name = user.split(":", 1)[0]
    if not name:
        return None, ""
    if name.isascii() and name.isdigit():
        return int(name), ""
    return None, name
