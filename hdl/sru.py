"""Stochastic-rounding unit: N lanes of fp32 -> bf16 / fp16 / fp8 casts with RNE, RTZ or SR."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .formats import CAST_FORMATS, FP32_CANONICAL_NAN, Dtype, Rounding, parse_dtypes
from .params import check_int
from .xorwow import XorwowSeeder, XorwowState, seeding_cycles, xorwow_step

__all__ = ["StochasticRounder", "SRU_MAX_STAGES", "SRU_DEFAULT_STAGES", "SRU_MAX_RANDOM_BITS",
           "sru_layouts"]

#: The largest supported ``stages``.
SRU_MAX_STAGES = 4
#: The default ``stages``: every phase registered, the shift apart from the rounding decision.
#: Alone on an ECP5-85F (speed 6) 3 stages reach 100 MHz and 2 about 55 (``synth/report.md``);
#: inside a core the shift and the decision's carry chain spread out (86 MHz at 3).
SRU_DEFAULT_STAGES = 4
#: The largest supported ``random_bits`` (one 32-bit PRNG output per draw).
SRU_MAX_RANDOM_BITS = 32

_SIG_BITS = 24  # fp32 significand with its hidden bit
_KEPT_BITS = 11  # the most kept bits of any target: fp16's 1 + 10 (the shift is >= 13)
_BASE_BITS = 18  # max(E - Emin, 0) << p: at most (254 - 113) << 10 for fp16, < 2^18
_MAG_BITS = _BASE_BITS + 1
#: ``over`` = base + 2^_MAG_BITS - 1 - max_finite: the magnitude overflows the target iff
#: over + kept + up carries into bit _MAG_BITS (an adder beside the magnitude's, not a compare
#: after it).
_OVER_BITS = _MAG_BITS + 1


def _decode_fields(big_e, f, r):
    """(shift, base, over) of a lane for the target ``f``, from ``big_e``: the fp32 exponent
    field, 1 for a subnormal. shift = (23 - p) + max(emin_b - E, 0), at most 24 + r (every
    compare is of E with a constant, beside one subtraction: one carry chain); base =
    max(E - emin_b, 0) << p; over as :data:`_OVER_BITS` says."""
    emin_b = f.emin + 127  # biased fp32 exponent of the target's smallest normal
    top = 23 - f.man_bits
    most = _SIG_BITS + r
    over_k = (1 << _MAG_BITS) - 1 - f.max_finite
    clamped = big_e < emin_b + top - most  # (a constant; may be < 0)
    return (Mux(big_e >= emin_b, top, Mux(clamped, most, emin_b + top - big_e)),
            Mux(big_e > emin_b, big_e - emin_b, 0) << f.man_bits,
            Mux(big_e > emin_b, (big_e << f.man_bits) + (over_k - (emin_b << f.man_bits)),
                over_k))


def sru_layouts(lanes: int, targets) -> tuple[data.StructLayout, data.StructLayout]:
    """The input and output payload layouts of a :class:`StochasticRounder`."""
    out_bits = 32 if Dtype.FP32 in targets else 16
    i = data.StructLayout({
        "data": data.ArrayLayout(32, lanes),  # fp32 bit patterns, lane l in data[l]
        "dtype": Dtype,  # the target of the whole beat
        "mode": Rounding,
        "saturate": 1,
    })
    o = data.StructLayout({
        "data": data.ArrayLayout(out_bits, lanes),  # results, zero-extended (fp8: low 8 bits)
        "invalid": 1,  # the beat's dtype was not built or its mode is reserved; data is 0
    })
    return i, o


class StochasticRounder(wiring.Component):
    """Rounds ``lanes`` fp32 values per cycle to bf16, fp16, fp8-e4m3 or fp8-e5m2.

    Numerics (docs/contract.md §4, "Casts fp32 -> target"; ``golden.rounding.round_fp32`` is the
    model, bit for bit): RNE and RTZ as IEEE; SR rounds the magnitude up iff
    ``((D << r) >> d) + R >= 2^r``, with D the d bits of ``|x|`` below the target's kept LSB
    (the target's subnormal range included) and R the lane's next r-bit random number.
    Exact values never move. Overflow: RTZ clamps to ±max finite; RNE and SR give ±max with
    ``saturate``, else ±inf (bf16, fp16, e5m2) or NaN (e4m3). ±inf inputs: ±max with
    ``saturate``, else ±inf (NaN for e4m3). Every NaN result is the target's canonical NaN
    (bf16 0x7FC0, fp16 0x7E00, e4m3 0x7F, e5m2 0x7E). fp32 as a target passes values through
    (NaNs become 0x7FC00000) and never draws random bits.

    Randomness (``golden/prng.py``): one XORWOW generator per lane; every lane steps once for
    each accepted SR beat whose dtype is a built narrow target, and R is the top r bits of the
    step's output. Other beats leave the generators alone. A seed accepted on ``seed`` reseeds
    every lane (see :class:`~hdl.xorwow.XorwowSeeder`); after reset the unit seeds itself with 0
    (beats in the pipeline at the reset are dropped: none comes out).
    While seeding (``seeding`` high, :func:`~hdl.xorwow.seeding_cycles` cycles) ``i`` is not
    ready for a beat that draws (SR to a built narrow target); every other beat passes at full
    rate, as it never touches the generators. Beats accepted before a seed (or in the same
    cycle) have drawn from the old streams. With ``stages=0`` a seed is taken only while no
    beat is offered on ``i``.

    Streams: ``i`` carries ``lanes`` fp32 values plus the beat's dtype, rounding mode and
    saturation flag; ``o`` the results. The flag is explicit on every beat: the default
    (on for fp8, ``golden.rounding.DEFAULT_SATURATE``) is the command layer's to apply.
    A beat whose dtype was not built (or is reserved), or whose mode is reserved, gives zeros
    with ``invalid`` set and draws nothing.

    Timing: latency ``stages`` cycles from ``i`` to ``o`` (0: combinational), one beat per
    cycle at full throughput, full backpressure (the pipeline holds while ``o`` is stalled;
    ``i.ready`` is ``o.ready`` or an empty output register, and low for a drawing beat while
    seeding).

    Parameters
    ----------
    lanes : int
        Elements per beat, 1 to 256.
    random_bits : int
        r, the random bits per SR decision, 1 to 32 (default 16).
    stages : int
        Pipeline registers, 0 to :data:`SRU_MAX_STAGES` (default :data:`SRU_DEFAULT_STAGES`,
        4).
    targets : collection of :class:`~hdl.formats.Dtype` or names
        The dtypes built in (default: all five); fewer targets, less logic.

    Raises
    ------
    TypeError
        If ``lanes``, ``random_bits`` or ``stages`` is not an integer; if ``targets`` is not a
        collection.
    ValueError
        If ``lanes``, ``random_bits`` or ``stages`` is out of range; if ``targets`` is empty
        or names an unknown dtype.
    """

    def __init__(self, *, lanes: int, random_bits: int = 16, stages: int = SRU_DEFAULT_STAGES,
                 targets=tuple(Dtype)):
        self.lanes = check_int("lanes", lanes, lo=1, hi=256)
        self.random_bits = check_int("random_bits", random_bits, lo=1, hi=SRU_MAX_RANDOM_BITS)
        self.stages = check_int("stages", stages, lo=0, hi=SRU_MAX_STAGES)
        self.targets = parse_dtypes(targets, param="targets")
        self.latency = self.stages
        self.seeding_cycles = seeding_cycles(self.lanes)
        i_layout, o_layout = sru_layouts(self.lanes, self.targets)
        super().__init__({
            "i": In(stream.Signature(i_layout)),
            "o": Out(stream.Signature(o_layout)),
            "seed": In(stream.Signature(64)),
            "seeding": Out(1),
        })

    def elaborate(self, platform):
        # Design note.
        #
        # Four phases per lane, a pipeline register possible after each:
        #
        #   decoded | draw R (the lane's XORWOW step), classify NaN/inf, and from the target's
        #           | p and smallest normal exponent work out the shift d (clamped to 24 + r,
        #           | where every significand bit is below the kept LSB) and the exponent part
        #           | of the result, base = max(E - Emin, 0) << p
        #   shifted | {sig, r zero bits} >> d: the top bits are the kept significand, the low r
        #           | bits the truncated fraction (D << r) >> d, and what falls off is sticky
        #   decided | up (one more ulp: the mode's decision from kept's LSB, frac, lost, R)
        #   (round) | magnitude = base + kept + up, one adder (a carry out of the mantissa
        #           | moves to the next binade, subnormal -> normal included); then overflow
        #           | and specials
        #
        # (`up` is decided before the round phase, not in it: each phase then holds at most one
        # carry chain, the fraction's compare with R or the magnitude's adder.)
        #
        # stages = 1 registers the output only, 2 also `decoded`, 3 also `decided` (the shift
        # and the decision in one cycle: 100 MHz on an ECP5 alone, not in a core), 4 every
        # phase. Registers advance together (one clock enable: o empty or o.ready), so
        # backpressure is exact.
        # The generator steps when an SR beat is accepted: R belongs to the beat that was
        # accepted with it, and a seed, which needs `i` idle, applies only to later beats.
        m = Module()
        lanes, r = self.lanes, self.random_bits
        narrow = [d for d in self.targets if d in CAST_FORMATS]
        has_fp32 = Dtype.FP32 in self.targets
        shift_bits = (_SIG_BITS + r).bit_length()

        m.submodules.seeder = seeder = XorwowSeeder(lanes=lanes)
        # Combinational (stages=0): o.valid is i.valid while not seeding, so a seed must not
        # start while a beat is offered (o.valid would drop before o took it).
        seed_gate = ~self.i.valid if self.stages == 0 else Const(1)
        m.d.comb += [
            seeder.seed.payload.eq(self.seed.payload),
            seeder.seed.valid.eq(self.seed.valid & seed_gate),
            self.seed.ready.eq(seeder.seed.ready & seed_gate),
        ]
        m.d.comb += self.seeding.eq(seeder.busy)

        registered = {0: (), 1: ("out",), 2: ("decoded", "out"),
                      3: ("decoded", "decided", "out"),
                      4: ("decoded", "shifted", "decided", "out")}[self.stages]

        def boundary(phase, name, layout, value):
            """``value`` at the end of ``phase``: a comb signal, or its register."""
            sig = Signal(layout, name=name)
            m.d.comb += sig.eq(value)
            if phase not in registered:
                return sig
            reg = Signal(layout, name=f"{name}_q")
            with m.If(en):
                m.d.sync += reg.eq(sig)
            return reg

        def valid_after(name):
            nonlocal valid
            valid = boundary(name, f"{name}_valid", 1, valid)

        # Beat decode (shared by the lanes).
        payload = self.i.payload
        dtype_ok = Signal()
        dtype_bits, mode_bits = payload.dtype.as_value(), payload.mode.as_value()
        m.d.comb += dtype_ok.eq(dtype_bits.matches(*(d.value for d in self.targets))
                                & (mode_bits != 3))
        is_narrow = dtype_bits.matches(*(d.value for d in narrow)) if narrow else Const(0)
        draw = Signal()
        m.d.comb += draw.eq(dtype_ok & is_narrow & (payload.mode == Rounding.SR))

        # Pipeline control. While seeding, only a beat that draws waits: the others never
        # touch the generators, so they may pass a seed in progress without any change to a
        # result (the golden order: beats before a seed draw from the old streams, SR beats
        # after it from the new ones).
        en = Signal()  # every pipeline register advances
        held = Signal()  # the beat offered must wait for the seeding
        valid = Signal()  # the beat at the current phase is real (not a bubble)
        m.d.comb += [held.eq(seeder.busy & draw), valid.eq(self.i.valid & ~held)]
        if self.stages == 0:
            m.d.comb += [
                en.eq(1),
                self.i.ready.eq(self.o.ready & ~held),
            ]
        else:
            m.d.comb += [
                en.eq(~self.o.valid | self.o.ready),
                self.i.ready.eq(en & ~held),
            ]

        # Generators.
        # A beat that draws does not step the generators in the cycle it is taken (that
        # handshake would enable every lane's 192 state bits: a timing path). It sets
        # `behind`, and the generators step in the next cycle, from a register; a beat taken
        # meanwhile draws from the state they are about to hold. (A seed's writes come many
        # cycles after any draw: drawing beats wait while the seeder is busy.)
        states = [Signal(XorwowState, name=f"prng{lane}") for lane in range(lanes)]
        behind = Signal()
        m.d.sync += behind.eq(self.i.valid & self.i.ready & draw)
        randoms = []
        for lane, state in enumerate(states):
            stepped, _ = xorwow_step(state)
            current = Signal(XorwowState, name=f"prng{lane}_now")
            m.d.comb += current.eq(Mux(behind, stepped, state))
            _, out = xorwow_step(current)
            randoms.append(out[32 - r:])
            with m.If(seeder.write & (seeder.lane == lane)):
                m.d.sync += state.eq(seeder.state)
            with m.Elif(behind):
                m.d.sync += state.eq(stepped)

        # Phase 1: decode, draw. Each lane's values are separate signals (not one wide
        # struct): event-driven simulators then re-evaluate one lane per change, not all.
        beat_layout = data.StructLayout({"dtype": Dtype, "mode": Rounding, "saturate": 1,
                                         "invalid": 1})
        lane_dec = data.StructLayout({
            "sign": 1, "nan": 1, "inf": 1, "sig": _SIG_BITS, "shift": shift_bits,
            "base": _BASE_BITS, "over": _OVER_BITS, "random": r,
            **({"raw": 32} if has_fp32 else {}),
        })
        dec_beat = Signal(beat_layout)
        m.d.comb += [
            dec_beat.dtype.eq(payload.dtype),
            dec_beat.mode.eq(payload.mode),
            dec_beat.saturate.eq(payload.saturate),
            dec_beat.invalid.eq(~dtype_ok),
        ]
        decoded = []
        for lane in range(lanes):
            x = payload.data[lane]
            e32, man = x[23:31], x[:23]
            ld = Signal(lane_dec, name=f"dec{lane}")
            # The switch drives signals of its own (as in SystolicArray's sparse rows: Yosys
            # writes the fields plain assignments drive beside a switch as `always @*` blocks,
            # which a 4-state simulator does not run until an input changes).
            shift_v = Signal(shift_bits, name=f"dec_shift{lane}")
            base_v = Signal(_BASE_BITS, name=f"dec_base{lane}")
            over_v = Signal(_OVER_BITS, name=f"dec_over{lane}")
            m.d.comb += [
                ld.shift.eq(shift_v), ld.base.eq(base_v), ld.over.eq(over_v),
                ld.sign.eq(x[31]),
                ld.nan.eq((e32 == 0xFF) & (man != 0)),
                ld.inf.eq((e32 == 0xFF) & (man == 0)),
                ld.sig.eq(Cat(man, e32 != 0)),
                ld.random.eq(randoms[lane]),
            ]
            if has_fp32:
                m.d.comb += ld.raw.eq(x)
            e_zero = Signal(name=f"dec_e_zero{lane}")
            m.d.comb += e_zero.eq(e32 == 0)
            with m.Switch(payload.dtype):
                for d in narrow:
                    f = CAST_FORMATS[d]
                    with m.Case(d):
                        # A subnormal (E = 0) has E = 1's fields: constants, chosen after the
                        # arithmetic on E rather than muxed into its operand (the zero test is
                        # then beside the carry chains, not in front of them).
                        m.d.comb += [
                            target.eq(Mux(e_zero, sub, normal))
                            for target, sub, normal in zip(
                                (shift_v, base_v, over_v), _decode_fields(Const(1, 8), f, r),
                                _decode_fields(e32, f, r), strict=True)]
            decoded.append(boundary("decoded", f"decoded{lane}", lane_dec, ld))
        dec_beat = boundary("decoded", "decoded_beat", beat_layout, dec_beat)
        valid_after("decoded")

        # Phase 2: shift.
        lane_sh = data.StructLayout({
            "sign": 1, "nan": 1, "inf": 1, "kept": _KEPT_BITS, "frac": r, "lost": 1,
            "base": _BASE_BITS, "over": _OVER_BITS, "random": r,
            **({"raw": 32} if has_fp32 else {}),
        })
        lane_up = data.StructLayout({  # what the round phase takes from the decision
            "sign": 1, "nan": 1, "inf": 1, "kept": _KEPT_BITS, "up": 1, "base": _BASE_BITS,
            "over": _OVER_BITS, **({"raw": 32} if has_fp32 else {}),
        })
        shifted_lanes = []
        for lane in range(lanes):
            ld = decoded[lane]
            ls = Signal(lane_sh, name=f"sh{lane}")
            wide = Cat(Const(0, r), ld.sig)  # sig * 2^r
            shifted = wide >> ld.shift
            # Bits of `wide` below position `shift` are lost; its low r bits are zero.
            lost = Cat(*(ld.sig[i - r] & (ld.shift > i) for i in range(r, r + _SIG_BITS)))
            m.d.comb += [
                ls.sign.eq(ld.sign), ls.nan.eq(ld.nan), ls.inf.eq(ld.inf),
                ls.kept.eq(shifted[r:]),
                ls.frac.eq(shifted[:r]),
                ls.lost.eq(lost.any()),
                ls.base.eq(ld.base), ls.over.eq(ld.over),
                ls.random.eq(ld.random),
            ]
            if has_fp32:
                m.d.comb += ls.raw.eq(ld.raw)
            shifted_lanes.append(boundary("shifted", f"shifted{lane}", lane_sh, ls))
        beat = boundary("shifted", "shifted_beat", beat_layout, dec_beat)
        valid_after("shifted")

        # Phase 3: the rounding decision.
        decided_lanes = []
        for lane in range(lanes):
            ls = shifted_lanes[lane]
            up = Signal(name=f"up{lane}")  # 1: the magnitude goes up by one ulp
            # lab3 begin: round_up
            # RNE: guard & (sticky | lsb); SR: the carry out of frac + R (frac + R >= 2^r).
            guard = ls.frac[r - 1]
            sticky = ls.lost | (ls.frac[:r - 1].any() if r > 1 else 0)
            carry = (ls.frac + ls.random)[r]
            with m.Switch(beat.mode):
                with m.Case(Rounding.RNE):
                    m.d.comb += up.eq(guard & (sticky | ls.kept[0]))
                with m.Case(Rounding.SR):
                    m.d.comb += up.eq(carry)
                with m.Default():  # RTZ (and the reserved mode, whose beats are invalid)
                    m.d.comb += up.eq(0)
            # lab3 end: round_up
            lu = Signal(lane_up, name=f"upd{lane}")
            m.d.comb += [lu.sign.eq(ls.sign), lu.nan.eq(ls.nan), lu.inf.eq(ls.inf),
                         lu.kept.eq(ls.kept), lu.up.eq(up), lu.base.eq(ls.base),
                         lu.over.eq(ls.over)]
            if has_fp32:
                m.d.comb += lu.raw.eq(ls.raw)
            decided_lanes.append(boundary("decided", f"decided{lane}", lane_up, lu))
        beat = boundary("decided", "decided_beat", beat_layout, beat)
        valid_after("decided")

        # Phase 4: round, overflow, specials.
        out_bits = self.o.payload.data.shape().elem_shape
        results = []
        for lane in range(lanes):
            ls = decided_lanes[lane]
            # base + kept + up as one adder: `up` below both operands' LSBs carries in.
            mag = ((Cat(ls.up, ls.base) + Cat(ls.up, ls.kept)) >> 1)[:_MAG_BITS]
            overflow = ((Cat(ls.up, ls.over) + Cat(ls.up, ls.kept)) >> 1)[_MAG_BITS]
            result = Signal(out_bits, name=f"result{lane}")
            with m.If(~beat.invalid):
                with m.Switch(beat.dtype):
                    for d in narrow:
                        f = CAST_FORMATS[d]
                        sign = ls.sign << (f.bits - 1)
                        nan = f.nan
                        sat_or_inf = Mux(beat.saturate, sign | f.max_finite,
                                         sign | f.inf if f.has_inf else nan)
                        with m.Case(d):
                            with m.If(ls.nan):
                                m.d.comb += result.eq(nan)
                            with m.Elif(ls.inf):
                                m.d.comb += result.eq(sat_or_inf)
                            with m.Elif(overflow):  # mag > f.max_finite
                                with m.If(beat.mode == Rounding.RTZ):
                                    m.d.comb += result.eq(sign | f.max_finite)
                                with m.Else():
                                    m.d.comb += result.eq(sat_or_inf)
                            with m.Else():
                                m.d.comb += result.eq(sign | mag[:f.bits - 1])
                    if has_fp32:
                        with m.Case(Dtype.FP32):
                            m.d.comb += result.eq(Mux(ls.nan, FP32_CANONICAL_NAN, ls.raw))
            results.append(boundary("out", f"out{lane}", out_bits, result))
        invalid = boundary("out", "out_invalid", 1, beat.invalid)
        valid_after("out")
        m.d.comb += [
            self.o.payload.data.eq(Cat(*results)),
            self.o.payload.invalid.eq(invalid),
            self.o.valid.eq(valid),
        ]
        return m
