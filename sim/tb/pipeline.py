"""A testbench for fixed-latency, clock-enabled pipelines (the arithmetic units, PE columns).

The DUT has a clock enable ``en``: its registers move only on rising edges with ``en`` = 1, and
its output shows the operation presented ``latency`` enabled edges earlier (``latency`` = 0:
combinationally). :class:`PipelineTB` drives one operation per cycle with ``en`` randomly low
(stalls), remembers which operation (or bubble) entered on each enabled edge, and checks every
output against the values the golden model computed for that operation — bit for bit. Inputs
change on the falling edge and outputs are sampled there, so nothing races the rising edge.

Two hooks let a testbench drive side inputs that do not follow the operation stream (e.g. the
weight-load chain of a PE column): ``may_issue(i)`` holds operation ``i`` back (a bubble enters
instead), and ``each_cycle(entered)`` runs on every falling edge after the operation inputs
were driven.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from cocotb.triggers import FallingEdge, Timer

from sim.tb import tbutil

__all__ = ["PipelineTB"]

BUBBLE = -1


class PipelineTB:
    """Drive operations through a clock-enabled pipeline of fixed ``latency``; check outputs."""

    def __init__(self, dut, latency: int, *, stall_probability: float = 0.2,
                 max_errors: int = 8):
        self.dut = dut
        self.latency = latency
        self.stall_probability = stall_probability
        self.max_errors = max_errors
        self.rng = tbutil.rng(0xE11)
        self.cycles = 0
        #: Operation index (or BUBBLE) that entered on each enabled edge so far.
        self.entered: list[int] = []

    async def run(self, ops: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray],
                  describe: Callable[[int], str], *,
                  may_issue: Callable[[int], bool] | None = None,
                  each_cycle: Callable[[], None] | None = None,
                  bubble: Mapping[str, int] | None = None) -> int:
        """Run every operation; raise AssertionError listing mismatches. Returns the cycles."""
        dut = self.dut
        n = len(next(iter(ops.values())))
        pyops = {k: [int(v) for v in np.asarray(col).tolist()] for k, col in ops.items()}
        pyexp = {k: [int(v) for v in np.asarray(col).tolist()] for k, col in expected.items()}
        inputs = {k: getattr(dut, k) for k in ops}
        widths = {k: len(handle) for k, handle in inputs.items()}
        outputs = {k: getattr(dut, k) for k in expected}
        bubble = dict(bubble or {})
        clocked = tbutil.has_clock(dut)
        if not clocked and self.latency:
            raise ValueError(f"a DUT without a clock cannot have latency {self.latency}")

        errors: list[str] = []
        checked = 0
        driven = BUBBLE  # the operation on the inputs now
        next_op = 0
        limit = 8 * n + 64 * (self.latency + 8)
        dut.en.value = 0
        while checked < n:
            # A combinational DUT (latency 0, no clk) is stepped in 10 ns steps instead.
            await (FallingEdge(dut.clk) if clocked else Timer(10, unit="ns"))
            # 1. The rising edge just passed captured `driven` if en was high.
            if self.cycles > 0 and int(dut.en.value):
                self.entered.append(driven)
            # 2. Which operation does the output show now?
            if self.latency == 0:
                shown = driven
            else:
                shown = self.entered[-self.latency] if len(self.entered) >= self.latency \
                    else BUBBLE
            if shown != BUBBLE and shown == checked:
                for k, handle in outputs.items():
                    got, want = int(handle.value), pyexp[k][shown]
                    if got != want and len(errors) < self.max_errors:
                        errors.append(f"op {shown}: {k} = 0x{got:08x}, golden 0x{want:08x}; "
                                      f"{describe(shown)}")
                checked += 1
            elif shown != BUBBLE and shown > checked:
                raise AssertionError(f"operation {checked} was never seen at the output "
                                     f"(seed {tbutil.seed()})")
            # 3. Drive the next cycle: a new operation, a bubble, or a stall.
            if self.latency == 0:
                en = True  # nothing to stall; move on once the current result was checked
                advance = driven < checked
            else:
                en = advance = self.rng.random() >= self.stall_probability
            if advance:
                if next_op < n and (may_issue is None or may_issue(next_op)):
                    driven, next_op = next_op, next_op + 1
                else:
                    driven = BUBBLE
            dut.en.value = int(en)
            if not en:
                # The operation on the inputs already entered: they are don't-care now, so
                # drive noise; a DUT that ignored `en` would capture it.
                for k, handle in inputs.items():
                    handle.value = int(self.rng.integers(0, 1 << min(widths[k], 62)))
            elif driven != BUBBLE:
                for k, handle in inputs.items():
                    handle.value = pyops[k][driven]
            else:
                for k, value in bubble.items():
                    inputs[k].value = value
            if each_cycle is not None:
                each_cycle()
            self.cycles += 1
            if self.cycles > limit:
                raise AssertionError(f"no progress: {checked} of {n} operations checked after "
                                     f"{self.cycles} cycles (seed {tbutil.seed()})")
        if errors:
            raise AssertionError(
                f"{len(errors)}+ mismatches against golden in {tbutil.simulator()} "
                f"(seed {tbutil.seed()}):\n  " + "\n  ".join(errors))
        return self.cycles
