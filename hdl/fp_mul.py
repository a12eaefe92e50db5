"""Floating-point multiplier: bf16 / fp8 operands in, IEEE binary32 product out."""

from typing import NamedTuple

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .formats import FP32_CANONICAL_NAN, Fmt, parse_formats
from .pipeline import delay

__all__ = ["FpMultiplier", "FP32_CANONICAL_NAN"]


_FP32_BIAS = 127
_FP32_EMIN = 1 - _FP32_BIAS  # -126: exponent of the smallest normal
_FP32_EMAX = _FP32_BIAS  # 127
_FP32_MAN_BITS = 23

# Unbiased exponents: operands lie in [-133, 127] (bf16 subnormals go down to 2^-133), products
# in [-266, 255]; signed(10) holds both.
_EXP_SHAPE = signed(10)
_SIG_BITS = 8  # a normalised operand significand, hidden bit included (bf16 has 1 + 7)


class _FloatFormat(NamedTuple):
    exp_bits: int
    man_bits: int
    bias: int
    has_inf: bool  # IEEE-like specials (E all ones: inf / NaN); else only S.1..1.1..1 is NaN

    @property
    def width(self) -> int:
        return 1 + self.exp_bits + self.man_bits

    @property
    def raw_layout(self) -> data.StructLayout:
        return data.StructLayout({"man": self.man_bits, "exp": self.exp_bits, "sign": 1})


_FORMATS = {
    Fmt.BF16: _FloatFormat(exp_bits=8, man_bits=7, bias=127, has_inf=True),
    Fmt.FP8_E4M3: _FloatFormat(exp_bits=4, man_bits=3, bias=7, has_inf=False),
    Fmt.FP8_E5M2: _FloatFormat(exp_bits=5, man_bits=2, bias=15, has_inf=True),
}


class _Operand(data.Struct):
    """An operand after unpacking: class flags, and value = sig * 2^(exp - 7) when finite."""

    sign: 1
    nan: 1
    inf: 1
    zero: 1
    exp: _EXP_SHAPE  # unbiased exponent of sig[7]
    sig: _SIG_BITS  # normalised: sig[7] == 1 for finite non-zero operands


class _Product(data.Struct):
    """The exact product: class flags, and value = sig * 2^(exp - 15) when finite."""

    sign: 1
    nan: 1
    inf: 1
    zero: 1
    exp: _EXP_SHAPE  # unbiased exponent of sig[15]
    sig: 2 * _SIG_BITS  # normalised: sig[15] == 1 for finite non-zero products


_Fp32 = data.StructLayout({"man": _FP32_MAN_BITS, "exp": 8, "sign": 1})


def _unpack(m, op, raw, fmt):
    """Drive ``op`` (an :class:`_Operand`) from the raw bits of one operand of format ``fmt``.

    Adds comb assignments in the current control-flow context of ``m``.
    """
    f = _FORMATS[fmt]
    fields = f.raw_layout(raw[:f.width])
    exp_ones = (1 << f.exp_bits) - 1
    man_ones = (1 << f.man_bits) - 1
    pad = _SIG_BITS - 1 - f.man_bits  # zero bits below the mantissa in an 8-bit significand

    m.d.comb += op.sign.eq(fields.sign)
    # Normal numbers (the default): hidden one, exponent field minus bias.
    m.d.comb += [
        op.exp.eq(fields.exp - f.bias),
        op.sig.eq(Cat(Const(0, pad), fields.man, Const(1, 1))),
    ]
    with m.If(fields.exp == 0):
        with m.If(fields.man == 0):
            m.d.comb += op.zero.eq(1)
        # Subnormal: value = man * 2^(1 - bias - man_bits); normalise on the leading one. The loop
        # goes upwards so the assignment for the highest set bit is the one that takes effect.
        for i in range(f.man_bits):
            with m.If(fields.man[i]):
                m.d.comb += [
                    op.exp.eq(1 - f.bias - f.man_bits + i),
                    op.sig.eq(Cat(Const(0, _SIG_BITS - 1 - i), fields.man[:i + 1])),
                ]
    if f.has_inf:
        with m.If(fields.exp == exp_ones):
            with m.If(fields.man == 0):
                m.d.comb += op.inf.eq(1)
            with m.Else():
                m.d.comb += op.nan.eq(1)
    else:
        with m.If((fields.exp == exp_ones) & (fields.man == man_ones)):
            m.d.comb += op.nan.eq(1)


class FpMultiplier(wiring.Component):
    """Multiply two bf16 / fp8 operands into an IEEE binary32 product.

    Each operand's format is chosen per operand at run time by ``a_fmt`` / ``b_fmt``
    (:class:`~hdl.formats.Fmt`); mixed formats are allowed. fp8 operands sit in the low 8 bits
    of the 16-bit operand ports; the upper bits are ignored.

    Numerics (ARCHITECTURE.md §4): both operands are widened to fp32 exactly and ``result`` is
    exactly ``np.float32(a) * np.float32(b)`` -- IEEE binary32 multiplication with
    round-to-nearest-even, subnormal results kept, overflow to ±inf. fp8 × fp8 products are
    always exact; only products that fall below the fp32 normal range are rounded. NaN × x,
    0 × inf, a reserved format tag (3) and a format not enabled at build time all give the
    canonical NaN ``0x7FC00000``; otherwise the sign is the XOR of the operand signs (signed
    zeros and infinities included).

    Timing: ``latency == stages`` cycles from operands to ``result``; fully pipelined, one
    product per cycle. ``en`` is the clock enable of every pipeline register (domain ``sync``);
    with ``stages=0`` the unit is combinational and ``en`` is unused.

    Parameters
    ----------
    stages : int
        Number of pipeline register stages (>= 0). Registers go, in order of preference, at the
        output, after the significand multiply, and after operand unpacking; stages beyond 3
        are extra output registers (for retiming).
    formats : collection of Fmt or str
        Operand formats to build decode logic for (see :func:`~hdl.formats.parse_formats`).

    Attributes
    ----------
    latency : int
        ``stages``.
    formats : tuple of Fmt
        The enabled formats.
    """

    def __init__(self, *, stages: int = 1, formats=("bf16", "fp8_e4m3", "fp8_e5m2")):
        if not isinstance(stages, int) or isinstance(stages, bool):
            raise TypeError(f"stages must be a non-negative integer, not {stages!r}")
        if stages < 0:
            raise ValueError(f"stages must be a non-negative integer, not {stages!r}")
        self.formats = parse_formats(formats, param="formats")
        self.stages = stages
        self.latency = stages
        super().__init__({
            "en": In(1),
            "a": In(16),
            "a_fmt": In(Fmt),
            "b": In(16),
            "b_fmt": In(Fmt),
            "result": Out(32),
        })

    def elaborate(self, platform):
        # Design note.
        #
        # Datapath: unpack -> | -> 8x8 multiply, exponent add, normalise -> | -> pack/round -> |
        #
        # * Unpack turns each operand into flags, an unbiased exponent and an 8-bit significand
        #   with the leading one at bit 7 (fp8 and bf16 subnormals are normalised by a tiny
        #   leading-one search), so the rest of the datapath is format-independent.
        # * The 16-bit significand product has at most 16 significant bits and fp32 keeps 24,
        #   so every product in the fp32 normal range is exact: no rounding there, and since an
        #   exact normal result is < 2^128 there is no rounding overflow either (exponent >= 128
        #   means the exact value is >= 2^128, hence ±inf). Only results below 2^-126 (possible
        #   only with a bf16 operand) lose bits: the significand is shifted right by
        #   (-126 - exp), with guard/sticky, and rounded to nearest even. A carry out of the
        #   rounded subnormal significand lands in the exponent field's LSB, which is exactly
        #   the rounding up to the smallest normal.
        # * Stage boundaries ("|" above): stages=1 registers the output; 2 adds one after the
        #   multiply (splitting multiplier from shifter/rounder, the two deep cones); 3 adds one
        #   after unpack. More stages add output registers that synthesis can retime.
        m = Module()

        cut_unpack = 1 if self.stages >= 3 else 0
        cut_product = 1 if self.stages >= 2 else 0
        cut_output = self.stages - cut_unpack - cut_product

        # Unpack.
        ops = []
        for name, raw, fmt in (("a", self.a, self.a_fmt), ("b", self.b, self.b_fmt)):
            op = Signal(_Operand, name=f"{name}_op")
            with m.Switch(fmt):
                for f in self.formats:
                    with m.Case(f):
                        _unpack(m, op, raw, f)
                with m.Default():  # reserved tag, or a format not built
                    m.d.comb += op.nan.eq(1)
            ops.append(delay(m, op, cut_unpack, name=f"{name}_op", en=self.en))
        a_op, b_op = ops

        # Multiply: exact 16-bit significand product in [1, 4) * 2^14, normalised to [1, 2).
        prod = Signal(_Product)
        sig_prod = a_op.sig * b_op.sig
        carry = sig_prod[-1]
        m.d.comb += [
            prod.sign.eq(a_op.sign ^ b_op.sign),
            prod.nan.eq(a_op.nan | b_op.nan
                        | (a_op.inf & b_op.zero) | (a_op.zero & b_op.inf)),
            prod.inf.eq(a_op.inf | b_op.inf),
            prod.zero.eq(a_op.zero | b_op.zero),
            prod.exp.eq(a_op.exp + b_op.exp + carry),
            prod.sig.eq(Mux(carry, sig_prod, sig_prod << 1)),
        ]
        p = delay(m, prod, cut_product, name="prod", en=self.en)

        # Pack to fp32, rounding results below the normal range.
        result = Signal(_Fp32)
        m.d.comb += result.sign.eq(p.sign)
        with m.If(p.nan):
            m.d.comb += result.eq(FP32_CANONICAL_NAN)
        with m.Elif(p.inf | (p.exp > _FP32_EMAX)):
            m.d.comb += result.exp.eq(0xFF)
        with m.Elif(p.zero):
            pass
        with m.Elif(p.exp >= _FP32_EMIN):
            m.d.comb += [
                result.exp.eq(p.exp + _FP32_BIAS),
                result.man.eq(Cat(Const(0, _FP32_MAN_BITS + 1 - len(p.sig)), p.sig[:-1])),
            ]
        with m.Else():
            # Subnormal: significand (sig << 8, 24 bits) >> shift; shifts of 25 and more all
            # round to zero (the round bit is then 0), so clamp there.
            max_shift = _FP32_MAN_BITS + 2
            shift = Signal(range(max_shift + 1))
            m.d.comb += shift.eq(Mux(p.exp < _FP32_EMIN - max_shift + 1,
                                     max_shift, _FP32_EMIN - p.exp))
            # sig << max_shift >> shift: nothing falls off the bottom; the top 24 bits are the
            # truncated subnormal significand (sig << 8 >> shift), then round bit, then sticky.
            low_bits = max_shift + len(p.sig) - (_FP32_MAN_BITS + 1) - 1
            shifted = Cat(Const(0, max_shift), p.sig) >> shift
            trunc = shifted[low_bits + 1:]
            round_bit = shifted[low_bits]
            sticky = shifted[:low_bits].any()
            round_up = round_bit & (sticky | trunc[0])
            m.d.comb += result.as_value()[:31].eq(trunc + round_up)

        m.d.comb += self.result.eq(delay(m, result, cut_output, name="result", en=self.en))
        return m
