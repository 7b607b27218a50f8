"""Integration tests: real containerd, runc, root."""
