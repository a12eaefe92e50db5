"""The DMA engine: 2-D strided copies between DRAM (an AXI4 slave) and SBUF."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .formats import Dtype
from .params import check_int, check_one_of
from .pipeline import shift_in
from .read_port import SBUF_READ_LATENCY

__all__ = ["AxiSignature", "DATA_WIDTHS", "DmaEngine", "check_data_width",
           "dma_command_layout"]

_INCR = 1
#: The AXI4 data widths the DMA (and ``hdl.axi_mem.AxiMemory``) can be built with.
DATA_WIDTHS = (32, 64, 128, 256)


def check_data_width(data_width) -> int:
    """``data_width`` must be one of :data:`DATA_WIDTHS` (TypeError / ValueError, as
    :func:`~hdl.params.check_one_of`)."""
    return check_one_of("data_width", data_width, DATA_WIDTHS)


class AxiSignature(wiring.Signature):
    """An AXI4 master port with a ``data_width``-bit data bus (32 to 256; IDs of one bit,
    always 0): the member names are AXI's, so cocotbext-axi finds them under any prefix."""

    def __init__(self, *, addr_width: int = 32, data_width: int = 32):
        self.data_width = check_data_width(data_width)
        strb = data_width // 8
        super().__init__({
            "awid": Out(1), "awaddr": Out(addr_width), "awlen": Out(8), "awsize": Out(3),
            "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(strb), "wlast": Out(1), "wvalid": Out(1),
            "wready": In(1),
            "bid": In(1), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "arid": Out(1), "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3),
            "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
            "rid": In(1), "rdata": In(data_width), "rresp": In(2), "rlast": In(1),
            "rvalid": In(1), "rready": Out(1),
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
    """Moves a ``rows`` x ``cols`` tile of elements between DRAM and SBUF, dtype-preserving,
    one AXI beat per cycle.

    Semantics (``golden.iss``, DMA_LOAD / DMA_STORE): element (p, c) lives in DRAM at byte
    ``dram_addr + p * dram_stride + c * size`` (little-endian) and in SBUF partition
    ``part + p``, word ``sbuf_addr + c`` (zero-extended); a load copies DRAM to SBUF, a store
    the low ``8 * size`` bits of each word back, rows in increasing p. The command must be
    legal (the sequencer checks ranges, dtype and alignment to the element size); the engine
    does not check it again.

    AXI4 (``axi``, ``data_width`` bits = B bytes): INCR bursts of full-width beats (AxSIZE =
    log2 B), at most ``max_burst`` beats, never across a 4 KiB boundary, one ID (0), reads in
    order. Each row is its own run of bursts, from its first byte rounded down to B up to its
    last byte; stores write only the element bytes (``wstrb``).

    Throughput: **one beat per cycle, every element it holds**, loads and stores, while AXI
    keeps up: B / size elements a cycle in the middle of a row (B bytes a cycle), fewer in a
    row's first and last beat. So a row of c elements takes ceil(((a mod B) + c·size) / B)
    beats, a the row's first byte. The first burst is requested two cycles after the command
    is taken.

    SBUF ports (a window of ``lanes`` = B words of one partition, the most elements a beat
    holds): ``sbuf_wr_*`` writes elements 0 .. ``sbuf_wr_count`` − 1 of ``sbuf_wr_data`` to
    words ``sbuf_wr_addr ..`` of partition ``sbuf_wr_part``; ``sbuf_rd_*`` reads words
    ``sbuf_rd_addr .. + lanes − 1`` of partition ``sbuf_rd_part`` into ``sbuf_rd_data``
    :data:`~hdl.read_port.SBUF_READ_LATENCY` cycles after ``sbuf_rd_en`` (the words past the
    beat's elements are not used; the data need not be held). A load writes each R beat's
    elements the cycle after the beat is taken; a store reads a beat's elements, registers
    them as they arrive, packs them the cycle after that and offers the beat on W the next
    cycle, through a queue of ``SBUF_READ_LATENCY + 3`` beats (room for every beat in
    flight, so that reads go on a beat a cycle).

    Bus errors: an error response (SLVERR or DECERR: ``rresp`` / ``bresp`` bit 1) on any R
    beat or B response sets ``error``, which stays set until the engine takes its next
    command (so it belongs to the command running, or to the last one). The command still
    runs to its end, as AXI has no abort: every burst is requested, a load writes to SBUF the
    data R returned with every beat, error or not (a slave answering an error usually sends
    zeros), a store sends all its W beats (what DRAM keeps of a burst answered with an error
    is up to DRAM), and ``busy`` falls as usual once the last response is in. The sequencer
    turns ``error`` into ``ErrorCode.BUS_ERROR``.

    Parameters
    ----------
    n : int
        SBUF partitions, 1 to 256.
    words : int
        SBUF words per partition, 1 to 2^16.
    max_burst : int
        The longest AXI burst, 1 to 256 beats (default 16).
    data_width : int
        The AXI4 data bus, one of :data:`DATA_WIDTHS` bits (default 32).

    Raises
    ------
    TypeError
        If ``n``, ``words``, ``max_burst`` or ``data_width`` is not an integer.
    ValueError
        If ``n``, ``words`` or ``max_burst`` is out of range, or ``data_width`` is not one of
        :data:`DATA_WIDTHS`.
    """

    def __init__(self, *, n: int, words: int, max_burst: int = 16, data_width: int = 32):
        self.n = check_int("n", n, lo=1, hi=256)
        self.words = check_int("words", words, lo=1, hi=1 << 16)
        self.max_burst = check_int("max_burst", max_burst, lo=1, hi=256)
        self.data_width = check_data_width(data_width)
        self.lanes = data_width // 8  # B: bytes a beat, the most elements it holds
        self.cmd_layout = dma_command_layout(n, words)
        lanes = self.lanes
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "axi": Out(AxiSignature(data_width=data_width)),
            "sbuf_wr_en": Out(1), "sbuf_wr_part": Out(range(max(n, 2))),
            "sbuf_wr_addr": Out(range(max(words, 2))), "sbuf_wr_count": Out(range(lanes + 1)),
            "sbuf_wr_data": Out(data.ArrayLayout(32, lanes)),
            "sbuf_rd_en": Out(1), "sbuf_rd_part": Out(range(max(n, 2))),
            "sbuf_rd_addr": Out(range(max(words, 2))),
            "sbuf_rd_data": In(data.ArrayLayout(32, lanes)),
            "busy": Out(1),
            "error": Out(1),
        })

    def _burst_walker(self, m, name, start, cmd, first_size_log):
        """The address side (AR or AW): rows of bursts. Returns (active, valid, addr, beats,
        fire): ``valid`` offers the burst, the caller drives ``fire`` on a handshake. It takes
        the first row's address from the stream in the start cycle, and works out that row's
        first burst in the next from ``cmd`` (the command, registered); ``first_size_log``:
        log2 of the element's bytes of the command offered (read in the start cycle)."""
        # Design note: the beats to the 4 KiB boundary (`to_4k`) and the three compares that
        # choose a burst's length (the least of the beats left in the row, `to_4k` and
        # `max_burst`) and tell a row's last burst are registers, computed with the values
        # they describe. So a burst's length is a multiplexer of registers, and the row's end,
        # which enables the row registers on the handshake, is one register: no subtraction
        # or compare lies between the address and the clock enables (a timing path). The
        # first row's burst is worked out the cycle after the start (`load_first`), from
        # registers, like every later row's: the start handshake would otherwise choose
        # between the two rows' addresses in front of those sums.
        first = self.cmd.payload
        B, lg = self.lanes, self.lanes.bit_length() - 1
        page = 4096 >> lg  # beats in 4 KiB
        row = Signal(range(self.n + 1), name=f"{name}_row")
        row_start = Signal(32, name=f"{name}_row_start")
        # The next row's first byte (row_start + dram_stride), a register stepped with
        # row_start: the next row's first burst is worked out from it with no sum before
        # (row_start + stride, then the 4 KiB room, then its compare was a timing path).
        next_row = Signal(32, name=f"{name}_next_row")
        addr = Signal(32, name=f"{name}_addr")
        left = Signal(range(self.words + 3), name=f"{name}_left")  # beats left in the row
        to_4k = Signal(range(page + 1), name=f"{name}_to_4k")  # beats to the 4 KiB boundary
        left_le_max = Signal(name=f"{name}_left_le_max")  # left <= max_burst
        left_le_4k = Signal(name=f"{name}_left_le_4k")  # left <= to_4k
        to_4k_le_max = Signal(name=f"{name}_to_4k_le_max")  # to_4k <= max_burst
        active = Signal(name=f"{name}_active")
        load_first = Signal(name=f"{name}_load_first")
        valid = Signal(name=f"{name}_valid")
        fire = Signal(name=f"{name}_fire")
        m.d.comb += valid.eq(active & ~load_first)
        beats = Signal(range(self.max_burst + 1), name=f"{name}_beats")
        m.d.comb += beats.eq(Mux(left_le_max, Mux(left_le_4k, left, to_4k),
                                 Mux(to_4k_le_max, to_4k, self.max_burst)))
        last = left_le_max & left_le_4k  # the row's last burst (beats == left)

        # 4096 - n and max_burst * B - n, n a row's bytes (registers set as the command is
        # taken): a row of n bytes from byte offset o in its page (o_b in its beat) has
        # ceil((o_b + n) / B) beats, which is <= max_burst iff o_b <= max_burst * B - n, and
        # <= the beats to the 4 KiB boundary iff o <= 4096 - n. So a row's first burst
        # compares its address's low bits with a register: no sum before the compare (a
        # timing path).
        nbytes = first.cols << first_size_log
        span = Signal(range(B + (1 << len(nbytes))), name=f"{name}_span")  # n + B - 1
        wide = signed(1 + max(len(nbytes), (4096).bit_length(),
                              (self.max_burst * B).bit_length()))
        to_end = Signal(wide, name=f"{name}_to_end")  # 4096 - n
        to_max = Signal(wide, name=f"{name}_to_max")  # max_burst * B - n

        def load_row(a):
            """The first burst of a row whose first byte is ``a``."""
            new_to_4k = page - a[lg:12]
            m.d.sync += [addr.eq(Cat(Const(0, lg), a[lg:])), left.eq((a[:lg] + span) >> lg),
                         to_4k.eq(new_to_4k), left_le_max.eq(a[:lg] <= to_max),
                         left_le_4k.eq(a[:12] <= to_end),
                         to_4k_le_max.eq(new_to_4k <= self.max_burst)]

        with m.If(start):
            m.d.sync += [active.eq(1), load_first.eq(1), row.eq(0),
                         row_start.eq(first.dram_addr),
                         next_row.eq(first.dram_addr + first.dram_stride),
                         span.eq(nbytes + B - 1), to_end.eq(4096 - nbytes),
                         to_max.eq(self.max_burst * B - nbytes)]
        with m.Elif(load_first):
            m.d.sync += load_first.eq(0)
            load_row(row_start)
        with m.Elif(fire):
            with m.If(last):
                m.d.sync += [row.eq(row + 1), row_start.eq(next_row),
                             next_row.eq(next_row + cmd.dram_stride)]
                load_row(next_row)
                with m.If(row + 1 == cmd.rows):
                    m.d.sync += active.eq(0)
            with m.Else():
                # A burst before the row's last ends at the 4 KiB boundary (beats = to_4k: the
                # next starts a new page) or, short of it, at max_burst (`by_max`: the page
                # goes on). Each case's registers are worked out from registers, the compares
                # on the old values (left - max <= to_4k - max is left <= to_4k): no subtraction
                # behind the burst's multiplexer in front of a compare (a timing path).
                by_max = ~left_le_max & ~to_4k_le_max
                mb = self.max_burst
                past = left - to_4k  # the beats left after a burst to the boundary
                # past <= page is left <= to_4k + page, and as 1 <= to_4k <= page (a power of
                # 2), that sum is to_4k with page's bit set, or 2 * page: no adder.
                k = page.bit_length() - 1
                to_4k_plus_page = Mux(to_4k[k], 2 * page, to_4k | page)
                m.d.sync += [addr.eq(addr + (beats << lg)),
                             left.eq(Mux(by_max, left - mb, past)),
                             to_4k.eq(Mux(by_max, to_4k - mb, page)),
                             left_le_max.eq(Mux(by_max, left <= 2 * mb, past <= mb)),
                             left_le_4k.eq(Mux(by_max, left_le_4k, left <= to_4k_plus_page)),
                             to_4k_le_max.eq(Mux(by_max, to_4k <= 2 * mb, int(page <= mb)))]
        return active, valid, addr, beats, fire

    def elaborate(self, platform):
        # Design note: the address side (AR or AW) and the data side (R or W) each walk the
        # tile on their own -- the address side in bursts, the data side beat by beat -- and
        # agree because both cut each row into the same beats: from its first byte rounded
        # down to B up to its last byte. Elements are aligned to their size and B is a
        # multiple of 4, so none straddles a beat: a row's first beat holds the elements from
        # its offset in the beat on, the others start at byte 0. W needs the burst lengths for
        # wlast: the AW side queues them.
        m = Module()
        axi, B, lanes = self.axi, self.lanes, self.lanes
        lg = B.bit_length() - 1
        cmd_q = Signal(self.cmd_layout)  # the command being executed
        busy = Signal()
        error = Signal()
        m.d.comb += [self.busy.eq(busy), self.error.eq(error)]
        start = Signal()
        m.d.comb += [self.cmd.ready.eq(~busy), start.eq(self.cmd.valid & ~busy)]
        with m.If(start):
            m.d.sync += [cmd_q.eq(self.cmd.payload), busy.eq(1), error.eq(0)]

        def size_log_of(dtype, name):
            """log2 of the element's bytes: 0 (fp8), 1 (bf16, fp16), 2 (fp32)."""
            size_log = Signal(2, name=name)
            with m.Switch(dtype):
                with m.Case(Dtype.FP8_E4M3, Dtype.FP8_E5M2):
                    m.d.comb += size_log.eq(0)
                with m.Case(Dtype.BF16, Dtype.FP16):
                    m.d.comb += size_log.eq(1)
                with m.Default():
                    m.d.comb += size_log.eq(2)
            return size_log

        # The one taken (read in the start cycle only), and the running command's (a
        # register: it selects the store's packing, a timing path).
        first_size_log = size_log_of(self.cmd.payload.dtype, "first_size_log")
        size_log = Signal(2)
        with m.If(start):
            m.d.sync += size_log.eq(first_size_log)

        # --- Address side. -------------------------------------------------------------------
        a_active, a_valid, a_addr, a_beats, a_fire = self._burst_walker(
            m, "a", start, cmd_q, first_size_log)
        is_store = cmd_q.store
        m.submodules.bursts = bursts = fifo.SyncFIFO(width=9, depth=4)  # AW lengths for W
        # The walker hands its burst to a skid register, not to AR / AW: it steps whenever a
        # burst is offered and the register is empty, and a burst the bus did not take waits
        # in the register (`held`), offered from there. So the bus's ready reaches only
        # `held`, not the walker's clock enables (arready -> fire -> its row registers was a
        # timing path), and a burst still leaves the cycle the walker offers it.
        held = Signal()
        held_addr, held_beats = Signal.like(a_addr), Signal.like(a_beats)
        m.d.comb += a_fire.eq(a_valid & ~held & (~is_store | bursts.w_rdy))
        offered = held | a_fire
        bus_ready = Mux(is_store, axi.awready, axi.arready)
        with m.If(~held):
            m.d.sync += [held_addr.eq(a_addr), held_beats.eq(a_beats)]
        m.d.sync += held.eq(offered & ~bus_ready)
        req_addr, req_beats = Mux(held, held_addr, a_addr), Mux(held, held_beats, a_beats)
        m.d.comb += [axi.arvalid.eq(offered & ~is_store), axi.awvalid.eq(offered & is_store),
                     bursts.w_en.eq(a_fire & is_store), bursts.w_data.eq(a_beats)]
        m.d.comb += [
            axi.arid.eq(0), axi.araddr.eq(req_addr), axi.arlen.eq(req_beats - 1),
            axi.arsize.eq(lg), axi.arburst.eq(_INCR),
            axi.awid.eq(0), axi.awaddr.eq(req_addr), axi.awlen.eq(req_beats - 1),
            axi.awsize.eq(lg), axi.awburst.eq(_INCR),
        ]
        outstanding = Signal(range(1 << 12))  # write bursts awaiting B (counted as handed over)
        m.d.comb += axi.bready.eq(1)
        b_done = axi.bvalid
        with m.If(b_done & axi.bresp[1]):
            m.d.sync += error.eq(1)
        m.d.sync += outstanding.eq(outstanding + (a_fire & is_store) - b_done)

        # --- Data side: a beat walker shared by load (R) and store (W). ----------------------
        # (It reads the command's fields from the stream in the start cycle and from cmd_q
        # after it, not through a multiplexer of the two.)
        d_active = Signal()
        d_row = Signal(range(self.n + 1))
        # The beat's SBUF partition and first word, registers stepped with the walker (not
        # sums of the command's fields: they go to the SBUF's address logic).
        part = Signal.like(self.sbuf_rd_part)
        word = Signal.like(self.sbuf_rd_addr)
        d_row_start = Signal(32)
        off = Signal(lg)  # byte offset of the beat's first element
        # Registers, so that a beat's element count and the row's end are a compare of two
        # registers each, side by side (not a difference, then a minimum, then a compare).
        left = Signal(range(self.words + 1))  # elements left in the row
        fit = Signal(range(B + 1))  # elements from `off` to the beat's end
        count = Signal(range(B + 1))  # elements in this beat
        row_end = Signal()  # the row's last beat
        m.d.comb += [row_end.eq(left <= fit), count.eq(Mux(row_end, left, fit))]
        step = Signal()  # one beat handled this cycle
        with m.If(start):
            m.d.sync += [d_active.eq(1), d_row.eq(0), part.eq(self.cmd.payload.part),
                         word.eq(self.cmd.payload.sbuf_addr),
                         d_row_start.eq(self.cmd.payload.dram_addr),
                         off.eq(self.cmd.payload.dram_addr[:lg]), left.eq(self.cmd.payload.cols),
                         fit.eq((B - self.cmd.payload.dram_addr[:lg]) >> first_size_log)]
        with m.Elif(step):
            with m.If(row_end):
                next_start = d_row_start + cmd_q.dram_stride
                m.d.sync += [word.eq(cmd_q.sbuf_addr), d_row.eq(d_row + 1),
                             part.eq(part + 1), d_row_start.eq(next_start),
                             off.eq(next_start[:lg]), left.eq(cmd_q.cols),
                             fit.eq((B - next_start[:lg]) >> size_log)]
                with m.If(d_row + 1 == cmd_q.rows):
                    m.d.sync += d_active.eq(0)
            with m.Else():
                m.d.sync += [word.eq(word + fit), off.eq(0), left.eq(left - fit),
                             fit.eq(B >> size_log)]
        # Load: take an R beat, write its elements to SBUF the next cycle.
        beat = Signal(self.data_width)
        beat_off, beat_count = Signal(lg), Signal(range(B + 1))
        beat_valid = Signal()
        take_r = Signal()
        m.d.comb += [axi.rready.eq(d_active & ~is_store),
                     take_r.eq(axi.rready & axi.rvalid), step.eq(take_r)]
        m.d.sync += beat_valid.eq(take_r)
        with m.If(take_r):
            m.d.sync += [beat.eq(axi.rdata), beat_off.eq(off), beat_count.eq(count),
                         self.sbuf_wr_part.eq(part), self.sbuf_wr_addr.eq(word)]
            with m.If(axi.rresp[1]):
                m.d.sync += error.eq(1)
        shifted = Signal(self.data_width)
        m.d.comb += shifted.eq(beat >> Cat(Const(0, 3), beat_off))
        with m.Switch(size_log):
            for lg_size in range(3):
                with m.Case(lg_size):
                    bits = 8 << lg_size
                    for i in range(min(lanes, self.data_width // bits)):
                        m.d.comb += self.sbuf_wr_data[i].eq(shifted[i * bits:(i + 1) * bits])
        m.d.comb += [self.sbuf_wr_en.eq(beat_valid), self.sbuf_wr_count.eq(beat_count)]

        # Store: read a beat's elements (one cycle), pack them into a W beat, queue it.
        m.submodules.w_queue = w_queue = fifo.SyncFIFO(width=self.data_width + B,
                                                       depth=SBUF_READ_LATENCY + 3)
        # The words are registered as they leave the SBUF's read port (`window`) and packed
        # from there. A read's beat offset and element count (as it is issued), then its byte
        # strobes (worked out from those a cycle later: the count is a compare's choice, and
        # the strobes a shift of it) follow it down a pipeline (`rd_pending[k]`: the read was
        # issued k + 1 cycles ago); the last stage's words are in `window`. The words past the
        # beat's elements go into W too, in the bytes whose strobes are off.
        stages = SBUF_READ_LATENCY + 1
        assert stages >= 2  # (the strobes' stage)
        rd_pending = [Signal(name=f"rd_pending{k + 1}") for k in range(stages)]
        issued_fields = data.StructLayout({"off": lg, "count": range(B + 1)})
        beat_fields = data.StructLayout({"off": lg, "strb": B})
        rd_issued = Signal(issued_fields, name="rd_beat1")
        rd_beat = [Signal(beat_fields, name=f"rd_beat{k + 2}") for k in range(stages - 1)]
        got, got_off = rd_pending[-1], rd_beat[-1].off
        issued = Signal(issued_fields)
        m.d.comb += [issued.off.eq(off), issued.count.eq(count)]
        strobed = Signal(beat_fields)  # rd_beat1's, with its strobes
        n_bytes = Signal(range(B + 1))  # the beat's element bytes
        m.d.comb += [n_bytes.eq(rd_issued.count << size_log), strobed.off.eq(rd_issued.off),
                     strobed.strb.eq(((1 << n_bytes) - 1) << rd_issued.off)]
        window = Signal.like(self.sbuf_rd_data)
        in_flight = Signal(range(stages + 1))
        m.d.comb += in_flight.eq(sum(rd_pending))
        store_go = Signal()
        m.d.comb += store_go.eq(d_active & is_store
                                & (w_queue.level + in_flight < w_queue.depth))
        m.d.comb += [self.sbuf_rd_en.eq(store_go), self.sbuf_rd_part.eq(part),
                     self.sbuf_rd_addr.eq(word)]
        m.d.sync += [*shift_in(rd_pending, store_go), rd_issued.eq(issued),
                     *shift_in(rd_beat, strobed), window.eq(self.sbuf_rd_data)]
        with m.If(store_go):
            m.d.comb += step.eq(1)
        packed = Signal(self.data_width)
        with m.Switch(size_log):
            for lg_size in range(3):
                with m.Case(lg_size):
                    bits = 8 << lg_size
                    elems = [window[i][:bits] for i in range(min(lanes, self.data_width // bits))]
                    m.d.comb += packed.eq(Cat(*elems))
        beat_data = Signal(self.data_width)
        m.d.comb += [beat_data.eq(packed << Cat(Const(0, 3), got_off)),
                     w_queue.w_en.eq(got), w_queue.w_data.eq(Cat(beat_data, rd_beat[-1].strb))]
        burst_left = Signal(9)  # W beats left in the current burst (0: take the next length)
        need_len = burst_left == 0
        m.d.comb += [
            axi.wdata.eq(w_queue.r_data[:self.data_width]),
            axi.wstrb.eq(w_queue.r_data[self.data_width:]),
            axi.wvalid.eq(w_queue.r_rdy & (~need_len | bursts.r_rdy)),
            axi.wlast.eq(Mux(need_len, bursts.r_data == 1, burst_left == 1)),
            w_queue.r_en.eq(axi.wvalid & axi.wready),
        ]
        with m.If(axi.wvalid & axi.wready):
            with m.If(need_len):
                m.d.comb += bursts.r_en.eq(1)
                m.d.sync += burst_left.eq(bursts.r_data - 1)
            with m.Else():
                m.d.sync += burst_left.eq(burst_left - 1)

        # Done: both walkers finished and nothing in flight.
        idle = (~a_active & ~held & ~d_active & ~beat_valid & ~w_queue.r_rdy & (in_flight == 0)
                & (outstanding == 0) & ~start)
        with m.If(busy & idle):
            m.d.sync += busy.eq(0)
        return m
