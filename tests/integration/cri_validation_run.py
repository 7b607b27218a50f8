"""Running the CRI validation suite (``pytest -p kubelet_kit.testing.cri_validation``)
as a user does, in a pytest process of its own, and reading its outcomes."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def run_suite(endpoint: str, workdir: Path, *args: str, timeout: float = 900) -> dict[str, str]:
    """Run the suite in a pytest of its own, in an empty directory; returns each
    check's outcome (``passed``, ``skipped: <reason>``, ``failed: <message>``) from its
    JUnit report."""
    junit = workdir / "junit.xml"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "kubelet_kit.testing.cri_validation",
            "-p",
            "no:cacheprovider",
            "--cri-endpoint",
            endpoint,
            f"--junitxml={junit}",
            "-q",
            *args,
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert junit.exists(), done.stdout + done.stderr
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        assert name.startswith("test_check["), name
        check = name.removeprefix("test_check[").removesuffix("]")
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if failure is not None:
            outcomes[check] = f"failed: {failure.get('message', '')}"
        elif (skipped := case.find("skipped")) is not None:
            outcomes[check] = f"skipped: {skipped.get('message', '')}"
        else:
            outcomes[check] = "passed"
    return outcomes
