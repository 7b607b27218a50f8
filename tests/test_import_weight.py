"""What a light import pulls in: heavy dependencies and other subsystems stay out.

Each check runs in a fresh interpreter and reads ``sys.modules`` after the import;
nothing here is timed, so the checks hold on a loaded machine. The figures in ms
are ``benchmarks/startup.py``'s job. A module listed here as kept out fails its
check as soon as someone imports it eagerly on the path of that import.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Third-party modules that cost tens of ms each and that a light import must not load.
HEAVY = ("grpc", "google.protobuf", "aiohttp", "prometheus_client", "yaml")

#: Subsystems and agent-core packages that ``kubelet_kit.pleg`` must not reach
#: (rule 1 of DESIGN.md); ``api``, ``container`` and ``clock`` are its allowed base.
NOT_FROM_PLEG = (
    "kubelet_kit.cri",
    "kubelet_kit.server",
    "kubelet_kit.cluster",
    "kubelet_kit.node",
    "kubelet_kit.agent",
    "kubelet_kit.cm",
    "kubelet_kit.volume",
    "kubelet_kit.prober",
    "kubelet_kit.eviction",
    "kubelet_kit.status",
    "kubelet_kit.runtimes",
    "kubelet_kit.network",
    "kubelet_kit.cni",
    "kubelet_kit.deviceplugin",
    "kubelet_kit.config",
    "kubelet_kit.streams",
    "kubelet_kit.testing",
    "kubelet_kit.metrics",
    "kubelet_kit.kubelet",
    "kubelet_kit.cli",
    "kubelet_kit.runner",
)


def loaded_after(code: str) -> set[str]:
    """The names in ``sys.modules`` of a fresh interpreter once it has run ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    # The last line is ours: anything the code printed (e.g. --version) comes before it.
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def loaded_of(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` are in ``modules``, as themselves or through a submodule."""
    return sorted(n for n in names if n in modules or any(m.startswith(n + ".") for m in modules))


def test_package_import_loads_nothing_heavy() -> None:
    modules = loaded_after("import kubelet_kit")
    assert loaded_of(modules, HEAVY) == []
    # The package's names are lazy re-exports: no subsystem is imported either.
    assert sorted(m for m in modules if m.startswith("kubelet_kit.")) == [
        "kubelet_kit._lazy",
        "kubelet_kit._version",
    ]


def test_pleg_import_loads_nothing_heavy_and_no_other_subsystem() -> None:
    modules = loaded_after("import kubelet_kit.pleg")
    assert loaded_of(modules, HEAVY) == []
    assert loaded_of(modules, NOT_FROM_PLEG) == []
    # api's __init__ is lazy: the pleg needs api.duration, not YAML loading or validation.
    assert loaded_of(modules, ("kubelet_kit.api.loading", "kubelet_kit.api.validation")) == []


def test_api_import_is_lazy() -> None:
    modules = loaded_after("import kubelet_kit.api")
    assert loaded_of(modules, HEAVY) == []
    assert sorted(m for m in modules if m.startswith("kubelet_kit.api.")) == []


def test_cli_version_loads_nothing_heavy() -> None:
    # Only the subcommand named is registered: --version builds no subcommand at
    # all, so neither the CRI client (grpc) nor the agent is imported.
    modules = loaded_after("from kubelet_kit.cli import main\nassert main(['--version']) == 0")
    assert loaded_of(modules, HEAVY) == []
    assert sorted(m for m in modules if m.startswith("kubelet_kit.")) == [
        "kubelet_kit._lazy",
        "kubelet_kit._version",
        "kubelet_kit.cli",
    ]


def test_cli_validate_loads_no_grpc_aiohttp_or_agent() -> None:
    modules = loaded_after(
        "from kubelet_kit.cli import main\nassert main(['validate', 'examples/pods']) == 0"
    )
    assert loaded_of(modules, ("grpc", "google.protobuf", "aiohttp", "prometheus_client")) == []
    assert loaded_of(modules, ("kubelet_kit.runner", "kubelet_kit.cri", "kubelet_kit.agent")) == []


def test_composer_import_loads_no_grpc_aiohttp_or_prometheus() -> None:
    # The composer and its wiring root load the agent's modules; what only a running
    # agent uses comes with it: prometheus_client with the first metric, aiohttp with
    # an HTTP probe, hook or manifest URL, grpc with a gRPC probe or a CRI runtime.
    for code in ("import kubelet_kit.kubelet", "import kubelet_kit.agent"):
        modules = loaded_after(code)
        assert (
            loaded_of(modules, ("grpc", "google.protobuf", "aiohttp", "prometheus_client")) == []
        ), code
        assert (
            loaded_of(
                modules,
                (
                    "kubelet_kit.cri",
                    "kubelet_kit.server",
                    "kubelet_kit.cluster",
                    "kubelet_kit.runner",
                ),
            )
            == []
        ), code


def test_prober_loads_each_handlers_dependency_with_the_handler() -> None:
    modules = loaded_after("from kubelet_kit.prober import Prober, ReferenceProbeManager")
    assert loaded_of(modules, ("grpc", "google.protobuf", "aiohttp")) == []
    modules = loaded_after("from kubelet_kit.prober import http_probe")
    assert loaded_of(modules, ("aiohttp",)) == ["aiohttp"]
    assert loaded_of(modules, ("grpc", "google.protobuf")) == []
    modules = loaded_after("from kubelet_kit.prober.probers import grpc_probe")
    assert loaded_of(modules, ("grpc",)) == ["grpc"]
    assert loaded_of(modules, ("aiohttp",)) == []


def test_an_agent_made_from_the_composer_has_its_metrics() -> None:
    # The lazy imports are still taken when the agent is built.
    modules = loaded_after(
        "from kubelet_kit.kubelet import Kubelet\n"
        "from kubelet_kit.testing import FakeRuntime\n"
        "k = Kubelet(runtime=FakeRuntime(), root_dir='/nonexistent-root')\n"
        "assert k.registry.get_sample_value('kubelet_node_name', {'node': k.node_name}) == 1"
    )
    assert "prometheus_client" in modules


def test_lazy_names_resolve() -> None:
    # Every public name is importable as before, and __all__ is unchanged in content.
    import kubelet_kit.api as api
    import kubelet_kit.pleg as pleg

    for name in api.__all__:
        assert getattr(api, name) is not None, name
        assert name in dir(api)
    from kubelet_kit.api.loading import load_pod
    from kubelet_kit.pleg.metrics import PLEGMetrics

    assert api.load_pod is load_pod
    assert pleg.PLEGMetrics is PLEGMetrics
    with pytest.raises(AttributeError):
        api.no_such_name  # noqa: B018
    with pytest.raises(AttributeError):
        pleg.no_such_name  # noqa: B018


def test_conformance_kit_loads_no_stream_client_or_grpc() -> None:
    # The stream checks import the streams client (and aiohttp) when they run
    # against a runtime that hands out stream URLs, not when the kit is imported.
    modules = loaded_after("import kubelet_kit.testing.conformance")
    assert loaded_of(modules, ("grpc", "google.protobuf", "aiohttp")) == []
    assert loaded_of(modules, ("kubelet_kit.streams", "kubelet_kit.cri")) == []


def test_pytest_plugin_import_loads_no_fake_and_nothing_heavy() -> None:
    # pytest imports the plugin in every run of a project that installed kubelet-kit,
    # most of which use none of its fixtures: each fixture imports its fake itself.
    modules = loaded_after("import kubelet_kit.testing.pytest_plugin")
    assert loaded_of(modules, HEAVY) == []
    assert sorted(m for m in modules if m.startswith("kubelet_kit.")) == [
        "kubelet_kit._lazy",
        "kubelet_kit._version",
        "kubelet_kit.testing",
        "kubelet_kit.testing.clock",
        "kubelet_kit.testing.pytest_plugin",
    ]
