"""FakePodSource: a pod source a test fills, that logs its calls and can fail.

The project's in-memory source is
:class:`~kubelet_kit.config.ProgrammaticSource` (an embedding agent's own code
gives it pods); it is the working implementation a fake would otherwise
duplicate. :class:`FakePodSource` is that source with what a test needs on top:

* the call log and ``inject_error`` of every fake (``inject_error("snapshots",
  exc)`` makes the snapshot stream raise at its next snapshot, as a source with
  a bug would; the agent's :class:`~kubelet_kit.config.PodConfig` restarts it);
* :meth:`FakePodSource.set_manifests`, which takes v1 Pod manifests (dicts) and
  reports the invalid ones in the snapshot's ``problems`` with their field
  paths while the valid ones run, as the static-pod directory source does;
* :meth:`FakePodSource.stop`, which ends the snapshot stream.

For example::

    source = FakePodSource("file")
    source.set_manifests([web, {"metadata": {"name": "bad"}, "spec": {}}])
    config = PodConfig(source, clock=clock)
    [update] = config.apply("file", await anext(source.snapshots()))
    assert config.problems["file"] == ("[1] default/bad: spec.containers: Required value",)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from kubelet_kit.config.interfaces import SourceSnapshot
from kubelet_kit.config.programmatic import ProgrammaticSource
from kubelet_kit.errors import ValidationError
from kubelet_kit.testing._fake_log import FakeCallLog

if TYPE_CHECKING:
    from kubelet_kit.api import Pod
    from kubelet_kit.clock import Clock

__all__ = ["FakePodSource"]


def _where(index: int, manifest: Any) -> str:
    """How a problem names its manifest: ``[index] namespace/name`` when it has one."""
    meta = manifest.get("metadata") if isinstance(manifest, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        return f"[{index}]"
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    return f"[{index}] {namespace or 'default'}/{name}"


class FakePodSource(FakeCallLog, ProgrammaticSource):
    """A :class:`~kubelet_kit.config.ProgrammaticSource` with a call log,
    ``inject_error``, manifests with problems, and an end (see the module).

    The methods recorded (and those ``inject_error`` accepts) are ``set_pods``,
    ``add`` (``update`` records as ``add``), ``delete``, ``remove``,
    ``set_manifests`` and ``snapshots``; a fault of ``snapshots`` is raised by
    the stream at its next snapshot.

    Args:
        name: The source name stamped on its pods (``kubernetes.io/config.source``).
        clock: Time source for deletion timestamps.
    """

    _METHODS: ClassVar[frozenset[str]] = frozenset(
        {"set_pods", "add", "delete", "remove", "set_manifests", "snapshots"}
    )

    def __init__(self, name: str = "api", *, clock: Clock | None = None) -> None:
        FakeCallLog.__init__(self)
        ProgrammaticSource.__init__(self, name, clock=clock)
        self._problems: tuple[str, ...] = ()
        self._stopped = False

    @property
    def problems(self) -> tuple[str, ...]:
        """The problems the snapshots report now (from :meth:`set_manifests`)."""
        return self._problems

    def set_pods(self, pods: Iterable[Pod]) -> None:
        """Replace every pod and clear the problems reported; see
        :meth:`ProgrammaticSource.set_pods`."""
        pods = list(pods)
        self._enter("set_pods", (pods,), {"pods": pods})
        self._problems = ()
        super().set_pods(pods)

    def add(self, pod: Pod) -> None:
        """See :meth:`ProgrammaticSource.add`."""
        self._enter("add", (pod,), {"pod": pod})
        super().add(pod)

    update = add

    def delete(self, uid: str, *, grace_period_seconds: int | None = None) -> None:
        """See :meth:`ProgrammaticSource.delete`."""
        self._enter(
            "delete",
            (uid, grace_period_seconds),
            {"uid": uid, "grace_period_seconds": grace_period_seconds},
        )
        super().delete(uid, grace_period_seconds=grace_period_seconds)

    def remove(self, uid: str) -> None:
        """See :meth:`ProgrammaticSource.remove`."""
        self._enter("remove", (uid,), {"uid": uid})
        super().remove(uid)

    def set_manifests(self, manifests: Sequence[Mapping[str, Any]]) -> None:
        """Make the source want exactly the pods of ``manifests`` (v1 Pod dicts).

        Each manifest is loaded as the API server would take it. One that is
        invalid is reported in the snapshots' ``problems``, one line per error
        naming the manifest and the field path (``[1] default/web:
        spec.containers[0].image: Required value``); one that changes a pod
        already held in a way an update may not is reported the same way and
        the pod held stays. Every other pod is published.
        """
        from kubelet_kit.api.loading import load_pod

        manifests = list(manifests)
        self._enter("set_manifests", (manifests,), {"manifests": manifests})
        pods: dict[str, Pod] = {}
        problems: list[str] = []
        for index, manifest in enumerate(manifests):
            where = _where(index, manifest)
            try:
                pod = load_pod(manifest, source=self.name)
                self._check_update(pod)
            except ValidationError as exc:
                problems.extend(f"{where}: {e}" for e in exc.errors)
                held = self._held_for(manifest)
                if held is not None:
                    pods[held.metadata.uid] = held
                continue
            pods[pod.metadata.uid] = pod
        self._pods = pods
        self._problems = tuple(problems)
        self._publish()

    def _held_for(self, manifest: Any) -> Pod | None:
        meta = manifest.get("metadata") if isinstance(manifest, Mapping) else None
        uid = meta.get("uid") if isinstance(meta, Mapping) else None
        return self._pods.get(uid) if isinstance(uid, str) else None

    def stop(self) -> None:
        """End the snapshot stream (after the snapshot it is delivering). Idempotent."""
        self._stopped = True
        self._changed.set()

    async def snapshots(self) -> AsyncIterator[SourceSnapshot]:
        """Yield the current pods (and problems) at once, then after every change,
        until :meth:`stop`. Raises what ``inject_error("snapshots", ...)`` queued,
        at the next snapshot."""
        self._enter("snapshots", ())
        while not self._stopped:
            self._changed.clear()
            self._raise_due("snapshots")
            yield SourceSnapshot(tuple(self._pods.values()), self._problems)
            await self._changed.wait()
