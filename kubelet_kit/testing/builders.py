"""Pod builders: the one-container pods node-policy tests are made of, in one call.

::

    crasher = make_pod("crasher", command=["sh", "-c", "exit 1"])
    web = make_pod(
        "web",
        image="nginx",
        liveness=["cat", "/tmp/healthy"],           # an exec probe, the defaults' timings
        requests={"cpu": "100m", "memory": "64Mi"},
        limits={"memory": "128Mi"},
        host_port=8080,
    )
    env.add_pod(web)

:func:`make_pod` writes the manifest a user would write and loads it with
:func:`kubelet_kit.api.load_pod`, so the pod carries Kubernetes' defaults and
is validated as a manifest file would be. What it has no argument for is given
as manifest fields: ``container={...}`` on the container, ``spec={...}`` on the
pod's spec. The pytest plugin hands it out as the ``pod`` fixture.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from kubelet_kit.api import Pod

__all__ = ["ProbeSpec", "make_pod"]

#: A probe for :func:`make_pod`: the probe as a manifest writes it (camelCase,
#: e.g. ``{"exec": {"command": ["false"]}, "periodSeconds": 5}``), or the command
#: of an exec probe with Kubernetes' default timings.
ProbeSpec: TypeAlias = Mapping[str, Any] | Sequence[str]

# The source name pods are loaded with: the one KubeletEnv.add_pod gives manifests,
# so a pod built here and the same manifest added there get the same uid.
_SOURCE = "test"


def _argv(what: str, value: Sequence[str]) -> list[str]:
    if isinstance(value, str):
        raise TypeError(
            f"{what} is a list of words, not a string: [{value!r}] or ['sh', '-c', ...]"
        )
    return [str(word) for word in value]


def _probe(what: str, spec: ProbeSpec) -> dict[str, Any]:
    if isinstance(spec, Mapping):
        return dict(spec)
    return {"exec": {"command": _argv(what, spec)}}


def make_pod(
    name: str,
    image: str = "busybox",
    *,
    command: Sequence[str] | None = None,
    args: Sequence[str] | None = None,
    namespace: str = "default",
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    restart_policy: str = "Always",
    container_name: str | None = None,
    env: Mapping[str, str] | None = None,
    liveness: ProbeSpec | None = None,
    readiness: ProbeSpec | None = None,
    startup: ProbeSpec | None = None,
    requests: Mapping[str, str | int] | None = None,
    limits: Mapping[str, str | int] | None = None,
    host_port: int | None = None,
    container_port: int | None = None,
    termination_grace_period: int | None = None,
    container: Mapping[str, Any] | None = None,
    spec: Mapping[str, Any] | None = None,
) -> Pod:
    """A pod of one container, loaded as its manifest would be.

    Args:
        name: The pod's name (and its container's, unless ``container_name``).
        image: The container's image.
        command: The container's ``command`` (a list of words).
        args: The container's ``args``.
        namespace: The pod's namespace.
        uid: The pod's uid (default: derived from its namespace and name, as
            for a manifest without one).
        labels: The pod's labels.
        annotations: The pod's annotations.
        restart_policy: ``Always``, ``OnFailure`` or ``Never``.
        container_name: The container's name (default: ``name``).
        env: The container's environment variables, by name.
        liveness: The container's liveness probe (see :data:`ProbeSpec`).
        readiness: The container's readiness probe.
        startup: The container's startup probe.
        requests: ``resources.requests`` (``{"cpu": "100m", "memory": "64Mi"}``).
        limits: ``resources.limits``; a limit without a request also sets the
            request, as Kubernetes does.
        host_port: A port mapped on the node (``ports[0].hostPort``); its
            ``containerPort`` is ``container_port`` or the same number.
        container_port: The container's port (``ports[0].containerPort``).
        termination_grace_period: ``terminationGracePeriodSeconds``.
        container: Further fields of the container, as the manifest spells
            them; they replace what the arguments above set.
        spec: Further fields of the pod's spec (``initContainers``,
            ``volumes``, ``priority``, ...); they replace what the arguments
            above set.

    Returns:
        The pod, with Kubernetes' defaults, as
        :meth:`kubelet_kit.testing.KubeletEnv.add_pod` and the fakes take it.

    Raises:
        TypeError: ``command``, ``args`` or a probe's command given as one string.
        kubelet_kit.errors.ValidationError: The manifest is not a valid pod.
    """
    from kubelet_kit.api import load_pod

    main: dict[str, Any] = {"name": container_name or name, "image": image}
    if command is not None:
        main["command"] = _argv("command", command)
    if args is not None:
        main["args"] = _argv("args", args)
    if env:
        main["env"] = [{"name": key, "value": str(value)} for key, value in env.items()]
    for field, probe in (
        ("livenessProbe", liveness),
        ("readinessProbe", readiness),
        ("startupProbe", startup),
    ):
        if probe is not None:
            main[field] = _probe(field, probe)
    resources = {
        key: {resource: str(amount) for resource, amount in amounts.items()}
        for key, amounts in (("requests", requests), ("limits", limits))
        if amounts
    }
    if resources:
        main["resources"] = resources
    if host_port is not None or container_port is not None:
        port: dict[str, int] = {"containerPort": container_port or host_port or 0}
        if host_port is not None:
            port["hostPort"] = host_port
        main["ports"] = [port]
    main.update(container or {})

    pod_spec: dict[str, Any] = {"restartPolicy": restart_policy, "containers": [main]}
    if termination_grace_period is not None:
        pod_spec["terminationGracePeriodSeconds"] = termination_grace_period
    pod_spec.update(spec or {})

    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid is not None:
        metadata["uid"] = uid
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
    return load_pod(manifest, source=_SOURCE)
