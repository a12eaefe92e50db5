"""IEEE 754-2019 ``maximum`` / ``minimum`` and ``a > b`` on fp32 bit patterns (combinational)."""

from amaranth.hdl import Cat, Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .formats import FP32_CANONICAL_NAN

__all__ = ["Fp32Compare"]

_ONE = 0x3F80_0000


class Fp32Compare(wiring.Component):
    """``maximum(a, b)``, ``minimum(a, b)`` and ``a > b`` of two fp32 bit patterns,
    combinational.

    Numerics (docs/contract.md §4, ``golden.vector.alu``'s MAX, MIN, GREATER): ``max`` and
    ``min`` are IEEE 754-2019 ``maximum`` / ``minimum``: the canonical NaN 0x7FC00000 if either
    operand is a NaN, else the larger / smaller operand's bits, −0 below +0. ``greater`` is 1.0
    (0x3F800000) where ``a > b`` in IEEE's order (false when either is a NaN; −0 and +0 are
    equal), else +0.

    Design: a sign-magnitude pattern maps to an unsigned key that sorts by value (negative
    patterns inverted, positive ones with the top bit set), so one 32-bit comparison orders
    any two non-NaN operands, −0 (key 0x7FFFFFFF) just below +0 (0x80000000).
    """

    a: In(32)
    b: In(32)
    max: Out(32)
    min: Out(32)
    greater: Out(32)

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b

        def key(x):
            return Mux(x[31], ~x, Cat(x[:31], 1))

        def nan(x):
            return (x[23:31] == 0xFF) & (x[:23] != 0)

        either_nan = nan(a) | nan(b)
        a_above = key(a) > key(b)
        zeros = (a[:31] == 0) & (b[:31] == 0)
        m.d.comb += [
            self.max.eq(Mux(either_nan, FP32_CANONICAL_NAN, Mux(a_above, a, b))),
            self.min.eq(Mux(either_nan, FP32_CANONICAL_NAN, Mux(a_above, b, a))),
            self.greater.eq(Mux(~either_nan & a_above & ~zeros, _ONE, 0)),
        ]
        return m
