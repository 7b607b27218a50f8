"""Kubernetes' ``$(VAR)`` expansion, as the kubelet applies it to env values,
commands, args, exec probes and ``subPathExpr``.

The rules (upstream ``third_party/forked/golang/expansion``):

* ``$(NAME)`` is replaced by the value of ``NAME`` when it is defined; an
  undefined reference is left exactly as written;
* ``$$`` is an escaped ``$``: it yields a single ``$`` and the text after it is
  not treated as a reference (``$$(A)`` gives ``$(A)``);
* a ``$`` followed by anything else, a lone ``$`` at the end, and an unterminated
  ``$(...`` are copied as they are; shell syntax (``$A``, ``${A}``) is not
  expanded, and backslashes have no special meaning;
* a reference's name runs to the first ``)``; values are not expanded again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

__all__ = ["expand", "expand_all", "mapping_for"]


def mapping_for(*contexts: Mapping[str, str]) -> Callable[[str], str | None]:
    """A lookup over ``contexts`` in order: the first one defining the name wins.

    Returns None for a name no context defines (the reference is then kept).
    """

    def lookup(name: str) -> str | None:
        for context in contexts:
            if name in context:
                return context[name]
        return None

    return lookup


def expand(text: str, lookup: Callable[[str], str | None] | Mapping[str, str]) -> str:
    """Expand every ``$(NAME)`` reference in ``text``.

    Args:
        text: The string to expand.
        lookup: A mapping of defined names to values, or a function returning a
            name's value or None when undefined (see :func:`mapping_for`).

    Returns:
        ``text`` with defined references replaced and ``$$`` unescaped.
    """
    if "$" not in text:
        return text  # most commands, args and values: nothing to expand
    resolve = mapping_for(lookup) if isinstance(lookup, Mapping) else lookup
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        dollar = text.find("$", i)
        if dollar < 0:
            out.append(text[i:])
            break
        out.append(text[i:dollar])  # plain text up to the next "$", copied at once
        i = dollar
        if i + 1 >= n:
            out.append("$")  # a lone "$" at the end
            break
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")  # escaped operator
            i += 2
            continue
        if nxt != "(":
            out.append("$" + nxt)  # not a reference: both characters stay
            i += 2
            continue
        close = text.find(")", i + 2)
        if close < 0:
            # Unterminated: keep "$(" and carry on after it, so that a later
            # complete reference is still expanded.
            out.append("$(")
            i += 2
            continue
        name = text[i + 2 : close]
        value = resolve(name)
        out.append(value if value is not None else f"$({name})")
        i = close + 1
    return "".join(out)


def expand_all(texts: Iterable[str], lookup: Mapping[str, str]) -> tuple[str, ...]:
    """Expand each string of ``texts`` against ``lookup`` (commands and args)."""
    texts = tuple(texts)
    for text in texts:
        if "$" in text:
            break
    else:
        # No reference anywhere (most commands and args): the strings as they are,
        # without building a lookup for them.
        return texts
    resolve = mapping_for(lookup)
    return tuple(expand(t, resolve) for t in texts)
