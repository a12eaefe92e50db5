"""Floating-point formats of the numerics contract and their bit-level encodings.

Contract (docs/contract.md §4):

* ``"fp32"`` - IEEE 754 binary32 (1 sign, 8 exponent bits, bias 127, 23 mantissa bits).
* ``"bf16"`` - bfloat16 (1, 8, bias 127, 7): binary32 with the low 16 bits dropped.
* ``"fp16"`` - IEEE 754 binary16 (1, 5, bias 15, 10).
* ``"fp8_e4m3"`` - OCP E4M3FN (1, 4, bias 7, 3): no infinities; only S.1111.111 is NaN, so
  exponent field 15 with mantissa 000..110 encodes normal numbers; max finite 448.
* ``"fp8_e5m2"`` - OCP E5M2 (1, 5, bias 15, 2): IEEE-like with +-inf; max finite 57344.

Every format keeps subnormals. Bit patterns travel as unsigned integers of the format's
width (uint8, uint16, uint32); values are stored in numpy as ``np.float32``,
``ml_dtypes.bfloat16``, ``np.float16``, ``ml_dtypes.float8_e4m3fn``,
``ml_dtypes.float8_e5m2``. The canonical NaNs emitted by the arithmetic and cast units are
fp32 ``0x7FC00000``, bf16 ``0x7FC0``, fp16 ``0x7E00``, e4m3 ``0x7F``, e5m2 ``0x7E``.

The names of the multiplier input formats (:data:`INPUT_FORMATS`) mirror
``hdl.formats.Fmt.golden_name``. Every function taking a format accepts a name, a
:class:`FloatFormat`, or any object with a ``golden_name`` attribute (such as the HDL's
``Fmt`` members, without this module importing HDL); anything else raises a
:class:`ValueError` naming the argument.

This module is numpy + ml_dtypes only.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

__all__ = [
    "FloatFormat",
    "FORMATS",
    "INPUT_FORMATS",
    "FP32",
    "BF16",
    "FP16",
    "FP8_E4M3",
    "FP8_E5M2",
    "FP32_CANONICAL_NAN",
    "get_format",
    "as_bits",
    "to_bits",
    "from_bits",
    "to_fp32",
    "to_fp32_bits",
    "fp32_bits",
    "fp32_from_bits",
    "is_nan_bits",
    "is_inf_bits",
]

_UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32)}


@dataclass(frozen=True)
class FloatFormat:
    """Descriptor of one binary floating-point format (all fields derived from the contract).

    ``nan_encoding`` is ``"ieee"`` (exponent field all ones and mantissa non-zero is NaN,
    all ones with mantissa zero is infinity) or ``"fn"`` (OCP "finite": no infinities, only
    the all-ones magnitude S.1..1.1..1 is NaN; the all-ones exponent otherwise holds normal
    numbers). ``*_bits`` fields are the positive encodings; ``inf_bits`` is ``None`` for a
    format without infinities.
    """

    name: str
    bits: int
    exp_bits: int
    man_bits: int
    bias: int
    has_inf: bool
    nan_encoding: str
    dtype: np.dtype
    uint_dtype: np.dtype
    max_finite: float
    max_finite_bits: int
    min_normal: float
    min_normal_bits: int
    min_subnormal: float
    min_subnormal_bits: int
    max_subnormal_bits: int
    one_bits: int
    inf_bits: int | None
    canonical_nan_bits: int

    @property
    def sign_mask(self) -> int:
        """The sign bit, ``1 << (bits - 1)``."""
        return 1 << (self.bits - 1)

    @property
    def exp_mask(self) -> int:
        """Mask of the exponent field in place."""
        return ((1 << self.exp_bits) - 1) << self.man_bits

    @property
    def man_mask(self) -> int:
        """Mask of the mantissa (trailing significand) field."""
        return (1 << self.man_bits) - 1

    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite binade."""
        return ((self.max_finite_bits & self.exp_mask) >> self.man_bits) - self.bias

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal binade (``1 - bias``)."""
        return 1 - self.bias

    def __repr__(self) -> str:
        return f"FloatFormat({self.name!r})"


def _make(name: str, exp_bits: int, man_bits: int, *, fn: bool, dtype, nan: int) -> FloatFormat:
    bits = 1 + exp_bits + man_bits
    bias = (1 << (exp_bits - 1)) - 1
    exp_all = (1 << exp_bits) - 1
    man_all = (1 << man_bits) - 1
    if fn:
        # Exponent field all ones is a normal binade except its all-ones mantissa (NaN).
        max_finite_bits = (exp_all << man_bits) | (man_all - 1)
        inf_bits = None
    else:
        max_finite_bits = ((exp_all - 1) << man_bits) | man_all
        inf_bits = exp_all << man_bits
    max_e = (max_finite_bits >> man_bits) - bias
    max_m = max_finite_bits & man_all
    return FloatFormat(
        name=name,
        bits=bits,
        exp_bits=exp_bits,
        man_bits=man_bits,
        bias=bias,
        has_inf=not fn,
        nan_encoding="fn" if fn else "ieee",
        dtype=np.dtype(dtype),
        uint_dtype=_UINT[bits],
        max_finite=float((1 + max_m / (1 << man_bits)) * 2.0**max_e),
        max_finite_bits=max_finite_bits,
        min_normal=2.0 ** (1 - bias),
        min_normal_bits=1 << man_bits,
        min_subnormal=2.0 ** (1 - bias - man_bits),
        min_subnormal_bits=1,
        max_subnormal_bits=man_all,
        one_bits=bias << man_bits,
        inf_bits=inf_bits,
        canonical_nan_bits=nan,
    )


FP32 = _make("fp32", 8, 23, fn=False, dtype=np.float32, nan=0x7FC00000)
BF16 = _make("bf16", 8, 7, fn=False, dtype=ml_dtypes.bfloat16, nan=0x7FC0)
FP16 = _make("fp16", 5, 10, fn=False, dtype=np.float16, nan=0x7E00)
FP8_E4M3 = _make("fp8_e4m3", 4, 3, fn=True, dtype=ml_dtypes.float8_e4m3fn, nan=0x7F)
FP8_E5M2 = _make("fp8_e5m2", 5, 2, fn=False, dtype=ml_dtypes.float8_e5m2, nan=0x7E)

#: Every format by name.
FORMATS: dict[str, FloatFormat] = {f.name: f for f in (FP32, BF16, FP16, FP8_E4M3, FP8_E5M2)}
#: Multiplier input formats, in the order of the HDL's 2-bit format tag (``Fmt`` 0, 1, 2).
INPUT_FORMATS: tuple[str, ...] = ("bf16", "fp8_e4m3", "fp8_e5m2")
#: The canonical quiet NaN every fp32 arithmetic result that is NaN is replaced by.
FP32_CANONICAL_NAN = FP32.canonical_nan_bits


def get_format(fmt, param: str = "fmt") -> FloatFormat:
    """Return the :class:`FloatFormat` for ``fmt`` (a name, a descriptor, or an object with a
    ``golden_name`` attribute); raise :class:`ValueError` naming ``param`` otherwise."""
    if isinstance(fmt, FloatFormat):
        return fmt
    name = getattr(fmt, "golden_name", fmt)
    if isinstance(name, str) and name in FORMATS:
        return FORMATS[name]
    raise ValueError(f"{param} must be one of {sorted(FORMATS)}, not {fmt!r}")


def as_bits(bits, fmt, param: str = "bits") -> np.ndarray:
    """Validate integer bit patterns of format ``fmt`` and return them as the format's unsigned
    dtype (same shape; a 0-d array for a scalar).

    Raises :class:`TypeError` if ``bits`` is not integer-typed and :class:`ValueError` if any
    element is outside ``[0, 2**fmt.bits)``; both name ``param``.
    """
    f = get_format(fmt)
    b = np.asarray(bits)
    if b.dtype.kind not in "ui":
        raise TypeError(f"{param} must hold integer bit patterns of {f.name}, not {b.dtype}")
    if b.dtype == f.uint_dtype:
        return b
    if b.size and (b.min() < 0 or int(b.max()) >> f.bits):
        bad = b[(b < 0) | (b > (1 << f.bits) - 1)].ravel()[0]
        raise ValueError(
            f"{param} must be {f.bits}-bit patterns of {f.name}; found {int(bad):#x}")
    return b.astype(f.uint_dtype)


def to_bits(values, fmt) -> np.ndarray:
    """Encode ``values`` in format ``fmt`` and return the bit patterns (unsigned, format width).

    An array already of the format's dtype is reinterpreted without change. Anything else is
    converted by numpy/ml_dtypes' ``astype`` (round to nearest even; e4m3 overflow gives NaN),
    which is a convenience for building test data, not the contract's fp32 -> target cast.
    """
    f = get_format(fmt)
    v = np.asarray(values)
    if v.dtype != f.dtype:
        with np.errstate(all="ignore"):
            v = v.astype(f.dtype)
    return v.view(f.uint_dtype)


def from_bits(bits, fmt) -> np.ndarray:
    """Reinterpret bit patterns of format ``fmt`` as an array of the format's numpy dtype."""
    f = get_format(fmt)
    return as_bits(bits, f).view(f.dtype)


def to_fp32_bits(bits, fmt) -> np.ndarray:
    """Widen bit patterns of ``fmt`` to fp32 bit patterns (uint32), exactly.

    Every finite value (zeros, subnormals included) and every infinity maps to the fp32
    encoding of the same value: all formats here fit inside fp32's range, subnormals of the
    narrow formats become fp32 normals, bf16 is a plain ``bits << 16``. A NaN maps to an fp32
    NaN with the same sign and the mantissa left-justified into fp32's (a signalling NaN stays
    signalling, as ``bits << 16`` does for bf16); e4m3's S.1111.111 becomes 0x7FF00000 |
    sign. No arithmetic result depends on NaN payloads: the fp32 units canonicalise NaNs.
    """
    f = get_format(fmt)
    b = as_bits(bits, f).astype(np.uint32)
    if f.exp_bits == 8:  # fp32 and bf16 share binary32's exponent field: a shift is exact.
        return b << np.uint32(32 - f.bits)
    shift = 23 - f.man_bits
    sign = (b >> np.uint32(f.bits - 1)) << np.uint32(31)
    e = ((b >> np.uint32(f.man_bits)) & np.uint32((1 << f.exp_bits) - 1)).astype(np.int64)
    m = (b & np.uint32(f.man_mask)).astype(np.int64)
    exp_all = (1 << f.exp_bits) - 1
    # Normal numbers: rebias the exponent, left-justify the mantissa.
    e32 = e - f.bias + 127
    m32 = m << shift
    # Subnormals m * 2^(emin - man_bits): normalise around the leading one at bit p.
    sub = (e == 0) & (m != 0)
    p = np.frexp(np.where(sub, m, 1).astype(np.float64))[1].astype(np.int64) - 1
    e32 = np.where(sub, p + f.emin - f.man_bits + 127, e32)
    m32 = np.where(sub, (m - (np.int64(1) << p)) << (23 - p), m32)
    e32 = np.where((e == 0) & (m == 0), 0, e32)
    if f.nan_encoding == "ieee":
        special = e == exp_all
    else:
        special = (e == exp_all) & (m == f.man_mask)
    e32 = np.where(special, 255, e32)
    out = sign | (e32.astype(np.uint32) << np.uint32(23)) | m32.astype(np.uint32)
    return out.astype(np.uint32)


def to_fp32(bits, fmt) -> np.ndarray:
    """Widen bit patterns of ``fmt`` to an ``np.float32`` array exactly (see
    :func:`to_fp32_bits` for zeros, subnormals, infinities and NaNs)."""
    return to_fp32_bits(bits, fmt).view(np.float32)


def fp32_bits(x) -> np.ndarray:
    """fp32 bit patterns (uint32) of ``x``; float32 input is reinterpreted unchanged, anything
    else is first converted to float32 by numpy (round to nearest even)."""
    return to_bits(x, FP32)


def fp32_from_bits(b) -> np.ndarray:
    """Reinterpret uint32 bit patterns as ``np.float32`` values."""
    return from_bits(b, FP32)


def is_nan_bits(bits, fmt) -> np.ndarray:
    """Boolean array: which bit patterns of ``fmt`` encode a NaN (either sign, any payload)."""
    f = get_format(fmt)
    mag = as_bits(bits, f) & f.uint_dtype.type(f.sign_mask - 1)
    if f.nan_encoding == "ieee":
        return mag > f.exp_mask
    return mag == f.exp_mask | f.man_mask


def is_inf_bits(bits, fmt) -> np.ndarray:
    """Boolean array: which bit patterns of ``fmt`` encode +-infinity (never, for e4m3)."""
    f = get_format(fmt)
    mag = as_bits(bits, f) & f.uint_dtype.type(f.sign_mask - 1)
    if f.inf_bits is None:
        return np.zeros(mag.shape, dtype=bool)
    return mag == f.inf_bits
