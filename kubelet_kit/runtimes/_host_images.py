"""The images of :class:`~kubelet_kit.runtimes.host.HostProcessRuntime`.

Images are records only, in ``images.json``: a pull checks and normalises the
reference and records it under a stable id (``sha256:`` + the SHA-256 of the
normalised reference); status, list and remove look the records up by
reference or id. An image's size is the bytes its record takes (a host image
has no layers), so it is never 0, which a kubelet refuses; the image filesystem
(``ImageFsInfo``) is the runtime's state directory, where the records live.

A host image has no config, since nothing is fetched from a registry: it names no
user (its status reports neither ``uid`` nor ``username``, and its containers run
as their ``run_as_user`` or as the runtime's own user), and two references are
two images even where a registry serves them as one. The conformance kit's
``image_tags`` and ``image_user`` checks therefore have no images to run on here.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from kubelet_kit.container.images import IMAGE_ID_RE as _IMAGE_ID_RE
from kubelet_kit.container.images import normalize_image_ref
from kubelet_kit.container.interfaces import (
    AuthConfig,
    FilesystemUsage,
    Image,
    ImageSpec,
    PodSandboxConfig,
)
from kubelet_kit.errors import ImageNotFoundError, ImagePullError
from kubelet_kit.runtimes._host_base import _HostRuntimeBase
from kubelet_kit.runtimes._host_records import _IMAGES_FILE, _read_json
from kubelet_kit.runtimes._shim import write_json_atomic


def _image_id(normalized: str) -> str:
    return "sha256:" + hashlib.sha256(normalized.encode()).hexdigest()


def _image(image_id: str, record: dict[str, Any]) -> Image:
    size = len(json.dumps({image_id: record}).encode())
    return Image(
        id=image_id,
        repo_tags=tuple(record["repo_tags"]),
        repo_digests=tuple(record["repo_digests"]),
        size=size,
    )


def load_images(root: Path) -> dict[str, dict[str, Any]]:
    """The image records under ``root``, by id."""
    return dict(_read_json(root / _IMAGES_FILE) or {})


def find_image(images: dict[str, dict[str, Any]], ref: str) -> str | None:
    """The id of the recorded image ``ref`` names (a reference or an id), if any."""
    if _IMAGE_ID_RE.match(ref):
        image_id = ref if ref.startswith("sha256:") else f"sha256:{ref}"
        return image_id if image_id in images else None
    try:
        normalized = normalize_image_ref(ref)
    except ImagePullError:
        return None
    return next(
        (
            i
            for i, img in images.items()
            if normalized in img["repo_tags"] or normalized in img["repo_digests"]
        ),
        None,
    )


def image_ref_of(root: Path, ref: str) -> str:
    """The image id a container made from ``ref`` runs: the recorded image's when
    ``ref`` names one (a kubelet creates containers by the id its pull returned),
    else the id a pull of ``ref`` would record; "" for what is not a reference."""
    found = find_image(load_images(root), ref)
    if found is not None:
        return found
    try:
        return _image_id(normalize_image_ref(ref))
    except ImagePullError:
        return ""


def status_image(root: Path, image_ref: str, given: str) -> tuple[str, str]:
    """A container's ``(image, image_ref)`` for its status, as containerd reports
    them: the recorded image's first tag (else the image as given) and its first
    digest (else its id)."""
    record = load_images(root).get(image_ref)
    if record is None:
        return given, image_ref
    tags, digests = record["repo_tags"], record["repo_digests"]
    return (tags[0] if tags else given), (digests[0] if digests else image_ref)


class _HostImages(_HostRuntimeBase):
    """Recording, looking up and forgetting images."""

    async def pull_image(
        self,
        image: ImageSpec,
        sandbox_config: PodSandboxConfig | None = None,
        auth: AuthConfig | None = None,
    ) -> str:
        """Record the image as present; returns its stable id (``sha256:...``).
        Idempotent; does not block. ``auth`` is accepted and ignored: host
        processes fetch nothing from a registry, so there is nothing to log into.

        Raises:
            ImagePullError: the reference is not a valid image reference.
            ImageNotFoundError: the registry is under the reserved ``.invalid``
                domain (RFC 6761), which no real runtime could ever pull from.
        """
        normalized = normalize_image_ref(image.image)
        registry = normalized.split("/", 1)[0].rsplit(":", 1)[0].lower()
        if registry == "invalid" or registry.endswith(".invalid"):
            raise ImageNotFoundError(
                f'failed to pull image "{image.image}": registry "{registry}" is under the '
                "reserved .invalid domain: not found"
            )
        image_id = _image_id(normalized)
        images = load_images(self._root)
        if image_id not in images:
            digest = "@" in normalized
            images[image_id] = {
                "repo_tags": [] if digest else [normalized],
                "repo_digests": [normalized] if digest else [],
            }
            write_json_atomic(self._root / _IMAGES_FILE, images)
        return image_id

    async def image_status(self, image: ImageSpec) -> Image | None:
        """The image if it was pulled (looked up by reference or id), else None."""
        images = load_images(self._root)
        image_id = find_image(images, image.image)
        if image_id is None:
            return None
        return _image(image_id, images[image_id])

    async def list_images(self) -> list[Image]:
        """Every recorded image, by id."""
        return [_image(i, v) for i, v in sorted(load_images(self._root).items())]

    async def image_fs_info(self) -> list[FilesystemUsage]:
        """The state directory as the image filesystem, with the records' bytes as
        used and one inode per image (:class:`~kubelet_kit.container.ImageFsReporter`)."""
        images = [_image(i, v) for i, v in load_images(self._root).items()]
        return [
            FilesystemUsage(
                str(self._root),
                used_bytes=sum(i.size for i in images),
                inodes_used=len(images),
                timestamp=self._clock.now(),
            )
        ]

    async def remove_image(self, image: ImageSpec) -> None:
        """Forget an image (by reference or id). Idempotent."""
        images = load_images(self._root)
        image_id = find_image(images, image.image)
        if image_id is not None:
            del images[image_id]
            write_json_atomic(self._root / _IMAGES_FILE, images)
