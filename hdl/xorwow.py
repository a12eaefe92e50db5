"""XORWOW random-number generators for the stochastic-rounding unit, and their lane seeder.

The algorithm, the lane seeding and the draw order are the contract written in
``golden/prng.py``; this module builds the same thing in gates.

Why XORWOW. docs/contract.md §2 records that Trainium3 documents an XORWOW generator (6 x u32
of state) for stochastic rounding, so we use the same kind of generator: Marsaglia's
xorshift with a Weyl counter (2003), as in cuRAND's default generator; period 2^192 - 2^32,
and one step costs only XORs, constant shifts and two 32-bit adders. Its known statistical
weaknesses (linear-complexity tests) do not matter for rounding decisions. The known pitfall
of SIMD SR hardware is the seeding: lanes started from nearby or shifted states give
correlated (even identical, shifted) streams. cuRAND separates threads by skipping 2^67
steps per subsequence, i.e. by offsets into one sequence; here instead every lane starts at
an independent, avalanche-mixed point: splitmix64 of a per-lane key derived from the seed
(golden/prng.py). The seeder is sequential and shared by all lanes, so its 64-bit multiplies
cost one 64-bit adder and a table of 16 multiples of each constant, not a multiplier per lane.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from .params import check_int

__all__ = ["XorwowState", "xorwow_step", "XorwowSeeder", "XORWOW_WEYL", "seeding_cycles"]

#: The Weyl increment added to ``d`` at every step.
XORWOW_WEYL = 362437

_G = 0x9E3779B97F4A7C15  # splitmix64's golden-ratio increment
_M1 = 0xBF58476D1CE4E5B9  # splitmix64's finaliser multipliers
_M2 = 0x94D049BB133111EB
_MASK64 = (1 << 64) - 1
_DIGIT = 4  # multiplier bits consumed per cycle by the seeder's serial multiply
_MUL_CYCLES = 64 // _DIGIT
#: Cycles of one mix: the multiplicand loaded, two multiplies with the xor-shift between them,
#: the final xor-shift and dispatch.
_MIX_CYCLES = 2 * _MUL_CYCLES + 3
#: Each multiplier's 16 multiples d * M mod 2^64, d = 0..15 (one per digit value).
_MULTIPLES = {c: Array(Const(d * c & _MASK64, 64) for d in range(1 << _DIGIT)) for c in (_M1, _M2)}

#: One generator's state: five xorshift words and the Weyl counter.
XorwowState = data.StructLayout({"v": data.ArrayLayout(32, 5), "d": 32})


def seeding_cycles(lanes: int) -> int:
    """Cycles to seed ``lanes`` generators: the cycle that takes a seed (after reset: the first
    cycle, ``busy`` already high), then ``1 + 4 * lanes`` mixes of 35 cycles, the last one
    ending with the last write."""
    return 1 + (1 + 4 * lanes) * _MIX_CYCLES


# lab3 begin: xorwow_step
def xorwow_step(state):
    """One XORWOW step of ``state`` (a :data:`XorwowState` view).

    Returns ``(next_state, output)`` as Amaranth values: ``next_state`` is laid out as
    :data:`XorwowState`, ``output`` is the 32-bit result ``v[4]' + d'``. Pure logic: XORs,
    constant shifts and two 32-bit adders.
    """
    v = state.v
    t = v[0] ^ (v[0] >> 2)
    new = (v[4] ^ (v[4] << 4)[:32]) ^ (t ^ (t << 1)[:32])
    d = (state.d + XORWOW_WEYL)[:32]
    return Cat(v[1], v[2], v[3], v[4], new, d), (new + d)[:32]
# lab3 end: xorwow_step


class _Step(enum.Enum, shape=2):
    KEY = 0  # the mix being computed is K = mix64(seed + G)
    LANE = 1  # s = mix64(K ^ lane)
    WORD = 2  # w_i = mix64(s + (i + 1) * G)


class _Phase(enum.Enum, shape=4):
    # IDLE alone has bit 3 set: `busy` is that bit of the phase register, not a compare
    # (timing: it reaches the SRU's intake), and the phase stays the seeder's one state.
    IDLE = 0b1000
    LOAD = 1  # x = z ^ z >> 30: the first multiply's multiplicand
    MUL1 = 2  # acc = x * M1, _DIGIT bits of the multiplicand per cycle
    MUL2 = 3  # acc = (p ^ p >> 27) * M2
    DONE = 4  # mix = acc ^ acc >> 31; dispatch: the next mix's input to z, or finish
    SHIFT = 5  # x = p ^ p >> 27 from acc = p (between MUL1 and MUL2)


class XorwowSeeder(wiring.Component):
    """Computes every lane's initial XORWOW state from a 64-bit seed, one lane after another.

    Contract (``golden/prng.py``): ``K = mix64(seed + G)``, lane ``L``'s key
    ``s = mix64(K ^ L)``, its words ``w_i = mix64(s + (i + 1) G)`` for i = 0..2, state
    ``v0, v1 = lo(w0), hi(w0)``, ``v2, v3 = lo(w1), hi(w1)``, ``v4, d = lo(w2), hi(w2)``, and
    ``v0 = 1`` if ``v0..v4`` are all zero. ``mix64`` is splitmix64's finaliser.

    Interface: ``seed`` is a stream of 64-bit seeds; a seed is accepted when the seeder is idle
    (``busy`` low). Then for each lane in order it pulses ``write`` for one cycle with ``lane``
    and ``state``; ``busy`` stays high until the last lane is written. ``start_on_reset``: after
    reset the seeder seeds with 0 by itself (``busy`` high meanwhile), so the lanes never run
    from an unseeded state.

    Timing: :func:`seeding_cycles` (``1 + (1 + 4 * lanes) * 35``) cycles per seed. Each mix is two
    64-bit multiplies by constants done 4 bits a cycle (Horner's rule from the multiplicand's top
    digit, the constant's 16 multiples in a table: one 64-bit adder, no multiplier), between a
    cycle that loads the multiplicand and one that finishes the mix and picks the next one's
    input, with a cycle between the two multiplies for the xor-shift.

    Parameters
    ----------
    lanes : int
        The lanes to seed, at least 1.

    Raises
    ------
    TypeError
        If ``lanes`` is not an integer.
    ValueError
        If ``lanes`` is below 1.
    """

    def __init__(self, *, lanes: int):
        self.lanes = check_int("lanes", lanes, lo=1)
        super().__init__({
            "seed": In(stream.Signature(64)),
            "busy": Out(1),
            "write": Out(1),
            "lane": Out(range(lanes)),
            "state": Out(XorwowState),
        })

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes

        phase = Signal(_Phase, init=_Phase.DONE)  # DONE + step KEY + z = G: seed 0 at reset
        step = Signal(_Step)
        z = Signal(64, init=_G)  # input of the current mix
        x = Signal(64)  # multiplicand, shifted left _DIGIT bits a cycle
        acc = Signal(64)
        count = Signal(range(_MUL_CYCLES))
        key = Signal(64)  # K
        lane_key = Signal(64)  # s
        lane = Signal(range(lanes))
        word = Signal(range(3))
        words = Signal(data.ArrayLayout(64, 2))  # w0, w1 while w2 is computed
        first = Signal(init=1)  # the reset-time DONE has no finished mix to dispatch

        m.d.comb += [
            self.busy.eq(~phase.as_value()[3]),
            self.seed.ready.eq(phase.as_value()[3]),
            self.lane.eq(lane),
        ]

        # Design note. The next mix's input comes out of a 64-bit adder (seed + G, s + k G),
        # after the finished mix's xor-shift for s + G; it goes to z, and the next cycle (LOAD)
        # applies the new mix's first xor-shift into x. So no cycle chains xor-shift, adder and
        # xor-shift into x (ECP5: that acc -> x path was the SRU lane's and the activation
        # engine's critical path in synth/report.md); one cycle more per mix. Likewise MUL1's
        # product goes to acc, and a cycle of its own (SHIFT) forms p ^ p >> 27 into x: the
        # Horner adder never chains into that xor-shift and x's multiplexer.
        def start_mix(value):
            m.d.sync += [z.eq(value), phase.eq(_Phase.LOAD)]

        def start_multiply(multiplicand, multiply):
            m.d.sync += [x.eq(multiplicand), acc.eq(0), count.eq(0), phase.eq(multiply)]

        mixed = acc ^ (acc >> 31)
        w2 = mixed
        state_words = [words[0][:32], words[0][32:], words[1][:32], words[1][32:],
                       w2[:32], w2[32:]]
        all_zero = ~(words[0].any() | words[1].any() | w2[:32].any())
        m.d.comb += [
            self.state.v[0].eq(Mux(all_zero, 1, state_words[0])),
            self.state.v[1].eq(state_words[1]),
            self.state.v[2].eq(state_words[2]),
            self.state.v[3].eq(state_words[3]),
            self.state.v[4].eq(state_words[4]),
            self.state.d.eq(state_words[5]),
        ]

        with m.Switch(phase):
            with m.Case(_Phase.IDLE):
                with m.If(self.seed.valid):
                    m.d.sync += step.eq(_Step.KEY)
                    start_mix((self.seed.payload + _G)[:64])
            with m.Case(_Phase.LOAD):
                start_multiply(z ^ (z >> 30), _Phase.MUL1)
            with m.Case(_Phase.MUL1, _Phase.MUL2):
                # Horner, the multiplicand's digits from the top: acc = acc * 16 + d * M
                # (mod 2^64), d = x's top digit, d * M from a table of the 16 multiples.
                # A constant table and a shift by a constant: one 64-bit adder a cycle, no
                # multiplier and no shift by `count` in the path (ECP5 timing).
                top = x[64 - _DIGIT:]
                multiple = Mux(phase == _Phase.MUL1, _MULTIPLES[_M1][top], _MULTIPLES[_M2][top])
                product = ((acc << _DIGIT) + multiple)[:64]
                m.d.sync += [
                    acc.eq(product),
                    x.eq((x << _DIGIT)[:64]),
                    count.eq(count + 1),
                ]
                with m.If(count == _MUL_CYCLES - 1):
                    m.d.sync += phase.eq(Mux(phase == _Phase.MUL1, _Phase.SHIFT, _Phase.DONE))
            with m.Case(_Phase.SHIFT):
                start_multiply(acc ^ (acc >> 27), _Phase.MUL2)
            with m.Case(_Phase.DONE):
                with m.If(first):  # reset: z holds seed 0 + G already
                    m.d.sync += [first.eq(0), phase.eq(_Phase.LOAD)]
                with m.Else():
                    with m.Switch(step):
                        with m.Case(_Step.KEY):
                            m.d.sync += [key.eq(mixed), lane.eq(0), step.eq(_Step.LANE)]
                            start_mix(mixed)  # K ^ 0
                        with m.Case(_Step.LANE):
                            m.d.sync += [lane_key.eq(mixed), word.eq(0), step.eq(_Step.WORD)]
                            start_mix((mixed + _G)[:64])
                        with m.Case(_Step.WORD):
                            with m.If(word < 2):
                                m.d.sync += [words[word].eq(mixed), word.eq(word + 1)]
                                start_mix((lane_key + Mux(word == 0, 2 * _G & _MASK64,
                                                          3 * _G & _MASK64))[:64])
                            with m.Else():
                                m.d.comb += self.write.eq(1)
                                with m.If(lane == lanes - 1):
                                    m.d.sync += phase.eq(_Phase.IDLE)
                                with m.Else():
                                    m.d.sync += [lane.eq(lane + 1), step.eq(_Step.LANE)]
                                    start_mix(key ^ (lane + 1))
        return m
