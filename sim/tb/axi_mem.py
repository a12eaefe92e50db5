"""cocotb testbench: ``hdl.axi_mem.AxiMemory`` and ``hdl.axil_decoder.AxiLiteDecoder``.

Memory tests (toplevel ``AxiMemory``, parameters ``size_bytes`` and ``addr_width``), each
against a Python bytearray model of the memory that lives as long as the simulation:

* ``random_traffic``: two coroutines issue random reads and writes through cocotbext-axi's
  ``AxiMaster`` on ``axi`` (random offsets and lengths, so unaligned edges give partial
  strobes; full and narrow AxSIZE; INCR and FIXED; bursts up to 256 beats), a third random
  reads and writes through ``AxiLiteMaster`` on ``axil``, all at once on ranges no other
  access in flight touches, with random pauses on every channel; some accesses straddle or
  lie beyond ``size_bytes`` and must answer DECERR with zeros read and nothing written.
  Afterwards the whole memory reads back equal to the model.
* ``raw_bursts``: AXI4 bursts driven channel by channel (cocotbext-axi's channel sources and
  sinks): any length 1..256, INCR / FIXED / WRAP, AxSIZE 0..2, random ``wstrb`` on every
  beat, both IDs; every R beat's data, ``rresp``, ``rlast`` and ``rid`` and every B's
  ``bresp`` and ``bid`` are checked (DECERR per beat at and beyond ``size_bytes``).
* ``throughput``: with no back-pressure a 256-beat write and a 256-beat read stream one beat
  per cycle, with the documented latencies, while AXI-Lite traffic runs on the other port.

Decoder test (toplevel :class:`DecoderBench`): ``decoder_routing`` -- random AXI-Lite
accesses from ``AxiLiteMaster`` through the decoder to two cocotbext-axi ``AxiLiteRam``\\ s
and an ``AxiMemory``: each lands at its offset in its window (checked through the RAMs'
back doors), holes answer DECERR from the decoder, the memory's own DECERR passes through.

``NCLITE_AXI_OPS`` scales the number of random accesses (default 1.0).
"""

from __future__ import annotations

import os
from collections import Counter

import cocotb
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.axi import (
    AxiBurstType,
    AxiBus,
    AxiLiteBus,
    AxiLiteMaster,
    AxiLiteRam,
    AxiMaster,
    AxiResp,
)
from cocotbext.axi.axi_channels import (
    AxiARSource,
    AxiARTransaction,
    AxiAWSource,
    AxiAWTransaction,
    AxiBSink,
    AxiRSink,
    AxiWSource,
    AxiWTransaction,
)

from hdl.axi_mem import AxiMemory
from hdl.axil_decoder import AxiLiteDecoder
from hdl.cmdqueue import AxiLiteSignature
from sim.tb import streams, tbutil

OKAY, DECERR = AxiResp.OKAY, AxiResp.DECERR
FIXED, INCR, WRAP = AxiBurstType.FIXED, AxiBurstType.INCR, AxiBurstType.WRAP


class DecoderBench(wiring.Component):
    """An ``AxiLiteDecoder`` (16-bit addresses) as a board would use it: window 0 and window 2
    are top-level ports (``ram``, ``small``) for cocotbext-axi ``AxiLiteRam``\\ s, window 1
    is an ``AxiMemory`` of 4 KiB in an 8 KiB window (its upper half answers DECERR)."""

    WINDOWS = [(0x0000, 0x1000), (0x8000, 0x2000), (0x4000, 0x10)]
    MEM_BYTES = 0x1000

    def __init__(self):
        super().__init__({
            "bus": Out(AxiLiteSignature(addr_width=16)),
            "ram": In(AxiLiteSignature(addr_width=12)),
            "small": In(AxiLiteSignature(addr_width=4)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.dec = dec = AxiLiteDecoder(addr_width=16, windows=self.WINDOWS)
        m.submodules.mem = mem = AxiMemory(size_bytes=self.MEM_BYTES, addr_width=32,
                                           axil_addr_width=13)
        wiring.connect(m, wiring.flipped(self.bus), dec.bus)
        wiring.connect(m, dec.sub0, wiring.flipped(self.ram))
        wiring.connect(m, dec.sub1, mem.axil)
        wiring.connect(m, dec.sub2, wiring.flipped(self.small))
        return m


async def _start(dut, ports):
    """Hold every valid and ready the testbench drives low from time 0 (the DUT's readies
    depend on valids, and cocotbext-axi samples them at the first clock edge), then clock and
    reset."""
    for port in ports:
        for ch in ("aw", "w", "ar"):
            getattr(dut, f"{port}__{ch}valid").value = 0
        for ch in ("b", "r"):
            getattr(dut, f"{port}__{ch}ready").value = 0
    dut.rst.value = 1
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)


def _set_pauses(rng, channels, p):
    for ch in channels:
        ch.set_pause_generator(streams.pauses(tbutil.rng(int(rng.integers(1 << 30))), p))


def _ops(n: int) -> int:
    return max(1, round(n * _SCALE))


_SCALE = float(os.environ.get("NCLITE_AXI_OPS", "1.0"))
#: A hung bus fails the test instead of the run: each test takes well under 0.2 ms.
_TIMEOUT = {"timeout_time": 2 * max(_SCALE, 1.0), "timeout_unit": "ms"}


def _hex(data: bytes) -> str:
    return data.hex(" ") if len(data) <= 32 else data[:32].hex(" ") + " ..."


# The memory's contents as the testbench believes them, per size: the tests of one run share
# the simulated memory, so they share the model too.
_MODELS: dict[int, bytearray] = {}


class MemTB:
    def __init__(self, dut):
        self.dut = dut
        prm = tbutil.params()
        self.size = prm["size_bytes"]
        self.space = 1 << prm.get("addr_width", 32)
        self.model = _MODELS.setdefault(self.size, bytearray(self.size))
        self.busy: list[tuple[int, int]] = []  # word-aligned byte ranges in flight
        self.seen: Counter[str] = Counter()  # what the random accesses covered

    async def start(self):
        await _start(self.dut, ("axi", "axil"))

    # --- the model -------------------------------------------------------------------------
    def expect_read(self, addr: int, length: int) -> tuple[bytes, AxiResp]:
        data = bytes(self.model[a] if a < self.size else 0 for a in range(addr, addr + length))
        return data, (DECERR if addr + length > self.size else OKAY)

    def apply_write(self, addr: int, data: bytes) -> AxiResp:
        for i, b in enumerate(data):
            if addr + i < self.size:
                self.model[addr + i] = b
        return DECERR if addr + len(data) > self.size else OKAY

    def word(self, addr: int) -> int:
        a = addr & ~3
        return int.from_bytes(self.model[a:a + 4], "little") if a < self.size else 0

    # --- picking ranges nobody else is using ---------------------------------------------------
    def pick(self, rng, max_len: int, *, align: int = 1, out_p: float = 0.1):
        length = int(rng.integers(1, max_len + 1))
        if self.space > self.size and rng.random() < out_p:
            lo = max(0, self.size - length + 1)  # straddling the end, or beyond it
            hi = min(self.space - length, self.size + 64)
        else:
            length = min(length, self.size)
            lo, hi = 0, self.size - length
        addr = int(rng.integers(lo, hi + 1)) // align * align
        return addr, length

    def pick_burst(self, rng, span: int, out_p: float = 0.15) -> int:
        """A start address for ``span`` bytes: inside the memory, or (when the address space
        is larger) straddling its end or beyond it."""
        if self.space > self.size and rng.random() < out_p:
            lo, hi = max(0, self.size - span + 1), min(self.space - span, self.size + 64)
        else:
            lo, hi = 0, max(0, self.size - span)
        return int(rng.integers(lo, hi + 1))

    def claim(self, addr: int, length: int) -> tuple[int, int] | None:
        span = (addr & ~3, (addr + length + 3) & ~3)
        if any(span[0] < hi and lo < span[1] for lo, hi in self.busy):
            return None
        self.busy.append(span)
        return span

    async def claim_wait(self, rng, max_len: int, **kwargs):
        """:meth:`pick` until the range is free; claim it."""
        while True:
            addr, length = self.pick(rng, max_len, **kwargs)
            span = self.claim(addr, length)
            if span is not None:
                return addr, length, span
            await RisingEdge(self.dut.clk)


# --- random_traffic ------------------------------------------------------------------------
async def _axi4_worker(tb: MemTB, master: AxiMaster, rng, n_ops: int, tag: str):
    seed = tbutil.seed()
    for op in range(n_ops):
        write = rng.random() < 0.5
        size = int(rng.choice([2, 2, 2, 1, 0]))
        fixed = size == 2 and rng.random() < 0.1
        long_p = 0.15 if size == 2 else 0.05
        max_len = 1024 if rng.random() < long_p else 64
        if fixed:
            addr, length, span = await tb.claim_wait(rng, 64, align=4)
        else:
            addr, length, span = await tb.claim_wait(rng, max_len)
        where = (f"{tag} op {op}: {'write' if write else 'read'} 0x{addr:x}+{length} "
                 f"size {size}{' FIXED' if fixed else ''} (seed {seed})")
        burst = FIXED if fixed else INCR
        tb.seen.update([f"AXI4 {'write' if write else 'read'}", f"AxSIZE {size}"]
                       + ["FIXED"] * fixed + ["over 64 bytes"] * (length > 64)
                       + ["AXI4 DECERR"] * (addr + length > tb.size))
        if write:
            data = bytes(int(x) for x in rng.integers(0, 256, length))
            resp = await master.write(addr, data, size=size, burst=burst)
            if fixed:  # every beat writes the same word: the last beat's bytes win
                for k in range(0, length, 4):
                    want = tb.apply_write(addr, data[k:k + 4])
            else:
                want = tb.apply_write(addr, data)
            assert resp.resp == want, f"{where}: bresp {resp.resp!r}, want {want!r}"
        else:
            resp = await master.read(addr, length, size=size, burst=burst)
            if fixed:
                word, want_resp = tb.expect_read(addr, 4)
                want = (word * ((length + 3) // 4))[:length]
            else:
                want, want_resp = tb.expect_read(addr, length)
            assert resp.resp == want_resp, f"{where}: rresp {resp.resp!r}, want {want_resp!r}"
            assert resp.data == want, f"{where}: read {_hex(resp.data)}, want {_hex(want)}"
        tb.busy.remove(span)


async def _axil_worker(tb: MemTB, host: AxiLiteMaster, rng, n_ops: int):
    seed = tbutil.seed()
    for op in range(n_ops):
        write = rng.random() < 0.5
        addr, length, span = await tb.claim_wait(rng, 12, out_p=0.15)
        where = (f"AXI-Lite op {op}: {'write' if write else 'read'} 0x{addr:x}+{length} "
                 f"(seed {seed})")
        tb.seen.update(["AXI-Lite"] + ["AXI-Lite DECERR"] * (addr + length > tb.size))
        if write:
            data = bytes(int(x) for x in rng.integers(0, 256, length))
            resp = await host.write(addr, data)
            want = tb.apply_write(addr, data)
            assert resp.resp == want, f"{where}: bresp {resp.resp!r}, want {want!r}"
        else:
            resp = await host.read(addr, length)
            want, want_resp = tb.expect_read(addr, length)
            assert resp.resp == want_resp, f"{where}: rresp {resp.resp!r}, want {want_resp!r}"
            assert resp.data == want, f"{where}: read {_hex(resp.data)}, want {_hex(want)}"
        tb.busy.remove(span)


@cocotb.test(**_TIMEOUT)
async def random_traffic(dut):
    tb = MemTB(dut)
    rng = tbutil.rng(0xA11)
    master = AxiMaster(AxiBus.from_prefix(dut, "axi_"), dut.clk, dut.rst)
    host = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "axil_"), dut.clk, dut.rst)
    channels = [master.write_if.aw_channel, master.write_if.w_channel,
                master.write_if.b_channel, master.read_if.ar_channel, master.read_if.r_channel,
                host.write_if.aw_channel, host.write_if.w_channel, host.write_if.b_channel,
                host.read_if.ar_channel, host.read_if.r_channel]
    _set_pauses(rng, channels, 0.25)
    await tb.start()
    workers = [cocotb.start_soon(_axi4_worker(tb, master, tbutil.rng(k), _ops(100), f"AXI4 {k}"))
               for k in (1, 2)]
    workers.append(cocotb.start_soon(_axil_worker(tb, host, tbutil.rng(3), _ops(200))))
    for w in workers:
        await w
    # Everything, once more, without pauses: no write landed anywhere else.
    for ch in channels:
        ch.clear_pause_generator()
        ch.pause = False
    got = (await master.read(0, tb.size)).data
    bad = [a for a in range(tb.size) if got[a] != tb.model[a]]
    assert not bad, (f"memory differs from the model at {len(bad)} bytes, first 0x{bad[0]:x}: "
                     f"0x{got[bad[0]]:02x} != 0x{tb.model[bad[0]]:02x} (seed {tbutil.seed()})")
    _check_coverage(tb, ["AXI4 write", "AXI4 read", "AxSIZE 0", "AxSIZE 1", "FIXED",
                         "over 64 bytes", "AXI-Lite"]
                    + ["AXI4 DECERR", "AXI-Lite DECERR"] * (tb.space > tb.size))
    dut._log.info("random traffic: %d-byte memory matches the model; covered %s (seed %d)",
                  tb.size, dict(tb.seen), tbutil.seed())


def _check_coverage(tb: MemTB, wanted: list[str]):
    missing = [w for w in wanted if not tb.seen[w]]
    assert not missing, f"the random accesses never covered {missing} (seed {tbutil.seed()})"


# --- raw_bursts ----------------------------------------------------------------------------
def beat_addresses(addr: int, beats: int, size: int, burst: AxiBurstType) -> list[int]:
    """The address of every beat of a burst (AXI4 A3.4.1)."""
    n = 1 << size
    out = [addr]
    for _ in range(beats - 1):
        prev = out[-1]
        aligned = prev & ~(n - 1)
        if burst == FIXED:
            out.append(addr)
        elif burst == WRAP:
            span = beats * n
            out.append((aligned & ~(span - 1)) | ((aligned + n) & (span - 1)))
        else:
            out.append(aligned + n)
    return out


class RawAxi:
    """The AXI4 port driven channel by channel."""

    def __init__(self, dut):
        bus = AxiBus.from_prefix(dut, "axi_")
        clk, rst = dut.clk, dut.rst
        self.aw = AxiAWSource(bus.write.aw, clk, rst)
        self.w = AxiWSource(bus.write.w, clk, rst)
        self.b = AxiBSink(bus.write.b, clk, rst)
        self.ar = AxiARSource(bus.read.ar, clk, rst)
        self.r = AxiRSink(bus.read.r, clk, rst)
        self.channels = [self.aw, self.w, self.b, self.ar, self.r]


async def _raw_write(tb: MemTB, raw: RawAxi, rng, addr, beats, size, burst, ident, where):
    addrs = beat_addresses(addr, beats, size, burst)
    n = 1 << size
    raw.aw.send_nowait(AxiAWTransaction(awid=ident, awaddr=addr, awlen=beats - 1, awsize=size,
                                        awburst=int(burst)))
    for k, a in enumerate(addrs):
        lanes = ((1 << n) - 1) << (a & 3 & ~(n - 1))
        strb = lanes if rng.random() < 0.3 else int(rng.integers(0, 16)) & lanes
        data = int(rng.integers(0, 1 << 32))
        raw.w.send_nowait(AxiWTransaction(wdata=data, wstrb=strb, wlast=int(k == beats - 1)))
        if a < tb.size:
            for j in range(4):
                if strb >> j & 1:
                    tb.model[(a & ~3) + j] = data >> (8 * j) & 0xFF
    b = await raw.b.recv()
    want = DECERR if any(a >= tb.size for a in addrs) else OKAY
    assert int(b.bid) == ident, f"{where}: bid {int(b.bid)}, want {ident}"
    assert int(b.bresp) == want, f"{where}: bresp {int(b.bresp)}, want {int(want)}"


async def _raw_read(tb: MemTB, raw: RawAxi, addr, beats, size, burst, ident, where):
    addrs = beat_addresses(addr, beats, size, burst)
    raw.ar.send_nowait(AxiARTransaction(arid=ident, araddr=addr, arlen=beats - 1, arsize=size,
                                        arburst=int(burst)))
    for k, a in enumerate(addrs):
        r = await raw.r.recv()
        beat = f"{where}, beat {k} at 0x{a:x}"
        want_resp = DECERR if a >= tb.size else OKAY
        assert int(r.rid) == ident, f"{beat}: rid {int(r.rid)}, want {ident}"
        assert int(r.rlast) == (k == beats - 1), f"{beat}: rlast {int(r.rlast)}"
        assert int(r.rresp) == want_resp, f"{beat}: rresp {int(r.rresp)}, want {int(want_resp)}"
        assert int(r.rdata) == tb.word(a), \
            f"{beat}: rdata 0x{int(r.rdata):08x}, want 0x{tb.word(a):08x}"


@cocotb.test(**_TIMEOUT)
async def raw_bursts(dut):
    tb = MemTB(dut)
    rng = tbutil.rng(0xB57)
    raw = RawAxi(dut)
    _set_pauses(rng, raw.channels, 0.3)
    await tb.start()
    seed = tbutil.seed()
    for op in range(_ops(200)):
        burst = [INCR, FIXED, WRAP][int(rng.choice(3, p=[0.6, 0.15, 0.25]))]
        size = int(rng.choice([2, 2, 1, 0]))
        if burst == WRAP:
            beats = int(rng.choice([2, 4, 8, 16]))
        elif rng.random() < 0.2:
            beats = int(rng.integers(1, 257))
        else:
            beats = int(rng.integers(1, 17))
        addr = tb.pick_burst(rng, beats << size if burst == INCR else 1 << size)
        if burst != INCR:  # FIXED and WRAP bursts start aligned to their size
            addr &= ~((1 << size) - 1)
        ident = int(rng.integers(0, 2))
        write = rng.random() < 0.5
        where = (f"raw op {op}: {'write' if write else 'read'} {burst.name} 0x{addr:x} "
                 f"{beats} beats of {1 << size} bytes, id {ident} (seed {seed})")
        oor = any(a >= tb.size for a in beat_addresses(addr, beats, size, burst))
        tb.seen.update([f"raw {burst.name} {'write' if write else 'read'}", f"raw AxSIZE {size}",
                        f"raw id {ident}"] + ["raw over 16 beats"] * (beats > 16)
                       + ["raw DECERR"] * oor)
        if write:
            await _raw_write(tb, raw, rng, addr, beats, size, burst, ident, where)
        else:
            await _raw_read(tb, raw, addr, beats, size, burst, ident, where)
    _check_coverage(tb, [f"raw {b} {d}" for b in ("INCR", "FIXED", "WRAP")
                         for d in ("read", "write")]
                    + ["raw AxSIZE 0", "raw AxSIZE 1", "raw id 0", "raw id 1", "raw over 16 beats"]
                    + ["raw DECERR"] * (tb.space > tb.size))
    dut._log.info("raw bursts: %d bursts checked beat by beat; covered %s (seed %d)",
                  _ops(200), dict(tb.seen), seed)


# --- throughput ----------------------------------------------------------------------------
class Handshakes:
    """Records the cycle of every handshake on the AXI4 channels."""

    def __init__(self, dut):
        self.dut = dut
        self.cycles: dict[str, list[int]] = {ch: [] for ch in ("aw", "w", "b", "ar", "r")}
        self.b_valid: list[int] = []
        cocotb.start_soon(self._run())

    async def _run(self):
        dut, cycle = self.dut, 0
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            cycle += 1
            for ch in self.cycles:
                if getattr(dut, f"axi__{ch}valid").value and getattr(dut, f"axi__{ch}ready").value:
                    self.cycles[ch].append(cycle)


async def _axil_noise(tb: MemTB, host: AxiLiteMaster, rng, stop: list[bool]):
    """AXI-Lite reads and writes in the upper half while the AXI4 side streams below."""
    half = tb.size // 2
    while not stop:
        addr = half + int(rng.integers(0, half // 4)) * 4
        if rng.random() < 0.5:
            data = bytes(int(x) for x in rng.integers(0, 256, 4))
            assert (await host.write(addr, data)).resp == OKAY
            tb.apply_write(addr, data)
        else:
            got = await host.read(addr, 4)
            assert got.data == tb.expect_read(addr, 4)[0], f"AXI-Lite read 0x{addr:x}"


@cocotb.test(**_TIMEOUT)
async def throughput(dut):
    tb = MemTB(dut)
    rng = tbutil.rng(0x7B)
    raw = RawAxi(dut)
    host = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "axil_"), dut.clk, dut.rst)
    hs = Handshakes(dut)
    await tb.start()
    seed = tbutil.seed()
    stop: list[bool] = []
    noise = cocotb.start_soon(_axil_noise(tb, host, rng, stop))
    beats = min(256, tb.size // 8)  # in the lower half, away from the AXI-Lite traffic

    def consecutive(ch, first, count):
        got = hs.cycles[ch][first:first + count]
        assert got == list(range(got[0], got[0] + count)), \
            f"{ch} beats not one per cycle: {got} (seed {seed})"
        return got

    await _raw_write(tb, raw, rng, 0, beats, 2, INCR, 0, f"streamed write (seed {seed})")
    w = consecutive("w", 0, beats)
    assert w[0] == hs.cycles["aw"][0] + 1, "the first W beat waits after AW"
    assert hs.cycles["b"][0] == w[-1] + 1, "B is late"
    await _raw_read(tb, raw, 0, beats, 2, INCR, 1, f"streamed read (seed {seed})")
    r = consecutive("r", 0, beats)
    assert r[0] == hs.cycles["ar"][0] + 2, "the first R beat is late"

    # Bursts back to back: the next address is taken the cycle after the last beat.
    for k in range(3):
        raw.ar.send_nowait(AxiARTransaction(arid=0, araddr=64 * k, arlen=15, arsize=2,
                                            arburst=int(INCR)))
    for k in range(3):
        await _raw_read_queued(tb, raw, 64 * k, 16, f"back-to-back read {k} (seed {seed})")
    ar, r = hs.cycles["ar"][1:], hs.cycles["r"][beats:]
    assert len(r) == 48 and all(ar[k + 1] == r[16 * k + 15] + 1 for k in range(2)), (ar, r)
    for k in range(3):  # and writes: the next AW the cycle after the B handshake
        raw.aw.send_nowait(AxiAWTransaction(awid=0, awaddr=64 * k, awlen=15, awsize=2,
                                            awburst=int(INCR)))
        for j in range(16):
            data = int(rng.integers(0, 1 << 32))
            raw.w.send_nowait(AxiWTransaction(wdata=data, wstrb=0xF, wlast=int(j == 15)))
            tb.apply_write(64 * k + 4 * j, data.to_bytes(4, "little"))
    for _ in range(3):
        assert int((await raw.b.recv()).bresp) == OKAY
    aw, b = hs.cycles["aw"][1:], hs.cycles["b"][1:]
    assert len(b) == 3 and all(aw[k + 1] == b[k] + 1 for k in range(2)), (aw, b)
    await _raw_read(tb, raw, 0, 48, 2, INCR, 0, f"read after back-to-back writes (seed {seed})")
    stop.append(True)
    await noise
    dut._log.info("throughput: %d-beat bursts stream one beat per cycle beside AXI-Lite "
                  "traffic (seed %d)", beats, seed)


async def _raw_read_queued(tb: MemTB, raw: RawAxi, addr, beats, where):
    for k in range(beats):
        r = await raw.r.recv()
        assert int(r.rdata) == tb.word(addr + 4 * k), f"{where}, beat {k}"
        assert int(r.rlast) == (k == beats - 1), f"{where}, beat {k}: rlast"


# --- decoder_routing -----------------------------------------------------------------------
class DecoderModel:
    """What the host should see through :class:`DecoderBench`: 64 KiB, mapped or not."""

    def __init__(self):
        self.bytes = bytearray(1 << 16)
        self.windows = DecoderBench.WINDOWS

    @staticmethod
    def mapped(addr: int) -> bool:
        (b0, s0), (b1, _), (b2, s2) = DecoderBench.WINDOWS
        return (b0 <= addr < b0 + s0 or b1 <= addr < b1 + DecoderBench.MEM_BYTES
                or b2 <= addr < b2 + s2)

    def pick(self, rng) -> int:
        """A word address: in a window (mapped or not) or in a hole."""
        (b0, s0), (b1, s1), (b2, s2) = self.windows
        kind = rng.choice(5, p=[0.35, 0.2, 0.1, 0.15, 0.2])
        if kind == 0:
            return b0 + int(rng.integers(0, s0 // 4)) * 4
        if kind == 1:
            return b1 + int(rng.integers(0, DecoderBench.MEM_BYTES // 4)) * 4
        if kind == 2:  # the window's upper half: the memory's own DECERR
            return b1 + DecoderBench.MEM_BYTES + int(rng.integers(0, (s1 - 0x1000) // 4)) * 4
        if kind == 3:
            return b2 + int(rng.integers(0, s2 // 4)) * 4
        holes = [(b0 + s0, b2), (b2 + s2, b1), (b1 + s1, 1 << 16)]
        lo, hi = holes[int(rng.integers(0, len(holes)))]
        return lo + int(rng.integers(0, (hi - lo) // 4)) * 4


async def _decoder_worker(model: DecoderModel, host, rams, rng, n_ops, parity):
    seed = tbutil.seed()
    for op in range(n_ops):
        while True:
            word = model.pick(rng)
            if (word >> 2) % 2 == parity:
                break
        ok = model.mapped(word)
        want_resp = OKAY if ok else DECERR
        if rng.random() < 0.5:
            offset = int(rng.integers(0, 4))
            length = int(rng.integers(1, 5 - offset))
            addr = word + offset
            data = bytes(int(x) for x in rng.integers(0, 256, length))
            where = f"decoder op {op}: write 0x{addr:04x}+{length} (seed {seed})"
            resp = await host.write(addr, data)
            assert resp.resp == want_resp, f"{where}: bresp {resp.resp!r}, want {want_resp!r}"
            if ok:
                model.bytes[addr:addr + length] = data
            for base, size, ram in rams:  # the RAM behind the window holds it at the offset
                if base <= addr < base + size:
                    got = ram.read(addr - base, length)
                    assert got == data, f"{where}: window RAM at 0x{addr - base:x} holds {got}"
        else:
            where = f"decoder op {op}: read 0x{word:04x} (seed {seed})"
            resp = await host.read(word, 4)
            want = bytes(model.bytes[word:word + 4]) if ok else bytes(4)
            assert resp.resp == want_resp, f"{where}: rresp {resp.resp!r}, want {want_resp!r}"
            assert resp.data == want, f"{where}: read {resp.data.hex()}, want {want.hex()}"


@cocotb.test(**_TIMEOUT)
async def decoder_routing(dut):
    rng = tbutil.rng(0xDEC)
    clk, rst = dut.clk, dut.rst
    host = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "bus_"), clk, rst)
    (b0, s0), _, (b2, s2) = DecoderBench.WINDOWS
    ram = AxiLiteRam(AxiLiteBus.from_prefix(dut, "ram_"), clk, rst, size=s0)
    small = AxiLiteRam(AxiLiteBus.from_prefix(dut, "small_"), clk, rst, size=s2)
    channels = []
    for port in (host, ram, small):
        channels += [port.write_if.aw_channel, port.write_if.w_channel,
                     port.write_if.b_channel, port.read_if.ar_channel, port.read_if.r_channel]
    _set_pauses(rng, channels, 0.25)
    for port in ("ram", "small"):
        for ch in ("b", "r"):
            getattr(dut, f"{port}__{ch}valid").value = 0
        for ch in ("aw", "w", "ar"):
            getattr(dut, f"{port}__{ch}ready").value = 0
    await _start(dut, ("bus",))
    model = DecoderModel()
    rams = [(b0, s0, ram), (b2, s2, small)]
    workers = [cocotb.start_soon(_decoder_worker(model, host, rams, tbutil.rng(10 + k),
                                                 _ops(250), k)) for k in range(2)]
    for w in workers:
        await w
    # Nothing landed outside its window: the RAMs hold exactly what the model says.
    seed = tbutil.seed()
    assert ram.read(0, s0) == bytes(model.bytes[b0:b0 + s0]), f"window 0 RAM (seed {seed})"
    assert small.read(0, s2) == bytes(model.bytes[b2:b2 + s2]), f"window 2 RAM (seed {seed})"
    await ClockCycles(clk, 2)
    dut._log.info("decoder: routing, offsets and DECERR checked (seed %d)", seed)


@cocotb.test(timeout_time=5, timeout_unit="ms")
async def wide_words(dut):
    """A memory of wide words (``data_width`` above 32): random reads and writes of random
    length and offset through cocotbext-axi's ``AxiMaster`` on ``axi`` (full-width and narrow
    AxSIZE) and ``AxiLiteMaster`` on ``axil`` (each 32-bit lane of a word by its address), with
    random pauses, one at a time, all inside the memory; every read equals a bytearray model,
    and so does the whole memory at the end, read through both ports."""
    prm = tbutil.params()
    size, beat = prm["size_bytes"], prm["data_width"] // 8
    await _start(dut, ("axi", "axil"))
    master = AxiMaster(AxiBus.from_prefix(dut, "axi_"), dut.clk, dut.rst)
    host = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "axil_"), dut.clk, dut.rst)
    rng = tbutil.rng(0xA1D)
    _set_pauses(rng, [master.write_if.aw_channel, master.write_if.w_channel,
                      master.write_if.b_channel, master.read_if.ar_channel,
                      master.read_if.r_channel, host.write_if.aw_channel,
                      host.write_if.w_channel, host.read_if.ar_channel], 0.2)
    model = bytearray(size)
    for i in range(_ops(120)):
        lite = bool(rng.random() < 0.4)
        if lite:
            addr = int(rng.integers(0, size // 4)) * 4
            length = 4 * int(rng.integers(1, 4))
            length = min(length, size - addr)
        else:
            addr = int(rng.integers(0, size))
            length = int(rng.integers(1, min(4 * beat, size - addr) + 1))
        what = f"access {i}: {'AXI-Lite' if lite else 'AXI4'} {length} bytes at 0x{addr:x}"
        if rng.random() < 0.5:
            data = bytes(int(x) for x in rng.integers(0, 256, length))
            if lite:
                await host.write(addr, data)
            else:
                size_code = int(rng.integers(0, beat.bit_length()))
                await master.write(addr, data, size=size_code)
            model[addr:addr + length] = data
        else:
            if lite:
                got = (await host.read(addr, length)).data
            else:
                size_code = int(rng.integers(0, beat.bit_length()))
                got = (await master.read(addr, length, size=size_code)).data
            want = bytes(model[addr:addr + length])
            assert got == want, f"{what}: read {_hex(got)}, model {_hex(want)}"
    got_axi = (await master.read(0, size)).data
    got_lite = (await host.read(0, size)).data
    assert got_axi == bytes(model), "the whole memory through AXI4 differs from the model"
    assert got_lite == bytes(model), "the whole memory through AXI-Lite differs from the model"
