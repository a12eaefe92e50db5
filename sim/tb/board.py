# amaranth: UnusedElaboratable=no
"""The FPGA board top (``hdl.board.BoardTop``) in cocotb, driven only through its UART pins.

The host tool's own code runs here: :func:`sim.host.board.board_gemm` on a
:class:`sim.host.uart_link.BridgeClient` whose transport is cocotbext-uart on the design's
``uart_rx`` / ``uart_tx`` (``sim.tb.uart``) instead of pyserial. Every GEMM result is
compared bit for bit with the golden ISS; the bridge's error paths are exercised on the whole
board (an unmapped address answers DECERR, a corrupted frame is rejected and counted) and the
core must work on afterwards.
"""

import json
import os

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from golden.isa import Dtype
from hdl.board import BOARD_MAP, BoardTop
from hdl.uart_bridge import Status
from sim.host.board import board_driver, board_gemm, board_program
from sim.host.core import sim_cycles
from sim.host.uart_link import BridgeClient, BridgeError, encode_write
from sim.tb import tbutil
from sim.tb.uart import CocotbUartTransport

#: The board top the tests simulate: a small core, so that the UART's slow bytes stay
#: affordable; 4 clock cycles per bit.
BOARD_SIM = {"divisor": 4, "n": 2, "sbuf_words": 64, "psum_banks": 2, "psum_words": 8,
             "dram_bytes": 4096, "queue_depth": 16}

# (m, k, f, A dtype, B dtype): K > N and F > psum_words for tiling, mixed fp8 formats.
GEMMS = [(3, 5, 10, "bf16", "bf16"), (2, 4, 3, "fp8_e4m3", "fp8_e5m2")]


class BoardTB:
    def __init__(self, dut):
        self.dut = dut
        p = dict(tbutil.params())
        self.divisor = p.pop("divisor")
        self.cfg = BoardTop(divisor=self.divisor, **p).iss_config()
        self.seed = tbutil.seed()
        bit_ns = self.divisor * tbutil.CLOCK_PERIOD_NS
        self.uart = CocotbUartTransport(dut.uart_tx, dut.uart_rx, bit_ns,
                                        timeout_ns=4000 * bit_ns)
        self.client = BridgeClient(self.uart)

        async def wait(cycles):
            await ClockCycles(dut.clk, cycles)

        self.driver = board_driver(self.client, self.cfg, wait=wait, now=sim_cycles)

    async def start(self):
        await tbutil.start_clock(self.dut)
        self.dut.uart_rx.value = 1
        await tbutil.reset(self.dut)
        await ClockCycles(self.dut.clk, 4)

    async def gemm(self, m, k, f, a, b, salt=0):
        r = await board_gemm(self.driver, self.cfg, m=m, k=k, f=f, a_dtype=a, b_dtype=b,
                             seed=self.seed * 100 + salt)
        assert r["ok"], (f"GEMM {m}x{k}x{f} {a} x {b} over the UART (seed {self.seed}): "
                         f"{r['mismatches']} mismatches, first {r['first_mismatches']}")
        assert r["executed"] == r["commands"], r
        self.dut._log.info(f"GEMM {m}x{k}x{f} {a} x {b}: bit-exact, {r['commands']} commands, "
                           f"{r['cycles']} cycles")
        return r


@cocotb.test(timeout_time=400, timeout_unit="ms")
async def gemm_over_uart(dut):
    """GEMMs through the bridge with the host tool's code, bit-exact with golden; the LEDs."""
    tb = BoardTB(dut)
    await tb.start()
    for _ in range(200):  # the core seeds its PRNG lanes after reset: busy for a while
        if int(dut.leds.value) & 0b11 == 0:
            break
        await ClockCycles(dut.clk, 10)
    assert int(dut.leds.value) & 0b11 == 0, "idle core: busy and error LEDs off"
    # NCLITE_BOARD_GEMMS: which of GEMMS to run (indices; default all of them).
    picks = os.environ.get("NCLITE_BOARD_GEMMS")
    for i, shape in enumerate(GEMMS):
        if picks is None or str(i) in picks.split(","):
            await tb.gemm(*shape, salt=i)
    status = await tb.client.status()
    assert status["rejected"] == 0 and status["axi_errors"] == 0, status


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def bridge_errors_on_the_board(dut):
    """An unmapped address answers DECERR; a frame with a bad CRC is rejected, counted and
    does nothing; the core works on afterwards."""
    tb = BoardTB(dut)
    await tb.start()
    hole = BOARD_MAP["DRAM_BASE"] + tb.cfg.dram_bytes  # just past the memory's window
    try:
        await tb.client.read_dword(hole)
    except BridgeError as exc:
        assert exc.status == Status.DECERR, exc
    else:
        raise AssertionError(f"a read of 0x{hole:08x} (unmapped) did not fail")
    # A write of DRAM word 0 whose CRC is corrupted: rejected, and the word keeps its value.
    dram0 = BOARD_MAP["DRAM_BASE"]
    await tb.client.write_dword(dram0, 0x1234_5678)
    frame = bytearray(encode_write(dram0, [0xDEAD_BEEF]))
    frame[-1] ^= 0x5A
    await tb.uart.send(bytes(frame))
    reply = await tb.uart.recv(3)
    assert reply[1] & 0xF == Status.BAD_CRC, reply.hex()
    assert await tb.client.read_dword(dram0) == 0x1234_5678
    status = await tb.client.status()
    assert status["bad_crc"] == 1 and status["rejected"] == 1, status
    await tb.gemm(*GEMMS[0], salt=7)


@cocotb.test(timeout_time=400, timeout_unit="ms")
async def kernel_over_uart(dut):
    """A traced kernel through the host tool's ``board_program`` (what ``nclite kernel run --on
    board`` runs over pyserial): ``NCLITE_KERNEL`` is an .npz with ``program0``, ``dram0`` and
    ``out_<name>`` (the golden ISS's output bytes), ``NCLITE_KERNEL_OUTPUTS`` JSON ``{name:
    [address, dtype code, shape]}``. Every output must equal the ISS's."""
    from sim.kernels.trace import NUMPY_DTYPES

    tb = BoardTB(dut)
    await tb.start()
    data = np.load(os.environ["NCLITE_KERNEL"])
    outputs = {name: (addr, data[f"out_{name}"].view(NUMPY_DTYPES[Dtype(code)]).reshape(shape))
               for name, (addr, code, shape) in
               json.loads(os.environ["NCLITE_KERNEL_OUTPUTS"]).items()}
    await tb.driver.wait_idle(20_000)  # the PRNG lanes seed themselves after reset
    r = await board_program(tb.driver, list(data["program0"]), data["dram0"], outputs)
    assert r["ok"] and r["executed"] == r["commands"], (f"kernel over the UART (seed "
                                                        f"{tb.seed}): {r}")
