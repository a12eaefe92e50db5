"""A recorder of a core's activity: the cycles at which its engines start and stop, and its
dispatches, for a profile of a simulated run (``nclite kernel run --profile``)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from .core import ActivityLayout
from .params import check_int

__all__ = ["ActivityRecorder", "ActivityEventLayout"]


class ActivityEventLayout(data.StructLayout):
    """One recorded change: the cycle (since reset, wrapping at 2**32) from which ``activity``
    (:class:`~hdl.core.ActivityLayout`) holds its new value."""

    def __init__(self):
        super().__init__({"cycle": 32, "activity": ActivityLayout()})


class ActivityRecorder(wiring.Component):
    """While ``enable`` is high, writes an :class:`ActivityEventLayout` entry into its memory
    ``events`` whenever a core's ``activity`` differs from the cycle before (and at the first
    enabled cycle after reset or ``clear``), so that the engines' busy intervals and the
    dispatch of every command can be read back after a run: entry i holds the i-th change, with
    its cycle (the enabled cycles since reset). ``count`` is the number of entries written (it
    stops at ``depth``; ``full`` then says later changes were lost). ``clear`` (one cycle)
    empties it and starts again. With ``enable`` low nothing moves, not even the cycle counter
    (a simulation that records nothing pays for nothing).

    A testbench reads the entries through VPI (the memory ``events``, zero simulated time).
    One write a cycle at most; no effect on the core.

    Parameters
    ----------
    depth : int
        Entries, 2 to 2**16 (default 1024).

    Raises
    ------
    TypeError
        If ``depth`` is not an integer.
    ValueError
        If ``depth`` is out of range.
    """

    def __init__(self, *, depth: int = 1024):
        self.depth = check_int("depth", depth, lo=2, hi=1 << 16)
        super().__init__({"activity": In(ActivityLayout()), "enable": In(1), "clear": In(1),
                          "count": Out(range(self.depth + 1)), "full": Out(1)})

    def elaborate(self, platform):
        m = Module()
        mem = memory.Memory(shape=ActivityEventLayout(), depth=self.depth, init=[])
        m.submodules.events = mem
        wr = mem.write_port()
        cycle = Signal(32)
        last = Signal(ActivityLayout())
        started = Signal()  # the first cycle after reset or clear is recorded
        change = ~started | (self.activity.as_value() != last.as_value())
        with m.If(self.enable):
            m.d.sync += [cycle.eq(cycle + 1), last.eq(self.activity), started.eq(1)]
        m.d.comb += [wr.addr.eq(self.count), wr.data.cycle.eq(cycle),
                     wr.data.activity.eq(self.activity),
                     wr.en.eq(self.enable & change & (self.count < self.depth)),
                     self.full.eq(self.count == self.depth)]
        with m.If(wr.en):
            m.d.sync += self.count.eq(self.count + 1)
        with m.If(self.clear):
            m.d.sync += [self.count.eq(0), started.eq(0)]
        return m
