"""Operand formats understood by the arithmetic units.

The numbers are the encoding of the 2-bit format tag that travels with operands through the PE
array and that command descriptors carry. They are mirrored by name in ``golden/formats.py``
(``"bf16"``, ``"fp8_e4m3"``, ``"fp8_e5m2"``); a test checks the two agree.
"""

from amaranth.lib import enum as amaranth_enum

__all__ = ["Fmt", "parse_formats", "FP32_CANONICAL_NAN"]

#: The only NaN the arithmetic units emit: positive quiet NaN, zero payload (the contract, §4).
FP32_CANONICAL_NAN = 0x7FC0_0000

class Fmt(amaranth_enum.Enum, shape=2):
    """Input format of a multiplier operand (an operand is 16 bits; fp8 uses the low 8)."""

    BF16 = 0  #: bfloat16: 1 sign, 8 exponent (bias 127), 7 mantissa bits.
    FP8_E4M3 = 1  #: OCP E4M3FN: bias 7, no infinities, S.1111.111 is NaN, max 448.
    FP8_E5M2 = 2  #: OCP E5M2: IEEE-like, bias 15, +-inf, max 57344.
    # 3 is reserved: an arithmetic unit given it emits the canonical NaN.

    @property
    def golden_name(self) -> str:
        return {Fmt.BF16: "bf16", Fmt.FP8_E4M3: "fp8_e4m3", Fmt.FP8_E5M2: "fp8_e5m2"}[self]

_BY_NAME = {f.golden_name: f for f in Fmt}

def parse_formats(formats, *, param: str = "formats") -> tuple[Fmt, ...]:
    """Validate a build-time list of formats, given as :class:`Fmt` members or golden names.

    Raises a :class:`TypeError`/:class:`ValueError` naming ``param`` on bad input.
    """
    if isinstance(formats, (str, Fmt)) or not hasattr(formats, "__iter__"):
        raise TypeError(f"{param} must be a collection of formats, not {formats!r}")
    result = []
    for f in formats:
        if isinstance(f, Fmt):
            result.append(f)
        elif isinstance(f, str) and f in _BY_NAME:
            result.append(_BY_NAME[f])
        else:
            raise ValueError(
                f"{param} must contain only {sorted(_BY_NAME)} (or Fmt members), not {f!r}")
    if not result:
        raise ValueError(f"{param} must name at least one format, not {formats!r}")
    return tuple(sorted(set(result), key=lambda f: f.value))

