"""fp32 arithmetic of the PE array, on bit patterns (docs/contract.md §4, numerics contract).

* **Multiply** - operands are widened to fp32 exactly (:func:`golden.formats.to_fp32_bits`),
  then multiplied as IEEE binary32 with round-to-nearest-even, subnormals kept: exactly
  ``np.float32(a) * np.float32(b)``.
* **Add** - IEEE binary32 add, round-to-nearest-even, subnormals kept, no fused
  multiply-add: exactly numpy float32 addition; ``inf - inf`` is NaN.
* Every NaN result (from a NaN operand, ``0 * inf`` or ``inf - inf``) is emitted as the
  canonical quiet NaN 0x7FC00000, whatever the operands' signs and payloads.
* **Dot product** (one output element of a MATMUL, one column of the PE array):
  ``s = +0.0; for k in 0..K-1: s = s + w[k] * x[k]`` in PE-row order.

All functions take and return unsigned integer bit patterns and are vectorised with numpy
broadcasting; a scalar input gives a 0-d array. Floating-point exceptions are ignored
(``np.errstate(all="ignore")``). This module is numpy + ml_dtypes only.
"""

from __future__ import annotations

import numpy as np

from .formats import FP32, FP32_CANONICAL_NAN, as_bits, get_format, to_fp32_bits

__all__ = ["fp32_mul", "fp32_add", "widen_mul", "dot"]

_CANON = np.uint32(FP32_CANONICAL_NAN)


def _canonical(r: np.ndarray) -> np.ndarray:
    r = np.asarray(r, dtype=np.float32)
    return np.where(np.isnan(r), _CANON, r.view(np.uint32)).astype(np.uint32)


def fp32_mul(a_bits, b_bits) -> np.ndarray:
    """IEEE binary32 product (RNE, subnormals kept) of fp32 bit patterns; NaN -> 0x7FC00000.

    Returns uint32 bit patterns with the broadcast shape of the operands.
    """
    a = as_bits(a_bits, FP32, "a_bits").view(np.float32)
    b = as_bits(b_bits, FP32, "b_bits").view(np.float32)
    with np.errstate(all="ignore"):
        return _canonical(np.multiply(a, b))


def fp32_add(a_bits, b_bits) -> np.ndarray:
    """IEEE binary32 sum (RNE, subnormals kept) of fp32 bit patterns; NaN -> 0x7FC00000.

    ``x + (-x)`` is +0 and ``(-0) + (-0)`` is -0, as IEEE specifies for round to nearest.
    Returns uint32 bit patterns with the broadcast shape of the operands.
    """
    a = as_bits(a_bits, FP32, "a_bits").view(np.float32)
    b = as_bits(b_bits, FP32, "b_bits").view(np.float32)
    with np.errstate(all="ignore"):
        return _canonical(np.add(a, b))


def widen_mul(a_bits, a_fmt, b_bits, b_fmt) -> np.ndarray:
    """Product of ``a`` (format ``a_fmt``) and ``b`` (format ``b_fmt``) as the PE computes it.

    Each operand is widened exactly to fp32 in its own format (the two may differ, e.g.
    e4m3 x e5m2 or bf16 x fp8), then multiplied with :func:`fp32_mul`. fp8 x fp8 products are
    always exact; bf16 products can round, overflow to +-inf or underflow to subnormals/zero.
    Returns uint32 fp32 bit patterns with the broadcast shape of the operands.
    """
    fa = get_format(a_fmt, "a_fmt")
    fb = get_format(b_fmt, "b_fmt")
    a32 = to_fp32_bits(as_bits(a_bits, fa, "a_bits"), fa)
    b32 = to_fp32_bits(as_bits(b_bits, fb, "b_bits"), fb)
    return fp32_mul(a32, b32)


def dot(w_bits, w_fmt, x_bits, x_fmt) -> np.ndarray:
    """Contract-order dot product over the last axis, as one column of the PE array computes it.

    ``s = +0.0; for k in 0..K-1: s = fp32_add(s, widen_mul(w[..., k], x[..., k]))`` with
    ``w`` in ``w_fmt`` and ``x`` in ``x_fmt``. Leading axes broadcast; the last axes must both
    have length K. K = 0 gives +0.0; since ``s`` starts at +0.0 a sum of only -0 products is
    +0. A NaN anywhere (operand, ``0 * inf``, ``inf - inf``) gives 0x7FC00000.
    Returns uint32 fp32 bit patterns of the broadcast leading shape.
    """
    fw = get_format(w_fmt, "w_fmt")
    fx = get_format(x_fmt, "x_fmt")
    w = as_bits(w_bits, fw, "w_bits")
    x = as_bits(x_bits, fx, "x_bits")
    if w.ndim == 0 or x.ndim == 0 or w.shape[-1] != x.shape[-1]:
        raise ValueError(
            f"w_bits and x_bits must share a last (K) axis, got shapes {w.shape} and {x.shape}")
    p = widen_mul(w, fw, x, fx)
    s = np.zeros(p.shape[:-1], dtype=np.uint32)  # +0.0
    for k in range(p.shape[-1]):
        s = fp32_add(s, p[..., k])
    return s
