"""Conversions of seccomp and AppArmor profiles: the SecurityProfile messages
and the deprecated strings beside them."""

from __future__ import annotations

import pytest

from kubelet_kit.container import (
    ContainerConfig,
    ContainerMetadata,
    ImageSpec,
    LinuxContainerSecurityContext,
    PodSandboxConfig,
    PodSandboxMetadata,
    SecurityProfile,
    SecurityProfileType,
)
from kubelet_kit.cri import convert
from kubelet_kit.cri.gen import api_pb2 as pb


@pytest.mark.parametrize(
    ("legacy", "want"),
    [
        ("", None),
        ("unconfined", SecurityProfile(SecurityProfileType.UNCONFINED)),
        ("runtime/default", SecurityProfile(SecurityProfileType.RUNTIME_DEFAULT)),
        ("docker/default", SecurityProfile(SecurityProfileType.RUNTIME_DEFAULT)),
        ("localhost/p.json", SecurityProfile(SecurityProfileType.LOCALHOST, "p.json")),
    ],
)
def test_deprecated_profile_strings_are_read(legacy: str, want: SecurityProfile | None) -> None:
    msg = pb.ContainerConfig(
        linux=pb.LinuxContainerConfig(
            security_context=pb.LinuxContainerSecurityContext(
                seccomp_profile_path=legacy, apparmor_profile=legacy, privileged=True
            )
        )
    )
    sc = convert.container_config_from_pb(msg).security_context
    assert sc is not None
    assert (sc.seccomp, sc.apparmor) == (want, want)


def test_profiles_are_sent_both_ways() -> None:
    sc = LinuxContainerSecurityContext(
        seccomp=SecurityProfile(SecurityProfileType.LOCALHOST, "/p.json"),
        apparmor=SecurityProfile(SecurityProfileType.UNCONFINED),
    )
    cfg = ContainerConfig(ContainerMetadata("c"), ImageSpec("i"), security_context=sc)
    msg = convert.container_config_to_pb(cfg).linux.security_context
    assert msg.seccomp.profile_type == pb.SecurityProfile.Localhost
    assert (msg.seccomp_profile_path, msg.apparmor_profile) == ("localhost//p.json", "unconfined")


def test_profile_type_numbers_match_upstream() -> None:
    values = pb.SecurityProfile.DESCRIPTOR.enum_types_by_name["ProfileType"].values_by_name
    assert {k: v.number for k, v in values.items()} == {
        "RuntimeDefault": 0,
        "Unconfined": 1,
        "Localhost": 2,
    }


def test_field_numbers_match_upstream() -> None:
    def numbers(message: str) -> dict[str, int]:
        fields = pb.DESCRIPTOR.message_types_by_name[message].fields_by_name
        return {name: f.number for name, f in fields.items()}

    assert numbers("SecurityProfile") == {"profile_type": 1, "localhost_ref": 2}
    sandbox = numbers("LinuxSandboxSecurityContext")
    assert [sandbox[f] for f in ("seccomp_profile_path", "seccomp", "apparmor")] == [7, 9, 10]
    container = numbers("LinuxContainerSecurityContext")
    names = ("apparmor_profile", "seccomp_profile_path", "seccomp", "apparmor")
    assert [container[f] for f in names] == [9, 10, 15, 16]


PROFILES = [
    None,
    SecurityProfile(SecurityProfileType.RUNTIME_DEFAULT),
    SecurityProfile(SecurityProfileType.UNCONFINED),
    SecurityProfile(SecurityProfileType.LOCALHOST, "/var/lib/kubelet/seccomp/p.json"),
]


@pytest.mark.parametrize("profile", PROFILES)
def test_profiles_round_trip(profile: SecurityProfile | None) -> None:
    sc = LinuxContainerSecurityContext(seccomp=profile, apparmor=profile, no_new_privs=True)
    cfg = ContainerConfig(ContainerMetadata("c"), ImageSpec("i"), security_context=sc)
    back = convert.container_config_from_pb(convert.container_config_to_pb(cfg))
    assert back.security_context == sc
    sandbox = PodSandboxConfig(
        PodSandboxMetadata("p", "ns", "u"), seccomp=profile, apparmor=profile
    )
    assert convert.sandbox_config_from_pb(convert.sandbox_config_to_pb(sandbox)) == sandbox
