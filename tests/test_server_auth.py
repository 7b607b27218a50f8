"""Authentication and authorization rules of the node API, without a network."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelet_kit.errors import ConfigurationError
from kubelet_kit.server.auth import (
    AUTHENTICATED_GROUP,
    Attributes,
    Authenticator,
    PolicyAuthorizer,
    PolicyRule,
    TokenFile,
    UserInfo,
    load_token_file,
    read_only_rule,
    request_attributes,
    user_from_peercert,
)

USER = UserInfo("u")

# (method, path) -> (verb, subresources tried in order), as the kubelet maps them.
ATTRIBUTE_TABLE = [
    ("GET", "/stats/summary", "get", ["stats"]),
    ("POST", "/stats/summary", "create", ["stats"]),
    ("GET", "/metrics", "get", ["metrics"]),
    ("GET", "/metrics/probes", "get", ["metrics"]),
    ("GET", "/metrics/resource", "get", ["metrics"]),
    ("GET", "/logs/", "get", ["log"]),
    ("GET", "/spec/", "get", ["spec"]),
    ("GET", "/pods", "get", ["pods", "proxy"]),
    ("GET", "/runningpods/", "get", ["pods", "proxy"]),
    ("GET", "/healthz", "get", ["healthz", "proxy"]),
    ("HEAD", "/healthz/ping", "get", ["healthz", "proxy"]),
    ("GET", "/configz", "get", ["configz", "proxy"]),
    ("GET", "/containerLogs/ns/pod/c", "get", ["proxy"]),
    ("POST", "/run/ns/pod/c", "create", ["proxy"]),
    ("PUT", "/exec/ns/pod/c", "update", ["proxy"]),
    ("DELETE", "/x", "delete", ["proxy"]),
    ("PATCH", "/x", "patch", ["proxy"]),
    ("GET", "/statsx", "get", ["proxy"]),  # a prefix must end at a path segment
]


@pytest.mark.parametrize(("method", "path", "verb", "subresources"), ATTRIBUTE_TABLE)
def test_request_attributes(method: str, path: str, verb: str, subresources: list[str]) -> None:
    attrs = request_attributes(USER, method, path, "node-1")
    assert [a.subresource for a in attrs] == subresources
    assert all(a.verb == verb and a.resource == "nodes" and a.node == "node-1" for a in attrs)


def test_read_only_rule_separates_reads_from_logs_and_run() -> None:
    authz = PolicyAuthorizer([read_only_rule(groups=["monitoring"]), PolicyRule(users=["root"])])
    mon = UserInfo("m", "", ("monitoring",))

    def allowed(user: UserInfo, method: str, path: str) -> bool:
        return any(authz.authorize(a) for a in request_attributes(user, method, path, "n"))

    for path in ("/stats/summary", "/metrics", "/pods", "/healthz", "/spec/"):
        assert allowed(mon, "GET", path), path
    assert not allowed(mon, "GET", "/containerLogs/a/b/c")
    assert not allowed(mon, "POST", "/run/a/b/c")
    assert not allowed(mon, "POST", "/stats/summary")  # read-only means get only
    assert not allowed(UserInfo("someone"), "GET", "/healthz")
    assert allowed(UserInfo("root"), "POST", "/run/a/b/c")


def test_forbidden_message_is_the_kubelets() -> None:
    a = Attributes(UserInfo("bob"), "create", "proxy", "n", "/run/a/b/c")
    assert a.forbidden_message() == (
        "Forbidden (user=bob, verb=create, resource=nodes, subresource(s)=[proxy])"
    )


def test_token_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text('# comment\n\nt1,alice,1,"a,b"\nt2,bob,2\n')
    tokens = load_token_file(path)
    assert tokens.lookup("t1") == UserInfo("alice", "1", ("a", "b"))
    assert tokens.lookup("t2") == UserInfo("bob", "2", ())
    assert tokens.lookup("t3") is None
    path.write_text("t1,alice,1\nonly-a-token\nt1,carol,3\n")
    with pytest.raises(ConfigurationError) as err:
        load_token_file(path)
    assert f"{path}:2" in str(err.value) and f"{path}:3: duplicate token" in str(err.value)


def test_authentication_order_and_refusals() -> None:
    tokens = TokenFile({"good": UserInfo("tok", "9", ("ops",))})
    peer = {"subject": ((("organizationName", "admins"),), (("commonName", "cert-user"),))}
    auth = Authenticator(client_ca_file="ca.crt", tokens=tokens)
    # A verified certificate wins over a token.
    assert auth.authenticate(peer, "Bearer good") == UserInfo(
        "cert-user", "", ("admins", AUTHENTICATED_GROUP)
    )
    assert auth.authenticate(None, "Bearer good") == UserInfo(
        "tok", "9", ("ops", AUTHENTICATED_GROUP)
    )
    assert auth.authenticate(None, "Bearer bad") is None
    assert auth.authenticate(None, None) is None
    anon = Authenticator(tokens=tokens, anonymous=True)
    assert anon.authenticate(None, None) == UserInfo(
        "system:anonymous", "", ("system:unauthenticated",)
    )
    assert anon.authenticate(None, "Bearer bad") is None
    # Without a client CA configured, certificates are not trusted for identity.
    assert Authenticator(tokens=tokens).authenticate(peer, None) is None


def test_peercert_without_cn_is_no_identity() -> None:
    assert user_from_peercert({"subject": ((("organizationName", "x"),),)}) is None
    assert user_from_peercert({}) is None


def test_policy_rule_from_dict_errors_name_the_field() -> None:
    with pytest.raises(ConfigurationError, match=r"p\[0\].colour: unknown field"):
        PolicyRule.from_dict({"users": ["a"], "colour": "red"}, "p[0]")
    with pytest.raises(ConfigurationError, match=r"p\[1\]: a rule needs users or groups"):
        PolicyRule.from_dict({"verbs": ["get"]}, "p[1]")
