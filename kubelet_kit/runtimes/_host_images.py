"""The images of :class:`~kubelet_kit.runtimes.host.HostProcessRuntime`.

Images are records only, in ``images.json``: a pull checks and normalises the
reference and records it under a stable id (``sha256:`` + the SHA-256 of the
normalised reference); status, list and remove look the records up by
reference or id.
"""

from __future__ import annotations

import hashlib
from typing import Any

from kubelet_kit.container.images import IMAGE_ID_RE as _IMAGE_ID_RE
from kubelet_kit.container.images import normalize_image_ref
from kubelet_kit.container.interfaces import AuthConfig, Image, ImageSpec, PodSandboxConfig
from kubelet_kit.errors import ImageNotFoundError, ImagePullError
from kubelet_kit.runtimes._host_base import _HostRuntimeBase
from kubelet_kit.runtimes._host_records import _IMAGES_FILE, _read_json
from kubelet_kit.runtimes._shim import write_json_atomic


def _image_id(normalized: str) -> str:
    return "sha256:" + hashlib.sha256(normalized.encode()).hexdigest()


class _HostImages(_HostRuntimeBase):
    """Recording, looking up and forgetting images."""

    def _load_images(self) -> dict[str, dict[str, Any]]:
        data = _read_json(self._root / _IMAGES_FILE)
        return dict(data or {})

    def _find_image(self, images: dict[str, dict[str, Any]], ref: str) -> str | None:
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
        images = self._load_images()
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
        images = self._load_images()
        image_id = self._find_image(images, image.image)
        if image_id is None:
            return None
        img = images[image_id]
        return Image(
            id=image_id, repo_tags=tuple(img["repo_tags"]), repo_digests=tuple(img["repo_digests"])
        )

    async def list_images(self) -> list[Image]:
        """Every recorded image, by id."""
        return [
            Image(id=i, repo_tags=tuple(v["repo_tags"]), repo_digests=tuple(v["repo_digests"]))
            for i, v in sorted(self._load_images().items())
        ]

    async def remove_image(self, image: ImageSpec) -> None:
        """Forget an image (by reference or id). Idempotent."""
        images = self._load_images()
        image_id = self._find_image(images, image.image)
        if image_id is not None:
            del images[image_id]
            write_json_atomic(self._root / _IMAGES_FILE, images)
