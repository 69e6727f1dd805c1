"""Which integration tests share one pytest process when the suite runs in parallel.

``make test`` runs pytest-xdist with ``--dist loadgroup``: the tests of one
``xdist_group`` run one after another in one process; every other test goes, one at a
time, to whichever process is free. :data:`heavy` marks the longest end-to-end runs
(the demo's days, the chaos soak, torchft jobs of several workers, the transformer
planner): in one group they never compete with each other for the machine's two
cores, and tests/conftest.py puts them first, so their chain starts at once while the
other processes share the rest of the suite.
"""

import pytest

HEAVY_GROUP = "heavy"
heavy = pytest.mark.xdist_group(HEAVY_GROUP)
