"""Who is asking, and may they: the kubelet's authentication and authorization.

Authentication, in the kubelet's order: a client certificate verified against the
client CA (user = the subject's CN, groups = its O entries), then a bearer token
(looked up in a token file, the API server's static token file format:
``token,user,uid,"group1,group2"``), then anonymous (``system:anonymous`` in
``system:unauthenticated``) if enabled. Anonymous access is off by default:
with no credentials the request is answered 401. Authenticated users also get
the group ``system:authenticated``.

Authorization sees the kubelet's request attributes: verb from the HTTP method
(``get``, ``create``, ...), resource ``nodes``, the node's name, and the
subresource from the path (``stats``, ``metrics``, ``log``, ``spec``, ``pods``,
``healthz``, ``configz``; everything else, including ``/containerLogs`` and
``/run``, is ``proxy``). As upstream's fine-grained mode, ``pods``, ``healthz``
and ``configz`` fall back to ``proxy`` when refused. A refusal is answered 403
with the kubelet's message.

Authorizers: :class:`AlwaysAllowAuthorizer` (the kubelet's ``AlwaysAllow``) and
:class:`PolicyAuthorizer`, a local rule list for agents without an API server
(``Webhook`` needs one). :func:`read_only_rule` gives the usual split: a group
that may read status and metrics but neither logs nor run.
"""

from __future__ import annotations

import csv
import hmac
import io
import ssl
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import attrs

from kubelet_kit.errors import ConfigurationError, FieldError

__all__ = [
    "ANONYMOUS_USER",
    "AUTHENTICATED_GROUP",
    "READ_ONLY_SUBRESOURCES",
    "UNAUTHENTICATED_GROUP",
    "AlwaysAllowAuthorizer",
    "Attributes",
    "Authenticator",
    "Authorizer",
    "PolicyAuthorizer",
    "PolicyRule",
    "TokenFile",
    "UserInfo",
    "load_token_file",
    "read_only_rule",
    "request_attributes",
    "user_from_peercert",
]

ANONYMOUS_USER: Final = "system:anonymous"
UNAUTHENTICATED_GROUP: Final = "system:unauthenticated"
AUTHENTICATED_GROUP: Final = "system:authenticated"

#: Subresources whose endpoints only read state (never logs, never run).
READ_ONLY_SUBRESOURCES: Final = ("stats", "metrics", "spec", "pods", "healthz")

_VERBS: Final = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_SUBRESOURCES: Final = (
    ("/stats", "stats"),
    ("/metrics", "metrics"),
    ("/logs", "log"),
    ("/spec", "spec"),
    ("/checkpoint", "checkpoint"),
    ("/pods", "pods"),
    ("/runningpods", "pods"),
    ("/healthz", "healthz"),
    ("/configz", "configz"),
)
# Fine-grained subresources that upstream also grants through nodes/proxy.
_PROXY_FALLBACK: Final = frozenset({"pods", "healthz", "configz"})


@attrs.frozen
class UserInfo:
    """An authenticated (or anonymous) identity.

    Attributes:
        name: The user name.
        uid: The user's uid, where the credential carries one.
        groups: The user's groups.
    """

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()

    @property
    def anonymous(self) -> bool:
        """Whether this is the anonymous user."""
        return self.name == ANONYMOUS_USER


@attrs.frozen
class Attributes:
    """What a request asks for, as the kubelet's authorizer sees it.

    Attributes:
        user: Who asks.
        verb: ``get``, ``create``, ``update``, ``patch`` or ``delete``.
        subresource: ``stats``, ``metrics``, ``log``, ``spec``, ``pods``,
            ``healthz``, ``configz``, ``checkpoint`` or ``proxy``.
        node: The node's name (the resource's name).
        path: The request path.
        resource: Always ``nodes``.
    """

    user: UserInfo
    verb: str
    subresource: str
    node: str
    path: str
    resource: str = "nodes"

    def forbidden_message(self) -> str:
        """The kubelet's 403 text for these attributes."""
        return (
            f"Forbidden (user={self.user.name}, verb={self.verb}, resource={self.resource}, "
            f"subresource(s)=[{self.subresource}])"
        )


def request_attributes(user: UserInfo, method: str, path: str, node: str) -> list[Attributes]:
    """The attributes to authorize a request by, in order: the request is allowed
    when any of them is.

    The first is the path's own subresource; ``pods``, ``healthz`` and ``configz``
    add ``proxy`` as a fallback, as the kubelet's fine-grained mode does.
    """
    verb = _VERBS.get(method.upper(), method.lower())
    subresource = "proxy"
    for prefix, name in _SUBRESOURCES:
        if path == prefix or path.startswith(prefix + "/"):
            subresource = name
            break
    out = [Attributes(user, verb, subresource, node, path)]
    if subresource in _PROXY_FALLBACK:
        out.append(Attributes(user, verb, "proxy", node, path))
    return out


# ------------------------------------------------------------------ authentication


@attrs.frozen
class TokenFile:
    """Bearer tokens and the users they stand for (a static token file's content)."""

    users: Mapping[str, UserInfo] = attrs.field(factory=dict)

    def lookup(self, token: str) -> UserInfo | None:
        """The user of ``token``, or None. Compares in constant time per entry."""
        found: UserInfo | None = None
        for known, user in self.users.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = user
        return found


def load_token_file(path: str | Path) -> TokenFile:
    """Read a static token file: CSV lines ``token,user,uid[,"group1,group2"]``.

    Blank lines and lines starting with ``#`` are skipped.

    Raises:
        ConfigurationError: the file cannot be read, or a line is malformed
            (the error names the file and line).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"token file {path}: cannot read: {exc.strerror}") from None
    users: dict[str, UserInfo] = {}
    errors: list[FieldError] = []
    for lineno, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        where = f"{path}:{lineno}"
        if len(row) < 3 or not row[0].strip() or not row[1].strip():
            errors.append(FieldError(where, 'want token,user,uid[,"group1,group2"]'))
            continue
        token, name, uid = (c.strip() for c in row[:3])
        groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 else ()
        if token in users:
            errors.append(FieldError(where, "duplicate token"))
            continue
        users[token] = UserInfo(name, uid, groups)
    if errors:
        raise ConfigurationError(f"token file {path}: " + "; ".join(map(str, errors)), errors)
    return TokenFile(users)


def user_from_peercert(peercert: Mapping[str, Any] | None) -> UserInfo | None:
    """The identity of a verified client certificate: CN is the user, each O a group.

    ``peercert`` is what ``SSLSocket.getpeercert()`` returns (empty or None when
    the client sent no certificate). A certificate without a CN gives None.
    """
    if not peercert:
        return None
    name = ""
    groups: list[str] = []
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and not name:
                name = value
            elif key == "organizationName":
                groups.append(value)
    return UserInfo(name, "", tuple(groups)) if name else None


class Authenticator:
    """The kubelet's authentication chain: client certificate, bearer token, anonymous.

    Args:
        client_ca_file: CA bundle that client certificates must chain to; None
            disables certificate authentication.
        tokens: Bearer tokens; None disables token authentication.
        anonymous: Whether requests without credentials pass as
            ``system:anonymous`` (off by default, as recommended for the kubelet).
    """

    def __init__(
        self,
        *,
        client_ca_file: str | Path | None = None,
        tokens: TokenFile | None = None,
        anonymous: bool = False,
    ) -> None:
        self.client_ca_file = Path(client_ca_file) if client_ca_file else None
        self.tokens = tokens
        self.anonymous = anonymous

    def configure_tls(self, context: ssl.SSLContext) -> None:
        """Make ``context`` ask for (not require) client certificates signed by the
        client CA, so token and anonymous requests still connect.

        Raises:
            ConfigurationError: the CA file cannot be loaded.
        """
        if self.client_ca_file is None:
            return
        try:
            context.load_verify_locations(cafile=str(self.client_ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(
                f"authentication.x509.clientCAFile: cannot load {self.client_ca_file}: {exc}"
            ) from None
        context.verify_mode = ssl.CERT_OPTIONAL

    def authenticate(
        self, peercert: Mapping[str, Any] | None, authorization: str | None
    ) -> UserInfo | None:
        """Who sent a request, or None (answer 401).

        A present but unknown bearer token is refused even when anonymous access
        is on, as the kubelet does. Never blocks.

        Args:
            peercert: The verified client certificate (``getpeercert()``), if any.
            authorization: The ``Authorization`` header, if any.
        """
        if self.client_ca_file is not None:
            user = user_from_peercert(peercert)
            if user is not None:
                return _authenticated(user)
        if authorization:
            scheme, _, token = authorization.partition(" ")
            token = token.strip()
            if scheme.lower() == "bearer" and token:
                user = self.tokens.lookup(token) if self.tokens is not None else None
                return _authenticated(user) if user is not None else None
        if self.anonymous:
            return UserInfo(ANONYMOUS_USER, "", (UNAUTHENTICATED_GROUP,))
        return None


def _authenticated(user: UserInfo) -> UserInfo:
    if AUTHENTICATED_GROUP in user.groups:
        return user
    return attrs.evolve(user, groups=(*user.groups, AUTHENTICATED_GROUP))


# ------------------------------------------------------------------- authorization


@runtime_checkable
class Authorizer(Protocol):
    """Decides whether a request's attributes are allowed."""

    def authorize(self, attributes: Attributes) -> bool:
        """Whether ``attributes`` are allowed. Never blocks; raises nothing."""


class AlwaysAllowAuthorizer:
    """Allows every authenticated request (the kubelet's ``AlwaysAllow`` mode)."""

    def authorize(self, attributes: Attributes) -> bool:
        """Always True."""
        return True


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


@attrs.frozen
class PolicyRule:
    """Allows some users or groups some verbs on some node subresources.

    ``"*"`` in any list matches everything.

    Attributes:
        users: User names the rule applies to.
        groups: Groups the rule applies to.
        subresources: Node subresources allowed (``stats``, ``proxy``, ...).
        verbs: Verbs allowed.
    """

    users: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    groups: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    subresources: tuple[str, ...] = attrs.field(default=("*",), converter=_strings)
    verbs: tuple[str, ...] = attrs.field(default=("*",), converter=_strings)

    def matches(self, attributes: Attributes) -> bool:
        """Whether this rule allows ``attributes``."""
        user = attributes.user
        who = (
            "*" in self.users
            or user.name in self.users
            or "*" in self.groups
            or any(g in self.groups for g in user.groups)
        )
        return (
            who
            and ("*" in self.subresources or attributes.subresource in self.subresources)
            and ("*" in self.verbs or attributes.verb in self.verbs)
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str) -> PolicyRule:
        """Build a rule from ``{users, groups, subresources, verbs}`` (lists of strings).

        Raises:
            ConfigurationError: a key is unknown or a value is not a list of
                strings (the error names ``path``).
        """
        known = {"users", "groups", "subresources", "verbs"}
        errors = [FieldError(f"{path}.{k}", "unknown field") for k in data if k not in known]
        values: dict[str, tuple[str, ...]] = {}
        for key in known & set(data):
            value = data[key]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                errors.append(FieldError(f"{path}.{key}", "must be a list of strings"))
            else:
                values[key] = tuple(value)
        if not values.get("users") and not values.get("groups"):
            errors.append(FieldError(path, "a rule needs users or groups"))
        if errors:
            raise ConfigurationError("; ".join(map(str, errors)), errors)
        return cls(**values)


def read_only_rule(*, users: Iterable[str] = (), groups: Iterable[str] = ()) -> PolicyRule:
    """A rule letting ``users``/``groups`` read status, stats and metrics (``get`` on
    :data:`READ_ONLY_SUBRESOURCES`) but not logs or run."""
    return PolicyRule(tuple(users), tuple(groups), READ_ONLY_SUBRESOURCES, ("get",))


class PolicyAuthorizer:
    """Allows a request when a rule matches it; refuses everything else.

    Args:
        rules: The rules, e.g. ``[PolicyRule(groups=["admins"]),
            read_only_rule(groups=["monitoring"])]``.
    """

    def __init__(self, rules: Sequence[PolicyRule]) -> None:
        self.rules = tuple(rules)

    def authorize(self, attributes: Attributes) -> bool:
        """Whether any rule matches."""
        return any(rule.matches(attributes) for rule in self.rules)
