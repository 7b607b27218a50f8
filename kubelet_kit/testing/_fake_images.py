"""The image registry and image store of the fake runtime.

The part of :class:`~kubelet_kit.testing.FakeRuntime` implementing the CRI's
image calls: a registry a test teaches references (``add_image``, with further
references of the same image and the user of its config), with pulls that fail
or need credentials (``fail_pull``, ``require_auth``), the images held on the
node, their status, listing, removal and the image filesystem's usage.

The node holds references: an image is on the node while one of its references
is, its ``repo_tags`` are the references the node holds, and removing it (by
any reference, or by id) removes them all, as the CRI's RemoveImage does.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping

import attrs

from kubelet_kit.container.images import image_user
from kubelet_kit.container.interfaces import (
    AuthConfig,
    FilesystemUsage,
    Image,
    ImageSpec,
    PodSandboxConfig,
)
from kubelet_kit.errors import ImageNotFoundError, ImagePullError
from kubelet_kit.testing._fake_base import _FakeRuntimeBase
from kubelet_kit.testing._fake_records import _image_id, _normalized, normalize_image_ref

#: One image that :meth:`_ImagePart.add_conformance_images` teaches under these
#: three references (two tags of a repository and a tag of another), for the
#: conformance kit's ``same_image_refs``.
CONFORMANCE_SAME_IMAGE_REFS: tuple[str, ...] = (
    "kubelet-kit.test/tagged:1",
    "kubelet-kit.test/tagged:2",
    "kubelet-kit.test/tagged-too:1",
)
#: Images that :meth:`_ImagePart.add_conformance_images` teaches, by reference,
#: with the ``User`` of their config, for the conformance kit's ``user_images``.
CONFORMANCE_USER_IMAGES: Mapping[str, str] = {
    "kubelet-kit.test/user-uid:1": "1002",
    "kubelet-kit.test/user-name:1": "www-data",
    "kubelet-kit.test/user-uid-gid:1": "1003:1004",
}


class _ImagePart(_FakeRuntimeBase):
    """The registry's controls and ``pull_image`` to ``image_fs_info``."""

    def add_image(
        self,
        ref: str,
        *,
        present: bool = False,
        size: int = 1_048_576,
        pinned: bool = False,
        aliases: Iterable[str] = (),
        user: str = "",
    ) -> Image:
        """Teach the registry ``ref`` (so pulling it succeeds); ``present`` also puts
        it on the node (under every reference); ``pinned`` marks it as one image GC
        must keep (a sandbox image). ``aliases`` are further references of the same
        image (other tags, or tags in other repositories): pulling any of them puts
        that one image (one id) on the node. ``user`` is the ``User`` of the
        image's config (``"1000"``, ``"1000:1000"``, ``"www-data"``), which its
        status reports as ``uid`` or ``username``. Returns the image, with every
        reference it is known by as ``repo_tags``."""
        norm = normalize_image_ref(ref)
        refs = tuple(dict.fromkeys([norm, *(normalize_image_ref(a) for a in aliases)]))
        uid, username = image_user(user)
        image = Image(
            id=_image_id(norm),
            repo_tags=refs,
            size=size,
            pinned=pinned,
            uid=uid,
            username=username,
        )
        self._image_by_id.clear()  # the registry changes: ids may name other images
        for known in refs:
            self._registry[known] = image
            self._pull_failures.pop(known, None)
            if present:
                self._present.add(known)
        return image

    def add_conformance_images(self) -> None:
        """Teach the registry the images the conformance kit's image checks can be
        given: :data:`CONFORMANCE_SAME_IMAGE_REFS` (one image under three
        references) and :data:`CONFORMANCE_USER_IMAGES` (images whose config names
        a user). Nothing is put on the node."""
        first, *others = CONFORMANCE_SAME_IMAGE_REFS
        self.add_image(first, aliases=others)
        for ref, user in CONFORMANCE_USER_IMAGES.items():
            self.add_image(ref, user=user)

    def fail_pull(self, ref: str, exc: BaseException) -> None:
        """Make every pull of ``ref`` raise ``exc`` until :meth:`add_image` is called."""
        self._pull_failures[normalize_image_ref(ref)] = exc

    def require_auth(self, ref: str, username: str, password: str) -> None:
        """Make ``ref`` private: a pull succeeds only with an
        :class:`~kubelet_kit.container.AuthConfig` carrying ``username`` and
        ``password`` (directly or as the base64 ``auth`` form); any other pull
        raises ImagePullError, as a registry answering "unauthorized" does.
        Calling it again adds another accepted pair. The image must still be
        known (:meth:`add_image`)."""
        self._private.setdefault(normalize_image_ref(ref), set()).add((username, password))

    # ============================================================== Runtime: images

    async def pull_image(
        self,
        image: ImageSpec,
        sandbox_config: PodSandboxConfig | None = None,
        auth: AuthConfig | None = None,
    ) -> str:
        """Pull an image the registry knows; returns its id (``sha256:...``).

        Takes ``pull_latency`` extra clock seconds. ``auth`` is recorded with the
        call (``calls_to("pull_image")[i].kwargs["auth"]``) and checked only for
        images made private by :meth:`require_auth`.

        Raises:
            ImageNotFoundError: the registry does not know the reference.
            ImagePullError: a private image pulled without accepted credentials.
            ImagePullError: (or whatever :meth:`fail_pull` scripted).
        """
        await self._enter("pull_image", (image, sandbox_config, auth))
        if self.pull_latency > 0:
            await self.clock.sleep(self.pull_latency)
        norm = _normalized(image.image)
        failure = self._pull_failures.get(norm)
        if failure is not None:
            raise failure.with_traceback(None)
        accepted = self._private.get(norm)
        if accepted is not None and _credentials(auth) not in accepted:
            raise ImagePullError(
                f"pull_image: {image.image!r} ({norm}): unauthorized: authentication required"
            )
        known = self._registry.get(norm)
        if known is None and self.pull_any and not _on_invalid_registry(norm):
            known = self.add_image(image.image)
        if known is None:
            raise ImageNotFoundError(
                f"pull_image: {image.image!r} ({norm}): not found in the registry"
            )
        self._present.add(norm)
        return known.id

    async def image_status(self, image: ImageSpec) -> Image | None:
        """The image if the node holds it (by reference or id), else None."""
        await self._enter("image_status", (image,))
        return self._find_present(image.image)

    async def list_images(self) -> list[Image]:
        """Every image the node holds, once each (with every reference it is held
        under as ``repo_tags``)."""
        await self._enter("list_images", ())
        return self._held()

    async def image_fs_info(self) -> list[FilesystemUsage]:
        """The image filesystem given as ``image_fs`` (a directory of the test's),
        using the present images' sizes; empty without one."""
        await self._enter("image_fs_info", ())
        if self.image_fs is None:
            return []
        held = self._held()
        return [
            FilesystemUsage(
                self.image_fs,
                used_bytes=sum(image.size for image in held),
                inodes_used=len(held),
                timestamp=self.clock.now(),
            )
        ]

    async def remove_image(self, image: ImageSpec) -> None:
        """Remove an image from the node, by any of its references or by id, with
        every reference it is held under (the registry still knows it). Idempotent."""
        await self._enter("remove_image", (image,))
        found = self._find_present(image.image)
        if found is not None:
            self._present.difference_update(found.repo_tags)

    def _held_as(self, image: Image) -> Image:
        """``image`` as the node holds it: ``repo_tags`` are its held references."""
        present, registry = self._present, self._registry
        # Held under every reference it has (the usual case): the frozen image
        # itself is that value, no copy needed. A plain loop finds it out, cheaper
        # than building the tuple of held references to compare.
        for ref in image.repo_tags:
            if ref not in present or registry[ref].id != image.id:
                break
        else:
            return image
        # Held under some of its references only: a copy naming those.
        tags = tuple(
            ref for ref in image.repo_tags if ref in present and registry[ref].id == image.id
        )
        return attrs.evolve(image, repo_tags=tags)

    def _held(self) -> list[Image]:
        """Every image the node holds, once each, in the order of their references."""
        images: dict[str, Image] = {}
        for ref in sorted(self._present):
            image = self._registry[ref]
            if image.id not in images:
                images[image.id] = self._held_as(image)
        return list(images.values())

    def _find_present(self, ref: str) -> Image | None:
        if not ref.startswith("sha256:"):
            # A reference (never an image id, which starts with "sha256:") is held
            # or not under its normalised self: a lookup, not a scan.
            norm = _normalized(ref)
            return self._held_as(self._registry[norm]) if norm in self._present else None
        norm = ref
        for held in self._present:
            image = self._registry[held]
            if held == norm or image.id == ref:
                return self._held_as(image)
        return None


def _on_invalid_registry(normalized: str) -> bool:
    """Whether a normalised reference names a registry under ``.invalid``, a domain
    reserved never to resolve (RFC 6761)."""
    host = normalized.split("/", 1)[0].rsplit(":", 1)[0]
    return host == "invalid" or host.endswith(".invalid")


def _credentials(auth: AuthConfig | None) -> tuple[str, str] | None:
    """The (username, password) an AuthConfig carries, from its fields or, as a
    registry would accept it, from the base64 ``user:password`` ``auth`` form."""
    if auth is None:
        return None
    if auth.username or auth.password:
        return (auth.username, auth.password)
    if auth.auth:
        try:
            user, sep, password = base64.b64decode(auth.auth).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        if sep:
            return (user, password)
    return None
