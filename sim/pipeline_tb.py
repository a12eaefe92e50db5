"""A testbench for fixed-latency, clock-enabled pipelines (the arithmetic units and the PE).

The DUT has a clock enable ``en``: its registers move only on rising edges with ``en`` = 1, and
its output shows the operation presented ``latency`` enabled edges earlier (``latency`` = 0:
combinationally). :class:`PipelineTB` drives one operation per cycle with ``en`` randomly low
(stalls), keeps the operations that entered on enabled edges, and checks every output against
the expected values the golden model computed for those operations — bit for bit. Inputs are
changed on the falling edge and outputs sampled there, so nothing races the rising edge.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
from cocotb.triggers import FallingEdge, Timer

from . import tbutil

__all__ = ["PipelineTB"]


class PipelineTB:
    """Drive ``ops`` (a mapping port name -> array of values) through a pipelined DUT.

    ``expected`` holds, per operation, the output word(s) to compare (an array, or a mapping
    port name -> array for several outputs). ``describe(i)`` renders operation ``i`` for a
    failure message.
    """

    def __init__(self, dut, latency: int, *, stall_probability: float = 0.2, max_errors: int = 8):
        self.dut = dut
        self.latency = latency
        self.stall_probability = stall_probability
        self.max_errors = max_errors
        self.rng = tbutil.rng(0xE11)

    async def run(self, ops: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
                  describe: Callable[[int], str], *, sampled: Sequence[str] | None = None) -> int:
        dut = self.dut
        names = list(ops)
        n = len(next(iter(ops.values())))
        outputs = list(expected)
        sampled = list(sampled or outputs)
        pyops = {k: [int(v) for v in np.asarray(ops[k]).tolist()] for k in names}
        pyexp = {k: [int(v) for v in np.asarray(expected[k]).tolist()] for k in outputs}
        handles = {k: getattr(dut, k) for k in names}
        out_handles = {k: getattr(dut, k) for k in sampled}
        stalls = (self.rng.random(n * 2 + self.latency + 8) < self.stall_probability).tolist()

        entered: list[int] = []  # indices of operations captured at enabled edges
        errors: list[str] = []
        checked = 0
        driven = -1  # index of the operation on the inputs now (-1: none yet)
        next_op = 0
        cycle = 0
        dut.en.value = 0
        clocked = tbutil.has_clock(dut)
        if not clocked and self.latency:
            raise ValueError(f"a DUT without a clock cannot have latency {self.latency}")
        while checked < n:
            # A combinational DUT (latency 0, no clk) is stepped in 10 ns steps instead.
            await (FallingEdge(dut.clk) if clocked else Timer(10, unit="ns"))
            # 1. The rising edge just passed captured `driven` if en was high.
            if cycle > 0 and int(dut.en.value):
                entered.append(driven)  # -1: a bubble went in
            # 2. Which operation does the output show now?
            if self.latency == 0:
                shown = driven if driven >= 0 else None
            else:
                shown = entered[-self.latency] if len(entered) >= self.latency else None
            if shown is not None and shown == checked:
                for k in outputs:
                    got = int(out_handles[k].value)
                    want = pyexp[k][shown]
                    if got != want and len(errors) < self.max_errors:
                        errors.append(f"op {shown}: {k} = 0x{got:08x}, golden 0x{want:08x}; "
                                      f"{describe(shown)}")
                checked += 1
            # 3. Drive the next cycle: a new operation, or hold the current one during a stall.
            stall = stalls[cycle % len(stalls)] and self.latency > 0
            if self.latency == 0:
                # Combinational: move to the next operation once this one was checked.
                if driven < checked and next_op < n:
                    driven = next_op
                    next_op += 1
                dut.en.value = 1
            elif stall:
                dut.en.value = 0
            else:
                if next_op < n:
                    driven = next_op
                    next_op += 1
                else:
                    driven = -1
                dut.en.value = 1
            if driven >= 0:
                for k in names:
                    handles[k].value = pyops[k][driven]
            cycle += 1
            if cycle > 4 * n + 64:
                raise AssertionError(f"pipeline stopped producing results after {checked} of "
                                     f"{n} operations (seed {tbutil.seed()})")
        if errors:
            raise AssertionError(
                f"{len(errors)}+ mismatches against golden in {tbutil.simulator()} "
                f"(seed {tbutil.seed()}):\n  " + "\n  ".join(errors))
        return cycle
