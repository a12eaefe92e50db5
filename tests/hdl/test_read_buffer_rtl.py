"""``hdl.read_port.ReadBuffer``: cocotb on the emitted Verilog, both simulators
(``sim/tb/read_buffer.py``); in the core, every streaming SBUF reader goes through one
(``tests/hdl/test_core_rtl.py``)."""

import pytest

from sim import runner


@pytest.mark.parametrize("latency", [1, 3])
def test_read_buffer(simulator, latency):
    runner.run("hdl.read_port:ReadBuffer", {"shape": 16, "latency": latency},
               "sim.tb.read_buffer", simulator, testcase="stalls,full_rate",
               run_tag=f"l{latency}")


@pytest.mark.parametrize("latency, exc", [(0, ValueError), (1.5, TypeError)])
def test_read_buffer_bad_latency(latency, exc):
    from hdl.read_port import ReadBuffer

    with pytest.raises(exc, match="latency"):
        ReadBuffer(8, latency=latency)
