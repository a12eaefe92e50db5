# amaranth: UnusedElaboratable=no
"""The routed collectives (all-to-all, permute) in Amaranth's simulator, on links the test
drives itself: bursts of stalls on chosen links, which ``hdl.ring.LinkModel`` (a stall
decided afresh every cycle) hardly ever produces. Regression tests for two bugs a review found:
a ring whose links and forward FIFOs all filled with beats for other ranks (a deadlock under
bursty stalls, with 4-deep forward FIFOs; they are P + 1 deep now), and a link watchdog that
counted the own chunk's local copy as silence (a short ``watchdog_cycles`` abandoned an
all-to-all whose only work left was that copy). Every result is compared with
``golden.collective`` word for word. (The cocotb ring tests, ``test_ring_rtl.py``, cover the
rest in Icarus and Verilator.)"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from golden.collective import CollectiveOp, out_rows, route_collective
from hdl.collective import CollectiveEngine, collective_command_layout


class _Engines(wiring.Component):
    """P engines with their memories; links, commands and a host port left to the test."""

    def __init__(self, ranks, link_width, depth, watchdog_cycles):
        self.engines = [CollectiveEngine(ranks=ranks, link_width=link_width, depth=depth,
                                         add_stages=0, watchdog_cycles=watchdog_cycles)
                        for _ in range(ranks)]
        self.depth, self.w = depth, link_width
        beat = self.engines[0].link_layout
        cmd = collective_command_layout(depth, link_width)
        super().__init__({
            "cmd": In(stream.Signature(cmd)).array(ranks),
            "tx": Out(stream.Signature(beat)).array(ranks),
            "rx": In(stream.Signature(beat)).array(ranks),
            "host_addr": In(range(depth)), "host_we": In(1),
            "host_wdata": In(data.ArrayLayout(32, link_width)).array(ranks),
            "host_rdata": Out(data.ArrayLayout(32, link_width)).array(ranks),
            "busy": Out(ranks), "timeout": Out(ranks)})

    def elaborate(self, platform):
        m = Module()
        row = data.ArrayLayout(32, self.w)
        for r, eng in enumerate(self.engines):
            m.submodules[f"engine{r}"] = eng
            m.d.comb += [eng.rank.eq(r), self.busy[r].eq(eng.busy),
                         self.timeout[r].eq(eng.timeout)]
            wiring.connect(m, wiring.flipped(self.cmd[r]), eng.cmd)
            wiring.connect(m, wiring.flipped(self.tx[r]), eng.tx)
            wiring.connect(m, wiring.flipped(self.rx[r]), eng.rx)
            mem = m.submodules[f"mem{r}"] = memory.Memory(shape=row, depth=self.depth, init=[])
            wiring.connect(m, eng.tx_rd, mem.read_port(transparent_for=()))
            wiring.connect(m, eng.rx_rd, mem.read_port(transparent_for=()))
            host = mem.read_port(transparent_for=())
            m.d.comb += [host.addr.eq(self.host_addr), self.host_rdata[r].eq(host.data)]
            wr = mem.write_port(granularity=1)
            with m.If(self.host_we):
                m.d.comb += [wr.addr.eq(self.host_addr), wr.data.eq(self.host_wdata[r]),
                             wr.en.eq(-1)]
            with m.Else():
                m.d.comb += [wr.addr.eq(eng.wr.addr), wr.data.eq(eng.wr.data),
                             wr.en.eq(eng.wr.en)]
        return m


def _run(ranks, op, words, *, shift=0, stalls=None, capacity=3, watchdog=1 << 16,
         limit=6000, seed=0):
    """One routed command on every rank; links are FIFOs of ``capacity`` beats (one cycle of
    latency) whose output ``stalls(cycle)`` (a set of link indices) holds back. Returns the
    engines' ``timeout`` bits, whether every rank went idle, and the memories against golden."""
    w, rows = 1, words
    orows = out_rows(op, words, ranks, w)
    depth = rows + orows + 4
    dst = rows + 2
    rng = np.random.default_rng(seed)
    mem = rng.integers(0, 1 << 32, (ranks, depth), dtype=np.uint32)
    dut = _Engines(ranks, w, depth, watchdog)
    want = mem.copy()
    new = route_collective(op, [mem[r, :words] for r in range(ranks)],
                           [mem[r, dst:dst + orows] for r in range(ranks)], w, shift)
    for r in range(ranks):
        want[r, dst:dst + orows] = new[r]
    out = {}

    async def bench(ctx):
        for i in range(depth):
            ctx.set(dut.host_addr, i)
            for r in range(ranks):
                ctx.set(dut.host_wdata[r], [int(mem[r, i])])
            ctx.set(dut.host_we, 1)
            await ctx.tick()
        ctx.set(dut.host_we, 0)
        for r in range(ranks):
            ctx.set(dut.cmd[r].payload, {"op": op, "addr": 0, "words": words, "dst": dst,
                                         "shift": shift})
            ctx.set(dut.cmd[r].valid, 1)
        await ctx.tick()
        for r in range(ranks):
            ctx.set(dut.cmd[r].valid, 0)
        links = [deque() for _ in range(ranks)]
        for cycle in range(limit):
            held = stalls(cycle) if stalls else set()
            for r in range(ranks):
                rx = dut.rx[(r + 1) % ranks]
                ctx.set(rx.valid, bool(links[r]) and r not in held)
                if links[r]:
                    ctx.set(rx.payload.as_value(), links[r][0])
                ctx.set(dut.tx[r].ready, len(links[r]) < capacity)
            pops = [r for r in range(ranks) if ctx.get(dut.rx[(r + 1) % ranks].valid)
                    and ctx.get(dut.rx[(r + 1) % ranks].ready)]
            pushes = [(r, ctx.get(dut.tx[r].payload.as_value())) for r in range(ranks)
                      if ctx.get(dut.tx[r].valid) and ctx.get(dut.tx[r].ready)]
            await ctx.tick()
            for r in pops:
                links[r].popleft()
            for r, beat in pushes:
                links[r].append(beat)
            if cycle > 10 and not ctx.get(dut.busy):
                break
        out["idle"] = not ctx.get(dut.busy)
        out["timeout"] = ctx.get(dut.timeout)
        got = np.zeros_like(mem)
        for i in range(depth):
            ctx.set(dut.host_addr, i)
            await ctx.tick()
            for r in range(ranks):
                got[r, i] = int(ctx.get(dut.host_rdata[r])[0])
        out["same"] = np.array_equal(got, want)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def _phases(length: int, pattern: list[set[int]]):
    """Stalls in phases of ``length`` cycles from cycle 30 to 1000, cycling through
    ``pattern`` (the links whose output is held in each phase)."""
    return lambda c: pattern[(c - 30) // length % len(pattern)] if 30 <= c < 1000 else set()


@pytest.mark.parametrize("length, pattern", [
    (10, [{0}, {3}, {2}, {1}]),  # deadlocked with 4-deep forward FIFOs
    (20, [{0, 1}, {2, 3}]),
    (40, [{0}, {1}, {2}, {3}])])
def test_all_to_all_survives_bursty_stalls(length, pattern):
    """P = 4, an all-to-all of 192 words: link outputs held for tens of cycles in turn; it
    must finish, without the watchdog, bit-exact."""
    r = _run(4, CollectiveOp.ALL_TO_ALL, 192, stalls=_phases(length, pattern))
    assert r["idle"] and not r["timeout"] and r["same"], (length, pattern, r)


def test_permute_survives_bursty_stalls():
    """P = 5, a permute by 3 (every link carries three flows) under random bursts of stalls."""
    rng = np.random.default_rng(7)
    held, table = set(), []
    for _ in range(1500):
        for link in range(5):
            if rng.random() < 1 / 15:
                held ^= {link}
        table.append(set(held))
    r = _run(5, CollectiveOp.PERMUTE, 120, shift=3,
             stalls=lambda c: table[c] if c < len(table) else set())
    assert r["idle"] and not r["timeout"] and r["same"], r


@pytest.mark.parametrize("ranks, words", [(2, 100), (3, 150)])
def test_own_copy_is_not_silence(ranks, words):
    """The smallest watchdog (16 cycles): the own chunk's copy, which waits for the write port
    while beats arrive, may be all an all-to-all has left; it must not be taken for a silent
    link."""
    r = _run(ranks, CollectiveOp.ALL_TO_ALL, words, watchdog=16)
    assert r["idle"] and not r["timeout"] and r["same"], r
