"""The activation/vector engine: ``out = cast(f(x·scale + bias))`` and the vector operations
(``a op b``, ``a op scalar``, reductions along the free axis) on N lanes, through the SRU."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from .formats import Dtype, Rounding, parse_dtypes
from .fp32_add import FP32_ADD_MAX_STAGES, Fp32Adder
from .fp32_compare import Fp32Compare
from .fp32_mul import FP32_MUL_MAX_STAGES, Fp32Multiplier
from .instances import shared
from .params import check_int
from .pipeline import delay
from .sru import (
    SRU_DEFAULT_STAGES,
    SRU_MAX_RANDOM_BITS,
    SRU_MAX_STAGES,
    StochasticRounder,
    sru_layouts,
)

__all__ = ["ActivationFunc", "AluOp", "CommandKind", "ActivationEngine",
           "activation_command_layout", "activation_beat_layout"]

#: The widest ``count`` field: beats per command, 1 .. 2^16 − 1.
COUNT_BITS = 16

_ONE, _MINUS_ONE, _NEG_ZERO = 0x3F80_0000, 0xBF80_0000, 0x8000_0000
_POS_INF, _NEG_INF = 0x7F80_0000, 0xFF80_0000


class ActivationFunc(enum.Enum, shape=2):
    """The ``func`` field of a command (mirrored by ``golden.activation``); 2, 3 reserved."""

    IDENTITY = 0
    RELU = 1  #: y if y > 0 or y is NaN, else +0


class AluOp(enum.Enum, shape=3):
    """The vector operation (``golden.isa.AluOp``, whose meaning ``golden.vector`` is); 6, 7
    reserved. A reduction takes ADD, MAX and MIN."""

    ADD = 0
    SUBTRACT = 1
    MULTIPLY = 2
    MAX = 3
    MIN = 4
    GREATER = 5


class CommandKind(enum.Enum, shape=2):
    """What a command computes (the core's feeder sets it from the opcode)."""

    ACTIVATE = 0  #: f(a·scale + bias)
    TENSOR_TENSOR = 1  #: a alu b
    TENSOR_SCALAR = 2  #: a alu scale (scale alu a with ``reverse``)
    REDUCE = 3  #: each lane's beats folded by alu into one output beat


def activation_command_layout(lanes: int) -> data.StructLayout:
    """One command: ``count`` input beats of ``lanes`` lanes, one setting. ``kind`` 0 (and the
    fields after ``count`` 0) is an ACTIVATE."""
    return data.StructLayout({
        "func": ActivationFunc,
        "dtype": Dtype,  # the cast's target (fp32: pass through)
        "mode": Rounding,
        "saturate": 1,
        "scale": 32,  # fp32, one per command (TENSOR_SCALAR: the scalar)
        "bias": data.ArrayLayout(32, lanes),  # fp32, one per lane (SBUF partition)
        "count": COUNT_BITS,  # beats taken from `i`, >= 1
        "kind": CommandKind,
        "alu": AluOp,
        "reverse": 1,
    })


def activation_beat_layout(lanes: int) -> data.StructLayout:
    """One input beat: operand ``a`` of every lane, and ``b`` (TENSOR_TENSOR's second operand;
    ignored otherwise)."""
    return data.StructLayout({"a": data.ArrayLayout(32, lanes),
                              "b": data.ArrayLayout(32, lanes)})


class _XSource(enum.Enum, shape=2):
    """Where a lane's x comes from: operand a, or the comparison's result."""

    A = 0
    MAX = 1
    MIN = 2
    GREATER = 3


#: A lane at the intake: operand a, the comparison's operands, m and c.
_SELECT_LANE = data.StructLayout({"a": 32, "cmp_a": 32, "cmp_b": 32, "m": 32, "c": 32})
#: A lane's operands of x·m + c.
_OPERAND_LANE = data.StructLayout({"x": 32, "m": 32, "c": 32})


class ActivationEngine(wiring.Component):
    """N lanes of ``out = cast(f(x·scale + bias))`` and of the vector operations, one beat of
    N values per cycle.

    Numerics: exactly ``golden.activation`` and ``golden.vector`` (their docstrings are the
    contract): one datapath per lane, ``cast(f(x · m + c))``: an fp32 multiply
    (:class:`~hdl.fp32_mul.Fp32Multiplier`) then an fp32 add (:class:`~hdl.fp32_add.Fp32Adder`),
    each RNE with subnormals and the canonical NaN; ``f`` identity or relu; the cast by a
    :class:`~hdl.sru.StochasticRounder` (RNE / RTZ / SR, saturation, one XORWOW per lane).
    Each command ``kind`` picks ``x``, ``m`` and ``c`` so that the result is its single IEEE
    operation (``a·1.0 = a`` and ``y + (−0) = y`` exactly, NaNs made canonical either way):

    ==============  ====================  ==========  ========
    kind / alu       x                     m           c
    ==============  ====================  ==========  ========
    ACTIVATE         a                     scale       bias
    ADD              a                     1.0         B
    SUBTRACT         a                     1.0         −B
    SUBTRACT rev.    a                     −1.0        B
    MULTIPLY         a                     B           −0
    MAX, MIN, GT     compare(a, B)         1.0         −0
    REDUCE ADD       a                     1.0         acc
    REDUCE MAX, MIN  compare(acc, a)       1.0         −0
    ==============  ====================  ==========  ========

    where B is lane ``b`` of the beat (TENSOR_TENSOR) or ``scale`` (TENSOR_SCALAR; with
    ``reverse`` the comparison is ``compare(B, a)``), compare the
    :class:`~hdl.fp32_compare.Fp32Compare` of the lane, and ``acc`` the lane's accumulator: a
    REDUCE starts it at +0 (ADD), −inf (MAX) or +inf (MIN), each beat's result but the last
    replaces it, and only the last beat's goes to the SRU (one output beat per command).

    Streams:

    * ``cmd`` (:func:`activation_command_layout`): taken when the previous command has taken
      its last beat. A command with a reserved ``func``, ``mode`` or ``alu`` (a REDUCE other
      than ADD, MAX, MIN), a ``dtype`` the SRU was not built for, or ``count`` = 0 is taken and
      dropped without taking beats, and sets the sticky ``error``.
    * ``i`` (:func:`activation_beat_layout`): beats of ``lanes`` fp32 values ``a`` (and ``b``);
      ``o``: the SRU's output beats (results zero-extended to the SRU's lane width, ``invalid``
      never set for a legal command); ``seed`` / ``seeding``: the SRU's (``SET_SEED``; beats
      wait for the SRU while it seeds: in the queue, or at ``i``).

    Timing: ``latency = glue_stages + mul_stages + add_stages + sru_stages`` cycles from ``i``
    to ``o`` (20 with the defaults); one beat per cycle while the streams allow, commands back
    to back (the next one is taken with the last beat of the current one); full
    back-pressure: with ``glue_stages`` >= 2 a queue of ``glue_stages + mul_stages +
    add_stages + 1`` entries waits beside the register before the SRU and ``i`` stops taking
    beats while ``o`` is stalled (those in flight wait in the queue), below 2 the whole
    pipeline holds while ``o`` is stalled. A REDUCE takes a beat only once the one before it
    has left the adder: one beat per :attr:`reduce_step` cycles (``mul_stages + add_stages +
    1`` plus the glue registers before the adder's output: 2 of the default 3). A seed on
    ``seed`` is taken only when the engine is not ``busy``, so beats taken before it draw
    from the old stream, as in program order.

    Reset drops the command in progress (its remaining beats are not expected) and every beat
    in flight (none comes out), clears ``error`` and ``busy``; the SRU then seeds itself with 0.

    Parameters
    ----------
    lanes : int
        N, the values per beat, 1 to 256.
    glue_stages : int
        Registers in the logic around the arithmetic units, 0 to 3 (default 3): after the
        comparison (x and m in the multipliers, their ``operand_register``), then also before
        the SRU (after the relu; a queue beside it), then also after the operands' selection
        (m, c and the comparison's operands).
    mul_stages : int
        The multipliers' pipeline depth, 0 to :data:`~hdl.fp32_mul.FP32_MUL_MAX_STAGES` (7;
        default 7).
    add_stages : int
        The adders' pipeline depth, 0 to :data:`~hdl.fp32_add.FP32_ADD_MAX_STAGES` (7;
        default 6: the sum leaves a register, and the normalising shift and the rounding have
        a cycle each; at 5 the two together were the core's critical path).
    sru_stages : int
        The SRU's pipeline depth, 0 to :data:`~hdl.sru.SRU_MAX_STAGES` (4; default
        :data:`~hdl.sru.SRU_DEFAULT_STAGES`).
    random_bits : int
        r, the SRU's random bits per SR decision, 1 to :data:`~hdl.sru.SRU_MAX_RANDOM_BITS`.
    targets : collection of :class:`~hdl.formats.Dtype` or names
        The SRU's dtypes (default: all five).

    Raises
    ------
    TypeError
        If ``lanes``, ``glue_stages``, ``mul_stages``, ``add_stages``, ``sru_stages`` or
        ``random_bits`` is not an integer; if ``targets`` is not a collection.
    ValueError
        If one of them is out of range; if ``targets`` is empty or names an unknown dtype.
    """

    def __init__(self, *, lanes: int, glue_stages: int = 3, mul_stages: int = 7,
                 add_stages: int = 6, sru_stages: int = SRU_DEFAULT_STAGES,
                 random_bits: int = 16, targets=tuple(Dtype)):
        self.lanes = check_int("lanes", lanes, lo=1, hi=256)
        self.glue_stages = check_int("glue_stages", glue_stages, lo=0, hi=3)
        self.mul_stages = check_int("mul_stages", mul_stages, lo=0, hi=FP32_MUL_MAX_STAGES)
        self.add_stages = check_int("add_stages", add_stages, lo=0, hi=FP32_ADD_MAX_STAGES)
        self.sru_stages = check_int("sru_stages", sru_stages, lo=0, hi=SRU_MAX_STAGES)
        self.random_bits = check_int("random_bits", random_bits, lo=1, hi=SRU_MAX_RANDOM_BITS)
        self.targets = parse_dtypes(targets, param="targets")
        self.latency = glue_stages + mul_stages + add_stages + sru_stages
        #: A REDUCE takes a beat every ``reduce_step`` cycles (when its beat before has left
        #: the adder).
        self.reduce_step = (glue_stages - (glue_stages >= 2)) + mul_stages + add_stages + 1
        self._sru = StochasticRounder(lanes=lanes, random_bits=random_bits, stages=sru_stages,
                                      targets=self.targets)
        _, o_layout = sru_layouts(lanes, self.targets)
        super().__init__({
            "cmd": In(stream.Signature(activation_command_layout(lanes))),
            "i": In(stream.Signature(activation_beat_layout(lanes))),
            "o": Out(stream.Signature(o_layout)),
            "seed": In(stream.Signature(64)),
            "seeding": Out(1),
            "busy": Out(1),
            "error": Out(1),
        })

    def elaborate(self, platform):
        # Design note. The glue registers, multipliers, adders and the relu form one
        # pipeline of glue_stages + mul_stages + add_stages registers with a valid bit per
        # stage. With glue_stages >= 2 the last of them, before the SRU, has a queue beside it
        # of one entry more than the pipeline's depth: the pipeline never stalls (no enable fans out
        # to its thousands of flip-flops, the engine's critical path at 82 MHz), and the
        # intake takes a beat only while the queue would have room for every beat bound for
        # the SRU (`owed`), so the SRU's back-pressure stops the intake, not the pipeline.
        # Below that the pipeline advances (`en`) unless its last stage holds a beat the SRU
        # cannot take, so the SRU's back-pressure holds everything. Each beat carries its
        # command's settings (and its per-lane addend c) down the pipeline, so the next
        # command can start while the last one's beats are still in flight. A REDUCE's beats
        # before its last never reach the SRU: they leave the adder into the accumulator,
        # and the next beat waits until the pipeline is empty (it reads the accumulator at
        # the intake).
        m = Module()
        N, ms, ad = self.lanes, self.mul_stages, self.add_stages
        m.submodules.sru = sru = self._sru
        wiring.connect(m, sru.o, wiring.flipped(self.o))
        m.d.comb += self.seeding.eq(sru.seeding)

        cmd = self.cmd.payload
        cur = Signal(activation_command_layout(N))  # the command taking beats
        left = Signal(COUNT_BITS)  # beats it still takes
        # ... whether that is not 0, and whether it is 1: registers updated beside `left`, so
        # that no compare of `left` sits in the intake's handshake (ECP5 timing)
        active, last = Signal(), Signal()
        error = Signal()
        m.d.comb += self.error.eq(error)

        built = Signal()
        with m.Switch(cmd.dtype):
            for d in self.targets:
                with m.Case(d):
                    m.d.comb += built.eq(1)
        alu_ok = Mux(cmd.kind == CommandKind.REDUCE,
                     (cmd.alu == AluOp.ADD) | (cmd.alu == AluOp.MAX) | (cmd.alu == AluOp.MIN),
                     cmd.alu.as_value() <= AluOp.GREATER.value)
        legal = (built & (cmd.func.as_value() <= 1) & (cmd.mode.as_value() <= 2)
                 & ((cmd.kind == CommandKind.ACTIVATE) | alu_ok) & (cmd.count != 0))

        # Pipeline advance and intake.
        # Glue registers: after the comparison (x), before the SRU, after the selection.
        cut_x, cut_post, cut_sel = (int(self.glue_stages >= k) for k in (1, 2, 3))
        depth = cut_sel + cut_x + ms + ad + cut_post
        en = Signal()
        take = Signal()
        v_end = Signal()  # the pipeline's last stage holds a beat for the SRU
        in_pipe = Signal(range(depth + 2))  # beats before the adder's output
        # Registers beside `in_pipe`, `owed` and `cur`, so that the intake's `ready` is one
        # LUT of registers (it reaches the feeder's state: a timing path): in_pipe is 0 / 1,
        # owed is full, the command is a REDUCE.
        pipe_empty, pipe_one, owed_full = Signal(init=1), Signal(), Signal()
        reduce = Signal()
        intake_ok = active & (~reduce | pipe_empty)
        # With the register before the SRU (cut_post) the pipeline never stalls: a queue
        # beside that register holds the beats it cannot take, and a beat is taken only while
        # the queue has room for it and for every beat bound for the SRU before it (`owed`).
        queue_depth = depth + 1
        owed = Signal(range(queue_depth + 1))
        if depth == 0:
            # Combinational: the beat goes straight to the SRU (valid never waits for ready),
            # unless it is a REDUCE's beat before its last (it goes to the accumulator).
            to_sru_now = ~reduce | last
            m.d.comb += self.i.ready.eq(intake_ok & (sru.i.ready | ~to_sru_now))
        elif cut_post:
            m.d.comb += [en.eq(1), self.i.ready.eq(intake_ok & ~owed_full)]
        else:
            m.d.comb += [en.eq(~v_end | sru.i.ready), self.i.ready.eq(intake_ok & en)]
        m.d.comb += take.eq(self.i.valid & self.i.ready)
        # The accumulator: a REDUCE's first beat reads its start (`fresh`: none taken yet),
        # the others what the beat before left in `acc` (not written as the command is taken:
        # its enable would hang on the take).
        acc = Signal(data.ArrayLayout(32, N))
        fresh = Signal()
        with m.If(take):
            m.d.sync += [left.eq(left - 1), active.eq(left != 1), last.eq(left == 2),
                         fresh.eq(0)]
        start = Mux(cur.alu == AluOp.MAX, _NEG_INF, Mux(cur.alu == AluOp.MIN, _POS_INF, 0))
        acc_now = [Mux(fresh, start, acc[j]) for j in range(N)]

        # Commands: the next one once the current one has taken its last beat.
        m.d.comb += self.cmd.ready.eq(~active | (take & last))
        with m.If(self.cmd.valid & self.cmd.ready):
            with m.If(legal):  # (a legal count is not 0)
                m.d.sync += [cur.eq(cmd), left.eq(cmd.count), active.eq(1),
                             last.eq(cmd.count == 1), fresh.eq(1),
                             reduce.eq(cmd.kind == CommandKind.REDUCE)]
            with m.Else():
                m.d.sync += error.eq(1)

        # The beat's settings travel beside it: relu or not, the cast, and whether it leaves
        # into the accumulator (a REDUCE's beat) and to the SRU (all but a REDUCE's early ones).
        tag_layout = data.StructLayout({"valid": 1, "relu": 1, "dtype": Dtype, "mode": Rounding,
                                        "saturate": 1, "to_acc": 1, "to_sru": 1})
        tag = Signal(tag_layout)
        is_act = cur.kind == CommandKind.ACTIVATE
        m.d.comb += [tag.valid.eq(self.i.valid & intake_ok if depth == 0 else take),
                     tag.relu.eq(is_act & (cur.func == ActivationFunc.RELU)),
                     tag.dtype.eq(cur.dtype), tag.mode.eq(cur.mode),
                     tag.saturate.eq(cur.saturate), tag.to_acc.eq(reduce & ~last),
                     tag.to_sru.eq(~reduce | last)]
        tag_mul = delay(m, tag, cut_sel + cut_x, name="tag_in", en=en)
        tag_add = delay(m, tag_mul, ms, name="tag_mul", en=en)
        tag_out = delay(m, tag_add, ad, name="tag_add", en=en)
        m.d.comb += v_end.eq(tag_out.valid & tag_out.to_sru)
        if depth:
            leaves = tag_out.valid & en
            m.d.sync += in_pipe.eq(in_pipe + take - leaves)
            with m.If(take & ~leaves):
                m.d.sync += [pipe_empty.eq(0), pipe_one.eq(pipe_empty)]
            with m.Elif(leaves & ~take):
                m.d.sync += [pipe_empty.eq(pipe_one), pipe_one.eq(in_pipe == 2)]

        # x·m + c per lane, the operands picked by the command (the table above): at the
        # intake, m, c and the comparison's operands (registered if glue_stages = 3); then the
        # comparison and x (registered if glue_stages >= 1).
        sel = Signal(data.StructLayout({"lanes": data.ArrayLayout(_SELECT_LANE, N),
                                        "x": _XSource}))
        op, rev = cur.alu, cur.reverse
        tensor = cur.kind == CommandKind.TENSOR_TENSOR
        with m.If(~is_act & (op == AluOp.MAX)):
            m.d.comb += sel.x.eq(_XSource.MAX)
        with m.Elif(~is_act & (op == AluOp.MIN)):
            m.d.comb += sel.x.eq(_XSource.MIN)
        with m.Elif(~is_act & (op == AluOp.GREATER)):
            m.d.comb += sel.x.eq(_XSource.GREATER)
        for j in range(N):
            a, lane = self.i.payload.a[j], sel.lanes[j]
            big_b = Mux(tensor, self.i.payload.b[j], cur.scale)
            m.d.comb += [lane.a.eq(a), lane.cmp_a.eq(Mux(reduce, acc_now[j], Mux(rev, big_b, a))),
                         lane.cmp_b.eq(Mux(reduce, a, Mux(rev, a, big_b))),
                         lane.m.eq(_ONE), lane.c.eq(_NEG_ZERO)]
            with m.If(is_act):
                m.d.comb += [lane.m.eq(cur.scale), lane.c.eq(cur.bias[j])]
            with m.Elif(op == AluOp.ADD):
                m.d.comb += lane.c.eq(Mux(reduce, acc_now[j], big_b))
            with m.Elif(op == AluOp.SUBTRACT):
                m.d.comb += [lane.m.eq(Mux(rev, _MINUS_ONE, _ONE)),
                             lane.c.eq(Mux(rev, big_b, big_b ^ _NEG_ZERO))]
            with m.Elif(op == AluOp.MULTIPLY):
                m.d.comb += lane.m.eq(big_b)
        sel_q = delay(m, sel, cut_sel, name="select", en=en)
        operands = Signal(data.ArrayLayout(_OPERAND_LANE, N))
        for j in range(N):
            lane, opnd = sel_q.lanes[j], operands[j]
            cmp = m.submodules[f"cmp{j}"] = Fp32Compare()
            # (x is a signal of its own: a Switch driving part of `operands` would leave the
            # rest in an `always @*` block a 4-state simulator may never run)
            x = Signal(32, name=f"x{j}")
            m.d.comb += [cmp.a.eq(lane.cmp_a), cmp.b.eq(lane.cmp_b),
                         opnd.x.eq(x), opnd.m.eq(lane.m), opnd.c.eq(lane.c)]
            with m.Switch(sel_q.x):
                with m.Case(_XSource.A):
                    m.d.comb += x.eq(lane.a)
                with m.Case(_XSource.MAX):
                    m.d.comb += x.eq(cmp.max)
                with m.Case(_XSource.MIN):
                    m.d.comb += x.eq(cmp.min)
                with m.Case(_XSource.GREATER):
                    m.d.comb += x.eq(cmp.greater)
        # x and m go to the multipliers, whose operand register is this register of theirs
        # (with a copy beside their DSP blocks: Fp32Multiplier's operand_register); c waits
        # beside them.
        c_add = delay(m, Cat(*(operands[j].c for j in range(N))), cut_x + ms, name="c", en=en)
        c_add = data.View(data.ArrayLayout(32, N), c_add)
        # A REDUCE's beat but its last replaces the accumulator as it leaves the adder (the last
        # goes to the SRU only: the next REDUCE may have set the accumulator's start by then).
        acc_write = (take if depth == 0 else tag_out.valid & en) & tag_out.to_acc
        ys = []  # each lane's result, after the relu
        reg = bool(cut_x)
        for j in range(N):
            mul = shared(Fp32Multiplier(stages=ms, operand_register=reg),
                         "hdl.fp32_mul:Fp32Multiplier", {"stages": ms, "operand_register": reg},
                         clocked=ms > 0 or reg)
            add = shared(Fp32Adder(stages=ad), "hdl.fp32_add:Fp32Adder", {"stages": ad},
                         clocked=ad > 0)
            m.submodules[f"mul{j}"] = mul
            m.submodules[f"add{j}"] = add
            m.d.comb += [mul.en.eq(en), mul.a.eq(operands[j].x), mul.b.eq(operands[j].m),
                         add.en.eq(en), add.a.eq(mul.result), add.b.eq(c_add[j])]
            y = add.result
            relu = Mux(y[31] & ~((y[23:31] == 0xFF) & (y[:23] != 0)), 0, y)
            ys.append(Mux(tag_out.relu, relu, y))
            with m.If(acc_write):
                m.d.sync += acc[j].eq(y)
        beat = Signal.like(sru.i.payload, name="sru_beat")  # the SRU's beat, as it leaves
        m.d.comb += [beat.data.eq(Cat(*ys)), beat.dtype.eq(tag_out.dtype),
                     beat.mode.eq(tag_out.mode), beat.saturate.eq(tag_out.saturate)]
        if cut_post:  # (glue_stages >= 2) the register before the SRU, and the queue
            # The register takes the queue's oldest beat, or the beat leaving the pipeline
            # when the queue is empty; the beat waits in the queue when the register is held.
            queue = m.submodules.queue = SyncFIFO(width=len(beat.as_value()), depth=queue_depth)
            free = ~sru.i.valid | sru.i.ready  # the register takes a beat this cycle
            direct = free & ~queue.r_rdy
            m.d.comb += [queue.w_en.eq(v_end & ~direct), queue.w_data.eq(beat),
                         queue.r_en.eq(free)]
            with m.If(free):
                m.d.sync += [sru.i.valid.eq(queue.r_rdy | v_end),
                             sru.i.payload.eq(Mux(queue.r_rdy, queue.r_data, beat))]
            owes, pays = take & tag.to_sru, sru.i.valid & sru.i.ready
            m.d.sync += owed.eq(owed + owes - pays)
            with m.If(owes & ~pays):
                m.d.sync += owed_full.eq(owed == queue_depth - 1)
            with m.Elif(pays & ~owes):
                m.d.sync += owed_full.eq(0)
        else:
            m.d.comb += [sru.i.valid.eq(v_end), sru.i.payload.eq(beat)]

        # Busy: a command is taking beats or a beat bound for the SRU is in the pipeline or
        # the SRU (a REDUCE's earlier beats are in the pipeline only while it takes beats).
        in_flight = Signal(range(self.latency + 4))
        out_taken = self.o.valid & self.o.ready
        m.d.sync += in_flight.eq(in_flight + (take & tag.to_sru) - out_taken)
        m.d.comb += self.busy.eq(active | (in_flight != 0))

        # SET_SEED orders after the beats already taken: the seed waits until none is left,
        # so every beat draws from the stream the program order gives it (golden.iss).
        m.d.comb += [sru.seed.payload.eq(self.seed.payload),
                     sru.seed.valid.eq(self.seed.valid & ~self.busy),
                     self.seed.ready.eq(sru.seed.ready & ~self.busy)]
        return m
