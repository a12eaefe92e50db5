"""The activation engine: ``out = cast(f(x·scale + bias))``, lane by lane, beat by beat.

The contract (docs/contract.md §2 "Activation/vector engine", §4):

* ``y = fp32_add(fp32_mul(x, scale), bias)``: an IEEE binary32 multiply, then an IEEE
  binary32 add, each rounded to nearest even (no fused multiply-add), subnormals kept, every
  NaN the canonical 0x7FC00000 (:mod:`golden.fp32`). ``scale`` is one fp32 value per command;
  ``bias`` one fp32 value per lane (per SBUF partition), as in NKI's ``activation``.
* ``f``: ``identity`` (y) or ``relu``: y when y > 0 or y is NaN (the canonical NaN passes),
  else +0 -- so relu(−0) = +0 and relu(−inf) = +0.
* ``cast``: the stochastic-rounding unit (:class:`golden.sru.SruModel`): bf16, fp16, fp8 or
  fp32 with RNE, RTZ or SR and a saturation flag; an SR beat to a narrow target takes one
  draw per lane.

numpy + ml_dtypes only.
"""

from __future__ import annotations

import numpy as np

from .fp32 import fp32_add, fp32_mul
from .isa import ActivationFunc  # the function codes: golden/isa.py, one source
from .sru import SruModel

__all__ = ["ActivationFunc", "relu_bits", "pre_cast", "ActivationModel"]


def relu_bits(y_bits) -> np.ndarray:
    """relu on fp32 bit patterns: y if y > 0 or NaN, else +0 (uint32)."""
    y = np.asarray(y_bits, dtype=np.uint32)
    negative = (y >> np.uint32(31)).astype(bool)  # -0, -inf and negative numbers (NaNs are +)
    nan = ((y >> np.uint32(23)) & np.uint32(0xFF)) == 0xFF
    nan &= (y & np.uint32(0x7FFFFF)) != 0
    return np.where(negative & ~nan, np.uint32(0), y).astype(np.uint32)


def pre_cast(x_bits, func, scale_bits, bias_bits) -> np.ndarray:
    """``f(x·scale + bias)`` in fp32 bits: ``x_bits`` (..., lanes), ``bias_bits`` (lanes,)."""
    y = fp32_add(fp32_mul(np.asarray(x_bits, dtype=np.uint32), np.uint32(scale_bits)),
                 np.asarray(bias_bits, dtype=np.uint32))
    func = ActivationFunc(func)
    return relu_bits(y) if func == ActivationFunc.RELU else y


class ActivationModel:
    """``lanes`` lanes with the SRU's generators (seed 0 after reset)."""

    def __init__(self, lanes: int, *, random_bits: int = 16, seed: int = 0):
        self.sru = SruModel(lanes, random_bits=random_bits, seed=seed)
        self.lanes = self.sru.lanes

    def reseed(self, seed: int) -> None:
        self.sru.reseed(seed)

    def command(self, x_bits, *, func, scale_bits, bias_bits, fmt: str, mode: str,
                saturate: bool) -> np.ndarray:
        """Run one command over ``x_bits`` (beats, lanes); returns (beats, lanes) uint32."""
        x = np.asarray(x_bits, dtype=np.uint32).reshape(-1, self.lanes)
        bias = np.asarray(bias_bits, dtype=np.uint32).reshape(self.lanes)
        y = pre_cast(x, func, scale_bits, bias)
        n = len(y)
        return self.sru.run(y, [fmt] * n, [mode] * n, [saturate] * n)
