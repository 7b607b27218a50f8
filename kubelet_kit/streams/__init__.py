"""Streaming protocols (exec, attach, port-forward): SPDY/3.1 and WebSocket.

============== ================================================================
``spdy``       a SPDY/3.1 session (either role), as Go's spdystream speaks it
``upgrade``    taking over an aiohttp request after ``101``, proxying an upgrade
``websocket``  the ``channel.k8s.io`` channel protocol (v4, v5, base64)
``remotecommand``  exec and attach sessions, server side, on either protocol
``portforward``    port-forward sessions, server side, on either protocol
``status``     the Status an exec ends with (exit codes)
``server``     a CRI runtime's streaming server: one-time URLs
``client``     exec, attach and port-forward against any node API
``cli``        ``kubelet-kit exec``
============== ================================================================

The runtime side of a session is :mod:`kubelet_kit.container.streams`
(``StreamingRuntime``, ``StreamURLRuntime``); the node API's endpoints are
:mod:`kubelet_kit.server.streams`. This package imports nothing of the agent.
"""
