"""A cocotb test that must fail: proves the runner reports failures (tests/test_runner.py)."""

import cocotb
from cocotb.triggers import Timer

from sim.tb import tbutil


@cocotb.test(**tbutil.timeout(1))
async def always_fails(dut):
    await Timer(1, unit="ns")
    assert int(dut.y.value) == 0, "this failure is expected by tests/test_runner.py"
