"""The CRI (runtime.v1; v1alpha2 served too): a gRPC client Runtime and a server for any Runtime.

* :class:`CRIRuntime` implements :class:`kubelet_kit.container.Runtime` against any
  CRI runtime (containerd, CRI-O) on a unix socket or TCP endpoint.
* :class:`CRIServer` serves any Runtime (a fake, host processes, your own) over
  the same protocol, runtime.v1 and the older runtime.v1alpha2 on one socket, so
  crictl, a kubelet (1.20 and later) or a CRIRuntime can drive it.

``kubelet-kit cri-server`` (:func:`kubelet_kit.cri_server.serve_cri`) serves a
runtime named ``host``, ``fake`` or ``MODULE:NAME`` with a CRIServer until stopped.

The protocol is described in ``api.proto`` (package ``runtime.v1``, wire-compatible
with upstream cri-api) and ``api_v1alpha2.proto`` (the v1alpha2 services over the
same messages); ``kubelet_kit.cri.gen`` holds the generated modules.
"""

from kubelet_kit.cri.remote import DEFAULT_ENDPOINT, CRIRuntime, grpc_target
from kubelet_kit.cri.server import SERVED_RPCS, UNSERVED_RPCS, CRIServer

__all__ = [
    "DEFAULT_ENDPOINT",
    "SERVED_RPCS",
    "UNSERVED_RPCS",
    "CRIRuntime",
    "CRIServer",
    "grpc_target",
]
