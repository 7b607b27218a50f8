"""Test doubles and kits for kubelet-kit users' own tests.

Production code never imports this package. Everything here is public: a user
unit-testing a node policy builds on the same fakes the project's tests use.
``KubeletEnv`` (the whole agent on fakes) is imported on first use, since it pulls
in every subsystem.
"""

from typing import TYPE_CHECKING

from kubelet_kit._lazy import lazy_exports
from kubelet_kit.testing.clock import FakeClock, FakeTimerHandle
from kubelet_kit.testing.conformance import (
    CheckResult,
    ConformanceFailure,
    ConformanceReport,
    check_runtime,
    conformance_test,
    run_conformance,
)
from kubelet_kit.testing.fake_cgroups import FakeCgroupTree
from kubelet_kit.testing.fake_runtime import (
    Call,
    FakeRuntime,
    InjectedError,
    LogLine,
    format_cri_log_line,
    format_rfc3339_nano,
    normalize_image_ref,
)
from kubelet_kit.testing.fake_stats import FakeStatsProvider, StatsCall

if TYPE_CHECKING:
    from kubelet_kit.testing.env import KubeletEnv, stub_parts

__all__ = [
    "Call",
    "CheckResult",
    "ConformanceFailure",
    "ConformanceReport",
    "FakeCgroupTree",
    "FakeClock",
    "FakeRuntime",
    "FakeStatsProvider",
    "FakeTimerHandle",
    "InjectedError",
    "KubeletEnv",
    "LogLine",
    "StatsCall",
    "check_runtime",
    "conformance_test",
    "format_cri_log_line",
    "format_rfc3339_nano",
    "normalize_image_ref",
    "run_conformance",
    "stub_parts",
]


__getattr__, __dir__ = lazy_exports(
    __name__,
    {"KubeletEnv": "kubelet_kit.testing.env", "stub_parts": "kubelet_kit.testing.env"},
    __all__,
)
