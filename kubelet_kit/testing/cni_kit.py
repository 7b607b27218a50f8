"""The conformance kit of a CNI plugin, run the way a container runtime runs it.

Every check goes through the project's CNI caller
(:class:`~kubelet_kit.network.CNIInvoker`: the configuration list, ``CNI_*``
variables, the cached result passed to DEL and CHECK), so the plugin is seen as
a runtime sees it. The subject is either

* a :class:`kubelet_kit.cni.Plugin` object, run in-process through
  :func:`~kubelet_kit.cni.run_plugin` (what its executable's ``plugin_main``
  would do), each run in a thread of its own as separate processes would run;
* or the path of a plugin executable, run by :class:`~kubelet_kit.network.CNIExec`.

What a runtime (and so the agent's pod network) relies on, as the CNI spec says:
ADD gives the container an address on ``CNI_IFNAME`` inside its namespace, in
the configuration's version, and extends a chained ``prevResult``; two
attachments, even added at once, never share an address; a repeated ADD of one
attachment never takes a second address; DEL releases what ADD took and
succeeds when there is nothing to release (never added, already deleted, or
without a namespace); CHECK passes for what ADD made and fails for an address
not the attachment's; STATUS (1.1) says when ADD cannot be served; failures are
:class:`~kubelet_kit.cni.CNIError` with the spec's code and a message.

Options (``check_cni_plugin(factory, **options)`` or ``kit_options``):

* ``config``: the plugin's entry of the configuration list (its ``type`` is
  filled in: the executable's name, or ``kit-plugin``);
* ``cni_version``: the list's version (default ``1.1.0``; CHECK needs 0.4.0,
  STATUS 1.1.0, or their checks are skipped);
* ``pool_size``: how many attachments the configured range holds; the checks
  that use it up are skipped without it;
* ``netns``: ``netns(ctx, name)`` returning (or awaiting) a namespace path for
  attachment ``name`` (it may ``ctx.defer`` removing it); by default a path that
  does not exist, enough for a plugin that makes no interface;
* ``timeout``: seconds one plugin run may take (default 30).

For example::

    from kubelet_kit.testing.cni_kit import CNIPluginConformance

    class TestMyPlugin(CNIPluginConformance):
        def make(self):
            return MyPlugin()

        def kit_options(self):
            return {"config": {"subnet": "10.9.0.0/29"}, "pool_size": 5}
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kubelet_kit.cni.plugin import Plugin, run_plugin
from kubelet_kit.cni.types import (
    ERR_PLUGIN_NOT_AVAILABLE,
    CNIError,
    Interface,
    IPConfig,
    Result,
    version_tuple,
)
from kubelet_kit.network.cni import CNIExec, CNIInvoker, NetworkConfigList, RuntimeConf
from kubelet_kit.testing.conformance import ConformanceReport
from kubelet_kit.testing.kit import KitCheck, KitContext, kit_test_class, run_kit

__all__ = ["CHECKS", "CNIPluginConformance", "InProcessExec", "check_cni_plugin"]

NETWORK = "kit-net"
IFNAME = "eth0"


class InProcessExec(CNIExec):
    """A :class:`~kubelet_kit.network.CNIExec` running a Plugin object in-process.

    Each run goes through :func:`~kubelet_kit.cni.run_plugin` in a thread, and
    its output is read as :meth:`CNIExec.run` reads a process's: the result's
    bytes, or the printed error object raised as a CNIError naming the plugin.

    Args:
        plugin: The plugin every ``type`` runs.
        bin_dirs: What ``CNI_PATH`` tells the plugin (where it would find
            plugins it delegates to).
    """

    def __init__(self, plugin: Plugin, bin_dirs: Sequence[str] = ("/opt/cni/bin",)) -> None:
        super().__init__(bin_dirs)
        self.plugin = plugin

    def find(self, plugin_type: str) -> str:
        """Every type is the one plugin."""
        return f"<in-process {plugin_type}>"

    async def run(self, plugin_type: str, stdin: bytes, env: Mapping[str, str]) -> bytes:
        """Run the plugin once (see :meth:`CNIExec.run`)."""
        code, out, _ = await asyncio.to_thread(
            run_plugin, self.plugin, environ=dict(env), stdin=stdin
        )
        if code != 0:
            raise CNIError.from_json(json.loads(out), plugin=plugin_type)
        return out.encode()


class _Driver:
    """The kit's runtime: a one-plugin configuration list and its invoker."""

    def __init__(self, ctx: KitContext[Any]) -> None:
        self.ctx = ctx
        options = ctx.options
        timeout = float(options.get("timeout", 30.0))
        subject = ctx.subject
        exec_: CNIExec
        if isinstance(subject, (str, os.PathLike)):
            path = Path(subject)
            exec_ = CNIExec([path.parent], timeout=timeout)
            self.type = path.name
        else:
            exec_ = InProcessExec(subject)
            self.type = "kit-plugin"
        self.version = str(options.get("cni_version", "1.1.0"))
        self.plugin = {**dict(options.get("config") or {}), "type": self.type}
        self.net = NetworkConfigList.from_json(
            {"cniVersion": self.version, "name": NETWORK, "plugins": [self.plugin]}
        )
        cache = tempfile.mkdtemp(prefix="kit-cni-")
        ctx.defer(lambda: shutil.rmtree(cache, ignore_errors=True))
        self.invoker = CNIInvoker(exec_, cache)
        self.exec = exec_
        self._rts: dict[str, RuntimeConf] = {}
        # Attachments to DEL after the check, whatever happens in it.
        self._added: set[str] = set()

    async def _delete_if_added(self, name: str) -> None:
        if name in self._added:
            with contextlib.suppress(Exception):
                await self.delete(name)

    async def rt(self, name: str) -> RuntimeConf:
        """The attachment ``name`` (its container id), with a namespace."""
        if name not in self._rts:
            make = self.ctx.options.get("netns")
            path: Any = f"/var/run/netns/kit-none-{name}"
            if make is not None:
                path = make(self.ctx, name)
                if inspect.isawaitable(path):
                    path = await path
            self._rts[name] = RuntimeConf(f"kit-{name}", str(path), IFNAME)
            # Deferred after the namespace was made, so DEL runs before it goes.
            self.ctx.defer(lambda: self._delete_if_added(name))
        return self._rts[name]

    async def add(self, name: str) -> Result:
        rt = await self.rt(name)
        self._added.add(name)
        return await self.invoker.add(self.net, rt)

    async def delete(self, name: str) -> None:
        await self.invoker.delete(self.net, await self.rt(name))
        self._added.discard(name)

    async def raw(self, command: str, name: str, prev: Result | None) -> bytes:
        """Run the plugin once with ``prev`` as ``prevResult``, no cache involved."""
        rt = await self.rt(name)
        if command == "ADD":
            self._added.add(name)
        conf = CNIInvoker.plugin_config(self.net, self.plugin, rt, prev)
        env = {
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": rt.container_id,
            "CNI_NETNS": rt.netns,
            "CNI_IFNAME": rt.ifname,
            "CNI_ARGS": "",
            "CNI_PATH": os.pathsep.join(self.exec.bin_dirs),
        }
        return await self.exec.run(self.type, json.dumps(conf).encode(), env)

    def needs(self, version: str, what: str) -> None:
        if version_tuple(self.version) < version_tuple(version):
            self.ctx.skip(f"{what} needs a configuration of {version} or later")

    def pool_size(self) -> int:
        size = self.ctx.options.get("pool_size")
        if not size:
            self.ctx.skip("needs the pool_size option (how many addresses the range holds)")
        return int(size)


def _ips(result: Result) -> list[str]:
    return [ip.address for ip in result.sandbox_ips(IFNAME)]


async def _add_expecting_an_address(ctx: KitContext[Any], d: _Driver, name: str) -> Result:
    try:
        result = await d.add(name)
    except CNIError as exc:
        ctx.fail(f"ADD of {name} failed: {exc}")
    ctx.expect(bool(_ips(result)), f"ADD of {name} gave no address on {IFNAME}: {result}")
    return result


async def _check_add_gives_an_address(ctx: KitContext[Any]) -> None:
    d = _Driver(ctx)
    ctx.at("ADD one attachment")
    result = await _add_expecting_an_address(ctx, d, "a")
    rt = await d.rt("a")
    ctx.expect_eq("the result's cniVersion", result.cni_version, d.version)
    ifaces = [i for i in result.interfaces if i.name == IFNAME]
    ctx.expect(bool(ifaces), f"no interface {IFNAME} in {result.interfaces}")
    ctx.expect_eq(f"{IFNAME}'s sandbox", ifaces[0].sandbox, rt.netns)
    ctx.expect_eq("the cached result", d.invoker.cached_result(d.net, rt), result)


async def _check_adds_give_distinct_addresses(ctx: KitContext[Any]) -> None:
    d = _Driver(ctx)
    ctx.at("ADD two attachments")
    a = await _add_expecting_an_address(ctx, d, "a")
    b = await _add_expecting_an_address(ctx, d, "b")
    ctx.expect(not set(_ips(a)) & set(_ips(b)), f"a and b share an address: {_ips(a)}")


async def _check_concurrent_adds_give_distinct_addresses(ctx: KitContext[Any]) -> None:
    d = _Driver(ctx)
    count = min(4, int(ctx.options.get("pool_size") or 4))
    names = [f"c{i}" for i in range(count)]
    for name in names:
        await d.rt(name)
    ctx.at(f"ADD {count} attachments at once")
    results = await asyncio.gather(*(d.add(n) for n in names), return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    ctx.expect(not errors, f"concurrent ADDs failed: {errors}")
    addresses = [ip for r in results if isinstance(r, Result) for ip in _ips(r)]
    ctx.expect(
        len(addresses) == len(set(addresses)) == count,
        f"concurrent ADDs gave {addresses}: one address per attachment, all distinct",
    )


async def _check_repeated_add_takes_no_second_address(ctx: KitContext[Any]) -> None:
    d = _Driver(ctx)
    ctx.at("ADD an attachment")
    first = await _add_expecting_an_address(ctx, d, "a")
    ctx.at("ADD it again without DEL")
    try:
        again = await d.add("a")
    except CNIError:
        return  # refusing a second ADD is the spec's other allowed answer
    ctx.expect_eq("addresses of the repeated ADD", _ips(again), _ips(first))


async def _check_del_is_idempotent(ctx: KitContext[Any]) -> None:
    d = _Driver(ctx)
    ctx.at("DEL an attachment never added")
    await d.delete("never")
    ctx.at("ADD, then DEL twice")
    await _add_expecting_an_address(ctx, d, "a")
    await d.delete("a")
    await d.delete("a")
    ctx.at("DEL without a namespace (CNI_NETNS empty)")
    rt = await d.rt("b")
    await d.add("b")
    await d.invoker.delete(d.net, RuntimeConf(rt.container_id, "", IFNAME))
    d._added.discard("b")


async def _check_del_releases_the_address(ctx: KitContext[Any]) -> None:
    d = _Driver(ctx)
    size = d.pool_size()
    ctx.at(f"ADD {size} attachments: the range is used up")
    for i in range(size):
        await _add_expecting_an_address(ctx, d, f"c{i}")
    ctx.at("ADD one more")
    try:
        extra = await d.add("extra")
    except CNIError as exc:
        ctx.expect(isinstance(exc.code, int) and exc.code > 0, f"error code {exc.code!r}")
        ctx.expect(bool(exc.msg), "the error has no message")
    else:
        ctx.fail(f"ADD beyond the range of {size} succeeded: {_ips(extra)}")
    ctx.at("DEL one, then ADD again")
    await d.delete("c0")
    await _add_expecting_an_address(ctx, d, "extra")


async def _check_check_passes_after_add(ctx: KitContext[Any]) -> None:
    d = _Driver(ctx)
    d.needs("0.4.0", "CHECK")
    ctx.at("ADD, then CHECK twice")
    await _add_expecting_an_address(ctx, d, "a")
    rt = await d.rt("a")
    for _ in range(2):
        try:
            await d.invoker.check(d.net, rt)
        except CNIError as exc:
            ctx.fail(f"CHECK of what ADD made failed: {exc}")


async def _check_check_fails_for_a_foreign_address(ctx: KitContext[Any]) -> None:
    d = _Driver(ctx)
    d.needs("0.4.0", "CHECK")
    ctx.at("ADD an attachment")
    await _add_expecting_an_address(ctx, d, "a")
    rt = await d.rt("a")
    foreign = Result(
        cni_version=d.version,
        interfaces=(Interface(IFNAME, sandbox=rt.netns),),
        ips=(IPConfig("192.0.2.77/24", "", 0),),
    )
    ctx.at("CHECK it against an address it was never given")
    try:
        await d.raw("CHECK", "a", foreign)
    except CNIError as exc:
        ctx.expect(bool(exc.msg), "the error has no message")
    else:
        ctx.fail("CHECK passed for 192.0.2.77/24, an address the attachment never had")


async def _check_status_says_when_add_cannot_be_served(ctx: KitContext[Any]) -> None:
    d = _Driver(ctx)
    d.needs("1.1.0", "STATUS")
    size = d.pool_size()
    ctx.at("STATUS of a fresh plugin")
    try:
        await d.invoker.status(d.net)
    except CNIError as exc:
        ctx.fail(f"STATUS failed with the whole range free: {exc}")
    ctx.at(f"ADD {size} attachments, then STATUS")
    for i in range(size):
        await _add_expecting_an_address(ctx, d, f"c{i}")
    try:
        await d.invoker.status(d.net)
    except CNIError as exc:
        ctx.expect_eq("STATUS error code", exc.code, ERR_PLUGIN_NOT_AVAILABLE)
    else:
        ctx.fail("STATUS succeeded with the range used up")


async def _check_chained_add_extends_the_previous_result(ctx: KitContext[Any]) -> None:
    d = _Driver(ctx)
    rt = await d.rt("a")
    prev = Result(
        cni_version=d.version,
        interfaces=(Interface("lo", sandbox=rt.netns),),
        ips=(IPConfig("127.0.0.1/8", "", 0),),
    )
    ctx.at("ADD after a plugin that made lo")
    out = await d.raw("ADD", "a", prev)
    result = Result.from_json(json.loads(out))
    ctx.expect_eq("first interface", result.interfaces[:1], prev.interfaces)
    ctx.expect_eq("first address", result.ips[:1], prev.ips)
    ours = [ip for ip in result.ips[1:] if ip.interface is not None]
    ctx.expect(bool(ours), f"no address of the plugin's own after prevResult's: {result.ips}")
    index = ours[0].interface
    ctx.expect(
        index is not None
        and 0 < index < len(result.interfaces)
        and result.interfaces[index].name == IFNAME,
        f"the new address points at interface {index}, not {IFNAME}: {result.interfaces}",
    )


async def _check_version_lists_the_config_version(ctx: KitContext[Any]) -> None:
    d = _Driver(ctx)
    ctx.at("VERSION")
    versions = await d.invoker.version(d.type)
    ctx.expect(d.version in versions, f"{d.version} not in the supported versions {versions}")


#: The kit's checks by name, in the order they run.
CHECKS: dict[str, KitCheck[Any]] = {
    "add_gives_an_address": _check_add_gives_an_address,
    "adds_give_distinct_addresses": _check_adds_give_distinct_addresses,
    "concurrent_adds_give_distinct_addresses": _check_concurrent_adds_give_distinct_addresses,
    "repeated_add_takes_no_second_address": _check_repeated_add_takes_no_second_address,
    "del_is_idempotent": _check_del_is_idempotent,
    "del_releases_the_address": _check_del_releases_the_address,
    "check_passes_after_add": _check_check_passes_after_add,
    "check_fails_for_a_foreign_address": _check_check_fails_for_a_foreign_address,
    "status_says_when_add_cannot_be_served": _check_status_says_when_add_cannot_be_served,
    "chained_add_extends_the_previous_result": _check_chained_add_extends_the_previous_result,
    "version_lists_the_config_version": _check_version_lists_the_config_version,
}


async def check_cni_plugin(
    factory: Callable[..., Any],
    *,
    names: Sequence[str] | None = None,
    **options: Any,
) -> ConformanceReport:
    """Run the CNI plugin kit against plugins made by ``factory``.

    Args:
        factory: Builds a fresh subject per check: a :class:`kubelet_kit.cni.Plugin`
            or the path of a plugin executable (called with the check's
            :class:`~kubelet_kit.testing.kit.KitContext` if it takes an argument;
            may be async).
        names: The checks to run (default: all of :data:`CHECKS`).
        **options: ``config``, ``cni_version``, ``pool_size``, ``netns``,
            ``timeout``; see the module.

    Returns:
        The report of every check.

    Raises:
        ConformanceFailure: A check failed.
    """
    report = await run_kit(CHECKS, factory, names=names, options=options)
    report.raise_for_failures()
    return report


#: The pytest base class: subclass it, define ``make(self[, ctx])`` returning a
#: Plugin or an executable's path, and ``kit_options(self)`` for the options.
CNIPluginConformance = kit_test_class(
    "CNIPluginConformance",
    CHECKS,
    doc="""Conformance of a CNI plugin: one test case per check of
    :mod:`kubelet_kit.testing.cni_kit`. Define ``make(self)`` (or
    ``make(self, ctx)``) returning a fresh :class:`kubelet_kit.cni.Plugin` or a
    plugin executable's path, and ``kit_options(self)`` for its options.""",
)
