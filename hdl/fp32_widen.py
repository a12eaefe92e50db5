"""Exact widening of a stored element (bf16, fp8-e4m3, fp8-e5m2, fp16, fp32) to fp32 bits."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .formats import Dtype

__all__ = ["Fp32Widen"]

# (exponent bits, mantissa bits, OCP "FN": no infinities, only S.1..1.1..1 is NaN)
_NARROW = {Dtype.FP16: (5, 10, False), Dtype.FP8_E5M2: (5, 2, False),
           Dtype.FP8_E4M3: (4, 3, True)}


class Fp32Widen(wiring.Component):
    """``result`` = the fp32 bit pattern of the element of ``dtype`` held in the low bits of
    ``word`` (an SBUF word: narrow elements zero-extended), combinational.

    Numerics: exactly ``golden.formats.to_fp32_bits``: every finite value (zeros and
    subnormals included) and every infinity becomes the fp32 encoding of the same value (the
    narrow formats' subnormals become fp32 normals); bf16 is ``bits << 16``, fp32 passes; a NaN
    keeps its sign and its mantissa left-justified (e4m3's S.1111.111 becomes 0x7FF00000 |
    sign). A reserved ``dtype`` (5..7) gives 0 (the sequencer never issues one).
    """

    dtype: In(Dtype)
    word: In(32)
    result: Out(32)

    def elaborate(self, platform):
        m = Module()
        w = self.word
        with m.Switch(self.dtype):
            with m.Case(Dtype.FP32):
                m.d.comb += self.result.eq(w)
            with m.Case(Dtype.BF16):
                m.d.comb += self.result.eq(Cat(Const(0, 16), w[:16]))
            for dtype, (e_bits, p, fn) in _NARROW.items():
                with m.Case(dtype):
                    m.d.comb += self.result.eq(self._narrow(m, w, dtype.name.lower(), e_bits,
                                                            p, fn))
        return m

    @staticmethod
    def _narrow(m, w, name, e_bits, p, fn):
        """fp32 bits of a 1.e_bits.p element in ``w``'s low bits."""
        # lab1 hide begin: narrow
        bias = (1 << (e_bits - 1)) - 1
        sign = w[e_bits + p]
        exp = w[p:p + e_bits]
        man = w[:p]
        exp_max = (1 << e_bits) - 1
        special = (exp == exp_max) & ((man == (1 << p) - 1) if fn else 1)
        # A subnormal man * 2^(1 - bias - p): its leading one at bit t becomes the hidden bit,
        # the exponent 1 - bias - (p - t) + 127, the bits below it left-justified.
        lead = Signal(range(p), name=f"{name}_lead")
        for t in range(p):  # the highest set bit wins (later assignments)
            with m.If(man[t]):
                m.d.comb += lead.eq(t)
        sub_exp = Signal(8, name=f"{name}_sub_exp")
        sub_man = Signal(23, name=f"{name}_sub_man")
        with m.Switch(lead):
            for t in range(p):
                with m.Case(t):  # a constant exponent; the bits below the leading one,
                    # left-justified (no adder after the leading one's search)
                    m.d.comb += [sub_exp.eq(t + (127 - bias - p + 1)),
                                 sub_man.eq(Cat(Const(0, 23 - t), man[:t]) if t else 0)]
        norm_exp = exp + (127 - bias)
        out_exp = Mux(special, 0xFF, Mux(exp == 0, Mux(man == 0, 0, sub_exp), norm_exp))
        out_man = Mux(exp == 0, Mux(man == 0, 0, sub_man), man << (23 - p))
        return Cat(out_man[:23], out_exp[:8], sign)
        # lab1 hide end: narrow
