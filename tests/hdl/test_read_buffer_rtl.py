"""``hdl.read_port.ReadBuffer``: cocotb on the emitted Verilog, both simulators
(``sim/tb/read_buffer.py``); in the core, every streaming SBUF reader goes through one
(``tests/hdl/test_core_rtl.py``); its parameter errors: ``tests/hdl/test_params.py``."""

import pytest

from sim import runner


@pytest.mark.parametrize("latency", [1, 3])
def test_read_buffer(simulator, latency):
    runner.run("hdl.read_port:ReadBuffer", {"shape": 16, "latency": latency},
               "sim.tb.read_buffer", simulator, testcase="stalls,full_rate",
               run_tag=f"l{latency}")

