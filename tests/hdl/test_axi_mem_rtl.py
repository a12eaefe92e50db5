# amaranth: UnusedElaboratable=no
"""The board's block-RAM memory (AXI4 + AXI4-Lite) and the AXI4-Lite address decoder in cocotb,
Icarus and Verilator, driven by cocotbext-axi (``sim/tb/axi_mem.py``)."""

import pytest

from sim import runner

MEM = "hdl.axi_mem:AxiMemory"
MEM_TESTS = "random_traffic,raw_bursts,throughput"
#: 2 KiB behind a 16-bit address: bursts straddle the end and addresses beyond it abound.
MEM_PARAMS = {"size_bytes": 2048, "addr_width": 16}


def test_axi_memory(simulator):
    runner.run(MEM, MEM_PARAMS, "sim.tb.axi_mem", simulator, testcase=MEM_TESTS)


@pytest.mark.parametrize("data_width", [64, 256])
def test_axi_memory_wide(simulator, data_width):
    runner.run(MEM, {"size_bytes": 1024, "addr_width": 10, "data_width": data_width},
               "sim.tb.axi_mem", simulator, testcase="wide_words", run_tag=f"d{data_width}")


def test_axil_decoder(simulator):
    runner.run("sim.tb.axi_mem:DecoderBench", {}, "sim.tb.axi_mem", simulator,
               testcase="decoder_routing")


@pytest.mark.parametrize("kwargs", [{"size_bytes": 4, "addr_width": 2},
                                    {"size_bytes": 1 << 16, "addr_width": 16}],
                         ids=["one-word", "whole-space"])
def test_memory_edge_sizes_elaborate(kwargs):
    from amaranth.back import verilog

    from hdl.axi_mem import AxiMemory

    assert "module m" in verilog.convert(AxiMemory(**kwargs), name="m", emit_src=False)


@pytest.mark.parametrize("kwargs, exc, param", [
    ({"size_bytes": 3000}, ValueError, "size_bytes"),
    ({"size_bytes": 2}, ValueError, "size_bytes"),
    ({"size_bytes": 4.0}, TypeError, "size_bytes"),
    ({"size_bytes": 4096, "addr_width": 11}, ValueError, "addr_width"),
    ({"size_bytes": 4, "addr_width": 1}, ValueError, "addr_width"),
    ({"size_bytes": 4096, "addr_width": 65}, ValueError, "addr_width"),
    ({"size_bytes": 4096, "axil_addr_width": 11}, ValueError, "axil_addr_width"),
])
def test_memory_bad_parameters(kwargs, exc, param):
    from hdl.axi_mem import AxiMemory

    with pytest.raises(exc, match=param):
        AxiMemory(**kwargs)


@pytest.mark.parametrize("kwargs", [
    {"addr_width": 1, "windows": [(0, 4)]},
    {"addr_width": 16, "windows": []},
    {"addr_width": 16, "windows": [(0, 4, 1)]},
    {"addr_width": 16, "windows": [(0, 0x300)]},  # size not a power of two
    {"addr_width": 16, "windows": [(0, 2)]},  # smaller than a word
    {"addr_width": 16, "windows": [(0x800, 0x1000)]},  # base not aligned
    {"addr_width": 12, "windows": [(0x1000, 0x1000)]},  # outside the address space
    {"addr_width": 16, "windows": [(0, 0x1000), (0x800, 0x100)]},  # overlapping
], ids=["addr_width", "empty", "triple", "size", "tiny", "align", "outside", "overlap"])
def test_decoder_bad_parameters(kwargs):
    from hdl.axil_decoder import AxiLiteDecoder

    param = "addr_width" if kwargs["addr_width"] == 1 else "windows"
    exc = TypeError if len(kwargs["windows"]) == 1 and len(kwargs["windows"][0]) != 2 \
        else ValueError  # a window that is not a (base, size) pair
    with pytest.raises(exc, match=param):
        AxiLiteDecoder(**kwargs)


def test_decoder_ports():
    """One master port per window, as wide as the window, so the core's register block and a
    memory plug straight in; the whole space can be one window."""
    from amaranth.back import verilog
    from amaranth.hdl import Module
    from amaranth.lib import wiring

    from hdl.axi_mem import AxiMemory
    from hdl.axil_decoder import AxiLiteDecoder
    from hdl.cmdqueue import CommandQueue

    dec = AxiLiteDecoder(addr_width=16, windows=[(0, 0x1000), (0x8000, 0x2000), (0x4000, 0x10)])
    assert [len(s.awaddr) for s in dec.subs] == [12, 13, 4]
    assert dec.subs[1] is dec.sub1
    board = AxiLiteDecoder(windows=[(0, 0x1000), (0x10000, 0x10000)])
    m = Module()
    wiring.connect(m, board.sub0, CommandQueue().axil)
    wiring.connect(m, board.sub1, AxiMemory(size_bytes=1 << 16, axil_addr_width=16).axil)
    whole = AxiLiteDecoder(addr_width=8, windows=[(0, 256)])
    assert "module d" in verilog.convert(whole, name="d", emit_src=False)
