"""The contract's fp32 -> target casts (docs/contract.md §4, "Casts fp32 -> target").

:func:`round_fp32` rounds fp32 bit patterns (uint32) to ``"bf16"``, ``"fp16"``,
``"fp8_e4m3"`` or ``"fp8_e5m2"`` bit patterns with mode ``"rne"``, ``"rtz"`` or ``"sr"``,
entirely on integers:

* Let ``E = max(exp_field, 1)``, ``sig`` the fp32 significand with its hidden bit (none for
  fp32 subnormals), so ``|x| = sig * 2**(E - 150)``, and ``e = E - 127``. With the target's
  ``p`` mantissa bits and smallest normal exponent ``emin``, the kept LSB has weight
  ``2**(max(e, emin) - p)``; ``d = 23 - p + max(0, emin - e)`` bits of ``sig`` lie below it
  (``d`` grows in the target's subnormal range and may exceed 24: then every bit is below).
  ``kept = sig >> d`` and ``D = sig - (kept << d)``.
* RNE: up iff ``D > 2**(d-1)`` or (``D == 2**(d-1)`` and ``kept`` odd). RTZ: never up.
  SR: up iff ``((D << r) >> d) + R >= 2**r``, with ``R`` the caller's r-bit random number
  (``D = 0`` never moves: exact values are fixed points).
* The target magnitude encoding is ``(max(e - emin, 0) << p) + kept + up`` (a carry out of
  the mantissa increments the exponent, subnormal -> normal included).
* Overflow (magnitude encoding above max finite): RTZ clamps to +-max finite; RNE/SR give
  +-max with ``saturate``, else +-inf (bf16, fp16, e5m2) or NaN (e4m3).
* +-inf: +-max with ``saturate``; else +-inf (NaN for e4m3), whatever the mode.
* NaN (any sign/payload), and every NaN result: the target's canonical NaN (bf16 0x7FC0,
  fp16 0x7E00, e4m3 0x7F, e5m2 0x7E), sign bit clear.
* ``"fp32"`` is a passthrough (the SRU's fp32 -> fp32 cast): the bits are returned as they
  are, except that every NaN becomes the canonical ``0x7FC00000``; no mode draws random bits.
* Signs are kept as they are (``-0.0`` stays ``-0``; a negative value rounding to zero gives
  ``-0``); SR rounds the magnitude, so the bias is towards zero.

This module is numpy + ml_dtypes only.
"""

from __future__ import annotations

import numpy as np

from golden.formats import FloatFormat, get_format
from golden.isa import Rounding

__all__ = ["TARGET_FORMATS", "CAST_FORMATS", "MODES", "DEFAULT_SATURATE", "round_fp32"]

#: Formats :func:`round_fp32` rounds to.
TARGET_FORMATS: tuple[str, ...] = ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2")
#: Every format :func:`round_fp32` accepts: the targets plus the fp32 passthrough.
CAST_FORMATS: tuple[str, ...] = TARGET_FORMATS + ("fp32",)
#: The saturation flag a cast gets when a command does not say: on for fp8 (as on Neuron,
#: where fp8 casts saturate), off for the formats with infinities worth keeping.
DEFAULT_SATURATE: dict[str, bool] = {"bf16": False, "fp16": False, "fp8_e4m3": True,
                                     "fp8_e5m2": True, "fp32": False}
#: Rounding modes, in the order of their codes (``golden.isa.Rounding``).
MODES: tuple[str, ...] = tuple(m.golden_name for m in Rounding)
#: Largest supported number of random bits per SR draw (one PRNG word).
MAX_R = 32

_I64 = np.int64


def _target(fmt) -> FloatFormat:
    f = get_format(fmt, "fmt")
    if f.name not in CAST_FORMATS:
        raise ValueError(f"fmt must be one of {list(CAST_FORMATS)}, not {f.name!r}")
    return f


def round_fp32(x_bits, fmt, mode: str, *, saturate: bool, rbits=None, r: int = 16,
               rng=None) -> np.ndarray:
    """Round fp32 bit patterns ``x_bits`` (uint32, any shape) to format ``fmt``.

    ``mode`` is ``"rne"``, ``"rtz"`` or ``"sr"``; ``saturate`` is the per-command saturation
    flag. For ``"sr"``, ``rbits`` holds one r-bit uniform integer ``R`` per element (an
    integer array broadcastable to ``x_bits``' shape, values in ``[0, 2**r)``) and
    ``1 <= r <= 32``; ``rbits`` is ignored by the other modes. Instead of ``rbits``, SR may
    take ``rng``, a :class:`golden.prng.LanePRNG` whose lane count is the last dimension of
    ``x_bits``: row ``t`` of ``x_bits`` (shape ``(lanes,)`` or ``(n, lanes)``) then uses the
    generator's next draw, in order, exactly as the SRU does. Returns the target bit patterns
    (unsigned, format width, ``x_bits``' shape). Rules: see the module docstring.

    Raises :class:`ValueError` (or :class:`TypeError` for non-integer arrays) naming the bad
    argument.
    """
    f = _target(fmt)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, not {mode!r}")
    if not isinstance(saturate, bool | np.bool_):
        raise ValueError(f"saturate must be a bool, not {saturate!r}")
    x = np.asarray(x_bits)
    if x.dtype.kind not in "ui":
        raise TypeError(f"x_bits must hold integer fp32 bit patterns, not {x.dtype}")
    if x.size and (x.min() < 0 or int(x.max()) >> 32):
        raise ValueError("x_bits must be 32-bit patterns; found "
                         f"{int(x[(x < 0) | (x >= 1 << 32)].ravel()[0]):#x}")
    x = x.astype(_I64)
    if f.name == "fp32":  # passthrough: nothing to round, no random bits; NaNs made canonical
        nan = ((x >> 23) & 0xFF == 0xFF) & (x & 0x7FFFFF != 0)
        return np.where(nan, _I64(f.canonical_nan_bits), x).astype(np.uint32)
    if mode == "sr" and rng is not None:
        if rbits is not None:
            raise ValueError("give rbits or rng, not both")
        lanes = getattr(rng, "lanes", None)
        if lanes is None or x.ndim not in (1, 2) or x.shape[-1] != lanes:
            raise ValueError(f"rng must be a LanePRNG with x_bits.shape[-1] lanes; x_bits has "
                             f"shape {x.shape}, rng {rng!r}")
        rbits = rng.draws(1 if x.ndim == 1 else x.shape[0], r).reshape(x.shape)
    if mode == "sr":
        if isinstance(r, bool) or not isinstance(r, int | np.integer) or not 1 <= r <= MAX_R:
            raise ValueError(f"r must be an integer in [1, {MAX_R}], not {r!r}")
        if rbits is None:
            raise ValueError("rbits is required when mode == 'sr'")
        rb = np.asarray(rbits)
        if rb.dtype.kind not in "ui":
            raise TypeError(f"rbits must hold integers, not {rb.dtype}")
        if rb.size and (rb.min() < 0 or int(rb.max()) >> r):
            raise ValueError(f"rbits must be {r}-bit integers (r={r}); found "
                             f"{int(rb[(rb < 0) | (rb >= 1 << r)].ravel()[0]):#x}")
        try:
            rb = np.broadcast_to(rb.astype(_I64), x.shape)
        except ValueError:
            raise ValueError(f"rbits shape {rb.shape} does not broadcast to x_bits shape "
                             f"{x.shape}") from None

    p, emin = f.man_bits, f.emin
    sign = x >> 31
    e32 = (x >> 23) & 0xFF
    man = x & 0x7FFFFF
    is_nan = (e32 == 0xFF) & (man != 0)
    is_inf = (e32 == 0xFF) & (man == 0)

    big_e = np.maximum(e32, 1)
    sig = np.where(e32 > 0, man | (1 << 23), man)
    e = big_e - 127
    d = 23 - p + np.maximum(0, emin - e)  # >= 13
    dc = np.minimum(d, 40)  # sig < 2**24: 40 is as good as any larger shift
    kept = sig >> dc
    low = sig - (kept << dc)
    if mode == "rne":
        half = _I64(1) << (dc - 1)
        up = (low > half) | ((low == half) & ((kept & 1) == 1))
    elif mode == "rtz":
        up = np.zeros(x.shape, dtype=bool)
    else:
        scaled = (low << _I64(r)) >> np.minimum(d, 63)  # low << r < 2**56
        up = scaled + rb >= (_I64(1) << _I64(r))
    mag = (np.maximum(e - emin, 0) << p) + kept + up.astype(_I64)

    max_b = f.max_finite_bits
    nan_b = f.canonical_nan_bits
    if saturate:
        over_b = max_b
    elif f.has_inf:
        over_b = f.inf_bits
    else:
        over_b = -1  # NaN marker
    over = mag > max_b
    if mode == "rtz":
        mag = np.where(over, max_b, mag)
    else:
        mag = np.where(over, over_b, mag)
    inf_b = max_b if saturate else (f.inf_bits if f.has_inf else -1)
    mag = np.where(is_inf, inf_b, mag)
    out = (sign << (f.bits - 1)) | mag
    out = np.where((mag < 0) | is_nan, nan_b, out)
    return out.astype(f.uint_dtype)
