"""A device plugin offering made-up "widgets" as the resource example.com/widget.

Run it beside an agent that has a device manager (or beside a kubelet)::

    python examples/device_plugin.py --count 4 \
        --plugins-dir /var/lib/kubelet/device-plugins

A pod then asks for widgets like for any extended resource::

    resources:
      limits:
        example.com/widget: 1

and its container gets ``WIDGET_IDS`` (the widgets it holds) in its environment,
a ``/run/widgets/<id>`` mount per widget when ``--state-dir`` is given, and an
``example.com/widget-ids`` annotation. ``kill -USR1 <pid>`` flips the health of
the first widget, to watch allocatable change.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kubelet_kit.deviceplugin import (
    DEVICE_PLUGIN_PATH,
    HEALTHY,
    UNHEALTHY,
    ContainerAllocation,
    Device,
    DevicePlugin,
    Mount,
)

RESOURCE = "example.com/widget"


class WidgetPlugin(DevicePlugin):
    """``count`` widgets named ``widget-0``, ``widget-1``...

    Args:
        count: How many widgets to offer.
        state_dir: When set, a directory per widget is made there and mounted
            read-only at ``/run/widgets/<id>`` in the containers holding it.
        **options: Passed to :class:`~kubelet_kit.deviceplugin.DevicePlugin`
            (``plugins_dir``, ``clock``, ``watch_interval``...).
    """

    def __init__(self, count: int = 2, *, state_dir: str | None = None, **options: Any) -> None:
        super().__init__(RESOURCE, **options)
        self.count = count
        self.state_dir = Path(state_dir) if state_dir else None
        #: Every allocation asked for, in order (for demonstrations and tests).
        self.allocated: list[tuple[str, ...]] = []

    async def list_devices(self) -> Sequence[Device]:
        """The widgets, all healthy at first."""
        return [Device(f"widget-{i}") for i in range(self.count)]

    async def allocate(self, device_ids: Sequence[str]) -> ContainerAllocation:
        """Tell the container which widgets it holds."""
        self.allocated.append(tuple(device_ids))
        mounts: tuple[Mount, ...] = ()
        if self.state_dir is not None:
            for dev in device_ids:
                (self.state_dir / dev).mkdir(parents=True, exist_ok=True)
            mounts = tuple(
                Mount(f"/run/widgets/{d}", str(self.state_dir / d), read_only=True)
                for d in device_ids
            )
        ids = ",".join(device_ids)
        return ContainerAllocation(
            envs={"WIDGET_IDS": ids}, mounts=mounts, annotations={"example.com/widget-ids": ids}
        )

    def flip_first(self) -> None:
        """Toggle the health of the first widget."""
        first = self.devices[0]
        self.set_health(first.id, UNHEALTHY if first.health == HEALTHY else HEALTHY)


async def main(argv: Sequence[str] | None = None) -> None:
    """Run the plugin until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(description="device plugin offering made-up widgets")
    parser.add_argument("--count", type=int, default=2, help="widgets to offer")
    parser.add_argument(
        "--plugins-dir", default=DEVICE_PLUGIN_PATH, help="the kubelet's device plugins directory"
    )
    parser.add_argument("--state-dir", help="make and mount a directory per widget")
    opts = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    plugin = WidgetPlugin(opts.count, state_dir=opts.state_dir, plugins_dir=opts.plugins_dir)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, plugin.stop)
    loop.add_signal_handler(signal.SIGUSR1, plugin.flip_first)
    await plugin.run()


if __name__ == "__main__":
    asyncio.run(main())
