"""A 2-D torus of collective engines: a node per core with a row engine and a column engine.

:class:`TorusNode` is what a core of an R × C torus holds in place of one
:class:`~hdl.collective.CollectiveEngine`: two engines, one on the ring of its row (C ranks,
links to the right and from the left) and one on the ring of its column (R ranks, links down
and from above), behind one command stream whose ``dim`` field picks the ring. Every torus
collective is a sequence of such sub-ring commands (``golden.collective.torus_schedule``:
an all-reduce is a reduce-scatter along the rows, an all-reduce along the columns and an
all-gather along the rows; an all-to-all goes down the columns and then along the rows).
:class:`CollectiveTorus` is R × C nodes with their memories and 2·R·C link models, the torus
counterpart of :class:`~hdl.ring.CollectiveRing`, for testbenches.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .collective import (
    COLLECTIVE_ADD_STAGES,
    DEFAULT_WATCHDOG_CYCLES,
    MAX_RANKS,
    CollectiveDim,
    CollectiveEngine,
    check_depth,
    check_link_width,
    check_watchdog,
    collective_command_layout,
    link_layout,
)
from .fp32_add import FP32_ADD_MAX_STAGES
from .instances import shared
from .params import check_int
from .ring import MAX_LINK_LATENCY, CollectiveRing, LinkModel

__all__ = ["CollectiveDim", "torus_command_layout", "check_torus", "check_torus_rows",
           "TorusNode", "CollectiveTorus"]


def check_torus(rows, cols) -> tuple[int, int]:
    """``rows`` and ``cols``: 2 to 32 each, at most :data:`~hdl.collective.MAX_RANKS` (64)
    nodes in all (:func:`~hdl.params.check_int`'s errors)."""
    rows = check_int("rows", rows, lo=2, hi=MAX_RANKS // 2)
    cols = check_int("cols", cols, lo=2, hi=MAX_RANKS // 2)
    if rows * cols > MAX_RANKS:
        raise ValueError(f"rows * cols must be at most {MAX_RANKS} nodes, not "
                         f"{rows} * {cols} = {rows * cols}")
    return rows, cols


def check_torus_rows(torus_rows, ranks: int) -> int:
    """``torus_rows`` R of a ring of ``ranks`` cores: 1 (a ring, or no ring at ``ranks`` 0),
    or R >= 2 dividing ``ranks`` into rows of at least 2 cores (:func:`check_torus`)."""
    R = check_int("torus_rows", torus_rows, lo=1, note="(1: a ring)")
    if R > 1:
        if not ranks or ranks % R or ranks // R < 2:
            raise ValueError(f"torus_rows must divide ranks ({ranks}) into rows of at least 2 "
                             f"cores, not {torus_rows!r}")
        check_torus(R, ranks // R)
    return R


def torus_command_layout(depth: int, link_width: int) -> data.StructLayout:
    """A torus node's command: a :func:`~hdl.collective.collective_command_layout` command
    and ``dim``, the ring it runs on (:class:`CollectiveDim`)."""
    fields = dict(collective_command_layout(depth, link_width).members)
    return data.StructLayout({**fields, "dim": CollectiveDim})


class TorusNode(wiring.Component):
    """One node of an R × C torus: a row engine (C ranks) and a column engine (R ranks).

    Node (i, j) is rank r = i·C + j (``rank`` input, constant while busy); its row engine is
    rank j of the row's ring, its column engine rank i of the column's. A command runs on the
    engine its ``dim`` names, with that engine's semantics
    (:class:`~hdl.collective.CollectiveEngine`: P is C for ``ROW``, R for ``COLUMN``; a
    permute's ``shift`` must be below that P). The node runs one command at a time: ``cmd``
    is ready only while both engines are idle, so a command starts after the previous one has
    ended on this node (its data are then in memory); the two engines share the node's memory
    ports, each driving them only while its command runs. The torus gains steps, not
    bandwidth: a node moves data on one link pair at a time (the bound,
    ``golden.collective.torus_bound_cycles``, is the sum of the steps' ring bounds).

    Ports: those of :class:`~hdl.collective.CollectiveEngine` -- ``cmd`` (a
    :func:`torus_command_layout`), ``tx_rd``, ``rx_rd``, ``wr``, ``busy``, ``error`` (either
    engine's, sticky), ``cycles`` and ``timeout`` (of the last command's engine) -- and
    ``row_busy`` / ``col_busy`` (which engine runs: a soft reset flushes only its links), with
    ``tx`` / ``rx`` / ``tx_flush`` the row's links (to (i, j + 1), from (i, j − 1)) and
    ``col_tx`` / ``col_rx`` / ``col_tx_flush`` the column's (to (i + 1, j), from (i − 1, j)).

    Parameters
    ----------
    rows, cols : int
        R and C: 2 to 32 each, R·C at most 64 (:func:`check_torus`).
    link_width, depth, add_stages, watchdog_cycles : int
        The engines' (:class:`~hdl.collective.CollectiveEngine`).

    Raises
    ------
    TypeError
        If a parameter is not an integer.
    ValueError
        If a parameter is out of range.
    """

    def __init__(self, *, rows: int, cols: int, link_width: int = 1, depth: int = 1024,
                 add_stages: int = COLLECTIVE_ADD_STAGES,
                 watchdog_cycles: int = DEFAULT_WATCHDOG_CYCLES):
        self.rows, self.cols = check_torus(rows, cols)
        self.ranks = rows * cols
        self.link_width = check_link_width(link_width)
        self.depth = check_depth(depth)
        self.add_stages = check_int("add_stages", add_stages, lo=0, hi=FP32_ADD_MAX_STAGES)
        self.watchdog_cycles = check_watchdog(watchdog_cycles)
        common = {"link_width": link_width, "depth": depth, "add_stages": add_stages,
                  "watchdog_cycles": watchdog_cycles}
        self._row = CollectiveEngine(ranks=cols, **common)
        self._col = CollectiveEngine(ranks=rows, **common)
        self.cmd_layout = torus_command_layout(depth, link_width)
        eng = self._row.signature.members
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "rank": In(range(self.ranks)),
            "tx": Out(stream.Signature(link_layout(cols, link_width))),
            "rx": In(stream.Signature(link_layout(cols, link_width))),
            "col_tx": Out(stream.Signature(link_layout(rows, link_width))),
            "col_rx": In(stream.Signature(link_layout(rows, link_width))),
            "tx_rd": eng["tx_rd"],
            "rx_rd": eng["rx_rd"],
            "wr": eng["wr"],
            "busy": Out(1),
            "row_busy": Out(1),
            "col_busy": Out(1),
            "error": Out(1),
            "cycles": Out(32),
            "timeout": Out(1),
            "tx_flush": Out(1),
            "col_tx_flush": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.row = row = self._row
        m.submodules.col = col = self._col
        C = self.cols
        m.d.comb += [row.rank.eq(self.rank % C), col.rank.eq(self.rank // C)]
        wiring.connect(m, row.tx, wiring.flipped(self.tx))
        wiring.connect(m, wiring.flipped(self.rx), row.rx)
        wiring.connect(m, col.tx, wiring.flipped(self.col_tx))
        wiring.connect(m, wiring.flipped(self.col_rx), col.rx)
        m.d.comb += [self.tx_flush.eq(row.tx_flush), self.col_tx_flush.eq(col.tx_flush)]

        # Commands: one at a time, to the engine `dim` names. An engine in its idle state
        # always takes a command; `busy` rises in the cycle after a legal one was taken.
        idle = ~row.busy & ~col.busy
        on_col = self.cmd.payload.dim == CollectiveDim.COLUMN
        active = Signal()  # the engine of the last command taken: 0 row, 1 column
        for eng, mine in ((row, ~on_col), (col, on_col)):
            for name in ("op", "addr", "words", "dst", "shift"):
                m.d.comb += getattr(eng.cmd.payload, name).eq(getattr(self.cmd.payload, name))
            m.d.comb += eng.cmd.valid.eq(self.cmd.valid & idle & mine)
        m.d.comb += self.cmd.ready.eq(idle)
        with m.If(self.cmd.valid & idle):
            m.d.sync += active.eq(on_col)

        # The memory ports: the running engine's (the other one is idle and drives nothing).
        for port in ("tx_rd", "rx_rd"):
            mine, a, b = getattr(self, port), getattr(row, port), getattr(col, port)
            m.d.comb += [mine.addr.eq(Mux(active, b.addr, a.addr)),
                         mine.en.eq(Mux(active, b.en, a.en)),
                         a.data.eq(mine.data), b.data.eq(mine.data)]
        m.d.comb += [self.wr.addr.eq(Mux(active, col.wr.addr, row.wr.addr)),
                     self.wr.data.eq(Mux(active, col.wr.data, row.wr.data)),
                     self.wr.en.eq(Mux(active, col.wr.en, row.wr.en))]
        m.d.comb += [self.busy.eq(~idle), self.row_busy.eq(row.busy),
                     self.col_busy.eq(col.busy), self.error.eq(row.error | col.error),
                     self.cycles.eq(Mux(active, col.cycles, row.cycles)),
                     self.timeout.eq(Mux(active, col.timeout, row.timeout))]
        return m


class CollectiveTorus(CollectiveRing):
    """R × C :class:`TorusNode` s, each with its local memory, in a torus of
    :class:`~hdl.ring.LinkModel` s.

    Node r = i·C + j (its ``rank``) sends along its row through link r to node (i, j + 1 mod
    C) and down its column through link ``col_link{r}`` to node (i + 1 mod R, j). Ports as
    :class:`~hdl.ring.CollectiveRing`'s for P = R·C (``cmd[r]`` carries
    :func:`torus_command_layout` commands; the links' settings apply to all 2·R·C links; a
    node's ``tx_flush`` and ``col_tx_flush`` empty its own two outgoing links).

    Parameters
    ----------
    rows, cols : int
        R and C (:func:`check_torus`).
    link_width, depth, add_stages, watchdog_cycles, max_latency : int
        As :class:`~hdl.ring.CollectiveRing`'s.

    Raises
    ------
    TypeError
        If a parameter is not an integer.
    ValueError
        If a parameter is out of range.
    """

    def __init__(self, *, rows: int, cols: int, link_width: int = 1, depth: int = 1024,
                 add_stages: int = COLLECTIVE_ADD_STAGES, max_latency: int = MAX_LINK_LATENCY,
                 watchdog_cycles: int = DEFAULT_WATCHDOG_CYCLES):
        self.rows, self.cols = check_torus(rows, cols)
        super().__init__(ranks=rows * cols, link_width=link_width, depth=depth,
                         add_stages=add_stages, max_latency=max_latency,
                         watchdog_cycles=watchdog_cycles)

    def _cmd_layout(self) -> data.StructLayout:
        return torus_command_layout(self.depth, self.link_width)

    def _node(self):
        params = {"rows": self.rows, "cols": self.cols, "link_width": self.link_width,
                  "depth": self.depth, "add_stages": self.add_stages,
                  "watchdog_cycles": self.watchdog_cycles}
        return shared(TorusNode(**params), "hdl.torus:TorusNode", params)

    def _links(self, m, nodes):
        R, C, W = self.rows, self.cols, self.link_width
        for r, node in enumerate(nodes):
            i, j = divmod(r, C)
            for name, tx, rx, flush, size, to in (
                    ("link", "tx", "rx", "tx_flush", C, i * C + (j + 1) % C),
                    ("col_link", "col_tx", "col_rx", "col_tx_flush", R, (i + 1) % R * C + j)):
                link = LinkModel(link_width=W, ranks=size, max_latency=self.max_latency,
                                 index=r if name == "link" else r + self.ranks)
                m.submodules[f"{name}{r}"] = link
                self._link_settings(m, link, getattr(node, flush))
                wiring.connect(m, getattr(node, tx), link.i)
                wiring.connect(m, link.o, getattr(nodes[to], rx))
