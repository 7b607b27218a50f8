"""Tests that boot a throwaway VM (``scripts/test-vm``), for cgroup layouts this
machine does not have. They run only with ``KUBELET_KIT_VM=1``; see docs/vm-tests.md."""
