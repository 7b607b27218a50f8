"""Every code block of README.md and docs/*.md runs, as a user would run it.

The checkout is installed with pip (``pip install --no-deps`` of the project's
files, the path a user takes with ``pip install .``) into a fresh virtual
environment, once per test run; the dependencies are those already installed
here (a ``.pth`` line puts this environment's site-packages after the fresh
one's), so nothing is downloaded but, when this environment's setuptools is
older than the build needs, pip's isolated build environment. The files are
copied to a temporary directory first, so the build writes nothing into the
checkout. Each document gets a fresh temporary project (a directory with no
configuration, holding a copy of ``examples/``), where its blocks run:

- A ```python block runs as a script with the fresh environment's python. A
  block that defines a test (``def test_``, ``class Test``) is a pytest test
  file: it is saved as
  ``test_<document>_<line>.py`` and run with ``python -m pytest`` in the project
  (so the installed pytest plugin is what makes its fixtures work), and must pass.
- A ```sh block runs with ``bash -e`` in the project, the fresh environment's
  ``bin`` first on ``PATH``.
- A ```text block (diagrams, output samples, synopses) is not code; nor are
  ```yaml and ```json blocks (data).

Markers, an HTML comment on the line before the opening fence (Markdown does not
show them):

- ``<!-- not run: REASON -->``: the block cannot run in a test (a long-running
  agent, a cluster, root, the network); the reason is required. A python block
  so marked is still compiled (top-level ``await`` allowed), so its syntax holds.
- ``<!-- continues -->``: the python block is the next part of the previous
  python block of the same document; the parts run together as one script
  (or one test file), reported at the first part's line.
- ``<!-- save as: NAME -->``: the python block is saved in the project as NAME
  (before any block of the document runs, so later blocks can import it), then
  run like any other.
- ``<!-- same as: PATH -->``: the python block is the checkout's file PATH
  (relative to the repository root) verbatim, which is checked; it is saved in
  the project under PATH's file name, like ``save as``, and run.

A block with any other fence (none, or an unknown language) fails
``test_every_block_is_run_or_marked``: nothing is skipped silently.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: Fence languages that are run, and those that are data or prose, never run.
RUN = {"python", "sh"}
NOT_CODE = {"text", "yaml", "json"}

#: Seconds one block (or one joined example) may take.
BLOCK_TIMEOUT = 120

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<ticks>`{3,})(?P<info>[^`]*)$")
_MARKER = re.compile(
    r"^\s*<!--\s*(?P<kind>not run|continues|save as|same as)\s*:?\s*(?P<arg>.*?)\s*-->\s*$"
)


@attrs.frozen
class Block:
    """One fenced block of a document."""

    doc: str  # path relative to the repository root
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    marker: str = ""  # the marker's kind, "" without one
    arg: str = ""  # the marker's argument (reason, file name, path)


@attrs.frozen
class Unit:
    """What runs as one: a python script or test file (joined blocks), or a sh block."""

    doc: str
    line: int
    lang: str
    code: str
    save_as: str = ""

    @property
    def is_test_file(self) -> bool:
        pattern = r"^(\s*(async\s+)?def test_|class Test)"
        return self.lang == "python" and re.search(pattern, self.code, re.M) is not None

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def parse_blocks(text: str, doc: str) -> list[Block]:
    """The fenced blocks of a Markdown text, with the marker before each."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        indent, ticks = fence["indent"], fence["ticks"]
        lang = fence["info"].strip().split(" ")[0] if fence["info"].strip() else ""
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != ticks:
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1  # the closing fence
        marker = arg = ""
        before = start - 1
        if before >= 0 and (m := _MARKER.match(lines[before])):
            marker, arg = m["kind"], m["arg"]
        blocks.append(Block(doc, start + 1, lang, "\n".join(body) + "\n", marker, arg))
    return blocks


def problems_of(blocks: list[Block], root: Path = ROOT) -> list[str]:
    """What is wrong with a document's blocks: unmarked, or a marker that does not hold."""
    problems: list[str] = []
    previous_python: Block | None = None
    for b in blocks:
        where = f"{b.doc}:{b.line}"
        if b.marker == "not run":
            if not b.arg:
                problems.append(f"{where}: `not run` needs a reason")
            if b.lang == "python":
                try:
                    compile(b.code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
                except SyntaxError as err:
                    problems.append(f"{where}: not run, but not Python either: {err}")
        elif b.lang in NOT_CODE:
            if b.marker:
                problems.append(f"{where}: a ```{b.lang} block is never run; drop `{b.marker}`")
        elif b.lang not in RUN:
            problems.append(
                f"{where}: a ```{b.lang or '(no language)'} block is neither run nor marked: "
                f"fence it as one of {sorted(RUN | NOT_CODE)} or put "
                "`<!-- not run: REASON -->` on the line before it"
            )
        elif b.marker and b.lang != "python":
            problems.append(f"{where}: `{b.marker}` applies to python blocks only")
        elif b.marker == "continues" and previous_python is None:
            problems.append(f"{where}: `continues`, but no python block runs before it")
        elif b.marker in ("save as", "same as") and not b.arg:
            problems.append(f"{where}: `{b.marker}` needs a file name")
        elif b.marker == "same as":
            original = root / b.arg
            if not original.is_file():
                problems.append(f"{where}: same as {b.arg}, which does not exist")
            elif original.read_text() != b.code:
                problems.append(f"{where}: differs from {b.arg}; copy the file into the block")
        if b.lang == "python" and b.marker != "not run":
            previous_python = b
    return problems


def units_of(blocks: list[Block]) -> list[Unit]:
    """What runs, in document order: continued python blocks are joined."""
    units: list[Unit] = []
    for b in blocks:
        if b.lang not in RUN or b.marker == "not run":
            continue
        if b.marker == "continues":
            last = next(i for i in range(len(units) - 1, -1, -1) if units[i].lang == "python")
            units[last] = attrs.evolve(units[last], code=units[last].code + "\n" + b.code)
            continue
        save_as = Path(b.arg).name if b.marker in ("save as", "same as") else ""
        units.append(Unit(b.doc, b.line, b.lang, b.code, save_as))
    return units


def _blocks(doc: Path) -> list[Block]:
    return parse_blocks(doc.read_text(), str(doc.relative_to(ROOT)))


UNITS = [u for doc in DOCS for u in units_of(_blocks(doc))]


# ------------------------------------------------------------------ the markers themselves


SAMPLE = """\
# A page

```python
x = 1
```

<!-- continues -->
```python
assert x == 1
```

```
kubelet-kit run
```

<!-- not run: needs a cluster -->
```sh
kubectl get nodes
```

<!-- not run: -->
```sh
true
```

- a list item:

  ```text
  output
  ```
"""


def test_an_unmarked_block_is_a_problem_and_marked_ones_are_not() -> None:
    blocks = parse_blocks(SAMPLE, "page.md")
    assert [(b.line, b.lang, b.marker) for b in blocks] == [
        (3, "python", ""),
        (8, "python", "continues"),
        (12, "", ""),
        (17, "sh", "not run"),
        (22, "sh", "not run"),
        (28, "text", ""),
    ]
    problems = problems_of(blocks)
    assert len(problems) == 2, problems
    assert problems[0].startswith("page.md:12: a ```(no language) block is neither run nor marked")
    assert problems[1] == "page.md:22: `not run` needs a reason"
    [unit] = units_of(blocks)
    assert (unit.line, unit.code) == (3, "x = 1\n\nassert x == 1\n")


def test_a_block_not_run_must_still_be_python(tmp_path: Path) -> None:
    blocks = parse_blocks("<!-- not run: a cluster -->\n```python\nawait f(\n```\n", "p.md")
    assert problems_of(blocks, tmp_path)[0].startswith("p.md:2: not run, but not Python either")
    ok = parse_blocks("<!-- not run: a cluster -->\n```python\nawait f()\n```\n", "p.md")
    assert problems_of(ok, tmp_path) == []


def test_a_copied_file_must_match_its_original(tmp_path: Path) -> None:
    (tmp_path / "toy.py").write_text("x = 1\n")
    same = parse_blocks("<!-- same as: toy.py -->\n```python\nx = 1\n```\n", "p.md")
    assert problems_of(same, tmp_path) == []
    assert units_of(same)[0].save_as == "toy.py"
    drifted = parse_blocks("<!-- same as: toy.py -->\n```python\nx = 2\n```\n", "p.md")
    assert problems_of(drifted, tmp_path) == [
        "p.md:2: differs from toy.py; copy the file into the block"
    ]


def test_every_block_is_run_or_marked() -> None:
    problems = [p for doc in DOCS for p in problems_of(_blocks(doc))]
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------ running them


def _needs_isolated_build() -> bool:
    """Whether pip must fetch the build requirements (this environment's are too old)."""
    try:
        major = int(metadata.version("setuptools").split(".")[0])
    except (metadata.PackageNotFoundError, ValueError):
        return True
    return major < 77


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the checkout pip-installed in it."""
    base = tmp_path_factory.mktemp("docs-venv")
    env = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    Path(site, "_kubelet_kit_docs_deps.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))

    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "kubelet_kit", src / "kubelet_kit", ignore=shutil.ignore_patterns("__pycache__")
    )
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps"]
    pip += ["--quiet", "--disable-pip-version-check"]
    if not _needs_isolated_build():
        pip.append("--no-build-isolation")
    result = subprocess.run([*pip, str(src)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr

    where = subprocess.run(
        [str(python), "-c", "import kubelet_kit; print(kubelet_kit.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=base,
    ).stdout.strip()
    assert Path(where).is_relative_to(env), f"kubelet_kit imported from {where}, not the install"
    return env


@pytest.fixture(scope="module")
def projects() -> dict[str, Path]:
    """The fresh project of each document, made by its first block (see ``_project``)."""
    return {}


def _project(made: dict[str, Path], factory: pytest.TempPathFactory, doc: str) -> Path:
    if doc not in made:
        project = factory.mktemp(f"docs-{Path(doc).stem}")
        shutil.copytree(
            ROOT / "examples", project / "examples", ignore=shutil.ignore_patterns("__pycache__")
        )
        for unit in UNITS:
            if unit.doc == doc and unit.save_as:
                (project / unit.save_as).write_text(unit.code)
        made[doc] = project
    return made[doc]


def _environ(venv: Path) -> dict[str, str]:
    """This process's environment, less what would leak the project's own set-up."""
    ours = str(Path(sys.executable).parent)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "PYTHON", "COV_")) and k != "VIRTUAL_ENV"
    }
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != ours]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    env["VIRTUAL_ENV"] = str(venv)
    return env


@pytest.mark.parametrize("unit", UNITS, ids=[u.id for u in UNITS])
def test_the_block_runs(
    unit: Unit,
    venv: Path,
    projects: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    project = _project(projects, tmp_path_factory, unit.doc)
    python = str(venv / "bin" / "python")
    stem = re.sub(r"\W", "_", Path(unit.doc).stem)
    if unit.lang == "sh":
        command = ["bash", "-e", "-c", unit.code]
    elif unit.is_test_file:
        name = unit.save_as or f"test_{stem}_{unit.line}.py"
        (project / name).write_text(unit.code)
        command = [python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", name]
    else:
        name = unit.save_as or f"block_{stem}_{unit.line}.py"
        (project / name).write_text(unit.code)
        command = [python, name]
    result = subprocess.run(
        command,
        cwd=project,
        env=_environ(venv),
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        check=False,
    )
    output = f"{unit.id} ({' '.join(command[:3])} ...):\n{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, output
    if unit.is_test_file:
        assert re.search(r"\b\d+ passed\b", result.stdout), output
        assert not re.search(r"\b\d+ (failed|skipped|error)", result.stdout), output
