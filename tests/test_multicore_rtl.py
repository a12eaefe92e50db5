# amaranth: UnusedElaboratable=no
"""Four NeuronCores in a ring, in cocotb (Icarus and Verilator): data-parallel partial
products combined by an all-reduce, and the other collectives, bit-exact with RingISS."""

import pytest

from sim import runner

# The ring tests the collectives between cores: shallow PE pipelines keep the four-core model
# small and fast (the default, deep pipeline is what tests/test_core_rtl.py runs).
CONFIG = {"ranks": 4, "n": 3, "sbuf_words": 40, "psum_banks": 2, "psum_words": 8,
          "link_width": 2, "queue_depth": 32, "te_mul_stages": 1, "te_add_stages": 2}


@pytest.mark.parametrize("testcase", ["data_parallel", "hung_collective"])
def test_core_ring(simulator, testcase):
    runner.run("hdl.multicore:CoreRing", CONFIG, "sim.tb_multicore", simulator,
               testcase=testcase, run_tag=testcase)
