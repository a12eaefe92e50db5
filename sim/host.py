"""The host driver in a cocotb simulation: :class:`sim.driver.CoreDriver` on cocotbext-axi.

:class:`CoreHost` talks to ``hdl.core.NeuronCore`` only through its two buses: the registers
(``hdl.cmdqueue.REGISTERS``) through cocotbext-axi's ``AxiLiteMaster`` on the ``axil`` port,
and DRAM as cocotbext-axi's ``AxiRam`` on the ``axi`` port. Everything else (programs,
debug reads, perf counters) is :class:`~sim.driver.CoreDriver`'s, shared with the FPGA board's
host tool (``sim.board``).

Runs inside a cocotb test.
"""

from __future__ import annotations

import numpy as np
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam, AxiResp

from .driver import CoreDriver, CoreTimeout, RunResult

__all__ = ["CoreHost", "CoreTimeout", "RunResult", "AxiRamPort", "DramFaults", "sim_cycles"]


class _DramFault(Exception):
    """Raised inside cocotbext-axi's RAM model: it answers the beat with an error."""


class DramFaults:
    """Error responses from a cocotbext-axi ``AxiRam``, for fault tests.

    While :attr:`window` is a byte range ``(lo, hi)``, every beat of a read burst whose bytes
    meet it is answered with :attr:`resp` on R and zero data, and every write burst with a
    beat whose written bytes meet it is answered with :attr:`resp` on B (those bytes are not
    written; the burst's other beats are). ``resp`` is ``AxiResp.SLVERR`` or
    ``AxiResp.DECERR``. This uses the model's own error path (a failing memory access gives
    SLVERR) and rewrites SLVERR to DECERR on its way out when asked; ``window = None``: a
    good DRAM again."""

    def __init__(self, ram: AxiRam):
        self.window: tuple[int, int] | None = None
        self.resp = AxiResp.SLVERR
        self.hits = {"R": 0, "B": 0}  # error responses given (beats on R, bursts on B)
        rd, wr = ram.read_if, ram.write_if
        read, write = rd._read, wr._write
        r_send, b_send = rd.r_channel.send, wr.b_channel.send

        def hit(address, length):
            return self.window is not None and address < self.window[1] and \
                self.window[0] < address + length

        async def faulty_read(address, length):
            if hit(address, length):
                raise _DramFault(f"read 0x{address:x}")
            return await read(address, length)

        async def faulty_write(address, data):
            if hit(address, len(data)):
                raise _DramFault(f"write 0x{address:x}")
            await write(address, data)

        def remap(tx, field, channel):
            if int(getattr(tx, field)) == AxiResp.SLVERR:
                self.hits[channel] += 1
                setattr(tx, field, self.resp)

        async def send_r(tx):
            remap(tx, "rresp", "R")
            await r_send(tx)

        async def send_b(tx):
            remap(tx, "bresp", "B")
            await b_send(tx)

        rd._read, wr._write = faulty_read, faulty_write
        rd.r_channel.send, wr.b_channel.send = send_r, send_b


class AxiRamPort:
    """cocotbext-axi's ``AxiRam`` seen as the driver's async DRAM port (direct access: the
    testbench writes DRAM without bus cycles, as a host's DMA-coherent buffer would)."""

    def __init__(self, ram: AxiRam):
        self.ram = ram

    async def write(self, addr: int, data: bytes) -> None:
        self.ram.write(addr, data)

    async def read(self, addr: int, size: int) -> bytes:
        return self.ram.read(addr, size)


class CoreHost(CoreDriver):
    """One core's host side in cocotb. ``cfg`` is the core's ``golden.iss.CoreConfig``;
    ``perf_names`` the names of its performance counters (``hdl.core.PERF_COUNTERS``);
    ``suffix`` picks the core's ports ``axil<suffix>`` / ``axi<suffix>`` (``hdl.multicore``);
    ``dram_pauses`` the probability of a pause on each DRAM channel per cycle. DRAM answers
    every access until :attr:`faults` (:class:`DramFaults`) is given a window."""

    def __init__(self, dut, cfg, perf_names=(), *, dram_pauses: float = 0.0, rng=None,
                 suffix: str = ""):
        self.dut = dut
        regs = AxiLiteMaster(AxiLiteBus.from_prefix(dut, f"axil{suffix}_"), dut.clk, dut.rst)
        self.ram = AxiRam(AxiBus.from_prefix(dut, f"axi{suffix}_"), dut.clk, dut.rst,
                          size=cfg.dram_bytes)

        async def wait(cycles):
            await ClockCycles(dut.clk, cycles)

        super().__init__(cfg, regs, AxiRamPort(self.ram), wait=wait, now=sim_cycles,
                         perf_names=perf_names)
        self.faults = DramFaults(self.ram)
        if dram_pauses:
            rng = rng if rng is not None else np.random.default_rng(0)
            for ch in (self.ram.read_if.ar_channel, self.ram.read_if.r_channel,
                       self.ram.write_if.aw_channel, self.ram.write_if.w_channel,
                       self.ram.write_if.b_channel):
                ch.set_pause_generator(_pauses(np.random.default_rng(rng.integers(1 << 30)),
                                               dram_pauses))

    # Direct (zero-time) DRAM access for testbenches.

    def write_dram(self, addr: int, data) -> None:
        self.ram.write(addr, bytes(np.asarray(data, dtype=np.uint8).reshape(-1)))

    def read_dram(self, addr: int = 0, size: int | None = None) -> np.ndarray:
        size = self.cfg.dram_bytes - addr if size is None else size
        return np.frombuffer(self.ram.read(addr, size), dtype=np.uint8).copy()


def _pauses(rng, p):
    while True:
        yield int(rng.random() < p)


def sim_cycles() -> int:
    """Clock cycles of simulated time so far (the testbenches' clock, ``tbutil``)."""
    from cocotb.utils import get_sim_time

    from .tbutil import CLOCK_PERIOD_NS

    return int(get_sim_time("ns")) // CLOCK_PERIOD_NS
