"""Host-side compilers: GEMMs, dense layers and MLPs as NeuronCore command streams.

A :class:`ProgramBuilder` lays tensors out in DRAM (row-major, each at a 64-byte boundary) and
emits descriptors (:mod:`golden.isa`). The same program runs on the golden ISS
(``golden.iss``) and, through the host driver, on the RTL.

SBUF plan (N partitions, words per partition): the stationary tile at words ``0 .. N-1``, the
moving tile at ``N .. N + W - 1`` (W = PSUM words per bank), the output staging area at
``N + W .. N + 2W - 1`` and the bias column at word ``N + 2W``; so a core needs at least
``N + 2W + 1`` SBUF words.

:func:`gemm` tiles ``C = A.T @ B`` exactly as ``golden.tensor.gemm_schedule`` does (so C's
bits equal ``golden.tensor.run_gemm``'s), takes each finished PSUM block through ACTIVATE
(identity, scale 1, bias −0 and an fp32 cast leave every PSUM value unchanged; or any
function, per-row bias, dtype and rounding for a dense layer) and stores it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden.activation import ActivationFunc
from golden.isa import DTYPE_BYTES, DTYPE_NAMES, Opcode, encode
from golden.iss import CoreConfig
from golden.rounding import DEFAULT_SATURATE
from golden.tensor import LoadStationary, gemm_schedule

__all__ = ["DramTensor", "ProgramBuilder", "gemm", "dense", "mlp", "FP32", "BF16"]

BF16, FP8_E4M3, FP8_E5M2, FP16, FP32 = range(5)
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
        need = cfg.n + 2 * cfg.psum_words + 1
        if cfg.sbuf_words < need:
            raise ValueError(f"sbuf_words must be at least N + 2 * psum_words + 1 = {need} for "
                             f"these programs, not {cfg.sbuf_words}")
        self.cfg = cfg
        self.program: list[np.ndarray] = []
        self.dram_top = 0
        self.stat_addr, self.mov_addr = 0, cfg.n
        self.out_addr = cfg.n + cfg.psum_words
        self.bias_addr = cfg.n + 2 * cfg.psum_words

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
         dtype: int = FP32, mode: int = 0, saturate: bool | None = None,
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
                b.load(a, c.k0, c.k1, c.m0, c.m1, b.stat_addr)
                b.emit(Opcode.LOAD_STATIONARY, fmt=a.dtype, part=0, k=c.k1 - c.k0,
                       m=c.m1 - c.m0, sbuf_addr=b.stat_addr)
            else:
                b.load(mov, c.k0, c.k1, c.f0, c.f1, b.mov_addr)
                b.emit(Opcode.MATMUL, fmt=mov.dtype, part=0, k=c.k1 - c.k0, f=c.f1 - c.f0,
                       sbuf_addr=b.mov_addr, bank=c.bank, psum_addr=c.addr,
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


def dense(b: ProgramBuilder, w: DramTensor, x: DramTensor, bias: DramTensor, *,
          dtype: int, mode: int = 0, saturate: bool | None = None,
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
        if i and h.dtype not in (BF16, FP8_E4M3, FP8_E5M2):
            raise ValueError(f"layer {i - 1} writes dtype {h.dtype}, which the next layer's "
                             f"MATMUL cannot take (bf16 or fp8 only)")
        h = dense(b, layer["w"], h, layer["bias"], dtype=layer["dtype"],
                  func=layer.get("func", ActivationFunc.RELU), mode=layer.get("mode", 0),
                  saturate=layer.get("saturate"))
    return h
