"""A :mod:`sim.host.uart_link` transport for cocotb: drives a design's UART pins with
cocotbext-uart's ``UartSource`` / ``UartSink`` (which work under cocotb 2.1; see the notes on
:class:`CocotbUartTransport`)."""

from __future__ import annotations

import logging
import warnings

from cocotb.triggers import Timer
from cocotbext.uart import UartSink, UartSource

__all__ = ["CocotbUartTransport"]


class CocotbUartTransport:
    """``send`` writes bytes into the design's ``dut_rx_pin``; ``recv`` takes the bytes the
    design sent on ``dut_tx_pin``. ``bit_ns``: the bit period in ns (a whole number:
    cocotbext-uart times its bits in whole ns); ``timeout_ns``: how long ``recv`` waits for a
    byte before it raises ``TimeoutError``. Bytes received before ``recv`` asks for them are
    kept in order (:meth:`pending`, :meth:`clear`).

    cocotbext-uart 0.1.4 under cocotb 2.1: transmit and receive work (Icarus and Verilator).
    Its quirks, handled here: ``UartSource`` sets the idle level with the deprecated
    ``setimmediatevalue`` (a DeprecationWarning, silenced); ``UartSink.read(n)`` raises
    ``QueueEmpty`` when fewer than ``n`` bytes are queued (so :meth:`recv` collects bytes
    itself); both log every byte at INFO (lowered to WARNING here); the sink does not check
    the stop bit.
    """

    def __init__(self, dut_tx_pin, dut_rx_pin, bit_ns: int, *, timeout_ns: int = 1_000_000):
        if not isinstance(bit_ns, int) or bit_ns < 2:
            raise ValueError(f"bit_ns must be an integer >= 2, not {bit_ns!r}")
        baud = 1e9 / bit_ns
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            self.source = UartSource(dut_rx_pin, baud=baud)
            self.sink = UartSink(dut_tx_pin, baud=baud)
        for end in (self.source, self.sink):
            end.log.setLevel(logging.WARNING)
        self.bit_ns, self.timeout_ns = bit_ns, timeout_ns

    async def send(self, data: bytes) -> None:
        """Queue ``data`` and return once its last stop bit has been sent."""
        await self.source.write(bytes(data))
        await self.source.wait()

    async def recv(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            if self.sink.empty():
                await self.sink.wait(self.timeout_ns, "ns")
                if self.sink.empty():
                    raise TimeoutError(f"UART: {len(out)} of {n} bytes arrived; none in the "
                                       f"last {self.timeout_ns} ns")
            out += self.sink.read_nowait(min(self.sink.count(), n - len(out)))
        return bytes(out)

    def pending(self) -> int:
        """Bytes received and not yet taken by :meth:`recv`."""
        return self.sink.count()

    def clear(self) -> None:
        self.sink.clear()

    async def idle(self, bits: int) -> None:
        """Let the line stay idle for ``bits`` bit times."""
        await Timer(bits * self.bit_ns, "ns")
