"""cocotb tests of ``hdl.sim_batch`` and ``sim.tb.batches`` on the tiny designs of
``sim.tb.selftest_design``.

* ``played_beats`` — ``PlayedStreams`` around ``StreamRegister`` (``o = i + 1``), its input
  ``i`` played in batches of ``k``: beats sent in pieces of 1, k - 1, k, k + 1 and more,
  with back-pressure on ``o``, all come out in order, once.
* ``timing`` — the same run on ``StreamRegister`` itself (a ``StreamSource`` on ``i``) or
  inside ``PlayedStreams`` (a ``BatchSource``): the cycles of every output beat and the
  cycle at which ``wait()`` returns go to ``NCLITE_BATCH_OUT`` (JSON), for the pytest to
  compare between the two tops: a played stream must look the same to the design.
* ``replay`` — ``CycleReplay`` around ``InitialisedComb`` (``count`` sums ``x``, ``held``
  counts the cycles with ``x`` all ones): replays of 1, k - 1, k, k + 1 and 5k + 3 cycles
  one after another, each output sample compared with a model of the design.
* ``pulse_counter`` — ``PulseCounter`` alone: random pulses, indices (past the last count too)
  and targets (a few counts either side of each count, wrapping below 0, and at the 2**31
  boundary), ``counts``, ``reached`` and ``since`` compared with a model in every cycle; then
  the same after a reset.
"""

import json
import os

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly

from hdl.sim_batch import COUNT_BITS
from sim.tb import batches, streams, tbutil
from sim.tb.batches import BatchSource
from sim.tb.streams import StreamMonitor, StreamSink, StreamSource


def _sizes(k: int) -> list[int]:
    return [1, max(k - 1, 1), k, k + 1, 5 * k + 3]


@cocotb.test(**tbutil.timeout(1))
async def played_beats(dut):
    k = tbutil.params()["k"]
    src = BatchSource(dut, "i", k=k)
    sink = StreamSink(dut, "o", pause=streams.pauses(tbutil.rng(2), 0.4, max_burst=3))
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    rng = tbutil.rng(3)
    sent = []
    for size in _sizes(k):
        beats = [int(x) for x in rng.integers(0, 0xFFFF, size)]
        src.send(beats)
        sent += beats
    assert not src.idle
    await src.wait()
    assert src.idle
    got = [await sink.recv() for _ in sent]
    want = [(b + 1) & 0xFFFF for b in sent]
    assert got == want, f"{got[:8]} ... != {want[:8]} ... (seed {tbutil.seed()})"


@cocotb.test(**tbutil.timeout(1))
async def timing(dut):
    top = tbutil.params()
    k = top.get("k")
    src = BatchSource(dut, "i", k=k) if k else StreamSource(dut, "i")
    cycles = []
    StreamMonitor(dut, "o", on_beat=lambda _: cycles.append(streams.sim_cycles()))
    dut.o__ready.value = 1
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    rng = tbutil.rng(5)
    record = {"sent": [], "waited": []}
    for size in (3 * 4 + 2, 1, 9):  # several batches and a partial one; one beat; more
        await ClockCycles(dut.clk, int(rng.integers(1, 4)))
        record["sent"].append(streams.sim_cycles())
        src.send(int(x) for x in rng.integers(0, 0xFFFF, size))
        await src.wait()
        record["waited"].append(streams.sim_cycles())
    await ClockCycles(dut.clk, 3)
    record["beats"] = cycles
    with open(os.environ["NCLITE_BATCH_OUT"], "w") as fh:
        json.dump(record, fh)


def _model(x: np.ndarray, state: dict) -> tuple[np.ndarray, np.ndarray]:
    """InitialisedComb's ``count`` and ``y`` after each cycle's edge, inputs ``x``."""
    count, y = [], []
    for v in x:
        state["count"] = (state["count"] + int(v)) & 0xFF
        state["held"] = (state["held"] + (v == 0xFF)) & 0xFF
        count.append(state["count"])
        y.append(state["held"] ^ 0x0F if state["held"] == 0x5A else state["held"])
    return np.array(count), np.array(y)


@cocotb.test(**tbutil.timeout(1))
async def replay(dut):
    from hdl.sim_batch import CycleReplay
    top = tbutil.params()
    k = top["k"]
    layouts = CycleReplay(**top)
    dut.inputs__valid.value = 0
    dut.outputs__ready.value = 1
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    rng = tbutil.rng(6)
    state = {"count": 0, "held": 0x5A}
    for size in _sizes(k):
        x = rng.choice([0, 1, 0x7F, 0x80, 0xFF, 0xFF], size).astype(np.uint64)
        samples = await batches.replay(dut, batches.layout_bits(layouts.input_layout, size, x=x),
                                       k=k)
        count, y = _model(x, state)
        for name, want in (("count", count), ("y", y)):
            got = batches.field_values(samples, layouts.output_layout, name)
            bad = np.flatnonzero(got != want)
            assert not bad.size, (f"replay of {size}: {name} of cycle {bad[0]} is {got[bad[0]]}, "
                                  f"the model's {want[bad[0]]} (seed {tbutil.seed()})")
        await ClockCycles(dut.clk, int(rng.integers(1, 4)))  # inputs 0 between replays


@cocotb.test(**tbutil.timeout(1))
async def pulse_counter(dut):
    indices = tbutil.params()["indices"]
    bits, top = COUNT_BITS, 1 << COUNT_BITS
    index_values = 1 << len(dut.index)  # the port carries values past the last count too
    dut.pulse.value = 0
    dut.index.value = 0
    dut.target.value = 0
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    rng = tbutil.rng(7)
    # A target a few counts either side of its count, or at the 2**31 boundary of "reached".
    offsets = [-3, -2, -1, 0, 1, 2, top // 2 - 1, top // 2, -(top // 2) + 1, -(top // 2)]
    for run in range(2):  # the second after a reset, with pulses counted before it
        counts, since = [0] * indices, top - 1  # since: its value in the next cycle, no pulse
        for cycle in range(400):
            await FallingEdge(dut.clk)
            pulse, index = int(rng.random() < 0.5), int(rng.integers(index_values))
            target = [(c + int(rng.choice(offsets))) % top for c in counts]
            dut.pulse.value, dut.index.value = pulse, index
            dut.target.value = sum(t << (bits * i) for i, t in enumerate(target))
            await ReadOnly()
            now = [c + (pulse and i == index) for i, c in enumerate(counts)]
            reached = all((n - t) % top < top // 2 for n, t in zip(now, target, strict=True))
            want = {"counts": sum(c << (bits * i) for i, c in enumerate(counts)),
                    "reached": int(reached), "since": 0 if pulse else since}
            got = {name: int(getattr(dut, name).value) for name in want}
            assert got == want, (f"run {run} cycle {cycle}: pulse {pulse} index {index} target "
                                 f"{target} counts {counts}: {got} != {want} "
                                 f"(seed {tbutil.seed()})")
            counts, since = now, 1 if pulse else min(since + 1, top - 1)
        await FallingEdge(dut.clk)
        dut.pulse.value = 0
        await tbutil.reset(dut)
