"""cocotb check of the runner's ports-only Verilator models, on
``sim.tb.selftest_design.WithSubmodule`` built with ``public=["inner.count"]``: the named internal
signal is visible and follows the design, an unnamed one is not (Icarus sees every signal)."""

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly

from sim.tb import tbutil


def _visible(dut, *path: str) -> bool:
    handle = dut
    try:
        for name in path:
            handle = getattr(handle, name)
    except AttributeError:
        return False
    return True


@cocotb.test(**tbutil.timeout(1))
async def only_named_internal_signals_are_visible(dut):
    dut.x.value = 3
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    await ClockCycles(dut.clk, 5)
    await ReadOnly()
    assert _visible(dut, "inner", "count"), "inner.count was named public but is not visible"
    assert int(dut.inner.count.value) == int(dut.count.value) == 15
    hidden = tbutil.simulator() == "verilator"
    assert _visible(dut, "inner", "held") != hidden, (
        f"inner.held (not named public) is {'visible' if not hidden else 'hidden'} in "
        f"{tbutil.simulator()}")
