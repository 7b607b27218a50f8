"""Test doubles and kits for kubelet-kit users' own tests.

Production code never imports this package. Everything here is public: a user
unit-testing a node policy builds on the same fakes the project's tests use.
"""

from kubelet_kit.testing.clock import FakeClock, FakeTimerHandle

__all__ = ["FakeClock", "FakeTimerHandle"]
