"""The installed pytest plugin, in a fresh project: the README's node-policy test
runs with no configuration, and tests that do not use the plugin are left alone."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_policy_test() -> str:
    """The README's pytest example, as a user would copy it."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    [block] = [b for b in blocks if "async def test_" in b and "kubelet_env" in b]
    return block


def run_pytest(project: Path) -> subprocess.CompletedProcess[str]:
    # A project of its own: no pytest configuration, no conftest, default
    # (strict) pytest-asyncio mode.
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(project)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_readme_policy_test_passes_in_a_project_without_configuration(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_policy.py").write_text(readme_policy_test())
    result = run_pytest(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASSED test_policy.py::test_crash_loop_backs_off" in result.stdout


def test_tests_without_the_plugins_fixtures_are_left_to_the_project(tmp_path: Path) -> None:
    (tmp_path / "test_mixed.py").write_text(
        "async def test_plain_async():\n"
        "    pass\n"
        "\n"
        "def test_sync_with_a_fixture(fake_clock):\n"
        "    fake_clock.advance(5)\n"
        "    assert fake_clock.monotonic() >= 5\n"
        "\n"
        "async def test_async_with_a_fixture(fake_runtime):\n"
        "    assert await fake_runtime.list_containers() == []\n"
    )
    result = run_pytest(tmp_path)
    out = result.stdout
    assert "PASSED test_mixed.py::test_sync_with_a_fixture" in out, out
    assert "PASSED test_mixed.py::test_async_with_a_fixture" in out, out
    # Not the plugin's to run: pytest says so, as it would without kubelet-kit.
    assert "FAILED test_mixed.py::test_plain_async" in out, out
    assert "async def functions are not natively supported" in out, out
