"""``python -m kubelet_kit.cluster``: see :mod:`kubelet_kit.cluster.run`."""

import sys

from kubelet_kit.cluster.run import main

sys.exit(main())
