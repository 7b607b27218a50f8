"""``kubelet-kit exec``: run a command in a pod's container through a node API.

::

    kubelet-kit exec --server https://node:10250 --token-file admin.token \\
        --certificate-authority ca.crt default/web -c main -- ls /
    echo hi | kubelet-kit exec -i --server ... default/web -- cat

It talks to a kubelet's node API directly (the real kubelet's or kubelet-kit's),
over WebSocket (``v5``/``v4.channel.k8s.io``). The exit status is the command's.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``exec`` subcommand to an ``argparse`` subparsers object."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "exec",
        help="run a command in a container through a node API",
        description="Run a command in a pod's container through a kubelet's node API "
        "(/exec over WebSocket) and exit with its exit code.",
    )
    parser.add_argument(
        "pod", metavar="NAMESPACE/POD", help="the pod (namespace default when only a name is given)"
    )
    parser.add_argument("command", nargs="+", metavar="COMMAND", help="the command (after --)")
    parser.add_argument("-c", "--container", help="the container (default: the pod's only one)")
    parser.add_argument("-i", "--stdin", action="store_true", help="pass standard input")
    parser.add_argument(
        "--server", required=True, metavar="URL", help="the node API, e.g. https://127.0.0.1:10250"
    )
    parser.add_argument("--token", help="a bearer token")
    parser.add_argument("--token-file", metavar="FILE", help="a file holding a bearer token")
    parser.add_argument("--client-certificate", metavar="FILE", help="client certificate")
    parser.add_argument("--client-key", metavar="FILE", help="its key")
    parser.add_argument(
        "--certificate-authority", metavar="FILE", help="CA of the node's serving certificate"
    )
    parser.add_argument(
        "--insecure-skip-tls-verify",
        action="store_true",
        help="do not verify the node's certificate",
    )
    parser.set_defaults(func=_exec)
    return parser


def _ssl(args: argparse.Namespace) -> ssl.SSLContext | bool | None:
    if not args.server.startswith("https://"):
        return None
    if args.insecure_skip_tls_verify:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx = ssl.create_default_context(cafile=args.certificate_authority)
    if args.client_certificate:
        ctx.load_cert_chain(args.client_certificate, args.client_key)
    return ctx


async def _run(args: argparse.Namespace) -> int:
    import aiohttp

    from kubelet_kit.streams.client import StreamError, exec_command, node_exec_url

    namespace, _, pod = args.pod.rpartition("/")
    namespace = namespace or "default"
    headers = {}
    token = args.token
    if args.token_file:
        with open(args.token_file, encoding="utf-8") as f:
            token = f.read().strip()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    container = args.container
    async with aiohttp.ClientSession() as http:
        if container is None:
            container = await _only_container(http, args, namespace, pod, headers)
            if container is None:
                return 2
        url = node_exec_url(args.server, namespace, pod, container, args.command, stdin=args.stdin)
        data = await asyncio.to_thread(sys.stdin.buffer.read) if args.stdin else None
        try:
            out = await exec_command(http, url, input=data, headers=headers, ssl=_ssl(args))
        except StreamError as exc:
            print(f"kubelet-kit exec: {exc}", file=sys.stderr)
            return 1
    sys.stdout.buffer.write(out.stdout)
    sys.stdout.buffer.flush()
    sys.stderr.buffer.write(out.stderr)
    sys.stderr.buffer.flush()
    return out.exit_code


async def _only_container(
    http: Any, args: argparse.Namespace, namespace: str, pod: str, headers: dict[str, str]
) -> str | None:
    """The pod's one container, from the node's ``/pods`` (asked when -c is not given)."""
    async with http.get(args.server.rstrip("/") + "/pods", headers=headers, ssl=_ssl(args)) as resp:
        if resp.status != 200:
            print(f"kubelet-kit exec: {args.server}/pods: {resp.status}", file=sys.stderr)
            return None
        listing = await resp.json()
    for item in listing.get("items") or ():
        md = item.get("metadata") or {}
        if md.get("namespace") == namespace and md.get("name") == pod:
            names = [c.get("name") for c in (item.get("spec") or {}).get("containers") or ()]
            if len(names) == 1:
                return str(names[0])
            print(
                f"kubelet-kit exec: pod {namespace}/{pod} has containers {names}: give -c",
                file=sys.stderr,
            )
            return None
    print(f"kubelet-kit exec: no pod {namespace}/{pod} on {args.server}", file=sys.stderr)
    return None


def _exec(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except (OSError, ssl.SSLError) as exc:
        print(f"kubelet-kit exec: {args.server}: {exc}", file=sys.stderr)
        return 1
