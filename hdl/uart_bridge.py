"""A UART-to-AXI4-Lite bridge: a host reads and writes a bus over a serial line.

Byte protocol
=============

The line is 8N1 at ``clock_hz / divisor`` baud. The host sends a *request frame* and waits for
its *response frame* before it sends the next request (one request at a time: bytes that
arrive while the bridge executes a request or sends its response are dropped and counted).
Multi-byte numbers are little-endian. CRC is CRC-8 with polynomial 0x07, initial value 0, no
reflection, no final XOR (CRC-8/SMBUS: the CRC of the ASCII bytes ``123456789`` is 0xF4),
computed over every byte of the frame after its sync byte and before the CRC byte.

Request frames (``CMD`` is one byte, ``COUNT`` the number of 32-bit words, 1..16, ``ADDR`` the
byte address of the first word; word ``i`` is at ``ADDR + 4 * i``)::

    WRITE   A5 01 COUNT ADDR[4] DATA[4 * COUNT] CRC
    READ    A5 02 COUNT ADDR[4] CRC
    STATUS  A5 03 CRC

Response frames::

    5A STATUS DATA CRC

``DATA`` is present only when ``STATUS`` is OK (0x00): a READ's ``4 * COUNT`` bytes of read
data, or a STATUS request's :data:`STATUS_COUNTERS` as eight 32-bit words; a WRITE's
response has no data. So a host reads the sync and status bytes, then the data (its length
follows from the request and the status) and the CRC, which covers the status and the data.
``STATUS`` (:class:`Status`): the low four bits are the code, the high four bits the index
(0..15) of the failing word for the AXI error codes (0 otherwise):

==== =========== =====================================================================
code name        meaning
==== =========== =====================================================================
0    OK          done
1..3 EXOKAY,     the AXI response (RRESP / BRESP) of the first beat that did not answer
     SLVERR,     OKAY; the burst stopped there: earlier beats were done, later ones
     DECERR      were not issued
4    BAD_CRC     the frame's CRC did not match; nothing was done
5    BAD_COMMAND an unknown command byte, or an address that is not a multiple of 4 or
                 whose burst reaches past ``2 ** addr_width``; nothing was done
6    BAD_COUNT   COUNT is 0 or more than 16; nothing was done
==== =========== =====================================================================

Frame handling: while hunting, the bridge drops (and counts) every byte other than the
request sync byte 0xA5. The header (command, count, address) is checked as it arrives,
before the CRC, so a corrupted header byte may give BAD_COMMAND or BAD_COUNT rather than
BAD_CRC. A frame whose header is bad (where the frame's length may be unknown) is drained:
the bridge drops bytes until the line has been idle for ``timeout`` bit times and only then
sends the error response, so the rest of the bad frame can never start a phantom frame.
A frame whose next byte does not arrive within ``timeout`` bit times of the previous one (a
frame cut short; counted from byte to byte, so back-to-back bytes are 10 bit times apart) is
abandoned without a response: the bridge goes back to hunting, and the host sees its own
timeout. The host must therefore send each frame without long pauses; the
default ``timeout`` of 10 000 bit times (87 ms at 115 200 baud) leaves room for a USB-UART
adapter's packet gaps. So every complete frame gets exactly one response, and the bridge
never sends anything else. No malformed frame causes any AXI access.

Counters (the STATUS response, 32 bits each, wrapping, copied when the STATUS request has
passed its CRC check; :data:`STATUS_COUNTERS` order):
``frames`` requests that passed every check, this STATUS request included; ``rejected`` frames
rejected for any reason (bad CRC, bad command/count/address, cut short); ``bad_crc``;
``bad_command`` (BAD_COMMAND and BAD_COUNT); ``timeouts`` (frames cut short); ``axi_errors``
(requests that ended with an AXI error); ``dropped_bytes`` (bytes dropped while hunting,
draining, executing or responding); ``uart_errors`` (received bytes whose stop bit was 0, and
receiver overruns).

AXI4-Lite master (``axil``): one transaction at a time, AW and W offered together, each
valid held until its ready; ``wstrb`` all ones, ``awprot`` / ``arprot`` 0; ``bready`` and
``rready`` high only while a response is awaited. The words of a WRITE arrive in full (and
the CRC is checked) before the first AXI write.

Reset abandons the frame being received, executed or answered: no response follows (a
response being sent stops, ``tx`` goes idle), no further AXI beat is issued (the beats of a
WRITE done before the reset stay done), and every counter reads 0 again.

Timing: a request is executed once its CRC byte is in, the response starts immediately after
(a bad-header response ``timeout`` bit times after the last byte). Each frame byte is 10 bit
times; an AXI beat adds the slave's latency plus about 3 cycles.
"""

import enum

from amaranth.hdl import Array, Cat, Const, Module, Signal, Value
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from .cmdqueue import AxiLiteSignature
from .params import check_int
from .uart import UartRx, UartTx, check_divisor

__all__ = ["UartAxiLiteBridge", "Command", "Status", "REQUEST_SYNC", "RESPONSE_SYNC",
           "MAX_WORDS", "STATUS_COUNTERS", "CRC_POLY", "crc8_update"]

REQUEST_SYNC = 0xA5
RESPONSE_SYNC = 0x5A
MAX_WORDS = 16
CRC_POLY = 0x07

#: The STATUS response's words, in order.
STATUS_COUNTERS = ("frames", "rejected", "bad_crc", "bad_command", "timeouts", "axi_errors",
                   "dropped_bytes", "uart_errors")


class Command(enum.IntEnum):
    WRITE = 0x01
    READ = 0x02
    STATUS = 0x03


class Status(enum.IntEnum):
    """A response's status code (the low four bits of its STATUS byte)."""
    OK = 0
    EXOKAY = 1  # AXI EXOKAY, not a legal AXI4-Lite response
    SLVERR = 2
    DECERR = 3
    BAD_CRC = 4
    BAD_COMMAND = 5
    BAD_COUNT = 6


def _crc8_byte(value: int) -> int:
    """The CRC-8 step of :func:`crc8_update` on integers: ``value`` is ``crc ^ byte``."""
    for _ in range(8):
        value = ((value << 1) ^ (CRC_POLY if value & 0x80 else 0)) & 0xFF
    return value


def crc8_update(crc: Value, byte: Value) -> Value:
    """The CRC-8 (polynomial :data:`CRC_POLY`, MSB first) of ``crc`` extended by ``byte``: an
    XOR network (the step is linear in ``crc ^ byte``)."""
    c = Value.cast(crc ^ byte)
    bits = []
    for i in range(8):
        taps = [c[j] for j in range(8) if _crc8_byte(1 << j) >> i & 1]
        out = Const(0, 1)
        for t in taps:
            out = out ^ t
        bits.append(out)
    return Cat(*bits)


class UartAxiLiteBridge(wiring.Component):
    """Turns the request frames received on ``rx`` into AXI4-Lite reads and writes on
    ``axil`` and answers each on ``tx``; see the module documentation for the protocol.

    Parameters
    ----------
    divisor : int
        Clock cycles per UART bit, at least 4.
    addr_width : int
        Bits of ``axil``'s address, 2 to 32 (default 32).
    timeout : int
        The inter-byte timeout in bit times, at least 20 (default 10 000).

    Raises
    ------
    TypeError
        If ``divisor``, ``addr_width`` or ``timeout`` is not an integer.
    ValueError
        If ``divisor``, ``addr_width`` or ``timeout`` is out of range.
    """

    def __init__(self, *, divisor: int, addr_width: int = 32, timeout: int = 10_000):
        self.divisor = check_divisor(divisor)
        self.addr_width = check_int("addr_width", addr_width, lo=2, hi=32)
        self.timeout = check_int("timeout", timeout, lo=20, note="(bit times)")
        super().__init__({
            "rx": In(1, init=1),
            "tx": Out(1, init=1),
            "axil": In(AxiLiteSignature(addr_width=addr_width)),  # the master's side
        })

    def elaborate(self, platform):
        m = Module()
        bus = self.axil
        m.submodules.uart_rx = urx = UartRx(divisor=self.divisor)
        m.submodules.uart_tx = utx = UartTx(divisor=self.divisor)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx), urx.data.ready.eq(1)]
        got, byte = urx.data.valid, urx.data.payload

        m.submodules.buf = buf = memory.Memory(shape=32, depth=MAX_WORDS, init=[])
        wr, rd = buf.write_port(), buf.read_port()

        cmd = Signal(2)
        count = Signal(range(MAX_WORDS + 1))
        addr = Signal(32)
        beat = Signal(range(MAX_WORDS + 1))
        nbyte = Signal(2)  # byte within a word
        word = Signal(24)  # the first three bytes of a word being received
        crc = Signal(8)
        status = Signal(8)
        crc_next = crc8_update(crc, byte)
        last_beat = beat == count - 1
        m.d.comb += [rd.addr.eq(beat), wr.addr.eq(beat)]

        # Inter-byte timer: reloaded by every received byte; only frame states look at it.
        limit = self.timeout * self.divisor
        timer = Signal(range(limit))
        expired = timer == 0
        with m.If(got):
            m.d.sync += timer.eq(limit - 1)
        with m.Elif(~expired):
            m.d.sync += timer.eq(timer - 1)

        counters = {name: Signal(32, name=f"n_{name}") for name in STATUS_COUNTERS}
        inc = {name: Signal(name=f"inc_{name}") for name in STATUS_COUNTERS}
        for name in STATUS_COUNTERS:
            with m.If(inc[name]):
                m.d.sync += counters[name].eq(counters[name] + 1)
        m.d.comb += inc["uart_errors"].eq(urx.frame_error | urx.overrun)

        def reject(reason):
            m.d.comb += [inc["rejected"].eq(1), inc[reason].eq(1)]

        aw_done, w_done = Signal(), Signal()
        m.d.comb += [bus.wstrb.eq(0xF), bus.awprot.eq(0), bus.arprot.eq(0),
                     bus.awaddr.eq(addr), bus.araddr.eq(addr), bus.wdata.eq(rd.data)]

        with m.FSM():
            with m.State("HUNT"):
                with m.If(got):
                    with m.If(byte == REQUEST_SYNC):
                        m.d.sync += crc.eq(0)
                        m.next = "CMD"
                    with m.Else():
                        m.d.comb += inc["dropped_bytes"].eq(1)

            with m.State("CMD"):
                with m.If(got):
                    m.d.sync += [crc.eq(crc_next), cmd.eq(byte[:2])]
                    with m.If(byte == Command.STATUS):
                        m.next = "CRC"
                    with m.Elif((byte == Command.WRITE) | (byte == Command.READ)):
                        m.next = "COUNT"
                    with m.Else():
                        m.d.sync += status.eq(Status.BAD_COMMAND)
                        m.next = "DRAIN"
                with m.Elif(expired):
                    reject("timeouts")
                    m.next = "HUNT"

            with m.State("COUNT"):
                with m.If(got):
                    m.d.sync += [crc.eq(crc_next), count.eq(byte), nbyte.eq(0)]
                    with m.If((byte >= 1) & (byte <= MAX_WORDS)):
                        m.next = "ADDR"
                    with m.Else():
                        m.d.sync += status.eq(Status.BAD_COUNT)
                        m.next = "DRAIN"
                with m.Elif(expired):
                    reject("timeouts")
                    m.next = "HUNT"

            with m.State("ADDR"):
                new_addr = Cat(addr[8:], byte)
                end = Signal(34)  # one past the burst's last byte
                m.d.comb += end.eq(new_addr + (count << 2))
                with m.If(got):
                    m.d.sync += [crc.eq(crc_next), addr.eq(new_addr), nbyte.eq(nbyte + 1),
                                 beat.eq(0)]
                    with m.If(nbyte == 3):
                        with m.If((new_addr[:2] != 0) | (end > (1 << self.addr_width))):
                            m.d.sync += status.eq(Status.BAD_COMMAND)
                            m.next = "DRAIN"
                        with m.Elif(cmd == Command.WRITE):
                            m.next = "DATA"
                        with m.Else():
                            m.next = "CRC"
                with m.Elif(expired):
                    reject("timeouts")
                    m.next = "HUNT"

            with m.State("DATA"):
                m.d.comb += [wr.data.eq(Cat(word, byte)), wr.en.eq(got & (nbyte == 3))]
                with m.If(got):
                    m.d.sync += [crc.eq(crc_next), word.eq(Cat(word[8:], byte)),
                                 nbyte.eq(nbyte + 1)]
                    with m.If(nbyte == 3):
                        m.d.sync += beat.eq(beat + 1)
                        with m.If(last_beat):
                            m.next = "CRC"
                with m.Elif(expired):
                    reject("timeouts")
                    m.next = "HUNT"

            with m.State("CRC"):
                with m.If(got):
                    m.d.sync += [beat.eq(0), status.eq(Status.OK)]
                    with m.If(crc_next != 0):
                        reject("bad_crc")
                        m.d.sync += status.eq(Status.BAD_CRC)
                        m.next = "SEND_SYNC"
                    with m.Else():
                        m.d.comb += inc["frames"].eq(1)
                        with m.If(cmd == Command.WRITE):
                            m.next = "W_LOAD"
                        with m.Elif(cmd == Command.READ):
                            m.next = "AR"
                        with m.Else():
                            m.d.sync += count.eq(len(STATUS_COUNTERS))
                            m.next = "STATUS"
                with m.Elif(expired):
                    reject("timeouts")
                    m.next = "HUNT"

            with m.State("DRAIN"):
                with m.If(got):
                    m.d.comb += inc["dropped_bytes"].eq(1)
                with m.Elif(expired):
                    reject("bad_command")
                    m.next = "SEND_SYNC"

            # --- Execution: every byte received from here to the end of the response is
            # dropped.
            with m.State("W_LOAD"):  # the read port fetches word `beat`
                m.d.comb += inc["dropped_bytes"].eq(got)
                m.d.sync += [aw_done.eq(0), w_done.eq(0)]
                m.next = "W"

            with m.State("W"):
                m.d.comb += [inc["dropped_bytes"].eq(got),
                             bus.awvalid.eq(~aw_done), bus.wvalid.eq(~w_done)]
                with m.If(bus.awready):
                    m.d.sync += aw_done.eq(1)
                with m.If(bus.wready):
                    m.d.sync += w_done.eq(1)
                with m.If((aw_done | bus.awready) & (w_done | bus.wready)):
                    m.next = "B"

            with m.State("B"):
                m.d.comb += [inc["dropped_bytes"].eq(got), bus.bready.eq(1)]
                with m.If(bus.bvalid):
                    m.d.sync += [beat.eq(beat + 1), addr.eq(addr + 4)]
                    with m.If(bus.bresp != 0):
                        m.d.comb += inc["axi_errors"].eq(1)
                        m.d.sync += status.eq(Cat(bus.bresp, Const(0, 2), beat[:4]))
                        m.next = "SEND_SYNC"
                    with m.Elif(last_beat):
                        m.next = "SEND_SYNC"
                    with m.Else():
                        m.next = "W_LOAD"

            with m.State("AR"):
                m.d.comb += [inc["dropped_bytes"].eq(got), bus.arvalid.eq(1)]
                with m.If(bus.arready):
                    m.next = "R"

            with m.State("R"):
                m.d.comb += [inc["dropped_bytes"].eq(got), bus.rready.eq(1),
                             wr.data.eq(bus.rdata), wr.en.eq(bus.rvalid)]
                with m.If(bus.rvalid):
                    m.d.sync += [beat.eq(beat + 1), addr.eq(addr + 4)]
                    with m.If(bus.rresp != 0):
                        m.d.comb += inc["axi_errors"].eq(1)
                        m.d.sync += status.eq(Cat(bus.rresp, Const(0, 2), beat[:4]))
                        m.next = "SEND_SYNC"
                    with m.Elif(last_beat):
                        m.next = "SEND_SYNC"
                    with m.Else():
                        m.next = "AR"

            with m.State("STATUS"):  # a snapshot of the counters into the buffer
                m.d.comb += [inc["dropped_bytes"].eq(got),
                             wr.data.eq(Array(counters.values())[beat[:3]]), wr.en.eq(1)]
                m.d.sync += beat.eq(beat + 1)
                with m.If(last_beat):
                    m.next = "SEND_SYNC"

            # --- The response.
            with m.State("SEND_SYNC"):
                m.d.comb += [inc["dropped_bytes"].eq(got),
                             utx.data.payload.eq(RESPONSE_SYNC), utx.data.valid.eq(1)]
                with m.If(utx.data.ready):
                    m.d.sync += crc.eq(0)
                    m.next = "SEND_STATUS"

            with m.State("SEND_STATUS"):
                m.d.comb += [inc["dropped_bytes"].eq(got),
                             utx.data.payload.eq(status), utx.data.valid.eq(1)]
                with m.If(utx.data.ready):
                    m.d.sync += [crc.eq(crc8_update(crc, status)), beat.eq(0), nbyte.eq(0)]
                    with m.If((status == Status.OK) & (cmd != Command.WRITE)):
                        m.next = "SEND_LOAD"
                    with m.Else():
                        m.next = "SEND_CRC"

            with m.State("SEND_LOAD"):  # the read port fetches word `beat`
                m.d.comb += inc["dropped_bytes"].eq(got)
                m.next = "SEND_DATA"

            with m.State("SEND_DATA"):
                out = rd.data.word_select(nbyte, 8)
                m.d.comb += [inc["dropped_bytes"].eq(got),
                             utx.data.payload.eq(out), utx.data.valid.eq(1)]
                with m.If(utx.data.ready):
                    m.d.sync += [crc.eq(crc8_update(crc, out)), nbyte.eq(nbyte + 1)]
                    with m.If(nbyte == 3):
                        m.d.sync += beat.eq(beat + 1)
                        with m.If(last_beat):
                            m.next = "SEND_CRC"
                        with m.Else():
                            m.next = "SEND_LOAD"

            with m.State("SEND_CRC"):
                m.d.comb += [inc["dropped_bytes"].eq(got),
                             utx.data.payload.eq(crc), utx.data.valid.eq(1)]
                with m.If(utx.data.ready):
                    m.next = "HUNT"
        return m
