"""``/metrics/resource``: the kubelet's resource metrics, computed from a summary.

Names are the kubelet's: ``node_cpu_usage_seconds_total``,
``node_memory_working_set_bytes``, ``pod_cpu_usage_seconds_total``,
``pod_memory_working_set_bytes``, ``container_cpu_usage_seconds_total``,
``container_memory_working_set_bytes`` (pod and container series labelled
``namespace``, ``pod`` and ``container``), and ``resource_scrape_error``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["resource_registry"]


class _SummaryCollector(Collector):
    def __init__(self, summary: Mapping[str, Any]) -> None:
        self.summary = summary

    def collect(self) -> Iterator[Metric]:
        node = self.summary.get("node", {})
        pods = self.summary.get("pods", [])
        node_cpu = CounterMetricFamily(
            "node_cpu_usage_seconds", "Cumulative cpu time consumed by the node in core-seconds"
        )
        node_mem = GaugeMetricFamily(
            "node_memory_working_set_bytes", "Current working set of the node in bytes"
        )
        if "usageCoreNanoSeconds" in node.get("cpu", {}):
            node_cpu.add_metric([], node["cpu"]["usageCoreNanoSeconds"] / 1e9)
        if "workingSetBytes" in node.get("memory", {}):
            node_mem.add_metric([], node["memory"]["workingSetBytes"])
        pod_cpu = CounterMetricFamily(
            "pod_cpu_usage_seconds",
            "Cumulative cpu time consumed by the pod in core-seconds",
            labels=["namespace", "pod"],
        )
        pod_mem = GaugeMetricFamily(
            "pod_memory_working_set_bytes",
            "Current working set of the pod in bytes",
            labels=["namespace", "pod"],
        )
        c_cpu = CounterMetricFamily(
            "container_cpu_usage_seconds",
            "Cumulative cpu time consumed by the container in core-seconds",
            labels=["container", "namespace", "pod"],
        )
        c_mem = GaugeMetricFamily(
            "container_memory_working_set_bytes",
            "Current working set of the container in bytes",
            labels=["container", "namespace", "pod"],
        )
        for pod in pods:
            ref = pod["podRef"]
            key = [ref["namespace"], ref["name"]]
            if "usageCoreNanoSeconds" in pod.get("cpu", {}):
                pod_cpu.add_metric(key, pod["cpu"]["usageCoreNanoSeconds"] / 1e9)
            if "workingSetBytes" in pod.get("memory", {}):
                pod_mem.add_metric(key, pod["memory"]["workingSetBytes"])
            for c in pod.get("containers", []):
                ckey = [c["name"], *key]
                if "usageCoreNanoSeconds" in c.get("cpu", {}):
                    c_cpu.add_metric(ckey, c["cpu"]["usageCoreNanoSeconds"] / 1e9)
                if "workingSetBytes" in c.get("memory", {}):
                    c_mem.add_metric(ckey, c["memory"]["workingSetBytes"])
        scrape = GaugeMetricFamily(
            "resource_scrape_error",
            "1 if there was an error while getting container metrics, 0 otherwise",
        )
        scrape.add_metric([], 0)
        yield from (node_cpu, node_mem, pod_cpu, pod_mem, c_cpu, c_mem, scrape)


def resource_registry(summary: Mapping[str, Any]) -> CollectorRegistry:
    """A registry exposing the resource metrics of one ``/stats/summary`` document."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_SummaryCollector(summary))
    return registry
