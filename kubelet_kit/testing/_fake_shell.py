"""The tiny shell :class:`~kubelet_kit.testing.FakeRuntime`'s containers run.

A container's ``sh -c SCRIPT`` (or any other argv) is parsed into statements of
words, honouring quotes, backslashes, ``$VAR`` and ``&&``/``||``; each statement is
expanded against the container's env and the last status, its redirections taken
out, and run by a generator that yields the clock seconds to sleep and returns the
exit code. The builtins (``echo``, ``sleep``, ``exit``, ``cat``, ``touch``, ``rm``,
``test``/``[``, ``trap``, ``id``, ``hostname``, ``readlink`` of a namespace,
``pwd``) work on the container's file system (:mod:`~kubelet_kit.testing._fake_fs`); the language is
described on :class:`~kubelet_kit.testing.FakeRuntime`.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections.abc import Callable, Generator, Mapping, MutableMapping, Sequence

import attrs


class _ShellSyntaxError(Exception):
    pass


# A word is a sequence of parts: ("lit", text) or ("var", name), expanded at run time
# (so ``$?`` sees the status of the statement before it).
_Part = tuple[str, str]


@attrs.frozen
class _Word:
    parts: tuple[_Part, ...]
    quoted: bool


@attrs.frozen
class _Statement:
    """Words of one simple command; ``cond`` is "and" after ``&&``, "or" after ``||``."""

    words: tuple[_Word, ...]
    cond: str = ""
    # Its expansion, worked out once when no word has a variable in it (the
    # expansion then depends on neither the env nor the last status).
    expanded: _Command | None = attrs.field(default=None, eq=False, repr=False)
    # Whether running it does nothing but sleep until it is killed (``sleep
    # infinity``), known with its expansion: a container whose command starts
    # with it needs no shell stepped for it (see ``_sleeps_forever``).
    sleeps_forever: bool = attrs.field(default=False, eq=False, repr=False)


def _parse_script(script: str) -> list[_Statement]:
    """Split a script into statements of words, honouring quotes and ``$VAR``."""
    statements: list[_Statement] = []
    words: list[_Word] = []
    parts: list[_Part] = []
    in_word = False
    quoted = False
    cond = ""
    i, n = 0, len(script)

    def end_word() -> None:
        nonlocal parts, in_word, quoted
        if in_word:
            words.append(_Word(tuple(parts), quoted))
        parts, in_word, quoted = [], False, False

    def end_statement(next_cond: str) -> None:
        nonlocal words, cond
        end_word()
        if words:
            statements.append(_Statement(tuple(words), cond))
        elif next_cond:
            raise _ShellSyntaxError(f"unexpected {'&&' if next_cond == 'and' else '||'}")
        words = []
        cond = next_cond

    def parse_var(i: int) -> tuple[_Part, int]:
        # ``i`` points at "$".
        if i + 1 < n and script[i + 1] == "{":
            j = script.find("}", i + 2)
            if j < 0:
                raise _ShellSyntaxError("bad substitution")
            return ("var", script[i + 2 : j]), j + 1
        if i + 1 < n and script[i + 1] == "?":
            return ("var", "?"), i + 2
        j = i + 1
        while j < n and (script[j].isalnum() or script[j] == "_"):
            j += 1
        if j == i + 1:
            return ("lit", "$"), i + 1
        return ("var", script[i + 1 : j]), j

    while i < n:
        c = script[i]
        if c in " \t":
            end_word()
            i += 1
        elif c in ";\n":
            end_statement("")
            i += 1
        elif script.startswith("&&", i):
            end_statement("and")
            i += 2
        elif script.startswith("||", i):
            end_statement("or")
            i += 2
        elif c == "#" and not in_word:
            while i < n and script[i] != "\n":
                i += 1
        elif c == "'":
            j = script.find("'", i + 1)
            if j < 0:
                raise _ShellSyntaxError("unterminated quoted string")
            parts.append(("lit", script[i + 1 : j]))
            in_word = quoted = True
            i = j + 1
        elif c == '"':
            in_word = quoted = True
            i += 1
            while True:
                if i >= n:
                    raise _ShellSyntaxError("unterminated quoted string")
                c = script[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n and script[i + 1] in '\\"$`':
                    parts.append(("lit", script[i + 1]))
                    i += 2
                elif c == "$":
                    part, i = parse_var(i)
                    parts.append(part)
                else:
                    parts.append(("lit", c))
                    i += 1
        elif c == "\\":
            if i + 1 < n and script[i + 1] != "\n":
                parts.append(("lit", script[i + 1]))
                in_word = True
            i += 2
        elif c == "$":
            part, i = parse_var(i)
            parts.append(part)
            in_word = True
        else:
            parts.append(("lit", c))
            in_word = True
            i += 1
    end_word()
    if cond and not words:
        raise _ShellSyntaxError("unexpected end of file")
    end_statement("")
    return statements


def _literal_statement(argv: Sequence[str]) -> list[_Statement]:
    """A single statement whose words are taken verbatim (no expansion)."""
    return [_Statement(tuple(_Word((("lit", a),), True) for a in argv))]


def _parse_command(argv: Sequence[str]) -> Sequence[_Statement] | None:
    """The statements ``argv`` runs, or None when the fake cannot run it.

    ``sh -c SCRIPT`` (any path ending in sh, ash or bash) runs SCRIPT; any other
    non-empty argv is run as one statement; an empty one has nothing to run.

    Raises:
        _ShellSyntaxError: SCRIPT does not parse.
    """
    key = tuple(argv)
    try:
        return _parse_argv(key)
    except TypeError:  # an unhashable word: parsed (and failing) as it always was
        return _parse_argv.__wrapped__(key)


@functools.lru_cache(maxsize=1024)
def _parse_argv(argv: tuple[str, ...]) -> tuple[_Statement, ...] | None:
    # Parsed once per distinct command: many containers (and exec probes) run the
    # same one, and the statements are frozen values, safe to share.
    if not argv:
        return None
    if len(argv) >= 3 and os.path.basename(argv[0]) in ("sh", "ash", "bash") and argv[1] == "-c":
        statements = _parse_script(argv[2])
    else:
        statements = _literal_statement(argv)
    return tuple(_with_expansion(st) for st in statements)


def _with_expansion(statement: _Statement) -> _Statement:
    """``statement`` with its expansion worked out, when it has no variable."""
    if any(kind != "lit" for word in statement.words for kind, _ in word.parts):
        return statement
    try:
        expanded = _expand(statement, {}, 0)
    except TypeError:  # a word that is no text: it fails when run, as it always did
        return statement
    return attrs.evolve(statement, expanded=expanded, sleeps_forever=_sleeps_forever(expanded))


@attrs.frozen
class _ReadStdin:
    """Yielded by ``cat`` without a file: its runner copies the command's stdin, as
    it comes, to ``stream`` (``"stdout"``, ``"stderr"``, ``"null"``, or ``"file"``
    appending to ``path``) until the stdin ends, then resumes the shell."""

    stream: str
    path: str = ""


@attrs.frozen
class _Command:
    """An expanded statement: argv and where its stdout goes."""

    argv: tuple[str, ...]
    stdout: str = "stdout"  # "stdout", "stderr", "null" or "file"
    path: str = ""
    append: bool = False


_STDOUT_REDIRECT = re.compile(r"1?(>>|>)(.*)")
_STDERR_REDIRECT = re.compile(r"2>>?(.*)")


def _expand(statement: _Statement, env: Mapping[str, str], status: int) -> _Command:
    """Expand a statement's words and take its redirections out of argv."""
    if statement.expanded is not None:
        return statement.expanded
    texts = [
        (
            "".join(
                (str(status) if value == "?" else env.get(value, "")) if kind == "var" else value
                for kind, value in word.parts
            ),
            word.quoted,
        )
        for word in statement.words
    ]
    argv: list[str] = []
    stdout, path, append = "stdout", "", False
    i = 0
    while i < len(texts):
        text, quoted = texts[i]
        i += 1
        if quoted:
            argv.append(text)
            continue
        if text in (">&2", "1>&2"):
            stdout = "stderr"
            continue
        if text == "2>&1":
            continue  # stderr already goes where the fake sends it
        m = _STDERR_REDIRECT.fullmatch(text)
        if m:
            # The fake's commands write errors to stderr only; dropping the target
            # is the closest it gets.
            if not m[1] and i < len(texts):
                i += 1
            continue
        m = _STDOUT_REDIRECT.fullmatch(text)
        if m:
            target = m[2]
            if not target and i < len(texts):
                target = texts[i][0]
                i += 1
            if target == "/dev/null":
                stdout = "null"
            elif target == "/dev/stderr":
                stdout = "stderr"
            elif target != "/dev/stdout":
                stdout, path, append = "file", target, m[1] == ">>"
            continue
        if text == "":
            continue  # an unquoted empty expansion vanishes, as in sh
        argv.append(text)
    return _Command(tuple(argv), stdout, path, append)


def _program(cmd: _Command) -> tuple[list[str], bool]:
    """The argv ``cmd`` runs, without its ``exec`` words and a ``busybox``
    prefix (``busybox APPLET ARGS`` runs the applet), and whether it was
    ``exec``'d (the shell then ends with it)."""
    argv = list(cmd.argv)
    exec_ = False
    while argv and argv[0] == "exec":
        argv, exec_ = argv[1:], True
    if len(argv) > 1 and os.path.basename(argv[0]) == "busybox":
        argv = argv[1:]
    return argv, exec_


def _sleeps_forever(cmd: _Command) -> bool:
    """Whether running ``cmd`` does nothing but sleep until it is killed:
    ``sleep infinity`` (or ``inf``), its output not sent to a file (which the
    shell would create first). It writes nothing and, killed, runs nothing
    more, as :func:`_run_statements` runs it."""
    argv, _ = _program(cmd)
    return (
        cmd.stdout != "file"
        and len(argv) > 1
        and os.path.basename(argv[0]) == "sleep"
        and _parse_sleep(argv[1]) == math.inf
    )


_SLEEP_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _parse_sleep(arg: str) -> float | None:
    if arg in ("inf", "infinity"):
        return math.inf
    mult = 1.0
    if arg and arg[-1] in _SLEEP_UNITS:
        mult = _SLEEP_UNITS[arg[-1]]
        arg = arg[:-1]
    try:
        value = float(arg)
    except ValueError:
        return None
    if value < 0 or math.isnan(value):
        return None
    return value * mult


def _test(args: Sequence[str], fs: Mapping[str, str]) -> int:
    """``test``/``[``: file tests against the fake file system, strings, integers."""
    try:
        if len(args) == 0:
            return 1
        if len(args) == 1:
            return 0 if args[0] else 1
        if len(args) == 2 and args[0] == "!":
            return 1 - _test(args[1:], fs)
        if len(args) == 2:
            op, arg = args
            if op in ("-e", "-f"):
                return 0 if arg in fs else 1
            if op == "-s":
                return 0 if fs.get(arg) else 1
            if op == "-n":
                return 0 if arg else 1
            if op == "-z":
                return 0 if not arg else 1
        if len(args) == 3:
            a, op, b = args
            if op in ("=", "=="):
                return 0 if a == b else 1
            if op == "!=":
                return 0 if a != b else 1
            ops = {
                "-eq": int.__eq__,
                "-ne": int.__ne__,
                "-lt": int.__lt__,
                "-le": int.__le__,
                "-gt": int.__gt__,
                "-ge": int.__ge__,
            }
            if op in ops:
                return 0 if ops[op](int(a), int(b)) else 1
    except ValueError:
        return 2
    return 2


def _run_statements(
    statements: Sequence[_Statement],
    env: Mapping[str, str],
    emit: Callable[[str, str], None],
    fs: MutableMapping[str, str],
    *,
    unknown_blocks: bool,
    on_trap_term: Callable[[bool], None],
    identity: tuple[int, int] = (0, 0),
    cwd: str = "/",
    on_serve: Callable[[Sequence[str]], None] | None = None,
) -> Generator[float | _ReadStdin, None, int]:
    """Run statements; yields seconds to sleep (``inf``: until killed) or a
    :class:`_ReadStdin` (``cat`` reading its stdin), returns the exit code.

    ``emit(stream, line)`` receives output lines; ``fs`` maps paths to file contents
    and is shared by a container and the commands exec'd in it (a write it refuses
    raises OSError, which the command reports); ``identity`` is the (uid, gid)
    ``id`` reports; ``cwd`` the working directory ``pwd`` prints;
    ``on_serve(argv)`` hears of an unknown program that runs until stopped (a
    server such as ``httpd``) as it starts.
    """
    status = 0
    for statement in statements:
        if (statement.cond == "and" and status != 0) or (statement.cond == "or" and status == 0):
            continue
        cmd = _expand(statement, env, status)
        argv, exec_ = _program(cmd)
        if not argv:
            continue
        if cmd.stdout == "file":
            try:
                if cmd.append:
                    fs.setdefault(cmd.path, "")
                else:
                    fs[cmd.path] = ""
            except OSError as exc:
                emit("stderr", f"sh: can't create {cmd.path}: {exc.strerror}")
                status = 1
                continue

        def out(line: str, cmd: _Command = cmd) -> None:
            if cmd.stdout == "file":
                fs[cmd.path] += line + "\n"
            elif cmd.stdout != "null":
                emit(cmd.stdout, line)

        name = os.path.basename(argv[0])
        args = argv[1:]
        if name == "echo":
            out(" ".join(args[1:] if args[:1] == ["-n"] else args))
            status = 0
        elif name == "sleep":
            secs = _parse_sleep(args[0]) if args else None
            if secs is None:
                emit("stderr", f"sleep: invalid number '{args[0] if args else ''}'")
                status = 1
            else:
                yield secs
                status = 0
        elif name == "exit":
            if not args:
                return status
            try:
                return int(args[0]) & 0xFF
            except ValueError:
                emit("stderr", f"sh: exit: Illegal number: {args[0]}")
                return 2
        elif name in ("true", ":"):
            status = 0
        elif name == "false":
            status = 1
        elif name == "cat":
            status = 0
            if not args or args == ["-"]:
                yield _ReadStdin(cmd.stdout, cmd.path)
            for path in (a for a in args if a != "-"):
                try:
                    content = fs[path]
                except KeyError:
                    emit("stderr", f"cat: can't open '{path}': No such file or directory")
                    status = 1
                    continue
                except OSError as exc:
                    emit("stderr", f"cat: read error: {exc.strerror}")
                    status = 1
                    continue
                for line in content.splitlines():
                    out(line)
        elif name == "touch":
            status = 0
            for path in args:
                try:
                    fs.setdefault(path, "")
                except OSError as exc:
                    emit("stderr", f"touch: {path}: {exc.strerror}")
                    status = 1
        elif name == "rm":
            force = any(a.startswith("-") and "f" in a for a in args)
            status = 0
            for path in (a for a in args if not a.startswith("-")):
                if path in fs:
                    try:
                        del fs[path]
                    except OSError as exc:
                        emit("stderr", f"rm: can't remove '{path}': {exc.strerror}")
                        status = 1
                elif not force:
                    emit("stderr", f"rm: can't remove '{path}': No such file or directory")
                    status = 1
        elif name in ("test", "["):
            if name == "[":
                if not args or args[-1] != "]":
                    emit("stderr", "sh: [: missing ]")
                    status = 2
                    continue
                args = args[:-1]
            status = _test(args, fs)
        elif name == "id":
            uid, gid = identity
            if args == ["-u"]:
                out(str(uid))
            elif args == ["-g"]:
                out(str(gid))
            elif args == ["-G"]:
                # The supplemental groups are those of the process's status.
                groups = _status_field(fs, "Groups").split()
                out(" ".join([str(gid), *(g for g in groups if g != str(gid))]))
            else:
                out(f"uid={uid} gid={gid}")
            status = 0
        elif name == "pwd":
            out(cwd)
            status = 0
        elif name == "hostname" and not args:
            out(fs.get("/proc/sys/kernel/hostname", "localhost\n").strip())
            status = 0
        elif name == "readlink" and len(args) == 1 and args[0].startswith("/proc/self/ns/"):
            # The fake keeps a namespace link's target as the link's content.
            status = 0 if args[0] in fs else 1
            if args[0] in fs:
                out(fs[args[0]].strip())
        elif name == "trap":
            # Only what the fake needs: ``trap '' TERM`` ignores SIGTERM,
            # ``trap - TERM`` restores it.
            signals = {s.upper().removeprefix("SIG") for s in args[1:]}
            if len(args) >= 2 and signals & {"TERM", "15"}:
                on_trap_term(args[0] == "")
            status = 0
        elif unknown_blocks:
            # A program the fake does not know: it behaves like a server that runs
            # until it is stopped.
            if on_serve is not None:
                on_serve(tuple(argv))
            yield math.inf
        else:
            emit("stderr", f"sh: {argv[0]}: not found")
            status = 127
        if exec_:
            return status
    return status


def _status_field(fs: Mapping[str, str], key: str) -> str:
    """A field of the fake's ``/proc/self/status`` ("" when absent)."""
    for line in fs.get("/proc/self/status", "").splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return value.strip()
    return ""
