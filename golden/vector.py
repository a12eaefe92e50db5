"""The vector engine's operations: elementwise tensor–tensor and tensor–scalar, reductions along
the free axis, and the transpose, on bit patterns.

The contract (docs/contract.md §4, "Vector ops" and "Transpose"):

* Inputs are widened exactly to fp32 from their dtype (:func:`golden.formats.to_fp32_bits`:
  bf16, fp8-e4m3, fp8-e5m2, fp16 or fp32).
* Every operation is a single IEEE binary32 operation, round to nearest even, subnormals kept,
  every NaN result the canonical quiet NaN 0x7FC00000 (:data:`AluOp`):

  - ``ADD`` ``a + b``, ``SUBTRACT`` ``a − b``, ``MULTIPLY`` ``a · b`` (numpy float32 exactly,
    as :mod:`golden.fp32`; ``inf − inf`` and ``0 · inf`` are NaN);
  - ``MAX`` / ``MIN``: IEEE 754-2019 ``maximum`` / ``minimum``: a NaN operand gives the NaN;
    otherwise the larger (smaller) value, with −0 < +0;
  - ``GREATER``: 1.0 where ``a > b`` (IEEE ordering: false when either is NaN, −0 > +0 false),
    else +0.0 (a mask: multiplying by it selects, as relu's derivative does).
* A reduction along the free axis folds a row in increasing free-axis order from +0.0 for
  ``ADD``, −inf for ``MAX`` and +inf for ``MIN`` (so a NaN anywhere gives the NaN and a row of
  −0 sums to +0); the other operations do not reduce.
* The result is then cast by the SRU with the command's rounding mode (the ISS,
  :mod:`golden.iss`, does that with the activation engine's lanes: one draw per lane per
  output beat).
* The transpose moves bits: ``out[m, k] = data[k, m]`` exactly, any dtype.

numpy + ml_dtypes only.
"""

from __future__ import annotations

import numpy as np

from .formats import FP32_CANONICAL_NAN, get_format, to_fp32_bits
from .isa import AluOp  # the operation codes: golden/isa.py, one source

__all__ = ["AluOp", "REDUCE_OPS", "REDUCE_START", "widen", "alu", "reduce_free", "transpose"]

_CANON = np.uint32(FP32_CANONICAL_NAN)
_SIGN = np.uint32(0x8000_0000)
_ONE = np.uint32(0x3F80_0000)

#: The operations a reduction takes, and the value each starts from (fp32 bits).
REDUCE_START = {AluOp.ADD: np.uint32(0x0000_0000),  # +0.0
                AluOp.MAX: np.uint32(0xFF80_0000),  # -inf
                AluOp.MIN: np.uint32(0x7F80_0000)}  # +inf
REDUCE_OPS = tuple(REDUCE_START)


def widen(bits, dtype: str) -> np.ndarray:
    """Bit patterns of ``dtype`` (a ``golden.formats`` name) as fp32 bits, exactly."""
    return to_fp32_bits(bits, get_format(dtype, "dtype"))


def _is_nan(b: np.ndarray) -> np.ndarray:
    return (b & ~_SIGN) > np.uint32(0x7F80_0000)


def _order_key(b: np.ndarray) -> np.ndarray:
    """A uint32 key that sorts non-NaN fp32 bit patterns by value, −0 just below +0."""
    return np.where(b & _SIGN, ~b, b | _SIGN).astype(np.uint32)


def alu(op, a_bits, b_bits) -> np.ndarray:
    """``a op b`` on fp32 bit patterns (broadcast), as the contract says; uint32 bits."""
    op = AluOp(op)
    a = np.asarray(a_bits, dtype=np.uint32)
    b = np.asarray(b_bits, dtype=np.uint32)
    if op in (AluOp.MAX, AluOp.MIN):
        ka, kb = _order_key(a), _order_key(b)
        pick_a = ka >= kb if op == AluOp.MAX else ka <= kb
        r = np.where(pick_a, a, b)
        return np.where(_is_nan(a) | _is_nan(b), _CANON, r).astype(np.uint32)
    fa, fb = a.view(np.float32), b.view(np.float32)
    with np.errstate(all="ignore"):
        if op == AluOp.GREATER:
            return np.where(fa > fb, _ONE, np.uint32(0)).astype(np.uint32)
        f = {AluOp.ADD: np.add, AluOp.SUBTRACT: np.subtract, AluOp.MULTIPLY: np.multiply}[op]
        r = np.asarray(f(fa, fb), dtype=np.float32)
    return np.where(np.isnan(r), _CANON, r.view(np.uint32)).astype(np.uint32)


def reduce_free(op, x_bits) -> np.ndarray:
    """Each row of ``x_bits`` (fp32 bits, shape (rows, cols), cols >= 1) folded by ``op``
    (``ADD``, ``MAX`` or ``MIN``) from its start value in increasing column order: uint32 bits
    of shape (rows,)."""
    op = AluOp(op)
    if op not in REDUCE_START:
        raise ValueError(f"op must be one of {[o.name for o in REDUCE_OPS]}, not {op.name}")
    x = np.asarray(x_bits, dtype=np.uint32)
    if x.ndim != 2 or x.shape[1] == 0:
        raise ValueError(f"x_bits must be (rows, cols) with cols >= 1, not shape {x.shape}")
    s = np.full(x.shape[0], REDUCE_START[op], dtype=np.uint32)
    for c in range(x.shape[1]):
        s = alu(op, s, x[:, c])
    return s


def transpose(bits) -> np.ndarray:
    """``out[m, k] = bits[k, m]``: the same bit patterns, moved (a copy)."""
    b = np.asarray(bits)
    if b.ndim != 2:
        raise ValueError(f"bits must be 2-D, not shape {b.shape}")
    return np.ascontiguousarray(b.T)
