# amaranth: UnusedElaboratable=no
"""``hdl.register_player.RegisterPlayer``: cocotb on the emitted Verilog, both simulators,
against cocotbext-axi's ``AxiLiteRam`` (``sim/tb/register_player.py``); on the core, in
``tests/hdl/test_core_rtl.py``'s ``played_pushes``."""

import pytest

from hdl.register_player import RegisterPlayer
from sim import runner


@pytest.mark.parametrize("testcase", ["writes_in_order", "poll_holds_what_follows"])
def test_register_player(simulator, testcase):
    runner.run("hdl.register_player:RegisterPlayer", {"k": 8}, "sim.tb.register_player",
               simulator, testcase=testcase, run_tag=testcase)


@pytest.mark.parametrize("k, exc", [(0, ValueError), (1025, ValueError), ("8", TypeError)])
def test_bad_batch(k, exc):
    with pytest.raises(exc, match="k must be an integer between 1 and 1024"):
        RegisterPlayer(k=k)
