"""Small helpers shared by the cocotb testbenches (run inside the simulator process)."""

from __future__ import annotations

import json
import os

import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge

from hdl.formats import Fmt

__all__ = ["FORMAT_CODES", "params", "seed", "rng", "simulator", "has_clock", "start_clock",
           "reset", "offer", "hexs", "mismatch", "StallMonitor", "CLOCK_PERIOD_NS"]

#: The testbenches' clock period.
CLOCK_PERIOD_NS = 10


#: Format name (as golden/ spells it) -> the 2-bit tag the hardware takes.
FORMAT_CODES = {f.golden_name: f.value for f in Fmt}


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
    """Start ``clk`` (if the design has one) and wait for its first rising edge."""
    if has_clock(dut):
        Clock(dut.clk, period_ns, unit="ns").start()
        await RisingEdge(dut.clk)


async def reset(dut, cycles: int = 2) -> None:
    """Hold ``rst`` for ``cycles`` clock cycles (no-op for a design without a clock)."""
    if has_clock(dut):
        dut.rst.value = 1
        await ClockCycles(dut.clk, cycles)
        dut.rst.value = 0


async def offer(dut, stream: str, payload: int) -> None:
    """Drive one beat into the DUT's input stream ``stream`` (ports ``<stream>__valid``,
    ``__payload``, ``__ready``), starting after a falling edge, until it is taken; returns
    after the next falling edge with ``valid`` low."""
    valid, ready = getattr(dut, f"{stream}__valid"), getattr(dut, f"{stream}__ready")
    getattr(dut, f"{stream}__payload").value = payload
    valid.value = 1
    while True:
        await ReadOnly()
        taken = bool(ready.value)
        await FallingEdge(dut.clk)
        if taken:
            break
    valid.value = 0


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
