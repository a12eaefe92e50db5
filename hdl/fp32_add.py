"""IEEE binary32 adder: ``result = a + b``, round to nearest even, subnormals kept."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .formats import FP32_CANONICAL_NAN
from .params import check_int

__all__ = ["Fp32Adder", "FP32_ADD_MAX_STAGES", "FP32_CANONICAL_NAN", "count_leading_zeros"]


#: The largest supported ``stages``: one register per phase boundary of the datapath.
FP32_ADD_MAX_STAGES = 7

_MAN_BITS = 23  # stored fraction bits
_SIG_BITS = _MAN_BITS + 1  # significand with the hidden bit
_EXP_MAX = 0xFF  # exponent field of inf / NaN
_GRS_BITS = 3  # guard, round and sticky bits kept below the significand while adding
_ALIGNED_BITS = _SIG_BITS + _GRS_BITS  # 27: significand + G, R, S
_SUM_BITS = _ALIGNED_BITS + 1  # 28: one more for the carry out of an effective addition
_SHIFT_BITS = 5  # holds any alignment (clamped) or normalisation shift, 0..28

_Fp32 = data.StructLayout({"man": _MAN_BITS, "exp": 8, "sign": 1})


class _Special(data.Struct):
    """Results that bypass the finite datapath."""

    nan: 1  # a NaN operand, or inf - inf: emit the canonical NaN
    inf: 1  # an infinite operand (and no NaN): emit inf with the sign of the larger operand


# The values that cross each phase boundary; each may or may not be registered, see `elaborate`.
# Throughout, `exp` is the biased exponent of the larger operand with subnormals counted as 1
# (their true scale); the finite value of the sum is `sum * 2^(exp - 127 - 23 - 3)`.

class _Unpacked(data.Struct):
    sig_big: _SIG_BITS  # significand of the operand of larger magnitude
    sig_small: _SIG_BITS  # significand of the other one
    exp: 8
    diff: 8  # exponent difference, >= 0
    sub: 1  # effective subtraction (operand signs differ)
    sign: 1  # sign of the result unless it is an exact zero: that of the larger operand
    zero_sign: 1  # sign of an exact zero result: -0 only for (-0) + (-0)
    special: _Special


class _Shifted(data.Struct):
    sig_big: _SIG_BITS
    sig_small: _ALIGNED_BITS  # sig_small << 3 shifted right by the multiple-of-8 part of the shift
    lost: 1  # a one was shifted below the guard bit by that coarse shift
    fine: 3  # the rest of the alignment shift, 0..7
    exp: 8
    sub: 1
    sign: 1
    zero_sign: 1
    special: _Special


class _Aligned(data.Struct):
    sig_big: _SIG_BITS
    sig_small: _ALIGNED_BITS  # shifted to the scale of sig_big << 3, sticky bit jammed into bit 0
    exp: 8
    sub: 1
    sign: 1
    zero_sign: 1
    special: _Special


class _Added(data.Struct):
    sum: _SUM_BITS  # |a + b| with sig_big << 3 as the scale; the leading one of sig_big is bit 26
    exp: 8
    sign: 1
    zero_sign: 1
    special: _Special


class _Counted(data.Struct):
    sum: _SUM_BITS
    shift: _SHIFT_BITS  # left shift that normalises `sum`, limited so exponents stay >= 1
    exp: 8
    sign: 1  # resolved, exact zeros included
    special: _Special


class _Normalised(data.Struct):
    exp: 8  # exponent field before rounding: 0 for a subnormal, 255 on overflow
    man: _MAN_BITS  # fraction field before rounding
    round: 1  # the first bit below the fraction LSB
    sticky: 1  # OR of all bits below `round`
    sign: 1
    special: _Special


# Which phase outputs are registered, for each number of stages (see `Fp32Adder.elaborate`,
# where the choice is measured). The phases are a 31-bit compare, two halves of a 27-bit shifter
# with sticky, a 28-bit adder, a 32-bit leading-zero count, a 28-bit shifter and a 31-bit
# incrementer; the cuts split the chain into near-equal segments, and from 5 stages on the output
# is registered.
_BOUNDARIES = {
    0: (),
    1: ("added",),
    2: ("shifted", "counted"),
    3: ("unpacked", "added", "counted"),
    4: ("unpacked", "shifted", "added", "counted"),
    5: ("unpacked", "shifted", "added", "counted", "rounded"),
    6: ("unpacked", "shifted", "added", "counted", "normalised", "rounded"),
    7: ("unpacked", "shifted", "aligned", "added", "counted", "normalised", "rounded"),
}
assert len(_BOUNDARIES) == FP32_ADD_MAX_STAGES + 1


def count_leading_zeros(value):
    """Leading-zero count of ``value`` (width a power of two, at least 2), as a log-depth tree.

    Returns ``(count, all_zero)``; ``count`` has ``log2(len(value))`` bits and is meaningless
    when ``all_zero`` is set, so callers make sure some bit is set.
    """
    width = len(value)
    assert width >= 2 and width & (width - 1) == 0
    if width == 2:
        return ~value[1], ~value.any()
    half = width // 2
    count_hi, zero_hi = count_leading_zeros(value[half:])
    count_lo, zero_lo = count_leading_zeros(value[:half])
    count = Mux(zero_hi, Cat(count_lo, Const(1, 1)), Cat(count_hi, Const(0, 1)))
    return count, zero_hi & zero_lo


class Fp32Adder(wiring.Component):
    """Add two IEEE binary32 numbers.

    Numerics (docs/contract.md §4): ``result`` is exactly ``np.float32(a) + np.float32(b)`` --
    IEEE binary32 addition with round-to-nearest-even, subnormal inputs and outputs kept (no
    flush to zero), overflow to ±inf. Signed zeros follow IEEE for this rounding mode:
    ``(+0) + (-0) = +0``, ``(-0) + (-0) = -0``, ``x + (-x) = +0``. ``inf + (-inf)`` and every
    NaN operand give the canonical quiet NaN ``0x7FC00000``, whatever the operand payloads and
    signs.

    Timing: ``latency == stages`` cycles from operands to ``result``; fully pipelined, one
    addition per cycle. ``result`` shows the sum of the operands presented ``stages`` enabled
    cycles earlier. ``en`` is the clock enable of every pipeline register (domain ``sync``): while
    it is 0 the pipeline holds. With ``stages=0`` the adder is combinational and ``en`` is unused.
    With 5 or more stages ``result`` comes straight from a register; with 1 to 4 it is the
    rounding logic after the last register.

    Parameters
    ----------
    stages : int
        Number of pipeline register stages, 0 to :data:`FP32_ADD_MAX_STAGES`. Each one cuts the
        datapath at another phase boundary (see ``elaborate``), shortening the critical path.

    Raises
    ------
    TypeError
        If ``stages`` is not an integer.
    ValueError
        If ``stages`` is out of range.

    Attributes
    ----------
    latency : int
        ``stages``.
    """

    def __init__(self, *, stages: int = 2):
        self.stages = check_int("stages", stages, lo=0, hi=FP32_ADD_MAX_STAGES)
        self.latency = stages
        self._registered = _BOUNDARIES[stages]
        super().__init__({
            "en": In(1),
            "a": In(32),
            "b": In(32),
            "result": Out(32),
        })

    def _boundary(self, m, name, layout, **fields):
        """The phase output ``name``: ``fields`` packed into ``layout``, registered if chosen."""
        value = Signal(layout, name=name)
        for field, field_value in fields.items():
            m.d.comb += value[field].eq(field_value)
        if name not in self._registered:
            return value
        reg = Signal(layout, name=f"{name}_q")
        with m.If(self.en):
            m.d.sync += reg.eq(value)
        return reg

    def elaborate(self, platform):
        # Design note.
        #
        # A single-path adder in seven phases; a pipeline register can sit after each (the
        # phase names below):
        #
        #   unpacked   | classify NaN/inf, compare magnitudes, swap so |big| >= |small|,
        #              | exponent difference (subnormals count as exponent 1, no hidden bit)
        #   shifted    | shift the small significand right by the multiple of 8 of the
        #              | (clamped) difference, ORing what falls below the guard bit into `lost`
        #   aligned    | shift by the rest, 0..7, keeping guard and round bits and ORing
        #              | everything shifted further (and `lost`) into a sticky bit
        #   added      | big ± small in one 28-bit adder; never negative thanks to the swap
        #   counted    | leading-zero count (log tree); the normalising shift is limited so
        #              | that the exponent stays >= 1 -- when the limit bites, it is subnormal
        #   normalised | shift left: the leading one (if any) reaches bit 27, below it sit the
        #              | fraction, the round bit and the sticky bits
        #   rounded    | RNE: add the round-up bit to {exponent field, fraction}; a carry out of
        #              | the fraction bumps the exponent (largest subnormal -> smallest normal,
        #              | significand 2.0 -> next binade, max finite -> inf); then the special
        #              | cases are muxed in
        #
        # Three bits below the significand are enough: when the exponents differ by 2 or more
        # the sum needs at most one bit of left shift, and when they differ by 0 or 1 no bit is
        # lost in alignment. The sum of two binary32 numbers that lands in the subnormal range
        # is exact, so underflow needs no rounding of its own.
        #
        # Stage boundaries per `stages` (_BOUNDARIES), chosen from ECP5 place-and-route
        # (synth/fpga.py, LFE5U-85F speed 6, seed 1; Fmax of this adder alone in brackets):
        #
        #   1  added                                                                 (57 MHz)
        #   2  shifted, counted                                                      (72 MHz)
        #   3  unpacked, added, counted                                              (94 MHz)
        #   4  unpacked, shifted, added, counted                                    (108 MHz)
        #   5  unpacked, shifted, added, counted, rounded                           (107 MHz)
        #   6  unpacked, shifted, added, counted, normalised, rounded               (128 MHz)
        #   7  every boundary                                                       (120 MHz)
        #
        # * The alignment shifter with its sticky OR was the deepest segment (16 LUT levels);
        #   it is split into `shifted` and `aligned`. The fine part (3 mux levels) and the add
        #   (a carry chain) fit in one cycle together, so only 7 stages cut between them.
        # * Normalising shift and rounding fit in one cycle (4 and 5 stages); at 6 they are
        #   split, and the leading-zero count (added -> counted) and phase 1 remain the longest.
        # * Up to 4 stages `result` is combinational after the last register. From 5 on the
        #   rounded result is registered: in a column of PEs one adder's result feeds the next
        #   one's magnitude compare, and rounding plus that compare would be the longest path
        #   of the array (measured: 89 MHz for two PEs whose adders end in `normalised`,
        #   against 117 MHz for one PE). So 5 stages (registered output) beat 4 in an array.
        # * The default of the PE is 6 (a PE and a two-PE column both above 115 MHz).
        #
        # The register placement does not change the numerics: every `stages` gives the same
        # bits.
        m = Module()

        # Phase 1: unpack, compare, swap.
        a = data.View(_Fp32, self.a)
        b = data.View(_Fp32, self.b)
        swap = self.b[:31] > self.a[:31]  # magnitude order is the order of the low 31 bits
        big = data.View(_Fp32, Mux(swap, self.b, self.a))
        small = data.View(_Fp32, Mux(swap, self.a, self.b))

        def significand(x):
            return Cat(x.man, x.exp != 0)

        def scale_exp(x):  # subnormals have the scale of exponent field 1
            return Mux(x.exp == 0, 1, x.exp)

        def is_nan(x):
            return (x.exp == _EXP_MAX) & (x.man != 0)

        def is_inf(x):
            return (x.exp == _EXP_MAX) & (x.man == 0)

        special = Signal(_Special)
        m.d.comb += [
            special.nan.eq(is_nan(a) | is_nan(b) | (is_inf(a) & is_inf(b) & (a.sign != b.sign))),
            special.inf.eq(~special.nan & (is_inf(a) | is_inf(b))),
        ]
        # The larger operand's exponent and the difference from an 8-bit comparison of the
        # exponents, not from the 31-bit `swap` (the larger magnitude has the larger or equal
        # exponent, so both are the same): `swap` fans out to both significands, and the
        # exponent behind it was the adder's longest path in a PE array. Both differences
        # are formed in parallel with the comparison, then one is chosen.
        ea, eb = scale_exp(a), scale_exp(b)
        a_first = ea >= eb
        unpacked = self._boundary(
            m, "unpacked", _Unpacked,
            sig_big=significand(big),
            sig_small=significand(small),
            exp=Mux(a_first, ea, eb),
            diff=Mux(a_first, ea - eb, eb - ea),
            sub=a.sign ^ b.sign,
            sign=big.sign,
            zero_sign=a.sign & b.sign,
            special=special,
        )

        # Phase 2: align, in two steps. Place sig_small << 3 above 27 zero bits and shift the
        # 54-bit window right by the (clamped) difference: the top half is the aligned operand,
        # the bottom half holds the bits shifted out, which become the sticky bit. The shift is
        # split into its multiple of 8 (`shifted`) and the rest, 0..7 (`aligned`); ones that the
        # first step moves below the top half are kept as `lost`, and since the second step
        # moves at most 7 more bits out, an 8-bit window below the top half catches those.
        shift = Mux(unpacked.diff > _ALIGNED_BITS, _ALIGNED_BITS, unpacked.diff)[:_SHIFT_BITS]
        coarse = Cat(Const(0, 3), shift[3:])
        window = Cat(Const(0, _ALIGNED_BITS + _GRS_BITS), unpacked.sig_small) >> coarse
        shifted = self._boundary(
            m, "shifted", _Shifted,
            sig_big=unpacked.sig_big,
            sig_small=window[_ALIGNED_BITS:2 * _ALIGNED_BITS],
            lost=window[:_ALIGNED_BITS].any(),
            fine=shift[:3],
            exp=unpacked.exp,
            sub=unpacked.sub,
            sign=unpacked.sign,
            zero_sign=unpacked.zero_sign,
            special=unpacked.special,
        )
        window = Cat(Const(0, 8), shifted.sig_small) >> shifted.fine
        aligned = self._boundary(
            m, "aligned", _Aligned,
            sig_big=shifted.sig_big,
            sig_small=window[8:] | (window[:8].any() | shifted.lost),
            exp=shifted.exp,
            sub=shifted.sub,
            sign=shifted.sign,
            zero_sign=shifted.zero_sign,
            special=shifted.special,
        )

        # Phase 3: add or subtract, as big + (small XOR sub) + sub (one adder).
        big_ext = Cat(Const(0, _GRS_BITS), aligned.sig_big, Const(0, 1))
        small_ext = Cat(aligned.sig_small ^ aligned.sub.replicate(_ALIGNED_BITS), aligned.sub)
        added = self._boundary(
            m, "added", _Added,
            sum=(big_ext + small_ext + aligned.sub)[:_SUM_BITS],
            exp=aligned.exp,
            sign=aligned.sign,
            zero_sign=aligned.zero_sign,
            special=aligned.special,
        )

        # Phase 4: leading-zero count. Padding the 28-bit sum to 32 bits with a one below it
        # caps the count at 28 (all zero). The result's exponent field is exp + 1 - shift (bit 27
        # of the sum is one binade above `exp`), so shift <= exp keeps it >= 1.
        lz, _ = count_leading_zeros(Cat(Const(0b1000, 4), added.sum))
        is_zero = ~added.sum.any()
        counted = self._boundary(
            m, "counted", _Counted,
            sum=added.sum,
            shift=Mux(lz > added.exp, added.exp, lz)[:_SHIFT_BITS],
            exp=added.exp,
            sign=Mux(is_zero, added.zero_sign, added.sign),
            special=added.special,
        )

        # Phase 5: normalise. After the shift the value is norm * 2^(exp + 1 - shift - 154),
        # i.e. a normal number with exponent field exp + 1 - shift if bit 27 is set, or else a
        # subnormal (then shift == exp, so the scale is that of exponent field 1 as it must be).
        norm = (counted.sum << counted.shift)[:_SUM_BITS]
        exp_field = (counted.exp + 1 - counted.shift)[:8]  # 1..255, cannot wrap
        normalised = self._boundary(
            m, "normalised", _Normalised,
            exp=Mux(norm[-1], exp_field, 0),
            man=norm[_SUM_BITS - 1 - _MAN_BITS:_SUM_BITS - 1],
            round=norm[_GRS_BITS],
            sticky=norm[:_GRS_BITS].any(),
            sign=counted.sign,
            special=counted.special,
        )

        # Phase 6: round to nearest, ties to even, and pack. The increment runs over the
        # exponent field too (see the note above); an exponent field of 255 before rounding
        # (a carry out of the add at exponent 254) is an overflow.
        round_up = normalised.round & (normalised.sticky | normalised.man[0])
        magnitude = (Cat(normalised.man, normalised.exp) + round_up)[:31]
        rounded = Signal(_Fp32, name="rounded")
        with m.If(normalised.special.nan):
            m.d.comb += rounded.eq(FP32_CANONICAL_NAN)
        with m.Elif(normalised.special.inf | (normalised.exp == _EXP_MAX)):
            m.d.comb += [
                rounded.sign.eq(normalised.sign),
                rounded.exp.eq(_EXP_MAX),
                rounded.man.eq(0),
            ]
        with m.Else():
            m.d.comb += rounded.eq(Cat(magnitude, normalised.sign))
        m.d.comb += self.result.eq(self._boundary(m, "rounded", _Fp32, **{
            field: rounded[field] for field in ("man", "exp", "sign")}))

        return m
