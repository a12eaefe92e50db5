"""SBUF read ports: their latency, a read enable that defines a port's data during reset, and
the buffer through which a streaming reader offers its words with back pressure."""

from amaranth.hdl import Module, Mux, ResetSignal, Signal, Value
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .params import check_int
from .pipeline import delay

__all__ = ["read_enable", "ReadBuffer", "SBUF_READ_LATENCY"]

#: Cycles from an SBUF read's enable to its words on the read port: the address registered,
#: the block RAMs' output registers, then the port's data registers (see ``hdl.core._Sbuf``).
SBUF_READ_LATENCY = 3


def read_enable(en, domain: str = "sync"):
    """The enable of a synchronous memory read port: ``en``, and every cycle ``domain``'s reset
    is held.

    A read port's data register has no reset and no initial value in the emitted Verilog
    (Yosys writes a ``$memrd`` without one), and loads only when enabled: a port whose users
    have not read yet would show X in a 4-state simulator, and whatever the block RAM holds on
    a board. Reading during reset (the address comes from registers the reset defines) puts a
    defined word in it before reset is released; after it, the port reads exactly when ``en``
    says, so users see no change (``tests/hdl/test_x_safety_rtl.py``). In a reset-less domain
    (an FPGA platform's ``sync`` whose flip-flops the device's global set/reset initializes,
    as on the ECP5) it is ``en``.
    """
    return en | ResetSignal(domain, allow_reset_less=True)


class ReadBuffer(wiring.Component):
    """A streaming reader's words as a stream with back pressure, from a read port that never
    stalls.

    The reader issues a read (``issue``) only in a cycle with ``room``; ``latency`` cycles
    later it puts that read's words on ``data`` (for that cycle only). They are offered on
    ``out`` in that cycle if nothing waits before them, else queued. ``room`` counts the reads
    in flight and queued (``pending``) against ``latency`` + 1, the queue's depth: a reader
    whose stream does not stall issues a read every cycle, and one that stalls loses no word.

    Latency: none from ``data`` to ``out`` (``latency`` from ``issue``). Throughput: a word a
    cycle. ``room`` and ``out.valid`` come from registers, so a consumer's ``ready`` reaches
    neither the read port's enable nor its address in the cycle it is given.

    Parameters
    ----------
    shape : shape-like
        The words of a read, as the reader presents them.
    latency : int
        Cycles from a read's ``issue`` to its words on ``data`` (a positive integer).
    """

    def __init__(self, shape, *, latency=SBUF_READ_LATENCY):
        check_int("latency", latency, lo=1)
        self._latency = latency
        self.depth = latency + 1
        super().__init__({
            "issue": In(1), "room": Out(1), "data": In(shape),
            "out": Out(stream.Signature(shape)), "pending": Out(range(self.depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        data = Value.cast(self.data)
        width = len(data)
        m.submodules.queue = queue = fifo.SyncFIFO(width=width, depth=self.depth)
        arrives = delay(m, self.issue, self._latency, name="arrives")
        direct = arrives & ~queue.r_rdy  # offered as it arrives
        taken = Signal()
        m.d.comb += [
            self.out.valid.eq(queue.r_rdy | arrives),
            self.out.payload.eq(Mux(queue.r_rdy, queue.r_data, data)),
            taken.eq(self.out.valid & self.out.ready),
            queue.r_en.eq(self.out.ready),
            queue.w_en.eq(arrives & ~(direct & self.out.ready)),
            queue.w_data.eq(data),
            self.room.eq(self.pending < self.depth),
        ]
        m.d.sync += self.pending.eq(self.pending + self.issue - taken)
        return m
