# amaranth: UnusedElaboratable=no
"""The FPGA board top (NeuronCore + block-RAM DRAM + UART bridge) in Icarus and Verilator,
driven only through its UART pins by the host tool's own code (sim/tb/board.py)."""

import os

import pytest

from sim import runner
from sim.tb.board import BOARD_SIM


@pytest.mark.parametrize("testcase", ["gemm_over_uart", "bridge_errors_on_the_board"])
def test_board(simulator, testcase):
    # The bf16 GEMM (GEMMS[0]) also ends bridge_errors_on_the_board: gemm_over_uart runs the
    # mixed-fp8 one here, both in make test-full.
    env = {} if os.environ.get("NCLITE_FULL") else {"NCLITE_BOARD_GEMMS": "1"}
    runner.run("hdl.board:BoardTop", BOARD_SIM, "sim.tb.board", simulator, testcase=testcase,
               run_tag=testcase, extra_env=env)


def test_board_needs_power_of_two_dram():
    from hdl.board import BoardTop

    with pytest.raises(ValueError, match="dram_bytes"):
        BoardTop(divisor=4, n=2, sbuf_words=64, psum_banks=2, psum_words=8, dram_bytes=3000)


def test_board_config_is_a_legal_board_top():
    """The bitstream's configuration builds a BoardTop and fits the programs the host tool
    compiles."""
    from hdl.board import BoardTop
    from sim.kernels import library
    from synth.board import BOARDS, uart_divisor

    for name, cfg in BOARDS.items():
        top = BoardTop(divisor=uart_divisor(cfg), **cfg["core"])
        # Raises if the SBUF is too small for the library's programs.
        library.traced(top.iss_config(), lambda kern, ws: None)
        assert abs(cfg["clock_hz"] / uart_divisor(cfg) / cfg["baud"] - 1) < 0.01, name
