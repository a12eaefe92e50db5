"""The NeuronCore top: command queue, sequencer, SBUF, tensor / activation / DMA engines."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, ResetInserter, Shape, Signal
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .activation import (
    ActivationEngine,
    ActivationFunc,
    CommandKind,
    activation_beat_layout,
    activation_command_layout,
)
from .cmdqueue import DEBUG_ADDR_FIELDS, AxiLiteSignature, CommandQueue
from .collective import DEFAULT_WATCHDOG_CYCLES, MAX_RANKS, CollectiveEngine, check_watchdog
from .dma import AxiSignature, DmaEngine, check_data_width
from .formats import Dtype
from .fp32_add import FP32_ADD_MAX_STAGES
from .fp32_widen import Fp32Widen
from .fp_mul import FP_MUL_MAX_CUTS
from .isa import DESCRIPTOR_BITS, DESCRIPTOR_LAYOUTS, Opcode
from .params import check_int
from .pe import DEFAULT_ADD_STAGES, DEFAULT_MUL_STAGES
from .pipeline import delay, shift_in
from .read_port import SBUF_READ_LATENCY, ReadBuffer, read_enable
from .sequencer import Sequencer, check_core_sizes
from .sparsity import MAX_RATIO, SPARSITY_CODES, WEIGHT_LANE, parse_sparsity, ratio_of, slots_of
from .sru import sru_layouts
from .tensor_engine import DRAIN_LATENCY, TensorEngine, drain_request_layout
from .tensor_engine import Opcode as TeOpcode
from .torus import TorusNode, check_torus_rows

__all__ = ["NeuronCore", "PERF_COUNTERS", "ACTIVITY_ENGINES", "ActivityLayout"]

#: The performance counters at PERF0.. (cycles, since the last reset or soft reset).
PERF_COUNTERS = ("busy", "tensor_busy", "activation_busy", "dma_busy", "moving_columns",
                 "collective_busy")

#: The engines of the ``activity`` port's ``busy`` bits, bit 0 first: the events of the
#: performance counters ``tensor_busy``, ``activation_busy``, ``dma_busy``, ``collective_busy``.
ACTIVITY_ENGINES = ("tensor", "activation", "dma", "collective")


class ActivityLayout(data.StructLayout):
    """What a core is doing this cycle (:class:`NeuronCore`'s ``activity``): which engines are
    busy (:data:`ACTIVITY_ENGINES`) and how many commands it has dispatched (EXECUTED)."""

    def __init__(self):
        super().__init__({"busy": len(ACTIVITY_ENGINES), "executed": 32})


_NEG_ZERO = 0x8000_0000
#: Cycles a debug read waits for its port before it answers 0 and flags a timeout.
DEBUG_TIMEOUT = 4095


def _rotate(m, src, part, n, name):
    """Lane i of the result is ``src[(part + i) % n]``: partitions part.. as lanes 0.."""
    out = Signal(data.ArrayLayout(32, n), name=name)
    with m.Switch(part):
        for p in range(n):
            with m.Case(p):
                for i in range(n):
                    m.d.comb += out[i].eq(src[(p + i) % n])
    return out


class _TensorFeeder(wiring.Component):
    """Runs a LOAD_STATIONARY or MATMUL descriptor against the SBUF's first read port.

    LOAD_STATIONARY (partition ``part + k`` is row k, word ``sbuf_addr + j`` column j; lanes
    >= m are +0): with ``rows`` (the read port's window holds n words), reads and sends the k
    rows one a cycle, each a window of partition ``part + k``; else reads the tile's m
    columns (a word of every partition a cycle) into an n x n register tile, then sends the
    k rows. MATMUL: sends f moving beats,
    beat j being word ``sbuf_addr + j`` of partitions ``part..``. A stream of reads (MATMUL's
    beats, LOAD_STATIONARY's rows) goes through a :class:`~hdl.read_port.ReadBuffer`, so the
    engine may stall it. The first SBUF read goes out in the cycle the descriptor is taken,
    the tensor engine's command in the cycle after (from registers).

    ``busy`` until the last beat is taken: it falls in that very cycle, so that the next
    descriptor is taken the cycle after and its first moving beat is ready
    :data:`SBUF_READ_LATENCY` cycles after that (three idle cycles of the tensor engine
    between two MATMULs). ``active``: a descriptor is held, ``busy`` and that last cycle too
    (from registers only: the performance counter's event). ``te_loading_ready`` is the
    tensor engine's ``loading_ready`` (its ``weights.ready`` while no command is offered),
    which ``busy`` reads instead of ``weights.ready``: no path from the command it offers."""

    class _State(enum.Enum):
        IDLE = 0
        LS_READ = 1
        LS_SEND = 2
        MM = 3
        LS_ROWS = 4

    def __init__(self, *, n, words, te_cmd_layout, rows, sparse=False):
        self.n, self.words, self.rows, self.sparse = n, words, rows, sparse
        ports = {
            "cmd": In(stream.Signature(DESCRIPTOR_BITS)),
            "rd_en": Out(1), "rd_addr": Out(range(max(words, 2))),
            "rd_part": Out(range(max(n, 2))),
            "rd_data": In(data.ArrayLayout(32, n)),
            "rd_window": In(data.ArrayLayout(32, n)),
            "te_cmd": Out(stream.Signature(te_cmd_layout)),
            "weights": Out(stream.Signature(data.ArrayLayout(WEIGHT_LANE if sparse else 16, n))),
            "moving": Out(stream.Signature(data.ArrayLayout(16, (MAX_RATIO if sparse else 1)
                                                            * n))),
            "busy": Out(1), "active": Out(1),
            "te_loading_ready": In(1),
        }
        if sparse:  # words addr .. addr + MAX_RATIO - 1 of every partition
            ports["rd_rows"] = In(data.ArrayLayout(data.ArrayLayout(32, MAX_RATIO), n))
        super().__init__(ports)

    def _lane(self, word, keep):
        """A stationary lane from its SBUF word: the value (and a sparse tile's tag), or 0."""
        if self.sparse:
            return Mux(keep, word[:20], 0)  # WEIGHT_LANE: the value, then the tag at bit 16
        return Mux(keep, word[:16], 0)

    def elaborate(self, platform):
        m = Module()
        n, S = self.n, self._State
        state = Signal(S)
        cur = Signal(DESCRIPTOR_BITS)
        take = Signal()  # a descriptor is taken this cycle
        cmd_pending = Signal()  # the held command is offered to the tensor engine
        m.d.comb += [self.cmd.ready.eq((state == S.IDLE) & ~cmd_pending),
                     take.eq(self.cmd.valid & self.cmd.ready)]
        # The descriptor offered (only its first read, in the cycle it is taken, looks at it).
        in_ls = data.View(DESCRIPTOR_LAYOUTS[Opcode.LOAD_STATIONARY], self.cmd.payload)
        in_mm = data.View(DESCRIPTOR_LAYOUTS[Opcode.MATMUL], self.cmd.payload)
        in_is_mm = self.cmd.payload[:4] == Opcode.MATMUL
        idx = Signal(range(max(self.words, n) + 2))
        finishing = Signal()  # the last beat is taken this cycle
        m.d.comb += [self.active.eq((state != S.IDLE) | cmd_pending),
                     self.busy.eq(self.active & ~finishing)]
        with m.If(take):
            m.d.sync += cur.eq(self.cmd.payload)
        # The descriptor held: everything else follows it, the reads after the first, the
        # tensor engine's command and the data path (a read's words arrive in a later cycle
        # than its take, and no descriptor is taken before the last arrived).
        ls = data.View(DESCRIPTOR_LAYOUTS[Opcode.LOAD_STATIONARY], cur)
        mm = data.View(DESCRIPTOR_LAYOUTS[Opcode.MATMUL], cur)
        is_mm = cur[:4] == Opcode.MATMUL

        # The tensor engine's command: from the cycle after the descriptor is taken, from
        # registers set as it is taken (the engine's command decode and dispatch lie behind
        # it, and start its mover).
        p = Signal.like(self.te_cmd.payload)
        m.d.comb += [self.te_cmd.valid.eq(cmd_pending), self.te_cmd.payload.eq(p)]
        with m.If(take):
            m.d.sync += [
                p.op.eq(Mux(in_is_mm, TeOpcode.MULTIPLY_MOVING, TeOpcode.LOAD_STATIONARY)),
                p.fmt.as_value().eq(Mux(in_is_mm, in_mm.fmt.as_value(), in_ls.fmt.as_value())),
                p.k.eq(Mux(in_is_mm, in_mm.k, in_ls.k)), p.m.eq(in_ls.m), p.f.eq(in_mm.f),
                p.bank.eq(in_mm.bank), p.addr.eq(in_mm.psum_addr),
                p.accumulate.eq(in_mm.accumulate)]
        with m.If(take):
            m.d.sync += cmd_pending.eq(1)
        with m.Elif(self.te_cmd.ready):
            m.d.sync += cmd_pending.eq(0)
        # A sparse tile: its rows (slots), and R, the moving rows a partition holds for it.
        patterns = parse_sparsity(SPARSITY_CODES if self.sparse else ())
        ls_rows = slots_of(m, ls.k, ls.sparsity.as_value(), patterns, name="ls_rows")
        ratio = Signal(range(MAX_RATIO + 1), init=1)
        if self.sparse:
            with m.If(take):
                m.d.sync += p.sparsity.eq(in_ls.sparsity)
            with m.If(take & ~in_is_mm):
                m.d.sync += ratio.eq(ratio_of(m, in_ls.sparsity.as_value(), patterns,
                                              name="ls_ratio"))

        part = Mux(is_mm, mm.part, ls.part)
        rot = _rotate(m, self.rd_data, part, n, "rot")

        if self.rows:
            self._load_by_rows(m, take & ~in_is_mm, in_ls, ls, ls_rows, state, idx,
                               cmd_pending, finishing)
        else:
            self._load_by_columns(m, take & ~in_is_mm, in_ls, ls, ls_rows, state, idx,
                                  cmd_pending, finishing, rot)

        # MATMUL: the read port feeds the moving stream through a buffer; the first read as
        # the descriptor is taken. After a sparse tile a beat is R words of every partition
        # (row k of the tile: partition part + k // R, word k % R of the beat's).
        first = take & in_is_mm
        buf = m.submodules.moving_buffer = ReadBuffer(self.moving.payload.shape())
        m.d.comb += self.moving.payload.eq(buf.out.payload)
        with m.If(first | (state == S.MM)):
            self._stream_reads(m, first=first, state=state, own=S.MM, beats=mm.f,
                               out=self.moving, buf=buf, idx=idx, cmd_pending=cmd_pending,
                               finishing=finishing, ready_held=self.moving.ready)
            if not self.sparse:
                m.d.comb += self.rd_addr.eq(Mux(first, in_mm.sbuf_addr, mm.sbuf_addr + idx))
        if self.sparse:
            self._sparse_moving(m, first, in_mm, mm, first | (state == S.MM), idx, ratio, part,
                                buf)
        else:
            for i in range(n):
                m.d.comb += buf.data[i].eq(rot[i][:16])
        return m

    def _sparse_moving(self, m, first, in_mm, mm, active, idx, ratio, part, buf):
        """A sparse-capable feeder's MATMUL reads: word ``sbuf_addr + idx · R`` on (the
        first, ``in_mm``'s, as it is taken), R words of every partition a beat (R = 1 for a
        dense tile), into the moving stream's buffer ``buf``."""
        n = self.n
        with m.If(active):
            with m.Switch(ratio):
                for r in range(1, MAX_RATIO + 1):
                    with m.Case(r):
                        m.d.comb += self.rd_addr.eq(Mux(first, in_mm.sbuf_addr,
                                                        mm.sbuf_addr + idx * r))
        rows = []  # rows[i][q]: word i of the beat's, of partition part + q
        for i in range(MAX_RATIO):
            words = Signal(data.ArrayLayout(32, n), name=f"rd_word{i}")
            m.d.comb += [words[q].eq(self.rd_rows[q][i]) for q in range(n)]
            rows.append(_rotate(m, words, part, n, f"rot_w{i}"))
        with m.Switch(ratio):
            for r in range(1, MAX_RATIO + 1):
                with m.Case(r):
                    for k in range(MAX_RATIO * n):
                        value = rows[k % r][k // r][:16] if k // r < n else 0
                        m.d.comb += buf.data[k].eq(value)

    def _stream_reads(self, m, *, first, state, own, beats, out, buf, idx, cmd_pending,
                      finishing, ready_held):
        """``beats`` beats (at least one, of the descriptor held) read from SBUF into the
        stream ``out`` through ``buf`` (a :class:`~hdl.read_port.ReadBuffer`, whose
        ``data`` and ``out``'s payload the caller drives): a read a cycle while the buffer
        has room, the first as the descriptor is taken (``first``), the others while
        ``state`` is ``own``; ``idx`` counts them, so the caller's address is the offered
        descriptor's when ``first``, else the held one's with ``idx``. The last beat taken
        ends the command (``state`` IDLE, ``finishing``); ``ready_held`` is ``out.ready``
        in the cycles no command is pending (``finishing`` only looks at those). Call inside
        ``first | (state == own)``; ``rd_en`` is driven here."""
        active = state == own
        more = first | (idx < beats)  # (no descriptor has 0 beats: the sequencer's checks)
        m.d.comb += [self.rd_en.eq(buf.room & more), buf.issue.eq(self.rd_en),
                     out.valid.eq(active & buf.out.valid), buf.out.ready.eq(active & out.ready)]
        m.d.sync += [idx.eq(Mux(first, 0, idx) + self.rd_en), state.eq(own)]
        last = out.valid & (buf.pending == 1) & ~more  # the last beat offered
        with m.If(last & out.ready):
            m.d.sync += state.eq(self._State.IDLE)
        # (the same beat, taken while no command is pending: `ready` as the engine offers it
        # then, without the path from a command starting)
        with m.If(last & ready_held):
            m.d.comb += finishing.eq(~cmd_pending)

    def _load_by_rows(self, m, first, in_ls, ls, ls_rows, state, idx, cmd_pending, finishing):
        """LOAD_STATIONARY a row a cycle: row i is the window of partition ``part + i`` (the
        first read as the descriptor ``in_ls`` is taken, ``first``; the rows go through a
        buffer)."""
        S, n = self._State, self.n
        buf = m.submodules.weights_buffer = ReadBuffer(self.weights.payload.shape())
        m.d.comb += self.weights.payload.eq(buf.out.payload)
        for j in range(n):
            m.d.comb += buf.data[j].eq(self._lane(self.rd_window[j], ls.m > j))
        with m.If(first | (state == S.LS_ROWS)):
            self._stream_reads(m, first=first, state=state, own=S.LS_ROWS, beats=ls_rows,
                               out=self.weights, buf=buf, idx=idx, cmd_pending=cmd_pending,
                               finishing=finishing, ready_held=self.te_loading_ready)
            m.d.comb += [self.rd_addr.eq(Mux(first, in_ls.sbuf_addr, ls.sbuf_addr)),
                         self.rd_part.eq(Mux(first, in_ls.part, ls.part + idx))]

    def _load_by_columns(self, m, first, in_ls, ls, ls_rows, state, idx, cmd_pending,
                         finishing, rot):
        """LOAD_STATIONARY: m column reads into the tile (the first as the descriptor
        ``in_ls`` is taken, ``first``), then its rows' beats."""
        S, n = self._State, self.n
        width = 20 if self.sparse else 16
        tile = [[Signal(width, name=f"tile{k}_{j}") for j in range(n)] for k in range(n)]
        read_col = first | (state == S.LS_READ)
        col = Mux(first, 0, idx)
        # The column reads in flight (`in_port[k]`: read k + 1 cycles ago) and their indices:
        # the last's words are on the port.
        in_port = [Signal(name=f"col_stage{k + 1}") for k in range(SBUF_READ_LATENCY)]
        col_of = [Signal(range(n), name=f"col_index{k + 1}") for k in range(SBUF_READ_LATENCY)]
        m.d.sync += [*shift_in(in_port, read_col), *shift_in(col_of, col)]
        with m.If(in_port[-1]):
            for j in range(n):
                with m.If(col_of[-1] == j):
                    m.d.sync += [tile[k][j].eq(rot[k][:width]) for k in range(n)]
        with m.If(read_col):
            m.d.comb += [self.rd_en.eq(1),
                         self.rd_addr.eq(Mux(first, in_ls.sbuf_addr, ls.sbuf_addr + idx))]
            m.d.sync += [idx.eq(col + 1), state.eq(S.LS_READ)]
            with m.If(Mux(first, in_ls.m == 1, idx + 1 == ls.m)):
                m.d.sync += [state.eq(S.LS_SEND), idx.eq(0)]
        with m.If(state == S.LS_SEND):
            m.d.comb += self.weights.valid.eq(~Cat(*in_port).any() & (idx < ls_rows))
            for j in range(n):
                m.d.comb += self.weights.payload[j].eq(
                    self._lane(Array(tile[k][j] for k in range(n))[idx], ls.m > j))
            last = self.weights.valid & (idx + 1 == ls_rows)  # the last beat offered
            with m.If(self.weights.valid & self.weights.ready):
                m.d.sync += idx.eq(idx + 1)
            with m.If(last & self.weights.ready):
                m.d.sync += state.eq(S.IDLE)
            with m.If(last & self.te_loading_ready):
                m.d.comb += finishing.eq(~cmd_pending)


class _ActivationFeeder(wiring.Component):
    """Runs the activation/vector engine's commands: ACTIVATE, TENSOR_TENSOR, TENSOR_SCALAR,
    TENSOR_REDUCE, and TRANSPOSE (data movement only).

    * ACTIVATE: the bias column (word ``bias_addr`` of every partition, or −0), the engine's
      command, ``cols`` input beats (PSUM rows through the tensor engine's drain port, or SBUF
      words through the second read port; lanes outside ``part .. part + rows − 1`` are +0).
    * TENSOR_SCALAR, TENSOR_REDUCE: the same input beats from ``in0`` (SBUF words widened from
      ``in0_dtype`` by :class:`~hdl.fp32_widen.Fp32Widen`), one beat a cycle.
    * TENSOR_TENSOR: per beat, ``in0``'s column then ``in1``'s (each an SBUF read or a PSUM
      drain request), registered, widened and registered, then the beat: ten cycles a beat
      from PSUM, twelve from SBUF.
    * Output beats are written to SBUF words ``dst_addr ..`` of the partitions in range (a
      reduction's one beat to ``dst_addr``).
    * TRANSPOSE: for each source row k (partition ``part + k``) and each window of the SBUF's
      read port (``window`` words): the words ``src_addr + c .. `` of that partition are read
      in one cycle, registered the next and written the one after as word ``dst_addr + k`` of
      partitions ``dst_part + c ..``.

    Every operand is registered as it arrives from the SBUF or the PSUM drain port, before it
    is widened, and again after the widening, before the engine's beat register: an SBUF beat
    is offered to the engine :data:`SBUF_READ_LATENCY` + 3 cycles after its read, a PSUM beat
    three cycles after the drain port gives it. A stream of SBUF reads or of PSUM drain requests
    goes through a :class:`~hdl.read_port.ReadBuffer`, so the engine may stall it (the drain
    port's responses are always taken: they come :data:`~hdl.tensor_engine.DRAIN_LATENCY`
    cycles after their requests). A single read (the bias, a TENSOR_TENSOR column, a
    TRANSPOSE window) is taken from the port :data:`SBUF_READ_LATENCY` cycles after it is
    issued. The engine's command is offered from a register the cycle after CMD, and the
    feeder reads its operands meanwhile (their beats wait until the engine has taken it).
    ``busy`` until the last output is written."""

    class _State(enum.Enum):
        IDLE = 0
        BIAS = 1
        BIAS_LATCH = 2
        CMD = 3
        RUN = 4  # one operand a beat (ACTIVATE, TENSOR_SCALAR, TENSOR_REDUCE)
        TT_REQ0 = 5  # TENSOR_TENSOR: fetch in0's column, then in1's, then send the beat
        TT_GOT0 = 6
        TT_REQ1 = 7
        TT_GOT1 = 8
        TT_SEND = 9
        TR_READ = 10  # TRANSPOSE: read a window of a source row, then write it
        TR_WRITE = 11
        TT_WID0 = 12  # TENSOR_TENSOR: in0's column widened (after TT_GOT0)
        TT_WID1 = 13
        TR_HOLD = 14  # TRANSPOSE: the window registered (after TR_READ)
        TT_PAIR = 15  # TENSOR_TENSOR: in1's column widened, the beat formed (after TT_WID1)

    def __init__(self, *, n, words, banks, psum_words, o_layout, window):
        self.n, self.words, self.window, self.psum_words = n, words, window, psum_words
        super().__init__({
            "cmd": In(stream.Signature(DESCRIPTOR_BITS)),
            "rd_en": Out(1), "rd_addr": Out(range(max(words, 2))),
            "rd_part": Out(range(max(n, 2))),
            "rd_data": In(data.ArrayLayout(32, n)),
            "rd_window": In(data.ArrayLayout(32, window)),
            "drain_req": Out(stream.Signature(drain_request_layout(banks, psum_words))),
            "drain_resp": In(stream.Signature(data.ArrayLayout(32, n))),
            "act_cmd": Out(stream.Signature(activation_command_layout(n))),
            "act_i": Out(stream.Signature(activation_beat_layout(n))),
            "act_o": In(stream.Signature(o_layout)),
            "wr_en": Out(n), "wr_addr": Out(range(max(words, 2))),
            "wr_data": Out(data.ArrayLayout(32, n)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n, S, W = self.n, self._State, self.window
        state = Signal(S)
        # Input beats count to cols: up to the SBUF's words, or a PSUM bank's for a reduction
        # (its one output word is all it writes to SBUF).
        addr = range(max(self.words, self.psum_words, 2) + 1)
        # The command, in one form for every opcode (set as it is taken).
        part, rows = Signal(8), Signal(9)
        dst_addr = Signal(16)  # the SBUF word of the next output (a register: no sum)
        srcs = [{"sbuf": Signal(name=f"in{i}_sbuf"), "bank": Signal(4, name=f"in{i}_bank"),
                 "addr": Signal(16, name=f"in{i}_addr"),
                 "dtype": Signal(Dtype, name=f"in{i}_dtype")} for i in range(2)]
        act = Signal(activation_command_layout(n))  # the engine's command (count: cols)
        cols = act.count
        out_cols = Mux(act.kind == CommandKind.REDUCE, 1, cols)  # output beats
        tr_dst_part = Signal(8)
        transpose = Signal()
        lanes = Signal(n)  # partitions in range
        bias_en, bias_addr = Signal(), Signal(16)

        views = {o: data.View(DESCRIPTOR_LAYOUTS[o], self.cmd.payload)
                 for o in (Opcode.ACTIVATE, Opcode.TENSOR_TENSOR, Opcode.TENSOR_SCALAR,
                           Opcode.TENSOR_REDUCE, Opcode.TRANSPOSE)}
        idx = Signal(addr)  # input beats requested (TRANSPOSE: source rows done)
        out_idx = Signal(addr)  # output beats written (TRANSPOSE: the window's first word)
        # RUN's reads: whether beats are left to request (idx < cols) and the next one's
        # address (in0's + idx), registers stepped beside idx: no compare or sum between idx
        # and the SBUF port's request (a timing path).
        reading, run_addr = Signal(), Signal(16)
        next_beat = [idx.eq(idx + 1), run_addr.eq(run_addr + 1), reading.eq(idx + 1 != cols)]
        m.d.comb += [self.busy.eq(state != S.IDLE), self.cmd.ready.eq(state == S.IDLE)]

        def take(o, **kw):
            """The statements that record an opcode's command as it is taken."""
            f = views[o]
            stmts = [part.eq(f.part), rows.eq(f.rows), act.count.eq(f.cols), idx.eq(0),
                     out_idx.eq(0), transpose.eq(0), bias_en.eq(0), reading.eq(f.cols != 0),
                     run_addr.eq(f.src_addr if o in (Opcode.ACTIVATE, Opcode.TRANSPOSE)
                                 else f.in0_addr)]
            stmts += [lanes[j].eq((f.part <= j) & (f.part + f.rows > j)) for j in range(n)]
            stmts += [act.bias[j].eq(_NEG_ZERO) for j in range(n)]
            if o == Opcode.TRANSPOSE:
                return stmts + [transpose.eq(1), srcs[0]["addr"].eq(f.src_addr),
                                tr_dst_part.eq(f.dst_part), dst_addr.eq(f.dst_addr)]
            stmts += [dst_addr.eq(f.dst_addr), act.dtype.eq(f.dtype), act.mode.eq(f.mode),
                      act.saturate.eq(f.saturate), act.kind.eq(kw["kind"])]
            if o == Opcode.ACTIVATE:
                return stmts + [act.func.eq(f.func), act.scale.eq(f.scale),
                                srcs[0]["sbuf"].eq(f.src_sbuf), srcs[0]["bank"].eq(f.src_bank),
                                srcs[0]["addr"].eq(f.src_addr), srcs[0]["dtype"].eq(Dtype.FP32),
                                bias_en.eq(f.bias_en), bias_addr.eq(f.bias_addr)]
            stmts += [act.func.eq(ActivationFunc.IDENTITY), act.alu.eq(f.alu),
                      act.reverse.eq(f.reverse if o == Opcode.TENSOR_SCALAR else 0),
                      act.scale.eq(f.scalar if o == Opcode.TENSOR_SCALAR else 0)]
            for i in range(2 if o == Opcode.TENSOR_TENSOR else 1):
                stmts += [srcs[i][k].eq(getattr(f, f"in{i}_{k}"))
                          for k in ("sbuf", "bank", "addr", "dtype")]
            return stmts

        with m.If(self.cmd.valid & self.cmd.ready):
            with m.Switch(self.cmd.payload[:4]):
                with m.Case(Opcode.ACTIVATE):
                    m.d.sync += take(Opcode.ACTIVATE, kind=CommandKind.ACTIVATE)
                    m.d.sync += state.eq(Mux(views[Opcode.ACTIVATE].bias_en, S.BIAS, S.CMD))
                with m.Case(Opcode.TENSOR_TENSOR):
                    m.d.sync += take(Opcode.TENSOR_TENSOR, kind=CommandKind.TENSOR_TENSOR)
                    m.d.sync += state.eq(S.CMD)
                with m.Case(Opcode.TENSOR_SCALAR):
                    m.d.sync += take(Opcode.TENSOR_SCALAR, kind=CommandKind.TENSOR_SCALAR)
                    m.d.sync += state.eq(S.CMD)
                with m.Case(Opcode.TENSOR_REDUCE):
                    m.d.sync += take(Opcode.TENSOR_REDUCE, kind=CommandKind.REDUCE)
                    m.d.sync += state.eq(S.CMD)
                with m.Case(Opcode.TRANSPOSE):
                    m.d.sync += take(Opcode.TRANSPOSE)
                    m.d.sync += state.eq(S.TR_READ)
        # A single read's words are on the port when `arrived` (no state that waits for one
        # follows a read of another kind within SBUF_READ_LATENCY cycles).
        arrived = delay(m, self.rd_en, SBUF_READ_LATENCY, name="rd_arrived")
        with m.If(state == S.BIAS):
            m.d.comb += [self.rd_en.eq(1), self.rd_addr.eq(bias_addr)]
            m.d.sync += state.eq(S.BIAS_LATCH)
        with m.If((state == S.BIAS_LATCH) & arrived):
            m.d.sync += [act.bias.eq(self.rd_data), state.eq(S.CMD)]

        # The engine's command is offered from a register (`cmd_v`, set as CMD is left) and
        # the feeder goes on without waiting for it to be taken: the beats wait at the
        # engine's intake until it is (none is offered within a cycle of it: the first comes
        # from a read). So the engine's `ready` (its intake's registers and our `ov`) reaches
        # only cmd_v, never our state: on the ULX3S that round trip between the two blocks,
        # placed 26 tiles apart, was the critical path (54 MHz).
        cmd_v = Signal()
        m.d.comb += [self.act_cmd.payload.eq(act), self.act_cmd.valid.eq(cmd_v)]
        with m.If(self.act_cmd.ready):
            m.d.sync += cmd_v.eq(0)
        with m.If(state == S.CMD):
            m.d.sync += [cmd_v.eq(1),
                         state.eq(Mux(act.kind == CommandKind.TENSOR_TENSOR, S.TT_REQ0, S.RUN))]

        # Operands: SBUF words or PSUM rows, registered as they arrive (`raw_q`, with their
        # dtype) and widened from there: the SBUF's block RAMs put out their word 5.6 ns after
        # the clock on the ECP5, so no operand goes from a RAM into the widening and the
        # engine's intake in one cycle (the PSUM's drain port answers from a register).
        raw_q = Signal(data.ArrayLayout(32, n))
        widened = Signal(data.ArrayLayout(32, n))
        # raw_q's dtype, a register loaded with it (in1's in TT_GOT1, else in0's): the state
        # does not choose it in the cycle of the widening.
        src_dtype = Signal.like(srcs[0]["dtype"])
        for j in range(n):
            wid = m.submodules[f"widen{j}"] = Fp32Widen()
            m.d.comb += [wid.dtype.eq(src_dtype), wid.word.eq(raw_q[j]),
                         widened[j].eq(Mux(lanes[j], wid.result, 0))]
        # The widened word, registered (`wv`: it holds a beat): the widening's carry chains
        # and the route to the engine's beat register are in different cycles (the board's
        # critical path at 68 MHz was raw_q -> Fp32Widen -> out_a).
        wide_q = Signal(data.ArrayLayout(32, n))
        wv = Signal()
        s0 = srcs[0]
        # The engine's beat is registers only (`ov`: it holds one): neither the state nor the
        # widening lies between a register and the engine's intake.
        out_a, out_b = Signal(data.ArrayLayout(32, n)), Signal(data.ArrayLayout(32, n))
        ov = Signal()
        m.d.comb += [self.act_i.valid.eq(ov), self.act_i.payload.a.eq(out_a),
                     self.act_i.payload.b.eq(out_b)]

        # One operand a beat: a stream of SBUF reads (through a buffer) or PSUM drain
        # requests, into raw_q (`iv`: it holds a beat), widened into wide_q (`wv`), then the
        # beat's registers; the three move together (`adv`).
        iv = Signal()
        adv = ~ov | self.act_i.ready  # the beat's registers take a beat
        with m.If((state == S.RUN) & adv):
            m.d.sync += [wide_q.eq(widened), wv.eq(iv), out_a.eq(wide_q), out_b.eq(0),
                         ov.eq(wv)]
        buf = m.submodules.read_buffer = ReadBuffer(self.rd_data.shape())
        m.d.comb += buf.data.eq(self.rd_data)
        with m.If((state == S.RUN) & s0["sbuf"]):
            m.d.comb += [self.rd_en.eq(buf.room & reading), buf.issue.eq(self.rd_en),
                         self.rd_addr.eq(run_addr), buf.out.ready.eq(adv)]
            with m.If(self.rd_en):
                m.d.sync += next_beat
            with m.If(adv):
                m.d.sync += [iv.eq(buf.out.valid), raw_q.eq(buf.out.payload),
                             src_dtype.eq(s0["dtype"])]
        # PSUM rows through a buffer too. Design note: the drain port's responses are taken
        # in every state (one comes only to a request of ours, in a state that waits for it),
        # so the port answers DRAIN_LATENCY cycles after each request and is always ready:
        # neither the engine's `ready` nor our state reaches the drain port and back.
        m.d.comb += self.drain_resp.ready.eq(1)
        pbuf = m.submodules.drain_buffer = ReadBuffer(self.drain_resp.payload.shape(),
                                                      latency=DRAIN_LATENCY)
        m.d.comb += pbuf.data.eq(self.drain_resp.payload)
        with m.If((state == S.RUN) & ~s0["sbuf"]):
            m.d.comb += [self.drain_req.valid.eq(pbuf.room & reading),
                         self.drain_req.payload.bank.eq(s0["bank"]),
                         self.drain_req.payload.addr.eq(run_addr),
                         pbuf.issue.eq(self.drain_req.valid & self.drain_req.ready),
                         pbuf.out.ready.eq(adv)]
            with m.If(adv):
                m.d.sync += [iv.eq(pbuf.out.valid), raw_q.eq(pbuf.out.payload),
                             src_dtype.eq(s0["dtype"])]
            with m.If(pbuf.issue):
                m.d.sync += next_beat

        # TENSOR_TENSOR: in0's column, in1's (each requested, then in raw_q, then widened into
        # wide_q), then the beat: in0's column goes to out_a while in1's is fetched (out_a is
        # free: no beat is offered meanwhile), in1's to out_b in TT_PAIR.
        for i, (req, got, wide, nxt) in enumerate(
                ((S.TT_REQ0, S.TT_GOT0, S.TT_WID0, S.TT_REQ1),
                 (S.TT_REQ1, S.TT_GOT1, S.TT_WID1, S.TT_PAIR))):
            src = srcs[i]
            with m.If(state == req):
                with m.If(src["sbuf"]):
                    m.d.comb += [self.rd_en.eq(1), self.rd_addr.eq(src["addr"] + idx)]
                    m.d.sync += state.eq(got)
                with m.Else():
                    m.d.comb += [self.drain_req.valid.eq(1),
                                 self.drain_req.payload.bank.eq(src["bank"]),
                                 self.drain_req.payload.addr.eq(src["addr"] + idx)]
                    with m.If(self.drain_req.ready):
                        m.d.sync += state.eq(got)
            with m.If(state == got):
                with m.If(src["sbuf"]):
                    with m.If(arrived):
                        m.d.sync += [raw_q.eq(self.rd_data), src_dtype.eq(src["dtype"]),
                                     state.eq(wide)]
                with m.Else():
                    with m.If(self.drain_resp.valid):
                        m.d.sync += [raw_q.eq(self.drain_resp.payload),
                                     src_dtype.eq(src["dtype"]), state.eq(wide)]
            with m.If(state == wide):
                m.d.sync += [wide_q.eq(widened), state.eq(nxt)]
        with m.If(state == S.TT_REQ1):
            m.d.sync += out_a.eq(wide_q)  # in0's column (wide_q holds it in TT_REQ1)
        with m.If(state == S.TT_PAIR):  # the beat: in0's column and in1's
            m.d.sync += [out_b.eq(wide_q), ov.eq(1), state.eq(S.TT_SEND)]
        with m.If(state == S.TT_SEND):
            with m.If(self.act_i.ready):
                m.d.sync += [ov.eq(0), *next_beat,  # (run_addr: not a TENSOR_TENSOR's)
                             state.eq(Mux(idx + 1 == cols, S.RUN, S.TT_REQ0))]

        # Outputs: written as they come (nothing else writes the SBUF meanwhile).
        m.d.comb += self.act_o.ready.eq(1)
        with m.If(~transpose):
            m.d.comb += self.wr_addr.eq(dst_addr)
            for j in range(n):
                m.d.comb += [self.wr_data[j].eq(self.act_o.payload.data[j]),
                             self.wr_en[j].eq(self.act_o.valid & lanes[j])]
        with m.If(self.act_o.valid):
            m.d.sync += [out_idx.eq(out_idx + 1), dst_addr.eq(dst_addr + 1)]
            with m.If(out_idx + 1 == out_cols):
                m.d.sync += state.eq(S.IDLE)

        # TRANSPOSE: row k = idx of the source, its words out_idx .. out_idx + W - 1. Whether
        # the window is its row's last and the row the last are registered as it is read
        # (out_idx and idx hold until it is written): no sum and compare before the state.
        last_window, last_row = Signal(), Signal()
        with m.If(state == S.TR_READ):
            m.d.comb += [self.rd_en.eq(1), self.rd_part.eq(part + idx),
                         self.rd_addr.eq(s0["addr"] + out_idx)]
            m.d.sync += [state.eq(S.TR_HOLD), last_window.eq(out_idx + W >= cols),
                         last_row.eq(idx + 1 == rows)]
        tr_window = Signal(data.ArrayLayout(32, W))  # (registered as it leaves the block RAMs)
        # Word dst_addr + k of partition dst_part + out_idx + i takes window word i: which
        # partitions write, and which window word each takes, are worked out as the window
        # is registered (registers: no sum or compare lies before the SBUF's write port).
        base = tr_dst_part + out_idx
        tr_wen = Signal(n)
        tr_sel = [Signal(range(max(W, 2)), name=f"tr_sel{p}") for p in range(n)]
        with m.If((state == S.TR_HOLD) & arrived):
            m.d.sync += [tr_window.eq(self.rd_window), state.eq(S.TR_WRITE)]
            for p in range(n):
                rel = Signal(range(-n - (1 << 16), n + 1), name=f"tr_rel{p}")
                m.d.comb += rel.eq(p - base)
                m.d.sync += [tr_sel[p].eq(rel[:max(W.bit_length() - 1, 1)]),
                             tr_wen[p].eq((rel >= 0) & (rel < W) & (p < tr_dst_part + cols))]
        with m.If(state == S.TR_WRITE):
            m.d.comb += self.wr_addr.eq(dst_addr)
            window = Array(tr_window[i] for i in range(W))
            for p in range(n):
                m.d.comb += [self.wr_data[p].eq(window[tr_sel[p]]),
                             self.wr_en[p].eq(tr_wen[p])]
            m.d.sync += [out_idx.eq(Mux(last_window, 0, out_idx + W)),
                         idx.eq(idx + last_window), dst_addr.eq(dst_addr + last_window)]
            with m.If(last_window & last_row):
                m.d.sync += state.eq(S.IDLE)
            with m.Else():
                m.d.sync += state.eq(S.TR_READ)
        return m


class _Sbuf(wiring.Component):
    """The SBUF: ``n`` partitions of ``words`` 32-bit words, each partition in ``lanes``
    memories (word w in lane w mod lanes, row w // lanes), so that any ``lanes`` consecutive
    words of a partition are read or written in one cycle: the DMA moves a whole AXI beat a
    cycle (``lanes`` = the beat's bytes, the most elements it holds).

    Read ports (one address each) are a pipeline of three stages that never stalls: ``en``
    and ``addr`` are registered (stage 0, each lane's row computed), the block RAMs read those
    rows into their output registers (stage 1, held while no read is registered), and the
    port's data registers take those words in every cycle (stage 2). So a read's words are in
    ``data`` three cycles after its ``en`` (:data:`SBUF_READ_LATENCY`), until the next read's
    arrive. A reader whose stream may stall catches them in a
    :class:`~hdl.read_port.ReadBuffer`. Reads are not transparent to writes.

    * ``rd0`` (the tensor feeder) and ``rd1`` (DMA stores, ACTIVATE and the vector commands,
      debug reads): ``data``, word ``addr`` of every partition, and ``window``, words
      ``addr .. addr + window − 1`` of partition ``part`` (those past the end undefined);
      ``window`` words: ``windows[0]`` and ``windows[1]`` (0: none); ``rd0.rows`` (with
      ``rows0``), words ``addr .. addr + rows0 − 1`` of every partition.
    * With ``fast``, both ports also give ``data_fast``: while the port's ``fast`` is high,
      ``en`` and ``addr`` go to the block RAMs directly and ``data_fast`` has the words a
      cycle after ``en`` (a COLLECTIVE's reads, whose engine has a one-cycle read contract).
    * ``wr`` (ACTIVATE, a COLLECTIVE): word ``addr`` of the partitions ``en`` selects.
    * ``wwin`` (DMA loads): with ``en``, words ``addr .. addr + count − 1`` of partition
      ``part`` from ``data[0 .. count − 1]``. Never in the same cycle as ``wr``.

    Design note: the block RAMs' words are registered before any lane is selected because
    their clock-to-output alone is 5.6 ns on the ECP5 (Yosys does not use the DP16KD's output
    register): the selection and a reader's logic after it would not fit 10 ns. The address
    is registered too: the choice of reader, its address sum and the lanes' row sums before
    a block RAM's address did not fit either. No reader's ``ready`` may reach the block RAMs'
    clock enables (16 of them at the report's size): with a stall input there (``hold``, in
    an earlier design) that net alone took 13 ns of routing.
    """

    def __init__(self, *, n, words, lanes, windows, rows0=0, fast=False):
        self._n, self._words, self._lanes, self._windows = n, words, lanes, windows
        self._rows0, self._fast = rows0, fast
        row = data.ArrayLayout(32, n)
        addr = range(max(words, 2))

        def read_port(window, rows=0):
            members = {"en": In(1), "addr": In(addr),
                       "part": In(range(max(n, 2))), "data": Out(row)}
            if fast:
                members.update({"fast": In(1), "data_fast": Out(row)})
            if window:
                members["window"] = Out(data.ArrayLayout(32, window))
            if rows:
                members["rows"] = Out(data.ArrayLayout(data.ArrayLayout(32, rows), n))
            return In(wiring.Signature(members))

        super().__init__({
            "rd0": read_port(windows[0], rows0), "rd1": read_port(windows[1]),
            "wr": In(memory.WritePort.Signature(addr_width=Shape.cast(addr).width, shape=row,
                                                granularity=1)),
            "wwin": In(wiring.Signature({"en": In(1), "part": In(range(max(n, 2))),
                                         "addr": In(addr), "count": In(range(lanes + 1)),
                                         "data": In(data.ArrayLayout(32, lanes))})),
        })

    def elaborate(self, platform):
        m = Module()
        n, L = self._n, self._lanes
        lg = L.bit_length() - 1
        depth = -(-self._words // L)

        def split(addr):
            """(lane of word addr, the row of the window's word in each lane)."""
            if L == 1:
                return Const(0, 1), [addr]
            lo, hi = addr[:lg], addr[lg:]
            return lo, [hi + (lo > lane) for lane in range(L)]

        # The window's lanes and rows, and the word port's lane (its row is the address's high
        # bits): each port's own, so that neither's address reaches the other's data.
        lo_w, rows_w = split(self.wwin.addr)
        lo_wr = self.wr.addr[:lg] if L > 1 else Const(0, 1)
        row_wr = self.wr.addr[lg:] if L > 1 else self.wr.addr
        # The window's data rotated into lanes: lane l takes element (l - lo) mod L.
        rel = [Signal(range(L), name=f"wwin_rel{lane}") for lane in range(L)]
        rotated = [Signal(32, name=f"wwin_data{lane}") for lane in range(L)]
        elements = Array(self.wwin.data[i] for i in range(L))
        for lane in range(L):
            m.d.comb += [rel[lane].eq(lane - lo_w), rotated[lane].eq(elements[rel[lane]])]
        mems = [[memory.Memory(shape=32, depth=depth, init=[]) for _ in range(L)]
                for _ in range(n)]
        for p in range(n):
            for lane in range(L):
                mem = m.submodules[f"part{p}_lane{lane}"] = mems[p][lane]
                w = mem.write_port()
                win_en = (self.wwin.en & (self.wwin.part == p)
                          & (rel[lane] < self.wwin.count))
                m.d.comb += [
                    w.addr.eq(Mux(self.wwin.en, rows_w[lane], row_wr)),
                    w.en.eq(win_en | (~self.wwin.en & self.wr.en[p] & (lo_wr == lane))),
                    w.data.eq(Mux(self.wwin.en, rotated[lane], self.wr.data[p])),
                ]
        for name, window in zip(("rd0", "rd1"), self._windows, strict=True):
            port = getattr(self, name)
            lo, rows = split(port.addr)
            # Stage 0: the read, its lanes' rows computed and registered.
            en_a, lo_a, part_a = Signal(), Signal.like(lo), Signal.like(port.part)
            rows_a = [Signal.like(r, name=f"{name}_row{lane}") for lane, r in enumerate(rows)]
            m.d.sync += [en_a.eq(port.en), lo_a.eq(lo), part_a.eq(port.part),
                         *(a.eq(r) for a, r in zip(rows_a, rows, strict=True))]
            read, rd_rows, rd_lo, rd_part = en_a, rows_a, lo_a, part_a
            if self._fast:  # a COLLECTIVE's reads skip stage 0
                read = Mux(port.fast, port.en, en_a)
                rd_rows = [Mux(port.fast, r, a) for r, a in zip(rows, rows_a, strict=True)]
                rd_lo, rd_part = Mux(port.fast, lo, lo_a), Mux(port.fast, port.part, part_a)
            lo_q, part_q = Signal.like(lo), Signal.like(port.part)  # stage 1's
            lo_qq, part_qq = Signal.like(lo), Signal.like(port.part)  # stage 2's
            with m.If(read):
                m.d.sync += [lo_q.eq(rd_lo), part_q.eq(rd_part)]
            raw = [[None] * L for _ in range(n)]  # stage 1: the block RAMs' words
            raw_q = [[Signal(32, name=f"{name}_p{p}_l{lane}") for lane in range(L)]
                     for p in range(n)]  # stage 2
            for p in range(n):
                for lane in range(L):
                    r = mems[p][lane].read_port(transparent_for=())
                    m.d.comb += [r.en.eq(read_enable(read)), r.addr.eq(rd_rows[lane])]
                    raw[p][lane] = r.data
            m.d.sync += [lo_qq.eq(lo_q), part_qq.eq(part_q)]
            m.d.sync += [raw_q[p][lane].eq(raw[p][lane]) for p in range(n) for lane in range(L)]
            for p in range(n):
                m.d.comb += port.data[p].eq(Array(raw_q[p])[lo_qq])
                if self._fast:
                    m.d.comb += port.data_fast[p].eq(Array(raw[p])[lo_q])
            if port is self.rd0 and self._rows0:  # words addr .. of every partition
                for p in range(n):
                    for i in range(self._rows0):
                        lane = (lo_qq + i)[:lg] if L > 1 else 0
                        m.d.comb += port.rows[p][i].eq(Array(raw_q[p])[lane])
            if window:
                part_lanes = [Array(raw_q[p][lane] for p in range(n))[part_qq]
                              for lane in range(L)]
                for i in range(window):
                    lane = (lo_qq + i)[:lg] if L > 1 else 0
                    m.d.comb += port.window[i].eq(Array(part_lanes)[lane])
        return m


class _DebugReader(wiring.Component):
    """Answers the command queue's debug reads (a DBG_ADDR write, ``req``) with one SBUF or
    PSUM word (``resp``), through the SBUF's shared read port and the PSUM drain port.

    ``hold`` stops the sequencer from starting another user of those ports: it is up from the
    cycle after a request arrives until the cycle after the read's answer is taken. A read
    starts only while ``port_free`` (no other user of those ports runs or is about to) and
    ``hold`` is up. An SBUF read is issued the cycle after the request is taken, from
    registers. A read that has waited
    :data:`DEBUG_TIMEOUT` cycles for the ports answers 0 and sets ``timeout`` (sticky until
    ``clear_error``), so that the register bus is never stuck. Fields of ``req``:
    ``hdl.cmdqueue.DEBUG_ADDR_FIELDS``; a word outside the memories reads 0.
    """

    def __init__(self, *, n, words, psum_banks, psum_words):
        self._n, self._words = n, words
        self._banks, self._psum_words = psum_banks, psum_words
        super().__init__({
            "req": In(stream.Signature(32)),
            "resp": Out(stream.Signature(32)),
            "port_free": In(1),
            "hold": Out(1),
            "clear_error": In(1),
            "timeout": Out(1),
            "sbuf_rd_en": Out(1),
            "sbuf_rd_addr": Out(range(max(words, 2))),
            "sbuf_rd_data": In(data.ArrayLayout(32, n)),
            "drain_req": Out(stream.Signature(drain_request_layout(psum_banks, psum_words))),
            "drain_resp": In(stream.Signature(data.ArrayLayout(32, n))),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._n
        req = self.req.payload
        fld = {k: req[o:o + w] for k, (o, w) in DEBUG_ADDR_FIELDS.items()}
        part = Signal(8)
        word = Signal(32)  # the answer
        waited = Signal(range(DEBUG_TIMEOUT + 1))
        with m.If(self.clear_error):
            m.d.sync += self.timeout.eq(0)
        m.d.comb += self.resp.payload.eq(word)
        # The SBUF read's word is on the port SBUF_READ_LATENCY cycles after its enable.
        arrived = delay(m, self.sbuf_rd_en, SBUF_READ_LATENCY, name="sbuf_arrived")
        rd_word = Signal(range(max(self._words, 2)))  # the SBUF word to read
        # A PSUM word comes only in PSUM_WAIT (to our request): the response is always taken,
        # so that no state reaches the drain port's `ready` and back.
        m.d.comb += self.drain_resp.ready.eq(1)
        with m.FSM() as fsm:
            with m.State("IDLE"):
                # Design note: `hold` is a register (it reaches every dispatch decision: a
                # timing path), so the sequencer sees a request a cycle late; a command it
                # dispatches in that cycle is seen by `port_free` in the next, so a read
                # starts only once `hold` is up.
                free = self.port_free & self.hold
                with m.If(self.req.valid & ~free):
                    m.d.sync += waited.eq(waited + 1)
                    with m.If(waited == DEBUG_TIMEOUT):
                        m.d.comb += self.req.ready.eq(1)
                        m.d.sync += [word.eq(0), self.timeout.eq(1), waited.eq(0)]
                        m.next = "RESPOND"
                with m.If(self.req.valid & free):
                    m.d.comb += self.req.ready.eq(1)
                    m.d.sync += [part.eq(fld["part"]), word.eq(0), waited.eq(0)]
                    m.next = "RESPOND"
                    in_part = fld["part"] < n
                    with m.If(~fld["space"] & in_part & (fld["word"] < self._words)):
                        m.d.sync += rd_word.eq(fld["word"])
                        m.next = "SBUF_READ"
                    with m.If(fld["space"] & in_part & (fld["bank"] < self._banks)
                              & (fld["word"] < self._psum_words)):
                        m.d.sync += [self.drain_req.payload.bank.eq(fld["bank"]),
                                     self.drain_req.payload.addr.eq(fld["word"])]
                        m.next = "PSUM_REQUEST"
            with m.State("SBUF_READ"):  # (from registers: no compare reaches the address)
                m.d.comb += [self.sbuf_rd_en.eq(1), self.sbuf_rd_addr.eq(rd_word)]
                m.next = "SBUF"
            with m.State("SBUF"):
                with m.If(arrived):
                    m.d.sync += word.eq(Array(self.sbuf_rd_data[p] for p in range(n))[part])
                    m.next = "RESPOND"
            with m.State("PSUM_REQUEST"):
                m.d.comb += self.drain_req.valid.eq(1)
                with m.If(self.drain_req.ready):
                    m.next = "PSUM_WAIT"
            with m.State("PSUM_WAIT"):
                with m.If(self.drain_resp.valid):
                    m.d.sync += word.eq(Array(self.drain_resp.payload[p]
                                              for p in range(n))[part])
                    m.next = "RESPOND"
            with m.State("RESPOND"):
                m.d.comb += self.resp.valid.eq(1)
                with m.If(self.resp.ready):
                    m.next = "IDLE"
        m.d.sync += self.hold.eq(self.req.valid | ~fsm.ongoing("IDLE"))
        return m


class NeuronCore(wiring.Component):
    """One NeuronCore: an AXI4-Lite slave for the host, an AXI4 master to DRAM.

    Inside (docs/contract.md §1): the :class:`~hdl.cmdqueue.CommandQueue` (registers, see
    ``hdl.cmdqueue.REGISTERS``), the :class:`~hdl.sequencer.Sequencer`, the SBUF (``n``
    partitions of ``sbuf_words`` 32-bit words, each partition ``data_width / 8`` lane
    memories with two read ports and a write port), the
    :class:`~hdl.tensor_engine.TensorEngine` with its PSUM (``psum_banks`` x
    ``psum_words``), the :class:`~hdl.activation.ActivationEngine` and the
    :class:`~hdl.dma.DmaEngine`. Programs give the same bits in every memory as
    ``golden.iss.NeuronCoreISS`` with :meth:`iss_config`.

    SBUF ports: the first read port belongs to the tensor feeder (LOAD_STATIONARY, MATMUL);
    the second is shared by DMA stores (a window of a beat's words), ACTIVATE's SBUF source
    and bias, and debug reads; the lane memories' write port by DMA loads (a window) and
    ACTIVATE's results (a word of each partition). The sequencer never lets two users of a
    shared port run at once, so the DMA of one tile overlaps the tensor engine's work on
    another, and an ACTIVATE overlaps the next MATMULs.

    Soft reset (CTRL bit 0): the queue empties; the sequencer stops at once; when the DMA has
    no AXI transaction in flight (AXI has no abort), the sequencer, the engines and the
    performance counters are reset (error cleared, EXECUTED 0, no stationary tile, the PRNG
    lanes reseeded with 0). Memories keep their contents. Descriptors pushed meanwhile stay in
    the queue. Debug reads (DBG_ADDR / DBG_DATA) give any SBUF or PSUM word; they wait until
    no DMA, ACTIVATE or COLLECTIVE uses the port, at most :data:`DEBUG_TIMEOUT` cycles (then
    the word reads 0 and STATUS bit 4 is set until CTRL clears the error).

    Errors while a command runs (``ErrorCode`` 7 and 8, ``hdl.sequencer.Sequencer``): DRAM
    answering a DMA burst with SLVERR or DECERR sets BUS_ERROR (the DMA command still runs to
    its end, a load writing what R returned); the collective engine's link watchdog
    abandoning a COLLECTIVE (a core of the ring never joined it: no beat on either link for
    ``watchdog_cycles``) sets LINK_TIMEOUT, the core idle again. Either stops the queue like a
    check error, with the index of the failing command; CTRL clears it (or soft-resets) and
    the core works on. In a ring, ``tx_flush`` (one cycle) tells the outgoing link to drop
    the beats of the abandoned collective (``hdl.multicore.CoreRing`` wires it); a soft reset
    during a COLLECTIVE abandons it the same way and pulses ``tx_flush`` too, and ``rx_flush``,
    which tells the incoming link to drop what it holds (a neighbour that had finished the
    collective never times out, so nothing else would remove its beats).

    Parameters
    ----------
    n : int
        SBUF partitions, the tensor engine's array size and the activation lanes, 1 to 64
        (default 4).
    sbuf_words : int
        32-bit words per SBUF partition, 1 to 2^16 (default 64).
    psum_banks : int
        PSUM banks, 1 to 16 (default 4).
    psum_words : int
        fp32 words per PSUM bank and partition, 1 to 2^16 (default 16).
    dram_bytes : int
        The DRAM the range checks allow, 1 to 2^32 (default 2^16).
    queue_depth : int
        Descriptors the command queue holds, 1 to 256 (default 8).
    te_mul_stages, te_add_stages : int
        The PEs' pipeline depths, 0 to :data:`~hdl.fp_mul.FP_MUL_MAX_CUTS` and 0 to
        :data:`~hdl.fp32_add.FP32_ADD_MAX_STAGES` (default: :class:`~hdl.pe.PE`'s, 5 and 6).
    random_bits : int
        The SRU's random bits per SR decision, 1 to 32 (default 16).
    max_burst : int
        The DMA's longest AXI burst, 1 to 256 beats (default 16).
    ranks : int
        0 (default): no ring; else the cores of the ring, 2 to 64.
    torus_rows : int
        R: the ring's cores form an R × (ranks / R) torus (default 1: a ring). The core then
        holds a :class:`~hdl.torus.TorusNode` (a row and a column collective engine) and has
        the column's links too (``col_tx``, ``col_rx``, ``col_tx_flush``, ``col_rx_flush``);
        a COLLECTIVE's ``dim`` picks the ring (``golden.isa.CollectiveDim``).
    link_width : int
        fp32 words per ring beat (default 1): 1 to ``n``, and in a ring one of 1, 2 or 4.
    watchdog_cycles : int
        The collective engine's link watchdog (:class:`~hdl.collective.CollectiveEngine`): 0
        for none, or 16 to 2^30 cycles.
    data_width : int
        The AXI4 master's data bus, 32, 64, 128 or 256 bits (default 32): the DMA moves a
        beat (``data_width / 8`` bytes) a cycle, and each SBUF partition is that many
        memories wide (:class:`~hdl.dma.DmaEngine`).
    vector_engine : bool
        Whether the activation engine also runs the vector commands (TENSOR_TENSOR,
        TENSOR_SCALAR, TENSOR_REDUCE, TRANSPOSE; default ``True``): without them, they are
        BAD_OPCODE (the sequencer rejects them; a core built so is ISS-equal with
        ``golden.iss.CoreConfig(vector_engine=False)``).
    sparse : bool
        Whether the tensor engine has the sparse mode, every pattern of ``golden.isa.Sparsity``
        (default ``False``: a LOAD_STATIONARY's sparsity other than dense is BAD_FIELD).
        After a sparse LOAD_STATIONARY the sequencer dispatches nothing until the tile has
        loaded and its tags are checked (BAD_TAGS otherwise).

    Raises
    ------
    TypeError
        If a parameter is not an integer (``vector_engine``: not a bool).
    ValueError
        If a parameter is out of range.
    """

    def __init__(self, *, n: int = 4, sbuf_words: int = 64, psum_banks: int = 4,
                 psum_words: int = 16, dram_bytes: int = 1 << 16, queue_depth: int = 8,
                 te_mul_stages: int = DEFAULT_MUL_STAGES,
                 te_add_stages: int = DEFAULT_ADD_STAGES, random_bits: int = 16,
                 max_burst: int = 16, ranks: int = 0, link_width: int = 1,
                 watchdog_cycles: int = DEFAULT_WATCHDOG_CYCLES, data_width: int = 32,
                 vector_engine: bool = True, sparse: bool = False, torus_rows: int = 1):
        check_core_sizes(n=n, sbuf_words=sbuf_words, psum_banks=psum_banks,
                         psum_words=psum_words, dram_bytes=dram_bytes)
        self.n, self.sbuf_words, self.psum_banks = n, sbuf_words, psum_banks
        self.psum_words, self.dram_bytes = psum_words, dram_bytes
        self.random_bits = random_bits
        self.queue_depth = check_int("queue_depth", queue_depth, lo=1, hi=256)
        check_int("te_mul_stages", te_mul_stages, lo=0, hi=FP_MUL_MAX_CUTS)
        check_int("te_add_stages", te_add_stages, lo=0, hi=FP32_ADD_MAX_STAGES)
        check_int("ranks", ranks, lo=2, hi=MAX_RANKS, also=(0,), note="(0: no ring)")
        self.ranks, self.link_width = ranks, link_width
        self.torus_rows = check_torus_rows(torus_rows, ranks)
        self.watchdog_cycles = check_watchdog(watchdog_cycles)
        self._cq = CommandQueue(depth=queue_depth, perf_counters=len(PERF_COUNTERS))
        self._seq = Sequencer(n=n, sbuf_words=sbuf_words, psum_banks=psum_banks,
                              psum_words=psum_words, dram_bytes=dram_bytes, ring=ranks != 0,
                              ranks=max(ranks, 2), torus_rows=torus_rows,
                              link_width=link_width, vector_engine=vector_engine,
                              sparse=sparse)
        self.vector_engine, self.sparse = vector_engine, sparse
        self._coll = None
        self.data_width = check_data_width(data_width)
        # A sparse MATMUL's beat reads MAX_RATIO consecutive words of a partition: one lane
        # memory each, and every data width gives at least that many (32 bits: 4).
        assert self.data_width // 8 >= MAX_RATIO
        ports = {"axil": Out(AxiLiteSignature()), "axi": Out(AxiSignature(data_width=data_width)),
                 # STATUS bits 0 and 1 as wires, for a board's LEDs or an interrupt line.
                 "busy": Out(1), "error": Out(1),
                 # The engines' busy wires and the dispatch count, for a profile
                 # (hdl.activity.ActivityRecorder).
                 "activity": Out(ActivityLayout())}
        if ranks:
            common = {"link_width": link_width, "depth": sbuf_words,
                      "watchdog_cycles": watchdog_cycles}
            if torus_rows > 1:
                self._coll = TorusNode(rows=torus_rows, cols=ranks // torus_rows, **common)
            else:
                self._coll = CollectiveEngine(ranks=ranks, **common)
            links = self._coll.signature.members
            ports.update({"rank": In(range(ranks)), "tx": links["tx"], "rx": links["rx"],
                          "tx_flush": Out(1), "rx_flush": Out(1)})
            if torus_rows > 1:
                ports.update({"col_tx": links["col_tx"], "col_rx": links["col_rx"],
                              "col_tx_flush": Out(1), "col_rx_flush": Out(1)})
        self._te = TensorEngine(n=n, psum_banks=psum_banks, psum_words=psum_words,
                                mul_stages=te_mul_stages, add_stages=te_add_stages,
                                sparsity=tuple(SPARSITY_CODES) if sparse else ())
        self._act = ActivationEngine(lanes=n, random_bits=random_bits)
        self._dma = DmaEngine(n=n, words=sbuf_words, max_burst=max_burst, data_width=data_width)
        super().__init__(ports)

    def iss_config(self, **kwargs):
        """The ``golden.iss.CoreConfig`` of this core (``kwargs`` override, e.g. link_width)."""
        from golden.iss import CoreConfig

        return CoreConfig(n=self.n, sbuf_words=self.sbuf_words, psum_banks=self.psum_banks,
                          psum_words=self.psum_words, dram_bytes=self.dram_bytes,
                          random_bits=self.random_bits, link_width=self.link_width,
                          data_width=self.data_width, vector_engine=self.vector_engine,
                          sparse=self.sparse, ranks=self.ranks, torus_rows=self.torus_rows,
                          **kwargs)

    def elaborate(self, platform):
        m = Module()
        n, words = self.n, self.sbuf_words
        cq = m.submodules.cq = self._cq
        wiring.connect(m, wiring.flipped(self.axil), cq.axil)

        # Soft reset: hold the sequencer at once, reset the rest once no AXI burst is open.
        soft = Signal()
        dma = self._dma
        eng_rst = Signal()
        m.d.comb += eng_rst.eq(soft & ~dma.busy)
        with m.If(cq.soft_reset):
            m.d.sync += soft.eq(1)
        with m.Elif(eng_rst):
            m.d.sync += soft.eq(0)

        def reset_by(sig, sub):
            return ResetInserter(sig)(sub)

        seq = self._seq
        te, act = self._te, self._act
        # The tensor feeder reads a stationary row a cycle where the SBUF's window holds one.
        rows = n <= dma.lanes
        tf = _TensorFeeder(n=n, words=words, te_cmd_layout=te.cmd_layout, rows=rows,
                           sparse=self.sparse)
        _, o_layout = sru_layouts(n, act.targets)
        af = _ActivationFeeder(n=n, words=words, banks=self.psum_banks,
                               psum_words=self.psum_words, o_layout=o_layout,
                               window=dma.lanes)
        m.submodules.seq = reset_by(soft, seq)
        m.submodules.te = reset_by(eng_rst, te)
        m.submodules.act = reset_by(eng_rst, act)
        m.submodules.dma = reset_by(eng_rst, dma)
        m.submodules.tfeed = reset_by(eng_rst, tf)
        m.submodules.afeed = reset_by(eng_rst, af)
        wiring.connect(m, wiring.flipped(self.axi), dma.axi)

        # Queue -> sequencer -> engines.
        # While a soft reset is pending the sequencer is held in reset: the queue keeps what
        # the host pushes meanwhile for after it.
        m.d.comb += [seq.desc.valid.eq(cq.desc.valid & ~soft), seq.desc.payload.eq(cq.desc.payload),
                     cq.desc.ready.eq(seq.desc.ready & ~soft)]
        wiring.connect(m, seq.dma, dma.cmd)
        wiring.connect(m, seq.te, tf.cmd)
        wiring.connect(m, seq.act, af.cmd)
        wiring.connect(m, seq.seed, act.seed)
        wiring.connect(m, tf.te_cmd, te.cmd)
        wiring.connect(m, tf.weights, te.weights)
        wiring.connect(m, tf.moving, te.moving)
        m.d.comb += tf.te_loading_ready.eq(te.loading_ready)
        wiring.connect(m, af.act_cmd, act.cmd)
        wiring.connect(m, af.act_i, act.i)
        wiring.connect(m, act.o, af.act_o)
        m.d.comb += [seq.dma_busy.eq(dma.busy), seq.te_feed_busy.eq(tf.busy),
                     seq.te_busy.eq(te.busy), seq.te_done.eq(te.done),
                     seq.te_done_bank.eq(te.done_bank), seq.act_busy.eq(af.busy),
                     seq.dma_error.eq(dma.error), seq.clear_error.eq(cq.clear_error),
                     seq.te_loading.eq(te.loading), seq.te_tags_bad.eq(te.tags_bad)]
        m.d.comb += [cq.busy.eq(seq.busy | soft | act.seeding), cq.error_code.eq(seq.error_code),
                     cq.error_index.eq(seq.error_index), cq.executed.eq(seq.executed)]
        m.d.comb += [self.busy.eq(cq.busy), self.error.eq(seq.error_code.as_value() != 0)]

        # --- The collective engine (a core in a ring): word columns of W partitions. ----------
        W = self.link_width
        coll_part = Signal(8)  # the running COLLECTIVE's first partition
        coll_rd0 = Signal(data.ArrayLayout(32, n))  # the SBUF words its two reads address
        coll_rd1 = Signal(data.ArrayLayout(32, n))
        coll_wen = Signal(n)
        coll_wdata = Signal(data.ArrayLayout(32, n))
        coll = self._coll
        if coll is None:
            m.d.comb += [seq.coll.ready.eq(1), seq.coll_busy.eq(0)]
            coll_busy = 0
        else:
            m.submodules.coll = reset_by(eng_rst, coll)
            cd = data.View(DESCRIPTOR_LAYOUTS[Opcode.COLLECTIVE], seq.coll.payload)
            row_busy = coll.row_busy if self.torus_rows > 1 else coll.busy
            m.d.comb += [coll.rank.eq(self.rank), coll.cmd.valid.eq(seq.coll.valid),
                         seq.coll.ready.eq(coll.cmd.ready),
                         coll.cmd.payload.op.as_value().eq(cd.coll_op.as_value()),
                         coll.cmd.payload.addr.eq(cd.sbuf_addr),
                         coll.cmd.payload.words.eq(cd.cols * W),
                         coll.cmd.payload.dst.eq(cd.dst_addr),
                         coll.cmd.payload.shift.eq(cd.shift),
                         *([coll.cmd.payload.dim.eq(cd.dim)] if self.torus_rows > 1 else []),
                         seq.coll_busy.eq(coll.busy), seq.coll_timeout.eq(coll.timeout),
                         # A soft reset abandons a running collective as the watchdog does:
                         # the link drops its beats too (none may reach a later collective).
                         self.tx_flush.eq(coll.tx_flush | (eng_rst & row_busy)),
                         # ... and its incoming link too: a neighbour that finished the
                         # collective never times out, so it would never flush what it sent
                         # (found by review: the next collective took those beats).
                         self.rx_flush.eq(eng_rst & row_busy)]
            with m.If(seq.coll.valid & seq.coll.ready):
                m.d.sync += coll_part.eq(cd.part)
            wiring.connect(m, coll.tx, wiring.flipped(self.tx))
            wiring.connect(m, wiring.flipped(self.rx), coll.rx)
            if self.torus_rows > 1:  # the column's links, flushed alike
                # (only the links of the engine that runs: the other dimension's may hold a
                # neighbour's beats of a collective this core has finished, or of the next)
                wiring.connect(m, coll.col_tx, wiring.flipped(self.col_tx))
                wiring.connect(m, wiring.flipped(self.col_rx), coll.col_rx)
                m.d.comb += [self.col_tx_flush.eq(coll.col_tx_flush | (eng_rst & coll.col_busy)),
                             self.col_rx_flush.eq(eng_rst & coll.col_busy)]
            rot0 = _rotate(m, coll_rd0, coll_part, n, "coll_rot0")
            rot1 = _rotate(m, coll_rd1, coll_part, n, "coll_rot1")
            for j in range(W):
                m.d.comb += [coll.tx_rd.data[j].eq(rot0[j]), coll.rx_rd.data[j].eq(rot1[j])]
            with m.Switch(coll_part):
                for q in range(n - W + 1):
                    with m.Case(q):
                        for j in range(W):
                            m.d.comb += [coll_wen[q + j].eq(coll.wr.en[j]),
                                         coll_wdata[q + j].eq(coll.wr.data[j])]
            coll_busy = coll.busy

        # --- SBUF: a memory per partition and lane. ------------------------------------------
        r0_data = Signal(data.ArrayLayout(32, n))
        r1_data = Signal(data.ArrayLayout(32, n))
        r1_en, r1_addr = Signal(), Signal(range(max(words, 2)))
        dbg = m.submodules.debug = _DebugReader(n=n, words=words, psum_banks=self.psum_banks,
                                                psum_words=self.psum_words)
        r0_en, r0_addr = Signal(), Signal(range(max(words, 2)))
        # Port 1's readers never run together (the sequencer runs the DMA and the activation
        # path one at a time, a debug read only while both are idle), so the address is
        # chosen by who is busy, registers, rather than by the read enables, which come
        # through the readers' logic and would lie before the SBUF's address sums.
        m.d.comb += [
            r0_en.eq(tf.rd_en), r0_addr.eq(tf.rd_addr),
            r1_en.eq(dma.sbuf_rd_en | af.rd_en | dbg.sbuf_rd_en),
            r1_addr.eq(Mux(dma.busy, dma.sbuf_rd_addr,
                           Mux(af.busy, af.rd_addr, dbg.sbuf_rd_addr))),
        ]
        if coll is not None:
            # The sequencer runs a COLLECTIVE alone: its reads take both ports.
            with m.If(coll.busy):
                m.d.comb += [r0_en.eq(coll.tx_rd.en), r0_addr.eq(coll.tx_rd.addr),
                             r1_en.eq(coll.rx_rd.en), r1_addr.eq(coll.rx_rd.addr)]
        m.submodules.sbuf = sbuf = _Sbuf(n=n, words=words, lanes=dma.lanes,
                                         windows=(n if rows else 0, dma.lanes),
                                         rows0=MAX_RATIO if self.sparse else 0,
                                         fast=coll is not None)
        if coll is not None:  # (the collective engine's reads take a cycle)
            m.d.comb += [coll_rd0.eq(sbuf.rd0.data_fast), coll_rd1.eq(sbuf.rd1.data_fast),
                         sbuf.rd0.fast.eq(coll.busy), sbuf.rd1.fast.eq(coll.busy)]
        if rows:
            m.d.comb += [sbuf.rd0.part.eq(tf.rd_part), tf.rd_window.eq(sbuf.rd0.window)]
        if self.sparse:
            m.d.comb += tf.rd_rows.eq(sbuf.rd0.rows)
        m.d.comb += [sbuf.rd0.en.eq(r0_en), sbuf.rd0.addr.eq(r0_addr), r0_data.eq(sbuf.rd0.data),
                     sbuf.rd1.en.eq(r1_en), sbuf.rd1.addr.eq(r1_addr),
                     sbuf.rd1.part.eq(Mux(af.busy, af.rd_part, dma.sbuf_rd_part)),
                     r1_data.eq(sbuf.rd1.data), dma.sbuf_rd_data.eq(sbuf.rd1.window),
                     af.rd_window.eq(sbuf.rd1.window)]
        # The word write port: ACTIVATE's results, or a COLLECTIVE's (never both at once).
        for p in range(n):
            m.d.comb += sbuf.wr.en[p].eq(af.wr_en[p] | coll_wen[p])
        m.d.comb += [sbuf.wr.addr.eq(af.wr_addr), sbuf.wr.data.eq(af.wr_data)]
        if coll is not None:
            with m.If(coll.busy):
                m.d.comb += [sbuf.wr.addr.eq(coll.wr.addr), sbuf.wr.data.eq(coll_wdata)]
        # The window write port: DMA loads.
        m.d.comb += [sbuf.wwin.en.eq(dma.sbuf_wr_en), sbuf.wwin.part.eq(dma.sbuf_wr_part),
                     sbuf.wwin.addr.eq(dma.sbuf_wr_addr), sbuf.wwin.count.eq(dma.sbuf_wr_count),
                     sbuf.wwin.data.eq(dma.sbuf_wr_data)]
        m.d.comb += [tf.rd_data.eq(r0_data), af.rd_data.eq(r1_data), dbg.sbuf_rd_data.eq(r1_data)]

        # --- The drain port: the activation feeder's, or a debug read's. ---------------------
        with m.If(af.busy):
            wiring.connect(m, af.drain_req, te.drain_req)
            wiring.connect(m, te.drain_resp, af.drain_resp)
        with m.Else():
            wiring.connect(m, dbg.drain_req, te.drain_req)
            wiring.connect(m, te.drain_resp, dbg.drain_resp)

        # --- Debug reads (the command queue's DBG_ADDR / DBG_DATA). ------------------------
        wiring.connect(m, cq.dbg_req, dbg.req)
        wiring.connect(m, dbg.resp, cq.dbg_resp)
        port_free = ~(seq.dma.valid | dma.busy | seq.act.valid | af.busy | seq.coll.valid
                      | coll_busy)
        m.d.comb += [dbg.port_free.eq(port_free), dbg.clear_error.eq(cq.clear_error),
                     seq.hold.eq(dbg.hold), cq.status_flags.eq(dbg.timeout)]

        # --- Performance counters. -------------------------------------------------------------
        counts = [Signal(32, name=f"perf_{name}") for name in PERF_COUNTERS]
        events = [seq.busy, tf.active | te.busy, af.busy, dma.busy,
                  te.moving.valid & te.moving.ready, coll_busy]
        for cnt, ev, i in zip(counts, events, range(len(counts)), strict=True):
            with m.If(eng_rst):
                m.d.sync += cnt.eq(0)
            with m.Elif(ev):
                m.d.sync += cnt.eq(cnt + 1)
            m.d.comb += cq.perf[i].eq(cnt)
        # The counters' events, as wires: a cycle counted by ``<engine>_busy`` has its bit set.
        busy = {"tensor": events[1], "activation": events[2], "dma": events[3],
                "collective": Const(events[5], 1) if isinstance(events[5], int) else events[5]}
        m.d.comb += [self.activity.busy.eq(Cat(*(busy[e] for e in ACTIVITY_ENGINES))),
                     self.activity.executed.eq(seq.executed)]
        return m
