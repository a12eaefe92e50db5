"""Small helpers shared by the cocotb testbenches (run inside the simulator process): the
parameters, seed and random generators, clock and reset, failure messages, timeouts. Streams
(sources, sinks, monitors, pause generators) are :mod:`sim.tb.streams`."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable

import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge, Timer

from golden.isa import FORMAT_CODES

__all__ = ["FORMAT_CODES", "params", "seed", "rng", "simulator", "has_clock", "start_clock",
           "reset", "hexs", "mismatch", "StallMonitor", "CLOCK_PERIOD_NS", "reset_midway",
           "expect_quiet", "timeout"]

#: The testbenches' clock period.
CLOCK_PERIOD_NS = 10

# FORMAT_CODES (format name as golden/ spells it -> the 2-bit tag the hardware takes) is
# golden.isa's, re-exported for the testbenches.


def params() -> dict:
    """The component parameters the runner elaborated this design with."""
    return json.loads(os.environ.get("NCLITE_PARAMS", "{}"))


def seed() -> int:
    return int(os.environ.get("NCLITE_SEED", "1"))


def rng(salt: int = 0) -> np.random.Generator:
    """The testbench's random generator; every failure message should name :func:`seed`."""
    return np.random.default_rng([seed(), salt])


def simulator() -> str:
    return os.environ.get("NCLITE_SIMULATOR", "?")


def has_clock(dut) -> bool:
    """Whether the design has a ``sync`` domain (a purely combinational one has no clk)."""
    try:
        dut.clk  # noqa: B018 - probing the handle
    except AttributeError:
        return False
    return True


async def start_clock(dut, period_ns: int = CLOCK_PERIOD_NS) -> None:
    """Start ``clk`` (if the design has one) and wait for its first rising edge.

    The clock is cocotb's C clock in both simulators (``impl="gpi"``: cocotb picks a Python
    coroutine for Icarus by default, which costs a wake-up every half cycle). It starts one
    simulator step after the call: a C clock started at time 0 rises there, before Icarus has
    given the design's outputs their initial values, and cocotbext-axi's models read X at that
    edge. So the edges fall 1 ps after multiples of the period, which :mod:`sim.tb.streams`'
    cycle arithmetic allows for."""
    if has_clock(dut):
        await Timer(1, "step")
        Clock(dut.clk, period_ns, unit="ns", impl="gpi").start()
        await RisingEdge(dut.clk)


async def reset(dut, cycles: int = 2) -> None:
    """Hold ``rst`` for ``cycles`` clock cycles (no-op for a design without a clock)."""
    if has_clock(dut):
        dut.rst.value = 1
        await ClockCycles(dut.clk, cycles)
        dut.rst.value = 0


def mismatch(name: str, got: np.ndarray, want: np.ndarray) -> str | None:
    """None if the two word arrays are equal, else a message: how many words differ, the
    first indices and both values (hex)."""
    bad = np.argwhere(np.asarray(got) != np.asarray(want))
    if bad.size == 0:
        return None
    first = tuple(bad[:4].T)
    return (f"{name} differs at {len(bad)} words, first {bad[:4].tolist()}: RTL "
            f"{hexs(np.asarray(got)[first])}, golden {hexs(np.asarray(want)[first])}")


def hexs(values, width: int = 8) -> str:
    """Format an iterable of integers as hex, for failure messages."""
    return "[" + ", ".join(f"0x{int(v):0{width}x}" for v in values) + "]"


class StallMonitor:
    """The stream rule on an output the testbench sinks: once ``valid`` is up, ``valid`` and
    the payload stay until the beat is taken. Call :meth:`sample` once per cycle (in the
    ReadOnly phase) with what the output shows and whether the sink was ready."""

    def __init__(self, name: str):
        self.name = name
        self.held: int | None = None

    def sample(self, valid: bool, payload: int | None, ready: bool) -> int | None:
        """Returns the payload if a beat was taken this cycle, else None."""
        if valid:
            if self.held is not None and self.held != payload:
                raise AssertionError(f"{self.name}.payload changed while stalled "
                                     f"(seed {seed()})")
            if ready:
                self.held = None
                return payload
            self.held = payload
        elif self.held is not None:
            raise AssertionError(f"{self.name}.valid dropped while stalled (seed {seed()})")
        return None


def timeout(ms: float) -> dict:
    """A cocotb test's timeout in simulated time, ``@cocotb.test(**tbutil.timeout(ms))``: a
    test that waits for an event that never comes fails after ``ms`` simulated milliseconds
    (at 10 ns a cycle, 100 000 cycles per ms) instead of running until pytest's wall-clock
    limit. Testbenches size it from their workload, with a wide margin."""
    # In whole nanoseconds: cocotb refuses a time its precision (1 ps) cannot represent
    # exactly, which a float number of milliseconds (2.006) often is not.
    return {"timeout_time": math.ceil(float(ms) * 1e6), "timeout_unit": "ns"}


async def reset_midway(dut, cycles: int, *, inputs: Iterable[str] = (), tasks=(),
                       low: Iterable[str] = (), clear=()) -> None:
    """Reset in the middle of an operation: cancel ``tasks`` (the coroutines that drive the
    operation), then at the next falling edge call ``clear()`` of every object in ``clear``
    (stream drivers of :mod:`sim.tb.streams`, or testbenches holding them: queued beats dropped,
    ``valid`` low), drive the ``valid`` of every stream in ``inputs`` (and every signal named
    in ``low``) to 0 and hold ``rst`` for ``cycles`` clock cycles; returns at the falling
    edge after ``rst`` is released."""
    for task in tasks:
        if not task.done():
            task.cancel()
    await FallingEdge(dut.clk)
    for driver in clear:
        driver.clear()
    for name in inputs:
        getattr(dut, f"{name}__valid").value = 0
    for name in low:
        getattr(dut, name).value = 0
    dut.rst.value = 1
    for _ in range(cycles):
        await FallingEdge(dut.clk)
    dut.rst.value = 0
    await FallingEdge(dut.clk)


async def expect_quiet(dut, signals: Iterable[str], cycles: int, what: str) -> None:
    """Every signal named in ``signals`` (e.g. an output's ``o__valid``, ``busy``) stays 0 for
    ``cycles`` cycles, sampled in the ReadOnly phase after each falling edge: after a reset,
    nothing of the interrupted operation may come out."""
    handles = [(name, getattr(dut, name)) for name in signals]
    for cycle in range(cycles):
        await ReadOnly()
        for name, h in handles:
            if h.value.is_resolvable and int(h.value):
                raise AssertionError(f"{name} is high {cycle} cycles after the reset "
                                     f"{what} (seed {seed()}, {simulator()})")
            if not h.value.is_resolvable:
                raise AssertionError(f"{name} is {h.value} {cycle} cycles after the reset "
                                     f"{what} (seed {seed()}, {simulator()})")
        await FallingEdge(dut.clk)
