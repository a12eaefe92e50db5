"""Descriptors by hand: a :class:`ProgramBuilder` lays tensors out in DRAM (row-major, each at
a 64-byte boundary) and emits descriptors (:mod:`golden.isa`) one by one, for the tests whose
subject is the command layer (the sequencer's order and hazards, every error code:
:func:`error_programs`). Programs are written as kernels (``sim.kernels``; the tiled GEMM,
dense layers and MLPs: ``sim.kernels.library``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden.isa import (
    DTYPE_BYTES,
    ActivationFunc,
    AluOp,
    CollectiveOp,
    Dtype,
    ErrorCode,
    Opcode,
    Rounding,
    encode,
)
from golden.iss import CoreConfig

__all__ = ["DramTensor", "ProgramBuilder", "error_programs", "FP32", "BF16"]

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
        self.cfg = cfg
        self.program: list[np.ndarray] = []
        self.dram_top = 0

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


def error_programs(cfg: CoreConfig) -> list[tuple[str, list, ErrorCode]]:
    """Programs whose last command fails, each with the error it must give (and one legal
    control, "ok"): every check of ``golden.iss.NeuronCoreISS.check``, for a core outside a
    ring ("collective alone" is BAD_FIELD there; so are an all-to-all's destination cases,
    which are BAD_RANGE on a core whose ``cfg.ranks`` is P >= 2). Needs n >= 3, link_width < n
    and sbuf_words >= 8."""
    n = cfg.n
    ok = encode(Opcode.BARRIER)
    ls2 = encode(Opcode.LOAD_STATIONARY, fmt=BF16, part=0, k=2, m=2, sbuf_addr=0, sparsity=0)
    dma = {"dtype": FP32, "part": 0, "rows": 1, "sbuf_addr": 0, "cols": 4, "dram_addr": 0,
           "dram_stride": 0}
    act = {"func": ActivationFunc.IDENTITY, "src_sbuf": 1, "part": 0, "rows": 1, "cols": 2,
           "src_bank": 0, "src_addr": 0, "bias_en": 0, "bias_addr": 0, "scale": _ONE,
           "dtype": FP32, "mode": Rounding.RNE, "saturate": 0, "dst_addr": 0}
    coll = {"coll_op": CollectiveOp.ALL_REDUCE, "part": 0, "rows": cfg.link_width,
            "sbuf_addr": 0, "cols": 1, "dst_addr": 0, "shift": 0}
    a2a, permute = CollectiveOp.ALL_TO_ALL, CollectiveOp.PERMUTE
    a2a_rows = max(cfg.ranks, 2)  # its destination's rows for cols = 1 (P x ceil(1 / P))
    in_ring = ErrorCode.BAD_RANGE if cfg.ranks >= 2 else ErrorCode.BAD_FIELD
    cases = [
        ("opcode 0", np.zeros(8, np.uint32), ErrorCode.BAD_OPCODE),
        ("opcode 13", np.array([13, 0, 0, 0, 0, 0, 0, 0], np.uint32), ErrorCode.BAD_OPCODE),
        ("dma dtype 6", encode(Opcode.DMA_LOAD, **{**dma, "dtype": 6}), ErrorCode.BAD_DTYPE),
        ("dma rows 0", encode(Opcode.DMA_LOAD, **{**dma, "rows": 0}), ErrorCode.BAD_SHAPE),
        ("dma past SBUF", encode(Opcode.DMA_LOAD, **{**dma, "part": n - 1, "rows": 2}),
         ErrorCode.BAD_RANGE),
        ("dma past DRAM", encode(Opcode.DMA_STORE, **{**dma,
                                                    "dram_addr": cfg.dram_bytes - 8}),
         ErrorCode.BAD_RANGE),
        ("dma unaligned", encode(Opcode.DMA_LOAD, **{**dma, "dram_addr": 2}),
         ErrorCode.BAD_ALIGN),
        ("ls fp16", encode(Opcode.LOAD_STATIONARY, fmt=FP16, part=0, k=1, m=1, sbuf_addr=0,
                           sparsity=0),
         ErrorCode.BAD_DTYPE),
        ("ls k > n", encode(Opcode.LOAD_STATIONARY, fmt=BF16, part=0, k=n + 1, m=1,
                            sbuf_addr=0, sparsity=0),
         ErrorCode.BAD_SHAPE),
        ("ls sparsity 5", encode(Opcode.LOAD_STATIONARY, fmt=BF16, part=0, k=1, m=1,
                                 sbuf_addr=0, sparsity=5),
         ErrorCode.BAD_FIELD),
        # A sparse pattern: BAD_FIELD on a core without the sparse mode; else slots > n.
        ("ls sparse 2:4", encode(Opcode.LOAD_STATIONARY, fmt=BF16, part=0, k=2 * n + 1, m=1,
                                 sbuf_addr=0, sparsity=1),
         ErrorCode.BAD_SHAPE if cfg.sparse else ErrorCode.BAD_FIELD),
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
        ("coll op 5", encode(Opcode.COLLECTIVE, **{**coll, "coll_op": 5}), ErrorCode.BAD_FIELD),
        # Along a column outside a torus (before the shape: cols 0).
        ("coll dim column", encode(Opcode.COLLECTIVE, **{**coll, "dim": 1, "cols": 0}),
         ErrorCode.BAD_FIELD if cfg.torus_rows < 2 else ErrorCode.BAD_SHAPE),
        ("collective alone", encode(Opcode.COLLECTIVE, **coll), ErrorCode.BAD_FIELD),
        # Before the shape: a shift outside 1..P-1 (no P outside a ring: any shift).
        ("permute shift 0", encode(Opcode.COLLECTIVE, **{**coll, "coll_op": permute,
                                                         "shift": 0, "cols": 0}),
         ErrorCode.BAD_FIELD),
        ("permute shift P", encode(Opcode.COLLECTIVE, **{**coll, "coll_op": permute,
                                                         "shift": max(cfg.ranks, 1)}),
         ErrorCode.BAD_FIELD),
        # Checked against the destination only in a ring (else BAD_FIELD after the source).
        ("all-to-all dst past SBUF", encode(Opcode.COLLECTIVE, **{**coll, "coll_op": a2a,
                                                                  "dst_addr": cfg.sbuf_words
                                                                  - 1}), in_ring),
        ("all-to-all dst meets src", encode(Opcode.COLLECTIVE, **{**coll, "coll_op": a2a,
                                                                  "sbuf_addr": a2a_rows,
                                                                  "dst_addr": 1}),
         in_ring),
        ("ls past SBUF", encode(Opcode.LOAD_STATIONARY, fmt=BF16, part=n - 2, k=3, m=1,
                                sbuf_addr=0, sparsity=0),
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
                                                **{**coll, "rows": cfg.link_width + 1}),
         ErrorCode.BAD_SHAPE),
        ("coll past SBUF", encode(Opcode.COLLECTIVE, **{**coll, "sbuf_addr": cfg.sbuf_words - 4,
                                                        "cols": 5}),
         ErrorCode.BAD_RANGE),
        # The source is checked first: BAD_RANGE in a ring or not.
        ("all-to-all src past SBUF", encode(Opcode.COLLECTIVE,
                                            **{**coll, "coll_op": a2a,
                                               "sbuf_addr": cfg.sbuf_words - 4, "cols": 5,
                                               "dst_addr": cfg.sbuf_words - 1}),
         ErrorCode.BAD_RANGE),
        ("two faults: field first", encode(Opcode.ACTIVATE, **{**act, "func": 2, "dtype": 7,
                                                               "rows": 0}),
         ErrorCode.BAD_FIELD),
        ("two faults: dtype before shape", encode(Opcode.DMA_LOAD, **{**dma, "dtype": 5,
                                                                      "rows": 0}),
         ErrorCode.BAD_DTYPE),
        ("ok", ok, ErrorCode.OK),
    ]
    cases[-1:-1] = _vector_error_cases(cfg)
    return [(w, p if isinstance(p, list) else [p], c) for w, p, c in cases]


def _vector_error_cases(cfg: CoreConfig) -> list[tuple[str, object, ErrorCode]]:
    """The vector engine's checks (``golden.iss.NeuronCoreISS._check_vector`` and
    TRANSPOSE's), each broken once; on a core without the engine, its opcodes' BAD_OPCODE."""
    n = cfg.n
    tt = {"alu": AluOp.ADD, "part": 0, "rows": 1, "cols": 2,
          "in0_sbuf": 1, "in0_bank": 0, "in0_addr": 0, "in0_dtype": FP32,
          "in1_sbuf": 1, "in1_bank": 0, "in1_addr": 4, "in1_dtype": BF16,
          "dtype": FP32, "mode": Rounding.RNE, "saturate": 0, "dst_addr": 8}
    ts = {k: v for k, v in tt.items() if not k.startswith("in1")} | {"reverse": 0,
                                                                       "scalar": _ONE}
    red = {k: v for k, v in ts.items() if k not in ("reverse", "scalar")}
    tr = {"part": 0, "rows": 2, "cols": 2, "src_addr": 0, "dst_part": 0, "dst_addr": 8}
    if not cfg.vector_engine:
        return [("tensor_tensor without the vector engine", encode(Opcode.TENSOR_TENSOR, **tt),
                 ErrorCode.BAD_OPCODE)]
    return [
        ("tt alu 6", encode(Opcode.TENSOR_TENSOR, **{**tt, "alu": 6}), ErrorCode.BAD_FIELD),
        ("reduce by subtract", encode(Opcode.TENSOR_REDUCE, **{**red, "alu": AluOp.SUBTRACT}),
         ErrorCode.BAD_FIELD),
        ("ts mode 3", encode(Opcode.TENSOR_SCALAR, **{**ts, "mode": 3}), ErrorCode.BAD_FIELD),
        ("tt bf16 PSUM operand", encode(Opcode.TENSOR_TENSOR, **{**tt, "in1_sbuf": 0}),
         ErrorCode.BAD_DTYPE),
        ("ts dtype 7", encode(Opcode.TENSOR_SCALAR, **{**ts, "dtype": 7}), ErrorCode.BAD_DTYPE),
        ("tt in0 dtype 6", encode(Opcode.TENSOR_TENSOR, **{**tt, "in0_dtype": 6}),
         ErrorCode.BAD_DTYPE),
        ("tt cols 0", encode(Opcode.TENSOR_TENSOR, **{**tt, "cols": 0}), ErrorCode.BAD_SHAPE),
        ("transpose rows 0", encode(Opcode.TRANSPOSE, **{**tr, "rows": 0}),
         ErrorCode.BAD_SHAPE),
        ("ts past the partitions", encode(Opcode.TENSOR_SCALAR, **{**ts, "part": n - 1,
                                                                    "rows": 2}),
         ErrorCode.BAD_RANGE),
        ("tt past the PSUM bank's words",
         encode(Opcode.TENSOR_TENSOR, **{**tt, "in1_sbuf": 0, "in1_dtype": FP32,
                                          "in1_addr": cfg.psum_words - 1}),
         ErrorCode.BAD_RANGE),
        ("tt PSUM bank out of range",
         encode(Opcode.TENSOR_TENSOR, **{**tt, "in1_sbuf": 0, "in1_dtype": FP32,
                                          "in1_bank": cfg.psum_banks}),
         ErrorCode.BAD_RANGE),
        ("tt operand overlapping the destination",
         encode(Opcode.TENSOR_TENSOR, **{**tt, "in1_addr": 9}), ErrorCode.BAD_RANGE),
        ("reduce destination past SBUF",
         encode(Opcode.TENSOR_REDUCE, **{**red, "dst_addr": cfg.sbuf_words}),
         ErrorCode.BAD_RANGE),
        ("transpose past N", encode(Opcode.TRANSPOSE, **{**tr, "cols": 3, "dst_part": n - 2}),
         ErrorCode.BAD_RANGE),
        ("transpose onto its source", encode(Opcode.TRANSPOSE, **{**tr, "dst_addr": 1}),
         ErrorCode.BAD_RANGE),
    ]
