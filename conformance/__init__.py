"""Test tooling outside the library: the upstream Kubernetes conformance suite's node
set, run against a one-node cluster whose node is kubelet-kit (or, as the control,
the real kubelet 1.20.2). ``scripts/conformance`` is the command; ``docs/conformance.md``
records the results."""
