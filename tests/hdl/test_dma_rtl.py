# amaranth: UnusedElaboratable=no
"""The DMA engine in cocotb, Icarus and Verilator, with cocotbext-axi's AxiRam as DRAM, at data
widths of 32, 64 and 256 bits (one with bursts of up to 256 beats, longer than a page): every
SBUF word and DRAM byte equal to the golden ISS after every command, and one beat per cycle
(``full_rate``)."""

import pytest

from sim import runner

CONFIGS = {"n4-w64": {"n": 4, "words": 64}, "n3-w40-b4": {"n": 3, "words": 40, "max_burst": 4},
           "n3-w40-b4-d64": {"n": 3, "words": 40, "max_burst": 4, "data_width": 64},
           "n4-w64-d256": {"n": 4, "words": 64, "data_width": 256},
           # a page (128 beats) <= max_burst: a burst cut by the boundary can be a whole page (in
           # make test: the only config that reaches it)
           "n1-w2080-d256-b256": {"n": 1, "words": 2080, "data_width": 256, "max_burst": 256}}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_dma(simulator, config):
    runner.run("hdl.dma:DmaEngine", CONFIGS[config], "sim.tb.dma", simulator, run_tag=config)


@pytest.mark.parametrize("kwargs, param", [({"n": 0, "words": 4}, "n"),
                                           ({"n": 2, "words": 0}, "words"),
                                           ({"n": 2, "words": 4, "max_burst": 300}, "max_burst"),
                                           ({"n": 2, "words": 4, "data_width": 48},
                                            "data_width")])
def test_bad_parameters(kwargs, param):
    from hdl.dma import DmaEngine

    with pytest.raises(ValueError, match=param):
        DmaEngine(**kwargs)
