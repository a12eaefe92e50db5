"""P NeuronCores in a ring or an R x C torus: each with its own host registers and DRAM port."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .cmdqueue import AxiLiteSignature
from .collective import check_ranks
from .core import ActivityLayout, NeuronCore
from .dma import AxiSignature
from .instances import shared
from .ring import MAX_LINK_LATENCY, LinkModel, check_max_latency

__all__ = ["CoreRing"]


class CoreRing(wiring.Component):
    """``ranks`` :class:`~hdl.core.NeuronCore` s (rank r's ``tx`` to rank r + 1's ``rx``
    through a :class:`~hdl.ring.LinkModel`), as on a multi-core Trainium device.

    Ports: ``axil<r>`` (AXI4-Lite slave) and ``axi<r>`` (AXI4 master) of each core r;
    ``busy<r>``, ``error<r>`` and ``activity<r>`` (core r's own: STATUS bits 0 and 1 as
    wires, its engines' activity); the links' ``latency``, ``stall_rate``, ``stall_seed``,
    ``stall_reseed`` (shared by all links, set at run time). Every other parameter is a
    :class:`~hdl.core.NeuronCore` one (``link_width`` and ``watchdog_cycles`` included), the
    same for every core. A core's
    ``tx_flush`` (its collective engine's watchdog abandoned a COLLECTIVE) empties its
    outgoing link, its ``rx_flush`` (a soft reset during a COLLECTIVE) its incoming one.

    With ``torus_rows`` R > 1 the cores form an R × C torus (C = ``ranks`` / R; core r = i·C +
    j): the links above join each row (r to i·C + (j + 1) mod C) and column links
    (``col_link<r>``) join each column (r to ((i + 1) mod R)·C + j), each flushed alike.

    Parameters
    ----------
    ranks : int
        The cores in the ring, 2 to 64 (default 4).
    max_latency : int
        The links' largest latency, as :class:`~hdl.ring.LinkModel`'s: 1 to 256 (default
        :data:`~hdl.ring.MAX_LINK_LATENCY`).
    torus_rows : int
        R, 1 (default: a ring) or the rows of a torus (:class:`~hdl.core.NeuronCore`'s).
    **core
        :class:`~hdl.core.NeuronCore`'s other parameters, the same for every core.

    Raises
    ------
    TypeError
        If ``ranks`` or ``max_latency`` is not an integer; as :class:`~hdl.core.NeuronCore`
        for the others.
    ValueError
        If ``ranks`` or ``max_latency`` is out of range; as :class:`~hdl.core.NeuronCore` for
        the others.
    """

    def __init__(self, *, ranks: int = 4, max_latency: int = MAX_LINK_LATENCY, **core):
        self.ranks = check_ranks(ranks)
        self.max_latency = check_max_latency(max_latency)
        self._core_params = {"ranks": ranks, **core}
        self._cores = [NeuronCore(ranks=ranks, **core) for _ in range(ranks)]
        self.torus_rows = self._cores[0].torus_rows
        self.link_width = self._cores[0].link_width
        self.watchdog_cycles = self._cores[0].watchdog_cycles
        ports = {}
        for r in range(ranks):
            ports[f"axil{r}"] = Out(AxiLiteSignature())
            ports[f"axi{r}"] = Out(AxiSignature(data_width=self._cores[0].data_width))
            ports[f"busy{r}"], ports[f"error{r}"] = Out(1), Out(1)
            ports[f"activity{r}"] = Out(ActivityLayout())
        ports.update({"latency": In(range(max_latency + 1), init=1), "stall_rate": In(8),
                      "stall_seed": In(32), "stall_reseed": In(1)})
        super().__init__(ports)

    def iss_config(self):
        return self._cores[0].iss_config()

    def elaborate(self, platform):
        m = Module()
        # In simulation builds the cores are one Verilog module (hdl.instances).
        cores = [shared(core, "hdl.core:NeuronCore", self._core_params) for core in self._cores]
        for r, core in enumerate(cores):
            m.submodules[f"core{r}"] = core
            wiring.connect(m, wiring.flipped(getattr(self, f"axil{r}")), core.axil)
            wiring.connect(m, wiring.flipped(getattr(self, f"axi{r}")), core.axi)
            m.d.comb += [core.rank.eq(r), getattr(self, f"busy{r}").eq(core.busy),
                         getattr(self, f"error{r}").eq(core.error),
                         getattr(self, f"activity{r}").eq(core.activity)]
        R = self.torus_rows
        C = self.ranks // R
        # (name, ports, ring size, the core a core sends to): the rows (on a ring, the ring)
        # and, on a torus, the columns.
        kinds = [("link", ("tx", "rx", "tx_flush", "rx_flush"), C,
                  lambda r: r - r % C + (r + 1) % C)]
        if R > 1:
            kinds.append(("col_link", ("col_tx", "col_rx", "col_tx_flush", "col_rx_flush"), R,
                          lambda r: (r + C) % self.ranks))
        for k, (name, (tx, rx, tx_flush, rx_flush), size, to) in enumerate(kinds):
            for r, core in enumerate(cores):
                link = LinkModel(link_width=self.link_width, ranks=size,
                                 max_latency=self.max_latency, index=r + k * self.ranks)
                m.submodules[f"{name}{r}"] = link
                m.d.comb += [link.latency.eq(self.latency),
                             link.stall_rate.eq(self.stall_rate),
                             link.seed.eq(self.stall_seed), link.reseed.eq(self.stall_reseed)]
                nxt = cores[to(r)]
                wiring.connect(m, getattr(core, tx), link.i)
                m.d.comb += link.flush.eq(getattr(core, tx_flush) | getattr(nxt, rx_flush))
                wiring.connect(m, link.o, getattr(nxt, rx))
        return m
