# amaranth: UnusedElaboratable=no
"""Four NeuronCores in a ring, in cocotb (Icarus and Verilator): data-parallel partial
products combined by an all-reduce, and the other collectives, bit-exact with RingISS; a
COLLECTIVE one core never joins ends in LINK_TIMEOUT on the others (the link watchdog), after
which the ring works again. The same four cores as a 2 x 2 torus: the torus all-reduce and
all-to-all and sub-ring collectives along either dimension, bit-exact with RingISS.

The ring is ``hdl.sim_top.RingWithDram``: each core's DRAM is RTL, stalled at random, loaded
and read through its backdoor (the subject here is the collectives, not the AXI4 bus, which
``tests/hdl/test_core_rtl.py`` tests with cocotbext-axi's models)."""

import pytest

from hdl.sim_top import RingWithDram
from sim import runner
from sim.cli.demo import RING_CONFIG

# The ring tests the collectives between cores: shallow PE pipelines keep the four-core model
# small and fast (the default, deep pipeline is what tests/hdl/test_core_rtl.py runs). The demo's
# ring is the same build.
CONFIG = RING_CONFIG


@pytest.mark.parametrize("testcase", ["data_parallel", "hung_collective"])
def test_core_ring(simulator, testcase):
    runner.run("hdl.sim_top:RingWithDram", CONFIG, "sim.tb.multicore", simulator,
               testcase=testcase, run_tag=testcase,
               public=RingWithDram.public_for(**CONFIG))


def test_core_torus(simulator):
    """A 2 x 2 torus of whole cores (``torus_rows`` 2): every memory against RingISS."""
    config = {**CONFIG, "torus_rows": 2}
    runner.run("hdl.sim_top:RingWithDram", config, "sim.tb.multicore", simulator,
               testcase="torus_collectives", run_tag="torus",
               public=RingWithDram.public_for(**config))
