# amaranth: UnusedElaboratable=no
"""Four NeuronCores in a ring, in cocotb (Icarus and Verilator): data-parallel partial
products combined by an all-reduce, and the other collectives, bit-exact with RingISS; a
COLLECTIVE one core never joins ends in LINK_TIMEOUT on the others (the link watchdog), after
which the ring works again."""

import pytest

from sim import runner
from sim.core_demo import RING_CONFIG

# The ring tests the collectives between cores: shallow PE pipelines keep the four-core model
# small and fast (the default, deep pipeline is what tests/test_core_rtl.py runs). The demo's
# ring is the same build.
CONFIG = RING_CONFIG


@pytest.mark.parametrize("testcase", ["data_parallel", "hung_collective"])
def test_core_ring(simulator, testcase):
    runner.run("hdl.multicore:CoreRing", CONFIG, "sim.tb_multicore", simulator,
               testcase=testcase, run_tag=testcase)
