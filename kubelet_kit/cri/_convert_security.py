"""Conversions of seccomp and AppArmor profiles (``SecurityProfile``).

A profile travels twice in a security context: as the ``SecurityProfile``
message (``seccomp``, ``apparmor``) and as the deprecated string older runtimes
read (``seccomp_profile_path``, ``apparmor_profile``: ``runtime/default``,
``unconfined``, ``localhost/<ref>``). Both are written; on reading, the message
wins and the string is the fallback, so a kubelet of either age is understood.
"""

from __future__ import annotations

from kubelet_kit.container.interfaces import SecurityProfile, SecurityProfileType
from kubelet_kit.cri._convert_values import Message
from kubelet_kit.cri.gen import api_pb2 as pb

_TYPE_TO_PB = {
    SecurityProfileType.RUNTIME_DEFAULT: pb.SecurityProfile.RuntimeDefault,
    SecurityProfileType.UNCONFINED: pb.SecurityProfile.Unconfined,
    SecurityProfileType.LOCALHOST: pb.SecurityProfile.Localhost,
}
_TYPE_FROM_PB = {v: k for k, v in _TYPE_TO_PB.items()}
_LOCALHOST_PREFIX = "localhost/"


def legacy_profile(profile: SecurityProfile) -> str:
    """The deprecated string naming ``profile``."""
    if profile.profile_type is SecurityProfileType.UNCONFINED:
        return "unconfined"
    if profile.profile_type is SecurityProfileType.LOCALHOST:
        return _LOCALHOST_PREFIX + profile.localhost_ref
    return "runtime/default"


def set_profile(
    sc: Message, field: str, legacy_field: str | None, profile: SecurityProfile | None
) -> None:
    """Write ``profile`` into ``sc`` as message ``field`` and (where the message
    has one) the deprecated string ``legacy_field``."""
    if profile is None:
        return
    getattr(sc, field).CopyFrom(
        pb.SecurityProfile(
            profile_type=_TYPE_TO_PB[profile.profile_type], localhost_ref=profile.localhost_ref
        )
    )
    if legacy_field is not None:
        setattr(sc, legacy_field, legacy_profile(profile))


def get_profile(sc: Message, field: str, legacy_field: str | None) -> SecurityProfile | None:
    """The profile of ``sc``: message ``field`` if set, else the string
    ``legacy_field`` (``docker/default`` reads as the runtime's default), else None."""
    if sc.HasField(field):
        msg = getattr(sc, field)
        return SecurityProfile(_TYPE_FROM_PB[msg.profile_type], msg.localhost_ref)
    legacy: str = getattr(sc, legacy_field) if legacy_field is not None else ""
    if not legacy:
        return None
    if legacy == "unconfined":
        return SecurityProfile(SecurityProfileType.UNCONFINED)
    if legacy.startswith(_LOCALHOST_PREFIX):
        return SecurityProfile(SecurityProfileType.LOCALHOST, legacy[len(_LOCALHOST_PREFIX) :])
    return SecurityProfile(SecurityProfileType.RUNTIME_DEFAULT)
