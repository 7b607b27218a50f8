"""Validation of a pod's volumes: names, sources and the files they project.

:class:`VolumeChecks` checks ``spec.volumes``: unique RFC 1123 names, exactly one
source per volume, and each source's fields (emptyDir medium and size, hostPath
path and type, configMap, secret, downwardAPI and projected items with their
paths, modes and field selectors, persistentVolumeClaim claim names).
"""

from __future__ import annotations

from collections.abc import Sequence

from kubelet_kit.api._names import is_dns1123_label
from kubelet_kit.api._validate_base import ZERO, ValidatorBase
from kubelet_kit.api.pod import DownwardAPIVolumeFile, KeyToPath, Volume

__all__ = ["VolumeChecks"]

_HOST_PATH_TYPES = (
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
)
_VOLUME_FIELD_PATHS = (
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
)


class VolumeChecks(ValidatorBase):
    """The checks of ``spec.volumes``."""

    def volumes(self, volumes: Sequence[Volume], path: str) -> set[str]:
        names: set[str] = set()
        for i, vol in enumerate(volumes):
            vpath = f"{path}[{i}]"
            if not vol.name:
                self.required(f"{vpath}.name")
            else:
                self.each(f"{vpath}.name", vol.name, is_dns1123_label(vol.name))
                if vol.name in names:
                    self.duplicate(f"{vpath}.name", vol.name)
                names.add(vol.name)
            self.volume_source(vol, vpath)
        return names

    def volume_source(self, vol: Volume, path: str) -> None:
        kinds = vol.source_kinds
        if not kinds:
            self.required(path, "must specify a volume type")
            return
        for extra_kind in kinds[1:]:
            self.forbidden(f"{path}.{extra_kind}", "may not specify more than 1 volume type")
        if vol.empty_dir is not None:
            p = f"{path}.emptyDir"
            medium = vol.empty_dir.medium
            if medium not in ("", "Memory", "HugePages") and not medium.startswith("HugePages-"):
                self.not_supported(f"{p}.medium", medium, ("", "HugePages", "Memory"))
            limit = vol.empty_dir.size_limit
            if limit is not None and limit < ZERO:
                self.forbidden(
                    f"{p}.sizeLimit", "SizeLimit field must be a valid resource quantity"
                )
        if vol.host_path is not None:
            p = f"{path}.hostPath"
            if not vol.host_path.path:
                self.required(f"{p}.path")
            elif ".." in vol.host_path.path.split("/"):
                self.invalid(f"{p}.path", vol.host_path.path, "must not contain '..'")
            if vol.host_path.type not in _HOST_PATH_TYPES:
                self.not_supported(f"{p}.type", vol.host_path.type, _HOST_PATH_TYPES)
        if vol.config_map is not None:
            p = f"{path}.configMap"
            if not vol.config_map.name:
                self.required(f"{p}.name")
            self.mode(f"{p}.defaultMode", vol.config_map.default_mode)
            self.key_to_paths(vol.config_map.items, f"{p}.items")
        if vol.secret is not None:
            p = f"{path}.secret"
            if not vol.secret.secret_name:
                self.required(f"{p}.secretName")
            self.mode(f"{p}.defaultMode", vol.secret.default_mode)
            self.key_to_paths(vol.secret.items, f"{p}.items")
        if vol.downward_api is not None:
            p = f"{path}.downwardAPI"
            self.mode(f"{p}.defaultMode", vol.downward_api.default_mode)
            self.downward_files(vol.downward_api.items, f"{p}.items")
        if vol.projected is not None:
            self.projected(vol, f"{path}.projected")
        if vol.persistent_volume_claim is not None and not vol.persistent_volume_claim.claim_name:
            self.required(f"{path}.persistentVolumeClaim.claimName")

    def projected(self, vol: Volume, path: str) -> None:
        assert vol.projected is not None
        self.mode(f"{path}.defaultMode", vol.projected.default_mode)
        for i, src in enumerate(vol.projected.sources):
            p = f"{path}.sources[{i}]"
            kinds = [
                k
                for k, v in (
                    ("secret", src.secret),
                    ("configMap", src.config_map),
                    ("downwardAPI", src.downward_api),
                    ("serviceAccountToken", src.service_account_token),
                )
                if v is not None
            ]
            kinds.extend(src.extra)
            if not kinds:
                self.required(p, "must specify one source")
            for kind in kinds[1:]:
                self.forbidden(f"{p}.{kind}", "may not specify more than 1 volume type per source")
            if src.secret is not None:
                if not src.secret.name:
                    self.required(f"{p}.secret.name")
                self.key_to_paths(src.secret.items, f"{p}.secret.items")
            if src.config_map is not None:
                if not src.config_map.name:
                    self.required(f"{p}.configMap.name")
                self.key_to_paths(src.config_map.items, f"{p}.configMap.items")
            if src.downward_api is not None:
                self.downward_files(src.downward_api.items, f"{p}.downwardAPI.items")
            token = src.service_account_token
            if token is not None:
                if not token.path:
                    self.required(f"{p}.serviceAccountToken.path")
                else:
                    self.relative_path(f"{p}.serviceAccountToken.path", token.path)
                if token.expiration_seconds < 600:
                    self.invalid(
                        f"{p}.serviceAccountToken.expirationSeconds",
                        token.expiration_seconds,
                        "may not specify a duration less than 10 minutes",
                    )

    def key_to_paths(self, items: Sequence[KeyToPath], path: str) -> None:
        for i, item in enumerate(items):
            p = f"{path}[{i}]"
            if not item.key:
                self.required(f"{p}.key")
            if not item.path:
                self.required(f"{p}.path")
            else:
                self.relative_path(f"{p}.path", item.path, item=True)
            self.mode(f"{p}.mode", item.mode)

    def downward_files(self, items: Sequence[DownwardAPIVolumeFile], path: str) -> None:
        for i, item in enumerate(items):
            p = f"{path}[{i}]"
            if not item.path:
                self.required(f"{p}.path")
            else:
                self.relative_path(f"{p}.path", item.path, item=True)
            self.mode(f"{p}.mode", item.mode)
            if item.field_ref is not None and item.resource_field_ref is not None:
                self.invalid(
                    p,
                    "resource",
                    "fieldRef and resourceFieldRef can not be specified simultaneously",
                )
            elif item.field_ref is not None:
                self.field_ref(item.field_ref, f"{p}.fieldRef", _VOLUME_FIELD_PATHS)
            elif item.resource_field_ref is not None:
                self.resource_field_ref(
                    item.resource_field_ref, f"{p}.resourceFieldRef", container_required=True
                )
            else:
                self.required(p, "one of fieldRef and resourceFieldRef is required")
