# amaranth: UnusedElaboratable=no
"""The ring collectives in cocotb, Icarus and Verilator: every rank bit-exact against golden."""

import pytest

from sim import runner

RING = "hdl.ring:CollectiveRing"
# Every ring size the issue names, every link width, shallow and deep adders.
CONFIGS = {
    "p2-w1": ({"ranks": 2, "link_width": 1, "depth": 512, "max_latency": 8}, "12"),
    "p3-w2": ({"ranks": 3, "link_width": 2, "depth": 256, "max_latency": 8,
               "add_stages": 0}, "12"),
    "p4-w4": ({"ranks": 4, "link_width": 4, "depth": 128, "max_latency": 16,
               "add_stages": 3}, "12"),
    "p8-w1": ({"ranks": 8, "link_width": 1, "depth": 1024, "max_latency": 8}, "8"),
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_ring(simulator, config):
    params, count = CONFIGS[config]
    runner.run(RING, params, "sim.tb_collectives", simulator,
               testcase="random_collectives,illegal_commands", run_tag=config,
               extra_env={"NCLITE_COLLECTIVES": count})
