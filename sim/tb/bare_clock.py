"""cocotb test behind ``make bench``'s simulation-speed section: the speed of a model alone.

Any design with a ``clk`` and a ``rst`` (the same build as a workload's: the same component,
parameters and public signals, so the runner reuses that build). The test drives every input
named in ``NCLITE_BARE_INPUTS`` (a JSON list: the top's input ports but ``clk`` and ``rst``) to
0, starts cocotb's clock in C (``Clock(..., impl="gpi")``: the simulator toggles it, no Python
per edge), resets the design for two cycles and then lets the model run by itself: one
``Timer`` of many cycles at a time, in as few Timers as make about ``NCLITE_BARE_SECONDS`` of
wall time (the first of ``NCLITE_BARE_CYCLES`` cycles, each next one sized from the speed so
far). Nothing in Python runs per cycle, so this is the speed of the model (an idle one: the
inputs stay at 0; Icarus, event-driven, does less work for an idle design than for a busy one,
Verilator evaluates every block each cycle anyway).

Where cocotb's default clock (``Clock`` without ``impl``, what ``sim.tb.tbutil.start_clock``
starts for every testbench) is a Python coroutine that wakes twice a cycle (Icarus: cocotb's
runner sets ``COCOTB_TRUST_INERTIAL_WRITES`` for Verilator only), the test then measures the
model with that clock the same way: the speed no testbench of this project can exceed in that
simulator, whatever else it does.

Cycles are the simulated time elapsed (``get_sim_time``) divided by the clock period; wall
seconds are ``time.perf_counter()`` around the Timers, inside the simulator process. The
figures go to ``NCLITE_BARE_OUT`` (JSON)::

    {"model": {"cycles", "wall_s", "cycles_per_s", "clock": "gpi"},
     "python_clock": {"cycles", "wall_s", "cycles_per_s", "clock": "py"} or None,
     "default_clock": "gpi" or "py", "simulator", "inputs": [...]}
"""

from __future__ import annotations

import json
import os
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, Timer
from cocotb.utils import get_sim_time

from sim.tb import tbutil

PERIOD_NS = tbutil.CLOCK_PERIOD_NS


async def _free_run(dut, seconds: float, first_cycles: int, max_cycles: int) -> dict:
    """Let the clock run, in Timers of many cycles, for about ``seconds`` of wall time."""
    start_ns, start = get_sim_time("ns"), time.perf_counter()
    chunk, wall, done = first_cycles, 0.0, 0
    while done < max_cycles:
        await Timer(chunk * PERIOD_NS, "ns")
        done += chunk
        wall = time.perf_counter() - start
        if wall >= seconds:
            break
        # The next Timer ends about when the budget does (at least first_cycles long).
        chunk = min(max_cycles - done, max(first_cycles, int(done / wall * (seconds - wall))))
    cycles = int(round((get_sim_time("ns") - start_ns) / PERIOD_NS))
    return {"cycles": cycles, "wall_s": wall, "cycles_per_s": cycles / wall}


@cocotb.test()
async def bare_clock(dut):
    """The model's speed with the clock in C, then with cocotb's default clock where that is
    Python."""
    seconds = float(os.environ.get("NCLITE_BARE_SECONDS", "1"))
    first = int(os.environ.get("NCLITE_BARE_CYCLES", "1000"))
    max_cycles = int(os.environ.get("NCLITE_BARE_MAX_CYCLES", str(10 ** 9)))
    inputs = json.loads(os.environ.get("NCLITE_BARE_INPUTS", "[]"))
    for name in inputs:
        getattr(dut, name).value = 0
    clock = Clock(dut.clk, PERIOD_NS, unit="ns", impl="gpi")
    clock.start()
    await tbutil.reset(dut)
    model = await _free_run(dut, seconds, first, max_cycles)
    clock.stop()
    # cocotb's default (what tbutil.start_clock starts): in C where the runner trusts inertial
    # writes (Verilator), else a coroutine (Icarus), measured then.
    clock = Clock(dut.clk, PERIOD_NS, unit="ns")
    python_clock = None
    if clock.impl == "py":
        clock.start()
        await ClockCycles(dut.clk, 2)
        python_clock = dict(await _free_run(dut, seconds, first, max_cycles), clock="py")
        clock.stop()
    out = {"simulator": tbutil.simulator(), "inputs": inputs, "default_clock": clock.impl,
           "model": dict(model, clock="gpi"), "python_clock": python_clock}
    with open(os.environ["NCLITE_BARE_OUT"], "w") as fh:
        json.dump(out, fh)
    assert model["cycles"] > 0, model
