"""Registry credentials from image pull secrets (the kubelet's credentialprovider).

A pod's ``imagePullSecrets`` name Secrets holding docker configs: a
``.dockerconfigjson`` (``{"auths": {KEY: ENTRY}}``, type
``kubernetes.io/dockerconfigjson``) or a legacy ``.dockercfg`` (the ``KEY: ENTRY``
map alone, type ``kubernetes.io/dockercfg``). ENTRY has ``username``,
``password``, ``email`` and ``auth``, the base64 ``username:password``.

A :class:`DockerKeyring` indexes the entries by key and answers, for an image,
every credential whose key matches it, most specific first, as the kubelet's
``BasicDockerKeyring`` does (``pkg/credentialprovider/keyring.go``):

* a key may carry a scheme (``https://``, ``http://``), which is dropped, and a
  ``/v1/`` or ``/v2/`` path prefix, which counts as no path;
* the host must have as many dot-separated labels as the image's registry host,
  each matching as a glob (``*.example.com``), and the same port;
* the key's path must be a prefix of the image's repository path;
* keys are tried in reverse lexical order, so ``quay.io/coreos`` comes before
  ``quay.io``;
* an image on Docker Hub falls back to the ``index.docker.io`` entry
  (``https://index.docker.io/v1/``, the key ``docker login`` writes).
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import json
import logging
import urllib.parse
from collections.abc import Iterable, Mapping

from kubelet_kit.container.images import normalize_image_ref
from kubelet_kit.container.interfaces import AuthConfig

__all__ = [
    "DOCKER_CONFIG_JSON_KEY",
    "DOCKER_CONFIG_KEY",
    "DockerKeyring",
    "image_repository",
    "parse_docker_config",
]

log = logging.getLogger(__name__)

#: The data key of a ``kubernetes.io/dockerconfigjson`` Secret.
DOCKER_CONFIG_JSON_KEY = ".dockerconfigjson"
#: The data key of a ``kubernetes.io/dockercfg`` Secret.
DOCKER_CONFIG_KEY = ".dockercfg"

_DEFAULT_REGISTRY_HOST = "index.docker.io"


def _decode_auth(value: str) -> tuple[str, str]:
    # credentialprovider's decodeDockerConfigFieldAuth: standard base64 of
    # "user:password", split at the first colon.
    try:
        text = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError(f"invalid auth field: {exc}") from exc
    user, sep, password = text.partition(":")
    if not sep:
        raise ValueError(
            "unable to parse auth field, must be formatted as base64(username:password)"
        )
    return user, password


def _entry(key: str, raw: object) -> AuthConfig:
    if not isinstance(raw, Mapping):
        raise ValueError(f"docker config entry {key!r} is not an object")
    fields: dict[str, str] = {}
    for name in ("username", "password", "email", "auth"):
        value = raw.get(name, "")
        if not isinstance(value, str):
            raise ValueError(f"docker config entry {key!r}: {name} is not a string")
        fields[name] = value
    username, password = fields["username"], fields["password"]
    # As DockerConfigEntry.UnmarshalJSON: a non-empty auth field is decoded and
    # its user and password replace the plain fields.
    if fields["auth"]:
        username, password = _decode_auth(fields["auth"])
    return AuthConfig(username=username, password=password, server_address=key)


def parse_docker_config(data: Mapping[str, bytes]) -> dict[str, AuthConfig]:
    """The registry credentials of one pull secret's data, by key as written.

    Reads ``.dockerconfigjson`` (its ``auths``) if present and non-empty, else
    ``.dockercfg``, as the kubelet's ``MakeDockerKeyring`` does; a secret with
    neither holds no credentials. Each :class:`AuthConfig` has the key as its
    ``server_address``.

    Raises:
        ValueError: the config is not valid JSON of the docker config shape, or
            an ``auth`` field is not base64 ``username:password`` (the kubelet
            then fails the pull with that error).
    """
    raw = data.get(DOCKER_CONFIG_JSON_KEY)
    nested = True
    if not raw:
        raw, nested = data.get(DOCKER_CONFIG_KEY), False
    if not raw:
        return {}
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"invalid docker config: {exc}") from exc
    if not isinstance(doc, Mapping):
        raise ValueError("invalid docker config: not an object")
    if nested:
        doc = doc.get("auths")
        if doc is None:  # absent or null: no credentials, as Go's unmarshal
            doc = {}
        if not isinstance(doc, Mapping):
            raise ValueError("invalid docker config: auths is not an object")
    return {key: _entry(key, value) for key, value in doc.items()}


def _index_key(location: str) -> str | None:
    # BasicDockerKeyring.Add: a scheme is optional, /v1/ and /v2/ are no path.
    value = location
    if not value.startswith(("https://", "http://")):
        value = "https://" + value
    try:
        parsed = urllib.parse.urlsplit(value)
    except ValueError:
        return None
    host = parsed.netloc.rpartition("@")[2]  # Go's url.Host carries no userinfo
    path = parsed.path
    if path.startswith(("/v2/", "/v1/")):
        path = path[3:]
    return host + path if path and path != "/" else host


def _split_url(schemeless: str) -> tuple[list[str], str, str] | None:
    # ParseSchemelessURL then SplitURL: host labels, port and path.
    try:
        parsed = urllib.parse.urlsplit("https://" + schemeless)
    except ValueError:
        return None
    host, port = parsed.netloc.rpartition("@")[2], ""
    # net.SplitHostPort: a bracketed IPv6 host, or exactly one colon; anything
    # else (no port, several colons) leaves the whole text as the host.
    if host.startswith("["):
        end = host.find("]")
        if end != -1 and host[end + 1 : end + 2] == ":":
            host, port = host[1:end], host[end + 2 :]
    elif host.count(":") == 1:
        host, _, port = host.partition(":")
    return host.split("."), port, parsed.path


def _urls_match(glob: str, target: str) -> bool:
    # URLsMatch: same port, same number of host labels each matching as a glob,
    # and the glob's path a prefix of the target's.
    g, t = _split_url(glob), _split_url(target)
    if g is None or t is None:
        return False
    g_parts, g_port, g_path = g
    t_parts, t_port, t_path = t
    if g_port != t_port or len(g_parts) != len(t_parts) or not t_path.startswith(g_path):
        return False
    return all(fnmatch.fnmatchcase(tp, gp) for gp, tp in zip(g_parts, t_parts, strict=True))


def _is_default_registry_match(image: str) -> bool:
    # isDefaultRegistryMatch: no host part, or docker.io, or a first component
    # that cannot be a host (no '.' or ':').
    first, sep, _ = image.partition("/")
    if not first:
        return False
    if not sep or first in ("docker.io", "index.docker.io"):
        return True
    return "." not in first and ":" not in first


def image_repository(image: str) -> str:
    """The image's repository, normalised and without tag or digest, as the
    kubelet looks credentials up by (``busybox:1`` -> ``docker.io/library/busybox``).

    Raises:
        ImagePullError: ``image`` is not a valid image reference.
    """
    name = normalize_image_ref(image).partition("@")[0]
    head, slash, last = name.rpartition("/")
    return head + slash + last.partition(":")[0]


class DockerKeyring:
    """Registry credentials indexed by key, looked up by image (the kubelet's
    ``BasicDockerKeyring``). Not thread-safe; cheap to build per pull."""

    def __init__(self, configs: Iterable[Mapping[str, AuthConfig]] = ()) -> None:
        self._creds: dict[str, list[AuthConfig]] = {}
        for config in configs:
            self.add(config)

    def add(self, config: Mapping[str, AuthConfig]) -> None:
        """Index every entry of one docker config. A key that is no URL is
        skipped (with a log line), as the kubelet skips it; credentials under
        keys that index alike (``https://r.io`` and ``r.io``) are all kept, in
        the order added."""
        for location, auth in config.items():
            key = _index_key(location)
            if key is None:
                log.error("Entry %r in dockercfg invalid, ignoring", location)
                continue
            self._creds.setdefault(key, []).append(auth)

    def lookup(self, image: str) -> list[AuthConfig]:
        """Every credential for ``image`` (a repository, as
        :func:`image_repository` gives), most specific key first; empty if none
        matches."""
        found = [
            auth
            for key in sorted(self._creds, reverse=True)
            if _urls_match(key, image)
            for auth in self._creds[key]
        ]
        if not found and _is_default_registry_match(image):
            found = list(self._creds.get(_DEFAULT_REGISTRY_HOST, ()))
        return found
