# amaranth: UnusedElaboratable=no
"""The NeuronCore top in cocotb, Icarus and Verilator: programs through the host driver
(AXI4-Lite registers, AxiRam DRAM), every memory bit-exact with the golden ISS afterwards."""

import pytest

from sim import runner

CONFIG = {"n": 4, "sbuf_words": 64, "psum_banks": 4, "psum_words": 16, "queue_depth": 64}
TESTS = ["gemm_tiled", "dense_sr", "mlp_forward", "random_commands", "hazards", "errors",
         "dram_faults"]


@pytest.mark.parametrize("testcase", TESTS)
def test_core_program(simulator, testcase):
    runner.run("hdl.core:NeuronCore", CONFIG, "sim.tb_core", simulator, testcase=testcase,
               run_tag=testcase)


@pytest.mark.parametrize("kwargs, param", [({"n": 0}, "n"), ({"sbuf_words": 0}, "sbuf_words"),
                                           ({"psum_banks": 17}, "psum_banks"),
                                           ({"dram_bytes": 0}, "dram_bytes")])
def test_bad_parameters(kwargs, param):
    from hdl.core import NeuronCore

    with pytest.raises(ValueError, match=param):
        NeuronCore(**kwargs)
