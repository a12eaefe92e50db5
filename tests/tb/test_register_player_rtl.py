"""``hdl.register_player.RegisterPlayer``: cocotb on the emitted Verilog, both simulators,
against cocotbext-axi's ``AxiLiteRam`` (``sim/tb/register_player.py``); on the core, in
``tests/hdl/test_core_rtl.py``'s ``played_pushes`` (its parameter errors:
tests/hdl/test_params.py)."""

import pytest

from sim import runner


@pytest.mark.parametrize("testcase", ["writes_in_order", "poll_holds_what_follows"])
def test_register_player(simulator, testcase):
    runner.run("hdl.register_player:RegisterPlayer", {"k": 8}, "sim.tb.register_player",
               simulator, testcase=testcase, run_tag=testcase)

