"""Pull-secret parsing and the credential keyring, rule by rule as the kubelet's
credentialprovider (pkg/credentialprovider/config.go, keyring.go)."""

from __future__ import annotations

import base64
import json

import pytest

from kubelet_kit.container import AuthConfig
from kubelet_kit.podsync.credentials import DockerKeyring, image_repository, parse_docker_config


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def cred(user: str, key: str = "") -> AuthConfig:
    return AuthConfig(username=user, password="pw-" + user, server_address=key)


def keyring(*keys: str) -> DockerKeyring:
    """One credential per key, its username the key itself."""
    return DockerKeyring([{key: cred(key, key) for key in keys}])


def users(found: list[AuthConfig]) -> list[str]:
    return [a.username for a in found]


# ------------------------------------------------------------------- parsing


def test_dockerconfigjson_reads_the_auths_map() -> None:
    """MakeDockerKeyring: a .dockerconfigjson secret contributes its "auths"."""
    doc = {"auths": {"r.example": {"username": "u", "password": "p", "email": "e@x"}}}
    parsed = parse_docker_config({".dockerconfigjson": json.dumps(doc).encode()})
    assert parsed == {
        "r.example": AuthConfig(username="u", password="p", server_address="r.example")
    }


def test_dockercfg_is_the_map_without_auths() -> None:
    """MakeDockerKeyring: a legacy .dockercfg secret is the key -> entry map itself."""
    doc = {"https://r.example": {"auth": b64("u:p")}}
    parsed = parse_docker_config({".dockercfg": json.dumps(doc).encode()})
    assert parsed == {
        "https://r.example": AuthConfig(
            username="u", password="p", server_address="https://r.example"
        )
    }


def test_dockerconfigjson_is_preferred_and_empty_data_holds_nothing() -> None:
    """MakeDockerKeyring: .dockerconfigjson first, .dockercfg only when it is
    absent or empty; neither (or both empty) means no credentials."""
    both = {
        ".dockerconfigjson": json.dumps({"auths": {"a.example": {"username": "a"}}}).encode(),
        ".dockercfg": json.dumps({"b.example": {"username": "b"}}).encode(),
    }
    assert list(parse_docker_config(both)) == ["a.example"]
    assert list(
        parse_docker_config({".dockerconfigjson": b"", ".dockercfg": both[".dockercfg"]})
    ) == ["b.example"]
    assert parse_docker_config({"token": b"x"}) == {}
    assert parse_docker_config({".dockerconfigjson": b"{}"}) == {}


def test_auth_field_decodes_to_username_and_password() -> None:
    """DockerConfigEntry.UnmarshalJSON: a non-empty auth is base64 "user:password",
    split at the first colon, and replaces the plain fields."""
    doc = {"auths": {"r.example": {"username": "old", "auth": b64("u:p:with:colons")}}}
    (auth,) = parse_docker_config({".dockerconfigjson": json.dumps(doc).encode()}).values()
    assert (auth.username, auth.password) == ("u", "p:with:colons")


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"[]",
        json.dumps({"auths": []}).encode(),
        json.dumps({"auths": {"r": "text"}}).encode(),
        json.dumps({"auths": {"r": {"username": 1}}}).encode(),
        json.dumps({"auths": {"r": {"auth": "***"}}}).encode(),
        json.dumps({"auths": {"r": {"auth": b64("no-colon")}}}).encode(),
    ],
    ids=["json", "array", "auths-array", "entry-text", "number", "base64", "no-colon"],
)
def test_invalid_configs_raise(raw: bytes) -> None:
    """MakeDockerKeyring returns the unmarshal (or decodeDockerConfigFieldAuth)
    error, which fails the pull."""
    with pytest.raises(ValueError):
        parse_docker_config({".dockerconfigjson": raw})


# ------------------------------------------------------------------- matching


def test_image_repository_is_docker_normalised_without_tag_or_digest() -> None:
    """The kubelet looks credentials up by the parsed repository (ParseImageName)."""
    assert image_repository("busybox") == "docker.io/library/busybox"
    assert image_repository("user/app:1") == "docker.io/user/app"
    assert image_repository("localhost:5000/app:1") == "localhost:5000/app"
    digest = "sha256:" + "a" * 64
    assert image_repository(f"quay.io/a/b:1@{digest}") == "quay.io/a/b"


def test_scheme_and_v1_v2_paths_are_dropped_from_keys() -> None:
    """BasicDockerKeyring.Add: a scheme is optional and /v1/, /v2/ mean no path."""
    ring = keyring("https://a.example/v1/", "http://b.example/v2/", "c.example/")
    assert users(ring.lookup("a.example/x/y")) == ["https://a.example/v1/"]
    assert users(ring.lookup("b.example/x")) == ["http://b.example/v2/"]
    assert users(ring.lookup("c.example/x")) == ["c.example/"]


def test_host_labels_match_as_globs_and_must_be_as_many() -> None:
    """URLsMatch: every host label matches as a glob; the label count must agree."""
    ring = keyring("*.example.com")
    assert users(ring.lookup("r.example.com/app")) == ["*.example.com"]
    assert ring.lookup("example.com/app") == []
    assert ring.lookup("a.b.example.com/app") == []
    assert users(keyring("r*.*.com").lookup("r1.example.com/app")) == ["r*.*.com"]


def test_ports_must_be_equal() -> None:
    """URLsMatch: the port must be the same (none matches only none)."""
    ring = keyring("r.example:5000")
    assert users(ring.lookup("r.example:5000/app")) == ["r.example:5000"]
    assert ring.lookup("r.example/app") == []
    assert ring.lookup("r.example:5001/app") == []
    assert keyring("r.example").lookup("r.example:5000/app") == []


def test_key_path_must_be_a_prefix_of_the_image_path() -> None:
    """URLsMatch: the credential's path is a (string) prefix of the image's."""
    ring = keyring("quay.io/team")
    assert users(ring.lookup("quay.io/team/app")) == ["quay.io/team"]
    assert users(ring.lookup("quay.io/teamwork/app")) == ["quay.io/team"]
    assert ring.lookup("quay.io/other/app") == []


def test_more_specific_keys_come_first() -> None:
    """BasicDockerKeyring.Add: the index is reverse-sorted, so quay.io/coreos is
    tried before quay.io; every match is returned, for the puller to try in turn."""
    ring = keyring("quay.io", "quay.io/coreos", "quay.io/coreos/etcd", "other.io")
    assert users(ring.lookup("quay.io/coreos/etcd")) == [
        "quay.io/coreos/etcd",
        "quay.io/coreos",
        "quay.io",
    ]


def test_same_key_from_several_secrets_keeps_every_credential_in_order() -> None:
    """BasicDockerKeyring.Add appends: keys that index alike keep all their
    credentials, in the order the secrets were added."""
    ring = DockerKeyring([{"r.example": cred("first")}, {"https://r.example": cred("second")}])
    assert users(ring.lookup("r.example/app")) == ["first", "second"]


def test_docker_hub_images_fall_back_to_index_docker_io() -> None:
    """Lookup: with no direct match, a Docker Hub image (isDefaultRegistryMatch)
    uses the index.docker.io credentials, the key docker login writes."""
    ring = keyring("https://index.docker.io/v1/")
    assert users(ring.lookup(image_repository("busybox"))) == ["https://index.docker.io/v1/"]
    assert users(ring.lookup(image_repository("user/app"))) == ["https://index.docker.io/v1/"]
    assert ring.lookup(image_repository("quay.io/app")) == []
    # A docker.io key matches Docker Hub images directly.
    assert users(keyring("docker.io").lookup(image_repository("busybox"))) == ["docker.io"]


def test_server_address_is_the_key_as_written() -> None:
    """The CRI AuthConfig's ServerAddress carries the config key unchanged."""
    doc = {"auths": {"https://r.example/v2/": {"username": "u", "password": "p"}}}
    ring = DockerKeyring([parse_docker_config({".dockerconfigjson": json.dumps(doc).encode()})])
    (auth,) = ring.lookup("r.example/app")
    assert auth.server_address == "https://r.example/v2/"
