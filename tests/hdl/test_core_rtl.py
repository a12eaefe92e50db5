# amaranth: UnusedElaboratable=no
"""The NeuronCore top in cocotb, Icarus and Verilator: programs through the host driver
(AXI4-Lite registers), every memory bit-exact with the golden ISS afterwards.

The programs whose subject is the computation run on ``hdl.sim_top.CoreWithDram``: DRAM is the
RTL memory, stalled at random by ``AxiStalls``, loaded and read through its VPI backdoor (no
Python per AXI4 beat). Those whose subject is the bus, its errors, or the sequencer's order
under that bus's timing run on ``hdl.core.NeuronCore`` with cocotbext-axi's ``AxiRam`` (random
pauses, SLVERR / DECERR), as does one GEMM program: ``dram_faults`` runs its GEMM to the end on
a pausing ``AxiRam`` after each fault."""

import pytest

from hdl.sim_top import CoreWithDram, core_memories
from sim import runner
from sim.cli.demo import CORE_CONFIG

CONFIG = {"n": 4, "sbuf_words": 64, "psum_banks": 4, "psum_words": 16, "queue_depth": 64}
#: The programs on the RTL DRAM run on the build of ``nclite demo``: a 64-bit AXI4 bus (the
#: DMA's unit tests cover 32 to 256 bits; the programs on AxiRam, 32) and an SBUF that holds
#: the GEMMs' B tiles and stationary blocks (on AxiRam, 64 words: tile by tile).
RTL_DRAM_CONFIG = CORE_CONFIG
#: On the RTL DRAM (hdl.sim_top.CoreWithDram).
RTL_DRAM_TESTS = ["gemm_tiled", "dense_sr", "mlp_forward", "vector_commands", "played_pushes"]
#: On cocotbext-axi's AxiRam (hdl.core.NeuronCore).
AXIRAM_TESTS = ["random_commands", "hazards", "errors", "dram_faults",
                "debug_reads_while_running"]
TESTS = RTL_DRAM_TESTS + AXIRAM_TESTS


@pytest.mark.parametrize("testcase", TESTS)
def test_core_program(simulator, testcase):
    if testcase in RTL_DRAM_TESTS:
        runner.run("hdl.sim_top:CoreWithDram", RTL_DRAM_CONFIG, "sim.tb.core", simulator,
                   testcase=testcase, run_tag=testcase,
                   public=CoreWithDram.public_for(**RTL_DRAM_CONFIG))
    else:
        runner.run("hdl.core:NeuronCore", CONFIG, "sim.tb.core", simulator, testcase=testcase,
                   run_tag=testcase, public=core_memories(**CONFIG))


#: A sparse core (every pattern) on the RTL DRAM: the demo's build with the sparse mode.
SPARSE_CONFIG = {**RTL_DRAM_CONFIG, "sparse": True}


def test_sparse_core_program(simulator):
    runner.run("hdl.sim_top:CoreWithDram", SPARSE_CONFIG, "sim.tb.core", simulator,
               testcase="sparse_matmul", run_tag="sparse_matmul",
               public=CoreWithDram.public_for(**SPARSE_CONFIG))


@pytest.mark.slow
def test_vector_commands_wider_than_the_read_window(simulator):
    """N = 8 on a 32-bit bus: the SBUF's read window holds 4 words, so a transpose of more than
    4 columns takes several windows a row (the N = 4 builds above never do); PSUM banks wider
    than the SBUF, so a reduction of a bank counts more columns than SBUF words."""
    params = {**CONFIG, "n": 8, "sbuf_words": 160, "psum_words": 300}
    runner.run("hdl.core:NeuronCore", params, "sim.tb.core", simulator,
               testcase="vector_commands", run_tag="vector_n8", public=core_memories(**params))


@pytest.mark.parametrize("kwargs, param", [({"n": 0}, "n"), ({"sbuf_words": 0}, "sbuf_words"),
                                           ({"psum_banks": 17}, "psum_banks"),
                                           ({"dram_bytes": 0}, "dram_bytes")])
def test_bad_parameters(kwargs, param):
    from hdl.core import NeuronCore

    with pytest.raises(ValueError, match=param):
        NeuronCore(**kwargs)


def test_sparse_must_be_a_bool():
    from hdl.core import NeuronCore

    with pytest.raises(TypeError, match="sparse must be a bool, not 1"):
        NeuronCore(sparse=1)


@pytest.mark.parametrize("cls, kwargs, param", [
    ("CoreWithDram", {"dram_bytes": 3 << 12}, "dram_bytes"),
    ("CoreWithDram", {"ranks": 2}, "ranks"),
    ("RingWithDram", {"ranks": 2, "dram_bytes": 3 << 12}, "dram_bytes"),
    ("AxiStalls", {"addr_width": 0}, "addr_width")])
def test_sim_top_bad_parameters(cls, kwargs, param):
    import hdl.sim_top

    with pytest.raises(ValueError, match=param):
        getattr(hdl.sim_top, cls)(**kwargs)
