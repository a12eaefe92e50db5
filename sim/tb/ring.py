"""cocotb testbench: ``hdl.ring.CollectiveRing`` against ``golden.collective``, bit for bit.

The testbench keeps a model of every rank's whole memory. Before a collective it may load new
data through the ring's host port; it gives every rank the command through that rank's
``cmd`` stream (a :class:`sim.tb.streams.StreamSource` per rank, each rank starting after a
random delay, so links fill and push back while a neighbour has not started), waits for
``idle`` under a watchdog (:func:`sim.tb.streams.wait_until`), reads back the buffer with a
guard row on each side and compares every word of every rank with the model, which ran
``golden.collective.run_collective`` on the buffer (lanes past ``n`` in the last row and
rows outside it must be unchanged).

Tests (selected by the runner's ``testcase``):

* ``random_collectives`` — ``NCLITE_COLLECTIVES`` (default 10) back-to-back collectives of
  random kind, size and place, without reset, some queued two or three at a time (a rank
  starts the next while its neighbours still finish the last; checked after the batch):
  n = 1, P·W ± 1 and random sizes up to ``NCLITE_MAX_WORDS`` (default: what the memory
  holds, at most 3000); data with special values (±0, subnormals, ±inf, NaNs, max/min, near
  ties), fresh or left from the previous collective; link latency and stall rate changed at
  random between collectives.
* ``illegal_commands`` — a reserved op, n = 0, a buffer past the memory and an n larger
  than the memory (the widest value of the field): each sets
  ``error`` on every rank, takes no data, leaves memory alone; a legal all-reduce still works.
* ``watchdog`` — ranks given different sizes wait for each other forever: the testbench's
  watchdog must turn that into an ``AssertionError`` naming the collective and the busy
  ranks (before the engines' own link watchdog, when that is longer, fires).
* ``link_timeout`` — the engines' link watchdog (``watchdog_cycles`` = T): one rank never
  joins an all-reduce (then an all-to-all), so the link into it stops taking beats (its ready
  never rises again once the link is full) and the link out of it never offers one (valid
  never rises). Every other rank must raise ``timeout`` exactly T + 1 cycles after the last
  beat on either of its links (watched on the engines' ports; an all-to-all's copy of the
  rank's own chunk counts as progress too, so up to that chunk's rows later), go idle and take
  no further beat; the absent rank stays idle without ``timeout``. Then an all-reduce on every
  rank, of fresh data, must be bit-exact: nothing of the abandoned one leaks into it (the
  stale beats in the links were flushed) -- and ``timeout`` falls as each rank takes it.
* ``reset_mid_collective`` — ``rst`` in the middle of an all-reduce (links full, beats in
  flight), at a random cycle: afterwards every engine is idle with no ``error`` or
  ``timeout``, and the next collectives (fresh data) are bit-exact.
* ``allreduce_runs`` — all-reduces given by ``NCLITE_AR`` (JSON: ``sizes``, ``latency``,
  ``stall_rate``, ``op``, ``data``: "uniform" or "mixed"), each checked bit-exact; writes
  the cycle counts to ``NCLITE_AR_OUT`` (``nclite allreduce`` and the benchmarks).
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.triggers import (
    ClockCycles,
    FallingEdge,
    ReadOnly,
    RisingEdge,
    SimTimeoutError,
    with_timeout,
)
from cocotb.utils import get_sim_time

from golden.collective import (
    ROUTED_OPS,
    CollectiveOp,
    chunk_words,
    out_rows,
    route_collective,
    run_collective,
)
from hdl.collective import DEFAULT_WATCHDOG_CYCLES, collective_command_layout, setup_cycles
from sim.tb import streams, tbutil, vectors
from sim.tb.streams import StreamSource

PERIOD_NS = 10
MASK32 = (1 << 32) - 1


class RingTB:
    """Drives a ``CollectiveRing``; scoreboard against :func:`run_collective`."""

    def __init__(self, dut):
        self.dut = dut
        p = tbutil.params()
        self.P = p["ranks"] if "ranks" in p else p["rows"] * p["cols"]
        self.W = p.get("link_width", 1)
        self.depth = p.get("depth", 1024)
        self.max_latency = p.get("max_latency", 16)
        self.rng = tbutil.rng(0xC011)
        layout = self.cmd_layout()
        self._off = {name: layout[name].offset for name, _ in layout}
        # The model: every word of every rank's memory (None = never written: X in Icarus).
        self.mem = np.zeros((self.P, self.depth * self.W), dtype=np.uint32)
        self.known = np.zeros(self.depth, dtype=bool)
        #: Each rank's command stream (``cmd__<r>``), valid low until a command is sent.
        self.sources = [StreamSource(dut, f"cmd__{r}") for r in range(self.P)]
        self.latency, self.stall_rate = 1, 0

    def cmd_layout(self):
        """The layout of a rank's ``cmd`` payload."""
        return collective_command_layout(self.depth, self.W)

    async def start(self):
        dut = self.dut
        dut.host_we.value = 0
        dut.host_addr.value = 0
        dut.host_wdata.value = 0
        dut.latency.value = 1
        dut.stall_rate.value = 0
        dut.stall_seed.value = 0
        dut.stall_reseed.value = 0
        await tbutil.start_clock(dut, PERIOD_NS)
        await tbutil.reset(dut)

    async def configure(self, latency: int, stall_rate: int, seed: int | None = None):
        """Set the links' latency and stall rate (only while idle and the links are empty)."""
        dut = self.dut
        await FallingEdge(dut.clk)
        dut.latency.value = latency
        dut.stall_rate.value = stall_rate
        dut.stall_seed.value = int(self.rng.integers(0, 1 << 32)) if seed is None else seed
        dut.stall_reseed.value = 1
        await FallingEdge(dut.clk)
        dut.stall_reseed.value = 0
        self.latency, self.stall_rate = latency, stall_rate

    async def load(self, first_row: int, words: np.ndarray):
        """Write rows from ``first_row`` on: ``words`` is (P, rows·W) uint32."""
        dut, P, W = self.dut, self.P, self.W
        rows = words.shape[1] // W
        for i in range(rows):
            await FallingEdge(dut.clk)
            packed = 0
            for r in range(P):
                for j in range(W):
                    packed |= int(words[r, i * W + j]) << (32 * (W * r + j))
            dut.host_addr.value = first_row + i
            dut.host_wdata.value = packed
            dut.host_we.value = 1
        await FallingEdge(dut.clk)
        dut.host_we.value = 0
        lo = first_row * W
        self.mem[:, lo:lo + rows * W] = words
        self.known[first_row:first_row + rows] = True

    async def dump(self, first_row: int, rows: int) -> np.ndarray:
        """Read rows ``first_row`` .. ``+ rows`` of every rank: (P, rows·W) uint32."""
        dut, P, W = self.dut, self.P, self.W
        out = np.zeros((P, rows * W), dtype=np.uint32)
        for i in range(rows + 1):
            await FallingEdge(dut.clk)
            if i < rows:
                dut.host_addr.value = first_row + i
            await ReadOnly()
            if i:
                word = int(dut.host_rdata.value)
                for r in range(P):
                    for j in range(W):
                        out[r, (i - 1) * W + j] = (word >> (32 * (W * r + j))) & MASK32
        return out

    def pack_cmd(self, op: int, addr: int, words: int, dst: int = 0, shift: int = 0) -> int:
        o = self._off
        return (op << o["op"] | addr << o["addr"] | words << o["words"] | dst << o["dst"]
                | shift << o["shift"])

    def watchdog_cycles(self, words: int) -> int:
        beats = -(-max(words, 1) // self.W)
        slow = 1 + 8 * self.stall_rate / 256  # stalls on both sides of every link
        # (an all-to-all takes (P - 1)/2 B cycles, a permute up to (P - 1) B: below 2(P + 1) B)
        return int(50 * self.P * self.max_latency + 100 + 4 * slow * (self.P + 1) * beats) + 200

    async def issue(self, cmds: list[tuple], *, skew: int = 0, what: str = "",
                    per_rank: list[list[int]] | None = None, limit: int | None = None) -> int:
        """Give every rank the commands ``cmds`` ((op, addr, words[, dst, shift]) each), each
        rank its next
        one as soon as it took the previous (so a rank may start command k + 1 while its
        neighbours still finish command k), rank r starting after a random delay of up to
        ``skew`` cycles; wait until all are idle; return the largest ``cycles`` of the ranks
        (the last command's). ``per_rank`` gives each rank its own packed commands instead
        (an illegal program, for the watchdog test). ``limit``: the testbench's watchdog
        (cycles), instead of one from the sizes."""
        dut, P = self.dut, self.P
        seqs = per_rank or [[self.pack_cmd(*c) for c in cmds]] * P
        delay = [int(self.rng.integers(0, skew + 1)) for _ in range(P)] if skew else [0] * P
        if limit is None:
            limit = sum(self.watchdog_cycles(c[2]) for c in cmds)
        taken = [src.count for src in self.sources]
        deadline = streams.sim_cycles() + limit
        # Rank r's first command is on its stream from the clock edge delay[r] + 1 edges from
        # now on (the earliest it can be taken is the edge after), its next ones each from the
        # edge that took the one before.
        at = 0
        for d in sorted(set(delay)):
            await ClockCycles(dut.clk, 1 + d - at)
            at = 1 + d
            for r in range(P):
                if delay[r] == d:
                    self.sources[r].send(seqs[r])
        try:
            for src in self.sources:
                left = deadline - streams.sim_cycles()
                if left <= 0 and not src.idle:
                    raise SimTimeoutError
                await with_timeout(src.wait(), max(left, 1) * PERIOD_NS, "ns")
        except SimTimeoutError:
            pos = [src.count - n for src, n in zip(self.sources, taken, strict=True)]
            raise AssertionError(
                f"collective hung: {what}: ranks took {pos} of {[len(s) for s in seqs]} "
                f"commands in {limit} cycles (latency {self.latency}, stall rate "
                f"{self.stall_rate}/256, seed {tbutil.seed()}, {tbutil.simulator()})") from None
        try:
            # Returns at the first clock edge that sees ``idle``: the one after the edge that
            # raised it, where ``cycles`` still reads what the engines counted.
            await streams.wait_until(dut.idle, 1, clock=dut.clk, timeout_cycles=limit,
                                     what=f"ring idle after {what}")
        except streams.StreamError:
            busy = int(dut.busy.value)
            raise AssertionError(
                f"collective hung: {what} still running after {limit} cycles on ranks "
                f"{[r for r in range(P) if busy >> r & 1]} (latency {self.latency}, "
                f"stall rate {self.stall_rate}/256, seed {tbutil.seed()}, "
                f"{tbutil.simulator()})") from None
        cycles = int(dut.cycles.value)
        return max((cycles >> (32 * r)) & MASK32 for r in range(P))

    def describe(self, op: CollectiveOp, addr: int, words: int, dst: int = 0,
                 shift: int = 0) -> str:
        to = ""
        if op in ROUTED_OPS:
            to = f" to row {dst}" + (f" shifted by {shift}" if op == CollectiveOp.PERMUTE else "")
        return f"{op.name} of {words} words at row {addr}{to}"

    def touched(self, op: CollectiveOp, addr: int, words: int, dst: int = 0,
                shift: int = 0) -> tuple[int, int]:
        """The rows a command may write (its buffer, or a routed op's destination region)."""
        if op in ROUTED_OPS:
            return dst, dst + out_rows(op, words, self.P, self.W)
        return addr, addr + -(-words // self.W)

    def model(self, op: CollectiveOp, addr: int, words: int, dst: int = 0,
              shift: int = 0) -> None:
        """Run a command on the memory model (golden.collective)."""
        P, W = self.P, self.W
        lo, hi = addr * W, addr * W + words
        src = [self.mem[r, lo:hi] for r in range(P)]
        if op in ROUTED_OPS:
            d0, d1 = self.touched(op, addr, words, dst, shift)
            new = route_collective(op, src, [self.mem[r, d0 * W:d1 * W] for r in range(P)],
                                   W, shift)
            lo, hi = d0 * W, d1 * W
        else:
            new = run_collective(op, src, W)
        for r, b in enumerate(new):
            self.mem[r, lo:hi] = b

    async def collectives(self, batch: list[tuple], *, skew: int = 0,
                          check: bool = True) -> int:
        """Run ``batch`` ((op, addr, words[, dst, shift]) each) back to back, update the
        model, compare every rank's rows touched (and a guard row each side); return the last
        one's cycles."""
        P, W = self.P, self.W
        what = " then ".join(self.describe(*c) for c in batch) + (
            f" on {P} ranks x {W} words/beat")
        cycles = await self.issue([(c[0].value, *c[1:]) for c in batch], skew=skew, what=what)
        timeout = int(self.dut.timeout.value)
        assert not timeout, (f"{what}: the link watchdog fired on ranks {timeout:0{P}b} "
                             f"(seed {tbutil.seed()}, {tbutil.simulator()})")
        for c in batch:
            self.model(*c)
        if not check:
            return cycles
        spans = [self.touched(*c) for c in batch]
        r0 = min(a for a, _ in spans)
        r1 = max(b for _, b in spans)
        g0 = r0 - 1 if r0 > 0 and self.known[r0 - 1] else r0
        g1 = r1 + 1 if r1 < self.depth and self.known[r1] else r1
        got = await self.dump(g0, g1 - g0)
        want = self.mem[:, g0 * W:g1 * W]
        bad = np.argwhere(got != want)
        if bad.size:
            op, addr, words = batch[-1][:3]
            lines = [f"rank {r} row {g0 + i // W} lane {i % W}: RTL 0x{int(got[r, i]):08x} "
                     f"golden 0x{int(want[r, i]):08x}" for r, i in bad[:8]]
            raise AssertionError(
                f"{what}: {len(bad)} words differ from golden (latency {self.latency}, "
                f"stall rate {self.stall_rate}/256, seed {tbutil.seed()}, "
                f"{tbutil.simulator()}; chunk bounds of the last: "
                f"{chunk_words(words, P, W)}):\n  " + "\n  ".join(lines))
        op, addr, words = batch[-1][:3]
        if op in (CollectiveOp.ALL_REDUCE, CollectiveOp.ALL_GATHER):  # every rank the same
            mine = got[:, addr * W - g0 * W:addr * W + words - g0 * W]
            for r in range(1, P):
                assert np.array_equal(mine[r], mine[0]), f"{what}: ranks 0 and {r} differ"
        return cycles

    async def collective(self, op: CollectiveOp, addr: int, words: int, dst: int = 0,
                         shift: int = 0, *, skew: int = 0, check: bool = True) -> int:
        """One collective: :meth:`collectives` with a batch of one."""
        return await self.collectives([(op, addr, words, dst, shift)], skew=skew, check=check)

    def data(self, words: int, rng: np.random.Generator, kind: str = "mixed") -> np.ndarray:
        """(P, words) fp32 test data. ``mixed``: either the contract's special values among
        wide random patterns, or narrow-range values whose sums round and tie; ``uniform``:
        uniform in [-1, 1) (finite sums, for the error-vs-float64 figures)."""
        P = self.P
        if kind == "uniform":
            return rng.uniform(-1, 1, (P, words)).astype(np.float32).view(np.uint32)
        if rng.random() < 0.4:
            d = vectors.operands("fp32", rng, (P, words), specials=0.02)
        else:
            u = rng.uniform(-1, 1, (P, words)).astype(np.float32)
            d = np.ldexp(u, int(rng.integers(-140, 120))).astype(np.float32).view(np.uint32)
            short = rng.random((P, words)) < 0.3  # short mantissas: exact sums and ties
            d = np.where(short, d & np.uint32(0xFFFF0000), d)
        return np.asarray(d, dtype=np.int64).astype(np.uint32)


def sizes_to_try(tb: RingTB, count: int, rng: np.random.Generator, max_words: int) -> list:
    P, W = tb.P, tb.W
    edge = [1, P * W - 1, P * W + 1, W + 1, 2 * P * W + W - 1]
    edge = [n for n in edge if 1 <= n <= max_words]
    out = edge[:count]
    while len(out) < count:
        out.append(int(rng.integers(1, max_words + 1)))
    return out


@cocotb.test(**tbutil.timeout(5 + 2 * int(os.environ.get('NCLITE_COLLECTIVES', '10'))))
async def random_collectives(dut):
    tb = RingTB(dut)
    await tb.start()
    rng = tbutil.rng(1)
    count = int(os.environ.get("NCLITE_COLLECTIVES", "10"))
    max_words = int(os.environ.get("NCLITE_MAX_WORDS", str(min(tb.depth * tb.W - 2 * tb.W,
                                                                3000))))
    ops = list(CollectiveOp)
    done = {op.name: 0 for op in ops}
    batches = 0
    sizes = sizes_to_try(tb, count, rng, max_words)
    i = 0
    while i < len(sizes):
        # Now and then two or three commands queued back to back: a rank starts the next one
        # while its neighbours still finish the last.
        k = 1 if i < 3 or rng.random() < 0.6 else int(rng.integers(2, 4))
        batch = []
        for words in sizes[i:i + k]:
            op = ops[i % len(ops)] if i < len(ops) else ops[int(rng.integers(0, len(ops)))]
            dst = shift = 0
            if op in ROUTED_OPS:  # a source and a destination apart
                words = min(words, (tb.depth - tb.P) // 2 * tb.W)
                rows = -(-words // tb.W)
                orows = out_rows(op, words, tb.P, tb.W)
                first, second = (rows, orows) if rng.random() < 0.5 else (orows, rows)
                a0 = int(rng.integers(0, tb.depth - rows - orows + 1))
                a1 = int(rng.integers(a0 + first, tb.depth - second + 1))
                addr, dst = (a0, a1) if first == rows else (a1, a0)
                shift = int(rng.integers(1, tb.P)) if op == CollectiveOp.PERMUTE else 0
                if not tb.known[dst:dst + orows].all():
                    await tb.load(dst, tb.data(orows * tb.W, rng))
            rows = -(-words // tb.W)
            if op not in ROUTED_OPS:
                addr = int(rng.integers(0, tb.depth - rows + 1))
            if not batch and (i == 0 or rng.random() < 0.6
                              or not tb.known[addr:addr + rows].all()):
                g0, g1 = max(addr - 1, 0), min(addr + rows + 1, tb.depth)
                full = tb.data((g1 - g0) * tb.W, rng)
                # Lanes past n in the last row: values that any write, even of x + 0, changes.
                end = (addr - g0) * tb.W + words
                full[:, end:(addr - g0 + rows) * tb.W] = np.array(
                    [0x80000000, 0x7F800001, 0xFFC00001], dtype=np.uint32)[:rows * tb.W - words]
                await tb.load(g0, full)
            elif not tb.known[addr:addr + rows].all():
                await tb.load(addr, tb.data(rows * tb.W, rng))
            batch.append((op, addr, words, dst, shift))
            done[op.name] += 1
            i += 1
        latency = int(rng.integers(1, tb.max_latency + 1))
        stall = int(rng.choice([0, 0, 26, 77, 128]))
        await tb.configure(latency, stall)
        skew = int(rng.choice([0, 3, 40]))
        cycles = await tb.collectives(batch, skew=skew)
        batches += len(batch) > 1
        dut._log.info("%s: latency=%d stall=%d/256 skew=%d: %d cycles, bit-exact",
                      " then ".join(tb.describe(*c) for c in batch), latency, stall, skew,
                      cycles)
    assert not int(dut.error.value), "an engine flagged an error on legal commands"
    dut._log.info("collectives done (seed %d): %s, %d queued batches", tbutil.seed(), done,
                  batches)


@cocotb.test(**tbutil.timeout(20))
async def illegal_commands(dut):
    tb = RingTB(dut)
    await tb.start()
    rng = tbutil.rng(2)
    P, W, depth = tb.P, tb.W, tb.depth
    words = min(3 * P * W + 1, depth * W)
    await tb.load(0, tb.data(depth * W, rng))
    a2a, perm = CollectiveOp.ALL_TO_ALL.value, CollectiveOp.PERMUTE.value
    rows = -(-words // W)
    orows = out_rows(CollectiveOp.ALL_TO_ALL, words, P, W)
    # (op, addr, words, dst, shift, why, found at intake: the engine does not start)
    bad = [(5, 0, words, rows, 1, "reserved op 5", True),
           (7, 0, words, rows, 1, "reserved op 7", True),
           (0, 0, 0, 0, 0, "n = 0", True),
           (perm, 0, words, rows, 0, "a permute's shift 0", True),
           (perm, 0, words, rows, P, f"a permute's shift {P}", True),
           (a2a, 0, words, depth - orows + 1, 0, "a destination past the memory", False),
           (a2a, 0, words, rows - 1, 0, "a destination meeting the source", False),
           (perm, rows, words, 1, 1, "a source meeting the destination", False)]
    if depth > 1:
        bad.append((0, depth - 1, 2 * W, 0, 0, "buffer past the memory", True))
    field_max = (1 << collective_command_layout(depth, W)["words"].width) - 1
    if field_max > depth * W:
        bad.append((1, 0, field_max, 0, 0, "n larger than the memory", True))
    for op, addr, n, dst, shift, why, at_intake in bad:
        assert int(dut.error.value) in (0, (1 << P) - 1)
        cycles_before = int(dut.cycles.value)
        await tb.issue([(op, addr, n, dst, shift)], what=why)
        assert int(dut.error.value) == (1 << P) - 1, f"{why}: error = {int(dut.error.value):b}"
        if at_intake:
            assert int(dut.cycles.value) == cycles_before, f"{why}: an engine ran"
        got = await tb.dump(0, depth)
        assert np.array_equal(got, tb.mem), f"{why}: memory changed"
    await tb.collective(CollectiveOp.ALL_REDUCE, 0, words)
    await tb.collective(CollectiveOp.ALL_TO_ALL, 0, words, rows)


@cocotb.test(**tbutil.timeout(20))
async def watchdog(dut):
    tb = RingTB(dut)
    await tb.start()
    P, W = tb.P, tb.W
    words = 4 * P * W
    await tb.load(0, tb.data(words, tbutil.rng(4)))
    sizes = [words] * P
    sizes[P - 1] = words // 2  # the last rank expects fewer beats: the others wait forever
    try:
        await tb.issue([(CollectiveOp.ALL_REDUCE.value, 0, words)], what="mismatched all-reduce",
                       per_rank=[[tb.pack_cmd(CollectiveOp.ALL_REDUCE.value, 0, n)]
                                 for n in sizes])
    except AssertionError as exc:
        msg = str(exc)
        assert "collective hung: mismatched all-reduce" in msg and "on ranks [" in msg, msg
        dut._log.info("watchdog fired as it should: %s", msg)
    else:
        # A link watchdog shorter than the testbench's: the engines gave up by themselves.
        timeout = int(dut.timeout.value)
        assert timeout, "ranks with different sizes finished: the watchdog test is void"
        dut._log.info("the engines' link watchdog fired first: timeout = %s", f"{timeout:b}")


def _allreduce_timeout_ms() -> float:
    """allreduce_runs' limit: its sizes' words on every rank at 50 ns (five cycles) each."""
    spec = json.loads(os.environ.get("NCLITE_AR", "{}"))
    return 5 + 50e-6 * sum(spec.get("sizes", [])) * tbutil.params().get("ranks", 8)


@cocotb.test(**tbutil.timeout(_allreduce_timeout_ms()))
async def allreduce_runs(dut):
    spec = json.loads(os.environ.get("NCLITE_AR", "{}"))
    tb = RingTB(dut)
    await tb.start()
    op = CollectiveOp[spec.get("op", "ALL_REDUCE")]
    shift = int(spec.get("shift", 0))
    await tb.configure(int(spec.get("latency", 1)), int(spec.get("stall_rate", 0)), seed=1)
    results = []
    for words in spec.get("sizes", [1024]):
        # Each size's data from the seed and the size alone: a run of n words gets the same
        # inputs whatever other sizes the same command runs (`nclite allreduce --n ... --n`).
        rng = np.random.default_rng([tbutil.seed(), 3, words])
        rows = -(-words // tb.W)
        span = rows + (out_rows(op, words, tb.P, tb.W) if op in ROUTED_OPS else 0)
        await tb.load(0, tb.data(span * tb.W, rng, spec.get("data", "uniform")))
        before = [tb.mem[r, :words].copy() for r in range(tb.P)]
        start = get_sim_time("ns")
        cycles = await tb.collective(op, 0, words, rows, shift)
        wall_cycles = int((get_sim_time("ns") - start) // PERIOD_NS)
        results.append({"words": words, "cycles": cycles, "issue_to_idle": wall_cycles,
                        "bit_exact": True,
                        "inputs": [b.tolist() for b in before] if spec.get("return_data")
                        else None,
                        "result": tb.mem[0, :words].tolist() if spec.get("return_data")
                        else None})
        dut._log.info("%s n=%d: %d cycles", op.name, words, cycles)
    out = os.environ.get("NCLITE_AR_OUT")
    if out:
        with open(out, "w") as fh:
            json.dump({"ranks": tb.P, "link_width": tb.W, "latency": tb.latency,
                       "stall_rate": tb.stall_rate, "op": op.name, "shift": shift,
                       "runs": results}, fh)


class LinkWatch:
    """Watches every engine's ``tx`` and ``rx`` handshakes (inside the ring) and ``timeout``,
    each cycle: the cycle of each rank's last beat and the cycle its ``timeout`` rose.

    A per-cycle sample on purpose, not a :class:`sim.tb.streams.StreamMonitor` per link: the
    check is a distance in cycles between events on 2P + 1 signals (a beat on either link of a
    rank, its ``timeout``), read here on one cycle count; the abort it checks empties the tx
    FIFO, withdrawing a beat the link has not taken (monitors would need ``check_rules`` off);
    and while the links stall, which is most of the T cycles this runs, a monitor of a stalled
    link wakes every cycle anyway, as this one coroutine does."""

    def __init__(self, dut, P):
        self.dut, self.P = dut, P
        eng = [getattr(dut, f"engine{r}") for r in range(P)]
        self.ports = [(e.tx__valid, e.tx__ready, e.rx__valid, e.rx__ready) for e in eng]
        self.last_beat = [None] * P
        self.rose = [None] * P
        self.beats_after = [0] * P  # beats seen after timeout rose
        self.cycle = 0
        self.task = cocotb.start_soon(self._watch())

    async def _watch(self):
        dut = self.dut
        while True:
            await ReadOnly()
            t = int(dut.timeout.value)
            for r, (tv, tr, rv, rr) in enumerate(self.ports):
                if self.rose[r] is None and t >> r & 1:
                    self.rose[r] = self.cycle
                beat = (tv.value and tr.value) or (rv.value and rr.value)
                if beat:
                    if self.rose[r] is None:
                        self.last_beat[r] = self.cycle
                    else:
                        self.beats_after[r] += 1
            await RisingEdge(dut.clk)
            self.cycle += 1


@cocotb.test(**tbutil.timeout(20))
async def link_timeout(dut):
    tb = RingTB(dut)
    await tb.start()
    P, W = tb.P, tb.W
    T = tbutil.params().get("watchdog_cycles", DEFAULT_WATCHDOG_CYCLES)
    assert T, "the ring needs a watchdog for this test"
    rng = tbutil.rng(6)
    await tb.configure(int(rng.integers(1, tb.max_latency + 1)), int(rng.choice([0, 26, 77])))
    # Enough beats that the link into the absent rank fills up (its step-0 chunk alone).
    words = min(P * W * (tb.max_latency + 6) + 1, tb.depth * W // 3)
    for op in (CollectiveOp.ALL_REDUCE, CollectiveOp.ALL_TO_ALL):
        await _link_timeout(tb, op, words, rng, T)
    assert not int(dut.timeout.value), "timeout still set after a collective completed"


async def _link_timeout(tb: RingTB, op: CollectiveOp, words: int, rng, T: int) -> None:
    """One rank never joins ``op``: the others time out; then fresh collectives work."""
    dut, P, W = tb.dut, tb.P, tb.W
    rows = -(-words // W)
    dst = rows
    # (the all-to-all after the timeout writes from row `rows` on: load that region too)
    span = rows + out_rows(CollectiveOp.ALL_TO_ALL, words, P, W)
    await tb.load(0, tb.data(span * W, rng))
    absent = int(rng.integers(0, P))
    watch = LinkWatch(dut, P)
    cmd = tb.pack_cmd(op.value, 0, words, dst)
    what = f"an {op.name} of {words} words without rank {absent}"
    await tb.issue([(op.value, 0, words, dst)], what=what,
                   limit=T + 50 * tb.max_latency + 4 * P * rows + 500,
                   per_rank=[[] if r == absent else [cmd] for r in range(P)])
    await ClockCycles(dut.clk, 4)
    watch.task.cancel()
    where = f"(seed {tbutil.seed()}, {tbutil.simulator()}, T = {T})"
    timeout = int(dut.timeout.value)
    want = ((1 << P) - 1) & ~(1 << absent)
    assert timeout == want, f"{what}: timeout = {timeout:0{P}b}, want {want:0{P}b} {where}"
    assert not int(dut.busy.value) and not int(dut.error.value), f"{what}: busy or error"
    setup = setup_cycles(P, tb.depth)
    for r in range(P):
        if r == absent:
            continue
        assert watch.last_beat[r] is not None, f"rank {r} never moved a beat {where}"
        # An all-to-all's copy of its own chunk also counts as progress: it may go on after
        # the last link beat, by at most that chunk's rows.
        late = watch.rose[r] - (watch.last_beat[r] + T + 1)
        copy = 0
        if op == CollectiveOp.ALL_TO_ALL:
            bounds = chunk_words(words, P, W)
            copy = -(-(bounds[r + 1] - bounds[r]) // W)
        assert 0 <= late <= copy, (
            f"rank {r}: last beat at cycle {watch.last_beat[r]}, timeout rose at "
            f"{watch.rose[r]}: not T + 1 = {T + 1} cycles later (+ up to {copy} rows of its "
            f"own chunk's copy) {where}")
        assert watch.beats_after[r] == 0, f"rank {r} moved beats after its timeout {where}"
        cycles = (int(dut.cycles.value) >> (32 * r)) & MASK32
        assert cycles >= setup + T, f"rank {r}: busy for {cycles} cycles only {where}"
    dut._log.info("%s: ranks %s timed out %s cycles after their last beat (T = %d)", what,
                  [r for r in range(P) if r != absent],
                  [watch.rose[r] - watch.last_beat[r] for r in range(P) if r != absent], T)
    # The abandoned buffers are undefined: fresh data, then collectives of every rank.
    await tb.load(0, tb.data(span * W, rng))
    for again in (CollectiveOp.ALL_REDUCE, CollectiveOp.ALL_GATHER, CollectiveOp.ALL_TO_ALL):
        await tb.collective(again, 0, words, rows, skew=int(rng.choice([0, 20])))


@cocotb.test(**tbutil.timeout(20))
async def reset_mid_collective(dut):
    tb = RingTB(dut)
    await tb.start()
    P, W = tb.P, tb.W
    rng = tbutil.rng(7)
    words = min(P * W * 24 + 3, tb.depth * W // 3)
    rows = -(-words // W)
    for op in (CollectiveOp.ALL_REDUCE, CollectiveOp.ALL_TO_ALL):
        await tb.configure(int(rng.integers(1, tb.max_latency + 1)), int(rng.choice([0, 77])))
        span = 3 * rows  # the destination's rows too (memories outlive a test)
        await tb.load(0, tb.data(span * W, rng))
        cmd = tb.pack_cmd(op.value, 0, words, rows)
        task = cocotb.start_soon(tb.issue([(op.value, 0, words, rows)],
                                          what=f"{op.name} reset midway", per_rank=[[cmd]] * P))
        # Into the beats: past the setup, before the end (at least (P - 1)/P rows cycles).
        at = setup_cycles(P, tb.depth) + P + int(rng.integers(2, max(3, rows // 2)))
        await ClockCycles(dut.clk, at)
        await FallingEdge(dut.clk)
        assert int(dut.busy.value) == (1 << P) - 1, f"not mid-{op.name} at cycle {at}"
        task.cancel()
        for src in tb.sources:
            src.clear()
        await tbutil.reset(dut)
        await FallingEdge(dut.clk)
        assert not int(dut.busy.value) and not int(dut.error.value) and \
            not int(dut.timeout.value), "engines not idle and clean after reset"
        dut._log.info("reset %d cycles into an %s of %d words: engines idle", at, op.name, words)
        # Memories keep their contents through reset; the buffers are undefined: reload.
        await tb.load(0, tb.data(span * W, rng))
        for again in (CollectiveOp.ALL_REDUCE, CollectiveOp.REDUCE_SCATTER,
                      CollectiveOp.PERMUTE):
            await tb.collective(again, 0, words, rows, 1, skew=int(rng.choice([0, 20])))
