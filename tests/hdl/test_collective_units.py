# amaranth: UnusedElaboratable=no
"""Collective engine, link model and ring: fast checks in amaranth.sim, parameters, driver.

* ``LinkModel``: a beat taken in cycle t leaves in cycle t + latency exactly, one beat per cycle
  at every latency; with random stalls and back-pressure nothing is lost, reordered or
  duplicated, and ``o`` keeps valid and payload until taken (stream rules).
* ``CollectiveRing`` in amaranth.sim: one all-reduce per ring size, bit-exact with
  ``golden.collective`` (the cocotb testbench ``sim/tb/ring.py`` runs the full checks
  on the emitted Verilog in Icarus and Verilator).
* The op codes of ``hdl.collective`` and ``golden.collective`` agree; bad parameters fail at
  construction naming the parameter; the host-side driver rejects bad input before simulating.
Seed: ``NCLITE_SEED`` (default 1).
"""

import os

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden import collective as gc
from hdl.collective import (
    CollectiveEngine,
    CollectiveOp,
    collective_command_layout,
    setup_cycles,
)
from hdl.ring import CollectiveRing, LinkModel

SEED = int(os.environ.get("NCLITE_SEED", "1"))


def test_op_codes_match_golden():
    assert {m.name: m.value for m in CollectiveOp} == {m.name: m.value for m in gc.CollectiveOp}
    assert gc.LINK_WIDTHS == (1, 2, 4)


def _run_link(latency, beats, *, stall_rate=0, ready_p=1.0, max_latency=6, seed=SEED):
    """Push ``beats`` through a LinkModel; return [(cycle taken, cycle delivered, value)]."""
    dut = LinkModel(link_width=2, max_latency=max_latency, index=1)
    rng = np.random.default_rng([seed, latency, stall_rate])
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    taken, delivered = [], []

    async def tb(ctx):
        ctx.set(dut.latency, latency)
        ctx.set(dut.stall_rate, stall_rate)
        ctx.set(dut.seed, seed)
        ctx.set(dut.reseed, 1)
        await ctx.tick()
        ctx.set(dut.reseed, 0)
        cycle, pos, held = 0, 0, None
        while len(delivered) < len(beats):
            if pos < len(beats):
                k = pos & 15  # the tag goes along with its words
                ctx.set(dut.i.payload, {"data": [beats[pos], ~beats[pos] & 0xFFFFFFFF],
                                        "tag": {"dest": k & 1, "origin": k >> 1 & 1,
                                                "last": k >> 2 & 1, "end": k >> 3}})
                ctx.set(dut.i.valid, 1)
            else:
                ctx.set(dut.i.valid, 0)
            ready = bool(rng.random() < ready_p)
            ctx.set(dut.o.ready, ready)
            i_ready, o_valid, o_payload = ctx.get(dut.i.ready), ctx.get(dut.o.valid), None
            if o_valid:
                got = ctx.get(dut.o.payload)
                o_payload = [*(int(v) for v in got.data), got.tag.as_value().value]
            if held is not None:
                assert o_valid and o_payload == held, "o dropped or changed a beat on offer"
            if pos < len(beats) and i_ready:
                taken.append(cycle)
                pos += 1
            if o_valid and ready:
                assert o_payload[1] == ~o_payload[0] & 0xFFFFFFFF
                k = len(delivered) & 15
                assert o_payload[2] == (k & 1 | (k >> 1 & 1) << 1 | (k >> 2 & 1) << 2
                                        | (k >> 3) << 3), "the tag changed on the link"
                delivered.append((cycle, o_payload[0]))
                held = None
            elif o_valid:
                held = o_payload
            await ctx.tick()
            cycle += 1
            assert cycle < 50 * len(beats) + 100, "link hung"

    sim.add_testbench(tb)
    sim.run()
    return [(t, d, v) for t, (d, v) in zip(taken, delivered, strict=True)]


@pytest.mark.parametrize("latency", [1, 2, 5, 6])
def test_link_latency_and_full_rate(latency):
    beats = list(range(100, 140))
    got = _run_link(latency, beats)
    assert [v for _, _, v in got] == beats
    assert all(d - t == latency for t, d, _ in got), got[:4]
    assert got[-1][1] - got[0][1] == len(beats) - 1, "not one beat per cycle"


@pytest.mark.parametrize("latency", [1, 4])
def test_link_under_stalls_and_back_pressure(latency):
    beats = list(np.random.default_rng(SEED).integers(0, 1 << 32, 300))
    got = _run_link(latency, beats, stall_rate=128, ready_p=0.6)
    assert [v for _, _, v in got] == beats
    assert all(d - t >= latency for t, d, _ in got)
    stalled = sum(1 for (t0, _, _), (t1, _, _) in zip(got, got[1:], strict=False) if t1 > t0 + 1)
    assert stalled > 20, "stall_rate 128 should hold the input back often"


def _ring_allreduce_pysim(ranks, link_width, words, seed=SEED):
    depth = 16
    dut = CollectiveRing(ranks=ranks, link_width=link_width, depth=depth, max_latency=3)
    rng = np.random.default_rng([seed, ranks, link_width])
    mem = rng.uniform(-4, 4, (ranks, depth * link_width)).astype(np.float32).view(np.uint32)
    layout = collective_command_layout(depth, link_width)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    got = np.zeros_like(mem)
    bus = 32 * link_width

    async def tb(ctx):
        ctx.set(dut.latency, 3)
        for row in range(depth):
            packed = 0
            for r in range(ranks):
                for j in range(link_width):
                    packed |= int(mem[r, row * link_width + j]) << (bus * r + 32 * j)
            ctx.set(dut.host_addr, row)
            ctx.set(dut.host_wdata, packed)
            ctx.set(dut.host_we, 1)
            await ctx.tick()
        ctx.set(dut.host_we, 0)
        cmd = layout.const({"op": CollectiveOp.ALL_REDUCE, "addr": 1, "words": words})
        for r in range(ranks):
            ctx.set(dut.cmd[r].payload, cmd)
            ctx.set(dut.cmd[r].valid, 1)
        await ctx.tick()
        for r in range(ranks):
            ctx.set(dut.cmd[r].valid, 0)
        for _ in range(2000):
            if ctx.get(dut.idle):
                break
            await ctx.tick()
        assert ctx.get(dut.idle), "ring did not finish"
        assert ctx.get(dut.error) == 0
        for row in range(depth):
            ctx.set(dut.host_addr, row)
            await ctx.tick()
            packed = ctx.get(dut.host_rdata)
            for r in range(ranks):
                for j in range(link_width):
                    got[r, row * link_width + j] = (packed >> (bus * r + 32 * j)) & 0xFFFFFFFF

    sim.add_testbench(tb)
    sim.run()
    want = mem.copy()
    lo = link_width
    want[:, lo:lo + words] = np.stack(gc.ring_all_reduce(list(mem[:, lo:lo + words]),
                                                         link_width))
    return got, want


@pytest.mark.parametrize("ranks, link_width, words", [(2, 1, 7), (3, 2, 11), (4, 4, 9)])
def test_ring_allreduce_pysim(ranks, link_width, words):
    got, want = _ring_allreduce_pysim(ranks, link_width, words)
    bad = np.argwhere(got != want)
    first = ", ".join(f"rank {r} word {w}: RTL {int(got[r, w]):#010x}, golden "
                      f"{int(want[r, w]):#010x}" for r, w in bad[:3])
    assert bad.size == 0, (
        f"ALL_REDUCE of {words} words on P = {ranks}, W = {link_width} (seed {SEED}): "
        f"{len(bad)} of {got.size} memory words differ (the vector starts at word "
        f"{link_width}; its chunk bounds: {gc.chunk_words(words, ranks, link_width)}); {first}")


@pytest.mark.parametrize("ranks, depth", [(2, 16), (3, 16), (4, 1024), (8, 100)])
@pytest.mark.parametrize("op", [CollectiveOp.ALL_REDUCE, CollectiveOp.REDUCE_SCATTER,
                                CollectiveOp.ALL_GATHER])
def test_setup_takes_setup_cycles(ranks, depth, op):
    """The setup's length is part of the contract (lab 4 keeps it: the division's bits, the
    table's P + 1 entries, the look-up): the first memory read of a ring command is issued
    ``setup_cycles(P, depth)`` cycles after the clock edge that takes the command."""
    width = 2
    dut = CollectiveEngine(ranks=ranks, link_width=width, depth=depth)
    layout = collective_command_layout(depth, width)
    words = min(depth * width, 5 * ranks + 3)
    seen = {}

    async def tb(ctx):
        ctx.set(dut.rank, ranks - 1)
        ctx.set(dut.cmd.payload, layout.const({"op": op, "addr": 0, "words": words}))
        ctx.set(dut.cmd.valid, 1)
        assert ctx.get(dut.cmd.ready), "the idle engine does not take a command"
        await ctx.tick()  # the edge that takes it
        ctx.set(dut.cmd.valid, 0)
        for cycles in range(1, 200):
            await ctx.tick()
            if ctx.get(dut.tx_rd.en) or ctx.get(dut.rx_rd.en):
                seen["cycles"] = cycles
                return

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    assert seen.get("cycles") == setup_cycles(ranks, depth), (
        f"{op.name}, P = {ranks}, depth {depth}: first memory read {seen.get('cycles')} cycles "
        f"after the command, setup_cycles = {setup_cycles(ranks, depth)} (DIVIDE: "
        f"{depth.bit_length()} cycles, TABLE: {ranks + 1}, then the look-up)")


@pytest.mark.parametrize("kwargs, exc, param", [
    ({"ranks": 1}, ValueError, "ranks"), ({"ranks": 0}, ValueError, "ranks"),
    ({"ranks": True}, TypeError, "ranks"), ({"ranks": 65}, ValueError, "ranks"),
    ({"ranks": 4, "link_width": 3}, ValueError, "link_width"),
    ({"ranks": 4, "link_width": 8}, ValueError, "link_width"),
    ({"ranks": 4, "link_width": 2.0}, TypeError, "link_width"),
    ({"ranks": 4, "depth": 0}, ValueError, "depth"),
    ({"ranks": 4, "add_stages": 8}, ValueError, "add_stages"),
])
def test_bad_parameters_fail_at_elaboration(kwargs, exc, param):
    with pytest.raises(exc, match=param):
        CollectiveEngine(**kwargs)
    with pytest.raises(exc, match=param):
        CollectiveRing(**kwargs)


def test_link_bad_parameters():
    with pytest.raises(ValueError, match="max_latency"):
        LinkModel(max_latency=0)
    with pytest.raises(ValueError, match="link_width"):
        LinkModel(link_width=5)
    with pytest.raises(ValueError, match="index"):
        LinkModel(index=-1)


@pytest.mark.parametrize("kwargs, match", [
    ({"ranks": 1, "sizes": [8]}, "ranks"),
    ({"ranks": 4, "sizes": [0]}, "n \\(words per rank\\)"),
    ({"ranks": 4, "sizes": [(1 << 18) + 1]}, "n \\(words per rank\\)"),
    ({"ranks": 65, "sizes": [8]}, "ranks"),
    ({"ranks": 4, "sizes": [8], "latency": True}, "latency"),
    ({"ranks": 4, "sizes": []}, "sizes"),
    ({"ranks": 4, "sizes": [8], "link_width": 3}, "link_width"),
    ({"ranks": 4, "sizes": [8], "latency": 0}, "latency"),
    ({"ranks": 4, "sizes": [8], "stall_rate": 256}, "stall_rate"),
])
def test_driver_rejects_bad_input(kwargs, match):
    from sim.cli.allreduce import run_collectives

    with pytest.raises(ValueError, match=match):
        run_collectives(**kwargs)


def test_cli_allreduce_bad_input_is_one_line():
    from click.testing import CliRunner

    from sim.cli import main

    r = CliRunner().invoke(main, ["allreduce", "--ranks", "1", "--n", "16"])
    assert r.exit_code == 1
    assert r.output.strip() == "nclite: error: ranks must be an integer between 2 and 64, not 1"
