"""Host-side compilers: GEMMs, dense layers and MLPs as NeuronCore command streams.

A :class:`ProgramBuilder` lays tensors out in DRAM (row-major, each at a 64-byte boundary) and
emits descriptors (:mod:`golden.isa`). The same program runs on the golden ISS
(``golden.iss``) and, through the host driver, on the RTL.

SBUF plan (N partitions, words per partition; W = PSUM words per bank): two stationary tile
areas at words ``0`` and ``N``, two moving tile areas at ``2N`` and ``2N + W``, the output
staging area at ``2N + 2W`` and the bias column at word ``2N + 3W``; so a core needs at least
``2N + 3W + 1`` SBUF words. Tiles alternate between their two areas, so the core can load the
next tile by DMA while the tensor engine still reads the current one.

:func:`gemm` tiles ``C = A.T @ B`` exactly as ``golden.tensor_engine.gemm_schedule`` does (so C's
bits equal ``golden.tensor_engine.run_gemm``'s), takes each finished PSUM block through ACTIVATE
(identity, scale 1, bias −0 and an fp32 cast leave every PSUM value unchanged; or any
function, per-row bias, dtype and rounding for a dense layer) and stores it.
"""

from __future__ import annotations

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
from golden.tensor_engine import LoadStationary, gemm_schedule

__all__ = ["DramTensor", "ProgramBuilder", "gemm", "dense", "mlp", "error_programs", "collective",
           "FP32",
           "BF16"]

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


class ProgramBuilder:
    def __init__(self, cfg: CoreConfig):
        need = 2 * cfg.n + 3 * cfg.psum_words + 1
        if cfg.sbuf_words < need:
            raise ValueError(f"sbuf_words must be at least 2 * N + 3 * psum_words + 1 = {need} "
                             f"for these programs, not {cfg.sbuf_words}")
        self.cfg = cfg
        self.program: list[np.ndarray] = []
        self.dram_top = 0
        self.stat_areas = (0, cfg.n)
        self.mov_areas = (2 * cfg.n, 2 * cfg.n + cfg.psum_words)
        self.out_addr = 2 * cfg.n + 2 * cfg.psum_words
        self.bias_addr = 2 * cfg.n + 3 * cfg.psum_words
        self._placed: dict[tuple[int, int], int] = {}  # tiles placed per pair of areas

    def next_area(self, areas: tuple[int, int]) -> int:
        """The next of a pair of ping-pong areas."""
        k = self._placed.get(areas, 0)
        self._placed[areas] = k + 1
        return areas[k % 2]

    def alloc(self, rows: int, cols: int, dtype: int) -> DramTensor:
        t = DramTensor(self.dram_top, rows, cols, dtype)
        self.dram_top = -(-(t.addr + rows * cols * t.size) // 64) * 64
        if self.dram_top > self.cfg.dram_bytes:
            raise ValueError(f"DRAM of {self.cfg.dram_bytes} bytes is too small for the tensors")
        return t

    def emit(self, op: Opcode, **fields) -> None:
        self.program.append(encode(op, **fields))

    def _dma(self, op, t: DramTensor, r0, r1, c0, c1, sbuf_addr):
        self.emit(op, dtype=t.dtype, part=0, rows=r1 - r0, sbuf_addr=sbuf_addr, cols=c1 - c0,
                  dram_addr=t.at(r0, c0), dram_stride=t.cols * t.size)

    def load(self, t, r0, r1, c0, c1, sbuf_addr):
        self._dma(Opcode.DMA_LOAD, t, r0, r1, c0, c1, sbuf_addr)

    def store(self, t, r0, r1, c0, c1, sbuf_addr):
        self._dma(Opcode.DMA_STORE, t, r0, r1, c0, c1, sbuf_addr)


def gemm(b: ProgramBuilder, a: DramTensor, mov: DramTensor, out: DramTensor | None, *,
         func: int = ActivationFunc.IDENTITY, bias: DramTensor | None = None,
         dtype: int = FP32, mode: int = Rounding.RNE, saturate: bool | None = None,
         keep_in_sbuf: bool = False) -> None:
    """``out = cast(f(A.T @ B + bias))``: A (K x M, bf16/fp8) stationary, B (K x F) moving,
    ``bias`` an M x 1 fp32 column (one value per output row), ``out`` M x F of ``dtype``.
    With ``keep_in_sbuf`` (M <= N, F <= W) the result stays in the SBUF staging area and is
    not stored. ``saturate`` defaults to the command layer's rule (on for fp8,
    ``golden.rounding.DEFAULT_SATURATE``)."""
    cfg = b.cfg
    if saturate is None:
        saturate = DEFAULT_SATURATE.get(DTYPE_NAMES[dtype], False)
    if out is not None and out.dtype != dtype:
        raise ValueError(f"out holds dtype {out.dtype} but the cast is to {dtype}")
    if a.rows != mov.rows:
        raise ValueError(f"A and B must share K, got {a.rows} and {mov.rows}")
    m, k, f = a.cols, a.rows, mov.cols
    if keep_in_sbuf and (m > cfg.n or f > cfg.psum_words):
        raise ValueError("keep_in_sbuf needs M <= N and F <= psum_words")
    for rnd in gemm_schedule(m, k, f, n=cfg.n, banks=cfg.psum_banks, bank_words=cfg.psum_words):
        for c in rnd.commands:
            if isinstance(c, LoadStationary):
                addr = b.next_area(b.stat_areas)
                b.load(a, c.k0, c.k1, c.m0, c.m1, addr)
                b.emit(Opcode.LOAD_STATIONARY, fmt=a.dtype, part=0, k=c.k1 - c.k0,
                       m=c.m1 - c.m0, sbuf_addr=addr)
            else:
                addr = b.next_area(b.mov_areas)
                b.load(mov, c.k0, c.k1, c.f0, c.f1, addr)
                b.emit(Opcode.MATMUL, fmt=mov.dtype, part=0, k=c.k1 - c.k0, f=c.f1 - c.f0,
                       sbuf_addr=addr, bank=c.bank, psum_addr=c.addr,
                       accumulate=int(c.accumulate))
        for blk in rnd.blocks:
            if bias is not None:
                b.load(bias, blk.m0, blk.m1, 0, 1, b.bias_addr)
            b.emit(Opcode.ACTIVATE, func=int(func), src_sbuf=0, part=0, rows=blk.m1 - blk.m0,
                   cols=blk.f1 - blk.f0, src_bank=blk.bank, src_addr=blk.addr,
                   bias_en=int(bias is not None), bias_addr=b.bias_addr, scale=_ONE,
                   dtype=dtype, mode=mode, saturate=int(saturate), dst_addr=b.out_addr)
            if not keep_in_sbuf:
                b.store(out, blk.m0, blk.m1, blk.f0, blk.f1, b.out_addr)


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


def dense(b: ProgramBuilder, w: DramTensor, x: DramTensor, bias: DramTensor, *,
          dtype: int, mode: int = Rounding.RNE, saturate: bool | None = None,
          func: int = ActivationFunc.RELU) -> DramTensor:
    """A dense layer ``Y = cast(relu(W.T @ X + bias))`` into a new DRAM tensor (M x F)."""
    y = b.alloc(w.cols, x.cols, dtype)
    gemm(b, w, x, y, func=func, bias=bias, dtype=dtype, mode=mode, saturate=saturate)
    return y


def mlp(b: ProgramBuilder, x: DramTensor, layers: list[dict]) -> DramTensor:
    """Layers one after another: each ``dict(w=, bias=, dtype=, func=, mode=, saturate=)``
    (w and bias DRAM tensors; the rest as :func:`dense`), the output of one the moving input
    of the next (its dtype must be an operand format: bf16 or fp8). Returns the last output."""
    h = x
    for i, layer in enumerate(layers):
        if i and h.dtype not in OPERAND_DTYPES:
            raise ValueError(f"layer {i - 1} writes dtype {h.dtype}, which the next layer's "
                             f"MATMUL cannot take (bf16 or fp8 only)")
        h = dense(b, layer["w"], h, layer["bias"], dtype=layer["dtype"],
                  func=layer.get("func", ActivationFunc.RELU), mode=layer.get("mode", Rounding.RNE),
                  saturate=layer.get("saturate"))
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
