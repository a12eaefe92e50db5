"""cocotb testbench: ``hdl.dma.DmaEngine`` against the golden ISS's DMA_LOAD / DMA_STORE.

DRAM is cocotbext-axi's ``AxiRam`` on the engine's AXI4 port, with random pauses on every
channel (:func:`sim.tb.streams.pauses`); SBUF is a Python model behind the engine's SBUF window
ports (writes sampled before the clock edge, reads answered the next cycle, words past the end
read as garbage). The data width is the build's ``data_width`` (32 to 256 bits). Each random legal
command goes in through the ``cmd`` stream (a :class:`sim.tb.streams.StreamSource`; the idle
engine must take it at once) and runs on the RTL until ``busy`` falls (under a watchdog), and
on ``golden.iss.NeuronCoreISS`` from the same state; afterwards every SBUF word and every DRAM
byte must be equal.

Tests:

* ``random_copies`` - ``NCLITE_DMA_COMMANDS`` (default 40) legal commands -- every dtype,
  loads and stores, rows not aligned to 4 bytes, strides of 0, single rows and columns, rows
  across a 4 KiB boundary (some starting a few bursts before it).
* ``bursts_around_4k`` - one-row loads and stores from every start a few bursts short of a 4
  KiB boundary, of every length near max_burst's multiples: each way a burst is cut.
* ``bus_errors`` - DRAM answers SLVERR, then DECERR, on R (a load) and on B (a store) for one
  beat of the tile (``sim.host.core.DramFaults`` on the ``AxiRam``): ``error`` rises, the command
  runs to its end (no hang: ``busy`` falls), a load writes what R returned (zeros for the
  failing beats, the rest as the ISS says), a store writes every other byte; the next
  command, on good DRAM, is clean (``error`` low) and bit-exact.
* ``full_rate`` - one beat per cycle on a DRAM that never pauses: every element size, loads
  and stores, aligned and not: the minimal number of R / W beats, and the cycles within one a
  beat plus a fixed allowance per burst and command.
"""

from __future__ import annotations

import inspect
import os

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge, SimTimeoutError, with_timeout
from cocotbext.axi import AxiBus, AxiRam, AxiResp
from cocotbext.axi.axi_channels import AxiARMonitor, AxiAWMonitor

from golden.isa import DTYPE_BYTES, Dtype, Opcode, encode
from golden.iss import CommandError, CoreConfig, NeuronCoreISS
from hdl.dma import DmaEngine, dma_command_layout
from hdl.read_port import SBUF_READ_LATENCY
from sim.host.core import DramFaults
from sim.tb import streams, tbutil
from sim.tb.streams import StreamSource

DRAM_BYTES = 1 << 14
_DEFAULT_MAX_BURST = inspect.signature(DmaEngine).parameters["max_burst"].default
WATCHDOG = 200_000
#: ``full_rate``'s allowance per AXI burst (cocotbext-axi's AxiRam turns a burst around in a
#: few cycles: address to first data, last data to the next address) and per command.
BURST_OVERHEAD = 4
COMMAND_OVERHEAD = 8


class DmaTB:
    def __init__(self, dut, gaps: float | None = None):
        self.dut = dut
        prm = tbutil.params()
        self.n, self.words = prm["n"], prm["words"]
        self.lanes = prm.get("data_width", 32) // 8  # bytes a beat; the SBUF window's words
        self.max_burst = prm.get("max_burst", _DEFAULT_MAX_BURST)
        self.cfg = CoreConfig(n=self.n, sbuf_words=self.words, psum_banks=1, psum_words=1,
                              dram_bytes=DRAM_BYTES)
        self.layout = dma_command_layout(self.n, self.words)
        self.rng = tbutil.rng(0xD3A)
        self.sbuf = self.rng.integers(0, 1 << 32, (self.n, self.words),
                                      dtype=np.uint64).astype(np.uint32)
        bus = AxiBus.from_prefix(dut, "axi_")
        self.ram = AxiRam(bus, dut.clk, dut.rst, size=DRAM_BYTES)
        # Every address handshake, for the burst rules (check_bursts).
        self.addresses = {"ar": AxiARMonitor(bus.read.ar, dut.clk, dut.rst),
                          "aw": AxiAWMonitor(bus.write.aw, dut.clk, dut.rst)}
        if gaps is None:
            gaps = float(os.environ.get("NCLITE_GAPS", "0.2"))
        for ch in (self.ram.read_if.ar_channel, self.ram.read_if.r_channel,
                   self.ram.write_if.aw_channel, self.ram.write_if.w_channel,
                   self.ram.write_if.b_channel):
            ch.set_pause_generator(streams.pauses(
                np.random.default_rng(self.rng.integers(1 << 30)), gaps))
        self.cmd = StreamSource(dut, "cmd")

    async def start(self):
        dut = self.dut
        dut.sbuf_rd_data.value = 0
        await tbutil.start_clock(dut)
        await tbutil.reset(dut)
        cocotb.start_soon(self._sbuf_model())

    async def _sbuf_model(self):
        """SBUF behind the DMA's window ports: a read gives words addr .. addr + lanes - 1 of
        a partition SBUF_READ_LATENCY cycles later, for that one cycle (garbage in every
        other cycle, and in words past the SBUF's end, which the DMA must not send); a write
        takes elements 0 .. count - 1 to words addr .. ."""
        dut, lanes = self.dut, self.lanes
        in_flight = [None] * SBUF_READ_LATENCY  # the reads of the last cycles, oldest first
        garbage = 0xDEADBEEF
        while True:
            await FallingEdge(dut.clk)
            read = in_flight.pop(0)
            if read is None:
                window = [garbage] * lanes
            else:
                part, addr = read
                window = [int(self.sbuf[part, a]) if a < self.words else garbage
                          for a in range(addr, addr + lanes)]
            dut.sbuf_rd_data.value = sum(w << (32 * i) for i, w in enumerate(window))
            await ReadOnly()
            in_flight.append((int(dut.sbuf_rd_part.value), int(dut.sbuf_rd_addr.value))
                             if dut.sbuf_rd_en.value else None)
            if dut.sbuf_wr_en.value:
                part, addr = int(dut.sbuf_wr_part.value), int(dut.sbuf_wr_addr.value)
                data, count = int(dut.sbuf_wr_data.value), int(dut.sbuf_wr_count.value)
                assert 1 <= count <= lanes and addr + count <= self.words, \
                    f"SBUF write of {count} words at {addr}"
                for i in range(count):
                    self.sbuf[part, addr + i] = (data >> (32 * i)) & 0xFFFF_FFFF

    def pack(self, f: dict, store: bool) -> int:
        word = 0
        for name in ("dtype", "part", "rows", "sbuf_addr", "cols", "dram_addr", "dram_stride"):
            word |= int(f[name]) << self.layout[name].offset
        return word | int(store) << self.layout["store"].offset

    async def run(self, f: dict, store: bool) -> None:
        """Give the engine one command, on the clock edge after the next falling edge (it
        must take it there: it is idle); return at the first clock edge after ``busy`` fell,
        with the cycles since the command was taken."""
        dut = self.dut
        await FallingEdge(dut.clk)
        self.cmd.send(self.pack(f, store))
        try:
            await with_timeout(self.cmd.wait(), tbutil.CLOCK_PERIOD_NS, "ns")
        except SimTimeoutError:
            raise AssertionError(f"the DMA was not idle: it did not take {f} store={store} "
                                 f"(seed {tbutil.seed()}, {tbutil.simulator()})") from None
        t0 = streams.sim_cycles()
        t1 = await streams.wait_until(dut.busy, 0, clock=dut.clk, timeout_cycles=WATCHDOG,
                                      what=f"DMA hung on {f} store={store}: busy")
        return t1 - t0

    def check_bursts(self, what: str):
        """Every AR and AW burst since the last check keeps the engine's rules: INCR bursts
        (AxSIZE the bus width) of at most max_burst beats, none across a 4 KiB boundary."""
        for ch, monitor in self.addresses.items():
            while not monitor.empty():
                t = monitor.recv_nowait()
                addr, beats = int(getattr(t, f"{ch}addr")), int(getattr(t, f"{ch}len")) + 1
                size, kind = int(getattr(t, f"{ch}size")), int(getattr(t, f"{ch}burst"))
                end = addr + beats * self.lanes
                assert (kind == 1 and 1 << size == self.lanes and beats <= self.max_burst
                        and (addr >> 12) == ((end - 1) >> 12)), (
                    f"{what}: an {ch.upper()} burst breaks the rules: address 0x{addr:x}, "
                    f"{beats} beats of {1 << size} bytes, burst type {kind} (INCR bursts of "
                    f"{self.lanes}-byte beats, at most {self.max_burst}, within a 4 KiB page; "
                    f"seed {tbutil.seed()}, {tbutil.simulator()})")

    def check(self, iss, what: str):
        """Every SBUF word and DRAM byte equal to the ISS's (after ``what``), and the bursts
        that did it by the rules (:meth:`check_bursts`)."""
        self.check_bursts(what)
        got_dram = np.frombuffer(self.ram.read(0, DRAM_BYTES), dtype=np.uint8)
        bad_s = np.argwhere(self.sbuf != iss.sbuf)
        bad_d = np.flatnonzero(got_dram != iss.dram)
        assert not bad_s.size and not bad_d.size, (
            f"{what}: SBUF words differ at {bad_s[:4].tolist()} (RTL "
            f"{[hex(int(self.sbuf[tuple(i)])) for i in bad_s[:4]]}, ISS "
            f"{[hex(int(iss.sbuf[tuple(i)])) for i in bad_s[:4]]}), DRAM bytes at "
            f"{bad_d[:8].tolist()} (seed {tbutil.seed()}, {tbutil.simulator()})")

    def random_fields(self, rng) -> dict:
        dtype = int(rng.choice([0, 1, 2, 3, 4]))
        size = DTYPE_BYTES[dtype]
        rows = int(rng.integers(1, self.n + 1))
        part = int(rng.integers(0, self.n - rows + 1))
        cols = int(rng.choice([1, int(rng.integers(1, self.words + 1))]))
        sbuf_addr = int(rng.integers(0, self.words - cols + 1))
        stride = int(rng.choice([0, cols, cols + int(rng.integers(1, 9)),
                                 int(rng.integers(1, 64))])) * size
        span = (rows - 1) * stride + cols * size
        near = rng.random()
        if near < 0.1:  # a row's first byte a few bursts short of a 4 KiB boundary: a burst
            # cut by max_burst before the one cut by the boundary
            lo = 4096 - int(rng.integers(1, 3 * self.max_burst * self.lanes + 1))
            lo = min(max(lo, 0), DRAM_BYTES - span)  # (long bursts: beyond the DRAM's ends)
        elif near < 0.3:  # around a 4 KiB boundary
            lo = max(4096 - int(rng.integers(0, span + 1)), 0)
        else:
            lo = int(rng.integers(0, DRAM_BYTES - span + 1))
        return {"dtype": dtype, "part": part, "rows": rows, "sbuf_addr": sbuf_addr,
                "cols": cols, "dram_addr": lo - lo % size, "dram_stride": stride}


@cocotb.test(**tbutil.timeout(5 + 0.5 * int(os.environ.get('NCLITE_DMA_COMMANDS', '40'))))
async def random_copies(dut):
    tb = DmaTB(dut)
    await tb.start()
    rng = tbutil.rng(1)
    dram = rng.integers(0, 256, DRAM_BYTES, dtype=np.uint8)
    tb.ram.write(0, dram.tobytes())
    iss = NeuronCoreISS(tb.cfg, dram=dram)
    iss.sbuf[:] = tb.sbuf
    count = int(os.environ.get("NCLITE_DMA_COMMANDS", "40"))
    done = 0
    while done < count:
        f = tb.random_fields(rng)
        store = bool(rng.random() < 0.5)
        words = encode(Opcode.DMA_STORE if store else Opcode.DMA_LOAD, **f)
        try:
            op, fields = iss.check(words)
        except CommandError:
            continue  # the sequencer would reject it; the DMA is only given legal commands
        iss.execute(op, fields)
        await tb.run(f, store)
        done += 1
        tb.check(iss, f"command {done} {'store' if store else 'load'} {f}")
    assert not dut.error.value
    dut._log.info("DMA: %d commands bit-exact with the ISS (seed %d)", count, tbutil.seed())


@cocotb.test(**tbutil.timeout(20))
async def bursts_around_4k(dut):
    """One-row fp32 loads and stores of b beats starting a beats short of a 4 KiB boundary, a
    and b at the edges of max_burst's and the page's multiples (1, M - 1 .. M + 1, 2M - 1 ..
    2M + 2; M = max_burst or a page's beats; a as far as the page reaches, b as far as a row
    of SBUF does): every way a burst is cut, by max_burst or by the boundary, and the burst
    after it, at the edges of its compares; and fp8 rows (any byte offset) ending a byte
    either side of the boundary and at it."""
    tb = DmaTB(dut)
    await tb.start()
    dram = tbutil.rng(2).integers(0, 256, DRAM_BYTES, dtype=np.uint8)
    tb.ram.write(0, dram.tobytes())
    iss = NeuronCoreISS(tb.cfg, dram=dram)
    iss.sbuf[:] = tb.sbuf
    mb, per_beat = tb.max_burst, tb.lanes // 4  # fp32 words a beat
    page = 4096 // tb.lanes  # beats
    edges = sorted(({1} | {e + d for e in (mb, page) for d in (-1, 0, 1)}
                    | {2 * e + d for e in (mb, page) for d in (-1, 0, 1, 2)}) - {0})
    count = 0

    async def row(f, store, what):
        nonlocal count
        iss.execute(*iss.check(encode(Opcode.DMA_STORE if store else Opcode.DMA_LOAD, **f)))
        await tb.run(f, store)
        count += 1
        tb.check(iss, f"{'store' if store else 'load'} {f} ({what}, max_burst {mb})")

    for short in (s for s in edges if s * tb.lanes <= 4096):
        for beats in (b for b in edges if b * per_beat <= tb.words):
            f = {"dtype": int(Dtype.FP32), "part": 0, "rows": 1, "sbuf_addr": 0,
                 "cols": beats * per_beat, "dram_addr": 4096 - short * tb.lanes,
                 "dram_stride": 0}
            await row(f, bool((short + beats) % 2), f"{short} beats short of 4 KiB")
    # fp8 rows of n bytes ending a byte short of the boundary, at it, and a byte past it (a
    # row's first burst reaches the boundary iff its offset in the page is <= 4096 - n)
    for n in sorted({1, tb.lanes - 1, tb.lanes, tb.lanes + 1, mb * tb.lanes - 1,
                     mb * tb.lanes + 1} - {0}):
        for end in (4095, 4096, 4097):
            if n <= min(tb.words, end):
                f = {"dtype": int(Dtype.FP8_E4M3), "part": 0, "rows": 1, "sbuf_addr": 0,
                     "cols": n, "dram_addr": end - n, "dram_stride": 0}
                await row(f, bool((n + end) % 2), f"fp8, its last byte at {end - 1}")
    assert not dut.error.value
    dut._log.info("DMA: %d rows around a 4 KiB boundary bit-exact with the ISS", count)


@cocotb.test(**tbutil.timeout(5))
async def bus_errors(dut):
    tb = DmaTB(dut)
    await tb.start()
    rng = tbutil.rng(5)
    faults = DramFaults(tb.ram)
    dram = rng.integers(0, 256, DRAM_BYTES, dtype=np.uint8)
    tb.ram.write(0, dram.tobytes())
    iss = NeuronCoreISS(tb.cfg, dram=dram)
    iss.sbuf[:] = tb.sbuf

    for resp in (AxiResp.SLVERR, AxiResp.DECERR):
        for store in (False, True):
            what = f"{resp.name} on {'B (store)' if store else 'R (load)'}"
            # A tile whose rows do not overlap in DRAM, and one failing word in one row.
            dtype = int(rng.choice([0, 1, 4]))
            size = DTYPE_BYTES[dtype]
            rows = int(rng.integers(1, tb.n + 1))
            cols = int(rng.integers(1, min(tb.words, 24) + 1))
            stride = (cols + int(rng.integers(0, 5))) * size
            span = (rows - 1) * stride + cols * size
            lo = int(rng.integers(0, DRAM_BYTES - span + 1)) // size * size
            f = {"dtype": dtype, "part": int(rng.integers(0, tb.n - rows + 1)), "rows": rows,
                 "sbuf_addr": int(rng.integers(0, tb.words - cols + 1)), "cols": cols,
                 "dram_addr": lo, "dram_stride": stride}
            row = int(rng.integers(0, rows))
            byte = lo + row * stride + int(rng.integers(0, cols)) * size
            beat = byte & ~(tb.lanes - 1)  # the failing beat: all its bytes
            window = (beat, beat + tb.lanes)
            op, fields = iss.check(encode(Opcode.DMA_STORE if store else Opcode.DMA_LOAD, **f))
            if store:
                kept = iss.dram[window[0]:window[1]].copy()
                iss.execute(op, fields)
                iss.dram[window[0]:window[1]] = kept  # DRAM refused the failing beat's bytes
            else:
                good = iss.dram.copy()
                iss.dram[window[0]:window[1]] = 0  # R returns zeros with the error
                iss.execute(op, fields)
                iss.dram[:] = good
            faults.window, faults.resp = window, resp
            hits = dict(faults.hits)
            await tb.run(f, store)  # raises if busy never falls
            faults.window = None
            channel = "B" if store else "R"
            assert faults.hits[channel] > hits[channel], f"{what}: DRAM gave no error on {f}"
            assert dut.error.value == 1, f"{what}: error not set (seed {tbutil.seed()})"
            tb.check(iss, f"{what}, {f}, failing word 0x{window[0]:x}")
            # The next command, on good DRAM, is clean.
            while True:
                g = tb.random_fields(rng)
                nxt = bool(rng.random() < 0.5)
                try:
                    op, fields = iss.check(encode(Opcode.DMA_STORE if nxt else Opcode.DMA_LOAD,
                                                  **g))
                    break
                except CommandError:
                    continue
            iss.execute(op, fields)
            await tb.run(g, nxt)
            assert dut.error.value == 0, f"after {what}: error still set on a clean command"
            tb.check(iss, f"the command after {what}")
            dut._log.info("%s: error set, command finished, the next one clean", what)


async def _count_beats(dut, counts):
    """Count the R and W handshakes at every rising edge (for ``full_rate`` only)."""
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        if dut.axi__rvalid.value and dut.axi__rready.value:
            counts["R"] += 1
        if dut.axi__wvalid.value and dut.axi__wready.value:
            counts["W"] += 1


async def _first_requests(dut, delays):
    """Cycles from each command's take to its first AR or AW request (``full_rate``): the
    engine takes a command in the cycle before ``busy`` rises."""
    since, was_busy = None, 0
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        if since is not None:
            since += 1
        if dut.busy.value and not was_busy:
            since = 1
        was_busy = int(dut.busy.value)
        if since is not None and (dut.axi__arvalid.value or dut.axi__awvalid.value):
            delays.append(since)
            since = None


@cocotb.test(**tbutil.timeout(5))
async def full_rate(dut):
    """One beat per cycle, every element it holds: for every element size, loads and stores
    of long rows at aligned and unaligned addresses on a DRAM that never pauses take exactly
    ceil(((a mod B) + cols * size) / B) R or W beats a row, and at most one cycle a beat plus
    a fixed overhead for each burst (the AXI model's address-to-data latency) and the
    command; each command's first burst is requested two cycles after it is taken."""
    tb = DmaTB(dut, gaps=0.0)
    await tb.start()
    rng = tbutil.rng(7)
    B = tb.lanes
    dram = rng.integers(0, 256, DRAM_BYTES, dtype=np.uint8)
    tb.ram.write(0, dram.tobytes())
    iss = NeuronCoreISS(tb.cfg, dram=dram)
    iss.sbuf[:] = tb.sbuf
    counts = {"R": 0, "W": 0}
    cocotb.start_soon(_count_beats(dut, counts))
    delays = []
    cocotb.start_soon(_first_requests(dut, delays))
    max_burst = tbutil.params().get("max_burst", 16)
    for dtype in (1, 0, 4):
        size = DTYPE_BYTES[dtype]
        for shift in (0, size):  # an aligned row, then one starting an element into a beat
            for store in (False, True):
                cols = tb.words - 1
                rows = min(2, tb.n)
                f = {"dtype": dtype, "part": 0, "rows": rows, "sbuf_addr": 1, "cols": cols,
                     "dram_addr": 256 + shift, "dram_stride": 1024}
                op, fields = iss.check(encode(Opcode.DMA_STORE if store else Opcode.DMA_LOAD,
                                              **f))
                iss.execute(op, fields)
                before = dict(counts)
                cycles = await tb.run(f, store)
                beats = -(-((f["dram_addr"] % B) + cols * size) // B)  # a row's
                channel = "W" if store else "R"
                got = counts[channel] - before[channel]
                what = (f"{'store' if store else 'load'} of {rows} x {cols} elements of "
                        f"{size} bytes at 0x{f['dram_addr']:x}, B = {B}")
                assert got == rows * beats, f"{what}: {got} beats, not {rows * beats}"
                bursts = rows * -(-beats // max_burst)
                bound = rows * beats + BURST_OVERHEAD * bursts + COMMAND_OVERHEAD
                assert cycles <= bound, f"{what}: {cycles} cycles, more than {bound}"
                dut._log.info("%s: %d beats in %d cycles", what, got, cycles)
    assert delays and set(delays) == {2}, f"first request after the command: {delays} cycles"
    got_dram = np.frombuffer(tb.ram.read(0, DRAM_BYTES), dtype=np.uint8)
    assert np.array_equal(tb.sbuf, iss.sbuf) and np.array_equal(got_dram, iss.dram), \
        f"full_rate: memories differ from the ISS ({tbutil.simulator()})"
