"""A timing harness: any component between registers, reached through five pins.

Place-and-route needs a top whose ports fit the package, and a clock period is only meaningful
between registers. :class:`SerialHarness` wraps ``factory(**params)`` so that

* every input port of the design is driven by a flip-flop of one long shift register, fed one
  bit per cycle from pin ``sin``;
* every output port is captured by a flip-flop; with ``load`` = 1 the capture register takes
  the outputs, otherwise it shifts towards pin ``sout``.

So every path of the design starts and ends at a register (its own or the harness's), nothing
is optimised away (each output reaches ``sout``), and the top has five pins (``clk`` and
``rst`` of the ``sync`` domain, ``sin``, ``load``, ``sout``). The harness adds one flip-flop
per input bit and one flip-flop plus one 2:1 multiplexer per output bit: the area of the design
itself is taken from a synthesis of the bare design (:mod:`synth.fpga`), the harness is only
for timing.
"""

from __future__ import annotations

import importlib

from amaranth.hdl import Cat, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SerialHarness", "design_ports"]


def _resolve(factory: str):
    module_name, _, attr = factory.partition(":")
    if not attr:
        raise ValueError(f"design must look like 'hdl.module:Class', not {factory!r}")
    return getattr(importlib.import_module(module_name), attr)


def design_ports(component: wiring.Component) -> tuple[list[Value], list[Value]]:
    """The design's input and output port values, flattened, in signature order."""
    inputs, outputs = [], []
    for _path, member, value in component.signature.flatten(component):
        (inputs if member.flow == wiring.In else outputs).append(Value.cast(value))
    return inputs, outputs


class SerialHarness(wiring.Component):
    """``design`` (``"hdl.module:Class"``) with ``params``, between shift registers.

    Ports: ``sin``, ``load`` (inputs) and ``sout`` (output); ``in_bits`` and ``out_bits`` say
    how many harness flip-flops there are on each side.
    """

    def __init__(self, *, design: str, params: dict | None = None):
        self.design = _resolve(design)(**(params or {}))
        if not isinstance(self.design, wiring.Component):
            raise TypeError(f"design must build an amaranth.lib.wiring.Component, "
                            f"not {type(self.design).__name__}")
        inputs, outputs = design_ports(self.design)
        self.in_bits = sum(len(v) for v in inputs)
        self.out_bits = sum(len(v) for v in outputs)
        if self.out_bits == 0:
            raise ValueError(f"design {design!r} has no output port: nothing to time")
        super().__init__({"sin": In(1), "load": In(1), "sout": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.design = design = self.design
        inputs, outputs = design_ports(design)
        if self.in_bits:
            shift_in = Signal(self.in_bits)
            m.d.sync += shift_in.eq(Cat(self.sin, shift_in[:-1]))
            m.d.comb += Cat(*inputs).eq(shift_in)
        capture = Signal(self.out_bits)
        with m.If(self.load):
            m.d.sync += capture.eq(Cat(*outputs))
        with m.Else():
            m.d.sync += capture.eq(capture[1:])
        m.d.comb += self.sout.eq(capture[0])
        return m
