"""A ring of P cores' collective engines with their memories, joined by link models.

Simulation top-levels: :class:`LinkModel` stands in for a chip-to-chip link (latency and random
stalls set at run time), :class:`CollectiveRing` wires P :class:`~hdl.collective.CollectiveEngine`
s, their local memories and P links into one design that a testbench drives.
"""

from amaranth.hdl import Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .collective import (
    COLLECTIVE_ADD_STAGES,
    DEFAULT_WATCHDOG_CYCLES,
    CollectiveEngine,
    check_depth,
    check_link_width,
    check_ranks,
    check_watchdog,
    collective_command_layout,
    link_layout,
)
from .fp32_add import FP32_ADD_MAX_STAGES
from .instances import shared
from .params import check_int
from .read_port import read_enable

__all__ = ["LinkModel", "CollectiveRing", "MAX_LINK_LATENCY", "check_max_latency"]

#: The default largest link latency (cycles) a :class:`LinkModel` is built for.
MAX_LINK_LATENCY = 16


def check_max_latency(max_latency) -> int:
    """``max_latency``: 1 to 256 cycles (:func:`~hdl.params.check_int`'s errors)."""
    return check_int("max_latency", max_latency, lo=1, hi=256)


class LinkModel(wiring.Component):
    """A link between two cores: an in-order valid/ready channel with latency and stalls.

    A beat taken on ``i`` in cycle t can leave on ``o`` in cycle t + ``latency`` at the
    earliest (``latency`` in 1..``max_latency``, set at run time, 0 acting as 1; change it
    only while the link is empty). The link holds up to ``max_latency + 2`` beats, enough for
    one beat per cycle at any latency; beyond that ``i.ready`` falls (back-pressure).

    Random stalls, for tests: a 32-bit xorshift generator steps every cycle; in a cycle where
    its low byte is below ``stall_rate`` the link does not take a beat, and where its next
    byte is below ``stall_rate`` it does not start offering one (a beat already offered stays
    offered, as the stream rules require). ``stall_rate`` = 0 never stalls, 128 stalls about
    half the cycles. ``reseed`` loads the generator from ``seed`` (mixed with ``index`` so the
    links of a ring differ).

    ``flush`` (from the sending engine's ``tx_flush``, when its watchdog abandoned a
    collective): every beat the link holds, in its line or offered on ``o``, is dropped at
    the next clock edge (a beat offered on ``o`` disappears without being taken: the one
    exception to the stream rules, for a ring that has already stopped). ``i`` takes nothing
    in that cycle. The stall generator runs on.

    Parameters
    ----------
    link_width : int
        fp32 words per beat: one of :data:`~hdl.collective.LINK_WIDTHS` (default 1).
    ranks : int
        The ring's size, 2 to 64 (default 2): a beat is a
        :func:`~hdl.collective.link_layout` (its words and a tag of two ranks).
    max_latency : int
        The largest ``latency`` the link is built for, 1 to 256 (default
        :data:`MAX_LINK_LATENCY`).
    index : int
        The link's place in its ring (mixed into the stall seed), >= 0 (default 0).

    Raises
    ------
    TypeError
        If a parameter is not an integer.
    ValueError
        If a parameter is out of range.
    """

    def __init__(self, *, link_width: int = 1, ranks: int = 2,
                 max_latency: int = MAX_LINK_LATENCY, index: int = 0):
        self.link_width = check_link_width(link_width)
        self.ranks = check_ranks(ranks)
        self.max_latency = check_max_latency(max_latency)
        self.index = check_int("index", index, lo=0)
        self.capacity = max_latency + 2
        self.layout = link_layout(ranks, link_width)
        super().__init__({
            "i": In(stream.Signature(self.layout)),
            "o": Out(stream.Signature(self.layout)),
            "latency": In(range(max_latency + 1), init=1),
            "stall_rate": In(8),
            "seed": In(32),
            "reseed": In(1),
            "flush": In(1),
        })

    def elaborate(self, platform):
        # Design note: beats taken enter a delay line that never stops (one register per
        # cycle of latency beyond the first); the stage `latency - 2` (or the input itself for
        # latency 1) is written into the FIFO that `o` reads, so a beat is in the FIFO and on
        # `o` exactly `latency` cycles after it was taken. `i.ready` counts the beats in the
        # FIFO and those still in the line against the FIFO's depth, so the line never has to
        # stop.
        m = Module()
        width = self.layout.size
        buf = fifo.SyncFIFO(width=width, depth=self.capacity)
        m.submodules.buf = ResetInserter(self.flush)(buf)

        # Stall generator: xorshift32, never zero.
        mix = (0x9E3779B9 * (self.index + 1)) & 0xFFFF_FFFF
        state = Signal(32, init=mix or 1)
        x1 = state ^ (state << 13)[:32]
        x2 = x1 ^ (x1 >> 17)
        x3 = x2 ^ (x2 << 5)[:32]
        with m.If(self.reseed):
            seeded = self.seed ^ mix
            m.d.sync += state.eq(Mux(seeded == 0, mix or 1, seeded))
        with m.Else():
            m.d.sync += state.eq(x3)
        stall_in = state[0:8] < self.stall_rate
        stall_out = state[8:16] < self.stall_rate

        take = Signal()
        in_line = Signal(range(self.capacity + 1))  # beats in the line before the tap
        m.d.comb += [
            self.i.ready.eq(~stall_in & ~self.flush & (buf.level + in_line < self.capacity)),
            take.eq(self.i.valid & self.i.ready),
        ]
        line = []
        prev = Cat(self.i.payload.as_value(), take)
        for k in range(self.max_latency - 1):
            stage = Signal(width + 1, name=f"line{k}")
            m.d.sync += stage.eq(prev)
            line.append(stage)
            prev = stage
        tap = Signal(width + 1)
        with m.Switch(self.latency):
            with m.Case(0, 1):
                m.d.comb += tap.eq(Cat(self.i.payload.as_value(), take))
            for k, stage in enumerate(line):
                with m.Case(k + 2):
                    m.d.comb += tap.eq(stage)
        from_line = Signal()
        m.d.comb += from_line.eq(tap[-1] & (self.latency > 1))
        m.d.sync += in_line.eq(in_line + (take & (self.latency > 1)) - from_line)
        m.d.comb += [buf.w_en.eq(tap[-1]), buf.w_data.eq(tap[:width])]

        # Output: once offered, a beat stays offered until it is taken.
        offered = Signal()
        m.d.comb += [
            self.o.valid.eq(buf.r_rdy & (offered | ~stall_out)),
            self.o.payload.eq(buf.r_data),
            buf.r_en.eq(self.o.valid & self.o.ready),
        ]
        m.d.sync += offered.eq(self.o.valid & ~self.o.ready)
        with m.If(self.flush):  # (after the updates above: this wins)
            m.d.sync += [in_line.eq(0), offered.eq(0), *(stage.eq(0) for stage in line)]
        return m


class CollectiveRing(wiring.Component):
    """P collective engines, each with its local memory, in a ring of :class:`LinkModel` s.

    Engine r sends to engine (r + 1) mod P through link r; its ``rank`` input is r. Ports:

    * ``cmd`` — one command stream per rank (``cmd[r]``), the engines' own
      (:func:`~hdl.collective.collective_command_layout`); every rank must get the same
      sequence of commands, at any time.
    * ``host_addr``, ``host_we``, ``host_wdata``, ``host_rdata`` — test access to all P
      memories at once (row ``host_addr`` of every rank; rank r's W words are bits
      ``32·W·r`` up); a write takes one cycle, a read returns the next cycle. Use it only while
      ``idle``: a host write wins over the engine's.
    * ``latency``, ``stall_rate``, ``stall_seed``, ``stall_reseed`` — the links' settings,
      shared by all links (:class:`LinkModel`).
    * ``busy``, ``error``, ``timeout`` (one bit per rank: the engines' own), ``idle`` (no
      engine busy), ``cycles`` (each engine's cycle count of its last command, 32 bits per
      rank). Engine r's ``tx_flush`` empties link r.

    Parameters
    ----------
    ranks, link_width, add_stages, watchdog_cycles : int
        The engines' (:class:`~hdl.collective.CollectiveEngine`).
    depth : int
        Rows per memory, the engines' ``depth`` (default 1024).
    max_latency : int
        The links' largest latency, as :class:`LinkModel`'s (default
        :data:`MAX_LINK_LATENCY`).

    Raises
    ------
    TypeError
        If a parameter is not an integer.
    ValueError
        If a parameter is out of range.
    """

    def __init__(self, *, ranks: int, link_width: int = 1, depth: int = 1024,
                 add_stages: int = COLLECTIVE_ADD_STAGES, max_latency: int = MAX_LINK_LATENCY,
                 watchdog_cycles: int = DEFAULT_WATCHDOG_CYCLES):
        self.ranks = check_ranks(ranks)
        self.watchdog_cycles = check_watchdog(watchdog_cycles)
        self.link_width = check_link_width(link_width)
        self.depth = check_depth(depth)
        self.add_stages = check_int("add_stages", add_stages, lo=0, hi=FP32_ADD_MAX_STAGES)
        self.max_latency = check_max_latency(max_latency)
        cmd_layout = self._cmd_layout()
        bus = 32 * link_width * ranks
        super().__init__({
            "cmd": In(stream.Signature(cmd_layout)).array(ranks),
            "host_addr": In(range(max(depth, 2))),
            "host_we": In(1),
            "host_wdata": In(bus),
            "host_rdata": Out(bus),
            "latency": In(range(max_latency + 1), init=1),
            "stall_rate": In(8),
            "stall_seed": In(32),
            "stall_reseed": In(1),
            "busy": Out(ranks),
            "error": Out(ranks),
            "timeout": Out(ranks),
            "idle": Out(1),
            "cycles": Out(data.ArrayLayout(32, ranks)),
        })

    def _cmd_layout(self) -> data.StructLayout:
        return collective_command_layout(self.depth, self.link_width)

    def _node(self):
        """A node: in simulation builds the engines are one Verilog module (hdl.instances)."""
        params = {"ranks": self.ranks, "link_width": self.link_width, "depth": self.depth,
                  "add_stages": self.add_stages, "watchdog_cycles": self.watchdog_cycles}
        return shared(CollectiveEngine(**params), "hdl.collective:CollectiveEngine", params)

    def _link_settings(self, m, link, flush):
        m.d.comb += [link.latency.eq(self.latency), link.stall_rate.eq(self.stall_rate),
                     link.seed.eq(self.stall_seed), link.reseed.eq(self.stall_reseed),
                     link.flush.eq(flush)]

    def _links(self, m, nodes):
        """Link r from node r to node r + 1."""
        P = self.ranks
        for r, node in enumerate(nodes):
            link = LinkModel(link_width=self.link_width, ranks=P, max_latency=self.max_latency,
                             index=r)
            m.submodules[f"link{r}"] = link
            self._link_settings(m, link, node.tx_flush)
            wiring.connect(m, node.tx, link.i)
            wiring.connect(m, link.o, nodes[(r + 1) % P].rx)

    def elaborate(self, platform):
        m = Module()
        P, W = self.ranks, self.link_width
        row = data.ArrayLayout(32, W)
        engines = []
        for r in range(P):
            eng = self._node()
            m.submodules[f"engine{r}"] = eng
            engines.append(eng)
            m.d.comb += eng.rank.eq(r)
            wiring.connect(m, wiring.flipped(self.cmd[r]), eng.cmd)

            mem = memory.Memory(shape=row, depth=self.depth, init=[])
            m.submodules[f"mem{r}"] = mem
            for user in (eng.tx_rd, eng.rx_rd):
                port = mem.read_port(transparent_for=())
                m.d.comb += [port.en.eq(read_enable(user.en)), port.addr.eq(user.addr),
                             user.data.eq(port.data)]
            wr = mem.write_port(granularity=1)
            host_rd = mem.read_port(transparent_for=())
            lo = 32 * W * r
            m.d.comb += [host_rd.addr.eq(self.host_addr),
                         self.host_rdata[lo:lo + 32 * W].eq(host_rd.data)]
            with m.If(self.host_we):
                m.d.comb += [wr.addr.eq(self.host_addr),
                             wr.data.eq(self.host_wdata[lo:lo + 32 * W]),
                             wr.en.eq((1 << W) - 1)]
            with m.Else():
                m.d.comb += [wr.addr.eq(eng.wr.addr), wr.data.eq(eng.wr.data),
                             wr.en.eq(eng.wr.en)]
            m.d.comb += [self.busy[r].eq(eng.busy), self.error[r].eq(eng.error),
                         self.timeout[r].eq(eng.timeout),
                         self.cycles[r].eq(eng.cycles)]
        self._links(m, engines)
        m.d.comb += self.idle.eq(~self.busy.any())
        return m

