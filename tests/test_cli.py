"""The kubelet-kit command: --version and validate, run as a user runs them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kubelet_kit import __version__
from kubelet_kit.cli import SUBCOMMANDS, build_parser, main

DATA = Path(__file__).parent / "data" / "manifests"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelet_kit.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def mixed_dir(tmp_path: Path) -> Path:
    """One good manifest and several broken ones."""
    shutil.copy(DATA / "good" / "two-pods.yaml", tmp_path / "good.yaml")
    for name in ("image.yaml", "multi.yaml", "syntax.yaml", "types.yaml", "not-a-mapping.yaml"):
        shutil.copy(DATA / "broken" / name, tmp_path / name)
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "README.txt").write_text("not a manifest, ignored\n")
    return tmp_path


def test_version() -> None:
    proc = run("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"kubelet-kit {__version__}"


def test_validate_good_directory_exits_zero() -> None:
    proc = run("validate", str(DATA / "good"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "OK: 5 pod(s) valid in 3 file(s)"


def test_validate_mixed_directory(mixed_dir: Path) -> None:
    proc = run("validate", str(mixed_dir))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    d = str(mixed_dir)
    # One line per problem, each "<file>[doc]: <path>: <message>".
    assert f"{d}/image.yaml: spec.initContainers[0].image: Required value" in lines
    assert f"{d}/image.yaml: spec.containers[0].image: Required value" in lines
    assert (
        f'{d}/multi.yaml[1]: spec.restartPolicy: Unsupported value: "Sometimes": '
        'supported values: "Always", "Never", "OnFailure"'
    ) in lines
    # libyaml's wording, the loader used wherever PyYAML has it (as its wheels do).
    assert (
        f"{d}/syntax.yaml: invalid YAML: mapping values are not allowed in this context "
        "(line 5, column 10)"
    ) in lines
    assert (
        f'{d}/types.yaml: spec.containers[0].ports[0].containerPort: Invalid value: "80": '
        "expected an integer, got a string"
    ) in lines
    assert f"{d}/not-a-mapping.yaml: Invalid value: [...]: expected an object, got a list" in lines
    assert any(line.startswith(f"{d}/binary.json: cannot read: ") for line in lines)
    # Nothing about the good file, nor the ignored one.
    assert not any("good.yaml" in line or "README" in line for line in lines)
    assert sum(1 for line in lines if "/image.yaml:" in line) == 3
    assert sum(1 for line in lines if "/types.yaml:" in line) == 9
    assert proc.stderr.strip().startswith(f"{len(lines)} problems in ")


def test_validate_missing_path() -> None:
    proc = run("validate", "/nonexistent/pods")
    assert proc.returncode == 1
    assert proc.stdout.strip() == "/nonexistent/pods: cannot read: no such file or directory"


def test_validate_strict_flags_unknown_fields(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec:\n  containers: [{name: c, image: i, imagePullPolicyy: Never}]\n"
    )
    assert main(["validate", str(path)]) == 0
    proc = run("validate", "--strict", str(path))
    assert proc.returncode == 1
    assert proc.stdout.strip() == (
        f"{path}: spec.containers[0].imagePullPolicyy: unknown field "
        '"spec.containers[0].imagePullPolicyy"'
    )


def test_validate_verbose_lists_pods(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-v", "--node-name", "n1", str(DATA / "good" / "full.yaml")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{DATA / 'good' / 'full.yaml'}: ok: pod web/full uid=")
    assert out[0].endswith(" qos=Burstable")


def test_usage_errors_exit_two(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["validate"]) == 2
    assert main(["no-such-command"]) == 2
    capsys.readouterr()


def test_subcommands_registered_in_one_place() -> None:
    parser = build_parser()
    assert len(SUBCOMMANDS) >= 1
    ns = parser.parse_args(["validate", "x"])
    assert callable(ns.func)


def test_validate_reads_standard_input() -> None:
    text = (DATA / "broken" / "multi.yaml").read_text()
    proc = subprocess.run(
        [sys.executable, "-m", "kubelet_kit.cli", "validate", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        '<stdin>[1]: spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
        '"Always", "Never", "OnFailure"'
    ]


def test_run_takes_the_runtime_request_timeout_as_the_kubelet_does() -> None:
    from kubelet_kit.errors import ConfigurationError
    from kubelet_kit.runner import configuration_from_args

    parser = build_parser()
    config = configuration_from_args(
        parser.parse_args(["run", "--runtime-request-timeout", "4m30s"])
    )
    assert config.seconds("runtime_request_timeout") == 270
    default = configuration_from_args(parser.parse_args(["run"]))
    assert default.seconds("runtime_request_timeout") == 120
    for bad, message in (
        ("soon", 'time: invalid duration "soon"'),
        ("0s", '"0s" must be a positive duration'),
    ):
        with pytest.raises(ConfigurationError, match="--runtime-request-timeout: ") as info:
            configuration_from_args(parser.parse_args(["run", "--runtime-request-timeout", bad]))
        assert message in str(info.value)
