"""The CRI (runtime.v1): a client Runtime over gRPC and a server for any Runtime.

* :class:`CRIRuntime` implements :class:`kubelet_kit.container.Runtime` against any
  CRI runtime (containerd, CRI-O) on a unix socket or TCP endpoint.
* :class:`CRIServer` serves any Runtime (a fake, host processes, your own) over
  the same protocol, so crictl, a kubelet or a CRIRuntime can drive it.

The protocol is described in ``api.proto`` (package ``runtime.v1``, wire-compatible
with upstream cri-api); ``kubelet_kit.cri.gen`` holds the generated modules.
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
