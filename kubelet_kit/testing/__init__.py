"""Test doubles and kits for kubelet-kit users' own tests.

Production code never imports this package. Everything here is public: a user
unit-testing a node policy builds on the same fakes the project's tests use.
Every name but the clock's is imported on first use: ``KubeletEnv`` (the whole
agent on fakes) pulls in every subsystem, and the pytest plugin, which pytest
imports in every run of a project that installed kubelet-kit, imports this
package.
"""

from typing import TYPE_CHECKING

from kubelet_kit._lazy import lazy_exports
from kubelet_kit.testing.clock import FakeClock, FakeTimerHandle

if TYPE_CHECKING:
    from kubelet_kit.testing.builders import make_pod
    from kubelet_kit.testing.clock_kit import ClockConformance, check_clock
    from kubelet_kit.testing.cm_kit import ContainerManagerConformance, check_cm
    from kubelet_kit.testing.cni_kit import CNIPluginConformance, check_cni_plugin
    from kubelet_kit.testing.conformance import (
        CheckResult,
        ConformanceFailure,
        ConformanceReport,
        check_runtime,
        conformance_test,
        run_conformance,
    )
    from kubelet_kit.testing.deviceplugin_kit import DevicePluginConformance, check_device_plugin
    from kubelet_kit.testing.env import KubeletEnv, stub_parts
    from kubelet_kit.testing.events_kit import EventRecorderConformance, check_event_recorder
    from kubelet_kit.testing.eviction_kit import EvictionManagerConformance, check_eviction
    from kubelet_kit.testing.fake_cgroups import FakeCgroupTree
    from kubelet_kit.testing.fake_cm import FakeContainerManager
    from kubelet_kit.testing.fake_cni import FakeCNIPlugin
    from kubelet_kit.testing.fake_deviceplugin import FakeDevicePlugin
    from kubelet_kit.testing.fake_events import FakeEventRecorder
    from kubelet_kit.testing.fake_eviction import FakeEvictionManager
    from kubelet_kit.testing.fake_pleg import FakePLEG
    from kubelet_kit.testing.fake_prober import FakeProbeManager
    from kubelet_kit.testing.fake_runtime import (
        Call,
        FakeRuntime,
        InjectedError,
        LogLine,
        format_cri_log_line,
        format_rfc3339_nano,
        normalize_image_ref,
    )
    from kubelet_kit.testing.fake_source import FakePodSource
    from kubelet_kit.testing.fake_stats import FakeStatsProvider, StatsCall
    from kubelet_kit.testing.fake_status import FakeStatusSink
    from kubelet_kit.testing.fake_volume import FakeVolumeManager
    from kubelet_kit.testing.pleg_kit import PLEGConformance, check_pleg
    from kubelet_kit.testing.prober_kit import ProbeManagerConformance, check_prober
    from kubelet_kit.testing.source_kit import PodSourceConformance, check_pod_source
    from kubelet_kit.testing.status_kit import PodStatusSinkConformance, check_pod_status_sink
    from kubelet_kit.testing.volume_kit import VolumeManagerConformance, check_volume

__all__ = [
    "CNIPluginConformance",
    "Call",
    "CheckResult",
    "ClockConformance",
    "ConformanceFailure",
    "ConformanceReport",
    "ContainerManagerConformance",
    "DevicePluginConformance",
    "EventRecorderConformance",
    "EvictionManagerConformance",
    "FakeCNIPlugin",
    "FakeCgroupTree",
    "FakeClock",
    "FakeContainerManager",
    "FakeDevicePlugin",
    "FakeEventRecorder",
    "FakeEvictionManager",
    "FakePLEG",
    "FakePodSource",
    "FakeProbeManager",
    "FakeRuntime",
    "FakeStatsProvider",
    "FakeStatusSink",
    "FakeTimerHandle",
    "FakeVolumeManager",
    "InjectedError",
    "KubeletEnv",
    "LogLine",
    "PLEGConformance",
    "PodSourceConformance",
    "PodStatusSinkConformance",
    "ProbeManagerConformance",
    "StatsCall",
    "VolumeManagerConformance",
    "check_clock",
    "check_cm",
    "check_cni_plugin",
    "check_device_plugin",
    "check_event_recorder",
    "check_eviction",
    "check_pleg",
    "check_pod_source",
    "check_pod_status_sink",
    "check_prober",
    "check_runtime",
    "check_volume",
    "conformance_test",
    "format_cri_log_line",
    "format_rfc3339_nano",
    "make_pod",
    "normalize_image_ref",
    "run_conformance",
    "stub_parts",
]


__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CNIPluginConformance": "kubelet_kit.testing.cni_kit",
        "Call": "kubelet_kit.testing.fake_runtime",
        "CheckResult": "kubelet_kit.testing.conformance",
        "ClockConformance": "kubelet_kit.testing.clock_kit",
        "ConformanceFailure": "kubelet_kit.testing.conformance",
        "ConformanceReport": "kubelet_kit.testing.conformance",
        "ContainerManagerConformance": "kubelet_kit.testing.cm_kit",
        "DevicePluginConformance": "kubelet_kit.testing.deviceplugin_kit",
        "EventRecorderConformance": "kubelet_kit.testing.events_kit",
        "EvictionManagerConformance": "kubelet_kit.testing.eviction_kit",
        "FakeCNIPlugin": "kubelet_kit.testing.fake_cni",
        "FakeCgroupTree": "kubelet_kit.testing.fake_cgroups",
        "FakeContainerManager": "kubelet_kit.testing.fake_cm",
        "FakeDevicePlugin": "kubelet_kit.testing.fake_deviceplugin",
        "FakeEventRecorder": "kubelet_kit.testing.fake_events",
        "FakeEvictionManager": "kubelet_kit.testing.fake_eviction",
        "FakePLEG": "kubelet_kit.testing.fake_pleg",
        "FakePodSource": "kubelet_kit.testing.fake_source",
        "FakeProbeManager": "kubelet_kit.testing.fake_prober",
        "FakeRuntime": "kubelet_kit.testing.fake_runtime",
        "FakeStatsProvider": "kubelet_kit.testing.fake_stats",
        "FakeStatusSink": "kubelet_kit.testing.fake_status",
        "FakeVolumeManager": "kubelet_kit.testing.fake_volume",
        "InjectedError": "kubelet_kit.testing.fake_runtime",
        "KubeletEnv": "kubelet_kit.testing.env",
        "LogLine": "kubelet_kit.testing.fake_runtime",
        "PLEGConformance": "kubelet_kit.testing.pleg_kit",
        "PodSourceConformance": "kubelet_kit.testing.source_kit",
        "PodStatusSinkConformance": "kubelet_kit.testing.status_kit",
        "ProbeManagerConformance": "kubelet_kit.testing.prober_kit",
        "StatsCall": "kubelet_kit.testing.fake_stats",
        "VolumeManagerConformance": "kubelet_kit.testing.volume_kit",
        "check_clock": "kubelet_kit.testing.clock_kit",
        "check_cm": "kubelet_kit.testing.cm_kit",
        "check_cni_plugin": "kubelet_kit.testing.cni_kit",
        "check_device_plugin": "kubelet_kit.testing.deviceplugin_kit",
        "check_event_recorder": "kubelet_kit.testing.events_kit",
        "check_eviction": "kubelet_kit.testing.eviction_kit",
        "check_pleg": "kubelet_kit.testing.pleg_kit",
        "check_pod_source": "kubelet_kit.testing.source_kit",
        "check_pod_status_sink": "kubelet_kit.testing.status_kit",
        "check_prober": "kubelet_kit.testing.prober_kit",
        "check_runtime": "kubelet_kit.testing.conformance",
        "check_volume": "kubelet_kit.testing.volume_kit",
        "conformance_test": "kubelet_kit.testing.conformance",
        "format_cri_log_line": "kubelet_kit.testing.fake_runtime",
        "format_rfc3339_nano": "kubelet_kit.testing.fake_runtime",
        "make_pod": "kubelet_kit.testing.builders",
        "normalize_image_ref": "kubelet_kit.testing.fake_runtime",
        "run_conformance": "kubelet_kit.testing.conformance",
        "stub_parts": "kubelet_kit.testing.env",
    },
    __all__,
)
