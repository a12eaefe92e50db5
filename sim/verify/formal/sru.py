"""The SRU's RNE and RTZ casts fp32 -> bf16 against a reference written on the bits.

The reference (:func:`bf16_reference`) is written here from docs/contract.md §4, not from
``hdl/sru.py`` nor ``golden/rounding.py``. bf16 has fp32's sign and 8-bit exponent with the
same bias and 7 of its 23 fraction bits, so bf16's normal and subnormal binades are exactly
fp32's, and a cast is a rounding of the 31-bit magnitude ``x[0:31]`` to a multiple of 2^16:

* NaN in (exponent 255, fraction != 0): the canonical NaN 0x7FC0 (sign dropped);
* ±inf in: ±max finite (0x7F7F) with ``saturate``, else ±inf (0x7F80), in every mode;
* otherwise ``t = mag >> 16`` (truncation: RTZ) and ``rest = mag & 0xFFFF``; RNE adds one
  iff ``rest > 0x8000``, or ``rest == 0x8000`` and ``t`` is odd (a carry out of the fraction
  walks into the exponent, subnormal to normal included);
* a rounded magnitude >= 0x7F80 (the inf pattern) is an overflow: RNE gives ±max with
  ``saturate``, else ±inf; RTZ cannot overflow (the largest finite fp32 truncates to 0x7F7F).
  The sign bit is kept (so -0.0 gives 0x8000 and negative underflow -0.0).

The proof is over every fp32 input, both modes and both saturation flags: the harness's
StochasticRounder is built with ``stages=0`` (lanes=1, bf16 only), so its datapath is
combinational and one SMT query covers all 2^32 x 2 x 2 cases; k-induction at k=1 proves it
for every cycle whatever the PRNG and seeder state. The pipelined configurations add only
registers with one shared enable (see the stream properties for their handshakes).
"""

from __future__ import annotations

from amaranth.hdl import Assert, Assume, Module, Mux, Signal

from hdl.formats import Dtype, Rounding
from hdl.sru import StochasticRounder

from .harness import FormalTop

__all__ = ["bf16_reference", "sru_bf16_top"]

_BF16_INF = 0x7F80
_BF16_MAX = 0x7F7F
_BF16_NAN = 0x7FC0


def bf16_reference(m: Module, x, rne, saturate) -> Signal:
    """The bf16 bits of fp32 ``x`` cast with RNE (``rne`` high) or RTZ (low)."""
    sign, exp, frac = x[31], x[23:31], x[:23]
    mag = x[:31]
    t, rest = mag[16:], mag[:16]
    up = Signal(name="ref_up")
    m.d.comb += up.eq(rne & ((rest > 0x8000) | ((rest == 0x8000) & t[0])))
    rounded = Signal(16, name="ref_rounded")
    m.d.comb += rounded.eq(t + up)
    big = Mux(saturate, _BF16_MAX, _BF16_INF)
    ref = Signal(16, name="ref")
    with m.If((exp == 0xFF) & (frac != 0)):
        m.d.comb += ref.eq(_BF16_NAN)
    with m.Elif(exp == 0xFF):
        m.d.comb += ref.eq(Mux(sign, 0x8000, 0) | big)
    with m.Elif(rounded >= _BF16_INF):
        m.d.comb += ref.eq(Mux(sign, 0x8000, 0) | big)
    with m.Else():
        m.d.comb += ref.eq(Mux(sign, 0x8000, 0) | rounded)
    return ref


def sru_bf16_top(*, mutant: bool = False) -> FormalTop:
    """StochasticRounder(lanes=1, stages=0, targets=[bf16]): for a beat of dtype bf16 and mode
    RNE or RTZ, ``o.payload.data[0]`` equals :func:`bf16_reference` and ``invalid`` is low.
    ``mutant``: the reference rounds ties away from zero (the proof must fail)."""
    dut = StochasticRounder(lanes=1, stages=0, targets=[Dtype.BF16])

    def build(m, top):
        p = dut.i.payload
        m.d.comb += [Assume(p.dtype == Dtype.BF16),
                     Assume((p.mode == Rounding.RNE) | (p.mode == Rounding.RTZ))]
        x = top.input("i.payload")[:32]  # lane 0's fp32 bits (data is the first field)
        rne = p.mode == Rounding.RNE
        ref = bf16_reference(m, x, rne, p.saturate)
        if mutant:  # ties away from zero: differs from RNE on even ties
            ref = Mux(rne & (x[:16] == 0x8000) & (x[23:31] != 0xFF) & ~x[16]
                      & (x[16:31] < 0x7F7F), ref + 1, ref)
        m.d.comb += [Assert(dut.o.payload.data[0] == ref, "sru bf16 result != reference"),
                     Assert(~dut.o.payload.invalid, "sru bf16 beat flagged invalid")]

    return FormalTop(dut, build)
