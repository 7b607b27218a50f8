"""The Runtime conformance kit: behavioural checks any Runtime can run against itself.

The kit exercises a :class:`kubelet_kit.container.Runtime` the way the kubelet
relies on it (sandboxes, containers, exits, logs, exec, images, typed errors),
using only busybox-compatible ``sh -c`` scripts, so the same checks run against
the in-memory :class:`~kubelet_kit.testing.FakeRuntime`, host processes and a
real CRI runtime. Every failure names the check and the step that failed.

A user's test is three lines::

    from kubelet_kit.testing.conformance import check_runtime

    async def test_my_runtime_conforms(tmp_path):
        await check_runtime(MyRuntime(), log_root=tmp_path)

or, one pytest test per check::

    test_my_runtime = conformance_test(MyRuntime)

Time: checks that wait (a container exiting, a stop grace period, an exec
timeout) let time pass through ``wait(seconds)``. By default that is
``FakeClock.run_for`` when the runtime has a ``clock`` attribute holding a
:class:`~kubelet_kit.testing.FakeClock`, and ``asyncio.sleep`` otherwise. Every wait
is bounded by ``timeout`` seconds of that time.

What a real runtime does differently from the fake, and the kit accepts: a stopped
container running ``sleep`` as PID 1 ignores SIGTERM (the kernel drops signals PID 1
has no handler for), so its exit code after a stop may be 143 (terminated) or 137
(killed after the timeout).

Each check runs in its own sandbox (named ``kk-conformance-<check>-<run id>`` in the
namespace ``kubelet-kit-conformance``) and removes it afterwards, even on failure.

Capabilities: a runtime need only be a :class:`~kubelet_kit.container.RuntimeCore`.
Each check needs the capabilities :data:`REQUIRES` names (exec, images, logs,
processes, ...); a check needing one the runtime does not offer
(:func:`~kubelet_kit.container.runtime_capabilities`: its ``capabilities``
declaration, else what it has) is skipped as ``not offered: <capability>``, and
without ``images`` nothing is pulled first.

Two image checks need images of their own, given as options: ``image_tags``
takes ``same_image_refs`` (references of one image: one id, all of them its
``repo_tags``, listed once, removed together), ``image_user`` takes
``user_images`` (references with the ``User`` their config names: reported as
``uid`` for a number, ``username`` for a name). Without them they are skipped.
:class:`~kubelet_kit.testing.FakeRuntime` offers such images
(``add_conformance_images``). Against any CRI endpoint, the kit runs as a pytest
suite, one test per check: ``pytest -p kubelet_kit.testing.cri_validation
--cri-endpoint unix:///run/containerd/containerd.sock`` (see
:mod:`kubelet_kit.testing.cri_validation`).

The checks live by area in private sibling modules (the check context, sandboxes,
containers, exits with logs and exec, images, pods of several containers with
their user, log reopening and DNS config, volumes with mount propagation and
the working directory and environment, security contexts with namespaces and
sysctls, stats with events); this module holds
the results, the table of checks and the runners.

The volume and propagation checks mount host directories the kit makes in a
temporary directory of its own, so the kit must run on the runtime's machine;
the propagation checks make mounts on the host and are skipped without root.
"""

import asyncio
import inspect
import os
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, cast

import attrs

from kubelet_kit.container.interfaces import (
    ImageService,
    ImageSpec,
    PodSandboxConfig,
    Runtime,
    RuntimeCore,
)
from kubelet_kit.container.optional import runtime_capabilities
from kubelet_kit.errors import UnimplementedError
from kubelet_kit.testing._conformance_containers import (
    _check_container_lifecycle,
    _check_sigterm_ignored,
)
from kubelet_kit.testing._conformance_context import (
    NAMESPACE,
    RUN_LABEL,
    Wait,
    _CheckFailed,
    _Ctx,
    _Skip,
)
from kubelet_kit.testing._conformance_images import (
    _check_image_tags,
    _check_image_user,
    _check_images,
)
from kubelet_kit.testing._conformance_io import _check_exec, _check_exit_codes_and_logs
from kubelet_kit.testing._conformance_mounts import (
    _check_mount_propagation_bidirectional,
    _check_mount_propagation_host_to_container,
    _check_mount_propagation_private,
    _check_volumes,
    _check_working_dir_and_envs,
)
from kubelet_kit.testing._conformance_observe import _check_events, _check_stats
from kubelet_kit.testing._conformance_pods import (
    _check_dns_config,
    _check_log_reopen,
    _check_multi_container,
    _check_run_as,
)
from kubelet_kit.testing._conformance_sandboxes import (
    _check_duplicate_names,
    _check_sandbox_lifecycle,
    _check_unknown_ids,
    _check_version_and_status,
)
from kubelet_kit.testing._conformance_security import (
    _check_apparmor,
    _check_capabilities,
    _check_default_capabilities,
    _check_host_namespaces,
    _check_no_new_privs,
    _check_pod_namespaces,
    _check_privileged,
    _check_readonly_rootfs,
    _check_seccomp,
    _check_supplemental_groups,
    _check_sysctls,
)
from kubelet_kit.testing._conformance_streams import (
    _check_attach,
    _check_exec_stream,
    _check_exec_sync_timeout,
    _check_port_forward,
    _check_port_mappings,
)
from kubelet_kit.testing.clock import FakeClock

__all__ = [
    "CHECKS",
    "NAMESPACE",
    "REQUIRES",
    "RUN_LABEL",
    "CheckResult",
    "ConformanceFailure",
    "ConformanceReport",
    "Wait",
    "check_runtime",
    "conformance_test",
    "run_conformance",
]


# ------------------------------------------------------------------------ results


@attrs.frozen
class CheckResult:
    """The outcome of one check.

    Attributes:
        name: The check's name (a key of :data:`CHECKS`).
        status: ``"passed"``, ``"failed"`` or ``"skipped"`` (the runtime does
            not offer a capability the check needs, or raised UnimplementedError
            for an optional operation).
        message: For a failure, ``<step>: <what was wrong>``; for a skip, why.
    """

    name: str
    status: Literal["passed", "failed", "skipped"]
    message: str = ""


@attrs.frozen
class ConformanceReport:
    """Every check's result, in the order the checks ran."""

    results: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        """True when no check failed."""
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        """The failed checks."""
        return [r for r in self.results if r.status == "failed"]

    def result(self, name: str) -> CheckResult:
        """The result of the check ``name``.

        Raises:
            KeyError: that check did not run.
        """
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def summary(self) -> str:
        """One line per check: ``PASS``/``FAIL``/``SKIP``, its name and message."""
        tags = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}
        return "\n".join(
            f"{tags[r.status]} {r.name}" + (f": {r.message}" if r.message else "")
            for r in self.results
        )

    def raise_for_failures(self) -> None:
        """Raise :class:`ConformanceFailure` if any check failed."""
        if not self.ok:
            raise ConformanceFailure(self)


class ConformanceFailure(AssertionError):
    """A runtime failed the conformance kit; ``report`` holds every result.

    An AssertionError, so pytest shows it as a test failure with the summary.
    """

    def __init__(self, report: ConformanceReport) -> None:
        self.report = report
        failed = ", ".join(r.name for r in report.failures)
        super().__init__(f"failed conformance checks: {failed}\n{report.summary()}")


# ------------------------------------------------------------------------- checks

#: Every check, by name, in the order :func:`run_conformance` runs them.
CHECKS: dict[str, Callable[[_Ctx], Awaitable[None]]] = {
    "version_and_status": _check_version_and_status,
    "sandbox_lifecycle": _check_sandbox_lifecycle,
    "unknown_ids": _check_unknown_ids,
    "duplicate_names": _check_duplicate_names,
    "images": _check_images,
    "image_tags": _check_image_tags,
    "image_user": _check_image_user,
    "container_lifecycle": _check_container_lifecycle,
    "exit_codes_and_logs": _check_exit_codes_and_logs,
    "exec": _check_exec,
    "exec_sync_timeout": _check_exec_sync_timeout,
    "exec_stream": _check_exec_stream,
    "attach": _check_attach,
    "port_forward": _check_port_forward,
    "port_mappings": _check_port_mappings,
    "sigterm_ignored": _check_sigterm_ignored,
    "multi_container": _check_multi_container,
    "run_as": _check_run_as,
    "log_reopen": _check_log_reopen,
    "dns_config": _check_dns_config,
    "working_dir_and_envs": _check_working_dir_and_envs,
    "volumes": _check_volumes,
    "mount_propagation_private": _check_mount_propagation_private,
    "mount_propagation_host_to_container": _check_mount_propagation_host_to_container,
    "mount_propagation_bidirectional": _check_mount_propagation_bidirectional,
    "readonly_rootfs": _check_readonly_rootfs,
    "privileged": _check_privileged,
    "default_capabilities": _check_default_capabilities,
    "capabilities": _check_capabilities,
    "no_new_privs": _check_no_new_privs,
    "supplemental_groups": _check_supplemental_groups,
    "pod_namespaces": _check_pod_namespaces,
    "host_namespaces": _check_host_namespaces,
    "sysctls": _check_sysctls,
    "seccomp": _check_seccomp,
    "apparmor": _check_apparmor,
    "stats": _check_stats,
    "events": _check_events,
}


_EXEC = frozenset({"exec"})
_RUNS = frozenset({"processes", "logs"})

#: The capabilities (:data:`kubelet_kit.container.CAPABILITIES`) each check needs
#: beside the core; a runtime offering fewer skips the check.
REQUIRES: Final[dict[str, frozenset[str]]] = {
    "version_and_status": frozenset(),
    "sandbox_lifecycle": frozenset(),
    "unknown_ids": frozenset(),
    "duplicate_names": frozenset(),
    "images": frozenset({"images"}),
    "image_tags": frozenset({"images"}),
    "image_user": frozenset({"images"}),
    "container_lifecycle": frozenset(),
    "exit_codes_and_logs": _RUNS,
    "exec": _EXEC,
    "exec_sync_timeout": _EXEC,
    "exec_stream": frozenset({"streams"}),
    "attach": frozenset({"streams"}),
    "port_forward": frozenset({"streams"}),
    "port_mappings": frozenset({"processes"}),
    "sigterm_ignored": frozenset({"processes"}),
    "multi_container": frozenset(),
    "run_as": _RUNS | _EXEC,
    "log_reopen": _RUNS | {"log_reopen"},
    "dns_config": _EXEC,
    "working_dir_and_envs": _RUNS | _EXEC,
    "volumes": _EXEC,
    "mount_propagation_private": _EXEC,
    "mount_propagation_host_to_container": _EXEC,
    "mount_propagation_bidirectional": _EXEC,
    "readonly_rootfs": _EXEC,
    "privileged": _EXEC,
    "default_capabilities": _EXEC,
    "capabilities": _EXEC,
    "no_new_privs": _EXEC,
    "supplemental_groups": _EXEC,
    "pod_namespaces": _EXEC,
    "host_namespaces": _EXEC,
    "sysctls": _EXEC,
    "seccomp": _EXEC,
    "apparmor": _EXEC,
    "stats": frozenset({"stats"}),
    "events": frozenset({"events", "processes"}),
}


# ----------------------------------------------------------------------- runners

#: Checks of optional operations: UnimplementedError skips them instead of failing.
_OPTIONAL = frozenset({"stats", "events"})
#: Checks that need no pulled image.
_NEEDS_NO_IMAGE = frozenset(
    {"version_and_status", "sandbox_lifecycle", "unknown_ids", "images", "image_tags", "image_user"}
)


def _default_wait(runtime: RuntimeCore) -> Wait:
    clock = getattr(runtime, "clock", None)
    if isinstance(clock, FakeClock):
        return clock.run_for
    return asyncio.sleep


async def run_conformance(
    runtime: RuntimeCore,
    *,
    log_root: str | os.PathLike[str],
    image: str = "busybox",
    missing_image: str = "registry.invalid/kubelet-kit/no-such-image:0",
    wait: Wait | None = None,
    timeout: float = 30.0,
    poll_interval: float = 0.1,
    stop_timeout: float = 2.0,
    checks: Sequence[str] | None = None,
    sandbox_template: PodSandboxConfig | None = None,
    run_id: str | None = None,
    same_image_refs: Sequence[str] = (),
    user_images: Mapping[str, str] | None = None,
    network_template: PodSandboxConfig | None = None,
) -> ConformanceReport:
    """Run the conformance checks against ``runtime`` and report every result.

    Never raises for a failed check (see :func:`check_runtime` for that). The image
    is pulled as part of the ``images`` check; the container checks expect it to be
    pullable (they pull it themselves if needed). Checks needing a capability
    the runtime does not offer (:data:`REQUIRES`) are skipped with ``not
    offered: <capability>``.

    Args:
        runtime: The runtime under test (any
            :class:`~kubelet_kit.container.RuntimeCore`).
        log_root: A directory the runtime can write container logs under (each
            sandbox gets ``<log_root>/<namespace>_<name>_<uid>/``).
        image: A busybox-compatible image (``sh``, ``echo``, ``sleep``, ``trap``).
        missing_image: A reference that cannot be pulled.
        wait: Lets ``seconds`` of the runtime's time pass (see the module doc).
        timeout: Most seconds any single wait may take.
        poll_interval: Seconds between two polls of a state.
        stop_timeout: The grace period passed to ``stop_container``.
        checks: Names of the checks to run (default: all of :data:`CHECKS`).
        sandbox_template: Fields (cgroup parent, runtime handler, DNS...) every
            sandbox config starts from; the kit sets metadata, labels, log directory.
        run_id: Distinguishes this run's objects (default: random).
        same_image_refs: Two or more references (tags, in one repository or
            several) the runtime can pull that name one image, for the
            ``image_tags`` check, which removes that image at its end; none:
            the check is skipped.
        user_images: Images the runtime can pull, by reference, each with the
            ``User`` its config names (``"1002"``, ``"1003:1004"``,
            ``"www-data"``), for the ``image_user`` check, which removes them at
            its end; none: the check is skipped.
        network_template: Fields of the sandboxes of checks that need a pod
            network of their own, reachable from this host (``port_mappings``:
            the CNI network must publish host ports, e.g. with the ``portmap``
            plugin); None: such checks start from ``sandbox_template`` with the
            host's network off, and are skipped when it asks for the host's.

    Raises:
        ValueError: an unknown check name, or a single ``same_image_refs``.
        ConfigurationError: the runtime declares a capability it lacks the
            methods of.
    """
    if isinstance(same_image_refs, str) or len(same_image_refs) == 1:
        raise ValueError("same_image_refs: give two or more references of one image")
    names = list(CHECKS) if checks is None else list(checks)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(f"checks: unknown check(s) {unknown}; known: {', '.join(CHECKS)}")
    root = Path(log_root)
    rid = run_id or uuid.uuid4().hex[:8]
    offered = runtime_capabilities(runtime)
    results = []
    # Without an image service there is nothing to pull: images are present.
    pulled = "images" not in offered
    for name in names:
        missing = sorted(REQUIRES[name] - offered)
        if missing:
            results.append(CheckResult(name, "skipped", f"not offered: {', '.join(missing)}"))
            continue
        ctx = _Ctx(
            # Only the capabilities the runtime offers are used (REQUIRES).
            runtime=cast(Runtime, runtime),
            check=name,
            image=image,
            missing_image=missing_image,
            log_root=root,
            wait=wait or _default_wait(runtime),
            timeout=timeout,
            poll_interval=poll_interval,
            stop_timeout=stop_timeout,
            run_id=rid,
            template=sandbox_template,
            same_image_refs=tuple(same_image_refs),
            user_images=dict(user_images or {}),
            network_template=network_template,
        )
        try:
            if name not in _NEEDS_NO_IMAGE and not pulled:
                ctx.at(f"setup: pull_image({image!r})")
                await cast(ImageService, runtime).pull_image(ImageSpec(image))
                pulled = True
            await CHECKS[name](ctx)
        except _CheckFailed as exc:
            results.append(CheckResult(name, "failed", f"{ctx.step}: {exc}"))
        except _Skip as exc:
            results.append(CheckResult(name, "skipped", str(exc)))
        except UnimplementedError as exc:
            if name in _OPTIONAL:
                results.append(CheckResult(name, "skipped", f"{ctx.step}: not offered: {exc}"))
            else:
                results.append(
                    CheckResult(name, "failed", f"{ctx.step}: unexpected UnimplementedError: {exc}")
                )
        except Exception as exc:
            results.append(
                CheckResult(name, "failed", f"{ctx.step}: unexpected {type(exc).__name__}: {exc}")
            )
        else:
            results.append(CheckResult(name, "passed"))
            if name == "images":
                pulled = True
        finally:
            await ctx.cleanup()
    return ConformanceReport(tuple(results))


async def check_runtime(
    runtime: RuntimeCore,
    *,
    log_root: str | os.PathLike[str],
    image: str = "busybox",
    wait: Wait | None = None,
    **options: Any,
) -> ConformanceReport:
    """Run the conformance kit and raise if any check failed.

    Takes the same arguments as :func:`run_conformance`.

    Returns:
        The report, when every check passed or was skipped.

    Raises:
        ConformanceFailure: (an AssertionError) at least one check failed; its
            message lists every check with what failed.
    """
    report = await run_conformance(runtime, log_root=log_root, image=image, wait=wait, **options)
    report.raise_for_failures()
    return report


def conformance_test(
    factory: Callable[[], RuntimeCore | Awaitable[RuntimeCore]],
    **options: Any,
) -> Callable[..., Coroutine[Any, Any, None]]:
    """Build a pytest test that runs each check as its own parametrised case.

    ``test_mine = conformance_test(MyRuntime, image="busybox:1.36")`` in a test
    module gives ``test_mine[version_and_status]``, ``test_mine[exec]``... A
    skipped check is reported with ``pytest.skip``. The runtime is built afresh for
    each case; if it has an ``aclose()`` or ``close()`` method, that is awaited (or
    called) afterwards. ``options`` go to :func:`run_conformance`.
    """
    import pytest

    @pytest.mark.parametrize("check", list(CHECKS))
    async def test(check: str, tmp_path: Path) -> None:
        _pytest_outcome(await _run_one(factory, check, tmp_path, options), check)

    return test


async def _run_one(
    factory: Callable[[], RuntimeCore | Awaitable[RuntimeCore]],
    check: str,
    log_root: str | os.PathLike[str],
    options: Mapping[str, Any],
) -> ConformanceReport:
    """Run the check ``check`` on a runtime built afresh by ``factory``, closed after."""
    built = factory()
    runtime = await built if inspect.isawaitable(built) else built
    try:
        return await run_conformance(runtime, log_root=log_root, checks=[check], **options)
    finally:
        await _close(runtime)


def _pytest_outcome(report: ConformanceReport, check: str) -> None:
    """Give one check's result as a pytest outcome: a skip (``pytest.skip`` with
    its reason), a failure (:class:`ConformanceFailure`), or nothing for a pass."""
    import pytest

    result = report.result(check)
    if result.status == "skipped":
        pytest.skip(result.message)
    report.raise_for_failures()


async def _close(runtime: object) -> None:
    for name in ("aclose", "close"):
        method = getattr(runtime, name, None)
        if callable(method):
            outcome = method()
            if inspect.isawaitable(outcome):
                await outcome
            return
