"""The conformance checks of security contexts, namespaces and sysctls.

Every check looks from inside a container, with busybox commands exec'd into it
(``cat /proc/self/status``, ``touch``, ``id -G``, ``hostname``, ``readlink``):

* ``readonly_rootfs``: writing to ``/`` fails, writing to a writable mount works.
* ``privileged``: a privileged container's effective capabilities are its whole
  bounding set (CAP_SYS_ADMIN among them), and it sees a device of the node's
  that the kit sees too.
* ``default_capabilities``: a container without a security context runs with the
  runtime's default set: CAP_CHOWN in, CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_SYS_MODULE
  out, and nothing effective outside its bounding set.
* ``capabilities``: ``capabilities_add``/``capabilities_drop`` change that set
  (names as the kubelet gives them, without ``CAP_``: containerd ignores
  ``CAP_NET_ADMIN``); ``ALL`` adds or drops every capability before single
  names are added or dropped.
* ``no_new_privs``: ``NoNewPrivs`` is 1 with the flag, 0 without.
* ``supplemental_groups``: ``id -G`` holds the groups asked for.
* ``pod_namespaces`` and ``host_namespaces``: a sandbox not sharing the node's
  network, PID and IPC namespaces gives its containers namespaces other than
  the kit's own (``/proc/self/ns/*``) and its hostname; sharing them gives the
  kit's namespaces and the node's hostname. A runtime that cannot isolate a
  namespace says so in the sandbox's status (``namespace_options``); the check
  is then skipped with that reason. Where the sandbox template asks for the
  host's network (a node without a pod network), the network namespace is
  left out.
* ``sysctls``: namespaced sysctls of the sandbox are what ``/proc/sys`` shows
  (``net.*`` ones only where the template allows a pod network).
* ``seccomp``: ``RuntimeDefault`` puts the container under a filter
  (``Seccomp: 2``), ``Unconfined`` under none (``Seccomp: 0``).
* ``apparmor``: ``Unconfined`` leaves the process unconfined, ``RuntimeDefault``
  confines it; skipped on a node without AppArmor.

A runtime that cannot honour a field raises UnimplementedError naming it, and
the check is skipped with that reason; one that ignores the field fails.
The namespace checks compare with the kit's own namespaces, so the kit must run
on the node (as it must to read container logs under ``log_root``).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Sequence

import attrs

from kubelet_kit.container.capabilities import capability_names
from kubelet_kit.container.interfaces import (
    ContainerState,
    LinuxContainerSecurityContext,
    Mount,
    NamespaceOptions,
    PodSandboxConfig,
    SecurityProfile,
    SecurityProfileType,
)
from kubelet_kit.testing._conformance_context import _Ctx, _Skip, _wait_state

#: Devices of a node, one of which a privileged container must see when the kit does.
HOST_DEVICES = ("/dev/kmsg", "/dev/mem", "/dev/loop-control")

#: The sysctls the ``sysctls`` check sets: namespaced ones, off their usual values.
SYSCTLS = {"kernel.shm_rmid_forced": "1", "net.ipv4.ip_unprivileged_port_start": "1000"}

#: The groups the ``supplemental_groups`` check asks for.
SUPPLEMENTAL_GROUPS = (2345, 3456)


def caps_of(mask: str) -> frozenset[str]:
    """The capability names of a hexadecimal mask of ``/proc/<pid>/status``."""
    return capability_names(int(mask, 16))


def status_fields(text: str) -> dict[str, str]:
    """``/proc/<pid>/status`` as a mapping of its fields."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields


async def _exec(ctx: _Ctx, cid: str, cmd: Sequence[str]) -> tuple[int, str]:
    ctx.at(f"exec_sync({list(cmd)})")
    result, _ = await ctx.run_while_waiting(
        "exec_sync", ctx.runtime.exec_sync(cid, list(cmd), ctx.timeout), ctx.timeout
    )
    return result.exit_code, result.stdout.decode(errors="replace")


async def _read(ctx: _Ctx, cid: str, path: str) -> str:
    code, out = await _exec(ctx, cid, ["cat", path])
    ctx.expect(code == 0, f"`cat {path}` exited {code}")
    return out


async def _status(ctx: _Ctx, cid: str) -> dict[str, str]:
    return status_fields(await _read(ctx, cid, "/proc/self/status"))


async def _start(
    ctx: _Ctx,
    sid: str,
    sandbox: PodSandboxConfig,
    name: str,
    sc: LinuxContainerSecurityContext | None,
    *,
    what: str,
    mounts: tuple[Mount, ...] = (),
) -> str:
    """Create and start a sleeping container with ``sc``; a runtime declining it
    (UnimplementedError naming the field ``what``) skips the check."""
    config = attrs.evolve(
        ctx.container_config(sandbox, name, "sleep 3600"), security_context=sc, mounts=mounts
    )
    with ctx.declined_is_skip(what):
        ctx.at(f"create_container({name}: {what})")
        cid = await ctx.runtime.create_container(sid, config, sandbox)
        ctx.at(f"start_container({name})")
        await ctx.runtime.start_container(cid)
    await _wait_state(ctx, cid, ContainerState.RUNNING)
    return cid


async def _run_sandbox(ctx: _Ctx, config: PodSandboxConfig, what: str) -> str:
    with ctx.declined_is_skip(what):
        ctx.at(f"run_pod_sandbox({what})")
        sid = await ctx.runtime.run_pod_sandbox(config)
    ctx.sandboxes.append(sid)
    return sid


def _caps(ctx: _Ctx, fields: dict[str, str], key: str) -> frozenset[str]:
    ctx.expect(key in fields, f"/proc/self/status has no {key} line")
    return caps_of(fields[key])


# ------------------------------------------------------------------- file system


async def _check_readonly_rootfs(ctx: _Ctx) -> None:
    writable = ctx.log_root / f"kk-writable-{ctx.run_id}"
    writable.mkdir(parents=True, exist_ok=True)
    writable.chmod(0o777)
    sid, sandbox = await ctx.run_sandbox()
    cid = await _start(
        ctx,
        sid,
        sandbox,
        "readonly",
        LinuxContainerSecurityContext(readonly_rootfs=True),
        what="readonly_rootfs",
        # Mounted at its own host path: a runtime whose containers see the host's
        # tree (host processes) then makes no mount point outside the kit's directory.
        mounts=(Mount(str(writable), str(writable)),),
    )
    probe = f"/kk-conformance-{ctx.run_id}"
    code, _ = await _exec(ctx, cid, ["touch", probe])
    ctx.expect(code != 0, f"`touch {probe}` on a read-only root file system succeeded")
    code, _ = await _exec(ctx, cid, ["touch", f"{writable}/probe"])
    ctx.expect_eq(f"exit code of `touch {writable}/probe` (a writable mount)", code, 0)
    ctx.expect((writable / "probe").exists(), "the file touched in the writable mount")


# ------------------------------------------------------------------ capabilities


async def _check_privileged(ctx: _Ctx) -> None:
    config = attrs.evolve(ctx.sandbox_config(), privileged=True)
    sid = await _run_sandbox(ctx, config, "privileged sandbox")
    cid = await _start(
        ctx,
        sid,
        config,
        "privileged",
        LinuxContainerSecurityContext(privileged=True),
        what="privileged",
    )
    fields = await _status(ctx, cid)
    eff, bnd = _caps(ctx, fields, "CapEff"), _caps(ctx, fields, "CapBnd")
    ctx.expect_eq("CapEff of a privileged container (its whole CapBnd)", sorted(eff), sorted(bnd))
    ctx.expect("SYS_ADMIN" in eff, f"a privileged container lacks CAP_SYS_ADMIN: {sorted(eff)}")
    seen = [d for d in HOST_DEVICES if os.path.exists(d)]
    if seen:
        code, _ = await _exec(ctx, cid, ["test", "-e", seen[0]])
        ctx.expect_eq(f"exit code of `test -e {seen[0]}` (a device of the node's)", code, 0)


async def _check_default_capabilities(ctx: _Ctx) -> None:
    sid, sandbox = await ctx.run_sandbox()
    cid = await _start(ctx, sid, sandbox, "default", None, what="no security context")
    fields = await _status(ctx, cid)
    eff, bnd = _caps(ctx, fields, "CapEff"), _caps(ctx, fields, "CapBnd")
    ctx.expect("CHOWN" in eff, f"CAP_CHOWN is not in the default set {sorted(eff)}")
    extra = sorted(eff & {"SYS_ADMIN", "NET_ADMIN", "SYS_MODULE"})
    ctx.expect(not extra, f"an unprivileged container has {extra} by default")
    ctx.expect(eff <= bnd, f"effective capabilities {sorted(eff - bnd)} outside CapBnd")


async def _check_capabilities(ctx: _Ctx) -> None:
    sid, sandbox = await ctx.run_sandbox()
    changed = await _start(
        ctx,
        sid,
        sandbox,
        "changed",
        LinuxContainerSecurityContext(
            capabilities_add=("SYS_ADMIN", "NET_ADMIN"), capabilities_drop=("CHOWN",)
        ),
        what="capabilities",
    )
    eff = _caps(ctx, await _status(ctx, changed), "CapEff")
    for cap in ("SYS_ADMIN", "NET_ADMIN"):
        ctx.expect(cap in eff, f"CAP_{cap} was added but CapEff is {sorted(eff)}")
    ctx.expect("CHOWN" not in eff, f"CAP_CHOWN was dropped but CapEff is {sorted(eff)}")
    only = await _start(
        ctx,
        sid,
        sandbox,
        "only",
        LinuxContainerSecurityContext(
            capabilities_add=("NET_BIND_SERVICE",), capabilities_drop=("ALL",)
        ),
        what="capabilities",
    )
    eff = _caps(ctx, await _status(ctx, only), "CapEff")
    ctx.expect_eq(
        "CapEff after dropping ALL and adding NET_BIND_SERVICE", sorted(eff), ["NET_BIND_SERVICE"]
    )
    every = await _start(
        ctx,
        sid,
        sandbox,
        "every",
        LinuxContainerSecurityContext(capabilities_add=("ALL",), capabilities_drop=("KILL",)),
        what="capabilities",
    )
    fields = await _status(ctx, every)
    eff, bnd = _caps(ctx, fields, "CapEff"), _caps(ctx, fields, "CapBnd")
    ctx.expect("SYS_ADMIN" in eff, f"CAP_SYS_ADMIN missing after adding ALL: {sorted(eff)}")
    ctx.expect("KILL" not in eff, "CAP_KILL still there after adding ALL, dropping KILL")
    ctx.expect_eq("CapEff after adding ALL and dropping KILL", sorted(eff), sorted(bnd - {"KILL"}))


async def _check_no_new_privs(ctx: _Ctx) -> None:
    sid, sandbox = await ctx.run_sandbox()
    flagged = await _start(
        ctx,
        sid,
        sandbox,
        "flagged",
        LinuxContainerSecurityContext(no_new_privs=True),
        what="no_new_privs",
    )
    plain = await _start(ctx, sid, sandbox, "plain", None, what="no security context")
    for cid, want in ((flagged, "1"), (plain, "0")):
        fields = await _status(ctx, cid)
        ctx.expect("NoNewPrivs" in fields, "/proc/self/status has no NoNewPrivs line")
        ctx.expect_eq(f"NoNewPrivs with no_new_privs={want == '1'}", fields["NoNewPrivs"], want)


async def _check_supplemental_groups(ctx: _Ctx) -> None:
    sid, sandbox = await ctx.run_sandbox()
    cid = await _start(
        ctx,
        sid,
        sandbox,
        "groups",
        LinuxContainerSecurityContext(supplemental_groups=SUPPLEMENTAL_GROUPS),
        what="supplemental_groups",
    )
    code, out = await _exec(ctx, cid, ["id", "-G"])
    ctx.expect_eq("exit code of `id -G`", code, 0)
    groups = set(out.split())
    missing = sorted(str(g) for g in SUPPLEMENTAL_GROUPS if str(g) not in groups)
    ctx.expect(not missing, f"`id -G` printed {out.strip()!r}, without {missing}")


# -------------------------------------------------------------------- namespaces


def _own_namespaces() -> dict[str, str]:
    found = {}
    for kind in ("net", "pid", "ipc"):
        with contextlib.suppress(OSError):
            found[kind] = os.readlink(f"/proc/self/ns/{kind}")
    return found


def _host_network_forced(ctx: _Ctx) -> bool:
    """Whether the sandbox template asks for the host's network (no pod network)."""
    return ctx.template is not None and ctx.template.namespace_options.host_network


async def _namespaces(ctx: _Ctx, host: bool) -> None:
    forced = _host_network_forced(ctx)
    asked = NamespaceOptions(host_network=host or forced, host_pid=host, host_ipc=host)
    # A sandbox on the host's network may not name a hostname (runc refuses it).
    hostname = "" if asked.host_network else f"kk-pod-{ctx.run_id}"
    config = attrs.evolve(ctx.sandbox_config(), namespace_options=asked, hostname=hostname)
    sid = await _run_sandbox(ctx, config, f"namespace_options {asked}")
    ctx.at("pod_sandbox_status")
    got = (await ctx.runtime.pod_sandbox_status(sid)).namespace_options
    declined = [
        field
        for field in ("host_network", "host_pid", "host_ipc")
        if getattr(got, field) != getattr(asked, field)
    ]
    cid = await _start(ctx, sid, config, "ns", None, what="no security context")
    ours = _own_namespaces()
    kinds = {"net": "host_network", "pid": "host_pid", "ipc": "host_ipc"}
    for kind, field in kinds.items():
        if field in declined or kind not in ours or (kind == "net" and forced and not host):
            continue
        # Through sh: busybox's shell runs its own applets, whatever the image links.
        code, out = await _exec(ctx, cid, ["sh", "-c", f"readlink /proc/self/ns/{kind}"])
        ctx.expect_eq(f"exit code of `readlink /proc/self/ns/{kind}`", code, 0)
        same = out.strip() == ours[kind]
        ctx.expect(
            same == host,
            f"{field}={host}: the container's {kind} namespace {out.strip()!r} is "
            f"{'not ' if host else ''}the node's ({ours[kind]!r})",
        )
    if "host_network" not in declined and (host or not forced):
        code, out = await _exec(ctx, cid, ["sh", "-c", "hostname"])
        ctx.expect_eq("exit code of `hostname`", code, 0)
        want = socket.gethostname() if host else hostname
        ctx.expect_eq(f"hostname with host_network={host}", out.strip(), want)
    if declined:
        raise _Skip(
            f"namespace_options: not honoured: the sandbox's status says "
            f"{', '.join(f'{f}={getattr(got, f)}' for f in declined)} though asked otherwise"
        )


async def _check_pod_namespaces(ctx: _Ctx) -> None:
    await _namespaces(ctx, host=False)


async def _check_host_namespaces(ctx: _Ctx) -> None:
    await _namespaces(ctx, host=True)


async def _check_sysctls(ctx: _Ctx) -> None:
    # Namespaced sysctls need the pod's own network and IPC namespaces; without a
    # pod network (the template asks for the host's) only the IPC ones are set.
    forced = _host_network_forced(ctx)
    sysctls = {k: v for k, v in SYSCTLS.items() if not (forced and k.startswith("net."))}
    config = attrs.evolve(
        ctx.sandbox_config(),
        namespace_options=NamespaceOptions(host_network=forced),
        hostname="" if forced else f"kk-sysctl-{ctx.run_id}",
        sysctls=sysctls,
    )
    sid = await _run_sandbox(ctx, config, "sysctls")
    cid = await _start(ctx, sid, config, "sysctl", None, what="no security context")
    for key, want in sysctls.items():
        path = "/proc/sys/" + key.replace(".", "/")
        ctx.expect_eq(f"{path} in the container", (await _read(ctx, cid, path)).strip(), want)


# ---------------------------------------------------------------------- profiles


async def _check_seccomp(ctx: _Ctx) -> None:
    sid, sandbox = await ctx.run_sandbox()
    wants = (
        (SecurityProfileType.UNCONFINED, "0"),
        (SecurityProfileType.RUNTIME_DEFAULT, "2"),
    )
    for kind, want in wants:
        name = kind.value.lower()
        cid = await _start(
            ctx,
            sid,
            sandbox,
            name,
            LinuxContainerSecurityContext(seccomp=SecurityProfile(kind)),
            what=f"seccomp {kind.value}",
        )
        fields = await _status(ctx, cid)
        if "Seccomp" not in fields:
            raise _Skip("seccomp: the node's kernel has no seccomp (no Seccomp line)")
        ctx.expect_eq(f"Seccomp mode with profile {kind.value}", fields["Seccomp"], want)


async def _check_apparmor(ctx: _Ctx) -> None:
    sid, sandbox = await ctx.run_sandbox()
    probe = await _start(ctx, sid, sandbox, "probe", None, what="no security context")
    code, out = await _exec(ctx, probe, ["cat", "/sys/module/apparmor/parameters/enabled"])
    if code != 0 or out.strip() != "Y":
        raise _Skip("apparmor: the node has no AppArmor")
    for kind in (SecurityProfileType.UNCONFINED, SecurityProfileType.RUNTIME_DEFAULT):
        cid = await _start(
            ctx,
            sid,
            sandbox,
            kind.value.lower(),
            LinuxContainerSecurityContext(apparmor=SecurityProfile(kind)),
            what=f"apparmor {kind.value}",
        )
        label = (await _read(ctx, cid, "/proc/self/attr/current")).strip()
        confined = label != "unconfined"
        ctx.expect(
            confined == (kind is SecurityProfileType.RUNTIME_DEFAULT),
            f"AppArmor label with profile {kind.value}: {label!r}",
        )
