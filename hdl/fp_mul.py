"""Floating-point multiplier: bf16 / fp8 operands in, IEEE binary32 product out."""

from typing import NamedTuple

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .formats import FP32_CANONICAL_NAN, Fmt, parse_formats
from .params import check_int
from .pipeline import delay

__all__ = ["FpMultiplier", "FP_MUL_MAX_CUTS", "FP32_CANONICAL_NAN"]


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
    """The exact product as the multiplier gives it: class flags, and value = sig * 2^(exp - 14)
    when finite."""

    sign: 1
    nan: 1
    inf: 1
    zero: 1
    exp: _EXP_SHAPE  # the sum of the operands' unbiased exponents: that of sig[14]
    sig: 2 * _SIG_BITS  # in [2^14, 2^16) for finite non-zero products (not yet normalised)


class _Classified(data.Struct):
    """A finite product sorted by range: normal (shift 0) or below 2^-126 (shift >= 1)."""

    sign: 1
    nan: 1
    inf: 1  # an infinite operand, or a finite product >= 2^128
    zero: 1
    exp: 8  # exponent field before rounding: 0 below the normal range
    shift: range(_FP32_MAN_BITS + 3)  # right shift of sig << 8, clamped at 25
    sig: 2 * _SIG_BITS  # normalised: sig[15] == 1 for finite non-zero products


class _Aligned(data.Struct):
    """The fp32 result before rounding."""

    sign: 1
    nan: 1
    inf: 1
    zero: 1
    exp: 8
    man: _FP32_MAN_BITS
    round: 1  # the first bit below the fraction's LSB
    sticky: 1  # OR of the bits below `round`


_Fp32 = data.StructLayout({"man": _FP32_MAN_BITS, "exp": 8, "sign": 1})

#: The number of phase boundaries of :class:`FpMultiplier` that can hold a pipeline register;
#: ``stages`` beyond it add output registers.
FP_MUL_MAX_CUTS = 5

# Which phase outputs are registered, for each number of stages up to FP_MUL_MAX_CUTS.
_BOUNDARIES = {
    0: (),
    1: ("result",),
    2: ("product", "result"),
    3: ("unpacked", "product", "result"),
    4: ("unpacked", "product", "aligned", "result"),
    5: ("unpacked", "multiplied", "product", "aligned", "result"),
}
assert len(_BOUNDARIES) == FP_MUL_MAX_CUTS + 1


def _unpack(m, op, raw, fmt):
    """Drive ``op`` (an :class:`_Operand`) from the raw bits of one operand of format ``fmt``.

    Adds comb assignments in the current control-flow context of ``m``.
    """
    # lab1 begin: unpack
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
    # lab1 end: unpack


class FpMultiplier(wiring.Component):
    """Multiply two bf16 / fp8 operands into an IEEE binary32 product.

    Each operand's format is chosen per operand at run time by ``a_fmt`` / ``b_fmt``
    (:class:`~hdl.formats.Fmt`); mixed formats are allowed. fp8 operands sit in the low 8 bits
    of the 16-bit operand ports; the upper bits are ignored.

    Numerics (docs/contract.md §4): both operands are widened to fp32 exactly and ``result`` is
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
        output, after the significand multiply and classification, after operand unpacking,
        after the subnormal alignment, and at the DSP product (see ``elaborate``); stages beyond
        :data:`FP_MUL_MAX_CUTS` (5) are extra output registers (for retiming). With 1 or more
        stages ``result`` comes straight from a register. The :class:`~hdl.pe.PE` default is 5.
    formats : collection of Fmt or str
        Operand formats to build decode logic for (see :func:`~hdl.formats.parse_formats`).

    Raises
    ------
    TypeError
        If ``stages`` is not an integer; if ``formats`` is not a collection.
    ValueError
        If ``stages`` is negative; if ``formats`` is empty or names an unknown format.

    Attributes
    ----------
    latency : int
        ``stages``.
    formats : tuple of Fmt
        The enabled formats.
    """

    def __init__(self, *, stages: int = 1, formats=("bf16", "fp8_e4m3", "fp8_e5m2")):
        check_int("stages", stages, lo=0)
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
        # Five phases; a pipeline register can follow each (the phase names below):
        #
        #   unpacked   | each operand -> flags, unbiased exponent, 8-bit significand with the
        #              | leading one at bit 7 (fp8 and bf16 subnormals are normalised by a tiny
        #              | leading-one search), so the rest of the datapath is format-independent;
        #              | the exponent sum
        #   multiplied | 8 x 8 significand multiply (a DSP block), class flags
        #   product    | the product in [1, 4) * 2^14 normalised to [1, 2) (one bit of shift,
        #              | carried into the exponent) and classified: overflow (exponent > 127),
        #              | and for results below 2^-126 the right shift (-126 - exp, clamped at
        #              | 25) that gives them the subnormal scale; the exponent field before
        #              | rounding (0 for subnormals). The classification is worked out for both
        #              | values of the carry while the DSP multiplies, then picked by the carry.
        #   aligned    | the significand shifted right by that amount: fraction, round bit and
        #              | sticky bit (normal results shift by 0 and have round = sticky = 0)
        #   result     | RNE: add the round-up bit to {exponent field, fraction} -- a carry out
        #              | of a subnormal fraction lands in the exponent field's LSB, which is
        #              | exactly the rounding up to the smallest normal -- then mux in NaN, ±inf
        #              | and ±0
        #
        # The 16-bit significand product has at most 16 significant bits and fp32 keeps 24, so
        # every product in the fp32 normal range is exact: no rounding there, and since an exact
        # normal result is < 2^128 there is no rounding overflow either (exponent >= 128 means
        # the exact value is >= 2^128, hence ±inf). Only results below 2^-126 (possible only
        # with a bf16 operand) lose bits.
        #
        # Stage boundaries per `stages` (_BOUNDARIES): 1 registers the output; 2 adds one after
        # `product` (splitting the multiplier from shifter and rounder, the two deep cones); 3
        # adds one after unpacking; 4 one after the alignment shifter; 5 one at the DSP output.
        # From ECP5 place-and-route (synth/fpga.py, speed 6, seed 1): with 4 stages the DSP plus
        # the carry select is the longest segment (~105 MHz, less once placed in a PE column);
        # registering the DSP output (5) takes the unit to ~133 MHz, with margin for the PE.
        # Stages beyond 5 are extra output registers (for retiming).
        m = Module()
        registered = _BOUNDARIES[min(self.stages, FP_MUL_MAX_CUTS)]
        extra_out = max(self.stages - FP_MUL_MAX_CUTS, 0)

        def boundary(value, name, cycles=0):
            return delay(m, value, (name in registered) + cycles, name=name, en=self.en)

        # Unpack; the exponent sum is formed here already, so that the next phase has one carry
        # chain less on its way to the classification.
        ops = []
        for name, raw, fmt in (("a", self.a, self.a_fmt), ("b", self.b, self.b_fmt)):
            op = Signal(_Operand, name=f"{name}_op")
            with m.Switch(fmt):
                for f in self.formats:
                    with m.Case(f):
                        _unpack(m, op, raw, f)
                with m.Default():  # reserved tag, or a format not built
                    m.d.comb += op.nan.eq(1)
            ops.append(op)
        exp_sum = Signal(_EXP_SHAPE)
        m.d.comb += exp_sum.eq(ops[0].exp + ops[1].exp)
        cut = int("unpacked" in registered)
        a_op, b_op = (delay(m, op, cut, name=f"{name}_op", en=self.en)
                      for name, op in zip("ab", ops, strict=True))
        exp_sum = delay(m, exp_sum, cut, name="exp_sum", en=self.en)

        # Multiply: the exact 16-bit significand product, in [1, 4) * 2^14.
        raw = Signal(_Product)
        m.d.comb += [
            raw.sign.eq(a_op.sign ^ b_op.sign),
            raw.nan.eq(a_op.nan | b_op.nan | (a_op.inf & b_op.zero) | (a_op.zero & b_op.inf)),
            raw.inf.eq(a_op.inf | b_op.inf),
            raw.zero.eq(a_op.zero | b_op.zero),
            raw.exp.eq(exp_sum),
            raw.sig.eq(a_op.sig * b_op.sig),
        ]
        r = boundary(raw, "multiplied")

        # Normalise to [2^15, 2^16) -- one bit of shift, carried into the exponent -- and
        # classify: overflow, normal, or below the normal range (then shifted right by `shift`;
        # shifts of 25 and more all round to zero -- the round bit is then 0 -- so clamp there).
        # The classification is computed from the exponent sum for both values of the carry, in
        # parallel with the multiply, and chosen by the carry (the product's top bit).
        max_shift = _FP32_MAN_BITS + 2
        carry = r.sig[-1]

        def classify(c):
            # The normalised product's exponent is r.exp + c; the carry is folded into the
            # constants so that every term is one comparison or addition on r.exp.
            normal = r.exp >= _FP32_EMIN - c
            overflow = r.exp > _FP32_EMAX - c
            field = Mux(normal, r.exp + (_FP32_BIAS + c), 0)[:8]
            shift = Mux(normal, 0, Mux(r.exp < _FP32_EMIN - max_shift + 1 - c,
                                       max_shift, (_FP32_EMIN - c) - r.exp))
            return overflow, field, shift

        candidates = [classify(c) for c in (0, 1)]
        cls = Signal(_Classified)
        m.d.comb += [
            cls.sign.eq(r.sign),
            cls.nan.eq(r.nan),
            cls.inf.eq(r.inf | Mux(carry, candidates[1][0], candidates[0][0])),
            cls.zero.eq(r.zero),
            cls.exp.eq(Mux(carry, candidates[1][1], candidates[0][1])),
            cls.shift.eq(Mux(carry, candidates[1][2], candidates[0][2])),
            cls.sig.eq(Mux(carry, r.sig, r.sig << 1)),
        ]
        c = boundary(cls, "product")

        # Align: (sig << 8, the 24-bit significand) >> shift, as sig << max_shift >> shift, so
        # nothing falls off the bottom: the top 24 bits are the truncated significand (its top
        # bit is the hidden one of a normal result, 0 for a subnormal), then the round bit, then
        # the sticky bits.
        low_bits = max_shift + len(c.sig) - (_FP32_MAN_BITS + 1) - 1
        shifted = Cat(Const(0, max_shift), c.sig) >> c.shift
        aligned = Signal(_Aligned)
        m.d.comb += [
            aligned.sign.eq(c.sign),
            aligned.nan.eq(c.nan),
            aligned.inf.eq(c.inf),
            aligned.zero.eq(c.zero),
            aligned.exp.eq(c.exp),
            aligned.man.eq(shifted[low_bits + 1:low_bits + 1 + _FP32_MAN_BITS]),
            aligned.round.eq(shifted[low_bits]),
            aligned.sticky.eq(shifted[:low_bits].any()),
        ]
        n = boundary(aligned, "aligned")

        # Round to nearest even and pack.
        round_up = n.round & (n.sticky | n.man[0])
        magnitude = (Cat(n.man, n.exp) + round_up)[:31]
        result = Signal(_Fp32)
        m.d.comb += result.sign.eq(n.sign)
        with m.If(n.nan):
            m.d.comb += result.eq(FP32_CANONICAL_NAN)
        with m.Elif(n.inf):
            m.d.comb += result.exp.eq(0xFF)
        with m.Elif(n.zero):
            pass
        with m.Else():
            m.d.comb += result.as_value()[:31].eq(magnitude)

        m.d.comb += self.result.eq(boundary(result, "result", extra_out))
        return m
