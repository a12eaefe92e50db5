"""Floating-point multiplier: bf16 / fp8 operands in, IEEE binary32 product out."""

from typing import NamedTuple

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .formats import FP32_CANONICAL_NAN, Fmt, parse_formats
from .params import check_int
from .pipeline import delay

__all__ = ["Operand", "OperandDecoder", "FpProduct", "FpMultiplier", "FP_MUL_MAX_CUTS",
           "FP_PRODUCT_MAX_CUTS", "split_stages", "registered_phases", "FP32_CANONICAL_NAN"]


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


class Operand(data.Struct):
    """A decoded operand (:class:`OperandDecoder`'s output): class flags, and value =
    sig * 2^(exp - 7) when finite. Format-independent: the product datapath
    (:class:`FpProduct`) and the PE see only this."""

    sign: 1
    nan: 1
    inf: 1
    zero: 1
    exp: _EXP_SHAPE  # unbiased exponent of sig[7]
    sig: _SIG_BITS  # normalised: sig[7] == 1 for finite non-zero operands


def _unpack(m, op, raw, fmt):
    """Drive ``op`` (an :class:`Operand`) from the raw bits of one operand of format ``fmt``.

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


#: The bits of ``+0`` decoded (what a weight register holds before any load): a zero, so that
#: a tile never loaded multiplies to ±0 (or NaN with an infinite operand), as bf16 +0 would.
OPERAND_ZERO = {"zero": 1}


class OperandDecoder(wiring.Component):
    """Decode a bf16 / fp8 operand into an :class:`Operand`: combinational.

    ``op`` is the format-independent form of ``raw`` read as format ``fmt``
    (:class:`~hdl.formats.Fmt`; fp8 in the low 8 bits, the upper ones ignored): sign; class
    flags zero, inf, NaN; for finite non-zero values ``value = sig · 2^(exp − 7)`` with the
    8-bit significand normalised (``sig[7]`` = 1, subnormals included). A reserved tag (3) or a
    format not built decodes as NaN.

    One decoder serves a whole row or column of PEs: :class:`~hdl.systolic.SystolicArray` and
    :class:`~hdl.pe.PEColumn` decode each operand once at the array's edge, and the PEs pass
    the decoded form on.

    Parameters
    ----------
    formats : collection of Fmt or str
        The formats to decode (see :func:`~hdl.formats.parse_formats`); default all three.

    Raises
    ------
    TypeError
        If ``formats`` is not a collection.
    ValueError
        If ``formats`` is empty or names an unknown format.
    """

    raw: In(16)
    fmt: In(Fmt)
    op: Out(Operand)

    def __init__(self, *, formats=("bf16", "fp8_e4m3", "fp8_e5m2")):
        self.formats = parse_formats(formats, param="formats")
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        with m.Switch(self.fmt):
            for f in self.formats:
                with m.Case(f):
                    _unpack(m, self.op, self.raw, f)
            with m.Default():  # reserved tag, or a format not built
                m.d.comb += self.op.nan.eq(1)
        return m


class _Product(data.Struct):
    """The exact product as the multiplier gives it: class flags, and value = sig * 2^(exp - 14)
    when finite."""

    sign: 1
    nan: 1
    inf: 1
    zero: 1
    exp: _EXP_SHAPE  # the sum of the operands' unbiased exponents: that of sig[14]
    sig: 2 * _SIG_BITS  # in [2^14, 2^16) for finite non-zero products (not yet normalised)


_MAX_SHIFT = _FP32_MAN_BITS + 2  # 25: every right shift from here on rounds to zero


class _Classified(data.Struct):
    """A finite product sorted by range: normal (shift 0) or below 2^-126 (shift >= 1)."""

    sign: 1
    nan: 1
    inf: 1  # an infinite operand, or a finite product >= 2^128
    zero: 1
    exp: 8  # exponent field before rounding: 0 below the normal range
    shift: range(_MAX_SHIFT + 1)  # right shift of the 24-bit significand, clamped at 25
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
#: The same for :class:`FpProduct` (the multiplier without its operand decoding).
FP_PRODUCT_MAX_CUTS = FP_MUL_MAX_CUTS - 1

# Which of FpProduct's phase outputs are registered, for each number of its stages.
_PRODUCT_BOUNDARIES = {
    0: (),
    1: ("result",),
    2: ("product", "result"),
    3: ("product", "aligned", "result"),
    4: ("multiplied", "product", "aligned", "result"),
}
assert len(_PRODUCT_BOUNDARIES) == FP_PRODUCT_MAX_CUTS + 1


def split_stages(stages: int) -> tuple[int, int]:
    """A multiplier depth of ``stages`` as ``(operand, product)``: whether the decoded operands
    are registered (0 or 1; from 3 stages on) and :class:`FpProduct`'s stages.

    In order of preference the registers go at the output, after the classification of the
    product, after the operand decoding, after the subnormal alignment and at the DSP output;
    stages beyond :data:`FP_MUL_MAX_CUTS` are extra output registers.
    """
    operand = int(stages >= 3)
    return operand, stages - operand


def registered_phases(stages: int) -> tuple[str, ...]:
    """The phases of :class:`FpMultiplier` with ``stages`` (up to :data:`FP_MUL_MAX_CUTS`)
    that end in a register: ``"unpacked"`` (the decoded operands), then :class:`FpProduct`'s
    ``"multiplied"``, ``"product"``, ``"aligned"``, ``"result"``."""
    operand, product = split_stages(min(stages, FP_MUL_MAX_CUTS))
    return ("unpacked",) * operand + _PRODUCT_BOUNDARIES[product]


class FpProduct(wiring.Component):
    """The IEEE binary32 product of two decoded operands (:class:`Operand`).

    ``result`` is ``np.float32(a) * np.float32(b)`` for the values ``a_op`` and ``b_op`` stand
    for (the numerics of :class:`FpMultiplier`, which is this unit behind two
    :class:`OperandDecoder` s). A PE uses it directly, its operands decoded once at the array's
    edge.

    Timing: ``latency == stages`` enabled cycles; fully pipelined, one product per cycle;
    ``en`` is the clock enable of every pipeline register.

    Parameters
    ----------
    stages : int
        Pipeline register stages (>= 0): at the output, after the classification, after the
        alignment, at the DSP output (in that order); beyond :data:`FP_PRODUCT_MAX_CUTS` (4),
        extra output registers.

    Raises
    ------
    TypeError
        If ``stages`` is not an integer.
    ValueError
        If ``stages`` is negative.
    """

    en: In(1)
    a_op: In(Operand)
    b_op: In(Operand)
    result: Out(32)

    def __init__(self, *, stages: int = 1):
        self.stages = self.latency = check_int("stages", stages, lo=0)
        super().__init__()

    def elaborate(self, platform):
        # Design note.
        #
        # Four phases; a pipeline register can follow each (the phase names below):
        #
        #   multiplied | 8 x 8 significand multiply (a DSP block), exponent sum, class flags
        #   product    | the product in [1, 4) * 2^14 normalised to [1, 2) (one bit of shift,
        #              | carried into the exponent) and classified by its exponent field
        #              | e + 127: overflow (>= 255), normal (>= 1), or below 2^-126 with the
        #              | right shift 1 - field (clamped at 25) that gives it the subnormal
        #              | scale (compares of e with constants, side by side)
        #   aligned    | the 24-bit significand shifted right by that amount: fraction and round
        #              | bit from a 25-bit window, and the sticky bit as "a one of the product
        #              | below bit shift - 9" (a mask compare, not the shifter's low half: the
        #              | window's 9 low bits are zeros, so only the product's bits can be lost)
        #   result     | RNE: add the round-up bit to the fraction; its carry out sets the
        #              | exponent field's LSB (a subnormal rounding up to the smallest normal:
        #              | only subnormals round), then mux in NaN, ±inf and ±0
        #
        # The 16-bit significand product has at most 16 significant bits and fp32 keeps 24, so
        # every product in the fp32 normal range is exact: no rounding there, and since an exact
        # normal result is < 2^128 there is no rounding overflow either (exponent >= 128 means
        # the exact value is >= 2^128, hence ±inf). Only results below 2^-126 (possible only
        # with a bf16 operand) lose bits.
        #
        # From ECP5 place-and-route (synth/fpga.py, speed 6, seed 1): registering the DSP
        # output (4 stages here, 5 in a multiplier with its decoders) keeps the DSP out of
        # every path with logic after it.
        m = Module()
        registered = _PRODUCT_BOUNDARIES[min(self.stages, FP_PRODUCT_MAX_CUTS)]
        extra_out = max(self.stages - FP_PRODUCT_MAX_CUTS, 0)

        def boundary(value, name, cycles=0):
            return delay(m, value, (name in registered) + cycles, name=name, en=self.en)

        a_op, b_op = self.a_op, self.b_op
        # Multiply: the exact 16-bit significand product, in [1, 4) * 2^14.
        raw = Signal(_Product)
        m.d.comb += [
            raw.sign.eq(a_op.sign ^ b_op.sign),
            raw.nan.eq(a_op.nan | b_op.nan | (a_op.inf & b_op.zero) | (a_op.zero & b_op.inf)),
            raw.inf.eq(a_op.inf | b_op.inf),
            raw.zero.eq(a_op.zero | b_op.zero),
            raw.exp.eq(a_op.exp + b_op.exp),
            raw.sig.eq(a_op.sig * b_op.sig),
        ]
        r = boundary(raw, "multiplied")

        # Normalise to [2^15, 2^16) -- one bit of shift, carried into the exponent -- and
        # classify by the biased exponent field e + carry + 127: normal from 1, overflow from
        # 255, below 1 the significand goes right by 1 - field, clamped at 25 (from there on
        # every bit lies below the round bit). Each class is a compare of e with a constant,
        # one for each value of the carry, all side by side: no compare waits for the field's
        # sum (three carry chains in series were the core's critical path).
        carry = r.sig[-1]

        def exp_ge(bound):
            """e + carry >= bound."""
            return Mux(carry, r.exp >= bound - 1, r.exp >= bound)

        normal = exp_ge(1 - _FP32_BIAS)
        overflow = exp_ge(255 - _FP32_BIAS)
        clamped = ~exp_ge(2 - _FP32_BIAS - _MAX_SHIFT)  # 1 - field >= 25
        field = Signal(8)  # (its low bits: the exponent of a normal result)
        under = Signal(5)  # 1 - field's low bits (1 - field mod 32, a shift below 25)
        m.d.comb += [field.eq(r.exp[:8] + _FP32_BIAS + carry),
                     under.eq(1 - _FP32_BIAS - r.exp[:5] - carry)]
        cls = Signal(_Classified)
        m.d.comb += [
            cls.sign.eq(r.sign),
            cls.nan.eq(r.nan),
            cls.inf.eq(r.inf | overflow),
            cls.zero.eq(r.zero),
            cls.exp.eq(Mux(normal, field, 0)),
            cls.shift.eq(Mux(normal, 0, Mux(clamped, _MAX_SHIFT, under))),
            cls.sig.eq(Mux(carry, r.sig, r.sig << 1)),
        ]
        c = boundary(cls, "product")

        # Align: the 24-bit significand sig << 8, with the round bit below it, shifted right.
        window_bits = _FP32_MAN_BITS + 2  # hidden bit, fraction, round bit
        low_zeros = window_bits - len(c.sig)  # 9
        shifted = Cat(Const(0, low_zeros), c.sig) >> c.shift
        # The bits shifted out of the window: those of sig below bit shift - low_zeros.
        lost = Cat(c.sig[i] & (c.shift > low_zeros + i) for i in range(len(c.sig)))
        aligned = Signal(_Aligned)
        m.d.comb += [
            aligned.sign.eq(c.sign),
            aligned.nan.eq(c.nan),
            aligned.inf.eq(c.inf),
            aligned.zero.eq(c.zero),
            aligned.exp.eq(c.exp),
            aligned.man.eq(shifted[1:1 + _FP32_MAN_BITS]),
            aligned.round.eq(shifted[0]),
            aligned.sticky.eq(lost.any()),
        ]
        n = boundary(aligned, "aligned")

        # Round to nearest even and pack. Only a subnormal (exponent field 0) rounds, so a carry
        # out of the fraction makes the field 1.
        round_up = n.round & (n.sticky | n.man[0])
        man = Signal(_FP32_MAN_BITS + 1)
        m.d.comb += man.eq(n.man + round_up)
        result = Signal(_Fp32)
        m.d.comb += result.sign.eq(n.sign)
        with m.If(n.nan):
            m.d.comb += result.eq(FP32_CANONICAL_NAN)
        with m.Elif(n.inf):
            m.d.comb += result.exp.eq(0xFF)
        with m.Elif(n.zero):
            pass
        with m.Else():
            m.d.comb += [result.man.eq(man[:_FP32_MAN_BITS]),
                         result.exp.eq(n.exp | man[-1])]

        m.d.comb += self.result.eq(boundary(result, "result", extra_out))
        return m


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

    Structure: two :class:`OperandDecoder` s and an :class:`FpProduct`; in the PE array the
    decoders sit at the array's edge instead, one per row and column.

    Timing: ``latency == stages`` cycles from operands to ``result``; fully pipelined, one
    product per cycle. ``en`` is the clock enable of every pipeline register (domain ``sync``);
    with ``stages=0`` the unit is combinational and ``en`` is unused.

    Parameters
    ----------
    stages : int
        Number of pipeline register stages (>= 0), placed as :func:`split_stages` says: with 3
        or more the decoded operands are registered, the rest are :class:`FpProduct`'s. With 1
        or more stages ``result`` comes straight from a register. The :class:`~hdl.pe.PE`
        default is 5.
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
        m = Module()
        operand_cut, product_stages = split_stages(self.stages)
        m.submodules.product = product = FpProduct(stages=product_stages)
        m.d.comb += product.en.eq(self.en)
        for name, raw, fmt, port in (("a", self.a, self.a_fmt, product.a_op),
                                     ("b", self.b, self.b_fmt, product.b_op)):
            m.submodules[f"{name}_dec"] = dec = OperandDecoder(formats=self.formats)
            m.d.comb += [dec.raw.eq(raw), dec.fmt.eq(fmt)]
            m.d.comb += port.eq(delay(m, dec.op, operand_cut, name=f"{name}_op", en=self.en))
        m.d.comb += self.result.eq(product.result)
        return m
