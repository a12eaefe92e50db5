"""The command queue behind AXI4-Lite registers: the host's way into the NeuronCore."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .isa import DESCRIPTOR_BITS

__all__ = ["AxiLiteSignature", "CommandQueue", "REGISTERS", "CORE_ID", "DEBUG_ADDR_FIELDS"]

#: The ID register's value: "NCL1".
CORE_ID = 0x4E43_4C31

#: Register map (byte offsets). DESC0..7 stage a descriptor, PUSH queues it.
REGISTERS = {
    "ID": 0x00,  # read: CORE_ID
    "CTRL": 0x04,  # write: bit 0 soft reset (a pulse), bit 1 clear the error (a pulse), bit 2
    #                pause (a level, set or cleared by every CTRL write: while set, no
    #                descriptor leaves the queue but one already offered to the sequencer;
    #                commands already taken run on). Read: bit 2
    "STATUS": 0x08,  # read: bit 0 busy, bit 1 error, bit 2 queue full, bit 3 overflow
    #                  (a PUSH was dropped; cleared by CTRL bit 1), bits 4..7 the core's flags
    #                  (status_flags: bit 4 a debug read timed out), bits 8.. queue level
    "ERROR": 0x0C,  # read: bits 0..3 error code (golden.isa.ErrorCode), bits 8..31 index
    "EXECUTED": 0x10,  # read: commands executed since the last soft reset
    "DESC0": 0x20,  # DESC0..DESC7 at 0x20..0x3C: write/read the staged descriptor words
    "PUSH": 0x40,  # write: queue the staged descriptor (dropped, with overflow, if full)
    "DBG_ADDR": 0x44,  # write: read one SBUF or PSUM word (DEBUG_ADDR_FIELDS) into DBG_DATA;
    #                    the write's response waits until the word is there
    "DBG_DATA": 0x48,  # read: the word the last DBG_ADDR write fetched
    "PERF0": 0x80,  # read: PERF0.. at 0x80, 0x84, ...: performance counters
}


#: The fields of a DBG_ADDR write: (bit offset, width). ``space`` 0 reads SBUF partition
#: ``part`` word ``word``; 1 reads PSUM partition ``part``, bank ``bank``, word ``word``.
#: A word outside the memories reads 0.
DEBUG_ADDR_FIELDS = {"word": (0, 16), "part": (16, 8), "bank": (24, 4), "space": (31, 1)}


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

    Parameters (keyword-only): ``depth`` (descriptors, 1..256), ``perf_counters`` (0..16).
    """

    def __init__(self, *, depth: int = 8, perf_counters: int = 4):
        if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= 256:
            raise ValueError(f"depth must be an integer between 1 and 256, not {depth!r}")
        if (not isinstance(perf_counters, int) or isinstance(perf_counters, bool)
                or not 0 <= perf_counters <= 16):
            raise ValueError(f"perf_counters must be an integer between 0 and 16, not "
                             f"{perf_counters!r}")
        self.depth, self.perf_counters = depth, perf_counters
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
        staged = [Signal(32, name=f"desc{i}") for i in range(8)]
        overflow = Signal()
        pause = Signal()
        # Pause stops the next descriptor, not one already offered: a descriptor on ``desc``
        # stays valid until taken (the stream rule; sim/formal's stream_cmdqueue_strict).
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
                    m.d.comb += [self.soft_reset.eq(w_data[0]), self.clear_error.eq(w_data[1])]
                    m.d.sync += pause.eq(w_data[2])
                    with m.If(w_data[1]):
                        m.d.sync += overflow.eq(0)
                for i in range(8):
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
                    m.d.sync += r_data.eq(pause << 2)
                with m.Case(REGISTERS["STATUS"] >> 2):
                    m.d.sync += r_data.eq(Cat(self.busy | queue.r_rdy | flushing,
                                              self.error_code != 0, ~queue.w_rdy, overflow,
                                              self.status_flags, queue.level))
                with m.Case(REGISTERS["ERROR"] >> 2):
                    m.d.sync += r_data.eq(Cat(self.error_code, Const(0, 4), self.error_index))
                with m.Case(REGISTERS["EXECUTED"] >> 2):
                    m.d.sync += r_data.eq(self.executed)
                for i in range(8):
                    with m.Case((REGISTERS["DESC0"] >> 2) + i):
                        m.d.sync += r_data.eq(staged[i])
                with m.Case(REGISTERS["DBG_DATA"] >> 2):
                    m.d.sync += r_data.eq(dbg_data)
                for i in range(self.perf_counters):
                    with m.Case((REGISTERS["PERF0"] >> 2) + i):
                        m.d.sync += r_data.eq(self.perf[i])
        return m
