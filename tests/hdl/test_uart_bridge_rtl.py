# amaranth: UnusedElaboratable=no
"""The UART-to-AXI4-Lite bridge in cocotb: sim.host.uart_link's client over cocotbext-uart on its
pins, cocotbext-axi's AxiLiteRam behind it (sim/tb/uart_bridge.py), in Icarus and
Verilator: the board's configuration (32-bit addresses), and a narrow bus (16-bit addresses:
the range check) with an odd divisor."""

import pytest

from sim import runner

FACTORY = "hdl.uart_bridge:UartAxiLiteBridge"


def test_uart_bridge(simulator):
    runner.run(FACTORY, {"divisor": 4, "timeout": 40}, "sim.tb.uart_bridge", simulator,
               run_tag="d4")


def test_uart_bridge_narrow_bus(simulator):
    runner.run(FACTORY, {"divisor": 5, "timeout": 24, "addr_width": 16}, "sim.tb.uart_bridge",
               simulator, run_tag="d5-a16")


@pytest.mark.parametrize("kwargs, exc, param", [
    ({"divisor": 3}, ValueError, "divisor"), ({"divisor": 4.0}, TypeError, "divisor"),
    ({"divisor": True}, TypeError, "divisor"),
    ({"divisor": 8, "addr_width": 1}, ValueError, "addr_width"),
    ({"divisor": 8, "addr_width": 33}, ValueError, "addr_width"),
    ({"divisor": 8, "timeout": 19}, ValueError, "timeout")])
def test_bad_parameters(kwargs, exc, param):
    from hdl.uart_bridge import UartAxiLiteBridge

    with pytest.raises(exc, match=param):
        UartAxiLiteBridge(**kwargs)
