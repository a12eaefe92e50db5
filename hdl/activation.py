"""The activation engine: ``out = cast(f(x·scale + bias))`` on N lanes, through the SRU."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from .formats import Dtype, Rounding, parse_dtypes
from .fp32_add import FP32_ADD_MAX_STAGES, Fp32Adder
from .fp32_mul import FP32_MUL_MAX_STAGES, Fp32Multiplier
from .instances import shared
from .params import check_int
from .pipeline import delay
from .sru import SRU_MAX_RANDOM_BITS, SRU_MAX_STAGES, StochasticRounder, sru_layouts

__all__ = ["ActivationFunc", "ActivationEngine", "activation_command_layout"]

#: The widest ``count`` field: beats per command, 1 .. 2^16 − 1.
COUNT_BITS = 16


class ActivationFunc(enum.Enum, shape=2):
    """The ``func`` field of a command (mirrored by ``golden.activation``); 2, 3 reserved."""

    IDENTITY = 0
    RELU = 1  #: y if y > 0 or y is NaN, else +0


def activation_command_layout(lanes: int) -> data.StructLayout:
    """One activation command: ``count`` beats of ``lanes`` fp32 values, one setting."""
    return data.StructLayout({
        "func": ActivationFunc,
        "dtype": Dtype,  # the cast's target (fp32: pass through)
        "mode": Rounding,
        "saturate": 1,
        "scale": 32,  # fp32, one per command
        "bias": data.ArrayLayout(32, lanes),  # fp32, one per lane (SBUF partition)
        "count": COUNT_BITS,  # beats taken from `i`, >= 1
    })


class ActivationEngine(wiring.Component):
    """N lanes of ``out = cast(f(x·scale + bias))``, one beat of N values per cycle.

    Numerics: exactly ``golden.activation`` (its docstring is the contract): an fp32 multiply
    (:class:`~hdl.fp32_mul.Fp32Multiplier`) then an fp32 add (:class:`~hdl.fp32_add.Fp32Adder`),
    each RNE with subnormals and the canonical NaN; ``f`` identity or relu; the cast by a
    :class:`~hdl.sru.StochasticRounder` (RNE / RTZ / SR, saturation, one XORWOW per lane).

    Streams:

    * ``cmd`` (:func:`activation_command_layout`): taken when the previous command has taken
      its last beat. A command with a reserved ``func`` or ``mode``, a ``dtype`` the SRU was not
      built for, or ``count`` = 0 is taken and dropped without taking beats, and sets the sticky
      ``error``.
    * ``i``: beats of ``lanes`` fp32 values; ``o``: the SRU's output beats (results
      zero-extended to the SRU's lane width, ``invalid`` never set for a legal command);
      ``seed`` / ``seeding``: the SRU's (``SET_SEED``; ``i`` waits while it seeds).

    Timing: ``latency = mul_stages + add_stages + sru_stages`` cycles from ``i`` to ``o``; one
    beat per cycle while the streams allow, commands back to back (the next one is taken with
    the last beat of the current one); full back-pressure: the whole pipeline holds while
    ``o`` is stalled. A seed on ``seed`` is taken only when the engine is not ``busy``, so
    beats taken before it draw from the old stream, as in program order.

    Reset drops the command in progress (its remaining beats are not expected) and every beat
    in flight (none comes out), clears ``error`` and ``busy``; the SRU then seeds itself with 0.

    Parameters
    ----------
    lanes : int
        N, the values per beat, 1 to 256.
    mul_stages : int
        The multipliers' pipeline depth, 0 to :data:`~hdl.fp32_mul.FP32_MUL_MAX_STAGES` (3).
    add_stages : int
        The adders' pipeline depth, 0 to :data:`~hdl.fp32_add.FP32_ADD_MAX_STAGES` (7).
    sru_stages : int
        The SRU's pipeline depth, 0 to :data:`~hdl.sru.SRU_MAX_STAGES` (3).
    random_bits : int
        r, the SRU's random bits per SR decision, 1 to :data:`~hdl.sru.SRU_MAX_RANDOM_BITS`.
    targets : collection of :class:`~hdl.formats.Dtype` or names
        The SRU's dtypes (default: all five).

    Raises
    ------
    TypeError
        If ``lanes``, ``mul_stages``, ``add_stages``, ``sru_stages`` or ``random_bits`` is not
        an integer; if ``targets`` is not a collection.
    ValueError
        If one of them is out of range; if ``targets`` is empty or names an unknown dtype.
    """

    def __init__(self, *, lanes: int, mul_stages: int = 2, add_stages: int = 2,
                 sru_stages: int = 2, random_bits: int = 16, targets=tuple(Dtype)):
        self.lanes = check_int("lanes", lanes, lo=1, hi=256)
        self.mul_stages = check_int("mul_stages", mul_stages, lo=0, hi=FP32_MUL_MAX_STAGES)
        self.add_stages = check_int("add_stages", add_stages, lo=0, hi=FP32_ADD_MAX_STAGES)
        self.sru_stages = check_int("sru_stages", sru_stages, lo=0, hi=SRU_MAX_STAGES)
        self.random_bits = check_int("random_bits", random_bits, lo=1, hi=SRU_MAX_RANDOM_BITS)
        self.targets = parse_dtypes(targets, param="targets")
        self.latency = mul_stages + add_stages + sru_stages
        self._sru = StochasticRounder(lanes=lanes, random_bits=random_bits, stages=sru_stages,
                                      targets=self.targets)
        _, o_layout = sru_layouts(lanes, self.targets)
        super().__init__({
            "cmd": In(stream.Signature(activation_command_layout(lanes))),
            "i": In(stream.Signature(data.ArrayLayout(32, lanes))),
            "o": Out(stream.Signature(o_layout)),
            "seed": In(stream.Signature(64)),
            "seeding": Out(1),
            "busy": Out(1),
            "error": Out(1),
        })

    def elaborate(self, platform):
        # Design note: the multipliers, adders and the relu form one clock-enabled pipeline of
        # mul_stages + add_stages registers with a valid bit per stage; it advances (`en`)
        # unless its last stage holds a beat the SRU cannot take, so the SRU's back-pressure
        # holds everything. Each beat carries its command's bias, function and cast settings
        # down the pipeline, so the next command can start while the last one's beats are
        # still in flight.
        m = Module()
        N, ms, ad = self.lanes, self.mul_stages, self.add_stages
        m.submodules.sru = sru = self._sru
        wiring.connect(m, sru.o, wiring.flipped(self.o))
        m.d.comb += self.seeding.eq(sru.seeding)

        cmd = self.cmd.payload
        cur = Signal(activation_command_layout(N))  # the command taking beats
        left = Signal(COUNT_BITS)  # beats it still takes
        error = Signal()
        m.d.comb += self.error.eq(error)

        built = Signal()
        with m.Switch(cmd.dtype):
            for d in self.targets:
                with m.Case(d):
                    m.d.comb += built.eq(1)
        legal = (built & (cmd.func.as_value() <= 1) & (cmd.mode.as_value() <= 2)
                 & (cmd.count != 0))

        # Pipeline advance and intake.
        depth = ms + ad
        en = Signal()
        take = Signal()
        v_end = Signal()  # the pipeline's last stage holds a beat (for the SRU)
        active = left != 0
        if depth == 0:
            # Combinational: the beat goes straight to the SRU (valid never waits for ready).
            m.d.comb += self.i.ready.eq(active & sru.i.ready)
        else:
            m.d.comb += [en.eq(~v_end | sru.i.ready), self.i.ready.eq(active & en)]
        m.d.comb += take.eq(self.i.valid & self.i.ready)
        with m.If(take):
            m.d.sync += left.eq(left - 1)

        # Commands: the next one once the current one has taken its last beat.
        m.d.comb += self.cmd.ready.eq(~active | (take & (left == 1)))
        with m.If(self.cmd.valid & self.cmd.ready):
            with m.If(legal):
                m.d.sync += [cur.eq(cmd), left.eq(cmd.count)]
            with m.Else():
                m.d.sync += error.eq(1)

        # x·scale, then + bias, then f; the beat's settings travel beside it.
        tag_layout = data.StructLayout({"valid": 1, "func": ActivationFunc, "dtype": Dtype,
                                        "mode": Rounding, "saturate": 1})
        tag = Signal(tag_layout)
        m.d.comb += [tag.valid.eq(self.i.valid & active if depth == 0 else take),
                     tag.func.eq(cur.func), tag.dtype.eq(cur.dtype),
                     tag.mode.eq(cur.mode), tag.saturate.eq(cur.saturate)]
        tag_add = delay(m, tag, ms, name="tag_mul", en=en)
        bias_add = delay(m, cur.bias, ms, name="bias", en=en)
        tag_out = delay(m, tag_add, ad, name="tag_add", en=en)
        m.d.comb += v_end.eq(tag_out.valid)
        for j in range(N):
            mul = shared(Fp32Multiplier(stages=ms), "hdl.fp32_mul:Fp32Multiplier",
                         {"stages": ms}, clocked=ms > 0)
            add = shared(Fp32Adder(stages=ad), "hdl.fp32_add:Fp32Adder", {"stages": ad},
                         clocked=ad > 0)
            m.submodules[f"mul{j}"] = mul
            m.submodules[f"add{j}"] = add
            m.d.comb += [mul.en.eq(en), mul.a.eq(self.i.payload[j]), mul.b.eq(cur.scale),
                         add.en.eq(en), add.a.eq(mul.result), add.b.eq(bias_add[j])]
            y = add.result
            relu = Mux(y[31] & ~((y[23:31] == 0xFF) & (y[:23] != 0)), 0, y)
            m.d.comb += sru.i.payload.data[j].eq(
                Mux(tag_out.func == ActivationFunc.RELU, relu, y))
        m.d.comb += [
            sru.i.valid.eq(tag_out.valid),
            sru.i.payload.dtype.eq(tag_out.dtype),
            sru.i.payload.mode.eq(tag_out.mode),
            sru.i.payload.saturate.eq(tag_out.saturate),
        ]

        # Busy: a command is taking beats or a beat is in the pipeline or the SRU.
        in_flight = Signal(range(self.latency + 4))
        out_taken = self.o.valid & self.o.ready
        m.d.sync += in_flight.eq(in_flight + take - out_taken)
        m.d.comb += self.busy.eq(active | (in_flight != 0))

        # SET_SEED orders after the beats already taken: the seed waits until none is left,
        # so every beat draws from the stream the program order gives it (golden.iss).
        m.d.comb += [sru.seed.payload.eq(self.seed.payload),
                     sru.seed.valid.eq(self.seed.valid & ~self.busy),
                     self.seed.ready.eq(sru.seed.ready & ~self.busy)]
        return m
