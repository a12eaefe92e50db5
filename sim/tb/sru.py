"""cocotb testbench: ``hdl.sru.StochasticRounder`` against ``golden.sru.SruModel``, bit for bit.

The streams are driven by :mod:`sim.tb.streams`: a source on ``i`` and on ``seed``, a sink on
``o``. The input stream gets random valid gaps and the output random back-pressure
(``NCLITE_GAPS`` = probability, default 0.25). The sink checks the output protocol (valid and
payload held while stalled), a watcher that no beat that draws (SR to a narrow target) is
taken while the generators are being seeded (the others pass). A run sends its beats
and seeds in order: a seed is offered once the beats before it have been taken (they may still
be in the pipeline), the beats after it once it has been taken.

Tests (selected by the runner's ``testcase``):

* ``random_beats`` - for every built target x mode x saturation, ``NCLITE_VECTORS`` (default
  10^4) random inputs (uniform, mixed, and drawn around every target value, midpoint and
  overflow threshold) plus all special values, in beats whose combinations are interleaved at
  random, so the generators step only on some beats; fp32-passthrough beats and beats with a
  reserved dtype or mode (``invalid``, no draw) among them.
* ``reseed`` - seed S, beats A, seed T, beats B, seed S, beats A: the third output stream is
  identical to the first, all three equal golden; seeds arrive while beats are still in the
  pipeline.
* ``pass_while_seeding`` - a seed, then beats that draw nothing, then SR beats: the first
  all come out before the seeding ends, the SR beats after it; all bit-exact.
* ``reset_midstream`` - three times: a non-zero seed, then SR beats with gaps and
  back-pressure; reset after a random number of cycles (beats in the pipeline and held on
  ``o``); after it no output beat appears (until ``latency + 3`` cycles after the longest
  seeding), the unit seeds itself (with 0: the old seed is gone), and a fresh stream matches
  golden from seed 0.
* ``throughput`` - no gaps, no back-pressure: ``n`` beats in ``n + latency`` cycles; writes
  ``{"beats", "cycles", "lanes", "latency"}`` to ``NCLITE_SRU_OUT`` (``cycles``: from the
  clock edge that takes the first beat to the one that takes the last result).
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
from cocotb.triggers import FallingEdge, First, ReadOnly, RisingEdge

from golden.formats import get_format, to_bits, to_fp32, to_fp32_bits
from golden.fp32 import fp32_add
from golden.rounding import DEFAULT_SATURATE
from golden.sru import SruModel
from hdl.formats import Dtype, Rounding
from hdl.sru import SRU_DEFAULT_STAGES, sru_layouts
from hdl.xorwow import seeding_cycles
from sim.tb import streams, tbutil, vectors
from sim.tb.streams import StreamSink, StreamSource
from sim.verify import coverage

NAMES = {d.value: d.golden_name for d in Dtype}
MODES = {m.value: m.golden_name for m in Rounding}
WATCHDOG_CYCLES = 50_000  # cycles without any transfer before the test calls it a hang
# (checked once per window of that many cycles: a hang shows after 1 to 2 windows)


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
    """Drives a ``StochasticRounder`` through :mod:`sim.tb.streams` drivers; scoreboard against
    :class:`SruModel`. ``gaps``: the probability of a valid gap on ``i`` and of back-pressure
    on ``o``, per cycle (default ``NCLITE_GAPS``, 0.25; 0: full rate)."""

    def __init__(self, dut, gaps: float | None = None):
        self.dut = dut
        p = tbutil.params()
        self.lanes = p["lanes"]
        self.r = p.get("random_bits", 16)
        self.latency = p.get("stages", SRU_DEFAULT_STAGES)
        targets = p.get("targets", [d.golden_name for d in Dtype])
        self.built = {d.value for d in Dtype if d.golden_name in targets}
        i_layout, o_layout = sru_layouts(self.lanes, [d for d in Dtype if d.value in self.built])
        self._doff = i_layout["dtype"].offset
        self._moff = i_layout["mode"].offset
        self._dmask = (1 << i_layout["dtype"].width) - 1
        self._mmask = (1 << i_layout["mode"].width) - 1
        self._soff = i_layout["saturate"].offset
        self._out_bits = 32 if Dtype.FP32.value in self.built else 16
        self._inv_off = o_layout["invalid"].offset
        self.gaps = float(os.environ.get("NCLITE_GAPS", "0.25")) if gaps is None else gaps

        def pause(salt):
            return streams.pauses(tbutil.rng(0x5EED + salt), self.gaps) if self.gaps else None

        self.i = StreamSource(dut, "i", pause=pause(0))
        self.seed = StreamSource(dut, "seed")
        self.o = StreamSink(dut, "o", pause=pause(1))
        self.model = SruModel(self.lanes, random_bits=self.r, seed=0)
        self.cycles = 0
        self.seeding_cycles_max = seeding_cycles(self.lanes) + 2

    async def start(self):
        """Clock, reset, and the seeding after it (which must happen, and end in time)."""
        dut = self.dut
        await tbutil.start_clock(dut)
        await tbutil.reset(dut)
        await ReadOnly()
        assert dut.seeding.value, "the unit did not seed itself after reset"
        await RisingEdge(dut.clk)
        cocotb.start_soon(self._closed_while_seeding())
        await streams.wait_until(dut.seeding, 0, clock=dut.clk,
                                 timeout_cycles=self.seeding_cycles_max,
                                 what="seeding after reset (never ends)")

    def _draws(self, word: int) -> bool:
        """Whether the beat ``word`` (as on ``i.payload``) draws a random number: SR to a
        built narrow target."""
        dtype = (word >> self._doff) & self._dmask
        mode = (word >> self._moff) & self._mmask
        return mode == Rounding.SR.value and dtype in self.built and NAMES[dtype] != "fp32"

    async def _closed_while_seeding(self):
        """Fail if a beat that draws is offered and ``i.ready`` is high while ``seeding`` is
        (in any settled state): such a beat must wait for the new streams; the others may
        pass. Woken by ``seeding`` rising and falling, and by ``i.ready`` rising while it is
        high, not every cycle."""
        seeding, ready, valid = self.dut.seeding, self.dut.i__ready, self.dut.i__valid

        def high(h):
            return h.value.is_resolvable and int(h.value)

        while True:
            await ReadOnly()
            if high(seeding):
                if high(ready) and high(valid) and self._draws(int(self.dut.i__payload.value)):
                    raise AssertionError(f"an SR beat taken while seeding (cycle "
                                         f"{streams.sim_cycles()}, seed {tbutil.seed()}, "
                                         f"{tbutil.simulator()})")
                await First(FallingEdge(seeding), RisingEdge(ready), RisingEdge(valid))
            else:
                await RisingEdge(seeding)

    def clear(self):
        """Drop queued beats and seeds, lower ``valid`` (for a reset in the middle)."""
        for driver in (self.i, self.seed, self.o):
            driver.clear()

    def pack(self, b: Beat) -> int:
        word = 0
        for lane, v in enumerate(b.x):
            word |= int(v) << (32 * lane)
        return word | b.dtype << self._doff | b.mode << self._moff | b.saturate << self._soff

    def castable(self, b: Beat) -> bool:
        """Whether the unit casts ``b`` (else it answers zeros, flagged invalid)."""
        return b.dtype in self.built and b.mode in MODES

    def expect(self, b: Beat) -> tuple[list[int], int]:
        """The golden result of one beat (advances the model's generators like the RTL)."""
        if not self.castable(b):
            return [0] * self.lanes, 1
        out = self.model.beat(np.asarray(b.x, dtype=np.uint32), NAMES[b.dtype], MODES[b.mode],
                              b.saturate)
        return [int(v) for v in out], 0

    def expect_all(self, items: list) -> list[tuple[list[int], int]]:
        """The golden result of every beat of ``items``, the model restarted from seed 0 and
        reseeded where ``items`` reseed (as :meth:`expect` beat after beat; the beats between
        two seeds are cast at once, :meth:`golden.sru.SruModel.run`)."""
        self.model.reseed(0)
        out: list = []
        valid: list[tuple[int, Beat]] = []  # (index in out, beat) since the last seed

        def cast():
            if valid:
                x = np.array([b.x for _, b in valid], dtype=np.uint32)
                rows = self.model.run(x, [NAMES[b.dtype] for _, b in valid],
                                      [MODES[b.mode] for _, b in valid],
                                      [b.saturate for _, b in valid])
                for (index, _), row in zip(valid, rows.tolist(), strict=True):
                    out[index] = (row, 0)
                valid.clear()

        for item in items:
            if isinstance(item, Seed):
                cast()
                self.model.reseed(item.value)
            elif not self.castable(item):
                out.append(([0] * self.lanes, 1))
            else:
                valid.append((len(out), item))
                out.append(None)
        cast()
        return out

    def unpack(self, word: int) -> tuple[list[int], int]:
        mask = (1 << self._out_bits) - 1
        return ([(word >> (self._out_bits * k)) & mask for k in range(self.lanes)],
                (word >> self._inv_off) & 1)

    async def run(self, items: list) -> list[tuple]:
        """Send ``items`` (:class:`Beat` and :class:`Seed`, in order: a seed once the beats
        before it have been taken, the beats after it once it has been), collect every output
        beat; returns ``[(lanes, invalid), ...]`` in beat order. Adds the cycles from the call
        to the last output beat to :attr:`cycles`."""
        start = streams.sim_cycles()
        beats = sum(isinstance(it, Beat) for it in items)
        sink, sources = self.o, (self.i, self.seed)
        target = sink.count + beats - len(sink.queue)
        first = sum(s.count for s in sources)

        def progress():
            return sink.count + sum(s.count for s in sources)

        def hung():
            return (f"SRU hung: {beats - (target - sink.count)} of {beats} beats out, item "
                    f"{sum(s.count for s in sources) - first} of {len(items)} "
                    f"(seed {tbutil.seed()})")

        async def send(source, payloads):
            source.send(payloads)
            await streams.watchdog(source.wait, progress, quiet_cycles=WATCHDOG_CYCLES,
                                   what=hung)

        pos = 0
        while pos < len(items):
            if isinstance(items[pos], Seed):
                await send(self.seed, items[pos].value)
                self.model.reseed(items[pos].value)
                pos += 1
                continue
            end = pos
            while end < len(items) and isinstance(items[end], Beat):
                end += 1
            await send(self.i, [self.pack(b) for b in items[pos:end]])
            pos = end
        await streams.watchdog(lambda: sink.wait_count(target), progress,
                               quiet_cycles=WATCHDOG_CYCLES, what=hung)
        self.cycles += streams.sim_cycles() - start
        results = [self.unpack(sink.queue.popleft()) for _ in range(beats)]
        coverage.sru_beats(self, items, results)
        return results

    def check(self, items: list, results: list) -> list[tuple[list[int], int]]:
        """Compare ``results`` with golden, beat by beat (reseeds applied in order)."""
        errors = []
        beats = [item for item in items if isinstance(item, Beat)]
        expected = self.expect_all(items)
        for item, got, want in zip(beats, results, expected, strict=True):
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


@cocotb.test(**tbutil.timeout(5))
async def pass_while_seeding(dut):
    """A seed, then beats that draw nothing (RNE and RTZ to every built target, fp32
    passthrough), then SR beats: the first come out while the generators are still being
    seeded, none of the SR beats does (they wait for the new streams); all bit-exact."""
    tb = SruTB(dut, gaps=0.0)
    await tb.start()
    rng = tbutil.rng(5)
    plain, sr = [], []
    for d in sorted(tb.built):
        fmt = "fp8_e4m3" if NAMES[d] == "fp32" else NAMES[d]
        modes = MODES if NAMES[d] == "fp32" else (Rounding.RNE.value, Rounding.RTZ.value)
        plain += [Beat(vectors.cast_inputs(fmt, rng, tb.lanes), d, mode, bool(sat))
                  for mode in modes for sat in (0, 1)]
        if NAMES[d] != "fp32":
            sr.append(Beat(vectors.cast_inputs(fmt, rng, tb.lanes), d, Rounding.SR.value,
                           bool(rng.integers(0, 2))))
    before = tb.o.count
    out_by_end: list[int] = []

    async def seeding_end():
        await RisingEdge(dut.seeding)
        await FallingEdge(dut.seeding)
        out_by_end.append(tb.o.count - before)

    watch = cocotb.start_soon(seeding_end())
    items = [Seed(int(rng.integers(1, 1 << 63))), *plain, *sr]
    tb.check(items, await tb.run(items))
    await watch
    assert out_by_end == [len(plain)], (
        f"{out_by_end} beats out by the end of the seeding, want the {len(plain)} that draw "
        f"nothing (seed {tbutil.seed()}, {tbutil.simulator()})")


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
    results = await tb.run(items)
    # From the edge that takes the first beat (the one after the call, at full rate) to the
    # edge that takes the last result.
    cycles = tb.cycles - start - 1
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
        results = await tb.run(([Seed(seed)] if step == 0 and seed else []) + items)
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
        await streams.wait_cycles(tb.seeding_cycles_max + int(rng.integers(2, 40)),
                                  clock=dut.clk)
        await tbutil.reset_midway(dut, int(rng.integers(1, 5)), tasks=[task], clear=[tb])
        await ReadOnly()
        assert dut.seeding.value, f"round {rnd}: no seeding after the reset (seed {tbutil.seed()})"
        await FallingEdge(dut.clk)
        # No beat of the interrupted stream comes out, during the seeding and for latency + 3
        # cycles after the longest one (the seeding watcher checks that no SR beat is taken).
        quiet = cocotb.start_soon(streams.expect_steady(
            [dut.o__valid], 0, cycles=2 + tb.seeding_cycles_max + tb.latency + 3,
            what=f"after the reset in the middle of a stream (round {rnd})"))
        await streams.wait_until(dut.seeding, 0, clock=dut.clk,
                                 timeout_cycles=tb.seeding_cycles_max,
                                 what=f"seeding after the reset (round {rnd}, never ends)")
        await quiet
        fresh = beats(int(rng.integers(10, 40)))
        tb.check(fresh, await tb.run(fresh))  # check() replays golden from seed 0
    dut._log.info("reset in the middle of a stream: 3 rounds exact (seed %d)", tbutil.seed())
