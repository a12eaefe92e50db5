"""cocotb testbench: a NeuronCore running programs, against the golden ISS.

The host side is :class:`sim.host.core.CoreHost` (cocotbext-axi ``AxiLiteMaster`` on the registers)
with either DRAM: on ``hdl.core.NeuronCore``, cocotbext-axi's ``AxiRam`` with random pauses on
every channel (Python for every AXI4 beat); on ``hdl.sim_top.CoreWithDram``, the RTL memory
behind ``hdl.sim_top.AxiStalls``, which pause every channel at the same rate, loaded and read
through its backdoor (no Python per beat; each program with a DMA command then checks that
DRAM did stall). Every test runs on either top but ``dram_faults``, which needs ``AxiRam``'s
error responses. ``tests/hdl/test_core_rtl.py`` runs the programs whose subject is the
computation (``gemm_tiled``, ``dense_sr``, ``mlp_forward``, ``vector_commands``) on
``CoreWithDram``, and those whose subject is the bus, its errors or the sequencer's order under
``AxiRam``'s timing (``random_commands``,
``hazards``, ``errors``, ``dram_faults``) on ``NeuronCore``. Every program runs on the RTL and
on ``golden.iss.NeuronCoreISS`` from the same state; afterwards the error code, the failing
command's index, the executed count, and **every byte of DRAM, every SBUF word and every PSUM
word** must be equal (bit for bit: the RTL and the ISS emit the same canonical NaNs).

Tests (the runner picks one per pytest case with ``testcase``):

* ``gemm_tiled`` - tiled GEMMs with K > N (PSUM accumulation over K tiles), M and F not
  multiples of N or the bank, bf16 and fp8 operands with special values, fp32 results.
* ``dense_sr`` - dense layers ``cast(relu(W.T @ X + b))`` with SR output after SET_SEED
  (bf16, and fp8-e4m3 with saturation), then bf16 with RNE and fp8-e5m2 with RTZ.
* ``mlp_forward`` - a 2-layer MLP forward pass after SET_SEED (bf16 relu hidden layer,
  fp8-e4m3 output with SR).
* ``vector_commands`` - the vector engine's commands: every operation of TENSOR_TENSOR and
  TENSOR_SCALAR on SBUF operands of every dtype and PSUM operands, reductions, transposes,
  casts with RNE / RTZ / SR, and the PSUM hazards of a second operand.
* ``random_commands`` - random legal commands at random partitions and addresses (DMA with
  strides, LOAD_STATIONARY / MATMUL with ``part`` != 0, ACTIVATE from PSUM and from SBUF,
  in place, with bias, SET_SEED, BARRIER; on a core with the vector engine also
  TENSOR_TENSOR, TENSOR_SCALAR (special scalars too), TENSOR_REDUCE from SBUF and PSUM and
  TRANSPOSE), so consecutive commands often touch the same words and the sequencer's hazard
  checks decide the result.
* ``errors`` - every error of ``sim.host.programs.error_programs`` after a legal prefix, with
  legal commands behind it: the error code and index, nothing executed after it (the core
  drops them), memories unchanged; then CTRL clear-error and a legal program; a soft reset
  (EXECUTED 0, the stationary tile gone, the PRNG reseeded with 0) - each ends in a reported
  error or a completed program, never a timeout.
* ``sparse_matmul`` - a core with the sparse mode: compressed tiles of every pattern, K
  full, short and 1, moving tiles in the sparse layout with inf and NaN in rows no column
  keeps, the library's sparse GEMM; bad tags (BAD_TAGS), a reserved sparsity.
* ``dram_faults`` - a tiled GEMM whose DRAM (``sim.host.core.DramFaults``) answers SLVERR, then
  DECERR, to one word of an operand (R, during a DMA_LOAD) or of the result (B, during a
  DMA_STORE): ERROR = BUS_ERROR with the index of the first DMA command touching that word,
  the queue stopped (a program pushed then is dropped); after CTRL clear-error (the last
  case: a soft reset) the same program on good DRAM is bit-exact with the ISS.
* ``hazards`` - each ordering the sequencer enforces (DMA load / MATMUL / ACTIVATE against the
  SBUF rectangles and the PSUM banks, partitions and words of a command in flight), in a
  program where breaking it changes the result (each of the six rules was once removed from
  the sequencer: this test caught it), and cases where a record too small would (a bank
  released by another bank's MATMUL, a partition or PSUM words left out of a region); then
  PSUM ping-pong: an ACTIVATE of bank 0 behind MATMULs to bank 1 costs no busy cycle.
"""

from __future__ import annotations

import cocotb
import numpy as np
from cocotbext.axi import AxiResp

from golden.isa import (
    DTYPE_BYTES,
    OPERAND_DTYPES,
    ActivationFunc,
    AluOp,
    DebugSpace,
    Dtype,
    ErrorCode,
    Opcode,
    Rounding,
    Status,
    decode,
    encode,
)
from golden.iss import CommandError, NeuronCoreISS
from hdl.core import PERF_COUNTERS, NeuronCore
from sim.host import programs as pg
from sim.host.core import CoreHost
from sim.host.programs import BF16, FP8_E4M3, FP8_E5M2, FP16, FP32, ProgramBuilder
from sim.kernels import isa as nisa
from sim.kernels import library as lib
from sim.tb import tbutil, vectors
from sim.tb.memories import DEBUG_READ_EVERY, MemoryCheck
from sim.verify import coverage

_FMT_NAMES = {d: d.golden_name for d in OPERAND_DTYPES}
_RNE, _RTZ, _SR = Rounding.RNE, Rounding.RTZ, Rounding.SR


class CoreTB:
    """One core, its host (DRAM as ``CoreHost`` picks it for the top) and its ISS.
    ``dram_pauses``: the probability of a DRAM pause per channel and cycle; ``debug_every``:
    how often SBUF and PSUM are compared through the debug registers (:class:`MemoryCheck`);
    ``play``: programs are pushed by the top's register player (``sim.host.core.CoreHost``
    with ``queue_depth``; ``hdl.sim_top`` tops only)."""

    def __init__(self, dut, dram_pauses: float = 0.2, *, debug_every: int = DEBUG_READ_EVERY,
                 play: bool = False):
        self.dut = dut
        self.core = NeuronCore(**tbutil.params())
        self.cfg = self.core.iss_config()
        self.iss = NeuronCoreISS(self.cfg)
        self.rng = tbutil.rng(0xC0E)
        self.seed = tbutil.seed()
        self.host = CoreHost(dut, self.cfg, PERF_COUNTERS, dram_pauses=dram_pauses,
                             rng=self.rng,
                             queue_depth=self.core.queue_depth if play else None)
        self.memories = MemoryCheck(self.host, self.iss, self.seed, debug_every=debug_every)
        # The RTL DRAM's stalls are checked after each program with a DMA command.
        self.check_stalls = self.host.dram_backend == "memory" and dram_pauses > 0

    def need_axiram(self, test: str) -> None:
        if self.host.dram_backend != "axiram":
            raise AssertionError(f"{test} needs cocotbext-axi's AxiRam as DRAM (the top "
                                 f"hdl.core:NeuronCore), not the RTL memory")

    async def start(self):
        await tbutil.start_clock(self.dut)
        await tbutil.reset(self.dut)
        await self.host.check_id()
        await self.host.wait_idle(20_000)  # the PRNG lanes seed themselves after reset

    def dram(self, data, addr: int = 0):
        d = np.asarray(data, dtype=np.uint8).reshape(-1)
        self.iss.dram[addr:addr + d.size] = d
        self.host.write_dram(addr, d)

    def load(self, build, *, workspace: bool = True) -> list:
        """Trace ``build(kern, ws)`` (``sim.kernels.library.traced``: DRAM tensors with their
        data, then the library's programs), write its DRAM image into both DRAMs; returns the
        program (what ``build`` returned: :attr:`last_tensors`). Without ``workspace``,
        ``build(kern, None)`` places its own tiles (no SBUF plan of the library's, so a core
        smaller than it needs runs it)."""
        if workspace:
            kern, self.last_tensors = lib.traced(self.cfg, build)
        else:
            from sim.kernels.trace import Kernel, tracing

            kern = Kernel(self.cfg, 0, 1)
            with tracing(kern):
                self.last_tensors = build(kern, None)
        self.dram(kern.dram[:kern.dram_top], 0)
        return kern.program

    def put(self, t, bits):
        """Write a DRAM tensor's bit patterns to both DRAMs."""
        size = t.size
        raw = np.asarray(bits).astype(f"<u{size}").reshape(-1).view(np.uint8)
        self.dram(raw, t.addr)

    async def run(self, program, what: str, *, compare: bool = True, memories: bool = True,
                  burst: bool = True):
        before = self.iss.executed
        stopped = self.iss.error != ErrorCode.OK  # the queue drops the whole program
        code = self.iss.run(program)
        res = await self.host.run(program, burst=burst)
        # The DRAM's random pauses are met (by this test so far: a small program's few beats
        # may all miss them).
        if self.check_stalls and any(decode(w)[0] in (Opcode.DMA_LOAD, Opcode.DMA_STORE)
                                     for w in program):
            assert self.host.dram_stalls() > 0, f"{what}: the RTL DRAM never stalled yet"
        coverage.core_program(program, res, stopped)
        want_index = self.iss.error_index if code != ErrorCode.OK else None
        if stopped:
            res.error_index = want_index = None
        assert (res.error, res.error_index) == (code, want_index), \
            (f"{what}: RTL error {res.error.name} at {res.error_index}, ISS {code.name} at "
             f"{want_index} ({self.iss.error_reason}) (seed {self.seed})")
        assert res.executed == self.iss.executed - before, \
            f"{what}: RTL executed {res.executed}, ISS {self.iss.executed - before}"
        if compare:
            await self.compare(what, memories)
        self.dut._log.info("%s: %d commands, %d cycles, %s", what, len(program), res.cycles,
                           res.perf)
        return res

    async def compare(self, what: str, memories: bool = True):
        """DRAM always; SBUF and PSUM (read through the debug registers) if ``memories``."""
        dram = self.host.read_dram()
        bad = np.flatnonzero(dram != self.iss.dram)
        assert bad.size == 0, (f"{what}: DRAM differs at {bad.size} bytes, first at "
                               f"0x{bad[0]:x}: RTL {dram[bad[:8]]}, ISS {self.iss.dram[bad[:8]]}"
                               f" (seed {self.seed})")
        if memories:
            await self.memories(what)

    def operands(self, fmt, shape, specials=0.1):
        return vectors.operands(_FMT_NAMES[fmt], self.rng, shape, specials)

    def fp32(self, shape, scale=1.0):
        return (self.rng.standard_normal(shape) * scale).astype(np.float32).view(np.uint32)


async def _started(dut) -> CoreTB:
    tb = CoreTB(dut)
    await tb.start()
    return tb


@cocotb.test(**tbutil.timeout(20))
async def gemm_tiled(dut):
    tb = await _started(dut)
    n, w = tb.cfg.n, tb.cfg.psum_words
    for fa, fb, (m, k, f) in ((BF16, BF16, (n + 2, 2 * n + 3, w + 5)),
                              (FP8_E4M3, FP8_E5M2, (n - 1, 3 * n, 2 * w)),
                              (FP8_E5M2, BF16, (1, n + 1, 3))):
        def build(kern, ws, fa=fa, fb=fb, m=m, k=k, f=f):
            a = kern.dram_tensor((k, m), fa, "a", data=tb.operands(fa, (k, m)))
            b = kern.dram_tensor((k, f), fb, "b", data=tb.operands(fb, (k, f)))
            lib.gemm(ws, a, b, kern.dram_tensor((m, f), FP32, "c"))

        program = tb.load(build)
        before = await tb.host.perf()
        res = await tb.run(program, f"GEMM {m}x{k}x{f} {_FMT_NAMES[fa]} x {_FMT_NAMES[fb]}")
        p = {key: res.perf[key] - before[key] for key in res.perf}
        # One MATMUL column per (M tile, K tile, column of B).
        assert p["moving_columns"] == -(-m // n) * -(-k // n) * f, p
        # Engines overlap: the core was busy for fewer cycles than its engines in sum (the
        # DMA of the next tile runs while the tensor engine works on this one). With fewer
        # than n columns of B (1 x 5 x 3) the MATMULs are a few beats long and the overlap
        # is a few cycles or none: there, no cycle goes by with only the sequencer busy.
        engines = p["tensor_busy"] + p["dma_busy"] + p["activation_busy"]
        assert p["busy"] < engines if f >= n else p["busy"] <= engines, p


@cocotb.test(**tbutil.timeout(20))
async def played_pushes(dut):
    """Programs pushed by the top's register player (``hdl.sim_top``): a GEMM of more
    descriptors than the queue holds with a burst, another without (every push polls FULL),
    each bit-exact with the ISS and none dropped (no OVERFLOW); a burst's writes take three
    cycles each (``hdl.register_player``)."""
    tb = CoreTB(dut, play=True)
    await tb.start()
    n, depth = tb.cfg.n, tb.core.queue_depth
    for burst, (m, k, f) in ((True, (2 * n + 1, 3 * n, 40)), (False, (n + 1, 2 * n, 9))):
        def build(kern, ws, m=m, k=k, f=f):
            a = kern.dram_tensor((k, m), BF16, "a", data=tb.operands(BF16, (k, m)))
            b = kern.dram_tensor((k, f), BF16, "b", data=tb.operands(BF16, (k, f)))
            lib.gemm(ws, a, b, kern.dram_tensor((m, f), FP32, "c"))

        program = tb.load(build)
        assert len(program) > depth or not burst, (len(program), depth)
        await tb.run(program, f"GEMM {m}x{k}x{f} played with{'out' * (not burst)} a burst",
                     burst=burst)
        assert not await tb.host.status() & Status.OVERFLOW, "a played PUSH was dropped"
        accesses, cycles = tb.host.last_played
        if burst:  # the queue was empty: a burst of `depth`, then a poll before each push
            assert accesses == len(tb.host.push_accesses(program, depth)) \
                == 2 + 9 * depth + 10 * (len(program) - depth)
        else:
            assert accesses == 10 * len(program)  # a poll, eight words and PUSH each
    # A burst alone (the queue paused, room for all): three cycles a write.
    program = tb.load(lambda kern, ws: lib.gemm(
        ws, kern.dram_tensor((n, n), BF16, "a", data=tb.operands(BF16, (n, n))),
        kern.dram_tensor((n, 4), BF16, "b", data=tb.operands(BF16, (n, 4))),
        kern.dram_tensor((n, 4), FP32, "c")))
    assert len(program) < depth
    await tb.run(program, "a GEMM in one burst")
    accesses, cycles = tb.host.last_played
    assert accesses == len(tb.host.push_accesses(program, depth))
    assert 3 * accesses <= cycles <= 3 * accesses + 2, (accesses, cycles)


@cocotb.test(**tbutil.timeout(20))
async def dense_sr(dut):
    tb = await _started(dut)
    n = tb.cfg.n
    for dtype, mode, seed in ((BF16, _SR, 0x5EED), (FP8_E4M3, _SR, 12345), (BF16, _RNE, None),
                              (FP8_E5M2, _RTZ, None)):
        k, m, f = n + 3, n + 1, 9

        def build(kern, ws, dtype=dtype, mode=mode, seed=seed, k=k, m=m, f=f):
            wt = kern.dram_tensor((k, m), BF16, "w", data=tb.operands(BF16, (k, m), 0.05))
            x = kern.dram_tensor((k, f), BF16, "x", data=tb.operands(BF16, (k, f), 0.05))
            bias = kern.dram_tensor((m, 1), FP32, "bias", data=tb.fp32((m, 1)))
            if seed is not None:
                nisa.set_seed(seed)
            lib.dense(ws, wt, x, bias, dtype=dtype, mode=mode)

        await tb.run(tb.load(build), f"dense layer to {dtype.golden_name} {mode.golden_name} "
                                     f"seed {seed}")


@cocotb.test(**tbutil.timeout(20))
async def mlp_forward(dut):
    tb = await _started(dut)
    n = tb.cfg.n
    d_in, d_h, d_out, batch = n + 2, 2 * n - 1, 3, 11

    def build(kern, ws):
        x = kern.dram_tensor((d_in, batch), BF16, "x",
                             data=tb.operands(BF16, (d_in, batch), 0.02))
        w1 = kern.dram_tensor((d_in, d_h), BF16, "w1", data=tb.operands(BF16, (d_in, d_h), 0.02))
        b1 = kern.dram_tensor((d_h, 1), FP32, "b1", data=tb.fp32((d_h, 1)))
        w2 = kern.dram_tensor((d_h, d_out), BF16, "w2",
                              data=tb.operands(BF16, (d_h, d_out), 0.02))
        b2 = kern.dram_tensor((d_out, 1), FP32, "b2", data=tb.fp32((d_out, 1)))
        nisa.set_seed(2026)
        lib.mlp(ws, x, [dict(w=w1, bias=b1, dtype=BF16),
                        dict(w=w2, bias=b2, dtype=FP8_E4M3, mode=_SR,
                             func=ActivationFunc.IDENTITY)])

    await tb.run(tb.load(build), "2-layer MLP")


@cocotb.test(**tbutil.timeout(20))
async def vector_commands(dut):
    """The vector engine's commands through the core: every operation of tensor_tensor (SBUF x
    SBUF of mixed dtypes, PSUM x SBUF, PSUM x PSUM), tensor_scalar (either side, in place,
    from PSUM), reductions (add, max, min; SBUF of any dtype or PSUM) and transposes (all
    partitions, or a few from partition 1 to partition 2), casts to every dtype with RNE, RTZ
    and SR (after SET_SEED), operands with special values; a MATMUL behind a TENSOR_TENSOR
    reading its PSUM words as the second operand, and one in front of it; every memory
    bit-exact with the ISS."""
    from golden.isa import AluOp
    from sim.kernels import language as nl

    tb = await _started(dut)
    n = tb.cfg.n
    f = n + 2  # room for an n x n transpose from column 2

    def build(kern, ws):
        srcs = {dt: kern.dram_tensor((n, f), dt, f"in_{dt.golden_name}",
                                     data=vectors.operands(dt.golden_name, tb.rng, (n, f), 0.2))
                for dt in (BF16, FP8_E4M3, FP8_E5M2, FP16, FP32)}
        tiles = {}
        for dt, t in srcs.items():
            tiles[dt] = nl.ndarray((n, f), dt, buffer=nl.sbuf)
            nisa.dma_copy(tiles[dt], t)
        # Two PSUM tiles: the products of bf16 operands (specials included).
        st = nl.ndarray((n, n), BF16, buffer=nl.sbuf)
        nisa.dma_copy(st, srcs[BF16][:, 0:n])
        ps = [nl.ndarray((n, f), FP32, buffer=nl.psum) for _ in range(2)]
        for i, p in enumerate(ps):
            nisa.nc_matmul(p, st, tiles[[BF16, FP8_E5M2][i]])
        nisa.set_seed(0xFEED)
        dtypes = [BF16, FP8_E4M3, FP8_E5M2, FP16, FP32]
        modes = ["rne", "rtz", "sr"]
        outs = [nl.ndarray((n, f), dt, buffer=nl.sbuf) for dt in dtypes]
        operands = [(tiles[BF16], tiles[FP32]), (ps[0], tiles[FP8_E4M3]), (ps[0], ps[1]),
                    (tiles[FP16], tiles[FP8_E5M2])]
        for k, op in enumerate(AluOp):
            a, b = operands[k % len(operands)]
            nisa.tensor_tensor(outs[k % 5], a, b, op, rounding=modes[k % 3])
            nisa.tensor_scalar(outs[(k + 2) % 5], b, op, [-1.5, 0.0, 3.0][k % 3],
                               reverse=bool(k % 2), rounding=modes[(k + 1) % 3])
        nisa.tensor_scalar(outs[4], outs[4], AluOp.MULTIPLY, 0.5)  # in place
        nisa.tensor_tensor(tiles[FP32][1:3], tiles[FP32][1:3], ps[1][1:3], AluOp.ADD)
        red = nl.ndarray((n, 3), FP32, buffer=nl.sbuf)
        for k, (op, src) in enumerate(((AluOp.ADD, tiles[FP32]), (AluOp.MAX, tiles[BF16]),
                                       (AluOp.MIN, ps[1]))):
            nisa.tensor_reduce(red[:, k:k + 1], src, op, rounding=modes[k])
        nisa.tensor_reduce(outs[0][1:4, 5:6], tiles[FP8_E4M3][1:4], AluOp.ADD, rounding="sr")
        # A reduction of a whole PSUM bank: more columns than SBUF words where the core's
        # PSUM is wider (the N = 8 build of tests/hdl/test_core_rtl.py).
        bank = nl.ndarray((n, tb.cfg.psum_words), FP32, buffer=nl.psum)
        nisa.nc_matmul(bank[:, 0:f], st, tiles[FP8_E4M3])
        nisa.tensor_reduce(red[:, 1:2], bank, AluOp.ADD)
        tr = nl.ndarray((n, n), BF16, buffer=nl.sbuf)
        nisa.nc_transpose(tr, tiles[BF16][:, 2:2 + n])
        tr2 = nl.ndarray((n, 3), FP32, buffer=nl.sbuf)
        nisa.nc_transpose(tr2[2:4], tiles[FP32][1:4, 0:2])
        # Hazards on the second operand: a MATMUL must wait while a TENSOR_TENSOR (stalled
        # while the PRNG lanes seed) still reads its PSUM words, and the next TENSOR_TENSOR
        # until the MATMUL has written them.
        nisa.set_seed(7)
        nisa.tensor_tensor(outs[1], tiles[FP32], ps[1], AluOp.SUBTRACT, rounding="sr")
        nisa.nc_matmul(ps[1], st, tiles[BF16])
        nisa.tensor_tensor(outs[2], tiles[FP8_E5M2], ps[1], AluOp.MULTIPLY)

    await tb.run(tb.load(build, workspace=False), "vector commands")


def _sparse_case(tb, p: str, fa, fb, k: int, m: int, f: int, *, tags_edit=None):
    """A program of a compressed K x M tile in pattern ``p`` (DMA of its packed words),
    moving tiles in the sparse layout, LOAD_STATIONARY, MATMUL (overwrite, then accumulate),
    the result through ACTIVATE to SBUF and DMA_STORE to DRAM. The moving tiles' rows that
    no column keeps hold inf and NaN. DRAM from 0x100 on."""
    from golden.formats import to_fp32_bits
    from golden.isa import Sparsity
    from golden.sparse import compress, moving_layout, pack_words, pattern

    rng, n = tb.rng, tb.cfg.n
    pat = pattern(p)
    mask = vectors.sparse_mask(rng, pat, k, m)
    values, tags = compress(tb.operands(fa, (k, m)), _FMT_NAMES[fa], mask, pat)
    if tags_edit:
        tags_edit(tags)
    pruned = np.flatnonzero(~mask.any(axis=1))
    specials = vectors.special_bits(_FMT_NAMES[fb])
    wide = to_fp32_bits(specials, _FMT_NAMES[fb]).view(np.float32)
    nan_inf = specials[~np.isfinite(wide)]
    size = DTYPE_BYTES[fb]
    tile_at, mv_at, out_at = 0x100, 0x400, 0xC00
    layouts = []
    for _ in range(2):
        mv = tb.operands(fb, (k, f))
        if pruned.size and nan_inf.size:
            mv[pruned] = rng.choice(nan_inf, (pruned.size, f))
        layouts.append(moving_layout(mv, pat))
    rows, cols = layouts[0].shape
    tb.dram(pack_words(values, tags).astype("<u4").view(np.uint8), tile_at)
    for i, lay in enumerate(layouts):
        tb.dram(lay.astype(f"<u{size}").view(np.uint8), mv_at + i * rows * cols * size)
    code = [s for s in Sparsity if s.pattern == p][0]
    s_rows = values.shape[0]
    mv_words = [8, 8 + cols]  # SBUF words of the two moving tiles
    prog = [encode(Opcode.DMA_LOAD, dtype=FP32, part=0, rows=s_rows, sbuf_addr=0, cols=m,
                   dram_addr=tile_at, dram_stride=4 * m)]
    prog += [encode(Opcode.DMA_LOAD, dtype=fb, part=0, rows=rows, sbuf_addr=mv_words[i],
                    cols=cols, dram_addr=mv_at + i * rows * cols * size,
                    dram_stride=cols * size) for i in range(2)]
    prog += [encode(Opcode.LOAD_STATIONARY, fmt=fa, part=0, k=k, m=m, sbuf_addr=0,
                    sparsity=int(code))]
    prog += [encode(Opcode.MATMUL, fmt=fb, part=0, k=k, f=f, sbuf_addr=mv_words[i], bank=1,
                    psum_addr=0, accumulate=i) for i in range(2)]
    out = 8 + 2 * cols
    prog += [encode(Opcode.ACTIVATE, func=ActivationFunc.IDENTITY, src_sbuf=0, part=0, rows=m,
                    cols=f, src_bank=1, src_addr=0, bias_en=0, bias_addr=0, scale=0x3F800000,
                    dtype=FP32, mode=_RNE, saturate=0, dst_addr=out),
             encode(Opcode.DMA_STORE, dtype=FP32, part=0, rows=m, sbuf_addr=out, cols=f,
                    dram_addr=out_at, dram_stride=4 * f)]
    assert out + f <= tb.cfg.sbuf_words and n >= s_rows
    return prog


@cocotb.test(**tbutil.timeout(30))
async def sparse_matmul(dut):
    """A sparse core (``sparse``): for every pattern and format pairs, a compressed tile with
    K = R·n (full), a short last group, and K = 1; its MATMULs read moving tiles in the sparse
    layout with inf and NaN in the rows no column keeps; every memory bit-exact with the ISS.
    Then the error path: tags past their group and tags not increasing are BAD_TAGS at the
    LOAD_STATIONARY's index, counted, with nothing after it executed; after CTRL clear-error
    a MATMUL is BAD_SHAPE (the tile was forgotten) and a good tile runs again; the library's
    sparse GEMM (the kernel API's compressed tiles) for 4:16 and 2:4; a reserved sparsity is
    BAD_FIELD."""
    from golden.sparse import PATTERNS, pattern

    tb = await _started(dut)
    n = tb.cfg.n
    fmts = [BF16, FP8_E4M3, FP8_E5M2]
    for i, p in enumerate(PATTERNS):
        pat = pattern(p)
        for j, k in enumerate((pat.ratio * n, pat.m + 1, 1)):
            if pat.slots(k) > n:
                continue
            fa, fb = fmts[(i + j) % 3], fmts[(i + 2 * j + 1) % 3]
            m, f = int(tb.rng.integers(1, n + 1)), int(tb.rng.integers(1, 7))
            await tb.run(_sparse_case(tb, p, fa, fb, k, m, f),
                         f"sparse {p} K = {k} M = {m} F = {f} {_FMT_NAMES[fa]} x "
                         f"{_FMT_NAMES[fb]}", memories=j == 0)
    for what, edit in (("past the group", lambda t: t.__setitem__((t.shape[0] - 1, 0), 3)),
                       ("not increasing", lambda t: t.__setitem__((1, 0), t[0, 0]))):
        prog = _sparse_case(tb, "2:4", BF16, BF16, 2 * n - 1, 2, 3, tags_edit=edit)
        res = await tb.run(prog, f"sparse bad tags: {what}")
        assert res.error == ErrorCode.BAD_TAGS, (what, res.error.name)
        tb.iss.clear_error()
        await tb.host.clear_error()
        res = await tb.run(prog[4:5], f"MATMUL after bad tags ({what})")
        assert res.error == ErrorCode.BAD_SHAPE, res.error.name
        tb.iss.clear_error()
        await tb.host.clear_error()
    # The library's sparse GEMM (kernel API: compressed tiles, B in the sparse layout).
    from golden.sparse import magnitude_mask

    for p, (m, k, f) in (("4:16", (n + 1, 4 * n + 5, 20)), ("2:4", (2, 3 * n, 7))):
        def build(kern, ws, p=p, m=m, k=k, f=f):
            a_bits, b_bits = tb.operands(BF16, (k, m)), tb.operands(FP8_E5M2, (k, f))
            a = lib.sparse_matrix(kern, a_bits, BF16, magnitude_mask(a_bits, "bf16", p), p,
                                  "a")
            b = lib.sparse_moving(kern, b_bits, FP8_E5M2, p, "b")
            lib.gemm(ws, a, b, kern.dram_tensor((m, f), FP32, "c"))

        await tb.run(tb.load(build), f"library sparse GEMM {p} {m}x{k}x{f}")
    ls = encode(Opcode.LOAD_STATIONARY, fmt=BF16, part=0, k=1, m=1, sbuf_addr=0, sparsity=6)
    res = await tb.run([ls], "reserved sparsity")
    assert res.error == ErrorCode.BAD_FIELD, res.error.name
    tb.iss.clear_error()
    await tb.host.clear_error()
    await tb.run(_sparse_case(tb, "4:16", BF16, FP8_E4M3, 4 * n, n, 5), "good after errors")


def _random_command(tb, rng, stat_k, hot, probe):
    """One random command, or None if the ISS's own check finds it illegal. Addresses come
    from a few hot spots (``hot``: SBUF words, PSUM banks), so that commands in flight often
    touch the words the next ones read or write. ``probe``: an ISS used only for its check."""
    c, n, words = tb.cfg, tb.cfg.n, tb.cfg.sbuf_words
    part = int(rng.integers(0, n))
    rows = int(rng.integers(1, n - part + 1))

    def addr(cols):
        a = int(rng.choice(hot["sbuf"])) + int(rng.integers(-2, 3))
        return min(max(a, 0), words - cols)

    bank = int(rng.choice(hot["bank"]))
    kinds = {"load": .2, "store": .08, "ls": .1, "mm": .24, "act": .16, "seed": .02,
             "barrier": .02}
    if c.vector_engine:  # the vector engine's commands in the same mix (else: 0)
        kinds.update(tt=.06, ts=.05, red=.04, tr=.03)
    kind = rng.choice(list(kinds), p=np.array(list(kinds.values())) / sum(kinds.values()))
    if kind in ("load", "store"):
        dtype = int(rng.choice([BF16, FP8_E4M3, FP32, FP16]))
        size = DTYPE_BYTES[dtype]
        cols = int(rng.integers(1, 13))
        stride = size * int(rng.choice([0, cols, cols + int(rng.integers(0, 9))]))
        op = Opcode.DMA_LOAD if kind == "load" else Opcode.DMA_STORE
        f = dict(dtype=dtype, part=part, rows=rows, sbuf_addr=addr(cols), cols=cols,
                 dram_addr=size * int(rng.integers(0, 1500)), dram_stride=stride)
    elif kind == "ls" or (kind == "mm" and stat_k is None):
        k = int(rng.integers(1, n - part + 1))
        m = int(rng.integers(1, n + 1))
        op, f = Opcode.LOAD_STATIONARY, dict(fmt=int(rng.integers(0, len(OPERAND_DTYPES))),
                                             part=part, k=k, m=m,
                                             sbuf_addr=addr(m), sparsity=0)
    elif kind == "mm":
        k = stat_k
        part = int(rng.integers(0, n - k + 1))
        fcols = int(rng.integers(1, c.psum_words + 1))
        op, f = Opcode.MATMUL, dict(fmt=int(rng.integers(0, len(OPERAND_DTYPES))), part=part,
                                    k=k, f=fcols,
                                    sbuf_addr=addr(fcols), bank=bank,
                                    psum_addr=int(rng.integers(0, c.psum_words - fcols + 1)),
                                    accumulate=int(rng.integers(0, 2)))
    elif kind == "act":
        src_sbuf = int(rng.random() < 0.35)
        cols = int(rng.integers(1, c.psum_words + 1))
        src = addr(cols) if src_sbuf else int(rng.integers(0, c.psum_words - cols + 1))
        dst = src if src_sbuf and rng.random() < 0.5 else addr(cols)
        op, f = Opcode.ACTIVATE, dict(
            func=int(rng.integers(0, len(ActivationFunc))), src_sbuf=src_sbuf, part=part,
            rows=rows, cols=cols,
            src_bank=bank, src_addr=src, bias_en=int(rng.integers(0, 2)),
            bias_addr=addr(1), scale=int(tb.fp32(1, 2.0)[0]) if rng.random() < 0.5
            else 0x3F800000, dtype=int(rng.integers(0, len(Dtype))),
            mode=int(rng.integers(0, len(Rounding))),
            saturate=int(rng.integers(0, 2)), dst_addr=dst)
    elif kind in ("tt", "ts", "red"):
        cols = int(rng.integers(1, c.psum_words + 1))

        def operand(i: int) -> dict:
            sbuf = int(rng.random() < 0.6)
            return {f"in{i}_sbuf": sbuf, f"in{i}_bank": int(rng.choice(hot["bank"])),
                    f"in{i}_addr": addr(cols) if sbuf
                    else int(rng.integers(0, c.psum_words - cols + 1)),
                    f"in{i}_dtype": int(rng.choice([BF16, FP8_E4M3, FP32, FP16])) if sbuf
                    else FP32}

        alus = [AluOp.ADD, AluOp.MAX, AluOp.MIN] if kind == "red" else list(AluOp)
        f = dict(alu=int(rng.choice(alus)), part=part, rows=rows, cols=cols, **operand(0),
                 dtype=int(rng.integers(0, len(Dtype))), mode=int(rng.integers(0, 3)),
                 saturate=int(rng.integers(0, 2)))
        f["dst_addr"] = f["in0_addr"] if f["in0_sbuf"] and rng.random() < 0.3 else \
            addr(1 if kind == "red" else cols)
        if kind == "tt":
            op = Opcode.TENSOR_TENSOR
            f.update(operand(1))
        elif kind == "ts":
            op = Opcode.TENSOR_SCALAR
            f.update(reverse=int(rng.integers(0, 2)),
                     scalar=int(tb.fp32(1, 4.0)[0]) if rng.random() < 0.7
                     else int(rng.choice([0x7F800000, 0xFF800000, 0x80000000, 0x7FC00001])))
        else:
            op = Opcode.TENSOR_REDUCE
    elif kind == "tr":
        k = int(rng.integers(1, n - part + 1))
        m = int(rng.integers(1, n + 1))
        op, f = Opcode.TRANSPOSE, dict(part=part, rows=k, cols=m, src_addr=addr(m),
                                       dst_part=int(rng.integers(0, n - m + 1)),
                                       dst_addr=addr(k))
    elif kind == "seed":
        op, f = Opcode.SET_SEED, dict(seed=int(rng.integers(0, 1 << 63)))
    else:
        op, f = Opcode.BARRIER, {}
    words_ = encode(op, **f)
    probe.te.stationary_shape = None if stat_k is None else (stat_k, 1)
    try:
        probe.check(words_)
    except CommandError:
        return None
    return words_


@cocotb.test(**tbutil.timeout(20))
async def random_commands(dut):
    tb = await _started(dut)
    rng = tb.rng
    raw = rng.integers(0, 256, tb.cfg.dram_bytes // 4, dtype=np.uint8)
    tb.dram(raw)
    # fp32 data with special values in the first words of DRAM, for the ACTIVATE inputs.
    specials = vectors.cast_inputs("bf16", rng, 1024).astype(np.uint32)
    tb.dram(specials.view(np.uint8), 0)
    probe = NeuronCoreISS(tb.cfg)  # checks candidates; never runs them
    ops: dict[str, int] = {}
    for batch in range(8):
        prog, stat_k = [], tb.iss.te.stationary_shape
        stat_k = None if stat_k is None else stat_k[0]
        hot = {"sbuf": rng.integers(0, tb.cfg.sbuf_words, 3),
               "bank": rng.integers(0, tb.cfg.psum_banks, 2)}
        while len(prog) < 24:
            cmd = _random_command(tb, rng, stat_k, hot, probe)
            if cmd is None:
                continue
            op, fields = decode(cmd)
            if op == Opcode.LOAD_STATIONARY:
                stat_k = fields["k"]
            ops[Opcode(op).name] = ops.get(Opcode(op).name, 0) + 1
            prog.append(cmd)
        await tb.run(prog, f"random batch {batch}")
    dut._log.info("random commands by opcode: %s", ops)


@cocotb.test(**tbutil.timeout(20))
async def errors(dut):
    tb = await _started(dut)
    rng = tb.rng
    tb.dram(rng.integers(0, 256, tb.cfg.dram_bytes, dtype=np.uint8))
    legal = encode(Opcode.DMA_LOAD, dtype=FP32, part=0, rows=tb.cfg.n, sbuf_addr=0, cols=4,
                   dram_addr=0, dram_stride=16)
    await tb.run([legal], "fill")
    for i, (what, prog, code) in enumerate(pg.error_programs(tb.cfg)):
        after = encode(Opcode.DMA_LOAD, dtype=FP8_E4M3, part=0, rows=2, sbuf_addr=8, cols=5,
                       dram_addr=int(rng.integers(0, 4096)), dram_stride=7)
        # Every third case (and the last) compares SBUF and PSUM too: a stray write by a
        # failing command stays there (only words 0..12 of partitions 0..1 are rewritten).
        res = await tb.run([encode(Opcode.BARRIER), *prog, after, legal], f"error: {what}",
                           memories=i % 3 == 2)
        assert res.error == code, f"{what}: {res.error.name}, want {code.name}"
        if code != ErrorCode.OK:
            # Stopped: a program pushed now is dropped until the error is cleared.
            # (The memories are compared after the next case's program.)
            await tb.run([after], f"after {what}, not cleared", compare=False)
            tb.iss.clear_error()
            await tb.host.clear_error()
            await tb.run([after], f"after {what}, cleared", compare=False)

    # Soft reset: EXECUTED 0, no stationary tile (a MATMUL fails), the PRNG reseeded with 0.
    pb = ProgramBuilder(tb.cfg)
    pb.emit(Opcode.LOAD_STATIONARY, fmt=BF16, part=0, k=2, m=2, sbuf_addr=0, sparsity=0)
    pb.emit(Opcode.SET_SEED, seed=99)
    await tb.run(pb.program, "before soft reset")  # (after the last error case: all memories)
    tb.iss.soft_reset()
    await tb.host.soft_reset()
    assert await tb.host.read("EXECUTED") == 0 and (await tb.host.error())[0] == ErrorCode.OK
    sr = encode(Opcode.ACTIVATE, func=ActivationFunc.IDENTITY, src_sbuf=1, part=0,
                rows=tb.cfg.n, cols=6, src_bank=0, src_addr=0, bias_en=0, bias_addr=0,
                scale=0x3F800000, dtype=BF16, mode=_SR,
                saturate=0, dst_addr=20)
    await tb.run([sr], "SR after soft reset (seed 0 stream)")
    mm = encode(Opcode.MATMUL, fmt=BF16, part=0, k=2, f=1, sbuf_addr=0, bank=0, psum_addr=0,
                accumulate=0)
    res = await tb.run([mm], "MATMUL after soft reset")
    assert res.error == ErrorCode.BAD_SHAPE, res.error.name
    tb.iss.soft_reset()
    await tb.host.soft_reset()
    await tb.run([pb.program[0], mm], "LOAD_STATIONARY then MATMUL after soft reset")


@cocotb.test(**tbutil.timeout(20))
async def hazards(dut):
    """Each ordering the sequencer enforces, in a program where breaking it changes the
    result: a later command that would otherwise overtake an earlier one in flight."""
    tb = await _started(dut)
    c, n, w = tb.cfg, tb.cfg.n, tb.cfg.psum_words
    tb.dram(tb.rng.integers(0, 256, c.dram_bytes, dtype=np.uint8))
    fp32 = tb.fp32((n, c.sbuf_words)).view(np.uint8)
    tb.dram(fp32, 0)  # fp32 values at DRAM 0 (row stride 4 * sbuf_words)

    def load(addr, cols, dram=0, dtype=FP32):
        size = DTYPE_BYTES[dtype]
        return encode(Opcode.DMA_LOAD, dtype=dtype, part=0, rows=n, sbuf_addr=addr, cols=cols,
                      dram_addr=dram, dram_stride=size * c.sbuf_words)

    def ls(addr, k=n, m=n):
        return encode(Opcode.LOAD_STATIONARY, fmt=BF16, part=0, k=k, m=m, sbuf_addr=addr,
                      sparsity=0)

    def mm(addr, bank, f=w, acc=0, k=n, psum=0):
        return encode(Opcode.MATMUL, fmt=BF16, part=0, k=k, f=f, sbuf_addr=addr, bank=bank,
                      psum_addr=psum, accumulate=acc)

    def act(src, dst, cols=w, src_sbuf=0, bank=0, mode=_RNE, part=0, rows=n):
        return encode(Opcode.ACTIVATE, func=ActivationFunc.IDENTITY, src_sbuf=src_sbuf,
                      part=part, rows=rows, cols=cols, src_bank=bank, src_addr=src, bias_en=0,
                      bias_addr=0,
                      scale=0x3F800000, dtype=FP32 if mode == _RNE else BF16, mode=mode,
                      saturate=0, dst_addr=dst)

    bf16_at = 4 * n * c.sbuf_words  # bf16 operands after the fp32 block
    tb.put(pg.DramTensor(bf16_at, n, c.sbuf_words, BF16),
           tb.operands(BF16, (n, c.sbuf_words), 0.0))
    setup = [load(0, c.sbuf_words, bf16_at, BF16), ls(0), mm(8, 0), mm(8, 1), mm(8, 2)]
    await tb.run(setup, "hazards: setup")
    cases = {
        # A DMA load may not overwrite the moving tile a MATMUL (stalled behind its
        # LOAD_STATIONARY) has not read yet.
        "DMA load after MATMUL reads": [ls(4), mm(8, 0), load(8 + w - 4, 4, 64)],
        # A MATMUL may not read words a DMA load is still writing.
        "MATMUL after DMA load writes": [load(8, w, 4 * 16), mm(8, 1)],
        # A MATMUL may not read words an ACTIVATE is still writing.
        "MATMUL after ACTIVATE writes": [act(0, 8, bank=2), mm(8, 1)],
        # An ACTIVATE may not read a PSUM bank a MATMUL is still writing.
        "ACTIVATE after MATMUL writes": [mm(8, 0, acc=1), act(0, 40, bank=0)],
        # A MATMUL may not overwrite a PSUM bank an ACTIVATE (stalled while the PRNG lanes
        # seed) is still reading.
        "MATMUL after ACTIVATE reads": [encode(Opcode.SET_SEED, seed=7),
                                        act(0, 40, bank=1, mode=_SR), mm(24, 1)],
        # An ACTIVATE may not write words a MATMUL (stalled behind its LOAD_STATIONARY) has
        # not read yet.
        "ACTIVATE after MATMUL reads": [ls(0), mm(8, 2), act(2, 8 + w - 3, cols=3,
                                                            src_sbuf=1)],
        # PSUM is tracked per bank: a MATMUL to another bank finishing first does not release
        # the bank an ACTIVATE reads.
        "ACTIVATE after MATMUL writes, another bank done first":
            [ls(0), mm(8, 1, acc=1), mm(8, 0, acc=1), act(0, 40, bank=0)],
        # ... and per partition range: a tile of m = 2 columns writes PSUM partitions 0 and 1;
        # an ACTIVATE of partitions 1.. overlaps it in one.
        "ACTIVATE after MATMUL writes, one partition shared":
            [ls(0, m=2), mm(8, 3, acc=1), act(0, 40, bank=3, part=1, rows=n - 1)],
        # ... and per word range: the MATMUL writes words w/2.., the ACTIVATE reads w/2+2..
        # (inside them: a record that forgot psum_addr would miss it).
        "ACTIVATE after MATMUL writes, some words shared":
            [ls(0), mm(8, 2, f=w // 2, psum=w // 2, acc=1),
             act(w // 2 + 2, 40, cols=4, bank=2)],
        # A MATMUL may not write PSUM words an ACTIVATE still reads, in the partitions shared.
        "MATMUL after ACTIVATE reads, one partition shared":
            [encode(Opcode.SET_SEED, seed=9), act(0, 40, bank=1, mode=_SR, part=1, rows=1),
             ls(0, m=2), mm(24, 1)],
        # SBUF regions are rectangles: a DMA load of one partition of the words a MATMUL of
        # k = 2 rows (partitions 0 and 1) has not read yet.
        "DMA load after MATMUL reads, one partition shared":
            [ls(4, k=2), mm(8, 0, k=2), encode(Opcode.DMA_LOAD, dtype=FP32, part=1, rows=1,
                                               sbuf_addr=8 + w - 4, cols=4, dram_addr=64,
                                               dram_stride=0)],
    }
    for what, prog in cases.items():
        await tb.run(prog, f"hazard: {what}")

    # PSUM ping-pong: an ACTIVATE drains bank 0 while MATMULs write bank 1 (it waits only for
    # the MATMUL to bank 0 before them).
    ping = [ls(0), mm(8, 0)] + [mm(8, 1)] * 4
    drain = [act(0, 40, bank=0)]
    busy = {}
    for what, prog in (("MATMULs", ping), ("ACTIVATE", drain), ("both", ping + drain)):
        before = await tb.host.perf()
        res = await tb.run(prog, f"ping-pong: {what}")
        busy[what] = res.perf["busy"] - before["busy"]
    assert busy["both"] <= busy["MATMULs"] + 4, \
        f"the drain of bank 0 did not overlap the MATMULs to bank 1: {busy}"


def _dma_words(words) -> tuple[bool, set[int]] | None:
    """(is a store, the 4-byte DRAM words it touches) of a DMA descriptor, else None."""
    op, f = decode(words)
    if op not in (Opcode.DMA_LOAD, Opcode.DMA_STORE):
        return None
    size = DTYPE_BYTES[f["dtype"]]
    touched = set()
    for p in range(f["rows"]):
        a = f["dram_addr"] + p * f["dram_stride"]
        touched.update(range(a // 4, (a + f["cols"] * size - 1) // 4 + 1))
    return op == Opcode.DMA_STORE, touched


@cocotb.test(**tbutil.timeout(20))
async def debug_reads_while_running(dut):
    """Debug reads while a program runs, back to back, give the words they name, and the
    program's results stay bit-exact: a read waits until no DMA, ACTIVATE or COLLECTIVE uses
    the SBUF port or the PSUM drain port it shares, and the sequencer starts none of them
    meanwhile (``hold``). The program is DMA loads and stores and ACTIVATEs from the SBUF and
    from PSUM; the reads alternate between SBUF words (the last 8 of each partition) and PSUM
    bank 0's, which the program reads but never writes, so their values are the ISS's
    throughout."""
    tb = await _started(dut)
    c, n, words, w = tb.cfg, tb.cfg.n, tb.cfg.sbuf_words, tb.cfg.psum_words
    tb.dram(tb.rng.integers(0, 256, c.dram_bytes, dtype=np.uint8))
    # fp32 rows at DRAM 0 (stride 4 * words): every pattern, ±0, subnormals, ±inf, NaN, ties
    fp32 = vectors.cast_inputs("bf16", tb.rng, n * words).astype(np.uint32)
    tb.dram(fp32.view(np.uint8), 0)
    stride, kept = 4 * words, words - 8
    bf16_at = n * stride  # bf16 operands after the fp32 rows (with special values)
    tb.put(pg.DramTensor(bf16_at, n, words, BF16), tb.operands(BF16, (n, words)))

    def dma(op, addr, cols, dram, dtype=FP32):
        return encode(op, dtype=dtype, part=0, rows=n, sbuf_addr=addr, cols=cols,
                      dram_addr=dram, dram_stride=DTYPE_BYTES[dtype] * words)

    def act(src, dst, cols, src_sbuf=1):
        return encode(Opcode.ACTIVATE, func=ActivationFunc.IDENTITY, src_sbuf=src_sbuf, part=0,
                      rows=n, cols=cols, src_bank=0, src_addr=src, bias_en=0, bias_addr=0,
                      scale=0x3F800000, dtype=FP32, mode=_RNE, saturate=0, dst_addr=dst)

    setup = [dma(Opcode.DMA_LOAD, 0, words, bf16_at, BF16),
             encode(Opcode.LOAD_STATIONARY, fmt=BF16, part=0, k=n, m=n, sbuf_addr=0,
                    sparsity=0),
             encode(Opcode.MATMUL, fmt=BF16, part=0, k=n, f=w, sbuf_addr=8, bank=0, psum_addr=0,
                    accumulate=0),
             dma(Opcode.DMA_LOAD, kept, 8, 4 * kept)]
    await tb.run(setup, "debug reads: the words read")
    want_sbuf, want_psum = tb.iss.sbuf[:, kept:].copy(), tb.iss.psum[:, 0].copy()
    half = kept // 2
    store_at = bf16_at + 2 * n * words  # DRAM after the bf16 operands
    program = []
    for i in range(6):
        cols = 1 + i % 4
        program += [dma(Opcode.DMA_LOAD, 0, half, 4 * half * (i % 2)),
                    act(i % 3, half + i, cols),
                    act(i, half + 8 + i, cols + 2, src_sbuf=0),
                    dma(Opcode.DMA_STORE, half + i, cols, store_at + 4 * i)]
    done, reads = False, []

    async def reader():
        k = 0
        while not done:
            p = k % n
            if k % 2:
                x, want = (p, k % w), want_psum[p, k % w]
                got = await tb.host.debug_read(DebugSpace.PSUM, p, k % w, 0)
            else:
                x, want = (p, kept + k % 8), want_sbuf[p, k % 8]
                got = await tb.host.debug_read(DebugSpace.SBUF, p, kept + k % 8)
            reads.append(("PSUM" if k % 2 else "SBUF", *x, got, int(want)))
            k += 3
    task = cocotb.start_soon(reader())
    await tb.run(program, "debug reads while running")
    done = True
    await task
    bad = [r for r in reads if r[-2] != r[-1]]
    assert not bad, (f"debug reads while running: (memory, part, word, RTL, ISS) {bad[:4]} "
                     f"(seed {tb.seed})")
    spaces = {r[0] for r in reads}
    assert len(reads) >= 8 and spaces == {"SBUF", "PSUM"}, \
        f"only {len(reads)} debug reads ({spaces}) while the program ran"
    assert not await tb.host.status() & Status.DEBUG_TIMEOUT, "a debug read timed out"
    dut._log.info("%d debug reads while the program ran", len(reads))


@cocotb.test(**tbutil.timeout(20))
async def dram_faults(dut):
    tb = await _started(dut)
    tb.need_axiram("dram_faults")
    rng, n = tb.rng, tb.cfg.n
    m, k, f = n + 1, n + 2, 6

    def build(kern, ws):
        a = kern.dram_tensor((k, m), BF16, "a", data=tb.operands(BF16, (k, m)))
        b = kern.dram_tensor((k, f), BF16, "b", data=tb.operands(BF16, (k, f)))
        c = kern.dram_tensor((m, f), FP32, "c")
        lib.gemm(ws, a, b, c)
        return a, b, c

    program = tb.load(build)
    a, b, c = tb.last_tensors
    dmas = [(i, *d) for i, w in enumerate(program) if (d := _dma_words(w)) is not None]
    faults = tb.host.faults
    cases = [(AxiResp.SLVERR, False, "clear"), (AxiResp.DECERR, False, "clear"),
             (AxiResp.SLVERR, True, "clear"), (AxiResp.DECERR, True, "soft reset")]
    for case, (resp, store, recover) in enumerate(cases):
        # A word of A or B (loads), or of C (stores); the first DMA touching it fails.
        t = c if store else (a, b)[int(rng.integers(0, 2))]
        end = t.addr + t.shape[0] * t.shape[1] * DTYPE_BYTES[t.dtype]
        word = int(rng.integers(t.addr // 4, (end - 1) // 4 + 1))
        index = min(i for i, st, touched in dmas if st == store and word in touched)
        what = f"{resp.name} on {'B' if store else 'R'} at DRAM 0x{4 * word:x}"
        faults.window, faults.resp = (4 * word, 4 * word + 4), resp
        hits = dict(faults.hits)
        res = await tb.host.run(program)
        faults.window = None
        assert faults.hits["B" if store else "R"] > hits["B" if store else "R"], \
            f"{what}: DRAM never answered with an error"
        assert (res.error, res.error_index) == (ErrorCode.BUS_ERROR, index), (
            f"{what}: ERROR {res.error.name} at {res.error_index}, want BUS_ERROR at {index} "
            f"({Opcode(decode(program[index])[0]).name}) (seed {tb.seed})")
        stopped = await tb.host.run(program[:2])
        assert stopped.error == ErrorCode.BUS_ERROR and stopped.executed == 0, \
            f"{what}: the queue ran on after a bus error"
        if recover == "clear":
            await tb.host.clear_error()
        else:
            tb.iss.soft_reset()
            await tb.host.soft_reset()
        assert (await tb.host.error())[0] == ErrorCode.OK
        await tb.run(program, f"the GEMM on good DRAM after {what}, {recover}",
                     memories=case == len(cases) - 1)
