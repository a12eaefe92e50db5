"""The command queue behind AXI4-Lite registers: the host's way into the NeuronCore."""

from amaranth.hdl import Cat, Const, Module, Signal, Value
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from golden.isa import CORE_ID, DEBUG_ADDR_FIELDS, REGISTER_MAP, REGISTERS

from .isa import DESCRIPTOR_BITS
from .params import check_int

__all__ = ["AxiLiteSignature", "CommandQueue", "REGISTERS", "REGISTER_MAP", "CORE_ID",
           "DEBUG_ADDR_FIELDS"]

#: The register map, CORE_ID and the DBG_ADDR fields are ``golden.isa``'s (one source, shared
#: with the host driver): ``REGISTERS`` ``{name: byte offset}``, ``REGISTER_MAP`` the same as
#: data (access, fields, what each does). DESC0..7 stage a descriptor, PUSH queues it.
_REG = REGISTER_MAP


def _field(word, reg: str, name: str):
    """Field ``name`` of register ``reg`` in ``word`` (a Value)."""
    offset, width = _REG[reg].fields[name]
    return word[offset:offset + width]


def _pack(reg: str, **values):
    """A value of register ``reg`` from its fields' Values (each zero-extended to its width),
    the rest of the bits 0."""
    parts, pos = [], 0
    for name, (offset, width) in sorted(_REG[reg].fields.items(), key=lambda f: f[1][0]):
        if name not in values:
            continue
        v = Value.cast(values[name])
        assert len(v) <= width, (reg, name)
        parts += [Const(0, offset - pos), v, Const(0, width - len(v))]
        pos = offset + width
    return Cat(*(p for p in parts if len(p)))


class AxiLiteSignature(wiring.Signature):
    """An AXI4-Lite slave port, 32-bit data (the member names are AXI's, for cocotbext-axi)."""

    def __init__(self, *, addr_width: int = 12):
        super().__init__({
            "awaddr": In(addr_width), "awprot": In(3), "awvalid": In(1), "awready": Out(1),
            "wdata": In(32), "wstrb": In(4), "wvalid": In(1), "wready": Out(1),
            "bresp": Out(2), "bvalid": Out(1), "bready": In(1),
            "araddr": In(addr_width), "arprot": In(3), "arvalid": In(1), "arready": Out(1),
            "rdata": Out(32), "rresp": Out(2), "rvalid": Out(1), "rready": In(1),
        })


class CommandQueue(wiring.Component):
    """AXI4-Lite registers (:data:`REGISTERS`) in front of a FIFO of descriptors.

    The host writes the eight 32-bit words of a descriptor (``golden.isa``) to DESC0..7 and
    then PUSH; the descriptor enters the FIFO (``depth`` entries) and leaves on ``desc`` for
    the sequencer. A PUSH to a full queue is dropped and sets the sticky overflow bit: the bus
    never stalls. The sequencer reports ``busy``, its ``error_code`` / ``error_index`` and the
    ``executed`` count; ``clear_error`` pulses when the host writes CTRL bit 1, ``soft_reset``
    when it writes CTRL bit 0 (the queue empties itself on it). ``perf`` are counters shown
    at PERF0.. . A DBG_ADDR write goes out on ``dbg_req`` and its B response waits for the
    word on ``dbg_resp`` (then readable at DBG_DATA), so a host that reads DBG_DATA after the
    write completes always sees the word it asked for. Every access completes with OKAY
    (unmapped addresses read 0, ignore writes). Reset (``rst``) empties the queue and clears
    the overflow bit, pause, the staged descriptor words and DBG_DATA.

    Parameters
    ----------
    depth : int
        Descriptors the FIFO holds, 1 to 256 (default 8).
    perf_counters : int
        Performance counters shown at PERF0.., 0 to 16 (default 4).

    Raises
    ------
    TypeError
        If ``depth`` or ``perf_counters`` is not an integer.
    ValueError
        If ``depth`` or ``perf_counters`` is out of range.
    """

    def __init__(self, *, depth: int = 8, perf_counters: int = 4):
        self.depth = check_int("depth", depth, lo=1, hi=256)
        self.perf_counters = check_int("perf_counters", perf_counters, lo=0, hi=16)
        super().__init__({
            "axil": Out(AxiLiteSignature()),  # members as seen by the slave
            "desc": Out(stream.Signature(DESCRIPTOR_BITS)),
            "busy": In(1),
            "error_code": In(4),
            "error_index": In(24),
            "executed": In(32),
            "perf": In(data.ArrayLayout(32, max(perf_counters, 1))),
            "clear_error": Out(1),
            "soft_reset": Out(1),
            "pause": Out(1),
            "status_flags": In(4),
            "dbg_req": Out(stream.Signature(32)),
            "dbg_resp": In(stream.Signature(32)),
        })

    def elaborate(self, platform):
        # Design note: a write needs its address and its data; each is taken on its own and
        # held until both are there, then the write happens and B is answered (one write in
        # flight). A read is answered the cycle after its address is taken.
        m = Module()
        bus = self.axil
        m.submodules.queue = queue = fifo.SyncFIFO(width=DESCRIPTOR_BITS, depth=self.depth)
        staged = [Signal(32, name=f"desc{i}") for i in range(_REG["DESC0"].count)]
        overflow = Signal()
        pause = Signal()
        # Pause stops the next descriptor, not one already offered: a descriptor on ``desc``
        # stays valid until taken (the stream rule; sim/verify/formal's stream_cmdqueue_strict).
        offered = Signal()
        m.d.comb += [self.desc.valid.eq(queue.r_rdy & (~pause | offered)),
                     self.desc.payload.eq(queue.r_data),
                     queue.r_en.eq(self.desc.valid & self.desc.ready),
                     queue.w_data.eq(Cat(*staged)), self.pause.eq(pause)]
        m.d.sync += offered.eq(self.desc.valid & ~self.desc.ready)

        # --- Writes. -------------------------------------------------------------------------
        aw_addr, aw_full = Signal(12), Signal()
        w_data, w_full = Signal(32), Signal()
        b_pending = Signal()
        dbg_wait = Signal()  # a DBG_ADDR write waits for its word before B is answered
        dbg_data = Signal(32)
        busy_w = b_pending | dbg_wait
        m.d.comb += [bus.awready.eq(~aw_full & ~busy_w), bus.wready.eq(~w_full & ~busy_w),
                     bus.bvalid.eq(b_pending), bus.bresp.eq(0),
                     self.dbg_resp.ready.eq(dbg_wait & ~self.dbg_req.valid)]
        with m.If(self.dbg_req.ready):
            m.d.sync += self.dbg_req.valid.eq(0)
        with m.If(self.dbg_resp.valid & self.dbg_resp.ready):
            m.d.sync += [dbg_data.eq(self.dbg_resp.payload), dbg_wait.eq(0), b_pending.eq(1)]
        with m.If(bus.awvalid & bus.awready):
            m.d.sync += [aw_addr.eq(bus.awaddr), aw_full.eq(1)]
        with m.If(bus.wvalid & bus.wready):
            m.d.sync += [w_data.eq(bus.wdata), w_full.eq(1)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += b_pending.eq(0)
        do_write = aw_full & w_full
        with m.If(do_write):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), b_pending.eq(1)]
            with m.Switch(aw_addr[2:]):
                with m.Case(REGISTERS["CTRL"] >> 2):
                    clear = _field(w_data, "CTRL", "clear_error")
                    m.d.comb += [self.soft_reset.eq(_field(w_data, "CTRL", "soft_reset")),
                                 self.clear_error.eq(clear)]
                    m.d.sync += pause.eq(_field(w_data, "CTRL", "pause"))
                    with m.If(clear):
                        m.d.sync += overflow.eq(0)
                for i in range(len(staged)):
                    with m.Case((REGISTERS["DESC0"] >> 2) + i):
                        m.d.sync += staged[i].eq(w_data)
                with m.Case(REGISTERS["DBG_ADDR"] >> 2):
                    m.d.sync += [b_pending.eq(0), dbg_wait.eq(1), self.dbg_req.valid.eq(1),
                                 self.dbg_req.payload.eq(w_data)]
                with m.Case(REGISTERS["PUSH"] >> 2):
                    with m.If(queue.w_rdy):
                        m.d.comb += queue.w_en.eq(1)
                    with m.Else():
                        m.d.sync += overflow.eq(1)
        # Soft reset empties the queue: the FIFO has no clear, so it is drained one entry per
        # cycle, unseen by the sequencer, until empty.
        flushing = Signal()
        with m.If(self.soft_reset):
            m.d.sync += flushing.eq(1)
        with m.Elif(flushing & ~queue.r_rdy):
            m.d.sync += flushing.eq(0)
        with m.If(flushing):
            m.d.comb += [queue.r_en.eq(1), self.desc.valid.eq(0)]

        # --- Reads. --------------------------------------------------------------------------
        r_pending = Signal()
        r_data = Signal(32)
        m.d.comb += [bus.arready.eq(~r_pending), bus.rvalid.eq(r_pending),
                     bus.rdata.eq(r_data), bus.rresp.eq(0)]
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += r_pending.eq(0)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [r_pending.eq(1), r_data.eq(0)]
            with m.Switch(bus.araddr[2:]):
                with m.Case(REGISTERS["ID"] >> 2):
                    m.d.sync += r_data.eq(CORE_ID)
                with m.Case(REGISTERS["CTRL"] >> 2):
                    m.d.sync += r_data.eq(_pack("CTRL", pause=pause))
                with m.Case(REGISTERS["STATUS"] >> 2):
                    m.d.sync += r_data.eq(_pack(
                        "STATUS", busy=self.busy | queue.r_rdy | flushing,
                        error=self.error_code != 0, full=~queue.w_rdy, overflow=overflow,
                        flags=self.status_flags, level=queue.level))
                with m.Case(REGISTERS["ERROR"] >> 2):
                    m.d.sync += r_data.eq(_pack("ERROR", code=self.error_code,
                                                index=self.error_index))
                with m.Case(REGISTERS["EXECUTED"] >> 2):
                    m.d.sync += r_data.eq(self.executed)
                for i in range(len(staged)):
                    with m.Case((REGISTERS["DESC0"] >> 2) + i):
                        m.d.sync += r_data.eq(staged[i])
                with m.Case(REGISTERS["DBG_DATA"] >> 2):
                    m.d.sync += r_data.eq(dbg_data)
                for i in range(self.perf_counters):
                    with m.Case((REGISTERS["PERF0"] >> 2) + i):
                        m.d.sync += r_data.eq(self.perf[i])
        return m
