"""cocotb checks of the runner itself, on ``sim.tb.selftest_design.InitialisedComb``."""

import cocotb
from cocotb.triggers import ClockCycles, Timer

from sim.tb import tbutil


@cocotb.test(**tbutil.timeout(1))
async def comb_output_defined_at_time_zero(dut):
    """No input ever changes, yet the combinational output must not be X (amaranth #1629)."""
    await Timer(1, unit="ns")
    assert dut.y.value.is_resolvable, f"y is {dut.y.value} at t=1ns in {tbutil.simulator()}"
    assert int(dut.y.value) == 0x5A ^ 0x0F


@cocotb.test(**tbutil.timeout(1))
async def counter_counts(dut):
    dut.x.value = 3
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    await ClockCycles(dut.clk, 5)
    await Timer(1, unit="ns")
    assert int(dut.count.value) == 15, f"count {int(dut.count.value)} != 15"
