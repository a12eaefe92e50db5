"""Operand formats understood by the arithmetic units.

The numbers are the encoding of the 2-bit format tag that travels with operands through the PE
array and that command descriptors carry. They are mirrored by name in ``golden/formats.py``
(``"bf16"``, ``"fp8_e4m3"``, ``"fp8_e5m2"``); a test checks the two agree.
"""

from amaranth.lib import enum as amaranth_enum

from golden import isa as _isa

__all__ = [
    "Fmt", "parse_formats", "FP32_CANONICAL_NAN",
    "Dtype", "Rounding", "CastFormat", "CAST_FORMATS", "parse_dtypes",
]

#: The only NaN the arithmetic units emit: positive quiet NaN, zero payload (docs/contract.md §4).
FP32_CANONICAL_NAN = 0x7FC0_0000

class Fmt(amaranth_enum.Enum, shape=2):
    """Input format of a multiplier operand (an operand is 16 bits; fp8 uses the low 8)."""

    BF16 = 0  #: bfloat16: 1 sign, 8 exponent (bias 127), 7 mantissa bits.
    FP8_E4M3 = 1  #: OCP E4M3FN: bias 7, no infinities, S.1111.111 is NaN, max 448.
    FP8_E5M2 = 2  #: OCP E5M2: IEEE-like, bias 15, +-inf, max 57344.
    # 3 is reserved: an arithmetic unit given it emits the canonical NaN.

    @property
    def golden_name(self) -> str:
        return _isa.Dtype(self.value).golden_name  # the codes: golden.isa.OPERAND_DTYPES


_BY_NAME = {f.golden_name: f for f in Fmt}


def _parse_members(values, enum_cls, by_name: dict, param: str, noun: str) -> tuple:
    """Validate a build-time collection of ``enum_cls`` members or their golden names."""
    if isinstance(values, (str, enum_cls)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{param} must be a collection of {noun}s, not {values!r}")
    result = []
    for v in values:
        if isinstance(v, enum_cls):
            result.append(v)
        elif isinstance(v, str) and v in by_name:
            result.append(by_name[v])
        else:
            raise ValueError(f"{param} must contain only {sorted(by_name)} "
                             f"(or {enum_cls.__name__} members), not {v!r}")
    if not result:
        raise ValueError(f"{param} must name at least one {noun}, not {values!r}")
    return tuple(sorted(set(result), key=lambda m: m.value))


def parse_formats(formats, *, param: str = "formats") -> tuple[Fmt, ...]:
    """Validate a build-time list of formats, given as :class:`Fmt` members or golden names.

    Raises a :class:`TypeError`/:class:`ValueError` naming ``param`` on bad input.
    """
    return _parse_members(formats, Fmt, _BY_NAME, param, "format")


class Dtype(amaranth_enum.Enum, shape=3):
    """Storage data type of a tensor: the 3-bit code cast units and command descriptors carry.

    Codes 0..2 equal :class:`Fmt`'s, so an operand format is a dtype; fp16 and fp32 are outputs
    of the cast unit only (the multiplier does not take them). Codes 5..7 are reserved.
    """

    BF16 = 0
    FP8_E4M3 = 1
    FP8_E5M2 = 2
    FP16 = 3  #: IEEE binary16: bias 15, 10 mantissa bits, +-inf.
    FP32 = 4  #: IEEE binary32 (the cast unit passes it through, NaNs made canonical).

    @property
    def golden_name(self) -> str:
        return _DTYPE_NAMES[self]


_DTYPE_NAMES = {d: _isa.Dtype(d.value).golden_name for d in Dtype}  # codes: golden.isa.Dtype
_DTYPE_BY_NAME = {name: d for d, name in _DTYPE_NAMES.items()}


class Rounding(amaranth_enum.Enum, shape=2):
    """Rounding mode of an fp32 -> narrower cast (docs/contract.md §4). 3 is reserved."""

    RNE = 0  #: round to nearest, ties to even
    RTZ = 1  #: round toward zero (truncate)
    SR = 2  #: stochastic rounding with r random bits

    @property
    def golden_name(self) -> str:
        return _isa.Rounding(self.value).golden_name


class CastFormat:
    """Bit-level description of a cast target, derived from its field widths alone.

    ``man_bits`` (p) fraction bits, ``exp_bits`` exponent bits with IEEE bias; ``fn`` marks an
    OCP "FN" format (no infinities, only the all-ones pattern is NaN).
    """

    def __init__(self, name: str, exp_bits: int, man_bits: int, *, fn: bool = False):
        self.name = name
        self.exp_bits = exp_bits
        self.man_bits = man_bits
        self.bits = 1 + exp_bits + man_bits
        self.bias = (1 << (exp_bits - 1)) - 1
        self.emin = 1 - self.bias  #: unbiased exponent of the smallest normal
        self.has_inf = not fn
        all_ones_exp = ((1 << exp_bits) - 1) << man_bits
        if fn:
            self.max_finite = all_ones_exp | ((1 << man_bits) - 2)
            self.nan = all_ones_exp | ((1 << man_bits) - 1)
            self.inf = None
        else:
            self.max_finite = all_ones_exp - 1
            self.inf = all_ones_exp
            self.nan = all_ones_exp | (1 << (man_bits - 1))  #: canonical: quiet, sign clear

    def __repr__(self) -> str:
        return f"CastFormat({self.name!r})"


#: The narrow targets of the cast unit, by dtype (fp32 is a passthrough, not listed).
CAST_FORMATS = {
    Dtype.BF16: CastFormat("bf16", 8, 7),
    Dtype.FP16: CastFormat("fp16", 5, 10),
    Dtype.FP8_E4M3: CastFormat("fp8_e4m3", 4, 3, fn=True),
    Dtype.FP8_E5M2: CastFormat("fp8_e5m2", 5, 2),
}


def parse_dtypes(dtypes, *, param: str = "targets") -> tuple[Dtype, ...]:
    """Validate a build-time list of dtypes, given as :class:`Dtype` members or golden names.

    Raises a :class:`TypeError`/:class:`ValueError` naming ``param`` on bad input.
    """
    return _parse_members(dtypes, Dtype, _DTYPE_BY_NAME, param, "dtype")
