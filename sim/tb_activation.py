"""cocotb testbench: ``hdl.activation.ActivationEngine`` against ``golden.activation``.

One coroutine drives the ``cmd`` and ``i`` streams and the back-pressure on ``o`` once per
cycle (inputs change on the falling edge, handshakes are read in the ReadOnly phase after
it). ``cmd`` and ``i`` get random gaps and ``o`` random back-pressure (``NCLITE_GAPS``,
default 0.25); a monitor checks that ``o`` holds valid and payload while stalled.

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
* ``throughput`` - one 300-beat command with no gaps: 300 beats in 300 + latency + 2 cycles.
"""

from __future__ import annotations

import os

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly, with_timeout

from golden.activation import ActivationModel
from golden.rounding import DEFAULT_SATURATE
from hdl.activation import activation_command_layout
from hdl.formats import Dtype, Rounding
from hdl.sru import sru_layouts
from hdl.xorwow import seeding_cycles
from sim import tbutil, vectors

WATCHDOG_CYCLES = 20_000


class Command:
    __slots__ = ("func", "dtype", "mode", "saturate", "scale", "bias", "x", "legal")

    def __init__(self, func, dtype, mode, saturate, scale, bias, x, legal=True):
        self.func, self.dtype, self.mode, self.saturate = func, dtype, mode, saturate
        self.scale, self.bias, self.x, self.legal = scale, bias, x, legal

    def describe(self) -> str:
        return (f"func={self.func} dtype={self.dtype} mode={self.mode} sat={self.saturate} "
                f"scale=0x{self.scale:08x} bias={tbutil.hexs(self.bias)}")


class ActivationTB:
    def __init__(self, dut, gaps: float | None = None):
        self.dut = dut
        p = tbutil.params()
        self.lanes = p["lanes"]
        self.r = p.get("random_bits", 16)
        self.latency = p.get("mul_stages", 2) + p.get("add_stages", 2) + p.get("sru_stages", 2)
        names = p.get("targets", [d.golden_name for d in Dtype])
        self.built = [d for d in Dtype if d.golden_name in names]
        self.layout = activation_command_layout(self.lanes)
        _, o_layout = sru_layouts(self.lanes, self.built)
        self.out_bits = o_layout["data"].width // self.lanes
        self.inv_off = o_layout["invalid"].offset
        self.gaps = float(os.environ.get("NCLITE_GAPS", "0.25")) if gaps is None else gaps
        self.rng = tbutil.rng(0xAC7)
        self.cycles = 0

    async def start(self):
        dut = self.dut
        dut.cmd__valid.value = 0
        dut.i__valid.value = 0
        dut.seed__valid.value = 0
        dut.o__ready.value = 0
        await tbutil.start_clock(dut)
        await tbutil.reset(dut)
        await self.wait_seeded()

    async def wait_seeded(self):
        for _ in range(seeding_cycles(self.lanes) + 4):
            await FallingEdge(self.dut.clk)
            await ReadOnly()
            if not self.dut.seeding.value:
                return
        raise AssertionError("the SRU never finished seeding")

    async def reseed(self, seed: int):
        dut = self.dut
        await FallingEdge(dut.clk)
        await tbutil.offer(dut, "seed", seed)
        await self.wait_seeded()

    def pack_cmd(self, c: Command) -> int:
        """The command's bits (by field offsets: reserved codes included)."""
        off = {name: self.layout[name].offset for name in
               ("func", "dtype", "mode", "saturate", "scale", "bias", "count")}
        word = (c.func << off["func"] | c.dtype << off["dtype"] | c.mode << off["mode"]
                | int(c.saturate) << off["saturate"] | c.scale << off["scale"]
                | len(c.x) << off["count"])
        for j, b in enumerate(c.bias):
            word |= int(b) << (off["bias"] + 32 * j)
        return word

    def pack_beat(self, row) -> int:
        word = 0
        for lane, v in enumerate(row):
            word |= int(v) << (32 * lane)
        return word

    async def run(self, cmds: list[Command], *, stalls: float | None = None,
                  on_sent=None) -> list[list[int]]:
        """Send the commands and their beats; return the output beats (lists of lane
        values), checking the output protocol. ``on_sent()`` is called once when the last
        beat has been taken (while results are still in the pipeline)."""
        dut, rng, gaps = self.dut, self.rng, self.gaps
        stalls = gaps if stalls is None else stalls
        beats = [self.pack_beat(row) for c in cmds if c.legal for row in c.x]
        expected = len(beats)
        cmd_words = [self.pack_cmd(c) for c in cmds]
        cpos = bpos = 0
        cmd_shown = beat_shown = False
        monitor = tbutil.StallMonitor("o")
        out: list[list[int]] = []
        quiet = 0
        mask = (1 << self.out_bits) - 1
        while len(out) < expected or cpos < len(cmds):
            await FallingEdge(dut.clk)
            self.cycles += 1
            if not cmd_shown:
                if cpos < len(cmds) and not (gaps and rng.random() < gaps):
                    dut.cmd__payload.value = cmd_words[cpos]
                    dut.cmd__valid.value = 1
                    cmd_shown = True
                else:
                    dut.cmd__valid.value = 0
            if not beat_shown:
                if bpos < len(beats) and not (gaps and rng.random() < gaps):
                    dut.i__payload.value = beats[bpos]
                    dut.i__valid.value = 1
                    beat_shown = True
                else:
                    dut.i__valid.value = 0
            ready = not (stalls and rng.random() < stalls)
            dut.o__ready.value = int(ready)
            await ReadOnly()
            progressed = False
            if cmd_shown and dut.cmd__ready.value:
                cpos += 1
                cmd_shown = False
                progressed = True
            if beat_shown and dut.i__ready.value:
                bpos += 1
                beat_shown = False
                progressed = True
                if bpos == len(beats) and on_sent is not None:
                    on_sent()
                    on_sent = None
            valid = bool(dut.o__valid.value)
            word = monitor.sample(valid, int(dut.o__payload.value) if valid else None, ready)
            if word is not None:
                assert not (word >> self.inv_off) & 1, "invalid beat from a legal command"
                out.append([(word >> (self.out_bits * k)) & mask for k in range(self.lanes)])
                progressed = True
            quiet = 0 if progressed else quiet + 1
            if quiet > WATCHDOG_CYCLES:
                raise AssertionError(f"activation engine hung: {len(out)} of {expected} beats "
                                     f"out, command {cpos} of {len(cmds)} (seed {tbutil.seed()})")
        await FallingEdge(dut.clk)
        dut.cmd__valid.value = 0
        dut.i__valid.value = 0
        return out

    def check(self, model: ActivationModel, cmds: list[Command], out: list[list[int]]):
        got = iter(out)
        errors, total = [], 0
        for c in cmds:
            if not c.legal:
                continue
            want = model.command(np.array(c.x, dtype=np.uint32), func=c.func,
                                 scale_bits=c.scale, bias_bits=np.array(c.bias, np.uint32),
                                 fmt=Dtype(c.dtype).golden_name,
                                 mode=Rounding(c.mode).golden_name, saturate=c.saturate)
            for row, w in zip(c.x, want, strict=True):
                g = next(got)
                total += 1
                if g != [int(v) for v in w] and len(errors) < 8:
                    errors.append(f"{c.describe()} x={tbutil.hexs(row)}: RTL {tbutil.hexs(g)} "
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


@cocotb.test(timeout_time=1, timeout_unit="ms")
async def throughput(dut):
    tb = ActivationTB(dut, gaps=0.0)
    await tb.start()
    rng = tbutil.rng(2)
    c = random_command(tb, rng)
    c.x = vectors.operands("fp32", rng, (300, tb.lanes), 0.0).astype(np.uint32).tolist()
    start = tb.cycles
    out = await tb.run([c], stalls=0.0)
    cycles = tb.cycles - start - 1
    tb.check(ActivationModel(tb.lanes, random_bits=tb.r), [c], out)
    assert cycles <= 300 + tb.latency + 2, f"300 beats took {cycles} cycles"


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
        target, seen = int(rng.integers(1, total)), 0
        while seen < target:  # input beats taken
            await FallingEdge(dut.clk)
            await ReadOnly()
            seen += int(dut.i__valid.value) & int(dut.i__ready.value)
        assert not task.done()
        await tbutil.reset_midway(dut, int(rng.integers(1, 5)), inputs=("cmd", "i", "seed"),
                                  tasks=[task], low=("o__ready",))
        dut.o__ready.value = 1
        await tbutil.expect_quiet(dut, ["o__valid", "error", "busy", "i__ready"], 2,
                                  f"after {seen} of {total} beats")
        await with_timeout(tb.wait_seeded(), 10, "us")
        await FallingEdge(dut.clk)
        await tbutil.expect_quiet(dut, ["o__valid", "error", "busy"], tb.latency + 3,
                                  "and the seeding")
        fresh = [random_command(tb, rng) for _ in range(3)]
        model = ActivationModel(tb.lanes, random_bits=tb.r)  # seed 0, as after reset
        tb.check(model, fresh, await tb.run(fresh))
        assert not dut.error.value, "error set by legal commands after the reset"
    dut._log.info("reset in the middle of commands: 3 rounds exact (seed %d)", tbutil.seed())
