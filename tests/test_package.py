"""The package's shape: exports, subsystem independence, the protocols."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest

import kubelet_kit

SUBSYSTEMS = ["cri", "pleg", "cm", "volume", "prober", "eviction", "status"]
PUBLIC_PACKAGES = [
    "kubelet_kit.api",
    "kubelet_kit.container",
    "kubelet_kit.testing",
    "kubelet_kit.config",
    *(f"kubelet_kit.{s}" for s in SUBSYSTEMS),
]


def test_top_level_exports_the_composer_and_the_six_interfaces() -> None:
    for name in kubelet_kit.__all__:
        assert getattr(kubelet_kit, name) is not None
    from kubelet_kit.cm import ContainerManager
    from kubelet_kit.container import Runtime
    from kubelet_kit.kubelet import Kubelet

    assert kubelet_kit.Kubelet is Kubelet
    assert kubelet_kit.Runtime is Runtime
    assert kubelet_kit.ContainerManager is ContainerManager
    with pytest.raises(AttributeError):
        kubelet_kit.NoSuchThing  # noqa: B018


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_all_lists_only_real_names(package: str) -> None:
    module = importlib.import_module(package)
    exported = getattr(module, "__all__", None)
    assert exported, f"{package} has no __all__"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{package}.__all__ names missing attributes: {missing}"


@pytest.mark.parametrize("subsystem", SUBSYSTEMS)
def test_a_subsystem_imports_no_other(subsystem: str) -> None:
    code = (
        "import importlib, json, sys\n"
        f"importlib.import_module('kubelet_kit.{subsystem}')\n"
        "print(json.dumps(sorted({n.split('.')[1] for n in sys.modules\n"
        "  if n.startswith('kubelet_kit.') and n.count('.') >= 1})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    others = (loaded & set(SUBSYSTEMS)) - {subsystem}
    assert not others, f"kubelet_kit.{subsystem} pulled in {sorted(others)}"
    assert not loaded & {"kubelet", "podworkers", "podsync", "testing", "runtimes"}


def test_importing_the_package_is_light() -> None:
    code = (
        "import kubelet_kit, sys\n"
        "print(sorted(m for m in sys.modules if m.startswith('kubelet_kit')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['kubelet_kit', 'kubelet_kit._lazy', 'kubelet_kit._version']"


def test_py_typed_is_shipped() -> None:
    from importlib.resources import files

    assert files("kubelet_kit").joinpath("py.typed").is_file()


def test_a_fresh_virtualenv_installs_the_checkout_and_imports_it(tmp_path: object) -> None:
    """``pip install <checkout>`` pulls in everything needed at run time."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    venv = Path(str(tmp_path)) / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            str(root),
        ],
        capture_output=True,
        text=True,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    code = (
        "import kubelet_kit.api, kubelet_kit.container, kubelet_kit.testing, kubelet_kit.cri\n"
        "from kubelet_kit import Kubelet\n"
        "print(kubelet_kit.__version__)\n"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, cwd=str(venv)
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == kubelet_kit.__version__
    cli = subprocess.run(
        [str(venv / "bin" / "kubelet-kit"), "--version"], capture_output=True, text=True
    )
    assert cli.stdout.strip() == f"kubelet-kit {kubelet_kit.__version__}"


def test_grpc_fork_handlers_are_off_unless_the_process_chose() -> None:
    # gRPC's fork handlers crash some children forked beside its threads (the
    # host runtime's execs behind the CRI server died of SIGSEGV); importing the
    # package turns them off, and leaves a value the process set alone.
    code = "import os, kubelet_kit; print(os.environ['GRPC_ENABLE_FORK_SUPPORT'])"
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    for given, want in ((None, "false"), ("true", "true")):
        run_env = env if given is None else {**env, "GRPC_ENABLE_FORK_SUPPORT": given}
        out = subprocess.run(
            [sys.executable, "-c", code], env=run_env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == want
