"""The tensor engine: a systolic array, its controller and the PSUM accumulation buffer."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .formats import Fmt, parse_formats
from .fp32_add import FP32_ADD_MAX_STAGES, Fp32Adder
from .fp_mul import FP_MUL_MAX_CUTS
from .instances import shared
from .isa import Sparsity
from .params import check_int
from .pe import DEFAULT_ADD_STAGES, DEFAULT_MUL_STAGES
from .pipeline import delay
from .sparsity import WEIGHT_LANE, moving_rows, parse_sparsity, slots_of
from .systolic import SystolicArray, check_array_size

__all__ = ["DRAIN_LATENCY", "Opcode", "TensorEngine", "command_layout", "drain_request_layout"]

#: Cycles from a drain request's take to its response on ``drain_resp`` when the response is
#: never held back (the PSUM block RAM's word, then a register).
DRAIN_LATENCY = 2


class Opcode(enum.Enum, shape=1):
    LOAD_STATIONARY = 0
    MULTIPLY_MOVING = 1


def command_layout(n: int, banks: int, bank_words: int, k_max: int | None = None
                   ) -> data.StructLayout:
    """One tensor-engine command (see :class:`TensorEngine`); ``k_max``: a sparse engine's
    largest K (:attr:`TensorEngine.moving_rows`), whose commands have a ``sparsity`` field
    (a dense engine's: None, and none)."""
    sparse = {} if k_max is None else {"sparsity": Sparsity}  # LS: 0 dense, else the pattern
    return data.StructLayout({
        "op": Opcode,
        "fmt": Fmt,  # LS: the stationary tile's format; MM: the moving tile's
        "k": range((k_max or n) + 1),  # rows of K, 1..n dense (an MM's k is its LS's k)
        **sparse,
        "m": range(n + 1),  # LS: stationary columns used = PSUM partitions written, 1..n
        "f": range(bank_words + 1),  # MM: moving columns, 1..bank_words
        "bank": range(max(banks, 2)),  # MM: PSUM bank
        "addr": range(max(bank_words, 2)),  # MM: first PSUM word; addr + f <= bank_words
        "accumulate": 1,  # MM: 0 overwrite, 1 read-accumulate-write
    })


def drain_request_layout(banks: int, bank_words: int) -> data.StructLayout:
    return data.StructLayout({"bank": range(max(banks, 2)), "addr": range(max(bank_words, 2))})


class TensorEngine(wiring.Component):
    """Weight-stationary tensor engine with PSUM, as ``nc_matmul`` on a NeuronCore.

    Streams (``amaranth.lib.stream``, valid/ready; any of them may pause at any time):

    * ``cmd`` — :func:`command_layout` commands, executed in order:

      - ``LOAD_STATIONARY`` (k, m, fmt): takes k beats from ``weights`` — beat i is row i of
        the K×M stationary tile, lane j its column j (lanes ≥ m are loaded but their columns'
        sums never written) — one per cycle, into the PEs' shadow weights (rows ≥ k count as
        +0). It runs while the previous multiplication still streams (double buffering, as
        the real engine's background weight load): its rows start in the cycle that
        multiplication takes its first column (the one that swaps the previous tile in).
      - ``MULTIPLY_MOVING`` (k, f, fmt, bank, addr, accumulate): takes f beats from
        ``moving`` — beat j is moving column j, lane i its row i (lanes ≥ k read as +0) — and
        multiplies them by the most recently loaded stationary tile. Column j produces
        ``s[mm] = +0 + Σ_i stat[i, mm]·mov[i, j]`` (row order; the padded rows add +0, which
        leaves a sum unchanged since it is never −0) for every stationary column mm < m of that
        tile, written to PSUM partition mm, word ``addr + j`` of ``bank``: ``p = s``, or with
        ``accumulate`` ``p = p + s`` (the contract's read-accumulate-write).
      - A command with a field out of range (k or m not in 1..n, f = 0, addr + f beyond the
        bank, bank ≥ psum_banks, a format the PEs are not built for, a sparsity the engine
        does not take or of more than n slots, a MULTIPLY_MOVING whose k is not its
        LOAD_STATIONARY's, or before any) is dropped without taking data, and sets
        the sticky ``error`` flag. So does a drain request outside PSUM (it returns zeros).
        The host driver rejects all of these before they reach the engine.
    * **Sparse mode** (an engine built with ``sparsity``, the n:m patterns it takes;
      ``golden.sparse``): a LOAD_STATIONARY with ``sparsity`` a pattern's code
      (``golden.isa.Sparsity``) and k = K rows of K (up to R·n, R = m / n) takes the
      compressed tile's S = slots(K) <= n rows from ``weights``, each lane a value and its tag
      (:data:`~hdl.sparsity.WEIGHT_LANE`, the SBUF word's low 20 bits); its tags are checked as
      the rows arrive (lanes below m: inside the group and the K rows, increasing in a group).
      A tile that breaks the pattern sets ``error`` and ``tags_bad`` (until the next
      LOAD_STATIONARY) and is forgotten: MULTIPLY_MOVINGs after it are illegal. A
      MULTIPLY_MOVING's beat then carries K rows (``moving`` has :attr:`moving_rows` lanes;
      lanes >= K read as +0), and column mm's sum adds ``stat[j, mm]·mov[row_j, f]`` over the
      slots j in order, ``row_j`` = the slot's group start + its tag: the contract's sparse
      matmul (pruned rows never enter a sum; the PE rows past S add +0·+0). Dense tiles
      (``sparsity`` 0) work as in a dense engine; timing is the same in both modes. ``loading``
      is high while the loader takes a tile's rows; ``loading_ready`` is ``weights.ready`` in
      every cycle no LOAD_STATIONARY is taken from ``cmd`` (``loading`` and no swap waiting),
      from the engine's state only: a feeder that ends a tile in such a cycle reads it
      without a path from its command.
    * ``drain_req`` / ``drain_resp``: read one PSUM word per partition (bank, addr) → the
      ``n`` fp32 words; one per cycle, responses in order, back-pressure honoured; a response
      is valid :data:`DRAIN_LATENCY` (two) cycles after its request is taken (when
      ``drain_resp`` is not held back).
    * ``busy``: a command is executing or results are still on their way to PSUM. Drain reads
      issued while ``busy`` may see old values of the banks still being written.
    * ``done`` / ``done_bank``: a pulse in the cycle a MULTIPLY_MOVING's last column is
      written to PSUM (its every write done: columns reach PSUM in order), with its bank. A
      drain read of that bank issued after it sees every sum of that command; so the core
      drains one bank while multiplications write another (PSUM ping-pong).

    Timing: a moving column enters the array the cycle after its beat is taken and reaches PSUM
    :attr:`latency` cycles after that (``n·add_stages + mul_stages + n + 1 + add_stages``:
    7n + 12 with the default stages; one more when n = 1 with no stages). When the streams never
    pause, one moving column is taken per cycle (n² MACs per cycle), and **a LOAD_STATIONARY of
    k rows costs no cycle when the multiplication just before it has at least max(k, 2)
    columns** (so always with :attr:`load_hidden_after` = max(n, 2) columns), at every pipeline
    depth: its rows are taken one per cycle from the cycle that multiplication takes its first
    column, and the next multiplication's first column (carrying ``swap``) may follow the last
    row; the 2 is the dispatch, one command per cycle. A shorter multiplication before it leaves
    a gap of the difference. (Several multiplications between two LOAD_STATIONARYs are
    dispatched one after the other, and the LOAD_STATIONARY after the last of them: that one's
    columns count.) Only the first multiplication after a LOAD_STATIONARY swaps. An accumulating
    column waits (at most :attr:`hazard_window` cycles) only while a column taken at most
    :attr:`hazard_window` cycles before it targets the same PSUM word, so its read never misses
    a write still in flight; otherwise multiplications follow each other without a gap.

    Reset: a command in progress and every column still in the array or on its way to PSUM
    are abandoned (none is written to PSUM after the reset); ``busy`` and ``error`` clear, the
    drain port holds no response, and the stationary tile is forgotten (a MULTIPLY_MOVING
    before the next LOAD_STATIONARY is illegal). PSUM keeps its contents.

    Parameters
    ----------
    n : int
        The array size, 1 to 128.
    psum_banks : int
        PSUM banks, 1 to 64 (default 8).
    psum_words : int or None
        fp32 words per bank and partition, the largest moving tile, 1 to 2^16 (default
        ``4 * n``).
    mul_stages, add_stages : int
        The PEs' pipeline depths, as :class:`~hdl.pe.PE`'s (default 5 and 6); the PSUM
        accumulate adder has ``add_stages`` too.
    formats : collection of :class:`~hdl.formats.Fmt` or names
        The operand formats the array's decoders read (default: all three).
    sparsity : collection of str
        The n:m patterns of the sparse mode (``"2:4"``, ``"4:8"``, ``"4:12"``, ``"4:16"``;
        default none: a dense engine). Each PE then picks its operand from a window of
        ``max(m − n + 1)`` moving values (:func:`~hdl.sparsity.window`).

    Raises
    ------
    TypeError
        If an integer parameter is not an integer; if ``formats`` or ``sparsity`` is not a
        collection.
    ValueError
        If an integer parameter is out of range; if ``formats`` is empty or names an unknown
        format; if ``sparsity`` names an unknown pattern.
    """

    def __init__(self, *, n: int, psum_banks: int = 8, psum_words: int | None = None,
                 mul_stages: int = DEFAULT_MUL_STAGES, add_stages: int = DEFAULT_ADD_STAGES,
                 formats=("bf16", "fp8_e4m3", "fp8_e5m2"), sparsity=()):
        self.n = check_array_size(n)
        self.sparsity = parse_sparsity(sparsity, param="sparsity")
        #: Rows of K a moving beat carries (n; R·n in a sparse engine, R its largest m / n).
        self.moving_rows = moving_rows(n, self.sparsity)
        self.mul_stages = check_int("mul_stages", mul_stages, lo=0, hi=FP_MUL_MAX_CUTS)
        self.add_stages = check_int("add_stages", add_stages, lo=0, hi=FP32_ADD_MAX_STAGES)
        self.formats = parse_formats(formats, param="formats")
        self.psum_banks = check_int("psum_banks", psum_banks, lo=1, hi=64)
        self.psum_words = check_int("psum_words", 4 * n if psum_words is None else psum_words,
                                    lo=1, hi=1 << 16)
        self.array_latency = n * add_stages + mul_stages + n - 1  # = SystolicArray.latency
        # PSUM reads a word for accumulation the cycle before the column's sums arrive (its
        # address travels beside the array), so the sums arrive at least a cycle after issue.
        self.psum_arrival = max(self.array_latency, 1)
        # Issue register (1) + array + PSUM input register (1) + accumulate adder (add_stages).
        self.latency = 1 + self.psum_arrival + 1 + add_stages
        # A LOAD_STATIONARY of k <= n rows is hidden behind a multiplication of max(k, 2)
        # columns (the LOAD_STATIONARY and the next MULTIPLY_MOVING dispatch a cycle each).
        self.load_hidden_after = max(n, 2)
        # A column taken at t reads PSUM at the edge ending cycle t + psum_arrival and writes
        # at the edge ending t + 2 + psum_arrival + add_stages: an accumulating column must be
        # taken >= add_stages + 3 cycles after an earlier one to the same word, i.e. not while
        # one taken in the last add_stages + 2 cycles targets it.
        self.hazard_window = add_stages + 2
        self.cmd_layout = command_layout(n, self.psum_banks, self.psum_words,
                                         self.moving_rows if self.sparsity else None)
        weight_lane = WEIGHT_LANE if self.sparsity else 16
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "weights": In(stream.Signature(data.ArrayLayout(weight_lane, n))),
            "moving": In(stream.Signature(data.ArrayLayout(16, self.moving_rows))),
            "drain_req": In(stream.Signature(drain_request_layout(self.psum_banks,
                                                                  self.psum_words))),
            "drain_resp": Out(stream.Signature(data.ArrayLayout(32, n))),
            "busy": Out(1),
            "error": Out(1),
            "done": Out(1),
            "done_bank": Out(range(max(self.psum_banks, 2))),
            "loading": Out(1),
            "loading_ready": Out(1),
            "tags_bad": Out(1),
        })

    def elaborate(self, platform):
        # Four parts: the array; the loader, which feeds LOAD_STATIONARY tiles into the PEs'
        # shadow weights; the mover, which issues MULTIPLY_MOVING columns into the array; and
        # PSUM, which accumulates the array's sums and answers drain reads. Here, only what
        # ties them together: the in-order dispatch of commands with its legality checks, and
        # the column metadata that travels beside the array.
        m = Module()
        n = self.n
        m.submodules.array = array = SystolicArray(
            n=n, mul_stages=self.mul_stages, add_stages=self.add_stages, formats=self.formats,
            sparsity=tuple(f"{a}:{b}" for a, b in self.sparsity.values()))
        m.d.comb += array.en.eq(1)  # PSUM always takes a row: the array never needs to stall
        meta_layout = self._meta_layout()
        m.submodules.loader = loader = _Loader(n=n, row_layout=array.w_in.shape(),
                                               weights=self.weights.payload.shape(),
                                               sparsity=self.sparsity, k_max=self.moving_rows)
        m.submodules.mover = mover = _Mover(
            n=n, cmd_layout=self.cmd_layout, x_layout=array.x_in.shape(),
            meta_layout=meta_layout, hazard_window=self.hazard_window,
            moving_rows=self.moving_rows, sparse=bool(self.sparsity))
        m.submodules.psum = psum = _Psum(
            n=n, banks=self.psum_banks, words=self.psum_words, add_stages=self.add_stages,
            meta_layout=meta_layout)

        wiring.connect(m, wiring.flipped(self.weights), loader.weights)
        wiring.connect(m, wiring.flipped(self.moving), mover.moving)
        wiring.connect(m, wiring.flipped(self.drain_req), psum.drain_req)
        wiring.connect(m, wiring.flipped(self.drain_resp), psum.drain_resp)
        m.d.comb += [
            loader.swap_waiting.eq(mover.swap_waiting),
            array.w_valid.eq(loader.row_valid),
            array.w_row.eq(loader.row_index),
            array.w_in.eq(loader.row),
            array.x_in.eq(mover.x),
            psum.sums.eq(delay(m, array.result, self.psum_arrival - self.array_latency,
                               name="sums")),
            # The metadata travels beside the array, a cycle ahead of the sums.
            psum.meta_early.eq(delay(m, mover.meta, self.psum_arrival - 1, name="meta")),
        ]

        # --- Dispatch, in order, of the command at the head of the queue. --------------------
        cmd = self.cmd.payload
        error = Signal()  # sticky
        last_m = Signal(range(n + 1), init=n)  # m of the most recent LOAD_STATIONARY
        # its k (0: none yet, or its tags were bad: no MULTIPLY_MOVING is legal)
        last_k = Signal(range(self.moving_rows + 1))
        last_slots = Signal(range(n + 1))  # its rows (k if dense)
        last_mode = Signal(Sparsity)  # its sparsity
        fresh = Signal()  # a LOAD_STATIONARY was dispatched since the last swapping MM
        fmt_ok = Signal()
        with m.Switch(cmd.fmt):
            for fmt in self.formats:
                with m.Case(fmt):
                    m.d.comb += fmt_ok.eq(1)
        # The command's sparsity (a dense engine's commands have none: 0).
        sparsity = cmd.sparsity.as_value() if self.sparsity else Const(0, Sparsity.as_shape())
        mode_ok = Signal()
        with m.Switch(sparsity):
            for code in (0, *self.sparsity):
                with m.Case(code):
                    m.d.comb += mode_ok.eq(1)
        slots = slots_of(m, cmd.k, sparsity, self.sparsity, name="cmd_slots")
        ls_ok = (fmt_ok & mode_ok & (cmd.k >= 1) & (slots <= n) & (cmd.m >= 1)
                 & (cmd.m <= n))
        # A tile whose tags the loader found bad (up to its row taken this cycle) has no
        # multiplication: last_k forgets it as its last row is taken.
        mm_ok = (fmt_ok & (cmd.k >= 1) & (cmd.k == last_k) & (cmd.f >= 1) & ~loader.doomed
                 & (cmd.addr + cmd.f <= self.psum_words) & (cmd.bank < self.psum_banks))
        # The loader reads the tile's shape from the last_* registers (the dispatcher needs
        # them for the legality of MULTIPLY_MOVINGs anyway), the command's as it starts.
        start = loader.start
        m.d.comb += [loader.k.eq(Mux(start, cmd.k, last_k)),
                     loader.slots.eq(Mux(start, slots, last_slots)),
                     loader.m.eq(Mux(start, cmd.m, last_m)),
                     loader.mode.eq(Mux(start, sparsity, last_mode)),
                     loader.fmt.eq(cmd.fmt),
                     mover.cmd.eq(cmd), mover.mode.eq(last_mode), mover.slots.eq(last_slots),
                     mover.swap.eq(fresh)]
        for i in range(n):
            m.d.comb += mover.mask[i].eq(last_m > i)
        # (A LOAD_STATIONARY's start does not depend on a MULTIPLY_MOVING's legality, which
        # depends on the loader's rows: no combinational loop.)
        with m.If(self.cmd.valid & (cmd.op == Opcode.LOAD_STATIONARY)):
            with m.If(~ls_ok):
                m.d.comb += self.cmd.ready.eq(1)
                m.d.sync += error.eq(1)
            with m.Elif(~loader.busy):
                m.d.comb += [self.cmd.ready.eq(1), loader.start.eq(1)]
                m.d.sync += [last_m.eq(cmd.m), last_k.eq(cmd.k), last_slots.eq(slots),
                             last_mode.eq(sparsity), fresh.eq(1)]
        with m.If(self.cmd.valid & (cmd.op != Opcode.LOAD_STATIONARY)):
            with m.If(~mm_ok):
                m.d.comb += self.cmd.ready.eq(1)
                m.d.sync += error.eq(1)
            with m.Else():  # MULTIPLY_MOVING: the previous LS's rows all taken (at the
                # latest in this cycle), the mover free (at the latest after this cycle)
                with m.If(loader.free & (~mover.busy | mover.last)):
                    m.d.comb += [self.cmd.ready.eq(1), mover.start.eq(1)]
                    m.d.sync += fresh.eq(0)
        with m.If(psum.bad_request):
            m.d.sync += error.eq(1)
        # A sparse tile with bad tags is forgotten as its last row is taken.
        with m.If(loader.last & loader.bad_now):
            m.d.sync += [error.eq(1), last_k.eq(0)]
        m.d.comb += [self.error.eq(error), self.loading.eq(loader.busy),
                     self.loading_ready.eq(loader.busy & ~mover.swap_waiting),
                     self.tags_bad.eq(loader.tile_bad)]

        # In-flight columns, for `busy`.
        in_flight = Signal(range(self.latency + 2))
        m.d.sync += in_flight.eq(in_flight + mover.take - psum.written)
        m.d.comb += [self.busy.eq(loader.busy | mover.busy | (in_flight != 0)),
                     self.done.eq(psum.done), self.done_bank.eq(psum.done_bank)]
        return m

    def _meta_layout(self) -> data.StructLayout:
        """What travels beside a moving column to PSUM: where its sums go, and how."""
        return data.StructLayout({
            "valid": 1, "bank": range(max(self.psum_banks, 2)),
            "addr": range(max(self.psum_words, 2)), "accumulate": 1, "mask": self.n,
            "last": 1,  # the multiplication's last column
        })


class _Loader(wiring.Component):
    """Takes a LOAD_STATIONARY's ``slots`` rows (its k if dense) from ``weights``, one per
    cycle, and presents each the next cycle to the array (``row_valid``, ``row_index``,
    ``row``).

    ``start`` (with ``k``, ``slots``, ``m``, ``mode``, ``fmt``) begins a tile, and its first
    row may be taken in that very cycle; those inputs must hold the tile's shape until it is
    done (the dispatcher keeps it); ``busy`` until its last row is taken, ``last`` in that
    cycle; ``free`` when not ``busy`` or as the last row of a tile started before this cycle
    is taken (``start`` is not in its logic: it lets the next multiplication start). No row
    is taken while ``swap_waiting`` (a multiplication that swaps the previous tile in has not
    taken its swap column yet): the array's background load rule wants the rows at or after
    that column.

    A sparse tile (``mode`` a pattern n:m): row i is slot ``j = i mod n`` of group ``g = i div
    n`` (rows ``g·m ..`` of K); each of its lanes below ``m`` checks its tag (``golden.sparse.
    check_tags``: below the group's rows, ``g·m + tag < k``, and above the previous slot's
    tag) and becomes the PE's ``sel = tag − j``. ``bad_now``: a row of the tile broke the
    pattern (the one taken this cycle included); ``tile_bad`` the same, from the cycle after
    the row, until the next ``start``.
    """

    def __init__(self, *, n, row_layout, weights, sparsity, k_max):
        self._n, self._sparsity = n, sparsity
        super().__init__({
            "start": In(1), "k": In(range(k_max + 1)), "slots": In(range(n + 1)),
            "m": In(range(n + 1)), "mode": In(Sparsity), "fmt": In(Fmt),
            "weights": In(stream.Signature(weights)),
            "swap_waiting": In(1),
            "busy": Out(1), "last": Out(1), "free": Out(1), "bad_now": Out(1),
            "tile_bad": Out(1), "doomed": Out(1),
            "row_valid": Out(1), "row_index": Out(range(max(n, 2))), "row": Out(row_layout),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._n
        next_row = Signal(range(max(n, 2)))  # the next row to take (0 while idle)
        fmt = Signal(Fmt)
        # In the cycle of `start` the command's own fields are the tile's.
        index = next_row
        tile_fmt = Mux(self.start, self.fmt, fmt)
        active = self.busy | self.start
        take = Signal()
        # Whether the next row is the tile's last, held in a register (set by start, stepped
        # by take) rather than compared from `slots`, which the dispatcher multiplexes from the
        # command at its input: `last` starts the next multiplication.
        at_last = Signal()
        m.d.comb += [
            self.weights.ready.eq(active & ~self.swap_waiting),
            take.eq(self.weights.ready & self.weights.valid),
            self.last.eq(take & Mux(self.start, self.slots == 1, at_last)),
            # (a tile begun earlier: its row is taken when busy, whatever `start` says)
            self.free.eq(~self.busy | (~self.swap_waiting & self.weights.valid & at_last)),
        ]
        m.d.sync += [self.row_valid.eq(take), self.row_index.eq(index)]
        payload = self.weights.payload
        for j in range(n):
            # Lanes >= m load too: their columns' sums are never written.
            value = payload[j].data if self._sparsity else payload[j]
            m.d.sync += [self.row[j].data.eq(value), self.row[j].fmt.eq(tile_fmt)]
        tags_bad = Signal()  # the row offered breaks the pattern
        if self._sparsity:
            m.d.comb += tags_bad.eq(self._check_tags(m, index))
        m.d.comb += [
            self.bad_now.eq((take & tags_bad) | (self.tile_bad & ~self.start)),
            # The same without the new tile's first cycle (the dispatcher's MULTIPLY_MOVING
            # legality: no path from `start` back to it).
            self.doomed.eq(self.busy & (self.tile_bad | (self.weights.valid & ~self.swap_waiting
                                                         & tags_bad))),
        ]
        with m.If(take | self.start):
            m.d.sync += self.tile_bad.eq(self.bad_now)
        with m.If(self.start):
            m.d.sync += [fmt.eq(self.fmt), at_last.eq(self.slots == 1)]
        with m.If(take):
            m.d.sync += [next_row.eq(Mux(self.last, 0, index + 1)),
                         at_last.eq(index + 2 == self.slots)]
        m.d.sync += self.busy.eq(active & ~self.last)
        return m

    def _check_tags(self, m, index):
        """Each lane's ``sel`` for the row (registered into ``row``) and whether a lane below
        ``m`` breaks the pattern (returned, for the row taken this cycle)."""
        n = self._n
        prev = [Signal(4, name=f"prev_tag{c}") for c in range(n)]  # the previous slot's tags
        bad = []
        for c in range(n):
            tag = self.weights.payload[c].tag
            lane_bad = Signal(name=f"tag_bad{c}")
            sel = Signal(self.row[c].sel.shape(), name=f"sel{c}")
            m.d.comb += [sel.eq(0), lane_bad.eq(0)]
            for code, (n_p, m_p) in self._sparsity.items():
                sh = n_p.bit_length() - 1
                j = index[:sh]
                g0 = (index >> sh) * m_p
                with m.If(self.mode.as_value() == code):
                    m.d.comb += [
                        sel.eq(tag - j),
                        lane_bad.eq((c < self.m) & ((tag >= m_p) | (g0 + tag >= self.k)
                                                    | ((j != 0) & (tag <= prev[c])))),
                    ]
            with m.If(self.weights.valid & self.weights.ready):
                m.d.sync += [prev[c].eq(tag), self.row[c].sel.eq(sel)]
            bad.append(lane_bad)
        return Cat(bad).any()


class _Mover(wiring.Component):
    """Issues a MULTIPLY_MOVING's ``f`` columns from ``moving`` into the array's issue register
    (``x``, one column per cycle; lanes >= k read as +0), each with its PSUM metadata
    (``meta``: bank, word, accumulate, the partitions ``mask`` of its tile).

    ``start`` (with ``cmd``, ``swap``, ``mask``) begins a multiplication, also in the cycle the
    previous one takes its last column (``last``); ``busy`` until its last column is taken;
    ``take``: a column is taken this cycle. With ``swap`` its first column carries the swap to
    the new weights (lanes >= k with ``pad``: +0 weights there); ``swap_waiting`` while that
    column is still to be taken. An accumulating column waits while a column taken in the last
    ``hazard_window`` cycles targets the same PSUM word.
    """

    def __init__(self, *, n, cmd_layout, x_layout, meta_layout, hazard_window, moving_rows,
                 sparse):
        self._n, self._hazard_window = n, hazard_window
        self._rows, self._sparse = moving_rows, sparse
        super().__init__({
            "start": In(1), "cmd": In(cmd_layout), "swap": In(1), "mask": In(n),
            "mode": In(Sparsity), "slots": In(range(n + 1)),
            "moving": In(stream.Signature(data.ArrayLayout(16, moving_rows))),
            "busy": Out(1), "last": Out(1), "take": Out(1), "swap_waiting": Out(1),
            "x": Out(x_layout), "meta": Out(meta_layout),
        })

    def elaborate(self, platform):
        m = Module()
        n = self._n
        cmd = Signal.like(self.cmd)  # the multiplication being executed
        col = Signal.like(cmd.f)  # columns taken so far
        mask = Signal(n)
        mode, slots = Signal(Sparsity), Signal(range(n + 1))  # of the tile it multiplies
        swap = Signal()  # the next column taken carries `swap` (new weights wait in shadow)
        # The lanes below k (read; the others +0), registers set by start: no compare with k
        # lies between the moving beat and the issue register.
        in_k = Signal(self._rows)

        # Columns taken in the last hazard_window cycles, for the read-after-write check.
        recent_layout = data.StructLayout({"valid": 1, "bank": self.meta.bank.shape(),
                                           "addr": self.meta.addr.shape()})
        recent = [Signal(recent_layout, name=f"recent{i}") for i in range(self._hazard_window)]
        # The next column's PSUM word and whether it is the last, held in registers (set by
        # start, stepped by take) rather than summed from cmd and col.
        col_addr = Signal.like(cmd.addr)  # cmd.addr + col
        final = Signal()  # col + 1 == cmd.f
        pushed = Signal(recent_layout)  # what recent[0] becomes: the column taken, if any
        with m.If(self.take):
            m.d.comb += [pushed.valid.eq(1), pushed.bank.eq(cmd.bank), pushed.addr.eq(col_addr)]
        if recent:
            m.d.sync += recent[0].eq(pushed)
        for prev, cur in zip(recent, recent[1:], strict=False):
            m.d.sync += cur.eq(prev)
        # Whether the column at hand targets a PSUM word taken in the last hazard_window
        # cycles, held in a register: computed a cycle ahead from what `recent`, `cmd` and
        # `col_addr` become (the same updates as below), so the compares do not sit between
        # the registers and `take`, which gates the whole issue register. The compares are
        # formed for each outcome of this cycle (a new command starts; the column is taken;
        # neither) from registers and the command at the input, and `start` and `take`, which
        # arrive late, only choose among them.
        conflict = Signal()

        def hit(bank, addr, entries):
            return Cat(r.valid & (r.bank == bank) & (r.addr == addr) for r in entries).any()

        if recent:
            older = recent[:-1]  # what recent[1:] become
            new_cmd = (self.cmd.bank, self.cmd.addr)
            # (a column taken now and the next one of the same command never meet: addr + 1)
            on_start = hit(*new_cmd, older) | (self.take & (cmd.bank == self.cmd.bank)
                                                & (col_addr == self.cmd.addr))
            on_take = hit(cmd.bank, (col_addr + 1)[:len(col_addr)], older)
            on_wait = hit(cmd.bank, col_addr, older)
            m.d.sync += conflict.eq(Mux(self.start, on_start, Mux(self.take, on_take, on_wait)))
        gap_ok = ~cmd.accumulate | ~conflict
        m.d.comb += [
            self.moving.ready.eq(self.busy & gap_ok),
            self.take.eq(self.busy & gap_ok & self.moving.valid),
            self.last.eq(self.take & final),
            self.swap_waiting.eq(swap & ~self.take),
        ]
        m.d.sync += [self.x.eq(0), self.meta.eq(0)]  # a bubble unless a column is taken
        with m.If(self.take):
            if self._sparse:  # the array picks each row's window (SystolicArray)
                for i in range(self._rows):
                    m.d.sync += self.x.data[i].eq(Mux(in_k[i], self.moving.payload[i], 0))
                m.d.sync += [self.x.fmt.eq(cmd.fmt), self.x.swap.eq(swap),
                             self.x.mode.eq(mode.as_value()), self.x.slots.eq(slots)]
            for i in range(0 if self._sparse else n):
                m.d.sync += [
                    self.x[i].data.eq(Mux(in_k[i], self.moving.payload[i], 0)),
                    self.x[i].fmt.eq(cmd.fmt),
                    self.x[i].swap.eq(swap),
                    self.x[i].pad.eq(~in_k[i]),
                ]
            m.d.sync += [
                self.meta.valid.eq(1), self.meta.bank.eq(cmd.bank), self.meta.addr.eq(col_addr),
                self.meta.accumulate.eq(cmd.accumulate), self.meta.mask.eq(mask),
                self.meta.last.eq(final),
                col.eq(col + 1), col_addr.eq(col_addr + 1), final.eq(col + 2 == cmd.f),
                swap.eq(0),
            ]
            with m.If(self.last):
                m.d.sync += self.busy.eq(0)
        # After the column's statements: a multiplication started in the cycle the previous
        # one takes its last column wins over that column's bookkeeping.
        with m.If(self.start):
            # Only the first multiplication after a LOAD_STATIONARY swaps: the next tile's
            # rows go into the shadow weights as soon as that first column is taken.
            m.d.sync += [self.busy.eq(1), cmd.eq(self.cmd), col.eq(0), mask.eq(self.mask),
                         col_addr.eq(self.cmd.addr), final.eq(self.cmd.f == 1),
                         swap.eq(self.swap), mode.eq(self.mode), slots.eq(self.slots),
                         *(in_k[i].eq(self.cmd.k > i) for i in range(self._rows))]
        return m


class _Psum(wiring.Component):
    """The PSUM buffer: ``banks`` × ``words`` rows of ``n`` fp32 partitions.

    Every cycle it takes the array's ``sums`` and, a cycle earlier, their metadata
    (``meta_early``); a valid row is written (partitions in ``mask``) to word ``addr`` of bank
    ``bank``, as ``p = s`` or, with ``accumulate``, ``p = p + s`` (the old value is read the
    cycle before the row arrives, held in a register as the row is, and added in
    ``add_stages`` cycles); ``written`` pulses as it is written, ``1 + add_stages`` cycles
    after it arrived; ``done`` (with ``done_bank``) as a row with ``last`` is written.
    ``drain_req`` / ``drain_resp``: one row per cycle, responses in order, a response
    :data:`DRAIN_LATENCY` cycles after its request is taken (a register, not the block RAM's
    output); a request outside PSUM answers zeros and pulses ``bad_request``.
    """

    def __init__(self, *, n, banks, words, add_stages, meta_layout):
        self._n, self._banks, self._words, self._add_stages = n, banks, words, add_stages
        super().__init__({
            "sums": In(data.ArrayLayout(32, n)), "meta_early": In(meta_layout),
            "drain_req": In(stream.Signature(drain_request_layout(banks, words))),
            "drain_resp": Out(stream.Signature(data.ArrayLayout(32, n))),
            "written": Out(1), "bad_request": Out(1),
            "done": Out(1), "done_bank": Out(range(max(banks, 2))),
        })

    def elaborate(self, platform):
        m = Module()
        n, words = self._n, self._words
        m.submodules.mem = mem = memory.Memory(
            shape=data.ArrayLayout(32, n), depth=self._banks * words, init=[])
        acc_rd = mem.read_port(transparent_for=())
        drain_rd = mem.read_port(transparent_for=())
        wr = mem.write_port(granularity=1)

        # --- Read (for accumulate), add, write. ------------------------------------------------
        # Design note: the block RAM's clock-to-output is most of a cycle at 100 MHz, so the
        # old value is read a cycle early and registered beside the row; it misses a write in
        # flight one cycle longer (TensorEngine.hazard_window has the extra cycle).
        early = self.meta_early
        m.d.comb += [acc_rd.en.eq(1), acc_rd.addr.eq(early.bank * words + early.addr)]
        meta = Signal.like(early)
        row_a = Signal(data.ArrayLayout(32, n))
        old_a = Signal(data.ArrayLayout(32, n))
        meta_a = Signal.like(early)
        m.d.sync += [meta.eq(early), row_a.eq(self.sums), old_a.eq(acc_rd.data),
                     meta_a.eq(meta)]
        adders = []
        for i in range(n):
            add = shared(Fp32Adder(stages=self._add_stages), "hdl.fp32_add:Fp32Adder",
                         {"stages": self._add_stages}, clocked=self._add_stages > 0)
            m.submodules[f"acc_add{i}"] = add
            # The contract's accumulate: p = p + s (the old PSUM value is the left operand).
            m.d.comb += [add.en.eq(1), add.a.eq(old_a[i]), add.b.eq(row_a[i])]
            adders.append(add)
        row_w = delay(m, row_a, self._add_stages, name="row_w")
        meta_w = delay(m, meta_a, self._add_stages, name="meta_w")
        m.d.comb += [wr.addr.eq(meta_w.bank * words + meta_w.addr), self.written.eq(meta_w.valid),
                     self.done.eq(meta_w.valid & meta_w.last), self.done_bank.eq(meta_w.bank)]
        for i in range(n):
            m.d.comb += [
                wr.data[i].eq(Mux(meta_w.accumulate, adders[i].result, row_w[i])),
                wr.en[i].eq(meta_w.valid & meta_w.mask[i]),
            ]

        # --- Drain port: one row per cycle, with back-pressure. ----------------------------------
        # Design note: two stages, the block RAM's word (`read_valid`) and a register
        # (`resp_valid`), so that the response is a register: the block RAM's clock-to-output
        # is most of a cycle at 100 MHz and leaves no room for the consumer's logic. A stage
        # takes a row when it is empty or the stage after it takes one; the read port's `en`
        # holds the block RAM's word while its stage is stalled.
        read_valid, resp_valid = Signal(), Signal()
        req = self.drain_req.payload
        req_ok = (req.bank < self._banks) & (req.addr < words)
        read_bad = Signal()  # the word in the block RAM's output is for a request outside PSUM
        resp = Signal.like(self.drain_resp.payload)
        take_resp = ~resp_valid | self.drain_resp.ready
        m.d.comb += [
            self.drain_req.ready.eq(~read_valid | take_resp),
            drain_rd.en.eq(self.drain_req.ready),
            drain_rd.addr.eq(req.bank * words + req.addr),
            self.drain_resp.valid.eq(resp_valid),
            self.drain_resp.payload.eq(resp),
            self.bad_request.eq(self.drain_req.ready & self.drain_req.valid & ~req_ok),
        ]
        with m.If(self.drain_req.ready):
            m.d.sync += [read_valid.eq(self.drain_req.valid), read_bad.eq(self.bad_request)]
        with m.If(take_resp):
            m.d.sync += [resp_valid.eq(read_valid), resp.eq(Mux(read_bad, 0, drain_rd.data))]
        return m
