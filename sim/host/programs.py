"""Host-side compilers: GEMMs, dense layers and MLPs as NeuronCore command streams.

A :class:`ProgramBuilder` lays tensors out in DRAM (row-major, each at a 64-byte boundary) and
emits descriptors (:mod:`golden.isa`). The same program runs on the golden ISS
(``golden.iss``) and, through the host driver, on the RTL.

:func:`gemm` computes ``C = A.T @ B`` with the tiles of ``golden.tensor_engine.gemm_schedule``
(N x N stationary tiles, moving tiles of one PSUM bank's width W) and the same order of
additions: every output element sums its K tiles in increasing order, the first overwriting
PSUM (so C's bits equal ``golden.tensor_engine.run_gemm``'s). Each finished PSUM block goes
through ACTIVATE (identity, scale 1, bias −0 and an fp32 cast leave every PSUM value
unchanged; or any function, per-row bias, dtype and rounding for a dense layer) and is stored.
The program is written so that the engines overlap, as NKI kernels are:

* **Units.** The output is cut into units of one M tile x a group of at most
  ``max(1, banks // 2)`` F tiles (every F tile one PSUM bank). Consecutive units use
  alternate halves of PSUM (ping-pong), so the drain of one unit (ACTIVATE, DMA store) runs
  while the tensor engine fills the other half with the next.
* **SBUF reuse.** When they fit, B's columns of a group stay in SBUF for all the group's
  units (loaded once), and the stationary tiles of a unit are loaded as one block, double
  buffered: unit u + 1's block is loaded while unit u computes. Otherwise tiles are loaded
  one by one into ping-pong areas just before use (:meth:`ProgramBuilder.plan` says which).
* **Background work between multiplications.** The sequencer dispatches in program order and
  a command waiting at the head holds back those behind it, so the loads for the next unit and
  the drain of the previous one are spread one command after each MATMUL, never queued in a
  block in front of the tensor engine's work.

SBUF plan (words of every partition): the output staging area ``0 .. W − 1``
(:attr:`ProgramBuilder.out_addr`), the bias column at ``W``, then the areas of
:meth:`ProgramBuilder.plan`. A core needs at least ``2N + 3W + 1`` SBUF words.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from golden.isa import (
    DTYPE_BYTES,
    DTYPE_NAMES,
    OPERAND_DTYPES,
    ActivationFunc,
    CollectiveOp,
    Dtype,
    ErrorCode,
    Opcode,
    Rounding,
    encode,
)
from golden.iss import CoreConfig
from golden.rounding import DEFAULT_SATURATE

__all__ = ["DramTensor", "SbufTensor", "ProgramBuilder", "gemm", "dense", "mlp", "error_programs",
           "collective", "FP32", "BF16"]

#: The dtype codes (``golden.isa.Dtype``), by their short names.
BF16, FP8_E4M3, FP8_E5M2, FP16, FP32 = (Dtype.BF16, Dtype.FP8_E4M3, Dtype.FP8_E5M2, Dtype.FP16,
                                        Dtype.FP32)
_ONE = 0x3F800000  # fp32 1.0


@dataclass(frozen=True)
class DramTensor:
    addr: int
    rows: int
    cols: int
    dtype: int

    @property
    def size(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def at(self, r: int, c: int) -> int:
        return self.addr + (r * self.cols + c) * self.size


@dataclass(frozen=True)
class SbufTensor:
    """A matrix kept in SBUF between commands, in N-row tiles: row r in partition r mod N,
    column c at word ``addr + (r // N) * cols + c``. :func:`gemm` leaves a result so (``out``)
    and takes B so (``mov``): the output tiles of one layer are the moving tiles of the next,
    as NKI kernels keep activations in SBUF."""

    addr: int
    rows: int
    cols: int
    dtype: int

    def words(self, n: int) -> int:
        return -(-self.rows // n) * self.cols


@dataclass(frozen=True)
class GemmPlan:
    """Where :func:`gemm` keeps its tiles in SBUF (words of every partition)."""

    group: int  #: F tiles (PSUM banks) a unit
    a_block: bool  #: a unit's stationary tiles as one block (else tile by tile)
    a_addr: tuple[int, int]  #: its two areas (block or tile)
    b_resident: bool  #: B's columns of a group stay in SBUF for the group's units
    b_addr: tuple[int, int]  #: the area (both the same) or the two tile areas


def _tiles(size: int, step: int) -> list[tuple[int, int]]:
    return [(i, min(i + step, size)) for i in range(0, size, step)]


class ProgramBuilder:
    def __init__(self, cfg: CoreConfig):
        need = 2 * cfg.n + 3 * cfg.psum_words + 1
        if cfg.sbuf_words < need:
            raise ValueError(f"sbuf_words must be at least 2 * N + 3 * psum_words + 1 = {need} "
                             f"for these programs, not {cfg.sbuf_words}")
        self.cfg = cfg
        self.program: list[np.ndarray] = []
        self.dram_top = 0
        self.out_addr = 0
        self.bias_addr = cfg.psum_words
        self.free_addr = cfg.psum_words + 1  # the first word the tile areas may use
        self._sbuf_live: list[SbufTensor] = []

    @property
    def top(self) -> int:
        """The SBUF tensors live from this word up; the tile areas below it."""
        return min((t.addr for t in self._sbuf_live), default=self.cfg.sbuf_words)

    def sbuf_alloc(self, rows: int, cols: int, dtype: int) -> SbufTensor | None:
        """An :class:`SbufTensor` just below the live ones, or None if it would leave the tile
        areas less than ``2N + 2W`` words (then keep the tensor in DRAM)."""
        cfg = self.cfg
        words = -(-rows // cfg.n) * cols
        if self.top - words - self.free_addr < 2 * cfg.n + 2 * cfg.psum_words:
            return None
        t = SbufTensor(self.top - words, rows, cols, dtype)
        self._sbuf_live.append(t)
        return t

    def sbuf_free(self, t: SbufTensor) -> None:
        """Give back an :class:`SbufTensor`'s words (its commands are all emitted)."""
        self._sbuf_live.remove(t)

    def plan(self, m: int, k: int, f: int, *, b_in_sbuf: bool = False) -> GemmPlan:
        """The SBUF areas of an M x K x F GEMM below the SBUF tensors: B resident if it fits
        (it saves a reload per unit; none with ``b_in_sbuf``), then the stationary blocks;
        else tile-sized ping-pong areas."""
        cfg = self.cfg
        n, w, lo = cfg.n, cfg.psum_words, self.free_addr
        room = self.top - lo
        group = max(1, cfg.psum_banks // 2)
        k_tiles = -(-k // n)
        b_width = min(f, group * w)
        b_words, a_words = k_tiles * b_width, k_tiles * n
        if b_in_sbuf:
            b_words = 0
        b_resident = b_words + 2 * n <= room
        b_need = b_words if b_resident else 2 * w
        a_block = b_need + 2 * a_words <= room
        a_size = a_words if a_block else n
        a_addr = (lo, lo + a_size)
        b0 = lo + 2 * a_size
        b_addr = (b0, b0) if b_resident else (b0, b0 + w)
        return GemmPlan(group, a_block, a_addr, b_resident, b_addr)

    def alloc(self, rows: int, cols: int, dtype: int) -> DramTensor:
        t = DramTensor(self.dram_top, rows, cols, dtype)
        self.dram_top = -(-(t.addr + rows * cols * t.size) // 64) * 64
        if self.dram_top > self.cfg.dram_bytes:
            raise ValueError(f"DRAM of {self.cfg.dram_bytes} bytes is too small for the tensors")
        return t

    def emit(self, op: Opcode, **fields) -> None:
        self.program.append(encode(op, **fields))

    def _dma(self, op, t: DramTensor, r0, r1, c0, c1, sbuf_addr, part):
        self.emit(op, dtype=t.dtype, part=part, rows=r1 - r0, sbuf_addr=sbuf_addr,
                  cols=c1 - c0, dram_addr=t.at(r0, c0), dram_stride=t.cols * t.size)

    def load(self, t, r0, r1, c0, c1, sbuf_addr, part=0):
        """Rows r0..r1 - 1, columns c0..c1 - 1 of ``t`` into partitions ``part..``, words
        ``sbuf_addr..``."""
        self._dma(Opcode.DMA_LOAD, t, r0, r1, c0, c1, sbuf_addr, part)

    def store(self, t, r0, r1, c0, c1, sbuf_addr, part=0):
        """The reverse of :meth:`load`."""
        self._dma(Opcode.DMA_STORE, t, r0, r1, c0, c1, sbuf_addr, part)


def gemm(b: ProgramBuilder, a: DramTensor, mov: DramTensor | SbufTensor,
         out: DramTensor | SbufTensor | None, *,
         func: int = ActivationFunc.IDENTITY, bias: DramTensor | None = None,
         dtype: int = FP32, mode: int = Rounding.RNE, saturate: bool | None = None,
         keep_in_sbuf: bool = False) -> None:
    """``out = cast(f(A.T @ B + bias))``: A (K x M, bf16/fp8) stationary, B (K x F) moving,
    ``bias`` an M x 1 fp32 column (one value per output row), ``out`` M x F of ``dtype``.
    ``mov`` and ``out`` may be :class:`SbufTensor` s: B read from SBUF, the result left
    there, with no DMA. With ``keep_in_sbuf`` (M <= N, F <= W) the result stays in the SBUF
    staging area (:attr:`ProgramBuilder.out_addr`) and is not stored. ``saturate`` defaults
    to the command layer's rule (on for fp8, ``golden.rounding.DEFAULT_SATURATE``). The
    schedule: see the module's text."""
    cfg = b.cfg
    if saturate is None:
        saturate = DEFAULT_SATURATE.get(DTYPE_NAMES[dtype], False)
    if out is not None and out.dtype != dtype:
        raise ValueError(f"out holds dtype {out.dtype} but the cast is to {dtype}")
    if a.rows != mov.rows:
        raise ValueError(f"A and B must share K, got {a.rows} and {mov.rows}")
    m, k, f = a.cols, a.rows, mov.cols
    n, w = cfg.n, cfg.psum_words
    if keep_in_sbuf and (m > n or f > w):
        raise ValueError("keep_in_sbuf needs M <= N and F <= psum_words")
    b_in_sbuf, out_in_sbuf = isinstance(mov, SbufTensor), isinstance(out, SbufTensor)
    plan = b.plan(m, k, f, b_in_sbuf=b_in_sbuf)
    k_tiles, f_tiles = _tiles(k, n), _tiles(f, w)
    groups = [f_tiles[g:g + plan.group] for g in range(0, len(f_tiles), plan.group)]
    units = [(mt, g) for g in range(len(groups)) for mt in _tiles(m, n)]
    half = plan.group if 2 * plan.group <= cfg.psum_banks else 0  # the other half's offset

    def bank(u: int, t: int) -> int:
        return (u % 2) * half + t

    def a_block_tile(u: int, j: int):
        """Load unit u's stationary tile j into its block; returns the load as a callable."""
        (m0, m1), _ = units[u]
        k0, k1 = k_tiles[j]
        return functools.partial(b.load, a, k0, k1, m0, m1, plan.a_addr[u % 2] + j * n)

    def drain(u: int) -> list:
        """Unit u's PSUM blocks through ACTIVATE to ``out`` (or kept), as callables: the
        stores cut into rows of about a MATMUL's length each."""
        (m0, m1), g = units[u]
        cmds = []
        if bias is not None:
            cmds.append(functools.partial(b.load, bias, m0, m1, 0, 1, b.bias_addr))
        row_cycles = -(-w * DTYPE_BYTES[dtype] // (cfg.data_width // 8)) + 2  # a row's store
        rows_a_store = max(1, w // row_cycles)
        for t, (f0, f1) in enumerate(groups[g]):
            dst = out.addr + (m0 // n) * f + f0 if out_in_sbuf else b.out_addr
            cmds.append(functools.partial(
                b.emit, Opcode.ACTIVATE, func=int(func), src_sbuf=0, part=0, rows=m1 - m0,
                cols=f1 - f0, src_bank=bank(u, t), src_addr=0, bias_en=int(bias is not None),
                bias_addr=b.bias_addr, scale=_ONE, dtype=dtype, mode=mode,
                saturate=int(saturate), dst_addr=dst))
            if not (keep_in_sbuf or out_in_sbuf):
                cmds += [functools.partial(b.store, out, r0, min(r0 + rows_a_store, m1), f0, f1,
                                           b.out_addr, part=r0 - m0)
                         for r0 in range(m0, m1, rows_a_store)]
        return cmds

    # Commands spread one after each MATMUL: (the unit they must precede, the command).
    background: list[tuple[int, object]] = []
    turn = {"a": 0, "b": 0}  # ping-pong turns of the tile-by-tile areas
    # Unit u's drain must precede the MATMULs that next write its banks: unit u + 2's with
    # PSUM ping-pong, unit u + 1's without.
    reuse = 2 if half else 1

    def tile_area(which: str, areas: tuple[int, int]) -> int:
        turn[which] += 1
        return areas[turn[which] % 2]

    def due(u: int) -> None:
        """Emit, in order, every background command that must precede unit u."""
        for entry in [e for e in background if e[0] <= u]:
            background.remove(entry)
            entry[1]()

    for u, ((m0, m1), g) in enumerate(units):
        due(u)
        if plan.a_block and u + 1 < len(units):  # the next unit's block, first
            background[:0] = [(u + 1, a_block_tile(u + 1, j)) for j in range(len(k_tiles))]
        group = groups[g]
        g0, g1 = group[0][0], group[-1][1]
        first_of_group = u == 0 or units[u - 1][1] != g
        for j, (k0, k1) in enumerate(k_tiles):
            if plan.a_block:
                if u == 0:  # the first block: nothing to overlap it with yet
                    a_block_tile(0, j)()
                s_addr = plan.a_addr[u % 2] + j * n
            else:
                s_addr = tile_area("a", plan.a_addr)
                b.load(a, k0, k1, m0, m1, s_addr)
            if plan.b_resident and first_of_group and not b_in_sbuf:
                b.load(mov, k0, k1, g0, g1, plan.b_addr[0] + j * (g1 - g0))
            b.emit(Opcode.LOAD_STATIONARY, fmt=a.dtype, part=0, k=k1 - k0, m=m1 - m0,
                   sbuf_addr=s_addr)
            for t, (f0, f1) in enumerate(group):
                if b_in_sbuf:
                    m_addr = mov.addr + j * f + f0
                elif plan.b_resident:
                    m_addr = plan.b_addr[0] + j * (g1 - g0) + (f0 - g0)
                else:
                    m_addr = tile_area("b", plan.b_addr)
                    b.load(mov, k0, k1, f0, f1, m_addr)
                b.emit(Opcode.MATMUL, fmt=mov.dtype, part=0, k=k1 - k0, f=f1 - f0,
                       sbuf_addr=m_addr, bank=bank(u, t), psum_addr=0, accumulate=int(j > 0))
                if background:
                    background.pop(0)[1]()
        background += [(u + reuse, cmd) for cmd in drain(u)]
    due(len(units) + reuse)


def collective(b: ProgramBuilder, op: int, part: int, rows: int, sbuf_addr: int,
               cols: int) -> None:
    """A collective (0 all-reduce, 1 reduce-scatter, 2 all-gather) over an SBUF region of
    ``rows`` partitions: one COLLECTIVE per band of ``link_width`` partitions (``rows`` must be
    a multiple of it)."""
    w = b.cfg.link_width
    if rows % w:
        raise ValueError(f"rows must be a multiple of the link width {w}, not {rows}")
    for p in range(part, part + rows, w):
        b.emit(Opcode.COLLECTIVE, coll_op=op, part=p, rows=w, sbuf_addr=sbuf_addr, cols=cols)


def dense(b: ProgramBuilder, w: DramTensor, x: DramTensor | SbufTensor, bias: DramTensor, *,
          dtype: int, mode: int = Rounding.RNE, saturate: bool | None = None,
          func: int = ActivationFunc.RELU, in_sbuf: bool = False) -> DramTensor | SbufTensor:
    """A dense layer ``Y = cast(relu(W.T @ X + bias))`` into a new DRAM tensor (M x F), or
    with ``in_sbuf`` into a new :class:`SbufTensor` where it fits (else DRAM)."""
    y = b.sbuf_alloc(w.cols, x.cols, dtype) if in_sbuf else None
    if y is None:
        y = b.alloc(w.cols, x.cols, dtype)
    gemm(b, w, x, y, func=func, bias=bias, dtype=dtype, mode=mode, saturate=saturate)
    return y


def mlp(b: ProgramBuilder, x: DramTensor, layers: list[dict]) -> DramTensor:
    """Layers one after another: each ``dict(w=, bias=, dtype=, func=, mode=, saturate=)``
    (w and bias DRAM tensors; the rest as :func:`dense`), the output of one the moving input
    of the next (its dtype must be an operand format: bf16 or fp8). The hidden activations
    stay in SBUF where they fit (no DMA between layers); the last output goes to DRAM, which
    this returns."""
    h = x
    for i, layer in enumerate(layers):
        if i and h.dtype not in OPERAND_DTYPES:
            raise ValueError(f"layer {i - 1} writes dtype {h.dtype}, which the next layer's "
                             f"MATMUL cannot take (bf16 or fp8 only)")
        prev = h
        h = dense(b, layer["w"], h, layer["bias"], dtype=layer["dtype"],
                  func=layer.get("func", ActivationFunc.RELU), mode=layer.get("mode", Rounding.RNE),
                  saturate=layer.get("saturate"), in_sbuf=i + 1 < len(layers))
        if isinstance(prev, SbufTensor):
            b.sbuf_free(prev)
    return h


def error_programs(cfg: CoreConfig) -> list[tuple[str, list, ErrorCode]]:
    """Programs whose last command fails, each with the error it must give (and one legal
    control, "ok"): every check of ``golden.iss.NeuronCoreISS.check``, for a core outside a
    ring ("collective alone" is BAD_FIELD there). Needs n >= 3 and link_width < n."""
    n = cfg.n
    ok = encode(Opcode.BARRIER)
    ls2 = encode(Opcode.LOAD_STATIONARY, fmt=BF16, part=0, k=2, m=2, sbuf_addr=0)
    dma = {"dtype": FP32, "part": 0, "rows": 1, "sbuf_addr": 0, "cols": 4, "dram_addr": 0,
           "dram_stride": 0}
    act = {"func": ActivationFunc.IDENTITY, "src_sbuf": 1, "part": 0, "rows": 1, "cols": 2,
           "src_bank": 0, "src_addr": 0, "bias_en": 0, "bias_addr": 0, "scale": _ONE,
           "dtype": FP32, "mode": Rounding.RNE, "saturate": 0, "dst_addr": 0}
    cases = [
        ("opcode 0", np.zeros(8, np.uint32), ErrorCode.BAD_OPCODE),
        ("opcode 12", np.array([12, 0, 0, 0, 0, 0, 0, 0], np.uint32), ErrorCode.BAD_OPCODE),
        ("dma dtype 6", encode(Opcode.DMA_LOAD, **{**dma, "dtype": 6}), ErrorCode.BAD_DTYPE),
        ("dma rows 0", encode(Opcode.DMA_LOAD, **{**dma, "rows": 0}), ErrorCode.BAD_SHAPE),
        ("dma past SBUF", encode(Opcode.DMA_LOAD, **{**dma, "part": n - 1, "rows": 2}),
         ErrorCode.BAD_RANGE),
        ("dma past DRAM", encode(Opcode.DMA_STORE, **{**dma,
                                                    "dram_addr": cfg.dram_bytes - 8}),
         ErrorCode.BAD_RANGE),
        ("dma unaligned", encode(Opcode.DMA_LOAD, **{**dma, "dram_addr": 2}),
         ErrorCode.BAD_ALIGN),
        ("ls fp16", encode(Opcode.LOAD_STATIONARY, fmt=FP16, part=0, k=1, m=1, sbuf_addr=0),
         ErrorCode.BAD_DTYPE),
        ("ls k > n", encode(Opcode.LOAD_STATIONARY, fmt=BF16, part=0, k=n + 1, m=1, sbuf_addr=0),
         ErrorCode.BAD_SHAPE),
        ("mm before ls", encode(Opcode.MATMUL, fmt=BF16, part=0, k=1, f=1, sbuf_addr=0, bank=0,
                                psum_addr=0, accumulate=0), ErrorCode.BAD_SHAPE),
        ("act func 3", encode(Opcode.ACTIVATE, **{**act, "func": 3}), ErrorCode.BAD_FIELD),
        ("act mode 3", encode(Opcode.ACTIVATE, **{**act, "mode": 3}), ErrorCode.BAD_FIELD),
        ("act dtype 7", encode(Opcode.ACTIVATE, **{**act, "dtype": 7}), ErrorCode.BAD_DTYPE),
        ("act overlap", encode(Opcode.ACTIVATE, **{**act, "dst_addr": 1}),
         ErrorCode.BAD_RANGE),
        ("act psum bank", encode(Opcode.ACTIVATE, **{**act, "src_sbuf": 0,
                                                       "src_bank": cfg.psum_banks}),
         ErrorCode.BAD_RANGE),
        ("coll op 3", encode(Opcode.COLLECTIVE, coll_op=3, part=0, rows=cfg.link_width,
                             sbuf_addr=0, cols=1), ErrorCode.BAD_FIELD),
        ("collective alone", encode(Opcode.COLLECTIVE, coll_op=CollectiveOp.ALL_REDUCE, part=0,
                                    rows=cfg.link_width, sbuf_addr=0, cols=1),
         ErrorCode.BAD_FIELD),
        ("ls past SBUF", encode(Opcode.LOAD_STATIONARY, fmt=BF16, part=n - 2, k=3, m=1,
                                sbuf_addr=0),
         ErrorCode.BAD_RANGE),
        ("mm k mismatch", [ls2, encode(Opcode.MATMUL, fmt=BF16, part=0, k=3, f=1, sbuf_addr=0,
                                       bank=0, psum_addr=0, accumulate=0)],
         ErrorCode.BAD_SHAPE),
        ("mm past PSUM", [ls2, encode(Opcode.MATMUL, fmt=BF16, part=0, k=2, f=3, sbuf_addr=0,
                                      bank=0, psum_addr=cfg.psum_words - 2, accumulate=1)],
         ErrorCode.BAD_RANGE),
        ("act bias word", encode(Opcode.ACTIVATE, **{**act, "bias_en": 1,
                                                       "bias_addr": cfg.sbuf_words}),
         ErrorCode.BAD_RANGE),
        ("act rows 0", encode(Opcode.ACTIVATE, **{**act, "rows": 0}), ErrorCode.BAD_SHAPE),
        ("dma stride unaligned", encode(Opcode.DMA_LOAD, **{**dma, "rows": 2,
                                                            "dram_stride": 6}),
         ErrorCode.BAD_ALIGN),
        ("dma huge stride", encode(Opcode.DMA_LOAD, **{**dma, "rows": 2,
                                                       "dram_stride": (1 << 32) - 4}),
         ErrorCode.BAD_RANGE),
        ("coll rows not the link width", encode(Opcode.COLLECTIVE,
                                                coll_op=CollectiveOp.ALL_REDUCE, part=0,
                                                rows=cfg.link_width + 1, sbuf_addr=0, cols=1),
         ErrorCode.BAD_SHAPE),
        ("coll past SBUF", encode(Opcode.COLLECTIVE, coll_op=CollectiveOp.ALL_REDUCE, part=0,
                                  rows=cfg.link_width, sbuf_addr=cfg.sbuf_words - 4, cols=5),
         ErrorCode.BAD_RANGE),
        ("two faults: field first", encode(Opcode.ACTIVATE, **{**act, "func": 2, "dtype": 7,
                                                               "rows": 0}),
         ErrorCode.BAD_FIELD),
        ("two faults: dtype before shape", encode(Opcode.DMA_LOAD, **{**dma, "dtype": 5,
                                                                      "rows": 0}),
         ErrorCode.BAD_DTYPE),
        ("ok", ok, ErrorCode.OK),
    ]
    return [(w, p if isinstance(p, list) else [p], c) for w, p, c in cases]
