"""Write CNI plugins in Python, and the CNI spec's values (results, errors).

A plugin subclasses :class:`PluginBase` (or fills in the :class:`Plugin`
protocol) and calls :func:`plugin_main`; see ``examples/cni_plugin.py``.
The caller side, which runs plugins for a sandbox, is :mod:`kubelet_kit.network`.
"""

from __future__ import annotations

from kubelet_kit.cni.plugin import CmdArgs, Plugin, PluginBase, plugin_main, run_plugin
from kubelet_kit.cni.types import (
    DNS,
    ERR_DECODING_FAILURE,
    ERR_INCOMPATIBLE_CNI_VERSION,
    ERR_INTERNAL,
    ERR_INVALID_ENVIRONMENT_VARIABLES,
    ERR_INVALID_NETNS,
    ERR_INVALID_NETWORK_CONFIG,
    ERR_IO_FAILURE,
    ERR_LIMITED_CONNECTIVITY,
    ERR_PLUGIN_NOT_AVAILABLE,
    ERR_TRY_AGAIN_LATER,
    ERR_UNKNOWN,
    ERR_UNKNOWN_CONTAINER,
    ERR_UNSUPPORTED_FIELD,
    SPEC_VERSIONS,
    CNIError,
    Interface,
    IPConfig,
    Result,
    Route,
    format_cni_args,
    parse_cni_args,
    validate_container_id,
    validate_interface_name,
    validate_network_name,
    version_tuple,
)

__all__ = [
    "DNS",
    "ERR_DECODING_FAILURE",
    "ERR_INCOMPATIBLE_CNI_VERSION",
    "ERR_INTERNAL",
    "ERR_INVALID_ENVIRONMENT_VARIABLES",
    "ERR_INVALID_NETNS",
    "ERR_INVALID_NETWORK_CONFIG",
    "ERR_IO_FAILURE",
    "ERR_LIMITED_CONNECTIVITY",
    "ERR_PLUGIN_NOT_AVAILABLE",
    "ERR_TRY_AGAIN_LATER",
    "ERR_UNKNOWN",
    "ERR_UNKNOWN_CONTAINER",
    "ERR_UNSUPPORTED_FIELD",
    "SPEC_VERSIONS",
    "CNIError",
    "CmdArgs",
    "IPConfig",
    "Interface",
    "Plugin",
    "PluginBase",
    "Result",
    "Route",
    "format_cni_args",
    "parse_cni_args",
    "plugin_main",
    "run_plugin",
    "validate_container_id",
    "validate_interface_name",
    "validate_network_name",
    "version_tuple",
]
