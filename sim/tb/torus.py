"""cocotb testbench: ``hdl.torus.CollectiveTorus`` against ``golden.collective``, bit for bit.

The ring testbench's machinery (:class:`sim.tb.ring.RingTB`: the memory model of every node,
host loads and dumps, command streams with skewed starts, the watchdogs) on an R × C torus of
:class:`~hdl.torus.TorusNode` s. A torus collective is the sequence of sub-ring commands
``golden.collective.torus_schedule`` gives each node (its own addresses: a column's
all-reduce works on the node's chunk of the row's reduce-scatter); the testbench queues a
node's whole sequence on its stream at once, so a node starts its next step as soon as its
last one ended, while other rows and columns still run theirs. The model runs the same
schedule with ``golden.collective.run_torus_schedule``; every word of every node's touched
rows (and a guard row each side) is compared after each collective.

Tests (selected by the runner's ``testcase``):

* ``random_torus`` — collectives without reset: torus all-reduces (n = 1, a row's last
  chunk left empty, one row past C chunks), a torus all-to-all (n a multiple of R·C·W,
  through a scratch region), a single sub-ring command of each of the five ops along each
  dimension (a permute's shift below that ring's size), then ``NCLITE_COLLECTIVES`` (default
  4) of any kind; random sizes up to ``NCLITE_MAX_WORDS`` (default 1200), data with special
  values, random link latency, stalls and skew.
* ``illegal_torus`` — per dimension, a reserved op and a permute's shift equal to the ring's
  size (legal on the other dimension when it is larger), and a column all-to-all whose
  destination is past the memory: each sets ``error`` on every node and changes no memory;
  after a reset a torus all-reduce still works.
* ``link_timeout_torus`` — a column all-reduce that one node never joins: its column
  neighbours' link watchdogs (``watchdog_cycles``) give up (``timeout``), the other columns
  finish; then a torus all-reduce of fresh data on every node is bit-exact (the column links'
  stale beats were flushed).
* ``torus_runs`` — the torus collectives given by ``NCLITE_AR`` (JSON: ``sizes``, ``op``:
  ALL_REDUCE or ALL_TO_ALL, ``latency``, ``stall_rate``), each checked bit-exact; writes the
  cycles from the first command to the last node's idle to ``NCLITE_AR_OUT`` (``nclite
  allreduce --torus`` and the benchmarks).
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge
from cocotb.utils import get_sim_time

from golden.collective import (
    CollectiveOp,
    TorusStep,
    out_rows,
    run_torus_schedule,
    torus_schedule,
)
from golden.isa import CollectiveDim
from hdl.torus import torus_command_layout
from sim.tb import tbutil
from sim.tb.ring import PERIOD_NS, RingTB


class TorusTB(RingTB):
    """Drives a ``CollectiveTorus``; scoreboard against :func:`run_torus_schedule`."""

    def __init__(self, dut):
        p = tbutil.params()
        self.R, self.C = p["rows"], p["cols"]
        super().__init__(dut)

    def cmd_layout(self):
        return torus_command_layout(self.depth, self.W)

    def size(self, dim: CollectiveDim) -> int:
        """The ring size along ``dim``: C for a row, R for a column."""
        return self.C if dim == CollectiveDim.ROW else self.R

    def pack_step(self, step: TorusStep, shift: int = 0) -> int:
        return self.pack_cmd(int(step.op), step.addr, step.words, step.dst, shift) | (
            int(step.dim) << self._off["dim"])

    def touched(self, schedule: list[list[TorusStep]]) -> list[tuple[int, int]]:
        """The row ranges (first, past the last) the schedule's steps may write, merged."""
        spans = []
        for steps in schedule:
            for s in steps:
                if s.op in (CollectiveOp.ALL_TO_ALL, CollectiveOp.PERMUTE):
                    spans.append((s.dst, s.dst + out_rows(s.op, s.words, self.size(s.dim),
                                                          self.W)))
                else:
                    spans.append((s.addr, s.addr + -(-s.words // self.W)))
        merged: list[list[int]] = []
        for a, b in sorted(spans):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        return [(a, b) for a, b in merged]

    async def run(self, schedule: list[list[TorusStep]], what: str, *, shift: int = 0,
                  skew: int = 0) -> int:
        """Queue every node's steps, wait until all are idle, run the model and compare the
        touched rows (and a guard row each side) of every node; return the cycles from the
        first command offered to the edge that saw the torus idle."""
        P, W = self.P, self.W
        per_rank = [[self.pack_step(s, shift) for s in schedule[r]] for r in range(P)]
        limit = sum(self.watchdog_cycles(s.words) for s in schedule[0]) + 1000
        what = f"{what} on a {self.R}x{self.C} torus x {W} words/beat"
        start = get_sim_time("ns")
        await self.issue([], per_rank=per_rank, limit=limit, skew=skew, what=what)
        cycles = int((get_sim_time("ns") - start) // PERIOD_NS)
        assert not int(self.dut.timeout.value), (
            f"{what}: the link watchdog fired on nodes {int(self.dut.timeout.value):b} "
            f"(seed {tbutil.seed()}, {tbutil.simulator()})")
        run_torus_schedule(schedule, [self.mem[r] for r in range(P)], self.R, self.C, W,
                           shift=shift)
        for r0, r1 in self.touched(schedule):
            g0 = r0 - 1 if r0 > 0 and self.known[r0 - 1] else r0
            g1 = r1 + 1 if r1 < self.depth and self.known[r1] else r1
            self.known[r0:r1] = True
            got = await self.dump(g0, g1 - g0)
            want = self.mem[:, g0 * W:g1 * W]
            bad = np.argwhere(got != want)
            if bad.size:
                lines = [f"node {r} row {g0 + i // W} lane {i % W}: RTL "
                         f"0x{int(got[r, i]):08x} golden 0x{int(want[r, i]):08x}"
                         for r, i in bad[:8]]
                raise AssertionError(
                    f"{what}: {len(bad)} words differ from golden (latency {self.latency}, "
                    f"stall rate {self.stall_rate}/256, seed {tbutil.seed()}, "
                    f"{tbutil.simulator()}):\n  " + "\n  ".join(lines))
        return cycles

    async def torus(self, op: CollectiveOp, addr: int, words: int, *, dst: int = 0,
                    tmp: int = 0, skew: int = 0) -> int:
        """A torus all-reduce (in place at ``addr``) or all-to-all (``addr`` to ``dst``
        through ``tmp``): :meth:`run` of its :func:`torus_schedule`."""
        schedule = torus_schedule(op, words, self.R, self.C, self.W, addr=addr, dst=dst,
                                  tmp=tmp)
        what = f"torus {op.name} of {words} words at row {addr}" + (
            f" to row {dst} through row {tmp}" if op == CollectiveOp.ALL_TO_ALL else "")
        return await self.run(schedule, what, skew=skew)

    async def sub_ring(self, op: CollectiveOp, dim: CollectiveDim, addr: int, words: int,
                       dst: int = 0, shift: int = 0, *, skew: int = 0) -> int:
        """One command on every node, on the rings along ``dim``."""
        step = TorusStep(op, dim, addr, words, dst)
        what = f"{op.name} of {words} words at row {addr} along the {dim.name.lower()}s" + (
            f" to row {dst}" if op in (CollectiveOp.ALL_TO_ALL, CollectiveOp.PERMUTE) else "")
        return await self.run([[step]] * self.P, what, shift=shift, skew=skew)

    async def reset(self):
        await FallingEdge(self.dut.clk)
        await tbutil.reset(self.dut)


def _regions(rng, depth: int, sizes: list[int]) -> list[int]:
    """First rows of disjoint regions of ``sizes`` rows in ``depth`` rows, in random order."""
    order = rng.permutation(len(sizes))
    free = depth - sum(sizes)
    gaps = np.sort(rng.integers(0, free + 1, len(sizes)))
    at, out = 0, [0] * len(sizes)
    prev = 0
    for k, g in zip(order, gaps, strict=True):
        at += int(g) - prev
        prev = int(g)
        out[k] = at
        at += sizes[k]
    return out


def _plan(rng, extra: int) -> list[tuple]:
    """The cases of ``random_torus``: (kind, op, dim, edge) -- the all-reduce's edges (0, 1,
    2; None: a random size), an all-to-all, one sub-ring command of every op along every
    dimension, then ``extra`` of any kind."""
    plan = [("all_reduce", None, None, e) for e in range(3)]
    plan.append(("all_to_all", None, None, None))
    plan += [("sub_ring", op, dim, None) for op in CollectiveOp for dim in CollectiveDim]
    for _ in range(extra):
        kind = str(rng.choice(["all_reduce", "all_to_all", "sub_ring"]))
        plan.append((kind, CollectiveOp(int(rng.integers(0, 5))),
                     CollectiveDim(int(rng.integers(0, 2))), None))
    return plan


@cocotb.test(**tbutil.timeout(20 + 3 * int(os.environ.get("NCLITE_COLLECTIVES", "4"))))
async def random_torus(dut):
    tb = TorusTB(dut)
    await tb.start()
    rng = tbutil.rng(11)
    C, P, W, depth = tb.C, tb.P, tb.W, tb.depth
    max_words = min(depth * W // 3, int(os.environ.get("NCLITE_MAX_WORDS", "1200")))
    unit = P * W  # an all-to-all's n is a multiple of R * C * W
    done: dict[str, int] = {}
    for kind, op, dim, edge in _plan(rng, int(os.environ.get("NCLITE_COLLECTIVES", "4"))):
        latency = int(rng.integers(1, tb.max_latency + 1))
        await tb.configure(latency, int(rng.choice([0, 0, 26, 77, 128])))
        skew = int(rng.choice([0, 3, 40]))
        if kind == "all_reduce":
            # The edges first: one word; C - 1 rows less one word (a row's last chunk empty);
            # one word past C rows. Then any size.
            edges = [1, max((C - 1) * W - 1, 1), C * W + 1]
            words = edges[edge] if edge is not None else int(rng.integers(1, max_words))
            rows = -(-words // W)
            (addr,) = _regions(rng, depth, [rows])
            await tb.load(addr, tb.data(rows * W, rng))
            cycles = await tb.torus(CollectiveOp.ALL_REDUCE, addr, words, skew=skew)
            name = "torus ALL_REDUCE"
        elif kind == "all_to_all":  # through a scratch region
            words = unit * int(rng.integers(1, max(max_words // unit, 1) + 1))
            rows = words // W
            addr, tmp, dst = _regions(rng, depth, [rows] * 3)
            await tb.load(addr, tb.data(rows * W, rng))
            cycles = await tb.torus(CollectiveOp.ALL_TO_ALL, addr, words, dst=dst, tmp=tmp,
                                    skew=skew)
            name = "torus ALL_TO_ALL"
        else:  # one sub-ring command on every node
            words = int(rng.integers(1, max_words))
            rows = -(-words // W)
            shift = int(rng.integers(1, tb.size(dim))) if op == CollectiveOp.PERMUTE else 0
            dst = 0
            if op in (CollectiveOp.ALL_TO_ALL, CollectiveOp.PERMUTE):
                orows = out_rows(op, words, tb.size(dim), W)
                addr, dst = _regions(rng, depth, [rows, orows])
                if not tb.known[dst:dst + orows].all():
                    await tb.load(dst, tb.data(orows * W, rng))
            else:
                (addr,) = _regions(rng, depth, [rows])
            await tb.load(addr, tb.data(rows * W, rng))
            cycles = await tb.sub_ring(op, dim, addr, words, dst, shift, skew=skew)
            name = f"{op.name} along {dim.name}"
        done[name] = done.get(name, 0) + 1
        dut._log.info("%s of %d words: latency %d, skew %d: %d cycles, bit-exact", name, words,
                      latency, skew, cycles)
    assert not int(dut.error.value), "a node flagged an error on legal commands"
    assert len([k for k in done if " along " in k]) == 2 * len(CollectiveOp), done
    dut._log.info("torus collectives done (seed %d): %s", tbutil.seed(), done)


@cocotb.test(**tbutil.timeout(20))
async def illegal_torus(dut):
    tb = TorusTB(dut)
    await tb.start()
    rng = tbutil.rng(12)
    P, W, depth = tb.P, tb.W, tb.depth
    words = 3 * P * W
    rows = words // W
    await tb.load(0, tb.data(depth * W, rng))
    a2a, perm = CollectiveOp.ALL_TO_ALL, CollectiveOp.PERMUTE
    bad = []
    for dim in CollectiveDim:
        size = tb.size(dim)
        bad += [(5, dim, 0, words, rows, 1, f"reserved op 5 along the {dim.name}s"),
                (int(perm), dim, 0, words, rows, size,
                 f"a permute's shift {size} along the {dim.name}s")]
    orows = out_rows(a2a, words, tb.R, W)
    bad.append((int(a2a), CollectiveDim.COLUMN, 0, words, depth - orows + 1, 0,
                "a column all-to-all's destination past the memory"))
    for op, dim, addr, n, dst, shift, why in bad:
        await tb.reset()
        assert not int(dut.error.value)
        packed = tb.pack_cmd(op, addr, n, dst, shift) | int(dim) << tb._off["dim"]
        await tb.issue([], per_rank=[[packed]] * P, limit=2000, what=why)
        assert int(dut.error.value) == (1 << P) - 1, f"{why}: error = {int(dut.error.value):b}"
        got = await tb.dump(0, depth)
        assert np.array_equal(got, tb.mem), f"{why}: memory changed"
    if tb.C > tb.R:  # a shift of R is legal along the rows: the check is per dimension
        await tb.reset()
        await tb.sub_ring(perm, CollectiveDim.ROW, 0, words, rows, tb.R)
    await tb.reset()
    await tb.torus(CollectiveOp.ALL_REDUCE, 0, words)
    assert not int(dut.error.value)


@cocotb.test(**tbutil.timeout(20))
async def link_timeout_torus(dut):
    tb = TorusTB(dut)
    T = tbutil.params().get("watchdog_cycles", 0)
    assert T, "link_timeout_torus needs a build with a link watchdog"
    await tb.start()
    rng = tbutil.rng(14)
    R, C, P, W = tb.R, tb.C, tb.P, tb.W
    words = 8 * R * W
    rows = words // W
    await tb.load(0, tb.data(rows * W, rng))
    await tb.configure(3, 0)
    absent = int(rng.integers(0, P))  # never joins the column all-reduce
    column = [i * C + absent % C for i in range(R)]
    step = TorusStep(CollectiveOp.ALL_REDUCE, CollectiveDim.COLUMN, 0, words, 0)
    per_rank = [[] if r == absent else [tb.pack_step(step)] for r in range(P)]
    await tb.issue([], per_rank=per_rank, limit=4 * T + 2000,
                   what=f"a column all-reduce node {absent} never joins")
    timeout = int(dut.timeout.value)
    want = sum(1 << r for r in column if r != absent)
    assert timeout == want, (f"timeout = {timeout:0{P}b}, want {want:0{P}b} (node {absent}'s "
                             f"column {column} gives up, the others finish; seed "
                             f"{tbutil.seed()}, {tbutil.simulator()})")
    # The other columns finished: their words are the column all-reduce's (the model runs
    # those columns); the abandoned column's buffers are undefined: reload them all.
    await tb.load(0, tb.data(rows * W, rng))
    await tb.torus(CollectiveOp.ALL_REDUCE, 0, words)
    assert not int(dut.timeout.value), "timeout still set after a torus all-reduce"


def _runs_timeout_ms() -> float:
    spec = json.loads(os.environ.get("NCLITE_AR", "{}"))
    p = tbutil.params()
    return 5 + 60e-6 * sum(spec.get("sizes", [])) * p.get("rows", 2) * p.get("cols", 2)


@cocotb.test(**tbutil.timeout(_runs_timeout_ms()))
async def torus_runs(dut):
    spec = json.loads(os.environ.get("NCLITE_AR", "{}"))
    tb = TorusTB(dut)
    await tb.start()
    op = CollectiveOp[spec.get("op", "ALL_REDUCE")]
    await tb.configure(int(spec.get("latency", 1)), int(spec.get("stall_rate", 0)), seed=1)
    results = []
    for words in spec.get("sizes", [1024]):
        # Each size's data from the seed and the size alone (as sim.tb.ring's allreduce_runs).
        rng = np.random.default_rng([tbutil.seed(), 13, words])
        rows = -(-words // tb.W)
        await tb.load(0, tb.data(rows * tb.W, rng, spec.get("data", "uniform")))
        before = [tb.mem[r, :words].copy() for r in range(tb.P)]
        if op == CollectiveOp.ALL_TO_ALL:
            cycles = await tb.torus(op, 0, words, tmp=rows, dst=2 * rows)
        else:
            cycles = await tb.torus(op, 0, words)
        results.append({"words": words, "cycles": cycles, "bit_exact": True,
                        "inputs": [b.tolist() for b in before] if spec.get("return_data")
                        else None,
                        "result": tb.mem[0, :words].tolist() if spec.get("return_data")
                        else None})
        dut._log.info("torus %s n=%d: %d cycles", op.name, words, cycles)
    out = os.environ.get("NCLITE_AR_OUT")
    if out:
        with open(out, "w") as fh:
            json.dump({"rows": tb.R, "cols": tb.C, "link_width": tb.W,
                       "latency": tb.latency, "stall_rate": tb.stall_rate, "op": op.name,
                       "runs": results}, fh)
