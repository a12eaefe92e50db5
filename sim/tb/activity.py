"""cocotb testbench: ``hdl.activity.ActivityRecorder`` against a Python model of what it
records.

* ``random_activity`` - nothing recorded while ``enable`` is low; then random ``activity``
  (engines' busy bits, a dispatch count that steps
  up now and then), held for random runs of cycles: after each phase the entries (read through
  VPI) are exactly the model's (one per change, the first cycle after reset or ``clear``
  included, with its cycle), ``count`` their number; a phase longer than the memory leaves
  ``full`` set and the first ``depth`` changes; ``clear`` starts again.
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge

from sim.tb import tbutil

ENGINE_BITS = 4


@cocotb.test(**tbutil.timeout(30))
async def random_activity(dut):
    depth = tbutil.params().get("depth", 1024)
    rng = tbutil.rng(7)
    dut.activity.value = 0
    dut.clear.value = 0
    dut.enable.value = 0
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    # Disabled, it records nothing, however the activity changes.
    for v in range(1, 20):
        dut.activity.value = v
        await RisingEdge(dut.clk)
    assert int(dut.count.value) == 0, "the recorder wrote while disabled"
    cycle = 0  # the recorder's cycle: the enabled edges
    for phase in range(4):
        await FallingEdge(dut.clk)
        dut.enable.value = 1  # (from phase 0's first value on)
        if phase:
            dut.clear.value = 1
            await RisingEdge(dut.clk)
            cycle += 1
            await FallingEdge(dut.clk)
            dut.clear.value = 0
        want, last, executed = [], None, int(rng.integers(0, 1 << 20))
        changes = int(rng.integers(depth // 2, depth + 8)) if phase != 2 else depth + 20
        while len(want) < changes:
            busy = int(rng.integers(0, 1 << ENGINE_BITS))
            executed += int(rng.random() < 0.3)
            value = busy | executed << ENGINE_BITS
            for _ in range(int(rng.integers(1, 4))):
                dut.activity.value = value
                if value != last or not want:
                    want.append((cycle + 1, value))  # recorded with the edge's cycle count
                last = value
                await RisingEdge(dut.clk)
                cycle += 1
                await FallingEdge(dut.clk)
        count = int(dut.count.value)
        assert count == min(len(want), depth), \
            f"phase {phase}: count {count}, {len(want)} changes (seed {tbutil.seed()})"
        assert bool(int(dut.full.value)) == (len(want) >= depth), f"phase {phase}: full"
        events = dut.events
        for i in range(count):
            word = int(events[i].value.to_unsigned())
            got = (word & 0xFFFF_FFFF, word >> 32)
            assert got[1] == want[i][1], (f"phase {phase} entry {i}: activity {got[1]:#x}, "
                                          f"want {want[i][1]:#x} (seed {tbutil.seed()})")
        cycles = [int(events[i].value.to_unsigned()) & 0xFFFF_FFFF for i in range(count)]
        assert [c - cycles[0] for c in cycles] == [w[0] - want[0][0] for w in want[:count]], \
            f"phase {phase}: the entries' cycles do not step as the changes (seed {tbutil.seed()})"
