"""IEEE binary32 multiplier: ``result = a * b``, round to nearest even, subnormals kept."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .formats import FP32_CANONICAL_NAN
from .fp32_add import count_leading_zeros
from .params import check_int
from .pipeline import delay

__all__ = ["Fp32Multiplier", "FP32_MUL_MAX_STAGES"]

#: The largest supported ``stages``.
FP32_MUL_MAX_STAGES = 7

_MAN_BITS = 23
_SIG_BITS = 24
_PROD_BITS = 2 * _SIG_BITS  # 48
_EMIN = -126  # unbiased exponent of the smallest normal (and the scale of subnormals)
_EXP = signed(11)  # unbiased exponents of products: -252 .. 255, and shift arithmetic
_RIGHT_MAX = _PROD_BITS + 2  # right shifts of more than this leave only sticky bits

_Fp32 = data.StructLayout({"man": _MAN_BITS, "exp": 8, "sign": 1})


class _Product(data.Struct):
    """The exact product: value = sig * 2^(exp - 46) when finite (sig may have leading 0s)."""

    sign: 1
    nan: 1  # a NaN operand, or 0 * inf: the canonical NaN
    inf: 1  # an infinite operand (and no NaN)
    zero: 1  # a zero operand (and no NaN, no inf)
    exp: _EXP
    sig: _PROD_BITS


class _Partial(data.Struct):
    """The product as four partial products of the fractions and the hidden bits' terms:
    sig = pp0 + (pp1 + pp2)·2^12 + pp3·2^24 + hidden·2^23."""
    sign: 1
    nan: 1
    inf: 1
    zero: 1
    exp: _EXP  # the exponent fields' sum less 254: subnormals not yet counted at -126
    subs: 2  # the operands with an exponent field of 0 (each adds 1 to exp)
    pp: data.ArrayLayout(_SIG_BITS, 4)  # lo·lo, lo·hi, hi·lo, hi·hi (a's half · b's half)
    hidden: _MAN_BITS + 2  # ha·fb + hb·fa + ha·hb·2^23 (h: hidden bit, f: fraction)


class _Leading(data.Struct):
    """The product with its leading zeros and the terms the shift's choice compares them to."""
    product: _Product
    lz: 6  # the significand's leading zeros (48 when it is 0)
    tz: 6  # its trailing zeros (63 when it is 0)
    room: _EXP  # E + 126: the most the leading one may move left and stay >= -126
    room_big: 1  # room >= 48: any lz fits
    room_neg: 1  # room < 0: none fits
    right: range(_RIGHT_MAX + 1)  # -room, at most _RIGHT_MAX (when room < 0)


class _Counted(data.Struct):
    """The product with its normalising shift: left by ``left``, or right by ``right``."""
    product: _Product
    lz: 6  # the significand's leading zeros (48 when it is 0)
    normal: 1  # the leading one's exponent is >= -126: the shift is by ``lz``
    left: _EXP  # < 0: shift right
    right: range(_RIGHT_MAX + 1)  # -left, at most _RIGHT_MAX (when left < 0)
    lost: 1  # a right shift by ``right`` drops a 1 (significand bits 0 .. right - 1)


class _Shifted(data.Struct):
    product: _Product
    target: _EXP
    sig: _PROD_BITS  # the shifted significand
    lost: 1  # bits shifted off the bottom (right shifts only)


class _Normalised(data.Struct):
    sign: 1
    nan: 1
    inf: 1
    zero: 1
    exp: 8  # exponent field before rounding: 0 for a subnormal; >= 255 means overflow
    overflow: 1
    man: _MAN_BITS
    round: 1
    sticky: 1


def sum_of(*terms):
    """The sum of ``terms`` (unsigned) with one carry chain: 3:2 compressors (a LUT level
    each, no carries between bits) take three terms to two until two are left, then one
    adder. (Yosys builds a sum of many terms as a chain of adders, one carry chain after
    another.)"""
    terms = [Value.cast(t).as_unsigned() for t in terms]
    while len(terms) > 2:
        x, y, z, *rest = terms
        terms = [*rest, x ^ y ^ z, ((x & y) | (x & z) | (y & z)) << 1]
    return terms[0] + terms[1] if len(terms) == 2 else terms[0]


class Fp32Multiplier(wiring.Component):
    """Multiply two IEEE binary32 numbers.

    Numerics (docs/contract.md §4): ``result`` is exactly ``np.float32(a) * np.float32(b)`` --
    IEEE binary32 multiplication with round-to-nearest-even, subnormal operands and results
    kept (no flush to zero), overflow to ±inf. The sign is the XOR of the operand signs
    (zeros and infinities included). A NaN operand or ``0 * inf`` gives the canonical quiet
    NaN ``0x7FC00000``.

    Timing: ``latency == stages + operand_register`` cycles; fully pipelined, one product per
    cycle. ``en`` is the clock enable of every pipeline register; with ``stages=0`` and no
    ``operand_register`` the unit is combinational.

    Parameters
    ----------
    stages : int
        0 to :data:`FP32_MUL_MAX_STAGES` pipeline registers. Up to 3, at three cut points: after
        the 24 x 24 significand multiply, after normalisation, and at the output (the stage
        plan at the top of ``elaborate`` says which points each count uses); the 4th and 5th
        split the normalisation, after its leading-zero count and after its shift, the 6th the
        multiply, after its partial products, and the 7th the leading-zero count from the
        compare that chooses the shift.
    operand_register : bool
        Whether the operands pass a register first (a cycle more of latency; a user's register
        in front of the unit, moved in). The fractions' partial products (the DSP blocks) read
        a copy of it of their own, which place-and-route can put beside them while the
        original stays beside the rest of the logic: a DSP placed far from both then costs a
        cycle's worth of routing on each side of that register, not both in one path.

    Raises
    ------
    TypeError
        If ``stages`` is not an integer or ``operand_register`` not a bool.
    ValueError
        If ``stages`` is out of range.
    """

    def __init__(self, *, stages: int = 2, operand_register: bool = False):
        self.stages = check_int("stages", stages, lo=0, hi=FP32_MUL_MAX_STAGES)
        if not isinstance(operand_register, bool):
            raise TypeError(f"operand_register must be a bool, not {operand_register!r}")
        self.operand_register = operand_register
        self.latency = stages + operand_register
        super().__init__({"en": In(1), "a": In(32), "b": In(32), "result": Out(32)})

    def elaborate(self, platform):
        # Design note.
        #
        # multiply -> | -> normalise -> | -> round/pack -> |
        #
        # * Multiply: each significand is 24 bits with the hidden bit (0 for subnormals, whose
        #   scale is that of exponent -126), so the 48-bit product is exact and the value is
        #   sig * 2^(ea + eb - 46) with subnormals counted at -126.
        # * Normalise: with E the exponent of bit 47 and lz the product's leading zeros, the
        #   leading one's exponent is E - lz. If that is >= -126 the product is shifted left by
        #   lz (a normal result); otherwise it is shifted so that its scale is -126 (left by
        #   less than lz, or right, collecting the bits that fall off as sticky): a subnormal
        #   result, or one that rounds up into the smallest normal.
        # * Round: the top 24 bits after the shift are the significand, then the round bit,
        #   then sticky. RNE adds one to {exponent field, fraction}, so a carry out of the
        #   fraction bumps the exponent (subnormal -> normal, 2.0 -> next binade, max -> inf).
        m = Module()
        # Stages 4 and 5 split the normalisation, after the leading-zero count and after the
        # shift, stage 6 the multiply, after its four 12 x 12 partial products, and stage 7
        # the count, before the compare; the plan below places the first three registers
        # (stages 0 to 3).
        cut_count = 1 if self.stages >= 4 else 0
        cut_shift = 1 if self.stages >= 5 else 0
        cut_part = 1 if self.stages >= 6 else 0  # and the 6th splits the multiply
        cut_lz = 1 if self.stages >= 7 else 0
        stages = self.stages - cut_count - cut_shift - cut_part - cut_lz
        # lab5 begin: cuts
        # Stage plan (measured in docs/labs/lab5-synthesis-timing, Tasks 3-5): the first
        # register after the multiply, so that the DSP product and the normalisation (the
        # longest segment) are in different cycles; the second after normalisation; the output
        # register last, as at 2 stages the longest path is already inside normalisation.
        cut_mul = 1 if stages >= 1 else 0
        cut_norm = 1 if stages >= 2 else 0
        cut_out = stages - cut_mul - cut_norm
        # lab5 end: cuts

        a, b = self.a, self.b
        a_man, b_man = a[:_MAN_BITS], b[:_MAN_BITS]  # what the partial products read
        if self.operand_register:
            a = delay(m, a, 1, name="a", en=self.en)
            b = delay(m, b, 1, name="b", en=self.en)
            # The partial products' copy of the fractions. Its initial value is all ones (the
            # other copy's is 0): Yosys merges flip-flops of the same input and initial value
            # (opt_merge), and this copy must stay one of its own. (What it holds before its
            # first operand is never read: no product is valid then.)
            a_man, b_man = (Signal(_MAN_BITS, name=f"{x}_dsp", init=(1 << _MAN_BITS) - 1)
                            for x in ("a", "b"))
            with m.If(self.en):
                m.d.sync += [a_man.eq(self.a[:_MAN_BITS]), b_man.eq(self.b[:_MAN_BITS])]
        a = data.View(_Fp32, a)
        b = data.View(_Fp32, b)

        def unpack(x):
            nan = (x.exp == 0xFF) & (x.man != 0)
            inf = (x.exp == 0xFF) & (x.man == 0)
            zero = (x.exp == 0) & (x.man == 0)
            sig = Cat(x.man, x.exp != 0)
            return nan, inf, zero, sig

        a_nan, a_inf, a_zero, a_sig = unpack(a)
        b_nan, b_inf, b_zero, b_sig = unpack(b)
        # The significand product (ha·2^23 + fa)·(hb·2^23 + fb), h the hidden bits, f the
        # fractions: fa·fb from four partial products (one DSP each) of the fractions' halves,
        # and the hidden bits' terms beside them, so that no hidden bit (an OR of the exponent
        # field) lies before a DSP; stage 6 registers them before they are summed.
        part = Signal(_Partial)
        half = _SIG_BITS // 2
        m.d.comb += [
            part.sign.eq(a.sign ^ b.sign),
            part.nan.eq(a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf)),
            part.inf.eq(a_inf | b_inf),
            part.zero.eq(a_zero | b_zero),
            # The unbiased exponents' sum, subnormals at -126: the fields' sum less 254 here,
            # plus one for each field of 0 after the partial products' register (no compare
            # of a field before the adder's carry chain: a timing path at stages >= 6).
            part.exp.eq(a.exp + b.exp - 254),
            part.subs.eq((a.exp == 0) + (b.exp == 0)),
        ]
        for i, (x, y) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
            m.d.comb += part.pp[i].eq(a_man[x * half:min((x + 1) * half, _MAN_BITS)]
                                      * b_man[y * half:min((y + 1) * half, _MAN_BITS)])
        a_hidden, b_hidden = a_sig[_MAN_BITS], b_sig[_MAN_BITS]
        m.d.comb += part.hidden.eq(Mux(a_hidden, b.man, 0) + Mux(b_hidden, a.man, 0)
                                   + ((a_hidden & b_hidden) << _MAN_BITS))
        q = delay(m, part, cut_part, name="part", en=self.en)
        prod = Signal(_Product)
        m.d.comb += [
            prod.sign.eq(q.sign), prod.nan.eq(q.nan), prod.inf.eq(q.inf), prod.zero.eq(q.zero),
            prod.exp.eq(q.exp + q.subs),
            prod.sig.eq(sum_of(Cat(q.pp[0], q.pp[3]), q.pp[1] << half, q.pp[2] << half,
                               q.hidden << _MAN_BITS)),
        ]
        p = delay(m, prod, cut_mul, name="prod", en=self.en)

        # Normalise. Bit 47 of sig has exponent E = p.exp + 1; pad to 64 bits for the count.
        # The leading one's exponent is E - lz; it stays there (a left shift by lz) if that is
        # >= -126, i.e. if lz <= room = E + 126; else the shift is by room (< lz; right if
        # < 0). Every term but the count's is computed beside it, not after it: as lz <= 48,
        # the compare after the count is of 6 bits (room 0 .. 47; room >= 48 always holds it,
        # room < 0 never), and the exponent of bit 47 after the shift, E - lz, is left to the
        # shift's stage.
        lz, _ = count_leading_zeros(Cat(Const(1 << 15, 16), p.sig))  # all-zero -> 48
        # The bits a right shift drops are the significand's bits below `right`: a 1 among
        # them iff its trailing zeros are fewer (a compare beside the shift's choice, not an
        # OR of the bits the shift pushed out after it).
        tz, _ = count_leading_zeros(Cat(Const(1, 16), p.sig[::-1]))  # all-zero -> 63
        lead = Signal(_Leading)
        m.d.comb += [lead.product.eq(p), lead.lz.eq(lz), lead.tz.eq(tz),
                     lead.room.eq(p.exp + 1 - _EMIN),
                     lead.room_big.eq(lead.room >= _PROD_BITS), lead.room_neg.eq(lead.room < 0),
                     # -room, at most _RIGHT_MAX: the compare on p.exp, beside the sum
                     lead.right.eq(Mux(p.exp < _EMIN - 1 - _RIGHT_MAX, _RIGHT_MAX,
                                       _EMIN - 1 - p.exp))]
        ld = delay(m, lead, cut_lz, name="lead", en=self.en)
        normal = Signal()
        count = Signal(_Counted)
        m.d.comb += [normal.eq(ld.room_big | (~ld.room_neg & (ld.lz <= ld.room[:6]))),
                     count.product.eq(ld.product), count.lz.eq(ld.lz), count.normal.eq(normal),
                     count.left.eq(Mux(normal, ld.lz, ld.room)),  # < 0: shift right
                     count.right.eq(ld.right), count.lost.eq(ld.tz < ld.right)]
        c = delay(m, count, cut_count, name="count", en=self.en)
        # (signals of their own: an If driving part of `shift` would leave the rest in an
        # `always @*` block a 4-state simulator may never run; shifted_off: a 1 shifted off
        # the bottom, right shifts only)
        shifted_sig, shifted_off = Signal(_PROD_BITS), Signal()
        with m.If(c.left >= 0):
            m.d.comb += shifted_sig.eq(c.product.sig << c.left[:6])
        with m.Else():
            m.d.comb += [shifted_sig.eq(c.product.sig >> c.right), shifted_off.eq(c.lost)]
        shift = Signal(_Shifted)
        m.d.comb += [shift.product.eq(c.product),  # the exponent of bit 47, shifted:
                     shift.target.eq(Mux(c.normal, c.product.exp + 1 - c.lz, _EMIN)),
                     shift.sig.eq(shifted_sig), shift.lost.eq(shifted_off)]
        sh = delay(m, shift, cut_shift, name="shift", en=self.en)
        p, shifted, lost = sh.product, sh.sig, sh.lost
        norm = Signal(_Normalised)
        field = sh.target + 127  # 1 .. (255 + 127): the exponent field if bit 47 is set
        m.d.comb += [
            norm.sign.eq(p.sign), norm.nan.eq(p.nan), norm.inf.eq(p.inf),
            norm.zero.eq(p.zero | (p.sig == 0)),
            norm.overflow.eq(shifted[-1] & (field >= 255)),
            norm.exp.eq(Mux(shifted[-1], field[:8], 0)),
            norm.man.eq(shifted[_PROD_BITS - 1 - _MAN_BITS:_PROD_BITS - 1]),
            norm.round.eq(shifted[_PROD_BITS - 2 - _MAN_BITS]),
            norm.sticky.eq(shifted[:_PROD_BITS - 2 - _MAN_BITS].any() | lost),
        ]
        n = delay(m, norm, cut_norm, name="norm", en=self.en)

        # Round to nearest even and pack.
        round_up = n.round & (n.sticky | n.man[0])
        magnitude = (Cat(n.man, n.exp) + round_up)[:31]
        result = Signal(_Fp32)
        with m.If(n.nan):
            m.d.comb += result.eq(FP32_CANONICAL_NAN)
        with m.Elif(n.inf | n.overflow):
            m.d.comb += [result.sign.eq(n.sign), result.exp.eq(0xFF)]
        with m.Elif(n.zero):
            m.d.comb += result.sign.eq(n.sign)
        with m.Else():
            m.d.comb += result.eq(Cat(magnitude, n.sign))
        m.d.comb += self.result.eq(delay(m, result, cut_out, name="result", en=self.en))
        return m
