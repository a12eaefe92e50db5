"""cocotb testbench: ``hdl.activation.ActivationEngine`` against ``golden.activation`` and
``golden.vector``.

The streams are driven by :mod:`sim.tb.streams`: sources on ``cmd``, ``i`` and ``seed``, a sink
on ``o``. ``cmd`` and ``i`` get random gaps and ``o`` random back-pressure (``NCLITE_GAPS``,
default 0.25); the sink checks that ``o`` holds valid and payload while stalled.

Tests (selected by the runner's ``testcase``):

* ``random_commands`` - ``NCLITE_COMMANDS`` (default 60) commands: identity and relu, every
  built dtype, RNE / RTZ / SR, saturation on and off, scales and per-lane biases with
  special values (±0, subnormals, ±inf, NaN, max), 1 to 24 beats of data with special
  values each; illegal commands (reserved func or mode, a dtype not built, count 0) among
  them must be dropped without taking beats and set ``error``. A reseed in the middle,
  offered while the last beats are still in the pipeline. Every output beat is compared
  bit for bit with the golden model.
* ``reset_midway`` - three times: a non-zero seed, an illegal command (``error`` set), then
  commands with gaps and back-pressure, interrupted by a reset of 1..4 cycles after a random
  number of input beats (a command half-way through its beats, results in the pipeline and
  held on ``o``); after it ``o`` shows nothing, ``error`` and ``busy`` are clear, the SRU
  seeds itself with 0, and fresh commands match a golden model from seed 0.
* ``vector_commands`` - ``NCLITE_COMMANDS`` commands, three in four vector ones
  (tensor-tensor, tensor-scalar on either side, reductions; every operation, operands with
  special values and signed zeros) among ACTIVATEs, after a reseed, with illegal ones (a
  reserved operation, reductions that subtract, multiply or compare) that must set ``error``;
  every output beat bit-exact with ``golden.vector`` cast by the same SR draws.
* ``throughput`` - one 300-beat command with no gaps: 300 beats in 300 + latency + 2 cycles;
  a 20-beat reduction: one beat per ``reduce_step`` cycles.
"""

from __future__ import annotations

import os

import cocotb
import numpy as np

from golden.activation import ActivationModel, pre_cast
from golden.rounding import DEFAULT_SATURATE
from golden.vector import alu, reduce_free
from hdl.activation import ActivationEngine, CommandKind, activation_command_layout
from hdl.formats import Dtype, Rounding
from hdl.sru import sru_layouts
from hdl.xorwow import seeding_cycles
from sim.tb import streams, tbutil, vectors
from sim.tb.streams import StreamSink, StreamSource

WATCHDOG_CYCLES = 20_000  # cycles without any transfer before the test calls it a hang
# (checked once per window of that many cycles: a hang shows after 1 to 2 windows)


class Command:
    """One command and its input beats ``x`` (lists of lane values): an ACTIVATE (``kind`` 0),
    or a vector command (``kind``: 1 tensor-tensor with the second operand's beats ``b``, 2
    tensor-scalar with ``scale`` the scalar, 3 a reduction, one output beat)."""

    __slots__ = ("func", "dtype", "mode", "saturate", "scale", "bias", "x", "legal", "kind",
                 "alu", "reverse", "b")

    def __init__(self, func, dtype, mode, saturate, scale, bias, x, legal=True, *, kind=0,
                 alu=0, reverse=0, b=None):
        self.func, self.dtype, self.mode, self.saturate = func, dtype, mode, saturate
        self.scale, self.bias, self.x, self.legal = scale, bias, x, legal
        self.kind, self.alu, self.reverse, self.b = kind, alu, reverse, b

    @property
    def outputs(self) -> int:
        """Its output beats."""
        return 1 if self.kind == CommandKind.REDUCE.value else len(self.x)

    def describe(self) -> str:
        if self.kind:
            return (f"{CommandKind(self.kind).name} alu={self.alu} reverse={self.reverse} "
                    f"dtype={self.dtype} mode={self.mode} sat={self.saturate} "
                    f"scalar=0x{self.scale:08x}")
        return (f"func={self.func} dtype={self.dtype} mode={self.mode} sat={self.saturate} "
                f"scale=0x{self.scale:08x} bias={tbutil.hexs(self.bias)}")

    def pre_cast(self, lanes: int) -> np.ndarray:
        """The fp32 results before the cast (golden), one row per output beat."""
        x = np.array(self.x, dtype=np.uint32).reshape(-1, lanes)
        if self.kind == CommandKind.ACTIVATE.value:
            return pre_cast(x, self.func, self.scale, np.array(self.bias, np.uint32))
        if self.kind == CommandKind.TENSOR_TENSOR.value:
            return alu(self.alu, x, np.array(self.b, dtype=np.uint32).reshape(-1, lanes))
        if self.kind == CommandKind.TENSOR_SCALAR.value:
            s = np.uint32(self.scale)
            return alu(self.alu, s, x) if self.reverse else alu(self.alu, x, s)
        return reduce_free(self.alu, x.T)[None, :]


class ActivationTB:
    """Drives an ``ActivationEngine`` through :mod:`sim.tb.streams` drivers. ``gaps``: the
    probability of a valid gap on ``cmd`` and ``i`` and of back-pressure on ``o``, per cycle
    (default ``NCLITE_GAPS``, 0.25; 0: full rate)."""

    def __init__(self, dut, gaps: float | None = None):
        self.dut = dut
        p = tbutil.params()
        self.lanes = p["lanes"]
        engine = ActivationEngine(**p)
        self.r, self.latency, self.reduce_step = (engine.random_bits, engine.latency,
                                                  engine.reduce_step)
        names = p.get("targets", [d.golden_name for d in Dtype])
        self.built = [d for d in Dtype if d.golden_name in names]
        self.layout = activation_command_layout(self.lanes)
        _, o_layout = sru_layouts(self.lanes, self.built)
        self.out_bits = o_layout["data"].width // self.lanes
        self.inv_off = o_layout["invalid"].offset
        self.gaps = float(os.environ.get("NCLITE_GAPS", "0.25")) if gaps is None else gaps

        def pause(salt):
            return streams.pauses(tbutil.rng(0xAC7 + salt), self.gaps) if self.gaps else None

        self.cmd = StreamSource(dut, "cmd", pause=pause(0))
        self.i = StreamSource(dut, "i", pause=pause(1))
        self.seed = StreamSource(dut, "seed")
        self.o = StreamSink(dut, "o", pause=pause(2))
        self.cycles = 0
        self.last_seed = 0

    async def start(self):
        await tbutil.start_clock(self.dut)
        await tbutil.reset(self.dut)
        await self.wait_seeded()

    def clear(self):
        """Drop queued commands, beats and seeds, lower ``valid`` (for a reset in the
        middle)."""
        for driver in (self.cmd, self.i, self.seed, self.o):
            driver.clear()
        self.i.on_sent = None  # an interrupted run's on_sent

    async def wait_seeded(self):
        await streams.wait_until(self.dut.seeding, 0, clock=self.dut.clk,
                                 timeout_cycles=seeding_cycles(self.lanes) + 4,
                                 what="the SRU's seeding (never finished)")

    async def reseed(self, seed: int):
        """Offer ``seed`` (taken once the engine is not busy), then wait for the seeding."""
        self.last_seed = seed
        self.seed.send(seed)
        await self.seed.wait()
        await self.wait_seeded()

    def pack_cmd(self, c: Command) -> int:
        """The command's bits (by field offsets: reserved codes included)."""
        off = {name: self.layout[name].offset for name in
               ("func", "dtype", "mode", "saturate", "scale", "bias", "count", "kind", "alu",
                "reverse")}
        word = (c.func << off["func"] | c.dtype << off["dtype"] | c.mode << off["mode"]
                | int(c.saturate) << off["saturate"] | c.scale << off["scale"]
                | len(c.x) << off["count"] | c.kind << off["kind"] | c.alu << off["alu"]
                | c.reverse << off["reverse"])
        for j, b in enumerate(c.bias):
            word |= int(b) << (off["bias"] + 32 * j)
        return word

    def pack_beat(self, row, b_row=None) -> int:
        """A beat: lane values ``row`` (operand a), and ``b_row`` (operand b) if given."""
        word = 0
        for lane, v in enumerate(row):
            word |= int(v) << (32 * lane)
        for lane, v in enumerate(b_row or ()):
            word |= int(v) << (32 * (self.lanes + lane))
        return word

    async def run(self, cmds: list[Command], *, on_sent=None) -> list[list[int]]:
        """Send the commands and their beats (on ``cmd`` and ``i``, independently); return the
        output beats (lists of lane values), checking that none is ``invalid``. ``on_sent()``
        is called once when the last beat has been taken, at its clock edge (while results
        are still in the pipeline). Adds the cycles from the call to the last transfer to
        :attr:`cycles`."""
        start = streams.sim_cycles()
        beats = [self.pack_beat(row, c.b[k] if c.b is not None else None)
                 for c in cmds if c.legal for k, row in enumerate(c.x)]
        outputs = sum(c.outputs for c in cmds if c.legal)
        sink = self.o
        target = sink.count + outputs - len(sink.queue)
        cmd0, beat0 = self.cmd.count, self.i.count
        if on_sent is not None and beats:
            last = beat0 + len(beats)
            on_sent_before = self.i.on_sent

            def sent(_payload):
                if self.i.count == last:
                    self.i.on_sent = on_sent_before
                    on_sent()

            self.i.on_sent = sent
        self.cmd.send(self.pack_cmd(c) for c in cmds)
        self.i.send(beats)

        async def done():
            await self.cmd.wait()
            await self.i.wait()
            await sink.wait_count(target)

        await streams.watchdog(
            done, lambda: (self.cmd.count, self.i.count, sink.count),
            quiet_cycles=WATCHDOG_CYCLES,
            what=lambda: (f"activation engine hung: {outputs - (target - sink.count)} of "
                          f"{outputs} beats out, command {self.cmd.count - cmd0} of "
                          f"{len(cmds)}, beat {self.i.count - beat0} of {len(beats)} in "
                          f"(seed {tbutil.seed()})"))
        self.cycles += streams.sim_cycles() - start
        mask = (1 << self.out_bits) - 1
        out: list[list[int]] = []
        for k in range(outputs):
            word = sink.queue.popleft()
            assert not (word >> self.inv_off) & 1, (
                f"invalid beat from a legal command (output beat {k} of {outputs}, seed "
                f"{tbutil.seed()})")
            out.append([(word >> (self.out_bits * j)) & mask for j in range(self.lanes)])
        return out

    def check(self, model: ActivationModel, cmds: list[Command], out: list[list[int]]):
        got = iter(out)
        errors, total = [], 0
        for c in cmds:
            if not c.legal:
                continue
            y = c.pre_cast(self.lanes)
            want = model.sru.run(y, [Dtype(c.dtype).golden_name] * len(y),
                                 [Rounding(c.mode).golden_name] * len(y), [c.saturate] * len(y))
            rows = ([f"x={tbutil.hexs(row)}" for row in c.x] if c.outputs == len(c.x)
                    else [f"{len(c.x)} beats from x={tbutil.hexs(c.x[0])}"])
            for row, w in zip(rows, want, strict=True):
                g = next(got)
                total += 1
                if g != [int(v) for v in w] and len(errors) < 8:
                    errors.append(f"{c.describe()} {row}: RTL {tbutil.hexs(g)} "
                                  f"golden {tbutil.hexs(w)}")
        assert not errors, (f"beats differ from golden (seed {tbutil.seed()}, "
                            f"{tbutil.simulator()}):\n  " + "\n  ".join(errors))
        return total


def _fp32_specials() -> np.ndarray:
    return vectors.special_bits("fp32").astype(np.uint32)


def random_command(tb: ActivationTB, rng: np.random.Generator) -> Command:
    lanes = tb.lanes
    dtype = tb.built[int(rng.integers(0, len(tb.built)))]
    mode = int(rng.integers(0, 3))
    specials = _fp32_specials()
    scale = int(rng.choice(specials)) if rng.random() < 0.15 else (
        int(np.float32(rng.choice([1.0, -1.0, 0.5, 3.0])) .view(np.uint32))
        if rng.random() < 0.4 else int(vectors.operands("fp32", rng, (1,), 0.0)[0]))
    bias = vectors.operands("fp32", rng, (lanes,), 0.1).astype(np.uint32)
    if rng.random() < 0.4:  # +0 or -0 biases: relu(-0) and signed zeros through the add
        bias[:] = rng.choice([0, 0x80000000])
    count = int(rng.integers(1, 25))
    x = vectors.operands("fp32", rng, (count, lanes), 0.05).astype(np.uint32)
    if rng.random() < 0.5:  # values near the target's grid: ties and rounding
        x = vectors.cast_inputs(dtype.golden_name if dtype != Dtype.FP32 else "bf16", rng,
                                count * lanes).reshape(count, lanes)
    zeros = rng.random((count, lanes)) < 0.1  # signed zeros: -0 * s + -0 = -0
    x = np.where(zeros, rng.choice(np.array([0, 0x80000000], np.uint32), x.shape), x)
    sat = bool(rng.random() < 0.5) if rng.random() < 0.5 else \
        DEFAULT_SATURATE.get(dtype.golden_name, False)
    return Command(int(rng.integers(0, 2)), dtype.value, mode, sat, scale,
                   [int(v) for v in bias], [[int(v) for v in row] for row in x])


def illegal_commands(tb: ActivationTB, rng: np.random.Generator) -> list[Command]:
    c = random_command(tb, rng)
    bad = [Command(2 + int(rng.integers(0, 2)), c.dtype, c.mode, False, c.scale, c.bias, c.x),
           Command(c.func, c.dtype, 3, False, c.scale, c.bias, c.x),
           Command(c.func, c.dtype, c.mode, False, c.scale, c.bias, [])]
    unbuilt = [d for d in range(8) if d not in {b.value for b in tb.built}]
    bad.append(Command(c.func, int(rng.choice(unbuilt)), c.mode, False, c.scale, c.bias, c.x))
    for b in bad:
        b.legal = False
    return bad


def random_vector_command(tb: ActivationTB, rng: np.random.Generator) -> Command:
    """A TENSOR_TENSOR, TENSOR_SCALAR (either side) or REDUCE of random operands with
    special values and signed zeros (NaN, ±inf, subnormals, max, ±0 against ±0)."""
    c = random_command(tb, rng)  # dtype, mode, saturation, scalar
    kind = int(rng.integers(1, 4))
    reduce = kind == CommandKind.REDUCE.value
    op = int(rng.choice([0, 3, 4])) if reduce else int(rng.integers(0, 6))
    count = int(rng.integers(1, 13 if reduce else 25))

    def operands():
        v = vectors.operands("fp32", rng, (count, tb.lanes), 0.1).astype(np.uint32)
        zeros = rng.random(v.shape) < 0.15
        v = np.where(zeros, rng.choice(np.array([0, 0x80000000], np.uint32), v.shape), v)
        return [[int(e) for e in row] for row in v]

    return Command(0, c.dtype, c.mode, c.saturate, c.scale, [0] * tb.lanes, operands(),
                   kind=kind, alu=op, reverse=int(kind == 2 and rng.random() < 0.5),
                   b=operands() if kind == CommandKind.TENSOR_TENSOR.value else None)


def illegal_vector_commands(tb: ActivationTB, rng: np.random.Generator) -> list[Command]:
    """A reserved operation, and reductions that subtract, multiply, compare."""
    c = random_vector_command(tb, rng)
    bad = [Command(0, c.dtype, c.mode, False, c.scale, c.bias, c.x, kind=1,
                   alu=6 + int(rng.integers(0, 2)), b=c.x)]
    bad += [Command(0, c.dtype, c.mode, False, c.scale, c.bias, c.x, kind=3, alu=op)
            for op in (1, 2, 5)]
    for b in bad:
        b.legal = False
    return bad


# cocotb timeouts, in simulated time: about 40 times what the runs need.
_COMMANDS = int(os.environ.get("NCLITE_COMMANDS", "60"))


@cocotb.test(timeout_time=max(_COMMANDS, 10) * 1000 * tbutil.CLOCK_PERIOD_NS, timeout_unit="ns")
async def random_commands(dut):
    tb = ActivationTB(dut)
    await tb.start()
    rng = tbutil.rng(1)
    n = _COMMANDS
    model = ActivationModel(tb.lanes, random_bits=tb.r)
    first = [random_command(tb, rng) for _ in range(n // 2)]
    first[len(first) // 2:len(first) // 2] = illegal_commands(tb, rng)
    # The seed is offered as soon as the last beat is taken, while results are still in the
    # pipeline: the engine must hold it until they are out (they draw from the old stream).
    seed = int(rng.integers(1, 1 << 63))
    reseeding = []
    out = await tb.run(first, on_sent=lambda: reseeding.append(
        cocotb.start_soon(tb.reseed(seed))))
    total = tb.check(model, first, out)
    assert int(dut.error.value) == 1, "illegal commands did not set error"
    assert reseeding, "the reseed was never started"
    await reseeding[0]
    model.reseed(seed)
    second = [random_command(tb, rng) for _ in range(n - n // 2)]
    total += tb.check(model, second, await tb.run(second))
    dut._log.info("activation: %d commands, %d beats bit-exact, seed %d", n, total,
                  tbutil.seed())


@cocotb.test(timeout_time=max(_COMMANDS, 10) * 1000 * tbutil.CLOCK_PERIOD_NS, timeout_unit="ns")
async def vector_commands(dut):
    """Vector commands (tensor-tensor, tensor-scalar both ways, reductions) mixed with
    ACTIVATEs, gaps and back-pressure, illegal ones among them; every output bit-exact with
    golden.vector cast by the same SR draws."""
    tb = ActivationTB(dut)
    await tb.start()
    rng = tbutil.rng(4)
    await tb.reseed(int(rng.integers(1, 1 << 63)))
    model = ActivationModel(tb.lanes, random_bits=tb.r)
    model.reseed(tb.last_seed)
    cmds = [random_vector_command(tb, rng) if rng.random() < 0.75 else random_command(tb, rng)
            for _ in range(_COMMANDS)]
    cmds[len(cmds) // 2:len(cmds) // 2] = illegal_vector_commands(tb, rng)
    total = tb.check(model, cmds, await tb.run(cmds))
    assert int(dut.error.value) == 1, "illegal vector commands did not set error"
    kinds = {CommandKind(c.kind).name for c in cmds if c.legal}
    assert kinds == {k.name for k in CommandKind}, kinds
    dut._log.info("vector commands: %d commands, %d beats bit-exact, seed %d", len(cmds), total,
                  tbutil.seed())


@cocotb.test(timeout_time=1, timeout_unit="ms")
async def throughput(dut):
    tb = ActivationTB(dut, gaps=0.0)
    await tb.start()
    rng = tbutil.rng(2)
    c = random_command(tb, rng)
    c.x = vectors.operands("fp32", rng, (300, tb.lanes), 0.0).astype(np.uint32).tolist()
    start = tb.cycles
    out = await tb.run([c])
    # From the edge that takes the command (the one after the call, at full rate) to the edge
    # that takes the last result.
    cycles = tb.cycles - start - 1
    tb.check(ActivationModel(tb.lanes, random_bits=tb.r), [c], out)
    assert cycles <= 300 + tb.latency + 2, f"300 beats took {cycles} cycles"
    dut._log.info("throughput: 300 beats in %d cycles (latency %d)", cycles, tb.latency)
    # A reduction takes a beat once the one before it has left the adder.
    r = random_vector_command(tb, rng)
    r.kind, r.alu, r.b = CommandKind.REDUCE.value, 0, None
    r.x = vectors.operands("fp32", rng, (20, tb.lanes), 0.0).astype(np.uint32).tolist()
    start = tb.cycles
    out = await tb.run([r])
    cycles = tb.cycles - start - 1
    tb.check(ActivationModel(tb.lanes, random_bits=tb.r), [r], out)
    step = tb.reduce_step
    assert 20 * step <= cycles <= 20 * step + tb.latency + 2, \
        f"a 20-beat reduction took {cycles} cycles, want {20 * step} + up to the latency"
    dut._log.info("reduction: 20 beats in %d cycles (one per %d)", cycles, step)


@cocotb.test(timeout_time=2, timeout_unit="ms")
async def reset_midway(dut):
    """Reset in the middle of commands: nothing stale comes out, error cleared, seed 0 again."""
    tb = ActivationTB(dut)
    await tb.start()
    rng = tbutil.rng(3)
    for _ in range(3):
        await tb.reseed(int(rng.integers(1, 1 << 63)))
        cmds = illegal_commands(tb, rng)[:1] + [random_command(tb, rng) for _ in range(3)]
        total = sum(len(c.x) for c in cmds if c.legal)
        task = cocotb.start_soon(tb.run(cmds))
        seen = int(rng.integers(1, total))
        await tb.i.wait_count(tb.i.count + seen)  # returns at the edge taking beat `seen`
        assert not task.done()
        await tbutil.reset_midway(dut, int(rng.integers(1, 5)), tasks=[task], clear=[tb])
        what = f"after the reset after {seen} of {total} beats"
        await streams.expect_steady([dut.o__valid, dut.error, dut.busy, dut.i__ready], 0,
                                    cycles=2, what=what)
        await tb.wait_seeded()
        await streams.expect_steady([dut.o__valid, dut.error, dut.busy], 0,
                                    cycles=tb.latency + 3, what=f"{what} and the seeding")
        fresh = [random_command(tb, rng) for _ in range(3)]
        model = ActivationModel(tb.lanes, random_bits=tb.r)  # seed 0, as after reset
        tb.check(model, fresh, await tb.run(fresh))
        assert not dut.error.value, "error set by legal commands after the reset"
    dut._log.info("reset in the middle of commands: 3 rounds exact (seed %d)", tbutil.seed())
