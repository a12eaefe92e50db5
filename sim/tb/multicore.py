"""cocotb testbench: ``hdl.multicore.CoreRing`` (P NeuronCores in a ring) against
``golden.iss.RingISS``.

Each core has its own :class:`sim.host.core.CoreHost` (registers, DRAM); the hosts run their
programs concurrently and the cores meet at COLLECTIVE commands. Afterwards every core's
DRAM, SBUF and PSUM must equal the ISS's, bit for bit. Each core's DRAM pauses at random: on
``hdl.sim_top.RingWithDram`` (what ``tests/hdl/test_multicore_rtl.py`` runs) it is RTL, stalled by
``hdl.sim_top.AxiStalls`` and loaded and read through its backdoor, and each program with a DMA
command checks that it did stall; on ``hdl.multicore.CoreRing`` it is cocotbext-axi's
``AxiRam`` with pause generators.

Tests:

* ``data_parallel`` - core r computes a partial product ``C_r = A_r.T @ B_r`` (its own slice
  of a larger K) into SBUF, an all-reduce over the ring sums the partial C's, and every core
  stores C; then a reduce-scatter and an all-gather of random fp32 data (special values
  included) loaded by DMA, and an all-reduce at the last W partitions (lanes rotated). The
  links run with random latency and stalls.
* ``torus_collectives`` (a CoreRing of ``torus_rows`` 2: a 2 x C torus of cores) - a torus
  all-reduce of fp32 data with special values (``golden.collective.torus_schedule``: rows,
  columns, rows; uneven chunks), a torus all-to-all through a scratch region, then a permute
  down the columns and an all-gather along the rows, each core's program its own schedule:
  every memory against RingISS.
* ``hung_collective`` - three cores enter a COLLECTIVE the fourth never joins: the three wait,
  their debug reads time out (0, STATUS bit 4) instead of stalling the bus, the fourth works;
  then their link watchdogs give up: ERROR = LINK_TIMEOUT at the COLLECTIVE's index, as
  RingISS says; after CTRL clear-error a COLLECTIVE of all four cores (on fresh data) is
  bit-exact with RingISS -- nothing of the abandoned one is left in the links.
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from golden.collective import TorusStep, torus_schedule
from golden.isa import (
    DTYPE_NAMES,
    CollectiveDim,
    CollectiveOp,
    DebugSpace,
    ErrorCode,
    Opcode,
    Status,
    decode,
    encode,
)
from golden.iss import NeuronCoreISS, RingISS
from hdl.core import DEBUG_TIMEOUT, PERF_COUNTERS
from hdl.multicore import CoreRing
from sim.host.core import CoreHost
from sim.host.programs import BF16, FP8_E4M3, FP32, ProgramBuilder
from sim.kernels import library as lib
from sim.kernels.collectives import step_fields
from sim.tb import tbutil, vectors
from sim.tb.memories import DEBUG_READ_EVERY, MemoryCheck


class RingTB:
    """P cores, a host each (DRAM as ``CoreHost`` picks it for the top) and their ISSs;
    ``debug_every`` as for :class:`sim.tb.memories.MemoryCheck`; ``dram_pauses`` the
    probability of a DRAM pause per channel and cycle; ``random_links``: links of random
    latency that stall at random (else latency 1, never stalling)."""

    def __init__(self, dut, *, debug_every: int = DEBUG_READ_EVERY, dram_pauses: float = 0.1,
                 random_links: bool = True):
        self.dut = dut
        self.top = CoreRing(**tbutil.params())
        self.cfg = self.top.iss_config()
        self.P = self.top.ranks
        self.rng = tbutil.rng(0x41)
        self.seed = tbutil.seed()
        self.hosts = [CoreHost(dut, self.cfg, PERF_COUNTERS, dram_pauses=dram_pauses,
                               rng=self.rng, suffix=str(r)) for r in range(self.P)]
        self.random_links = random_links
        self.iss = [NeuronCoreISS(self.cfg) for _ in range(self.P)]
        self.memories = [MemoryCheck(h, iss, self.seed, debug_every=debug_every)
                         for h, iss in zip(self.hosts, self.iss, strict=True)]
        self.check_stalls = self.hosts[0].dram_backend == "memory" and dram_pauses > 0

    async def start(self):
        dut = self.dut
        latency, rate, seed = (int(self.rng.integers(1, 5)), int(self.rng.integers(0, 100)),
                               int(self.rng.integers(1, 1 << 32)))
        if not self.random_links:
            latency, rate = 1, 0
        dut.latency.value, dut.stall_rate.value, dut.stall_seed.value = latency, rate, seed
        dut.stall_reseed.value = 0
        await tbutil.start_clock(dut)
        await tbutil.reset(dut)
        for h in self.hosts:
            await h.wait_idle(20_000)

    def put(self, r, t, bits):
        raw = np.asarray(bits).astype(f"<u{t.size}").reshape(-1).view(np.uint8)
        self.iss[r].dram[t.addr:t.addr + raw.size] = raw
        self.hosts[r].write_dram(t.addr, raw)

    async def run(self, programs, what, *, memories: bool = True):
        """Run one program per core on the RTL and RingISS; compare every core's DRAM, and its
        SBUF and PSUM if ``memories`` (:class:`sim.tb.memories.MemoryCheck`)."""
        want = RingISS(self.iss).run(programs)
        tasks = [cocotb.start_soon(h.run(p)) for h, p in zip(self.hosts, programs, strict=True)]
        results = self.last_results = [await t for t in tasks]
        # The DRAMs' random pauses are met (by some core, in this test so far: a small
        # program's few beats may all miss them).
        moved = [r for r, p in enumerate(programs)
                 if any(decode(w)[0] in (Opcode.DMA_LOAD, Opcode.DMA_STORE) for w in p)]
        if self.check_stalls and moved:
            assert any(self.hosts[r].dram_stalls() > 0 for r in moved), \
                f"{what}: no core's DRAM stalled yet (cores {moved} moved data)"
        for r, (res, code) in enumerate(zip(results, want, strict=True)):
            assert res.error == code == ErrorCode.OK, \
                f"{what}: core {r} RTL {res.error.name}, ISS {code.name} (seed {self.seed})"
            await self.compare(r, what, memories)
        self.dut._log.info("%s: %s cycles, collective busy %s", what,
                           [res.cycles for res in results],
                           [res.perf["collective_busy"] for res in results])

    async def compare(self, r, what, memories: bool = True):
        h, iss = self.hosts[r], self.iss[r]
        dram = h.read_dram()
        assert np.array_equal(dram, iss.dram), \
            f"{what}: core {r} DRAM differs at {np.flatnonzero(dram != iss.dram)[:8]} " \
            f"(seed {self.seed})"
        if memories:
            await self.memories[r](f"{what}: core {r}")

    def data_parallel(self, k: int, m: int, f: int, a_fmt: int, b_fmt: int,
                      specials: float) -> tuple[list, list]:
        """Programs in which core r computes ``C_r = A_r.T @ B_r`` (K x M, K x F, random
        operands of the formats given) in SBUF, all-reduces it over the ring and stores it:
        (programs, the DRAM tensor C of each core)."""
        programs, outs = [], []
        for r in range(self.P):
            def build(kern, ws):
                a = kern.dram_tensor((k, m), a_fmt, "a", data=vectors.operands(
                    DTYPE_NAMES[a_fmt], self.rng, (k, m), specials))
                b = kern.dram_tensor((k, f), b_fmt, "b", data=vectors.operands(
                    DTYPE_NAMES[b_fmt], self.rng, (k, f), specials))
                c = kern.dram_tensor((m, f), FP32, "c")
                lib.data_parallel_gemm(ws, a, b, c)
                return c

            kern, c = lib.traced(self.cfg, build, rank=r, ranks=self.P)
            image = kern.dram[:kern.dram_top]
            self.iss[r].dram[:image.size] = image
            self.hosts[r].write_dram(0, image)
            programs.append(kern.program)
            outs.append(c)
        return programs, outs


@cocotb.test(**tbutil.timeout(10))
async def data_parallel(dut):
    tb = RingTB(dut)
    await tb.start()
    cfg, rng = tb.cfg, tb.rng
    n, w, W = cfg.n, cfg.psum_words, cfg.link_width
    k, m, f = 2 * n + 1, W, w - 1
    programs, outs = tb.data_parallel(k, m, f, BF16, FP8_E4M3, 0.02)
    await tb.run(programs, "data-parallel GEMM + all-reduce")
    c = outs[0]
    results = [tb.hosts[r].read_dram(c.addr, c.shape[0] * c.shape[1] * 4).view("<u4")
               for r in range(tb.P)]
    assert all(np.array_equal(results[0], x) for x in results), "ranks differ after all-reduce"

    # Reduce-scatter, then all-gather, of fp32 data with special values.
    cols = 3 * tb.P + 1
    programs = []
    for r in range(tb.P):
        pb = ProgramBuilder(cfg)
        t = pb.alloc(W, cols, FP32)
        tb.put(r, t, vectors.cast_inputs("bf16", rng, W * cols).astype(np.uint32))
        pb.load(t, 0, W, 0, cols, 5)
        pb.emit(Opcode.COLLECTIVE, coll_op=1, part=0, rows=W, sbuf_addr=5, cols=cols,
                dst_addr=0, shift=0)
        pb.emit(Opcode.COLLECTIVE, coll_op=2, part=0, rows=W, sbuf_addr=5, cols=cols,
                dst_addr=0, shift=0)
        # At partitions n - W ..: rotated lanes.
        pb.emit(Opcode.COLLECTIVE, coll_op=0, part=n - W, rows=W, sbuf_addr=5, cols=cols,
                dst_addr=0, shift=0)
        pb.store(t, 0, W, 0, cols, 5)
        programs.append(pb.program)
    await tb.run(programs, "reduce-scatter + all-gather")

    # An all-to-all of uneven chunks, then a permute of its result (bits moved, NaN payloads
    # included), into words past the source: every memory against RingISS.
    cols = 2 * tb.P + 1
    a2a = tb.P * -(-cols // tb.P)
    total = cols + a2a + a2a
    shift = int(rng.integers(1, tb.P))
    programs = []
    for r in range(tb.P):
        pb = ProgramBuilder(cfg)
        t = pb.alloc(W, total, FP32)
        tb.put(r, t, vectors.operands("fp32", rng, W * total, specials=0.1).astype(np.uint32))
        pb.load(t, 0, W, 0, total, 2)
        pb.emit(Opcode.COLLECTIVE, coll_op=CollectiveOp.ALL_TO_ALL, part=0, rows=W,
                sbuf_addr=2, cols=cols, dst_addr=2 + cols, shift=0)
        pb.emit(Opcode.COLLECTIVE, coll_op=CollectiveOp.PERMUTE, part=n - W, rows=W,
                sbuf_addr=2 + cols, cols=a2a, dst_addr=2 + cols + a2a, shift=shift)
        pb.store(t, 0, W, 0, total, 2)
        programs.append(pb.program)
    await tb.run(programs, f"all-to-all + permute by {shift}")


@cocotb.test(**tbutil.timeout(10))
async def torus_collectives(dut):
    tb = RingTB(dut)
    assert tb.top.torus_rows >= 2, "torus_collectives runs on a torus (torus_rows >= 2)"
    await tb.start()
    cfg, rng = tb.cfg, tb.rng
    R, W = tb.top.torus_rows, cfg.link_width
    C = tb.P // R
    # An all-reduce of 2C + 1 columns (uneven chunks along the rows); an all-to-all of P·2
    # columns through a scratch region; a permute by 1 down the columns and an all-gather
    # along the rows of 2C + 1 columns.
    ar = 2 * C + 1
    a2a = 2 * tb.P
    base = 1
    plans = [
        ("torus all-reduce", ar,
         torus_schedule(CollectiveOp.ALL_REDUCE, ar * W, R, C, W), 0),
        ("torus all-to-all", 3 * a2a,
         torus_schedule(CollectiveOp.ALL_TO_ALL, a2a * W, R, C, W, addr=0, tmp=a2a,
                        dst=2 * a2a), 0),
        ("permute down the columns, all-gather along the rows", 2 * ar,
         [[TorusStep(CollectiveOp.PERMUTE, CollectiveDim.COLUMN, 0, ar * W, ar),
           TorusStep(CollectiveOp.ALL_GATHER, CollectiveDim.ROW, ar, ar * W, 0)]] * tb.P, 1),
    ]
    for what, total, schedule, shift in plans:
        programs = []
        for r in range(tb.P):
            pb = ProgramBuilder(cfg)
            t = pb.alloc(W, total, FP32)
            tb.put(r, t, vectors.operands("fp32", rng, W * total, specials=0.05)
                   .astype(np.uint32))
            pb.load(t, 0, W, 0, total, base)
            for step in schedule[r]:
                pb.emit(Opcode.COLLECTIVE, **step_fields(step, part=0, base=base,
                                                         link_width=W, shift=shift))
            pb.store(t, 0, W, 0, total, base)
            programs.append(pb.program)
        await tb.run(programs, f"{what} on a {R}x{C} torus")


@cocotb.test(timeout_time=2, timeout_unit="ms")  # a bus that stalls fails, never hangs
async def hung_collective(dut):
    """A COLLECTIVE that one core never joins stops the others until their link watchdog
    gives up (LINK_TIMEOUT, as RingISS says); meanwhile their register bus still answers: a
    debug read gives up after DEBUG_TIMEOUT cycles with 0 and STATUS bit 4, which CTRL
    clears; the core left out works normally. A soft reset of one waiting core abandons it at
    once (and empties its outgoing link). After clear-error, a COLLECTIVE of every core works,
    bit-exact."""
    tb = RingTB(dut)
    await tb.start()
    W, P, T = tb.cfg.link_width, tb.P, tb.top.watchdog_cycles
    assert T > DEBUG_TIMEOUT + 1000, "the watchdog must outlast the debug read's timeout"
    coll = encode(Opcode.COLLECTIVE, coll_op=CollectiveOp.ALL_REDUCE, part=0, rows=W,
                  sbuf_addr=0, cols=4, dst_addr=0, shift=0)
    want = RingISS(tb.iss).run([[coll]] * (P - 1) + [[]])
    assert want == [ErrorCode.LINK_TIMEOUT] * (P - 1) + [ErrorCode.OK], want
    for r in range(P - 1):
        await tb.hosts[r].push(coll)
    await ClockCycles(dut.clk, 300)
    # A soft reset of a core waiting in the COLLECTIVE abandons it as the watchdog would: its
    # outgoing link is flushed too, else core P-1 would take its stale beats in the all-reduce
    # at the end.
    reset = P - 2
    await tb.hosts[reset].soft_reset()
    tb.iss[reset].soft_reset()
    assert await tb.hosts[reset].error() == (ErrorCode.OK, 0), "the soft reset left an error"
    hung, free = tb.hosts[0], tb.hosts[P - 1]
    assert await hung.status() & Status.BUSY, "the COLLECTIVE finished without core P-1"
    assert await hung.debug_read(DebugSpace.SBUF, 0, 0) == 0
    status = await hung.status()
    busy_timeout = Status.BUSY | Status.DEBUG_TIMEOUT
    assert status & busy_timeout == busy_timeout, \
        f"STATUS 0x{status:x}: still busy, timeout flagged"
    await hung.clear_error()
    assert not await hung.status() & Status.DEBUG_TIMEOUT, \
        "CTRL bit 1 did not clear the timeout flag"
    res = await free.run([encode(Opcode.DMA_LOAD, dtype=FP32, part=0, rows=1, sbuf_addr=0,
                                 cols=4, dram_addr=0, dram_stride=0)])
    assert res.error == ErrorCode.OK and res.executed == 1
    tb.iss[P - 1].run([encode(Opcode.DMA_LOAD, dtype=FP32, part=0, rows=1, sbuf_addr=0,
                              cols=4, dram_addr=0, dram_stride=0)])
    await tb.compare(P - 1, "the core outside the hung COLLECTIVE")

    # The watchdog: each core that entered gives up T cycles after its links went quiet.
    for r in (q for q in range(P - 1) if q != reset):
        await tb.hosts[r].wait_idle(T + 2000)
        code, index = await tb.hosts[r].error()
        assert (code, index) == (ErrorCode.LINK_TIMEOUT, tb.iss[r].error_index), \
            f"core {r}: ERROR {code.name} at {index}, want LINK_TIMEOUT (seed {tb.seed})"
        assert await tb.hosts[r].read("EXECUTED") == tb.iss[r].executed == 1
        await tb.hosts[r].clear_error()
        tb.iss[r].clear_error()
    # A COLLECTIVE of every core, on fresh data (the abandoned buffer is undefined), its
    # result stored: every core's DRAM bit-exact with RingISS. (SBUF and PSUM through debug
    # reads would take most of this test's time: data_parallel compares them.)
    # 32 words a row: enough AXI transfers that every core's DRAM stalls (run() checks it);
    # with 4, a core's few transfers met no stall for some timings.
    programs, cols = [], 32
    for r in range(P):
        pb = ProgramBuilder(tb.cfg)
        t, out = pb.alloc(W, cols, FP32), pb.alloc(W, cols, FP32)
        tb.put(r, t, vectors.operands("fp32", tb.rng, (W, cols), 0.05))
        pb.load(t, 0, W, 0, cols, 0)
        pb.emit(Opcode.COLLECTIVE, coll_op=0, part=0, rows=W, sbuf_addr=0, cols=cols,
                dst_addr=0, shift=0)
        pb.store(out, 0, W, 0, cols, 0)
        programs.append(pb.program)
    await tb.run(programs, "an all-reduce of every core after the link timeout",
                 memories=False)
