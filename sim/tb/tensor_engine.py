"""cocotb testbench: ``hdl.tensor_engine.TensorEngine`` against ``golden.tensor_engine``, bit
for bit.

The streams are driven by ``sim.tb.streams``' sources and sink. Each input stream gets random
valid gaps and the drain response random back-pressure (``NCLITE_GAPS`` = probability, default
0.2; 0 for throughput runs). On a :class:`hdl.sim_batch.PlayedStreams` top (``nclite gemm`` at
full rate) the played input streams are fed ``k`` beats per batch (``sim.tb.batches``) and the
engine's ``done`` pulses are counted in the simulator (``hdl.sim_batch.PulseCounter``,
:class:`CountedDone`), so that Python does not run for every moving column or every pulse; the
engine sees the same beats in the same cycles. Programs are built by ``sim.host.tensor_engine``
and run phase by phase: send the phase's commands and data, wait until the engine is idle,
drain PSUM words and compare them with the golden model's. A GEMM's rounds are background
phases (``sim.host.tensor_engine.Phase``): their beats follow each other without a wait, and
each round's PSUM blocks are drained as soon as the engine's ``done`` pulses say every
multiplication into their banks is written, while the next round computes in the other half of
PSUM; a round's beats go out only after the drains of the banks it writes. Its compute cycles
run from the cycle the engine takes the first command to that of the last PSUM write.

Tests (selected by the runner's ``testcase``):

* ``random_commands`` — random LOAD_STATIONARY / MULTIPLY_MOVING sequences: every dtype pair,
  random K, M, F (1 included, partial tiles), banks, addresses, overwrite and accumulate,
  several multiplications per stationary tile, special values; PSUM drained and compared.
* ``back_to_back`` — no gaps: accumulate read-after-write and load-after-swap hazards; each
  drain response comes two cycles after its request.
* ``hidden_loads`` — no gaps, cycles counted: a LOAD_STATIONARY of k rows after a
  multiplication of f columns leaves exactly ``max(0, max(k, 2) − f)`` idle cycles.
* ``illegal_commands`` — the engine's own error path: dropped commands, sticky ``error``.
* ``random_gemms`` — tiled GEMMs of random shapes (1 and non-multiples of n included) and
  dtype pairs, back to back without reset, drained in the background (a drain read that came
  before its bank's last write, or a round that overwrote a bank before it was drained,
  would show as a mismatch).
* ``reset_midway`` — three rounds: an operation (an illegal command, so ``error`` is set,
  then LOAD_STATIONARY and multiplications) interrupted by a reset of 1..4 cycles half-way
  through its moving columns, while its columns are still in the array, or in the middle of
  its PSUM drain; then ``busy``, ``error`` and ``drain_resp.valid`` are low, no write of the
  interrupted columns lands in PSUM after the reset, a MULTIPLY_MOVING before any
  LOAD_STATIONARY is illegal again (the old stationary tile is gone), and a fresh GEMM is
  bit-exact.
* ``gemm`` — one GEMM given by ``NCLITE_GEMM`` (JSON: m, k, f, a_fmt, b_fmt, gaps); writes
  its cycle counts to ``NCLITE_GEMM_OUT`` (used by ``nclite gemm``, the demo and the bench).
"""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotb.triggers import (
    ClockCycles,
    Event,
    FallingEdge,
    ReadOnly,
    RisingEdge,
    SimTimeoutError,
    with_timeout,
)

from golden.formats import to_bits
from golden.sparse import compress, magnitude_mask, pattern
from hdl.sim_batch import COUNT_BITS
from hdl.sparsity import SPARSITY_CODES
from hdl.tensor_engine import DRAIN_LATENCY
from sim.host.tensor_engine import EngineConfig, TensorEngineProgram, gemm_program
from sim.tb import streams, tbutil, vectors
from sim.tb.batches import BatchSource
from sim.tb.streams import StreamSink, StreamSource
from sim.verify import coverage

WATCHDOG_CYCLES = 200_000


class DoneCounts:
    """The engine's ``done`` pulses per PSUM bank, as the testbench needs them: the counts, a
    wait for them to reach targets, and the cycle of the last pulse. Two ways, one timing:
    :class:`WatchedDone` (the testbench wakes at every pulse) and :class:`CountedDone` (the
    simulator counts them); each sees a pulse in the cycle it comes."""

    def start(self) -> None:
        """Start counting (once the design is out of reset)."""

    def counts(self) -> list[int]:
        """Each bank's pulses so far, up to the last clock edge's cycle (read at a clock edge,
        outside the read-only phase)."""
        raise NotImplementedError

    async def reach(self, target: list[int]) -> None:
        """Until each bank's count is at least its ``target``: returns in the cycle of the
        pulse that reaches the last one, at once if they are reached. Called outside the
        read-only phase; one waiter at a time (a second one's target replaces the first's)."""
        raise NotImplementedError

    def last_cycle(self, first: int) -> int | None:
        """The cycle of the last pulse (as :func:`streams.sim_cycles` counts them) if it is
        ``first`` or later, else None; called at a clock edge."""
        raise NotImplementedError


class WatchedDone(DoneCounts):
    """:class:`DoneCounts` by the testbench: it wakes at each pulse (the engine alone)."""

    def __init__(self, dut, banks: int):
        self.dut = dut
        self._counts = [0] * banks
        self._last: int | None = None  # the cycle of the last pulse
        self._task = None
        self._target: list[int] | None = None
        self._reached = Event()

    def start(self) -> None:
        if self._task is None:
            self._task = cocotb.start_soon(self._count())

    def counts(self) -> list[int]:
        return list(self._counts)

    async def reach(self, target: list[int]) -> None:
        if not self._done(target):
            self._target = target
            self._reached.clear()
            await self._reached.wait()

    def last_cycle(self, first: int) -> int | None:
        return self._last if self._last is not None and self._last >= first else None

    def _done(self, target: list[int]) -> bool:
        return all(c >= t for c, t in zip(self._counts, target, strict=True))

    async def _count(self) -> None:
        dut = self.dut
        while True:
            await ReadOnly()
            if dut.done.value:
                self._counts[int(dut.done_bank.value)] += 1
                self._last = streams.sim_cycles()  # the write lands at the next edge
                if self._target is not None and self._done(self._target):
                    self._target = None
                    self._reached.set()
                await RisingEdge(dut.clk)
            else:
                await RisingEdge(dut.done)


class CountedDone(DoneCounts):
    """:class:`DoneCounts` by the ``hdl.sim_batch.PulseCounter`` of a ``PlayedStreams`` top
    (``counted``: ``done`` by ``done_bank``): the testbench wakes once per :meth:`reach`, not
    at every pulse."""

    def __init__(self, dut, banks: int):
        self.dut, self._banks = dut, banks
        self._mask = (1 << COUNT_BITS) - 1
        dut.done_target.value = 0

    def counts(self) -> list[int]:
        # At a clock edge the ports still hold the last cycle's values: done_counts counts the
        # pulses before it, done (with done_bank) is its own.
        value = int(self.dut.done_counts.value)
        counts = [(value >> (COUNT_BITS * i)) & self._mask for i in range(self._banks)]
        if self.dut.done.value:
            counts[int(self.dut.done_bank.value)] += 1
        return counts

    async def reach(self, target: list[int]) -> None:
        dut = self.dut
        # The counter has a count for every value of done_bank's width; the rest stay at 0.
        dut.done_target.value = sum((t & self._mask) << (COUNT_BITS * i)
                                    for i, t in enumerate(target))
        await ReadOnly()  # the target is in, and so is this cycle's pulse
        while not dut.done_reached.value:  # settled values only (Icarus shows steps between)
            await RisingEdge(dut.done_reached)
            await ReadOnly()

    def last_cycle(self, first: int) -> int | None:
        # At a clock edge done_since counts the cycles from the pulse to the last cycle (all
        # ones before the first pulse).
        ago = int(self.dut.done_since.value)
        if ago == self._mask:
            return None
        last = streams.sim_cycles() - 1 - ago
        return last if last >= first else None


class TensorEngineTB:
    """Drives a ``TensorEngine``'s streams (:mod:`sim.tb.streams`); runs
    :class:`TensorEngineProgram` phases. ``gaps``: the probability of a valid gap on each input
    stream and of back-pressure on the drain response, per cycle (0: full rate)."""

    INPUTS = ("cmd", "weights", "moving", "drain_req")

    def __init__(self, dut, gaps: float):
        self.dut = dut
        self.gaps = gaps

        def pause(salt):
            return streams.pauses(tbutil.rng(0x7E0 + salt), gaps) if gaps else None

        top = tbutil.params()
        played = top.get("played", [])  # a PlayedStreams top's; the engine's own have none
        if played and gaps:
            raise ValueError("a PlayedStreams top runs its played streams at full rate: gaps 0")
        self.sources = {name: BatchSource(dut, name, k=top["k"]) if name in played
                        else StreamSource(dut, name, pause=pause(i))
                        for i, name in enumerate(self.INPUTS)}
        self.drain_resp = StreamSink(dut, "drain_resp", pause=pause(len(self.INPUTS)))
        self.cycles = 0
        self.compute_cycles = 0
        self.drain_cycles = 0
        banks = _config().psum_banks
        counted = top.get("counted", {})
        if counted and counted != {"done": "done_bank"}:
            raise ValueError(f"a PlayedStreams top counts done by done_bank, not {counted!r}")
        self.done = CountedDone(dut, banks) if counted else WatchedDone(dut, banks)

    async def start(self):
        await tbutil.start_clock(self.dut)
        await tbutil.reset(self.dut)

    def clear(self):
        """Drop every queued beat and lower the inputs' valid (for a reset in the middle)."""
        for s in (*self.sources.values(), self.drain_resp):
            s.clear()

    async def _sent(self, names, what: str) -> None:
        """Until every queued beat of the sources ``names`` has been taken (watchdog)."""
        pending = [self.sources[name] for name in names]
        try:
            for src in pending:
                await with_timeout(src.wait(), WATCHDOG_CYCLES * tbutil.CLOCK_PERIOD_NS, "ns")
        except SimTimeoutError:
            raise AssertionError(
                f"tensor engine hung in the {what}: beats still to send "
                f"{ {s.name: s.pending for s in pending} } after {WATCHDOG_CYCLES} cycles "
                f"(seed {tbutil.seed()})") from None

    async def _idle(self) -> None:
        """Until ``busy`` is low at two clock edges in a row (once every beat is in)."""
        dut = self.dut
        while True:
            await streams.wait_until(dut.busy, 0, clock=dut.clk, timeout_cycles=WATCHDOG_CYCLES,
                                     what="tensor engine busy")
            await RisingEdge(dut.clk)
            if not dut.busy.value:
                break

    def _send_beats(self, ph) -> None:
        """Queue a phase's commands, weight rows and moving columns on their streams."""
        for name, items in (("cmd", ph.cmds), ("weights", ph.weights), ("moving", ph.moving)):
            self.sources[name].send(items)

    async def run_phase(self, ph, n: int) -> list[str]:
        """Send a phase's beats, wait for idle, drain and compare; return mismatch texts."""
        start = streams.sim_cycles()
        self._send_beats(ph)
        await self._sent(("cmd", "weights", "moving"), "phase")
        await self._idle()
        self.compute_cycles += streams.sim_cycles() - start
        self.cycles += streams.sim_cycles() - start
        start = streams.sim_cycles()
        errors = await self._drain_rows(ph, n)
        self.drain_cycles += streams.sim_cycles() - start
        self.cycles += streams.sim_cycles() - start
        return errors

    async def _drain_rows(self, ph, n: int) -> list[str]:
        """Send the phase's drain requests, take the rows, compare them with golden."""
        if not ph.drains:
            return []
        sink = self.drain_resp
        self.sources["drain_req"].send(ph.drains)
        await self._sent(["drain_req"], "drain")
        try:
            await with_timeout(sink.wait_count(sink.count + len(ph.drains) - len(sink.queue)),
                               WATCHDOG_CYCLES * tbutil.CLOCK_PERIOD_NS, "ns")
        except SimTimeoutError:
            raise AssertionError(f"drain hung after {len(sink.queue)} of {len(ph.drains)} "
                                 f"rows (seed {tbutil.seed()})") from None
        errors: list[str] = []
        mask = (1 << 32) - 1
        for got in range(len(ph.drains)):
            word = sink.queue.popleft()
            row = np.array([(word >> (32 * i)) & mask for i in range(n)], dtype=np.uint32)
            coverage.te_psum(row, ph.defined[got])
            want = ph.expected[got]
            bad = np.flatnonzero((row != want) & ph.defined[got])
            if bad.size and len(errors) < 6:
                errors.append(f"{ph.where[got]}: partitions {bad.tolist()} RTL "
                              f"{tbutil.hexs(row[bad])} golden {tbutil.hexs(want[bad])}")
        return errors

    async def _background_drain(self, ph, n: int, base: list[int], before) -> list[str]:
        """A background phase's drains: after the drains before it (``before``, one drain
        stream) and once its banks have pulsed ``done`` ``ph.done_after`` times since
        ``base``."""
        errors = await before if before is not None else []
        target = [b + ph.done_after.get(i, 0) for i, b in enumerate(base)]
        try:
            await with_timeout(self.done.reach(target), WATCHDOG_CYCLES * tbutil.CLOCK_PERIOD_NS,
                               "ns")
        except SimTimeoutError:
            seen = [c - b for c, b in zip(self.done.counts(), base, strict=True)]
            raise AssertionError(
                f"the tensor engine's done pulses never came: banks {ph.done_after} "
                f"expected, {seen} per bank since the program began (seed "
                f"{tbutil.seed()})") from None
        # The last write lands at the edge that ends the done pulse's cycle: a read taken at
        # that edge still sees the old word, so the requests go out from the next cycle.
        await RisingEdge(self.dut.clk)
        return errors + await self._drain_rows(ph, n)

    async def _busy_rise(self) -> int:
        """The clock edge at which ``busy`` rises: the one that takes the first command."""
        await RisingEdge(self.dut.busy)
        return streams.sim_cycles()

    async def _settle(self, n: int, start: int, busy_rise, drains) -> list[str]:
        """After background phases: wait for the engine to be idle, then for their drains.
        Compute cycles: from the cycle the engine takes the first command (``busy_rise``'s
        edge ends it) to the cycle of its last PSUM write, both counted; drain cycles: those
        after idle."""
        await self._sent(("cmd", "weights", "moving"), "phase")
        await self._idle()
        idle = streams.sim_cycles()
        last_done = self.done.last_cycle(start)
        if busy_rise.done() and last_done is not None:
            self.compute_cycles += last_done + 2 - busy_rise.result()
        else:  # no MULTIPLY_MOVING: from the phases' start to idle
            busy_rise.cancel()
            self.compute_cycles += idle - start
        errors = await drains if drains is not None else []
        self.drain_cycles += streams.sim_cycles() - idle
        self.cycles += streams.sim_cycles() - start
        return errors

    async def run(self, prog: TensorEngineProgram, *, expect_error: bool = False) -> None:
        """Run the program's phases: a plain phase sends its beats, waits for idle and drains;
        background phases follow each other without waiting, each one's drains in a task of
        their own (chained in program order) started as its banks are done."""
        self.done.start()
        errors: list[str] = []
        n = prog.cfg.n
        start = busy_rise = None  # the first cycle of the running background phases
        drains = None  # the last background drain task, or None
        drained: list[tuple[set, object]] = []  # (banks, task) of background drains
        base = self.done.counts()
        for ph in prog.phases:
            if len(errors) >= 6:
                break
            if not ph.background:
                if start is not None:
                    errors += await self._settle(n, start, busy_rise, drains)
                    start, drains, drained = None, None, []
                errors += await self.run_phase(ph, n)
                coverage.te_phase(ph)
                continue
            if start is None:
                start = streams.sim_cycles()
                busy_rise = cocotb.start_soon(self._busy_rise())
            for banks, task in drained:  # no write into a bank before its drain is read
                if banks & ph.writes:
                    await task
            self._send_beats(ph)
            if ph.drains:
                drains = cocotb.start_soon(self._background_drain(ph, n, base, drains))
                drained.append((set(ph.done_after), drains))
            coverage.te_phase(ph)
        if start is not None:
            errors += await self._settle(n, start, busy_rise, drains)
        if int(self.dut.error.value) != expect_error:
            errors.append("the engine flagged a command error" if not expect_error
                          else "the engine did not flag the illegal commands")
        if errors:
            raise AssertionError(f"PSUM differs from golden in {tbutil.simulator()} "
                                 f"(seed {tbutil.seed()}):\n  " + "\n  ".join(errors))


def _engine_params() -> dict:
    """The engine's parameters, also inside a ``PlayedStreams`` top."""
    top = tbutil.params()
    return top["params"] if "design" in top else top


def _config() -> EngineConfig:
    return EngineConfig.from_params(_engine_params())


def _gaps(default: float = 0.2) -> float:
    return float(os.environ.get("NCLITE_GAPS", default))


@cocotb.test(**tbutil.timeout(5 + 0.5 * int(os.environ.get('NCLITE_TE_COMMANDS', '24'))))
async def random_commands(dut):
    cfg = _config()
    rng = tbutil.rng(5)
    n, fmts = cfg.n, list(cfg.formats)
    prog = TensorEngineProgram(cfg, junk=rng)
    count = int(os.environ.get("NCLITE_TE_COMMANDS", "24"))
    pairs = [(a, b) for a in fmts for b in fmts]  # every (stationary, moving) format pair
    for i in range(count):
        # The first commands take the edge shapes: K = 1, M = 1, F = 1, then a full tile.
        k = [1, n, 1, n][i] if i < 4 else int(rng.integers(1, n + 1))
        m = [1, 1, n, n][i] if i < 4 else int(rng.integers(1, n + 1))
        sfmt, mfmt = pairs[i % len(pairs)]
        prog.load_stationary(vectors.operands(sfmt, rng, (k, m), 0.1), sfmt)
        for j in range(int(rng.choice([1, 1, 2, 3]))):  # several MMs per stationary tile
            f = 1 if i < 2 and j == 0 else int(rng.choice(
                [1, int(rng.integers(1, cfg.words + 1))]))
            addr = int(rng.integers(0, cfg.words - f + 1))
            bank = int(rng.integers(0, cfg.psum_banks))
            acc = bool(rng.random() < 0.5)
            prog.multiply_moving(vectors.operands(mfmt, rng, (k, f), 0.1), mfmt, bank=bank,
                                 addr=addr, accumulate=acc)
        if rng.random() < 0.25:  # drain part of PSUM mid-way, then keep going
            bank = int(rng.integers(0, cfg.psum_banks))
            prog.drain(bank, 0, cfg.words, label="mid-way")
    for bank in range(cfg.psum_banks):
        prog.drain(bank, 0, cfg.words, label="final")
    tb = TensorEngineTB(dut, _gaps())
    await tb.start()
    dut._log.info("random commands: n=%d, %d phases, seed %d", n, len(prog.phases),
                  tbutil.seed())
    await tb.run(prog)


@cocotb.test(**tbutil.timeout(5))
async def back_to_back(dut):
    """No gaps, one phase: the hazards only a full-rate stream shows. Accumulating
    multiplications of one or two columns into the words just written (read-after-write
    through the adder), and a LOAD_STATIONARY right after a one-column multiplication (its
    rows go in while the swap wavefront of that column still runs through the array). Each
    drain response is taken two cycles after its request (the drain port's latency)."""
    cfg = _config()
    rng = tbutil.rng(8)
    n, fmts = cfg.n, list(cfg.formats)
    prog = TensorEngineProgram(cfg, junk=rng)
    written = []
    for rep in range(6):
        k, m = int(rng.integers(1, n + 1)), int(rng.integers(1, n + 1))
        sfmt, mfmt = str(rng.choice(fmts)), str(rng.choice(fmts))
        prog.load_stationary(vectors.operands(sfmt, rng, (k, m), 0.05), sfmt)
        f = 1 + rep % 2
        bank, addr = rep % cfg.psum_banks, int(rng.integers(0, cfg.words - f + 1))
        for i in range(4):
            prog.multiply_moving(vectors.operands(mfmt, rng, (k, f), 0.05), mfmt, bank=bank,
                                 addr=addr, accumulate=i > 0)
        written.append((bank, addr, f))
    for bank, addr, f in written:
        prog.drain(bank, addr, f, label="back-to-back")
    asked: list[int] = []
    answered: list[int] = []
    monitors = [streams.StreamMonitor(dut, name, on_beat=lambda _, cycles=cycles: cycles.append(
        streams.sim_cycles())) for name, cycles in (("drain_req", asked),
                                                      ("drain_resp", answered))]
    tb = TensorEngineTB(dut, 0.0)
    await tb.start()
    await tb.run(prog)
    for monitor in monitors:
        monitor.stop()
    # The drain port's latency (TensorEngine's docstring, DRAIN_LATENCY: two cycles, which
    # the core's activation feeder counts on): a response that many cycles after its request
    # is taken, when the response is never held back.
    late = [(a, b) for a, b in zip(asked, answered, strict=True) if b - a != DRAIN_LATENCY]
    assert not late, (f"drain responses not {DRAIN_LATENCY} cycles after their requests: "
                      f"{late[:4]}")


@cocotb.test(**tbutil.timeout(5))
async def hidden_loads(dut):
    """The background weight load, counted in cycles: LOAD_STATIONARY / MULTIPLY_MOVING pairs
    of random k (1..n rows) and f (1..2n columns), streams never paused, no accumulation (so
    no PSUM hazard waits). The gap between the last column of one multiplication and the
    first of the next must be exactly ``max(0, max(k_next, 2) − f)``: none when the
    multiplication before a tile has at least its k columns (and 2: the LOAD_STATIONARY and
    the next MULTIPLY_MOVING take a cycle each to dispatch), so always when it has n >= 2;
    the shortfall otherwise. Results bit-exact as everywhere."""
    cfg = _config()
    rng = tbutil.rng(9)
    n, fmts = cfg.n, list(cfg.formats)
    prog = TensorEngineProgram(cfg, junk=rng)
    shapes = [(n, n)] + [(int(rng.integers(1, n + 1)), int(rng.integers(1, 2 * n + 1)))
                         for _ in range(15)]
    shapes[1:4] = [(n, n), (1, 1), (n, 1)]  # a full tile behind n columns, then a short one
    # Each multiplication writes fresh PSUM words (bank by bank); once PSUM is full the
    # program drains it, and the next multiplication starts a new phase (after idle).
    written, bank, addr, new_phase = [], 0, 0, set()
    for i, (k, f) in enumerate(shapes):
        sfmt, mfmt = fmts[i % len(fmts)], fmts[(i // len(fmts)) % len(fmts)]
        f = min(f, cfg.words)
        if addr + f > cfg.words:
            bank, addr = bank + 1, 0
        if bank == cfg.psum_banks:
            for b, a, w in written:
                prog.drain(b, a, w, label=f"hidden loads before {i}")
            written, bank, addr = [], 0, 0
            new_phase.add(i)
        m = int(rng.integers(1, n + 1))
        prog.load_stationary(vectors.operands(sfmt, rng, (k, m), 0.05), sfmt)
        prog.multiply_moving(vectors.operands(mfmt, rng, (k, f), 0.05), mfmt, bank=bank,
                             addr=addr, accumulate=False)
        written.append((bank, addr, f))
        addr += f
        shapes[i] = (k, f)
    for b, a, w in written:
        prog.drain(b, a, w, label="hidden loads, last")
    taken: list[int] = []
    monitor = streams.StreamMonitor(dut, "moving", on_beat=lambda _: taken.append(
        streams.sim_cycles()))
    tb = TensorEngineTB(dut, 0.0)
    await tb.start()
    await tb.run(prog)
    monitor.stop()
    # Within one phase the multiplications follow each other; compare each gap.
    starts, col = [], 0
    for _, f in shapes:
        starts.append(col)
        col += f
    assert len(taken) == col, (len(taken), col)
    errors = []
    for i in range(1, len(shapes)):
        if i in new_phase:
            continue  # the testbench waited for idle and drained in between
        k, _ = shapes[i]
        f_prev = shapes[i - 1][1]
        gap = taken[starts[i]] - taken[starts[i] - 1] - 1
        want = max(0, max(k, 2) - f_prev)  # two commands to dispatch, one cycle each
        if gap != want:
            errors.append(f"multiplication {i} (k={k}, after f={f_prev}): {gap} idle "
                          f"cycles, want {want}")
    assert not errors, (f"seed {tbutil.seed()}, n={n}, add_stages "
                        f"{_engine_params().get('add_stages', 6)}:\n  " + "\n  ".join(errors))


def class_representatives(fmt: str) -> np.ndarray:
    """One value of every special-value class of ``fmt`` (both signs where a class has two):
    ±0, ± a subnormal, ± a normal, ± max finite, ±inf (formats that have it), NaN."""
    from golden.formats import get_format

    f = get_format(fmt)
    mags = [0, f.min_subnormal_bits, f.max_subnormal_bits, f.one_bits,
            f.one_bits | (1 << (f.man_bits - 1)), f.max_finite_bits]
    if f.has_inf:
        mags.append(f.inf_bits)
    values = [b for m in mags for b in (m, m | f.sign_mask)] + [f.canonical_nan_bits]
    return np.array(values, dtype=np.int64)


@cocotb.test(**tbutil.timeout(20))
async def special_products(dut):
    """Every class pair multiplied, for every (stationary, moving) dtype pair the engine
    takes: each representative of :func:`class_representatives` as a stationary value times
    every representative as moving values (0 x inf, inf x -max, NaN x 0, subnormal x max, ...),
    summed over K = 2 rows whose moving values run in opposite orders (inf + -inf, max + max
    overflowing to inf); PSUM bit-exact with golden."""
    cfg = _config()
    n, fmts = cfg.n, list(cfg.formats)
    prog = TensorEngineProgram(cfg, junk=tbutil.rng(9))
    k = min(2, n)
    step = 0
    for sfmt in fmts:
        for mfmt in fmts:
            moving_reps = class_representatives(mfmt)
            for sv in class_representatives(sfmt):
                prog.load_stationary(np.full((k, 1), sv, dtype=np.int64), sfmt)
                for lo in range(0, len(moving_reps), cfg.words):
                    chunk = moving_reps[lo:lo + cfg.words]
                    moving = np.stack([chunk, chunk[::-1]][:k])
                    bank = step % cfg.psum_banks
                    step += 1
                    prog.multiply_moving(moving, mfmt, bank=bank, addr=0, accumulate=False)
                    prog.drain(bank, 0, len(chunk), label=f"{sfmt} x {mfmt}")
    tb = TensorEngineTB(dut, 0.0)
    await tb.start()
    dut._log.info("special products: %d phases, seed %d", len(prog.phases), tbutil.seed())
    await tb.run(prog)


@cocotb.test(**tbutil.timeout(5))
async def illegal_commands(dut):
    """Illegal commands (and drain requests outside PSUM) set ``error`` and are dropped without
    taking data: a valid program around them still gives the golden PSUM."""
    cfg = _config()
    rng = tbutil.rng(9)
    n, words, banks = cfg.n, cfg.words, cfg.psum_banks
    prog = TensorEngineProgram(cfg, junk=rng)
    from hdl.tensor_engine import Opcode

    mm = Opcode.MULTIPLY_MOVING
    bad = [prog.raw_command(op=mm, fmt=0, k=1, f=1)]  # before any LOAD_STATIONARY
    prog.phases[-1].cmds += bad
    prog.load_stationary(vectors.operands("bf16", rng, (n, n), 0.0), "bf16")
    prog.phases[-1].cmds += [
        prog.raw_command(k=0, m=1),  # LOAD_STATIONARY with k = 0
        prog.raw_command(k=1, m=0),  # ... m = 0
        prog.raw_command(fmt=3, k=1, m=1),  # reserved format
        prog.raw_command(op=mm, fmt=0, k=max(n - 1, 0), f=1),  # k differs from the LS's
        prog.raw_command(op=mm, fmt=0, k=n, f=0),  # f = 0
        prog.raw_command(op=mm, fmt=0, k=n, f=words, addr=1 if words > 1 else 0,
                         bank=banks if banks & (banks - 1) else 0),  # beyond the bank / PSUM
    ]
    prog.multiply_moving(vectors.operands("bf16", rng, (n, 2), 0.0), "bf16", bank=0, addr=0,
                         accumulate=False)
    prog.drain(0, 0, 2, label="after illegal commands")
    if banks & (banks - 1) or words & (words - 1):  # a request outside PSUM is encodable
        ph = prog.phases[-1]
        ph.drains.append(prog.raw_drain(banks if banks & (banks - 1) else 0,
                                        words if words & (words - 1) else 0))
        ph.expected.append(np.zeros(n, dtype=np.uint32))
        ph.defined.append(np.ones(n, dtype=bool))
        ph.where.append("drain request outside PSUM")
    tb = TensorEngineTB(dut, _gaps())
    await tb.start()
    await tb.run(prog, expect_error=True)


def _sparse_tile(rng, cfg, p: str, sfmt: str):
    """A random compressed tile of pattern ``p``: (values, tags, K, M, the rows of K no column
    keeps)."""
    pat = pattern(p)
    k = int(rng.choice([1, pat.m - 1, pat.ratio * cfg.n, int(rng.integers(1, pat.ratio
                                                                            * cfg.n + 1))]))
    m = int(rng.integers(1, cfg.n + 1))
    mask = vectors.sparse_mask(rng, pat, k, m)
    values, tags = compress(vectors.operands(sfmt, rng, (k, m), 0.1), sfmt, mask, pat)
    return values, tags, k, m, np.flatnonzero(~mask.any(axis=1))


@cocotb.test(**tbutil.timeout(60))
async def sparse_commands(dut):
    """A sparse engine: random compressed tiles of every pattern it takes (K = 1, a short last
    group, R·n, random), dense tiles between them, one to three multiplications each, every
    format pair, overwrite and accumulate; the moving tile's rows that no column keeps hold
    inf and NaN (they must not reach a sum), the kept ones special values; random gaps."""
    cfg = _config()
    rng = tbutil.rng(11)
    fmts = list(cfg.formats)
    prog = TensorEngineProgram(cfg, junk=rng)
    count = int(os.environ.get("NCLITE_TE_COMMANDS", "24"))
    modes = [*cfg.sparsity, "dense"]
    for i in range(count):
        p = modes[i % len(modes)]
        sfmt, mfmt = str(rng.choice(fmts)), str(rng.choice(fmts))
        if p == "dense":
            k = int(rng.integers(1, cfg.n + 1))
            prog.load_stationary(vectors.operands(sfmt, rng, (k, int(rng.integers(
                1, cfg.n + 1))), 0.1), sfmt)
            pruned = np.zeros(0, int)
        else:
            values, tags, k, _, pruned = _sparse_tile(rng, cfg, p, sfmt)
            prog.load_stationary_sparse(values, tags, sfmt, p, k)
        for _ in range(int(rng.choice([1, 2, 3]))):
            f = int(rng.integers(1, cfg.words + 1))
            mv = vectors.operands(mfmt, rng, (k, f), 0.1)
            if pruned.size:
                specials = vectors.special_bits(mfmt)
                nan_inf = specials[np.isin(specials, to_bits(np.array(
                    [np.inf, -np.inf, np.nan]), mfmt))]
                mv[pruned] = rng.choice(nan_inf if nan_inf.size else specials,
                                        (pruned.size, f))
            prog.multiply_moving(mv, mfmt, bank=int(rng.integers(0, cfg.psum_banks)),
                                 addr=int(rng.integers(0, cfg.words - f + 1)) if f < cfg.words
                                 else 0, accumulate=bool(rng.random() < 0.5))
    for bank in range(cfg.psum_banks):
        prog.drain(bank, 0, cfg.words, label="final")
    tb = TensorEngineTB(dut, _gaps())
    await tb.start()
    dut._log.info("sparse commands: %s, n=%d, %d phases, seed %d", cfg.sparsity, cfg.n,
                  len(prog.phases), tbutil.seed())
    await tb.run(prog)


@cocotb.test(**tbutil.timeout(20))
async def sparse_bad_tags(dut):
    """A sparse engine's error path: for each pattern, a tile whose tags break it (a tag past
    its group, then tags that do not increase) sets ``error`` and ``tags_bad`` and is
    forgotten (the MULTIPLY_MOVING after it is dropped, taking no data); a reserved sparsity
    and a K of more slots than rows are dropped; nothing hangs, and a good tile after it
    gives the golden PSUM (``tags_bad`` low again)."""
    cfg = _config()
    rng = tbutil.rng(12)
    from hdl.tensor_engine import Opcode

    tb = TensorEngineTB(dut, _gaps())
    await tb.start()
    for i, p in enumerate(cfg.sparsity * 2):
        pat = pattern(p)
        past = i < len(cfg.sparsity)
        while True:
            values, tags, k, m, _ = _sparse_tile(rng, cfg, p, "bf16")
            # A tag past the last group: m (4 bits hold it below 16), or its rows when short.
            tag = pat.m if pat.m < 16 else k - (k - 1) // pat.m * pat.m
            if (tag < 16) if past else values.shape[0] >= 2:
                break
        bad = tags.copy()
        col = int(rng.integers(0, m))
        if past:
            bad[-1, col] = tag
        else:
            bad[1, col] = bad[0, col]  # slot 1 repeats slot 0 (both in group 0: n >= 2)
        prog = TensorEngineProgram(cfg, junk=rng)
        prog.load_stationary_sparse(values, bad, "bf16", p, k, check=False)
        prog.phases[-1].cmds += [
            prog.raw_command(op=Opcode.MULTIPLY_MOVING, fmt=0, k=k, f=1),  # no tile: dropped
            prog.raw_command(k=pat.ratio * cfg.n + 1, m=1, sparsity=SPARSITY_CODES[p]),
            prog.raw_command(k=1, m=1, sparsity=5),  # reserved
        ]
        prog.drain(0, 0, 1, label="after bad tags")
        await tb.run(prog, expect_error=True)
        assert dut.tags_bad.value == 1, f"{p}: tags_bad low after bad tags {bad.tolist()}"
        good = TensorEngineProgram(cfg, junk=rng)
        good.load_stationary_sparse(values, tags, "bf16", p, k)
        good.multiply_moving(vectors.operands("bf16", rng, (k, 2), 0.05), "bf16", bank=0,
                             addr=0, accumulate=False)
        good.drain(0, 0, 2, label=f"{p} after bad tags")
        await tb.run(good, expect_error=True)  # error is sticky
        assert dut.tags_bad.value == 0
        await tbutil.reset(dut)


@cocotb.test(**tbutil.timeout(5 + 5 * int(os.environ.get('NCLITE_TE_GEMMS', '3'))))
async def random_gemms(dut):
    cfg = _config()
    rng = tbutil.rng(6)
    n, fmts = cfg.n, list(cfg.formats)
    prog = TensorEngineProgram(cfg, junk=rng)
    shapes = [(1, 1, 1), (n + 1, 2 * n + 1, 3), (n, n, cfg.words + 1)]
    for _ in range(int(os.environ.get("NCLITE_TE_GEMMS", "3"))):
        shapes.append(tuple(int(rng.integers(1, 3 * n + 2)) for _ in range(3)))
    for m, k, f in shapes:
        afmt, bfmt = str(rng.choice(fmts)), str(rng.choice(fmts))
        a = vectors.operands(afmt, rng, (k, m), 0.05)
        b = vectors.operands(bfmt, rng, (k, f), 0.05)
        gemm_program(cfg, a, afmt, b, bfmt, prog)
    tb = TensorEngineTB(dut, _gaps())
    await tb.start()
    dut._log.info("GEMMs %s on n=%d, seed %d", shapes, n, tbutil.seed())
    await tb.run(prog)


def _gemm_timeout_ms() -> float:
    """gemm's limit: 50 ns (five cycles) for every N multiply-accumulates of NCLITE_GEMM's
    shape (N times the time of N² a cycle, the engine's full rate), plus 5 ms."""
    spec = json.loads(os.environ.get("NCLITE_GEMM", "{}"))
    n = _engine_params().get("n", 4)
    m, k, f = spec.get("m", 2 * n), spec.get("k", 2 * n), spec.get("f", 4 * n)
    return 5 + 50e-6 * m * k * f / n


@cocotb.test(**tbutil.timeout(_gemm_timeout_ms()))
async def gemm(dut):
    """One GEMM from NCLITE_GEMM; its figures go to NCLITE_GEMM_OUT."""
    spec = json.loads(os.environ.get("NCLITE_GEMM", "{}"))
    cfg = _config()
    rng = tbutil.rng(7)
    m, k, f = spec.get("m", 2 * cfg.n), spec.get("k", 2 * cfg.n), spec.get("f", 4 * cfg.n)
    afmt, bfmt = spec.get("a_fmt", "bf16"), spec.get("b_fmt", "bf16")
    # Data as a GEMM in a model would have it: normally distributed, finite (the special
    # values are the random tests' business).
    a = to_bits(rng.standard_normal((k, m)), afmt).astype(np.int64)
    b = to_bits(rng.standard_normal((k, f)), bfmt).astype(np.int64)
    sparsity = spec.get("sparsity")
    mask = magnitude_mask(a, afmt, sparsity) if sparsity else None
    prog = gemm_program(cfg, a, afmt, b, bfmt, sparsity=sparsity, mask=mask)
    tb = TensorEngineTB(dut, float(spec.get("gaps", 0.0)))
    await tb.start()
    t0 = time.perf_counter()
    error = None
    try:
        await tb.run(prog)
    except AssertionError as exc:
        error = str(exc)
    wall = time.perf_counter() - t0
    macs = sum(ph.macs for ph in prog.phases)
    out = {
        "n": cfg.n, "m": m, "k": k, "f": f, "a_fmt": afmt, "b_fmt": bfmt,
        "sparsity": sparsity,
        "simulator": tbutil.simulator(), "seed": tbutil.seed(), "bit_exact": error is None,
        "error": error, "macs": macs, "compute_cycles": tb.compute_cycles,
        "drain_cycles": tb.drain_cycles, "cycles": tb.cycles,
        "utilization": macs / (cfg.n ** 2 * tb.compute_cycles),
        "sim_wall_s": wall, "sim_cycles_per_s": tb.cycles / wall,
        "a_bits": a.tolist() if spec.get("return_data") else None,
        "b_bits": b.tolist() if spec.get("return_data") else None,
    }
    with open(os.environ["NCLITE_GEMM_OUT"], "w") as fh:
        json.dump(out, fh)
    assert error is None, error


async def _read_psum(tb: TensorEngineTB, n: int, drain_layout_encode, words) -> list:
    """The PSUM rows at ``words`` [(bank, addr)], through the testbench's drain streams."""
    tb.sources["drain_req"].send(drain_layout_encode(*w) for w in words)
    mask = (1 << 32) - 1
    rows = []
    for _ in words:
        word = await tb.drain_resp.recv()
        rows.append([(word >> (32 * i)) & mask for i in range(n)])
    return rows


@cocotb.test(timeout_time=2, timeout_unit="ms")
async def reset_midway(dut):
    """Reset in the middle of a multiplication, of its pipeline tail and of a PSUM drain."""
    from hdl.tensor_engine import Opcode, TensorEngine

    cfg = _config()
    rng = tbutil.rng(10)
    n, fmts, words, banks = cfg.n, list(cfg.formats), cfg.words, cfg.psum_banks
    latency = TensorEngine(**_engine_params()).latency
    tb = TensorEngineTB(dut, _gaps())
    await tb.start()
    for rnd, where in enumerate(("moving columns", "pipeline tail", "PSUM drain")):
        # The operation to interrupt: error set first, then one tile and a few multiplications.
        prog = TensorEngineProgram(cfg, junk=rng)
        prog.phases[-1].cmds.append(prog.raw_command(fmt=3, k=1, m=1))  # reserved: error
        k, m = int(rng.integers(1, n + 1)), int(rng.integers(1, n + 1))
        sfmt, mfmt = str(rng.choice(fmts)), str(rng.choice(fmts))
        prog.load_stationary(vectors.operands(sfmt, rng, (k, m), 0.05), sfmt)
        targets = []  # (bank, addr) of every moving column, in order
        for _ in range(3):
            f = int(rng.integers(max(1, words // 2), words + 1))
            bank, addr = int(rng.integers(0, banks)), int(rng.integers(0, words - f + 1))
            prog.multiply_moving(vectors.operands(mfmt, rng, (k, f), 0.05), mfmt, bank=bank,
                                 addr=addr, accumulate=bool(rng.random() < 0.5))
            targets += [(bank, addr + j) for j in range(f)]
        prog.drain(0, 0, words, label="interrupted")
        task = cocotb.start_soon(tb.run(prog, expect_error=True))
        moving, drain_req = tb.sources["moving"], tb.sources["drain_req"]
        if where == "moving columns":
            await moving.wait_count(moving.count + int(rng.integers(1, len(targets))))
            extra = int(rng.integers(0, 3))
        elif where == "pipeline tail":
            await moving.wait_count(moving.count + len(targets))
            extra = int(rng.integers(0, latency - 1))
        else:
            await drain_req.wait_count(drain_req.count + int(rng.integers(1, words)))
            extra = int(rng.integers(0, 3))
        await streams.wait_cycles(extra, clock=dut.clk)
        assert not task.done(), f"round {rnd}: the operation ended before the reset"
        await tbutil.reset_midway(dut, int(rng.integers(1, 5)), tasks=[task], clear=[tb])
        # Right away, most recent columns first: no interrupted column may land in PSUM now.
        await ReadOnly()
        assert not dut.busy.value and not dut.error.value and not dut.drain_resp__valid.value, \
            (f"round {rnd} ({where}): busy {dut.busy.value}, error {dut.error.value}, "
             f"drain_resp.valid {dut.drain_resp__valid.value} after the reset "
             f"(seed {tbutil.seed()})")
        order = list(dict.fromkeys(reversed(targets)))
        first = await _read_psum(tb, n, prog.raw_drain, order)
        await ClockCycles(dut.clk, latency + 2)
        again = await _read_psum(tb, n, prog.raw_drain, order)
        changed = [w for w, a, b in zip(order, first, again, strict=True) if a != b]
        assert not changed, (f"round {rnd} ({where}): PSUM words {changed[:4]} were written "
                             f"after the reset (seed {tbutil.seed()}, {tbutil.simulator()})")
        await FallingEdge(dut.clk)
        await tbutil.expect_quiet(dut, ["busy", "error", "weights__ready", "moving__ready"], 2,
                                  f"in the {where}")
        if rnd == 0:
            # The old stationary tile is gone: a MULTIPLY_MOVING now is illegal, takes nothing.
            dut.cmd__payload.value = prog.raw_command(op=Opcode.MULTIPLY_MOVING, fmt=0, k=k, f=1)
            dut.cmd__valid.value = 1
            dut.moving__payload.value = 0
            dut.moving__valid.value = 1
            await ReadOnly()
            assert dut.cmd__ready.value, "the MULTIPLY_MOVING after the reset was not taken"
            await FallingEdge(dut.clk)
            dut.cmd__valid.value = 0
            for _ in range(4):
                await ReadOnly()
                assert not dut.moving__ready.value and not dut.busy.value, \
                    "a MULTIPLY_MOVING after the reset used the old stationary tile"
                await FallingEdge(dut.clk)
            dut.moving__valid.value = 0
            assert dut.error.value, "a MULTIPLY_MOVING with no stationary tile after the reset " \
                "did not set error"
            await tbutil.reset_midway(dut, 1)
        # A fresh GEMM, bit-exact, error clear.
        fresh = TensorEngineProgram(cfg, junk=rng)
        afmt, bfmt = str(rng.choice(fmts)), str(rng.choice(fmts))
        mm, kk, ff = (int(rng.integers(1, 2 * n + 1)) for _ in range(3))
        gemm_program(cfg, vectors.operands(afmt, rng, (kk, mm), 0.05), afmt,
                     vectors.operands(bfmt, rng, (kk, ff), 0.05), bfmt, fresh)
        await tb.run(fresh)
    dut._log.info("reset in the middle: 3 rounds, n=%d, seed %d", n, tbutil.seed())
