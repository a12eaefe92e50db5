# amaranth: UnusedElaboratable=no
"""The command queue in cocotb, Icarus and Verilator, driven by cocotbext-axi's AxiLiteMaster."""

import pytest

from sim import runner


@pytest.mark.parametrize("params", [{"depth": 4}, {"depth": 3, "perf_counters": 2}],
                         ids=["d4", "d3-p2"])
def test_command_queue(simulator, params):
    runner.run("hdl.cmdqueue:CommandQueue", params, "sim.tb.cmdqueue", simulator)


@pytest.mark.parametrize("kwargs, param", [({"depth": 0}, "depth"),
                                           ({"perf_counters": 17}, "perf_counters")])
def test_bad_parameters(kwargs, param):
    from hdl.cmdqueue import CommandQueue

    with pytest.raises(ValueError, match=param):
        CommandQueue(**kwargs)
