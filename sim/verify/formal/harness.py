"""Building blocks of the formal harnesses: free inputs, stream rules, bounded counters, FIFOs.

A harness is an :class:`~amaranth.hdl.Elaboratable` whose top-level ports are the free inputs
of the proof: the solver picks any value for each of them in every cycle, subject to the
``Assume`` statements. :class:`FormalTop` does the common part: it owns a reset-less ``sync``
domain (the design starts from its registers' init values, the state reset would restore, so
tying reset low loses no reachable state), instantiates the device under test, drives every
input of the DUT from a free port (so inputs added to a component later are covered, free,
without editing the harness), and finds every ``stream.Signature`` port of the DUT.

Stream rules (the Amaranth ``lib.stream`` contract, docs/contract.md §5): once ``valid`` is high
and ``ready`` low, in the next cycle ``valid`` is still high and ``payload`` is unchanged. They
are *assumed* on the streams the DUT consumes and *asserted* on those it produces (see
:func:`stream_rule`). Amaranth 0.5 has no ``Past()``: every "previous cycle" value here is an
explicit register, and the first cycle is excluded by the registers' init value (a "stalled
last cycle" flag that starts at 0).
"""

from __future__ import annotations

import contextlib
import itertools

from amaranth.hdl import (
    Assert,
    Assume,
    Cat,
    ClockDomain,
    Elaboratable,
    Fragment,
    Module,
    Shape,
    Signal,
    Value,
)
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["FormalTop", "StreamPort", "stream_ports", "stream_rule", "bounded_run",
           "stable_input", "responses_follow_requests", "record_fifos",
           "RecordedFifo"]


class StreamPort:
    """One stream port of a component: ``path`` (e.g. ``"cmd"`` or ``"cmd[1]"``), ``port``
    (the interface object with ``valid``, ``ready``, ``payload``), and ``produced``: True if
    the component drives ``valid``/``payload`` (an ``Out`` stream), False if it consumes it."""

    def __init__(self, path: str, port, produced: bool):
        self.path, self.port, self.produced = path, port, produced

    def __repr__(self) -> str:
        return f"StreamPort({self.path!r}, {'out' if self.produced else 'in'})"


def stream_ports(component: wiring.Component) -> list[StreamPort]:
    """Every ``stream.Signature`` member of ``component`` (arrays of them expanded)."""
    found = []

    def walk(obj, members, prefix, flipped):
        for name, member in members.items():
            if not member.is_signature:
                continue
            sub = getattr(obj, name)
            produced = (member.flow == Out) != flipped
            for index in itertools.product(*(range(d) for d in member.dimensions)):
                port = sub
                for i in index:
                    port = port[i]
                path = prefix + name + "".join(f"[{i}]" for i in index)
                if isinstance(member.signature, stream.Signature):
                    found.append(StreamPort(path, port, produced))
                else:
                    walk(port, member.signature.members, path + ".", not produced)

    walk(component, component.signature.members, "", False)
    return found


def stream_rule(m: Module, port, name: str, *, assume: bool, waived=None) -> None:
    """The stream rules on ``port``: once ``valid & ~ready``, ``valid`` stays high and
    ``payload`` stays the same in the next cycle. ``assume`` for an input of the DUT (the
    environment obeys them), else asserted (the DUT obeys them); not checked while
    ``waived``."""
    check = Assume if assume else Assert
    payload = Value.cast(port.payload)
    stalled = Signal(name=f"{name}__stalled")  # valid & ~ready last cycle (0 in cycle 0)
    held = Signal(payload.shape(), name=f"{name}__held")  # payload last cycle
    m.d.sync += [stalled.eq(port.valid & ~port.ready), held.eq(payload)]
    with m.If(stalled & (~waived if waived is not None else 1)):
        m.d.comb += [check(port.valid, f"{name}: valid dropped while stalled"),
                     check(payload == held, f"{name}: payload changed while stalled")]


def bounded_run(m: Module, cond, limit: int, name: str, *, assume: bool):
    """``cond`` is never high for more than ``limit`` consecutive cycles (assumed or
    asserted). Returns the run counter (cycles ``cond`` has been high before this one)."""
    run = Signal(range(limit + 2), name=f"{name.replace(' ', '_')}__run")
    with m.If(cond):
        with m.If(run <= limit):
            m.d.sync += run.eq(run + 1)
    with m.Else():
        m.d.sync += run.eq(0)
    check = Assume if assume else Assert
    m.d.comb += check(~cond | (run < limit), f"{name}: high for more than {limit} cycles")
    return run


def stable_input(m: Module, sig, name: str) -> None:
    """Assume the free input ``sig`` never changes (a run-time setting fixed for a run)."""
    prev = Signal(Value.cast(sig).shape(), name=f"{name}__prev")
    started = Signal(name=f"{name}__started")
    m.d.sync += [prev.eq(sig), started.eq(1)]
    with m.If(started):
        m.d.comb += Assume(Value.cast(sig) == prev, f"{name} is fixed")


def responses_follow_requests(m: Module, req_fire, resp_valid, resp_fire, name: str,
                              limit: int = 7) -> None:
    """Assume a responder that answers each request once: ``resp_valid`` only while more
    requests (``req_fire`` handshakes) were made than responses (``resp_fire``) taken."""
    owed = Signal(range(limit + 1), name=f"{name}__owed")
    m.d.sync += owed.eq(owed + req_fire - resp_fire)
    m.d.comb += [Assume(~resp_valid | (owed != 0), f"{name}: response without request"),
                 Assume(~req_fire | (owed < limit), f"{name}: at most {limit} outstanding")]


class FormalTop(Elaboratable):
    """The top of a proof: ``dut`` with every input free, plus the checks ``build`` adds.

    ``build(m, top)`` is called during elaboration with the module (DUT already a submodule,
    named ``dut``) and this object; it adds ``Assert``/``Assume``/``Cover`` statements.
    :meth:`input` gives the free signal driving a DUT input by path (``"cmd.valid"``,
    ``"rank"``...); ``top.streams`` lists the DUT's stream ports; ``top.fifos`` the FIFOs
    elaborated inside the DUT (see :func:`record_fifos`), filled before ``build`` runs.
    ``ports`` (after :meth:`prepare`) are the free inputs, for ``rtlil.convert``.
    """

    def __init__(self, dut: wiring.Component, build=None, *, rules: bool = False,
                 fixed=(), waive=()):
        self.dut = dut
        self.build = build
        self.rules = rules  # add the stream rules on every stream port
        self.fixed = tuple(fixed)  # DUT input paths assumed constant (run-time settings)
        self.waive = tuple(waive)  # DUT signals that flush its streams (see elaborate)
        self.domain = ClockDomain("sync", reset_less=True)
        self.free: dict[str, Signal] = {}
        self.streams = stream_ports(dut)
        self.fifos: list[RecordedFifo] = []
        for path, member, value in dut.signature.flatten(dut):
            if member.flow != In:
                continue
            key = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in path)
            key = key.replace(".[", "[")
            shape = Shape.cast(member.shape)
            name = "in__" + key.replace(".", "__").replace("[", "_").replace("]", "")
            self.free[key] = (Signal(shape, name=name), value)

    @property
    def ports(self) -> list[Signal]:
        """The clock and the free inputs (a signal not listed here would be a constant)."""
        return [self.domain.clk] + [sig for sig, _ in self.free.values()]

    def input(self, key: str) -> Signal:
        """The free signal driving the DUT input ``key`` (e.g. ``"te_busy"``)."""
        return self.free[key][0]

    def signal(self, key: str):
        """The DUT member ``key`` (``"rd_en"``, ``"cmd.valid"``): for an input its free
        signal, for an output the DUT's own signal."""
        if key in self.free:
            return self.free[key][0]
        obj = self.dut
        for part in key.split("."):
            obj = getattr(obj, part)
        return obj

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = self.domain
        # Elaborate the DUT now (not after this method returns) so the FIFOs it builds exist
        # when ``build`` runs.
        with record_fifos(self.fifos):
            m.submodules.dut = Fragment.get(self.dut, platform)
        for sig, value in self.free.values():
            m.d.comb += Value.cast(value).eq(sig)
        for key in self.fixed:
            stable_input(m, self.input(key), key.replace(".", "_"))
        if self.rules:
            # A flush or soft reset (``waive``) may empty a produced stream on purpose: its
            # rules are not checked in a cycle where one is high, nor in the cycle after.
            waived = Signal()
            if self.waive:
                now = Signal()
                before = Signal()
                m.d.comb += now.eq(Cat(*(self.signal(k) for k in self.waive)).any())
                m.d.sync += before.eq(now)
                m.d.comb += waived.eq(now | before)
            for s in self.streams:
                stream_rule(m, s.port, s.path.replace(".", "_"), assume=not s.produced,
                            waived=None if not s.produced else waived)
        if self.build is not None:
            self.build(m, self)
        return m


class RecordedFifo:
    """A ``SyncFIFO`` built inside a DUT while :func:`record_fifos` was active: ``fifo`` is the
    instance (its ``w_en``, ``w_rdy``, ``r_en``, ``r_rdy``, ``level`` ports are reachable from
    the harness), ``owner`` the class name of the component whose ``elaborate`` built it."""

    def __init__(self, instance, owner: str):
        self.fifo, self.owner = instance, owner


@contextlib.contextmanager
def record_fifos(sink: list):
    """While active, ``amaranth.lib.fifo.SyncFIFO`` is a subclass that appends a
    :class:`RecordedFifo` to ``sink`` for every instance made (hdl/ modules look it up as
    ``fifo.SyncFIFO`` when they elaborate, so nothing in hdl/ changes). Use it around
    ``rtlil.convert``, which is when the DUT elaborates."""
    import inspect

    original = fifo.SyncFIFO

    class RecordingSyncFIFO(original):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            owner = "?"
            for frame in inspect.stack()[1:6]:
                obj = frame.frame.f_locals.get("self")
                if obj is not None and not isinstance(obj, original):
                    owner = type(obj).__name__
                    break
            sink.append(RecordedFifo(self, owner))

    fifo.SyncFIFO = RecordingSyncFIFO
    try:
        yield sink
    finally:
        fifo.SyncFIFO = original
