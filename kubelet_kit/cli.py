"""The ``kubelet-kit`` command.

``kubelet-kit --version`` prints the version; ``kubelet-kit validate PATH...`` checks
pod manifests (files or directories) and prints one line per problem::

    pods/web.yaml: spec.containers[0].image: Required value
    pods/two.yaml[1]: spec.restartPolicy: Unsupported value: "Sometimes": ...

``[n]`` names the document (0-based) in a file holding several pods. The exit status
is 0 when everything is valid, 1 when a problem was found, 2 for bad usage. The
command never prints a traceback for bad input.

Subcommands are registered in one place, :data:`SUBCOMMANDS`: a subcommand is a
function that adds its parser to the ``add_subparsers()`` object and sets ``func``
(``args -> exit status``) with ``set_defaults``. Only the subcommand named on the
command line is registered (all of them for ``--help`` or an unknown name), so
``kubelet-kit --version`` and ``kubelet-kit validate`` do not import what ``run``
and ``cri`` need (gRPC, the agent).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from kubelet_kit._version import __version__

__all__ = ["SUBCOMMANDS", "Handler", "build_parser", "main"]

#: A subcommand's handler: takes the parsed arguments, returns the exit status.
Handler = Callable[[argparse.Namespace], int]

_Subparsers = Any  # argparse's _SubParsersAction is private; typed loosely on purpose


def _add_validate(subparsers: _Subparsers) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check pod manifests (files or directories)",
        description="Check Kubernetes v1 Pod manifests (YAML or JSON; several documents "
        "or a List per file; directories are read one level deep) and print "
        "one line per problem: <file>[<document>]: <field path>: <message>.",
    )
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="FILE_OR_DIR",
        help="manifest file or directory; - reads standard input",
    )
    parser.add_argument(
        "--strict", action="store_true", help="also report fields that the Pod schema does not know"
    )
    parser.add_argument(
        "--node-name",
        default="",
        help="node name used for generated uids (only shown with --verbose)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print each valid pod with its namespace, uid and QoS class",
    )
    parser.set_defaults(func=_validate)


def _validate(args: argparse.Namespace) -> int:
    # Imported here so that `kubelet-kit --version` stays fast.
    from kubelet_kit.api import qos_class, read_manifest_text, read_manifests

    out: TextIO = sys.stdout
    results = []
    for path in args.paths:
        if path == "-":
            results.extend(
                read_manifest_text(
                    sys.stdin.read(), source="<stdin>", node_name=args.node_name, strict=args.strict
                )
            )
        else:
            results.extend(read_manifests(path, node_name=args.node_name, strict=args.strict))
    problems = 0
    bad_docs = 0
    pods = 0
    files = {r.source for r in results}
    for r in results:
        if r.errors:
            bad_docs += 1
            for e in r.errors:
                problems += 1
                out.write(
                    f"{r.location}: {e.path}: {e.message}\n"
                    if e.path
                    else f"{r.location}: {e.message}\n"
                )
        elif r.pod is not None:
            pods += 1
            if args.verbose:
                p = r.pod
                out.write(
                    f"{r.location}: ok: pod {p.namespace}/{p.name} uid={p.uid} qos={qos_class(p)}\n"
                )
    if problems:
        noun = "problem" if problems == 1 else "problems"
        sys.stderr.write(
            f"{problems} {noun} in {bad_docs} of {bad_docs + pods} "
            f"document(s) ({len(files)} file(s))\n"
        )
        return 1
    out.write(f"OK: {pods} pod(s) valid in {len(files)} file(s)\n")
    return 0


def _add_run(subparsers: _Subparsers) -> None:
    from kubelet_kit.runner import register

    register(subparsers)


def _add_cri(subparsers: _Subparsers) -> None:
    from kubelet_kit.cri.cli import register

    register(subparsers)


def _add_cri_server(subparsers: _Subparsers) -> None:
    from kubelet_kit.cri_server import register

    register(subparsers)


def _add_simulate(subparsers: _Subparsers) -> None:
    from kubelet_kit.simulate.cli import register

    register(subparsers)


def _add_exec(subparsers: _Subparsers) -> None:
    from kubelet_kit.streams.cli import register

    register(subparsers)


#: Every subcommand by name, in the order ``--help`` lists them. To add one,
#: write a ``register(subparsers)`` function like :func:`_add_validate` that adds
#: the parser of that name (its return value is ignored) and add it here.
SUBCOMMANDS: dict[str, Callable[[_Subparsers], object]] = {
    "validate": _add_validate,
    "run": _add_run,
    "cri": _add_cri,
    "cri-server": _add_cri_server,
    "exec": _add_exec,
    "simulate": _add_simulate,
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``kubelet-kit`` argument parser.

    Args:
        argv: The arguments it will parse. Given, only the subcommand they name
            is registered (none for a bare ``--version``; every one for
            ``--help``, no command or an unknown one, so help and the "invalid
            choice" error list them all). None: every subcommand.
    """
    parser = argparse.ArgumentParser(
        prog="kubelet-kit",
        description="The kubelet's subsystems as importable, swappable, testable parts.",
    )
    parser.add_argument("--version", action="version", version=f"kubelet-kit {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in _needed(argv):
        register(subparsers)
    return parser


def _needed(argv: Sequence[str] | None) -> list[Callable[[_Subparsers], object]]:
    if argv is None:
        return list(SUBCOMMANDS.values())
    # The top-level parser has options only (--version, --help), so the first
    # word that is not an option is the subcommand.
    command = next((a for a in argv if not a.startswith("-")), None)
    if command in SUBCOMMANDS:
        return [SUBCOMMANDS[command]]
    if command is None and "--version" in argv and not {"-h", "--help"} & set(argv):
        return []
    return list(SUBCOMMANDS.values())


def main(argv: Sequence[str] | None = None, **parts: Any) -> int:
    """Run the command line.

    A program that ships its own agent binary with one part of its own calls
    ``main(sys.argv[1:], pleg=MyPLEG(...))``: ``run`` then wires that part in place
    of the default (any keyword argument of :class:`kubelet_kit.agent.Kubelet`),
    and every flag keeps working.

    Args:
        argv: Arguments without the program name; ``sys.argv[1:]`` when None.
        parts: Parts for ``run``'s agent.

    Returns:
        The exit status: 0 success, 1 problems found, 2 usage or internal error.
    """
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors exit from argparse
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    args.parts = parts
    func: Handler | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:
        # Bad input is reported by the subcommands themselves; this is a bug. Keep
        # the promise of no traceback unless asked for one.
        if os.environ.get("KUBELET_KIT_DEBUG"):
            raise
        sys.stderr.write(
            f"kubelet-kit: internal error: {type(exc).__name__}: {exc} "
            "(set KUBELET_KIT_DEBUG=1 for a traceback)\n"
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
