"""A tiny component the runner's own tests elaborate (test code, so in sim/, not hdl/)."""

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["InitialisedComb", "WithSubmodule", "StreamRegister", "Pulses"]


class InitialisedComb(wiring.Component):
    """``y`` is a combinational function of a register that keeps its initial value until ``x``
    is all ones.

    Its value is defined from time 0 (``0x5A ^ 0x0F``), but only if the simulator evaluates the
    combinational block once at start-up: Icarus does not for Yosys' ``always @*`` (amaranth
    issue 1629). ``count`` is an ordinary counter, so the design also has a clock.
    """

    x: In(8)
    y: Out(8)
    count: Out(8)

    def elaborate(self, platform):
        m = Module()
        held = Signal(8, init=0x5A)  # a real register, written only when x is all ones
        with m.If(self.x == 0xFF):
            m.d.sync += held.eq(held + 1)
        with m.Switch(held):  # a switch on it makes Yosys write an `always @*` process
            with m.Case(0x5A):
                m.d.comb += self.y.eq(held ^ 0x0F)
            with m.Default():
                m.d.comb += self.y.eq(held)
        m.d.sync += self.count.eq(self.count + self.x)
        return m


class WithSubmodule(wiring.Component):
    """:class:`InitialisedComb` as the submodule ``inner``, its ports passed through: a design
    with internal signals (``inner.held``, ``inner.count``) for the runner's ports-only
    Verilator models."""

    x: In(8)
    y: Out(8)
    count: Out(8)

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = InitialisedComb()
        m.d.comb += [inner.x.eq(self.x), self.y.eq(inner.y), self.count.eq(inner.count)]
        return m


class StreamRegister(wiring.Component):
    """A one-beat buffer between two ``amaranth.lib.stream`` ports of 16 bits, ``o`` = ``i``
    + 1: a design for the stream library's own test (``sim/tb/streams_selftest.py``)."""

    def __init__(self):
        super().__init__({"i": In(stream.Signature(16)), "o": Out(stream.Signature(16))})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.o.ready | ~self.o.valid):
            m.d.sync += [self.o.valid.eq(self.i.valid), self.o.payload.eq(self.i.payload + 1)]
        m.d.comb += self.i.ready.eq(self.o.ready | ~self.o.valid)
        return m


class Pulses(wiring.Component):
    """A 1-bit output ``tick`` with an index ``which`` (2 bits), a 9-bit output ``wide``, and a
    1-bit ``tock`` beside a port ``tock_since``: legal and illegal ``counted`` pulses of
    ``hdl.sim_batch.PlayedStreams`` (test_params)."""

    tick: Out(1)
    which: Out(2)
    wide: Out(9)
    tock: Out(1)
    tock_since: Out(1)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += [self.which.eq(self.which + 1), self.wide.eq(self.wide + 3)]
        m.d.comb += [self.tick.eq(self.which == 0), self.tock.eq(self.which == 1),
                     self.tock_since.eq(self.which == 2)]
        return m
