"""A cocotb test that must fail: proves the runner reports failures (tests/test_runner.py)."""

import cocotb
from cocotb.triggers import Timer


@cocotb.test()
async def always_fails(dut):
    await Timer(1, unit="ns")
    assert int(dut.y.value) == 0, "this failure is expected by tests/test_runner.py"
