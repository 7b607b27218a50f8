"""A seeded generator of hostile pod manifests, for the loader's fuzz tests.

:func:`corpus` yields ``(name, bytes)`` cases: good pods mutated in the ways an
attacker or a broken editor would (wrong types, huge numbers, deep nesting, NULs
and odd unicode, duplicate keys, YAML alias bombs, bad tags, integers of thousands
of digits, multi-document and truncated files, binary junk, oversized files). The
same seed always gives the same cases, so a failure names a case that can be
replayed with :func:`case`.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "pods"

#: A pod that touches most of the model (quantities, timestamps, int-or-string
#: ports, maps, nested lists), so that a mutation can land on every kind of field.
RICH_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "rich",
        "namespace": "default",
        "labels": {"app": "rich"},
        "annotations": {"note": "x"},
        "creationTimestamp": "2024-01-02T03:04:05Z",
    },
    "spec": {
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "activeDeadlineSeconds": 600,
        "nodeSelector": {"disk": "ssd"},
        "hostNetwork": False,
        "dnsConfig": {"nameservers": ["1.1.1.1"], "options": [{"name": "ndots", "value": "2"}]},
        "securityContext": {
            "runAsUser": 1000,
            "fsGroup": 2000,
            "sysctls": [{"name": "net.ipv4.ip_forward", "value": "1"}],
        },
        "tolerations": [
            {
                "key": "k",
                "operator": "Equal",
                "value": "v",
                "effect": "NoExecute",
                "tolerationSeconds": 5,
            }
        ],
        "volumes": [
            {"name": "data", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
            {"name": "host", "hostPath": {"path": "/tmp", "type": "Directory"}},
            {
                "name": "cfg",
                "configMap": {
                    "name": "cfg",
                    "defaultMode": 420,
                    "items": [{"key": "a", "path": "a"}],
                },
            },
        ],
        "initContainers": [{"name": "init", "image": "busybox", "command": ["true"]}],
        "containers": [
            {
                "name": "main",
                "image": "busybox:1.36",
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c"],
                "args": ["sleep 3600"],
                "workingDir": "/",
                "env": [
                    {"name": "A", "value": "1"},
                    {
                        "name": "B",
                        "valueFrom": {
                            "resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}
                        },
                    },
                ],
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "resources": {
                    "requests": {"cpu": "250m", "memory": "64Mi"},
                    "limits": {"cpu": "500m", "memory": "128Mi", "ephemeral-storage": "1Gi"},
                },
                "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True}],
                "readinessProbe": {
                    "httpGet": {"path": "/", "port": "http"},
                    "periodSeconds": 5,
                    "failureThreshold": 3,
                },
                "livenessProbe": {"exec": {"command": ["true"]}, "initialDelaySeconds": 1},
                "lifecycle": {"preStop": {"exec": {"command": ["true"]}}},
                "securityContext": {"privileged": False, "capabilities": {"add": ["NET_ADMIN"]}},
            }
        ],
    },
}

_HUGE = 10 * 1024 * 1024  # the loader's size cap (MAX_MANIFEST_BYTES)

_ODD_STRINGS = [
    "",
    "\x00",
    "a\x00b",
    "\ufeff",
    "\u202eevil",
    "İ",
    "ﬁ",
    "\U0001f600",
    "\u0085",
    "\u2028",
    "\ud7ff",
    "../../etc/passwd",
    "-",
    "a" * 300,
    "x" * 70_000,
    "🙂" * 100,
    "${HOME}",
    "$(A)",
    "\\",
    '"',
    "\t",
    " leading",
    "trailing ",
    "UPPER",
    "1e3",
    "0x10",
    "null",
    "~",
    "yes",
    "no",
    "on",
    "off",
    "2020-02-30T25:61:61Z",
]

_BAD_TAGS = [
    "!!int 0xZZ",
    "!!int 12abc",
    "!!int ''",
    "!!bool maybe",
    "!!float nope",
    "!!timestamp 2020-13-45",
    "!!timestamp 2020-02-30",
    "!!timestamp 2020-01-01T25:00:00Z",
    "!!timestamp 0000-01-01",
    "2020-02-30",
    "2001-12-14t21:59:43.10-99:99",
    "!!binary '@@@'",
    "!!binary AAA",
    "!!python/object:os.system ls",
    "!!set {a: 1}",
    "!!omap [1, 2]",
    "!!pairs nope",
    "!!null x",
    "!!map [1, 2]",
    "!!seq {a: 1}",
    "!<tag:yaml.org,2002:int> 0b2",
    "!unknown x",
    "!!merge x",
    "!!str",
    "!!int",
    "&a [*a]",
    "*undefined",
    "190:20:30",
    "0o777",
    "0b1010",
    "1_000",
    "-.inf",
    ".nan",
    "+12e",
    "0x" + "f" * 5000,
    "9" * 5000,
    "-" + "9" * 4400,
    "1" * 4300 + ".5",
    "0b" + "1" * 20000,
    "0" + "7" * 6000,
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*prefix, i))


def _set(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node = root
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return root


def _hostile_value(rng: random.Random) -> Any:
    pick = rng.randrange(12)
    if pick == 0:
        return rng.choice(
            [0, -1, 1, 2**31, 2**63, -(2**63) - 1, 2**64, 10 ** rng.randrange(19, 400)]
        )
    if pick == 1:
        return rng.choice(
            [1e308, -1e308, float("inf"), float("-inf"), float("nan"), -0.0, 5e-324, 0.5, 1.0]
        )
    if pick == 2:
        return rng.choice([True, False, None])
    if pick in (3, 4):
        return rng.choice(_ODD_STRINGS)
    if pick == 5:
        return [rng.choice(_ODD_STRINGS), rng.randrange(100), None]
    if pick == 6:
        # keys of other types beside string keys (YAML allows them)
        return {rng.choice([1.5, 7, None, True, "k"]): rng.choice(["v", 1, None]), "s": "v"}
    if pick == 7:
        nested: Any = "leaf"
        for _ in range(rng.randrange(20, 130)):
            nested = [nested] if rng.random() < 0.5 else {"n": nested}
        return nested
    if pick == 8:
        return {}
    if pick == 9:
        return []
    if pick == 10:
        return [{"name": rng.choice(_ODD_STRINGS)}] * rng.randrange(1, 50)
    return rng.choice([12, "12", "1.5Gi", "1e400", "-1", "0.0000000001", "9" * 40 + "Ei"])


def _base(rng: random.Random) -> dict[str, Any]:
    return (
        copy.deepcopy(RICH_POD) if rng.random() < 0.6 else copy.deepcopy(rng.choice(_EXAMPLE_PODS))
    )


def _dump(rng: random.Random, obj: Any) -> bytes:
    if rng.random() < 0.3:
        try:
            return json.dumps(obj, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
        except (TypeError, ValueError, RecursionError):
            pass
    try:
        text = yaml.safe_dump(
            obj,
            allow_unicode=rng.random() < 0.5,
            sort_keys=False,
            default_flow_style=rng.choice([False, None]),
            width=10**6,
        )
    except (yaml.YAMLError, RecursionError):
        text = repr(obj)
    return text.encode("utf-8", "surrogatepass")


def _wrong_type(rng: random.Random) -> bytes:
    pod = _base(rng)
    for _ in range(rng.randrange(1, 4)):
        paths = list(_paths(pod))
        path = rng.choice(paths[1:])
        pod = _set(pod, path, _hostile_value(rng))
    return _dump(rng, pod)


def _odd_key(rng: random.Random) -> bytes:
    pod = _base(rng)
    maps = [p for p in _paths(pod) if isinstance(_get(pod, p), dict)]
    target = _get(pod, rng.choice(maps))
    target[rng.choice([1.5, 3, None, True, False, -0.5, "\x00", "a.b/c", "UPPER"])] = rng.choice(
        ["x", 1, None, [1], {"a": 1}]
    )
    return _dump(rng, pod)


def _get(root: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        root = root[step]
    return root


def _bad_tag(rng: random.Random) -> bytes:
    text = _dump_yaml_block(_base(rng))
    lines = text.splitlines()
    candidates = [
        i for i, line in enumerate(lines) if ": " in line and not line.rstrip().endswith(":")
    ]
    for _ in range(rng.randrange(1, 3)):
        i = rng.choice(candidates)
        key = lines[i].split(": ", 1)[0]
        lines[i] = f"{key}: {rng.choice(_BAD_TAGS)}"
    return ("\n".join(lines) + "\n").encode()


def _dump_yaml_block(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, width=10**6)


def _duplicate_keys(rng: random.Random) -> bytes:
    lines = _dump_yaml_block(_base(rng)).splitlines()
    for _ in range(rng.randrange(1, 5)):
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    return ("\n".join(lines) + "\n").encode()


def _alias_bomb(rng: random.Random) -> bytes:
    levels = rng.randrange(3, 10)
    width = rng.randrange(5, 12)
    out = ["a0: &a0 [lol, lol]"]
    for n in range(1, levels):
        out.append(f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * width) + "]")
    bomb = "\n".join(out)
    where = rng.choice(["metadata", "spec", "extra"])
    return (
        f"apiVersion: v1\nkind: Pod\n{bomb}\nmetadata: {{name: bomb}}\n"
        f"spec:\n  containers: [{{name: c, image: busybox}}]\n"
        f"{where}Bomb: *a{levels - 1}\n"
    ).encode()


def _deep(rng: random.Random) -> bytes:
    depth = rng.choice([90, 101, 500, 999, 1001, 3000, 20_000])
    style = rng.randrange(4)
    if style == 0:
        inner = "[" * depth + "]" * depth
        return (
            '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "deep"}, '
            f'"spec": {{"containers": {inner}}}}}'
        ).encode()
    if style == 1:
        return (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: deep}\nspec: "
            + "{a: " * depth
            + "1"
            + "}" * depth
            + "\n"
        ).encode()
    if style == 2:
        lines = ["apiVersion: v1", "kind: Pod", "metadata:", "  name: deep", "spec:"]
        lines += [" " * (2 * i + 2) + f"k{i}:" for i in range(min(depth, 300))]
        return ("\n".join(lines) + " 1\n").encode()
    return ("[" * depth).encode()


def _text_damage(rng: random.Random) -> bytes:
    data = bytearray(_dump(rng, _base(rng)))
    for _ in range(rng.randrange(1, 6)):
        op = rng.randrange(5)
        if op == 0 and data:
            del data[rng.randrange(len(data)) :]  # truncated
        elif op == 1:
            data.insert(rng.randrange(len(data) + 1), rng.randrange(256))
        elif op == 2 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif op == 3:
            data[rng.randrange(len(data) + 1) : 0] = rng.choice(
                [
                    b"\x00",
                    b"\xef\xbb\xbf",
                    b"\xff\xfe",
                    "\u202e".encode(),
                    b"\t",
                    b"{",
                    b"]",
                    b"&x ",
                    b"*x ",
                    b"!!",
                    b"%YAML 1.1\n",
                    b"? ",
                    b"<<: ",
                    b"|",
                    b">-",
                    b"'",
                ]
            )
        elif op == 4:
            start = rng.randrange(len(data) + 1)
            data[start:start] = data[start : start + rng.randrange(1, 200)]
    return bytes(data)


def _multi_document(rng: random.Random) -> bytes:
    docs = []
    for _ in range(rng.randrange(0, 6)):
        pick = rng.randrange(5)
        if pick == 0:
            docs.append("")
        elif pick == 1:
            docs.append("~")
        elif pick == 2:
            docs.append(
                _dump_yaml_block(
                    {
                        "kind": "List",
                        "items": rng.choice([[], None, "x", [_base(rng)], [1, None, "s"]]),
                    }
                )
            )
        else:
            docs.append(_dump(rng, _base(rng)).decode("utf-8", "surrogatepass"))
    sep = rng.choice(["---\n", "\n---\n", "...\n---\n", "--- !!str\n"])
    text = sep.join(docs)
    if rng.random() < 0.3:
        text = text[: rng.randrange(len(text) + 1)]
    return text.encode("utf-8", "surrogatepass")


def _junk(rng: random.Random) -> bytes:
    size = rng.choice([0, 1, 3, 64, 4096])
    return bytes(rng.randrange(256) for _ in range(size))


def _oversized(rng: random.Random) -> bytes:
    pick = rng.randrange(3)
    if pick == 0:
        # just past the cap, otherwise well-formed: must be refused before parsing
        pad = b"# " + b"x" * (_HUGE + 1) + b"\n"
        return _dump(rng, _base(rng)) + pad
    if pick == 1:
        return b"\xff" * _HUGE  # binary, near the cap
    return b"\x00" * (_HUGE - 10)


#: (name, weight, mutator): the weights give the mix of a corpus.
MUTATORS: list[tuple[str, int, Callable[[random.Random], bytes]]] = [
    ("wrong-type", 30, _wrong_type),
    ("odd-key", 8, _odd_key),
    ("bad-tag", 16, _bad_tag),
    ("duplicate-keys", 5, _duplicate_keys),
    ("alias-bomb", 3, _alias_bomb),
    ("deep", 4, _deep),
    ("text-damage", 20, _text_damage),
    ("multi-document", 8, _multi_document),
    ("junk", 5, _junk),
]

#: One case in this many is an oversized file (they are slow to build, so rare).
OVERSIZED_EVERY = 1000


def case(seed: int, index: int) -> tuple[str, bytes]:
    """Case ``index`` of the corpus of ``seed``: its name and content."""
    rng = random.Random(f"{seed}:{index}")
    if index % OVERSIZED_EVERY == OVERSIZED_EVERY - 1:
        return f"{index:05d}-oversized", _oversized(rng)
    names, weights, funcs = zip(*MUTATORS, strict=True)
    (i,) = rng.choices(range(len(funcs)), weights=weights)
    return f"{index:05d}-{names[i]}", funcs[i](rng)


def corpus(seed: int, count: int) -> Iterator[tuple[str, bytes]]:
    """``count`` cases, the same ones for the same seed."""
    for index in range(count):
        yield case(seed, index)


_EXAMPLE_PODS: list[dict[str, Any]] = [
    yaml.safe_load(p.read_text()) for p in sorted(EXAMPLES.glob("*.yaml"))
]
