"""A register port's accesses played from batches, for simulation: the host's register writes
(and its waits on a status bit) without a Python wake-up per bus cycle.

A cocotb host that pushes a program through cocotbext-axi's AXI4-Lite master runs five
channel coroutines every cycle of every access: on a whole-core run that Python, not the
model, sets the pace (a descriptor is nine register writes). :class:`RegisterPlayer` takes
the same accesses as data, ``k`` per batch (:class:`~hdl.sim_batch.BeatPlayer`), and makes
them on an AXI4-Lite port itself; ``hdl.sim_top.CoreWithDram`` puts one beside the
testbench's own AXI4-Lite port (``sim.host.core.CoreHost`` plays a program's pushes through
it). Tests of the register port's protocol keep cocotbext-axi's master.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .cmdqueue import AxiLiteSignature
from .sim_batch import BeatPlayer, _batch_stream, _check_batch

__all__ = ["ACCESS_LAYOUT", "RegisterPlayer", "pack_access"]

#: One played access. ``wait`` = 0: write ``data`` to the register at byte address ``addr``;
#: ``wait`` = 1: read ``addr`` until the bits set in ``data`` all read 0 (a poll).
ACCESS_LAYOUT = data.StructLayout({"wait": 1, "addr": 12, "data": 32})


def pack_access(wait: bool, addr: int, value: int) -> int:
    """One access of :data:`ACCESS_LAYOUT` as the integer a batch carries (a testbench's
    side: ``sim.tb.batches.BatchSource``)."""
    f = ACCESS_LAYOUT
    return (int(wait) << f["wait"].offset) | (addr << f["addr"].offset) \
        | (value << f["data"].offset)


class RegisterPlayer(wiring.Component):
    """Plays accesses (:data:`ACCESS_LAYOUT`, ``k`` per batch) in order on an AXI4-Lite
    master port, one at a time.

    Ports: ``batches`` (the accesses, as :class:`~hdl.sim_batch.BeatPlayer` takes them);
    ``bus`` (the master port, 32-bit data, all byte strobes set); ``active`` (an access is
    offered or in flight: the port is in use). Responses are taken as they come (the core's
    registers answer OKAY to every access).

    Timing: a write offers AW and W together in the cycle its access is offered and takes
    the next access in the cycle of its B response (three cycles a write on
    ``hdl.cmdqueue.CommandQueue``); a poll reads again the cycle after each read whose bits
    are not yet 0 and takes the next access in the cycle of the read that finds them 0.

    Parameters
    ----------
    k : int
        Accesses per batch, 1 .. 1024.

    Raises
    ------
    TypeError
        If ``k`` is not an integer.
    ValueError
        If ``k`` is out of range.
    """

    def __init__(self, *, k: int = 64):
        self.k = _check_batch(k)
        super().__init__({
            "batches": In(_batch_stream(ACCESS_LAYOUT, k)),
            "bus": In(AxiLiteSignature()),  # flipped: a master, 12 address bits
            "active": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.player = player = BeatPlayer(ACCESS_LAYOUT, self.k)
        wiring.connect(m, wiring.flipped(self.batches), player.batches)
        beats: stream.Interface = player.beats
        access = beats.payload
        bus = self.bus
        # Design note. The access stays on the player's stream until it is done (a stream
        # holds its payload until taken), so nothing is copied: the address and data go to
        # the bus straight from the offered batch, and the access is taken with its
        # response. AW and W are offered together; each is withdrawn once taken.
        aw_done, w_done = Signal(), Signal()
        m.d.comb += [bus.awaddr.eq(access.addr), bus.wdata.eq(access.data),
                     bus.wstrb.eq(0b1111), bus.araddr.eq(access.addr)]
        with m.FSM(name="state") as fsm:
            with m.State("OFFER"):
                with m.If(beats.valid & ~access.wait):
                    aw_taken = aw_done | bus.awready
                    w_taken = w_done | bus.wready
                    m.d.comb += [bus.awvalid.eq(~aw_done), bus.wvalid.eq(~w_done)]
                    m.d.sync += [aw_done.eq(aw_taken), w_done.eq(w_taken)]
                    with m.If(aw_taken & w_taken):
                        m.next = "WRITE_RESP"
                with m.If(beats.valid & access.wait):
                    m.d.comb += bus.arvalid.eq(1)
                    with m.If(bus.arready):
                        m.next = "READ_DATA"
            with m.State("WRITE_RESP"):
                m.d.comb += bus.bready.eq(1)
                with m.If(bus.bvalid):
                    m.d.comb += beats.ready.eq(1)
                    m.d.sync += [aw_done.eq(0), w_done.eq(0)]
                    m.next = "OFFER"
            with m.State("READ_DATA"):
                m.d.comb += bus.rready.eq(1)
                with m.If(bus.rvalid):
                    # Not yet 0: the access stays offered and the read is made again.
                    m.d.comb += beats.ready.eq((bus.rdata & access.data) == 0)
                    m.next = "OFFER"
        m.d.comb += self.active.eq(beats.valid | ~fsm.ongoing("OFFER"))
        return m
