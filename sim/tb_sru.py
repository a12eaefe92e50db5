"""cocotb testbench: ``hdl.sru.StochasticRounder`` against ``golden.sru.SruModel``, bit for bit.

One coroutine drives the three streams once per cycle (inputs change on the falling edge,
handshakes are read in the ReadOnly phase after it). The input stream gets random valid gaps
and the output random back-pressure (``NCLITE_GAPS`` = probability, default 0.25); a monitor
checks the output protocol (valid and payload held while stalled) and that ``i`` is never
ready while the generators are being seeded.

Tests (selected by the runner's ``testcase``):

* ``random_beats`` - for every built target x mode x saturation, ``NCLITE_VECTORS`` (default
  10^4) random inputs (uniform, mixed, and drawn around every target value, midpoint and
  overflow threshold) plus all special values, in beats whose combinations are interleaved at
  random, so the generators step only on some beats; fp32-passthrough beats and beats with a
  reserved dtype or mode (``invalid``, no draw) among them.
* ``reseed`` - seed S, beats A, seed T, beats B, seed S, beats A: the third output stream is
  identical to the first, all three equal golden; seeds arrive while beats are still in the
  pipeline.
* ``reset_midstream`` - three times: a non-zero seed, then SR beats with gaps and
  back-pressure; reset after a random number of cycles (beats in the pipeline and held on
  ``o``); after it no output beat appears, the unit seeds itself (with 0: the old seed is
  gone), and a fresh stream matches golden from seed 0.
* ``throughput`` - no gaps, no back-pressure: ``n`` beats in ``n + latency`` cycles; writes
  ``{"beats", "cycles", "lanes", "latency"}`` to ``NCLITE_SRU_OUT``.
* ``running_sum`` - the SR demo: ``NCLITE_SRU_DEMO`` (JSON: fmt, start, increment, steps, seed)
  accumulates ``acc = cast(acc + increment)`` in every lane with RNE and with SR (the fp32 add
  in the testbench, the cast in the RTL, every beat checked against golden), next to the fp32
  sum; writes the trajectories to ``NCLITE_SRU_OUT``.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly

from golden.formats import get_format, to_bits, to_fp32, to_fp32_bits
from golden.fp32 import fp32_add
from golden.rounding import DEFAULT_SATURATE
from golden.sru import SruModel
from hdl.formats import Dtype, Rounding
from hdl.sru import sru_layouts
from hdl.xorwow import seeding_cycles
from sim import coverage, tbutil, vectors

NAMES = {d.value: d.golden_name for d in Dtype}
MODES = {m.value: m.golden_name for m in Rounding}
WATCHDOG_CYCLES = 50_000  # cycles without any transfer before the test calls it a hang


class Beat:
    """One input beat: lane values, the raw dtype/mode codes (reserved ones allowed)."""

    __slots__ = ("x", "dtype", "mode", "saturate")

    def __init__(self, x, dtype: int, mode: int, saturate: bool):
        self.x, self.dtype, self.mode, self.saturate = x, int(dtype), int(mode), bool(saturate)

    def describe(self) -> str:
        return (f"x={tbutil.hexs(self.x)} dtype={NAMES.get(self.dtype, self.dtype)} "
                f"mode={MODES.get(self.mode, self.mode)} saturate={self.saturate}")


class Seed:
    """A reseed request between beats."""

    __slots__ = ("value",)

    def __init__(self, value: int):
        self.value = value


class SruTB:
    """Drives a ``StochasticRounder``; scoreboard against :class:`SruModel`."""

    def __init__(self, dut, gaps: float | None = None):
        self.dut = dut
        p = tbutil.params()
        self.lanes = p["lanes"]
        self.r = p.get("random_bits", 16)
        self.latency = p.get("stages", 2)
        targets = p.get("targets", [d.golden_name for d in Dtype])
        self.built = {d.value for d in Dtype if d.golden_name in targets}
        i_layout, o_layout = sru_layouts(self.lanes, [d for d in Dtype if d.value in self.built])
        self._doff = i_layout["dtype"].offset
        self._moff = i_layout["mode"].offset
        self._soff = i_layout["saturate"].offset
        self._out_bits = 32 if Dtype.FP32.value in self.built else 16
        self._inv_off = o_layout["invalid"].offset
        self.gaps = float(os.environ.get("NCLITE_GAPS", "0.25")) if gaps is None else gaps
        self.rng = tbutil.rng(0x5EED)
        self.model = SruModel(self.lanes, random_bits=self.r, seed=0)
        self.cycles = 0
        self.seeding_cycles_max = seeding_cycles(self.lanes) + 2

    async def start(self):
        dut = self.dut
        dut.i__valid.value = 0
        dut.seed__valid.value = 0
        dut.o__ready.value = 0
        await tbutil.start_clock(dut)
        await tbutil.reset(dut)
        await ReadOnly()
        busy = 0
        while dut.seeding.value:
            await FallingEdge(dut.clk)
            await ReadOnly()
            busy += 1
            assert busy <= seeding_cycles(self.lanes) + 2, "seeding after reset never ends"
        assert busy > 0, "the unit did not seed itself after reset"

    def pack(self, b: Beat) -> int:
        word = 0
        for lane, v in enumerate(b.x):
            word |= int(v) << (32 * lane)
        return word | b.dtype << self._doff | b.mode << self._moff | b.saturate << self._soff

    def expect(self, b: Beat) -> tuple[list[int], int]:
        """The golden result of one beat (advances the model's generators like the RTL)."""
        if b.dtype not in self.built or b.mode not in MODES:
            return [0] * self.lanes, 1
        out = self.model.beat(np.asarray(b.x, dtype=np.uint32), NAMES[b.dtype], MODES[b.mode],
                              b.saturate)
        return [int(v) for v in out], 0

    def unpack(self, word: int) -> tuple[list[int], int]:
        mask = (1 << self._out_bits) - 1
        return ([(word >> (self._out_bits * k)) & mask for k in range(self.lanes)],
                (word >> self._inv_off) & 1)

    async def run(self, items: list, *, stalls: float | None = None) -> list[tuple]:
        """Send ``items`` (:class:`Beat` and :class:`Seed`, in order), collect every output
        beat; returns ``[(lanes, invalid), ...]`` in beat order."""
        dut = self.dut
        rng, gaps = self.rng, self.gaps
        stalls = gaps if stalls is None else stalls
        beats = sum(isinstance(it, Beat) for it in items)
        pos, results = 0, []
        shown = seed_shown = False
        monitor = tbutil.StallMonitor("o")
        quiet = 0
        while len(results) < beats:
            await FallingEdge(dut.clk)
            self.cycles += 1
            item = items[pos] if pos < len(items) else None
            if not seed_shown:
                dut.seed__valid.value = 0
            if isinstance(item, Seed) and not shown:
                dut.i__valid.value = 0
                if not seed_shown:
                    dut.seed__payload.value = item.value
                    dut.seed__valid.value = 1
                    seed_shown = True
            elif isinstance(item, Beat) and not shown and not (gaps and rng.random() < gaps):
                dut.i__payload.value = self.pack(item)
                dut.i__valid.value = 1
                shown = True
            elif not shown:
                dut.i__valid.value = 0
            ready = not (stalls and rng.random() < stalls)
            dut.o__ready.value = int(ready)
            await ReadOnly()
            if dut.seeding.value and dut.i__ready.value:
                raise AssertionError(f"i.ready high while seeding (seed {tbutil.seed()})")
            progressed = False
            if seed_shown and dut.seed__ready.value:
                self.model.reseed(item.value)
                pos += 1
                seed_shown = False
                progressed = True
            if shown and dut.i__ready.value:
                pos += 1
                shown = False
                progressed = True
            valid = bool(dut.o__valid.value)
            payload = monitor.sample(valid, int(dut.o__payload.value) if valid else None, ready)
            if payload is not None:
                results.append(self.unpack(payload))
                progressed = True
            quiet = 0 if progressed or dut.seeding.value else quiet + 1
            if quiet > WATCHDOG_CYCLES:
                raise AssertionError(f"SRU hung: {len(results)} of {beats} beats out, "
                                     f"item {pos} of {len(items)} (seed {tbutil.seed()})")
        await FallingEdge(dut.clk)
        dut.i__valid.value = 0
        dut.seed__valid.value = 0
        coverage.sru_beats(self, items, results)
        return results

    def check(self, items: list, results: list) -> list[tuple[list[int], int]]:
        """Compare ``results`` with golden, beat by beat (reseeds applied in order)."""
        errors, expected = [], []
        beats = iter(results)
        self.model.reseed(0)
        for item in items:
            if isinstance(item, Seed):
                self.model.reseed(item.value)
                continue
            want = self.expect(item)
            expected.append(want)
            got = next(beats)
            if got != want and len(errors) < 8:
                errors.append(f"{item.describe()}: got {tbutil.hexs(got[0])} invalid={got[1]}, "
                              f"want {tbutil.hexs(want[0])} invalid={want[1]}")
        bad = sum(g != w for g, w in zip(results, expected, strict=True))
        assert not bad, (f"{bad} of {len(results)} beats differ from golden "
                         f"(seed {tbutil.seed()}, {tbutil.simulator()}):\n  " + "\n  ".join(errors))
        return expected


def random_items(tb: SruTB, per_combo: int, rng: np.random.Generator) -> list[Beat]:
    """Beats for every built narrow target x mode x saturation (specials + ``per_combo``
    random values each), fp32 passthrough beats and invalid beats, in random order."""
    lanes = tb.lanes
    items: list[Beat] = []
    for d in sorted(tb.built):
        name = NAMES[d]
        ref_fmt = "fp8_e4m3" if name == "fp32" else name
        n = per_combo if name != "fp32" else max(per_combo // 10, lanes)
        for mode in MODES:
            for sat in (False, True):
                x = np.concatenate([vectors.cast_specials(ref_fmt),
                                    vectors.cast_inputs(ref_fmt, rng, n)])
                rng.shuffle(x)
                x = np.resize(x, -(-len(x) // lanes) * lanes)  # pad by repeating
                items += [Beat(row, d, mode, sat) for row in x.reshape(-1, lanes)]
    bad = max(len(items) // 50, 4)
    for _ in range(bad):
        x = rng.integers(0, 1 << 32, lanes, dtype=np.uint64).astype(np.uint32)
        if rng.random() < 0.5:
            items.append(Beat(x, int(rng.integers(5, 8)), int(rng.integers(0, 3)), True))
        else:
            items.append(Beat(x, min(tb.built), 3, False))
        unbuilt = [d.value for d in Dtype if d.value not in tb.built]
        if unbuilt:
            items.append(Beat(x, int(rng.choice(unbuilt)), Rounding.SR.value, False))
    order = rng.permutation(len(items))
    return [items[i] for i in order]


@cocotb.test(**tbutil.timeout(5 + 1e-4 * int(os.environ.get('NCLITE_VECTORS', '10000'))))
async def random_beats(dut):
    tb = SruTB(dut)
    await tb.start()
    n = int(os.environ.get("NCLITE_VECTORS", "10000"))
    items = random_items(tb, n, tbutil.rng(1))
    dut._log.info("SRU: %d beats of %d lanes, seed %d", len(items), tb.lanes, tbutil.seed())
    results = await tb.run(items)
    tb.check(items, results)


@cocotb.test(**tbutil.timeout(5))
async def reseed(dut):
    tb = SruTB(dut)
    await tb.start()
    rng = tbutil.rng(2)
    narrow = [d for d in sorted(tb.built) if NAMES[d] != "fp32"]

    def segment(k):
        out = []
        for _ in range(k):
            d = int(rng.choice(narrow))
            mode = Rounding.SR.value if rng.random() < 0.8 else Rounding.RNE.value
            x = vectors.cast_inputs(NAMES[d], rng, tb.lanes)
            out.append(Beat(x, d, mode, bool(rng.integers(0, 2))))
        return out

    a, b = segment(150), segment(60)
    s, t = int(rng.integers(0, 1 << 63)) * 2 + 1, int(rng.integers(0, 1 << 63))
    items = [Seed(s), *a, Seed(t), *b, Seed(s), *a]
    results = await tb.run(items)
    tb.check(items, results)
    first, third = results[:len(a)], results[len(a) + len(b):]
    assert first == third, f"re-seeding with {s:#x} did not reproduce the stream"
    again = [Seed(t), *b]
    assert (await tb.run(again)) == results[len(a):len(a) + len(b)]
    dut._log.info("reseed: %d SR beats reproduced after seeds %#x, %#x", len(a), s, t)


@cocotb.test(**tbutil.timeout(5 + 1e-4 * int(os.environ.get('NCLITE_VECTORS', '2000'))))
async def throughput(dut):
    tb = SruTB(dut, gaps=0.0)
    await tb.start()
    n = int(os.environ.get("NCLITE_VECTORS", "2000"))
    rng = tbutil.rng(3)
    narrow = [d for d in sorted(tb.built) if NAMES[d] != "fp32"] or sorted(tb.built)
    items = [Beat(rng.integers(0, 1 << 32, tb.lanes, dtype=np.uint64).astype(np.uint32),
                  int(rng.choice(narrow)), Rounding.SR.value, True) for _ in range(n)]
    start = tb.cycles
    results = await tb.run(items, stalls=0.0)
    cycles = tb.cycles - start - 1  # the last FallingEdge is after the final transfer
    tb.check(items, results)
    assert cycles <= n + tb.latency, f"{n} beats took {cycles} cycles"
    out = os.environ.get("NCLITE_SRU_OUT")
    if out:
        with open(out, "w") as fh:
            json.dump({"beats": n, "cycles": cycles, "lanes": tb.lanes,
                       "latency": tb.latency}, fh)


def _running_sum_timeout_ms() -> float:
    """running_sum's limit: 1 µs (100 cycles) per step of NCLITE_SRU_DEMO, plus 5 ms."""
    return 5 + 1e-3 * int(json.loads(os.environ.get("NCLITE_SRU_DEMO", "{}")).get("steps", 200))


@cocotb.test(**tbutil.timeout(_running_sum_timeout_ms()))
async def running_sum(dut):
    cfg = json.loads(os.environ.get("NCLITE_SRU_DEMO", "{}"))
    fmt = cfg.get("fmt", "bf16")
    steps = int(cfg.get("steps", 200))
    start = np.float32(cfg.get("start", 1.0))
    inc = np.float32(cfg.get("increment", 1e-3))
    seed = int(cfg.get("seed", 0))
    saturate = bool(cfg.get("saturate", DEFAULT_SATURATE[fmt]))
    tb = SruTB(dut, gaps=0.0)
    await tb.start()
    d = next(v for v, name in NAMES.items() if name == fmt)
    f = get_format(fmt)
    lanes = tb.lanes
    start_bits = to_bits(np.array([start]), f)[0]
    acc = {m: np.full(lanes, start_bits, dtype=f.uint_dtype) for m in ("rne", "sr")}
    inc_bits = np.full(lanes, inc.view(np.uint32), dtype=np.uint32)
    f32 = np.float32(start)
    trace = {"rne": [], "sr": [], "fp32": []}
    for step in range(steps):
        items = [Beat(fp32_add(to_fp32_bits(acc[mode], f), inc_bits), d,
                      Rounding[mode.upper()].value, saturate) for mode in ("rne", "sr")]
        results = await tb.run(([Seed(seed)] if step == 0 and seed else []) + items,
                               stalls=0.0)
        for mode, item, got in zip(("rne", "sr"), items, results, strict=True):
            want = tb.expect(item)
            assert got == want, (f"step {step} {mode}: {item.describe()}: got "
                                 f"{tbutil.hexs(got[0])}, want {tbutil.hexs(want[0])}")
            acc[mode] = np.array(got[0], dtype=f.uint_dtype)
            trace[mode].append([float(v) for v in to_fp32(acc[mode], f)])
        f32 = np.float32(f32 + inc)
        trace["fp32"].append(float(f32))
    out = os.environ.get("NCLITE_SRU_OUT")
    if out:
        with open(out, "w") as fh:
            json.dump({"fmt": fmt, "start": float(start), "increment": float(inc),
                       "steps": steps, "lanes": lanes, "cycles": tb.cycles, **trace}, fh)


@cocotb.test(timeout_time=2, timeout_unit="ms")
async def reset_midstream(dut):
    """Reset while beats are in flight: nothing of them comes out, the PRNG restarts from seed
    0 (the contract: "after reset the unit seeds itself with 0"), the next stream is exact."""
    tb = SruTB(dut)
    await tb.start()
    rng = tbutil.rng(4)
    narrow = [d for d in sorted(tb.built) if NAMES[d] != "fp32"] or sorted(tb.built)

    def beats(k):
        return [Beat(vectors.cast_inputs(NAMES[d], rng, tb.lanes), d,
                     Rounding.SR.value if rng.random() < 0.8 else Rounding.RNE.value,
                     bool(rng.integers(0, 2)))
                for d in (int(rng.choice(narrow)) for _ in range(k))]

    for rnd in range(3):
        items = [Seed(int(rng.integers(1, 1 << 63))), *beats(40)]
        task = cocotb.start_soon(tb.run(items))
        await ClockCycles(dut.clk, tb.seeding_cycles_max + int(rng.integers(2, 40)))
        await tbutil.reset_midway(dut, int(rng.integers(1, 5)), inputs=("i", "seed"),
                                  tasks=[task], low=("o__ready",))
        dut.o__ready.value = 1
        await ReadOnly()
        assert dut.seeding.value, f"round {rnd}: no seeding after the reset (seed {tbutil.seed()})"
        await FallingEdge(dut.clk)
        await tbutil.expect_quiet(dut, ["o__valid", "i__ready"], 2, "in the middle of a stream")
        busy = 0
        while True:
            await ReadOnly()
            if not dut.seeding.value:
                break
            assert not dut.o__valid.value, f"a beat came out after the reset (round {rnd})"
            await FallingEdge(dut.clk)
            busy += 1
            assert busy <= tb.seeding_cycles_max, "seeding after reset never ends"
        await FallingEdge(dut.clk)
        await tbutil.expect_quiet(dut, ["o__valid"], tb.latency + 3, "and the seeding")
        fresh = beats(int(rng.integers(10, 40)))
        tb.check(fresh, await tb.run(fresh))  # check() replays golden from seed 0
    dut._log.info("reset in the middle of a stream: 3 rounds exact (seed %d)", tbutil.seed())
