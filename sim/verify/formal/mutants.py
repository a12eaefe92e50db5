"""Deliberately broken designs: their proofs must FAIL, so a PASS elsewhere is not vacuous.

They live here, not in ``hdl/``. Each mutant goes through the same harness and flow as the real
components (:func:`~sim.verify.formal.streams.protocol_top`,
:class:`~sim.verify.formal.harness.FormalTop`).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["CountingSource", "OverfillingProducer"]


class CountingSource(wiring.Component):
    """A stream source of an 8-bit counter, offering a beat whenever ``start`` is high.

    ``bug``: ``None`` obeys the stream rules (the control); ``"drop_valid"`` withdraws
    ``valid`` when ``start`` falls even if the beat was not taken; ``"change_payload"`` keeps
    counting while stalled (the payload changes under ``valid & ~ready``).
    """

    def __init__(self, bug: str | None = None):
        if bug not in (None, "drop_valid", "change_payload"):
            raise ValueError(f"unknown bug {bug!r}")
        self.bug = bug
        super().__init__({"start": In(1), "o": Out(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        count = Signal(8)
        m.d.comb += self.o.payload.eq(count)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += [self.o.valid.eq(self.start), count.eq(count + 1)]
        with m.Elif(~self.o.valid):
            m.d.sync += self.o.valid.eq(self.start)
        if self.bug == "drop_valid":
            with m.If(~self.start):
                m.d.sync += self.o.valid.eq(0)
        elif self.bug == "change_payload":
            with m.If(self.o.valid & ~self.o.ready):
                m.d.sync += count.eq(count + 1)
        return m


class OverfillingProducer(wiring.Component):
    """Writes ``i`` into a 2-deep ``SyncFIFO`` read by ``o``; its bug: it ignores ``w_rdy``
    (``i.ready`` is always high), so a beat offered to the full FIFO is silently lost.
    The FIFO proof must report the overflow."""

    def __init__(self):
        super().__init__({"i": In(stream.Signature(8)), "o": Out(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.buf = buf = fifo.SyncFIFO(width=8, depth=2)
        m.d.comb += [buf.w_en.eq(self.i.valid), buf.w_data.eq(self.i.payload),
                     self.i.ready.eq(1),
                     self.o.valid.eq(buf.r_rdy), self.o.payload.eq(buf.r_data),
                     buf.r_en.eq(self.o.ready)]
        return m
