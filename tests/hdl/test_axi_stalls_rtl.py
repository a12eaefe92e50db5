# amaranth: UnusedElaboratable=no
"""The DRAM stalls of the simulation tops (``hdl.sim_top.AxiStalls``) in cocotb, Icarus and
Verilator, between cocotbext-axi's master and RAM (``sim/tb/axi_stalls.py``)."""

from sim import runner


def test_axi_stalls(simulator):
    runner.run("hdl.sim_top:AxiStalls", {"addr_width": 12}, "sim.tb.axi_stalls", simulator,
               testcase="random_traffic,pass_through")
