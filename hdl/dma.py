"""The DMA engine: 2-D strided copies between DRAM (an AXI4 slave) and SBUF."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .formats import Dtype
from .params import check_int

__all__ = ["AxiSignature", "DmaEngine", "dma_command_layout"]

_INCR = 1
_SIZE_CODE = 2  # AxSIZE for 4 bytes


class AxiSignature(wiring.Signature):
    """An AXI4 master port with a 32-bit data bus (IDs of one bit, always 0): the member names
    are AXI's, so cocotbext-axi finds them under any prefix."""

    def __init__(self, *, addr_width: int = 32):
        super().__init__({
            "awid": Out(1), "awaddr": Out(addr_width), "awlen": Out(8), "awsize": Out(3),
            "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(32), "wstrb": Out(4), "wlast": Out(1), "wvalid": Out(1),
            "wready": In(1),
            "bid": In(1), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "arid": Out(1), "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3),
            "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
            "rid": In(1), "rdata": In(32), "rresp": In(2), "rlast": In(1), "rvalid": In(1),
            "rready": Out(1),
        })


def dma_command_layout(n: int, words: int) -> data.StructLayout:
    """One DMA command (the DMA_LOAD / DMA_STORE descriptor's fields, ``golden.isa``)."""
    return data.StructLayout({
        "store": 1,  # 0: DRAM -> SBUF (DMA_LOAD), 1: SBUF -> DRAM (DMA_STORE)
        "dtype": Dtype,  # element size 1 (fp8), 2 (bf16, fp16) or 4 (fp32) bytes
        "part": range(max(n, 2)),
        "rows": range(n + 1),
        "sbuf_addr": range(max(words, 2)),
        "cols": range(words + 1),
        "dram_addr": 32,
        "dram_stride": 32,
    })


class DmaEngine(wiring.Component):
    """Moves a ``rows`` x ``cols`` tile of elements between DRAM and SBUF, dtype-preserving.

    Semantics (``golden.iss``, DMA_LOAD / DMA_STORE): element (p, c) lives in DRAM at byte
    ``dram_addr + p * dram_stride + c * size`` (little-endian) and in SBUF partition
    ``part + p``, word ``sbuf_addr + c`` (zero-extended); a load copies DRAM to SBUF, a store
    the low ``8 * size`` bits of each word back, rows in increasing p. The command must be
    legal (the sequencer checks ranges, dtype and alignment to the element size); the engine
    does not check it again.

    AXI4 (``axi``): INCR bursts of 4-byte beats, at most ``max_burst`` beats, never across a
    4 KiB boundary, one ID (0), reads in order. Each row is its own run of bursts from its
    first byte rounded down to 4; stores write only the element bytes (``wstrb``).

    Bus errors: an error response (SLVERR or DECERR: ``rresp`` / ``bresp`` bit 1) on any R
    beat or B response sets ``error``, which stays set until the engine takes its next
    command (so it belongs to the command running, or to the last one). The command still
    runs to its end, as AXI has no abort: every burst is requested, a load writes to SBUF the
    data R returned with every beat, error or not (a slave answering an error usually sends
    zeros), a store sends all its W beats (what DRAM keeps of a burst answered with an error
    is up to DRAM), and ``busy`` falls as usual once the last response is in. The sequencer
    turns ``error`` into ``ErrorCode.BUS_ERROR``.

    SBUF ports: ``sbuf_wr_*`` writes one word per cycle; ``sbuf_rd_*`` reads one word with a
    one-cycle latency. Throughput: loads write one element per cycle while R keeps up;
    stores assemble a beat from its elements and then wait for W, about one beat per
    (elements + 2) cycles.

    Parameters
    ----------
    n : int
        SBUF partitions, 1 to 256.
    words : int
        SBUF words per partition, 1 to 2^16.
    max_burst : int
        The longest AXI burst, 1 to 256 beats (default 16).

    Raises
    ------
    TypeError
        If ``n``, ``words`` or ``max_burst`` is not an integer.
    ValueError
        If ``n``, ``words`` or ``max_burst`` is out of range.
    """

    def __init__(self, *, n: int, words: int, max_burst: int = 16):
        self.n = check_int("n", n, lo=1, hi=256)
        self.words = check_int("words", words, lo=1, hi=1 << 16)
        self.max_burst = check_int("max_burst", max_burst, lo=1, hi=256)
        self.cmd_layout = dma_command_layout(n, words)
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "axi": Out(AxiSignature()),
            "sbuf_wr_en": Out(1), "sbuf_wr_part": Out(range(max(n, 2))),
            "sbuf_wr_addr": Out(range(max(words, 2))), "sbuf_wr_data": Out(32),
            "sbuf_rd_en": Out(1), "sbuf_rd_part": Out(range(max(n, 2))),
            "sbuf_rd_addr": Out(range(max(words, 2))), "sbuf_rd_data": In(32),
            "busy": Out(1),
            "error": Out(1),
        })

    def _burst_walker(self, m, name, cmd, size, start):
        """The address side (AR or AW): rows of bursts. Returns (valid, addr, len, fire_in,
        done) where the caller drives ``fire_in`` on a handshake."""
        row = Signal(range(self.n + 1), name=f"{name}_row")
        row_start = Signal(32, name=f"{name}_row_start")
        addr = Signal(32, name=f"{name}_addr")
        left = Signal(range(self.words + 3), name=f"{name}_left")  # beats left in the row
        active = Signal(name=f"{name}_active")
        fire = Signal(name=f"{name}_fire")
        to_4k = (4096 - addr[:12]) >> 2
        beats = Signal(range(self.max_burst + 1), name=f"{name}_beats")
        m.d.comb += beats.eq(Mux(left < self.max_burst, Mux(left < to_4k, left, to_4k),
                                 Mux(to_4k < self.max_burst, to_4k, self.max_burst)))

        def row_beats(a):
            return ((a[:2] + cmd.cols * size + 3) >> 2)

        with m.If(start):
            m.d.sync += [active.eq(1), row.eq(0), row_start.eq(cmd.dram_addr),
                         addr.eq(Cat(Const(0, 2), cmd.dram_addr[2:])),
                         left.eq(row_beats(cmd.dram_addr))]
        with m.Elif(fire):
            with m.If(left == beats):
                next_start = row_start + cmd.dram_stride
                m.d.sync += [row.eq(row + 1), row_start.eq(next_start),
                             addr.eq(Cat(Const(0, 2), next_start[2:])),
                             left.eq(row_beats(next_start))]
                with m.If(row + 1 == cmd.rows):
                    m.d.sync += active.eq(0)
            with m.Else():
                m.d.sync += [addr.eq(addr + (beats << 2)), left.eq(left - beats)]
        return active, addr, beats, fire

    def elaborate(self, platform):
        # Design note: the address side (AR or AW) and the data side (R or W) each walk the
        # tile on their own -- the address side in bursts, the data side element by element
        # -- and agree because both cut each row into the same beats: from its first byte
        # rounded down to 4 up to its last byte. Elements are aligned to their size, so none
        # straddles a beat. W needs the burst lengths for wlast: the AW side queues them.
        m = Module()
        axi = self.axi
        cmd_q = Signal(self.cmd_layout)  # the command being executed
        busy = Signal()
        error = Signal()
        m.d.comb += [self.busy.eq(busy), self.error.eq(error)]
        start = Signal()
        m.d.comb += [self.cmd.ready.eq(~busy), start.eq(self.cmd.valid & ~busy)]
        # The walkers read the command from the stream in the start cycle, from cmd_q later.
        cmd = Signal(self.cmd_layout)
        m.d.comb += cmd.eq(Mux(start, self.cmd.payload, cmd_q))
        with m.If(start):
            m.d.sync += [cmd_q.eq(self.cmd.payload), busy.eq(1), error.eq(0)]
        size = Signal(3)  # element bytes: 1, 2 or 4 (of the command starting, or running)
        with m.Switch(cmd.dtype):
            with m.Case(Dtype.FP8_E4M3, Dtype.FP8_E5M2):
                m.d.comb += size.eq(1)
            with m.Case(Dtype.BF16, Dtype.FP16):
                m.d.comb += size.eq(2)
            with m.Default():
                m.d.comb += size.eq(4)

        # --- Address side. -------------------------------------------------------------------
        a_active, a_addr, a_beats, a_fire = self._burst_walker(m, "a", cmd, size, start)
        is_store = cmd_q.store
        m.d.comb += [
            axi.arid.eq(0), axi.araddr.eq(a_addr), axi.arlen.eq(a_beats - 1),
            axi.arsize.eq(_SIZE_CODE), axi.arburst.eq(_INCR),
            axi.awid.eq(0), axi.awaddr.eq(a_addr), axi.awlen.eq(a_beats - 1),
            axi.awsize.eq(_SIZE_CODE), axi.awburst.eq(_INCR),
        ]
        m.submodules.bursts = bursts = fifo.SyncFIFO(width=9, depth=4)  # AW lengths for W
        with m.If(a_active & ~is_store):
            m.d.comb += [axi.arvalid.eq(1), a_fire.eq(axi.arready)]
        with m.If(a_active & is_store):
            m.d.comb += [axi.awvalid.eq(bursts.w_rdy), a_fire.eq(axi.awready & bursts.w_rdy),
                         bursts.w_en.eq(a_fire), bursts.w_data.eq(a_beats)]
        outstanding = Signal(range(1 << 12))  # write bursts awaiting B
        m.d.comb += axi.bready.eq(1)
        b_done = axi.bvalid
        with m.If(b_done & axi.bresp[1]):
            m.d.sync += error.eq(1)
        m.d.sync += outstanding.eq(outstanding + (a_fire & is_store) - b_done)

        # --- Data side: element walker shared by load (R) and store (W). --------------------
        d_active = Signal()
        d_row = Signal(range(self.n + 1))
        d_col = Signal(range(self.words + 1))
        d_row_start = Signal(32)
        off = Signal(2)  # byte offset of the next element in the current beat
        last_col = d_col + 1 == cmd_q.cols
        beat_end = (off + size > 3) | last_col  # this element ends its beat
        step = Signal()  # one element handled this cycle
        with m.If(start):
            m.d.sync += [d_active.eq(1), d_row.eq(0), d_col.eq(0),
                         d_row_start.eq(self.cmd.payload.dram_addr),
                         off.eq(self.cmd.payload.dram_addr[:2])]
        with m.Elif(step):
            with m.If(last_col):
                next_start = d_row_start + cmd_q.dram_stride
                m.d.sync += [d_col.eq(0), d_row.eq(d_row + 1), d_row_start.eq(next_start),
                             off.eq(next_start[:2])]
                with m.If(d_row + 1 == cmd_q.rows):
                    m.d.sync += d_active.eq(0)
            with m.Else():
                m.d.sync += [d_col.eq(d_col + 1), off.eq(off + size)]
        part = cmd_q.part + d_row
        word = cmd_q.sbuf_addr + d_col

        # Load: hold an R beat, write its elements to SBUF one per cycle.
        beat = Signal(32)
        beat_valid = Signal()
        elem = Signal(32)
        shifted = beat >> Cat(Const(0, 3), off)
        with m.Switch(size):
            with m.Case(1):
                m.d.comb += elem.eq(shifted[:8])
            with m.Case(2):
                m.d.comb += elem.eq(shifted[:16])
            with m.Default():
                m.d.comb += elem.eq(shifted)
        load_step = d_active & ~is_store & beat_valid & ~start
        take_r = Signal()
        m.d.comb += [
            axi.rready.eq(d_active & ~is_store & ~start & (~beat_valid | (load_step & beat_end))),
            take_r.eq(axi.rready & axi.rvalid),
        ]
        with m.If(load_step & beat_end):
            m.d.sync += beat_valid.eq(0)
        with m.If(take_r):
            m.d.sync += [beat.eq(axi.rdata), beat_valid.eq(1)]
            with m.If(axi.rresp[1]):
                m.d.sync += error.eq(1)
        m.d.comb += [self.sbuf_wr_en.eq(load_step), self.sbuf_wr_part.eq(part),
                     self.sbuf_wr_addr.eq(word), self.sbuf_wr_data.eq(elem)]

        # Store: read elements (one-cycle latency) into a W beat; send it at the beat's end.
        w_data = Signal(32)
        w_strb = Signal(4)
        w_full = Signal()  # w_data/w_strb hold a finished beat
        rd_pending = Signal()  # an element read was issued last cycle
        rd_off = Signal(2)
        rd_size = Signal(3)
        rd_end = Signal()
        burst_left = Signal(9)  # W beats left in the current burst (0: take the next length)
        # An element read may start unless a beat is waiting for W, or the read in flight
        # ends a beat (the next element would go into a new one before this one is sent).
        store_go = Signal()
        m.d.comb += store_go.eq(d_active & is_store & ~start & ~w_full & ~(rd_pending & rd_end))
        m.d.comb += [self.sbuf_rd_en.eq(store_go), self.sbuf_rd_part.eq(part),
                     self.sbuf_rd_addr.eq(word)]
        m.d.sync += [rd_pending.eq(store_go), rd_off.eq(off), rd_size.eq(size),
                     rd_end.eq(beat_end)]
        lane_data = Signal(32)
        lane_strb = Signal(4)
        m.d.comb += [lane_data.eq(self.sbuf_rd_data << Cat(Const(0, 3), rd_off)),
                     lane_strb.eq(Mux(rd_size == 1, 0b0001, Mux(rd_size == 2, 0b0011, 0b1111))
                                  << rd_off)]
        with m.If(rd_pending):
            mask = Cat(*(lane_strb[i].replicate(8) for i in range(4)))
            m.d.sync += [w_data.eq((w_data & ~mask) | (lane_data & mask)),
                         w_strb.eq(w_strb | lane_strb)]
            with m.If(rd_end):
                m.d.sync += w_full.eq(1)
        m.d.comb += step.eq(load_step | store_go)
        need_len = burst_left == 0
        m.d.comb += [
            axi.wdata.eq(w_data), axi.wstrb.eq(w_strb),
            axi.wvalid.eq(w_full & (~need_len | bursts.r_rdy)),
            axi.wlast.eq(Mux(need_len, bursts.r_data == 1, burst_left == 1)),
        ]
        with m.If(axi.wvalid & axi.wready):
            m.d.sync += [w_full.eq(0), w_strb.eq(0), w_data.eq(0)]
            with m.If(need_len):
                m.d.comb += bursts.r_en.eq(1)
                m.d.sync += burst_left.eq(bursts.r_data - 1)
            with m.Else():
                m.d.sync += burst_left.eq(burst_left - 1)

        # Done: both walkers finished and nothing in flight.
        idle = (~a_active & ~d_active & ~beat_valid & ~w_full & ~rd_pending
                & (outstanding == 0) & ~start)
        with m.If(busy & idle):
            m.d.sync += busy.eq(0)
        return m
