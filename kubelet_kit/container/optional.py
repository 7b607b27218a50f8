"""The optional capabilities of a runtime, and how a runtime declares them.

Every runtime offers :class:`~kubelet_kit.container.RuntimeCore` (version,
status, sandboxes, containers, list and status). Everything else is a capability,
named by a string of :data:`CAPABILITIES`:

==================== ==============================================================
``exec``             :class:`~kubelet_kit.container.ExecRuntime` (``exec_sync``):
                     exec probes, exec lifecycle hooks, the node API's ``/run``
``images``           :class:`~kubelet_kit.container.ImageService` (pull, status,
                     list, remove): without it no image is pulled, every image
                     is taken as present, image GC and the node's image list are off
``stats``            :class:`~kubelet_kit.container.StatsRuntime`: the node API's
                     stats summary and the eviction manager's per-pod usage
``events``           :class:`~kubelet_kit.container.EventRuntime`: the evented PLEG
``update_resources`` :class:`~kubelet_kit.container.ResourceUpdater`
``log_reopen``       :class:`~kubelet_kit.container.LogReopener`: log rotation
``image_fs``         :class:`~kubelet_kit.container.ImageFsReporter`
``streams``          :class:`~kubelet_kit.container.streams.StreamingRuntime` or
                     :class:`~kubelet_kit.container.streams.StreamURLRuntime`:
                     exec, attach and port-forward sessions
``logs``             (a behaviour) the container's output is written to its
                     ``log_path`` in the CRI log format, for the node API's logs
``processes``        (a behaviour) the container's command runs: its exit code
                     is the container's, and a stop sends SIGTERM, then SIGKILL
                     once the timeout runs out
==================== ==============================================================

A runtime declares what it offers with a ``capabilities`` attribute (a set of
those names, usually a class attribute)::

    class ToyRuntime:
        capabilities = frozenset()       # the core and nothing else

The declaration is what counts: a runtime that has a method but declares no
capability for it (a method that only raises, say) is not asked to run it. A
declared capability must come with its methods (:class:`ConfigurationError`
otherwise). A runtime without the attribute offers every capability whose
protocol it satisfies, plus ``logs`` and ``processes`` (what a full
:class:`~kubelet_kit.container.Runtime` always promised). A wrapper runtime that
names the runtime it wraps as ``inner`` and declares nothing itself offers what
that runtime offers and it forwards.

The agent asks :func:`runtime_capabilities` before it uses a capability and says
what a pod asked for that the runtime cannot do (:func:`not_offered`); the
runtime conformance kit runs only the checks whose capabilities are offered.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Final

from kubelet_kit.container.interfaces import (
    EventRuntime,
    ExecRuntime,
    ImageFsReporter,
    ImageService,
    LogReopener,
    ResourceUpdater,
    StatsRuntime,
)
from kubelet_kit.container.streams import StreamingRuntime, StreamURLRuntime
from kubelet_kit.errors import ConfigurationError, UnimplementedError

__all__ = [
    "CAPABILITIES",
    "CAPABILITY_METHODS",
    "EVENTS",
    "EXEC",
    "IMAGES",
    "IMAGE_FS",
    "LOGS",
    "LOG_REOPEN",
    "PROCESSES",
    "STATS",
    "STREAMS",
    "UPDATE_RESOURCES",
    "not_offered",
    "offers",
    "protocol_methods",
    "runtime_capabilities",
    "runtime_name",
]

#: The capability names, one constant each (see the table above).
EXEC: Final = "exec"
IMAGES: Final = "images"
STATS: Final = "stats"
EVENTS: Final = "events"
UPDATE_RESOURCES: Final = "update_resources"
LOG_REOPEN: Final = "log_reopen"
IMAGE_FS: Final = "image_fs"
STREAMS: Final = "streams"
LOGS: Final = "logs"
PROCESSES: Final = "processes"

#: Every capability a runtime may offer beside the core.
CAPABILITIES: Final = frozenset(
    {EXEC, IMAGES, STATS, EVENTS, UPDATE_RESOURCES, LOG_REOPEN, IMAGE_FS, STREAMS, LOGS, PROCESSES}
)

#: The methods each capability backed by methods needs (``streams``: those of
#: either streams protocol; ``logs`` and ``processes`` are behaviours).
CAPABILITY_METHODS: Final[Mapping[str, tuple[str, ...]]] = {
    EXEC: ("exec_sync",),
    IMAGES: ("pull_image", "image_status", "list_images", "remove_image"),
    STATS: ("container_stats", "list_container_stats", "pod_sandbox_stats"),
    EVENTS: ("get_container_events",),
    UPDATE_RESOURCES: ("update_container_resources",),
    LOG_REOPEN: ("reopen_container_log",),
    IMAGE_FS: ("image_fs_info",),
}
_STREAM_METHODS = (
    ("exec_stream", "attach_stream", "port_forward_stream"),
    ("get_exec_url", "get_attach_url", "get_port_forward_url"),
)
_PROTOCOLS: Final[Mapping[str, tuple[type, ...]]] = {
    EXEC: (ExecRuntime,),
    IMAGES: (ImageService,),
    STATS: (StatsRuntime,),
    EVENTS: (EventRuntime,),
    UPDATE_RESOURCES: (ResourceUpdater,),
    LOG_REOPEN: (LogReopener,),
    IMAGE_FS: (ImageFsReporter,),
    STREAMS: (StreamingRuntime, StreamURLRuntime),
}
#: What a runtime without a declaration is taken to do beyond its methods.
_ASSUMED: Final = frozenset({LOGS, PROCESSES})

# A runtime's capabilities do not change: each object is read once.
_known: weakref.WeakKeyDictionary[Any, frozenset[str]] = weakref.WeakKeyDictionary()


def protocol_methods(protocol: type) -> frozenset[str]:
    """The public methods a protocol declares, those of the protocols it extends
    included (``protocol_methods(Runtime)``: every method of every capability)."""
    return frozenset(
        name
        for cls in protocol.__mro__
        if cls is not object and getattr(cls, "_is_protocol", False)
        for name, value in vars(cls).items()
        if not name.startswith("_") and callable(value)
    )


def runtime_name(runtime: Any) -> str:
    """The name errors use for ``runtime``: its class name, a wrapper's looked through."""
    seen = 0
    while getattr(runtime, "inner", None) is not None and seen < 8:
        runtime, seen = runtime.inner, seen + 1
    return type(runtime).__name__


def _check_declaration(runtime: Any, declared: Iterable[str]) -> frozenset[str]:
    if isinstance(declared, str):
        raise ConfigurationError(
            f"{type(runtime).__name__}.capabilities: a set of names, not the string {declared!r}"
        )
    caps = frozenset(declared)
    unknown = sorted(caps - CAPABILITIES)
    if unknown:
        raise ConfigurationError(
            f"{type(runtime).__name__}.capabilities: unknown {', '.join(unknown)}; "
            f"known: {', '.join(sorted(CAPABILITIES))}"
        )

    def has(methods: Iterable[str]) -> bool:
        return all(callable(getattr(runtime, m, None)) for m in methods)

    for cap in sorted(caps):
        if cap == STREAMS:
            if not any(has(ms) for ms in _STREAM_METHODS):
                raise ConfigurationError(
                    f"{type(runtime).__name__} declares {STREAMS} but has neither "
                    f"{', '.join(_STREAM_METHODS[0])} nor {', '.join(_STREAM_METHODS[1])}"
                )
            continue
        missing = [m for m in CAPABILITY_METHODS.get(cap, ()) if not has([m])]
        if missing:
            raise ConfigurationError(
                f"{type(runtime).__name__} declares {cap} but has no {', '.join(missing)}"
            )
    return caps


def _capabilities(runtime: Any, depth: int) -> frozenset[str]:
    declared = getattr(runtime, "capabilities", None)
    if declared is not None:
        return _check_declaration(runtime, declared)
    caps = _ASSUMED | {
        cap
        for cap, protocols in _PROTOCOLS.items()
        if any(isinstance(runtime, p) for p in protocols)
    }
    inner = getattr(runtime, "inner", None)
    if inner is not None and depth < 8:
        # A wrapper forwards what it has of what the runtime it wraps offers.
        caps &= _capabilities(inner, depth + 1)
    return frozenset(caps)


def runtime_capabilities(runtime: Any) -> frozenset[str]:
    """The capabilities ``runtime`` offers beside the core (names of :data:`CAPABILITIES`).

    Its ``capabilities`` attribute when it has one (checked: every name known,
    every declared capability's methods present); otherwise every capability whose
    protocol it satisfies, plus ``logs`` and ``processes``. A wrapper declaring
    nothing (one with an ``inner`` runtime) offers what both it and the runtime
    it wraps offer. Never blocks.

    Raises:
        ConfigurationError: the declaration names an unknown capability, or one
            whose methods the runtime lacks.
    """
    try:
        return _known[runtime]
    except (KeyError, TypeError):
        pass
    caps = _capabilities(runtime, depth=0)
    # Neither hashable nor weakly referenced: asked again next time.
    with contextlib.suppress(TypeError):
        _known[runtime] = caps
    return caps


def offers(runtime: Any, capability: str) -> bool:
    """Whether ``runtime`` offers ``capability`` (see :func:`runtime_capabilities`).

    Raises:
        ValueError: ``capability`` is not one of :data:`CAPABILITIES`.
    """
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown runtime capability {capability!r}")
    return capability in runtime_capabilities(runtime)


def not_offered(runtime: Any, capability: str) -> UnimplementedError:
    """The error for using ``capability`` of a runtime that does not offer it:
    ``runtime ToyRuntime does not offer exec``."""
    return UnimplementedError(f"runtime {runtime_name(runtime)} does not offer {capability}")
