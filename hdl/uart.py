"""A UART transmitter and receiver: 8 data bits, no parity, 1 stop bit (8N1), LSB first."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .params import check_int

__all__ = ["UartTx", "UartRx", "check_divisor"]


def check_divisor(divisor) -> int:
    """Return ``divisor`` if it is a legal bit period in clock cycles (an integer >= 4)."""
    return check_int("divisor", divisor, lo=4)


class UartTx(wiring.Component):
    """Sends the bytes of ``data`` on ``tx`` (idle high), one bit every ``divisor`` cycles.

    Frame: a start bit (0), the eight data bits LSB first, a stop bit (1). ``data.ready`` is
    high while the transmitter is idle and in the last cycle of a stop bit; a byte taken on a
    clock edge starts its start bit on ``tx`` from that edge on, so back-to-back bytes leave
    without a gap, 10 bit times each.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least 4 (``clock_hz // baud``).

    Raises
    ------
    TypeError
        If ``divisor`` is not an integer.
    ValueError
        If ``divisor`` is below 4.
    """

    def __init__(self, *, divisor: int):
        self.divisor = check_divisor(divisor)
        super().__init__({
            "data": In(stream.Signature(8)),
            "tx": Out(1, init=1),
        })

    def elaborate(self, platform):
        m = Module()
        shreg = Signal(10, init=0x3FF)  # {stop, data[7:0], start}: tx is bit 0
        bits = Signal(range(11))  # bits still to send, including the current one
        timer = Signal(range(self.divisor))
        # Ready while idle, and on the last cycle of a stop bit (no idle cycle between bytes).
        m.d.comb += [self.tx.eq(shreg[0]),
                     self.data.ready.eq((bits == 0) | ((bits == 1) & (timer == 0)))]
        with m.If(self.data.valid & self.data.ready):
            m.d.sync += [shreg.eq(Cat(Const(0, 1), self.data.payload, Const(1, 1))),
                         bits.eq(10), timer.eq(self.divisor - 1)]
        with m.Elif(bits != 0):
            with m.If(timer == 0):
                m.d.sync += [shreg.eq(Cat(shreg[1:], Const(1, 1))), bits.eq(bits - 1),
                             timer.eq(self.divisor - 1)]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        return m


class UartRx(wiring.Component):
    """Receives bytes on ``rx`` into ``data``: 8N1, LSB first, ``divisor`` cycles per bit.

    ``rx`` passes a two-flop synchronizer. A low level on the synchronized line starts a
    frame; the start bit is checked again half a bit later (a shorter low pulse is ignored)
    and every following bit is sampled there, mid-bit, every ``divisor`` cycles. At the
    middle of the stop bit: a 1 delivers the byte on ``data`` (``valid`` from the next cycle,
    held with its payload until ``ready``), a 0 discards it, pulses ``frame_error`` for one
    cycle and waits for the line to return high before looking for the next start bit (so a
    break counts once). A byte that arrives while the previous one still waits on ``data`` is
    dropped and ``overrun`` pulses for one cycle. Latency: a byte is on ``data`` 9.5 bit times
    plus at most 3 cycles after its start bit begins on ``rx``.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least 4 (``clock_hz // baud``).

    Raises
    ------
    TypeError
        If ``divisor`` is not an integer.
    ValueError
        If ``divisor`` is below 4.
    """

    def __init__(self, *, divisor: int):
        self.divisor = check_divisor(divisor)
        super().__init__({
            "rx": In(1, init=1),
            "data": Out(stream.Signature(8)),
            "frame_error": Out(1),
            "overrun": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        meta, line = Signal(init=1), Signal(init=1)
        m.d.sync += [meta.eq(self.rx), line.eq(meta)]

        half = self.divisor // 2
        timer = Signal(range(self.divisor))
        shreg = Signal(8)
        bits = Signal(range(8))

        with m.If(self.data.ready):
            m.d.sync += self.data.valid.eq(0)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += timer.eq(half - 1)
                    m.next = "START"
            with m.State("START"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    m.d.sync += [timer.eq(self.divisor - 1), bits.eq(0)]
                    with m.If(line):  # a glitch, not a start bit
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "DATA"
            with m.State("DATA"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    m.d.sync += [timer.eq(self.divisor - 1), shreg.eq(Cat(shreg[1:], line)),
                                 bits.eq(bits + 1)]
                    with m.If(bits == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                m.d.sync += timer.eq(timer - 1)
                with m.If(timer == 0):
                    with m.If(~line):
                        m.d.comb += self.frame_error.eq(1)
                        m.next = "BREAK"
                    with m.Elif(self.data.valid & ~self.data.ready):
                        m.d.comb += self.overrun.eq(1)
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += [self.data.valid.eq(1), self.data.payload.eq(shreg)]
                        m.next = "IDLE"
            with m.State("BREAK"):
                with m.If(line):
                    m.next = "IDLE"
        return m
