# amaranth: UnusedElaboratable=no
"""Four NeuronCores in a ring, in cocotb (Icarus and Verilator): data-parallel partial
products combined by an all-reduce, and the other collectives, bit-exact with RingISS."""

from sim import runner

CONFIG = {"ranks": 4, "n": 3, "sbuf_words": 40, "psum_banks": 2, "psum_words": 8,
          "link_width": 2, "queue_depth": 32}


def test_core_ring(simulator):
    runner.run("hdl.multicore:CoreRing", CONFIG, "sim.tb_multicore", simulator)
