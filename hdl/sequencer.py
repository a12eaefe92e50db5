"""The sequencer: checks each descriptor and dispatches it to its engine, in program order."""

import contextlib
import functools

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from golden import isa as _isa

from .dma import dma_command_layout
from .isa import DESCRIPTOR_BITS, DESCRIPTOR_LAYOUTS, ErrorCode, Opcode
from .params import check_int
from .sparsity import MAX_RATIO, ceil_div, parse_sparsity, ratio_of, slots_of, times_ratio
from .torus import check_torus_rows

__all__ = ["Sequencer", "ERROR_INDEX_BITS", "check_core_sizes"]

#: Width of the error index (the ERROR register's ``index`` field, ``golden.isa``).
ERROR_INDEX_BITS = _isa.REGISTER_MAP["ERROR"].fields["index"][1]
_PATTERNS = tuple(_isa.Sparsity(c).pattern for c in range(1, len(_isa.Sparsity)))
#: MATMULs counted in flight per PSUM bank; one more waits (a bound no pipeline reaches).
_MAX_MATMULS = 255
#: Bits of a slot's ``checks``: one for each check of each opcode (57 used).
_CHECKS = 64


#: The vector engine's commands (dispatched to the activation path).
_VECTOR_OPS = (Opcode.TENSOR_TENSOR, Opcode.TENSOR_SCALAR, Opcode.TENSOR_REDUCE, Opcode.TRANSPOSE)


class _Region:
    """A rectangle of partitions [plo, phi) x words [lo, hi) held in registers."""

    def __init__(self, name, *, pshape, wshape):
        self.plo = Signal(pshape, name=f"{name}_plo")
        self.phi = Signal(pshape, name=f"{name}_phi")
        self.lo = Signal(wshape, name=f"{name}_lo")
        self.hi = Signal(wshape, name=f"{name}_hi")

    def set(self, plo, phi, lo, hi):
        return [self.plo.eq(plo), self.phi.eq(phi), self.lo.eq(lo), self.hi.eq(hi)]

    def overlaps(self, plo, phi, lo, hi):
        """Whether the rectangle [plo, phi) x [lo, hi) shares a word with this one. Its ends
        are read at this one's widths (short carry chains: timing), which is exact for a
        rectangle within this one's ranges: the dispatch compares only commands that passed
        their range checks."""
        def at(x, like):
            x, w = Value.cast(x), len(like)
            return x[:w] if len(x) > w else x

        plo, phi, lo, hi = at(plo, self.plo), at(phi, self.phi), at(lo, self.lo), at(hi, self.hi)
        return (self.plo < phi) & (plo < self.phi) & (self.lo < hi) & (lo < self.hi)


class _Bounds:
    """A command's regions as the dispatch compares them: the SBUF rectangle it writes (or,
    tensor path, reads) [plo, phi) x [lo, hi); the ends of its sources' words (an
    ACTIVATE's, a vector command's in0 and in1: partitions as the rectangle's, words from
    the field to ``src_hi``; a TRANSPOSE's source from partition plo to ``src_phi``); a
    MATMUL's PSUM words' end. The sums are the dispatch's critical path when formed from the
    head, so they are formed as the command enters; the range checks compare them a cycle
    later (the slot's late checks). So every sum is exact: a field holds any sum of its
    operands' widths (``rect`` asserts it)."""

    layout = data.StructLayout({"plo": 8, "phi": 17, "lo": 16, "hi": 19,
                                "src_hi": data.ArrayLayout(18, 2), "src_phi": 10,
                                "psum_hi": 18})

    def __init__(self, name=None, *, sig=None):
        self.sig = Signal(self.layout, name=name) if sig is None else sig
        self.src_hi, self.psum_hi = self.sig.src_hi, self.sig.psum_hi

    def rect(self, part, rows, addr, cols):
        """The statements that set the rectangle: partitions part + rows, words addr + cols."""
        b = self.sig
        return [_exact(b.plo, part), _exact(b.phi, part + rows), _exact(b.lo, addr),
                _exact(b.hi, addr + cols)]

    @property
    def region(self):
        b = self.sig
        return (b.plo, b.phi, b.lo, b.hi)

    def source(self, i, addr):
        """Source ``i``'s rectangle, its words from ``addr``."""
        return (self.sig.plo, self.sig.phi, addr, self.src_hi[i])


def _exact(target, value):
    """``target.eq(value)``, asserting that ``target`` holds every value of ``value``."""
    width = Value.cast(value).shape().width
    assert width <= Value.cast(target).shape().width, (target, width)
    return target.eq(value)


# Late checks (see Sequencer.elaborate): functions of a slot, registered a cycle after the
# descriptor entered (before its verdict) from the sums its regions hold (`_Bounds`), so that no
# check chains a sum into a compare as the descriptor enters. Each is equal to the check on the
# descriptor's fields it replaces (tests/hdl/test_sequencer_checks_pysim.py).
def _late_rect(n, words):
    """The rectangle's partitions within n, its words within ``words``."""
    return lambda s: (s.bounds.phi <= n) & (s.bounds.hi <= words)


def _late_source(i, n, words):
    """Source i's words within ``words``, its partitions (the rectangle's) within n."""
    return lambda s: (s.bounds.phi <= n) & (s.bounds.src_hi[i] <= words)


def _late_apart(op, addr_field, i):
    """Source i (words from ``addr_field``, as many as the destination's) is the destination's
    words, or misses them: |addr - dst_addr| is 0 or at least the words."""
    def ok(s):
        f, b = _slot_fields(op, s), s.bounds
        a, d = getattr(f, addr_field), f.dst_addr
        return (a == d) | (a >= b.hi) | (d >= b.src_hi[i])
    return ok


def _slot_fields(op, s):
    """The fields of slot ``s``'s descriptor, read as opcode op's."""
    return data.View(DESCRIPTOR_LAYOUTS[op], s.desc)


class _SlotView:
    """What the dispatch reads of a slot record (a slot's, or the head's): its opcode, its
    descriptor's fields as each opcode's (``v``) and its regions (``bounds``)."""

    def __init__(self, rec):
        self.op = rec.desc[:4]
        self.v = {o: data.View(DESCRIPTOR_LAYOUTS[o], rec.desc) for o in Opcode}
        self.bounds = _Bounds(sig=rec.bounds)


def check_core_sizes(*, n, sbuf_words, psum_banks, psum_words, dram_bytes):
    """The memory sizes a core can be built with (each fits its descriptor field).

    Raises :class:`TypeError` (not an integer) or :class:`ValueError` (out of range) naming
    the parameter, as :func:`~hdl.params.check_int`.
    """
    check_int("n", n, lo=1, hi=64)
    check_int("sbuf_words", sbuf_words, lo=1, hi=1 << 16)
    check_int("psum_banks", psum_banks, lo=1, hi=16)
    check_int("psum_words", psum_words, lo=1, hi=1 << 16)
    check_int("dram_bytes", dram_bytes, lo=1, hi=1 << 32)


class Sequencer(wiring.Component):
    """Takes descriptors from ``desc``, checks them exactly as ``golden.iss.NeuronCoreISS.check``
    does, and dispatches each to its engine's stream as soon as that engine is free and no
    command still in flight touches the same data.

    Checks, in the ISS's order (the first failing one is reported): opcode (BAD_OPCODE),
    reserved field values (BAD_FIELD), dtype (BAD_DTYPE), sizes (BAD_SHAPE), SBUF / PSUM /
    DRAM ranges (BAD_RANGE, DRAM up to ``dram_bytes`` computed at full width), alignment
    (BAD_ALIGN). A MATMUL's K must be the K of the last LOAD_STATIONARY dispatched, a
    COLLECTIVE's rows the ``link_width``. A COLLECTIVE on a core built without ``ring`` is
    BAD_FIELD after its other checks; so is a sparse LOAD_STATIONARY without ``sparse``
    (before them). A sparse LOAD_STATIONARY reads its slots' partitions, and a MATMUL after it
    ``ceil(K / R)`` partitions of ``f · R`` words (``golden.sparse.moving_layout``).

    On a failing command: ``error_code`` and ``error_index`` (= ``executed`` then: the
    commands executed since the last reset) are set, the command is dropped with the one
    behind it if that one has entered (the sequencer holds two), and every
    descriptor that arrives while the error is set is dropped unexecuted (the queue stops,
    as the ISS runs nothing until ``clear_error``); the commands already dispatched finish.
    ``clear_error`` clears the code and lets the next descriptor in.

    Errors of a running command (``executed`` counts it: it was dispatched):

    * After a sparse LOAD_STATIONARY nothing is dispatched (and no check error reported) until
      the tensor feeder and the tensor engine are done with its rows (``te_loading`` low);
      then ``te_tags_bad`` sets BAD_TAGS with its index (unless an earlier command's error,
      a DMA's BUS_ERROR, arrived meanwhile: that one stands), the queue stops (the command
      waiting behind is dropped, and no descriptor enters in that cycle), and the K of the
      last LOAD_STATIONARY is forgotten (a MATMUL is BAD_SHAPE until the next one).
    * ``dma_error`` rising (the DMA got SLVERR or DECERR on R or B; it falls when the DMA
      takes its next command) sets BUS_ERROR; ``coll_timeout`` rising (the collective engine's
      watchdog abandoned the COLLECTIVE) sets LINK_TIMEOUT. Either arrives a cycle after it
      rises (``busy`` stays up meanwhile). The index is that command's
      position: ``executed`` when it was dispatched (what a check error of that command would
      have reported). The queue stops as above; the commands the sequencer holds, not yet
      dispatched, are dropped too. Commands dispatched after the failing one before its error
      arrived still run (so EXECUTED may count some); the DMA runs one command at a time and
      a COLLECTIVE runs alone, so the failing command is known. Such an error replaces a
      check error already reported (the check error's command came later).

    Dispatch (in order; a command waits at the head, the older of the two the sequencer holds;
    a descriptor enters while one of them is free). Timing: a descriptor that enters in cycle
    t is dispatched (or fails) in cycle t + :attr:`dispatch_latency` at the earliest, t +
    :attr:`dma_dispatch_latency` a DMA command whose checks before the DRAM bound pass; after
    a command leaves the head, the next leaves :attr:`dispatch_interval` cycles later at the
    earliest. The engines are offered their command the cycle after its dispatch:

    * ``dma`` — DMA_LOAD / DMA_STORE, when the DMA and the activation path are free (they
      share the SBUF's second read port and its write port); a load also waits while the
      tensor feeder reads the SBUF words it writes.
    * ``te`` — LOAD_STATIONARY / MATMUL (the raw descriptor), when the tensor feeder is free,
      no DMA load or activation writes the SBUF words it reads, and (MATMUL) no activation is
      reading the PSUM words it writes.
    * ``act`` — ACTIVATE and the vector commands (the raw descriptor), when the activation
      path and the DMA are free, no tensor-feeder read overlaps the words it writes, and (from
      PSUM) no MATMUL still in flight writes the PSUM words it reads. ``seed`` — SET_SEED,
      when the activation path is free.
    * ``coll`` — COLLECTIVE (``ring`` only) and BARRIER wait until everything is idle.

    Regions are compared exactly where it pays and conservatively elsewhere, never missing a
    real overlap: an SBUF region is a rectangle of partitions x words; a MATMUL writes PSUM
    partitions ``0 .. m − 1`` (m of its LOAD_STATIONARY), words ``psum_addr ..`` of its bank.
    MATMULs in flight are counted per bank (dispatched, and not yet reported written by the
    tensor engine's ``te_done`` / ``te_done_bank``, which must pulse once per MATMUL as its
    last write lands), with the union of their partitions and words; a bank's record clears
    when its count falls to zero. So an ACTIVATE drains one PSUM bank while MATMULs write
    another (PSUM ping-pong), and the DMA of the next tile runs beside the current MATMUL.
    The engines' busy inputs must rise the cycle after they take a command and stay high until
    its last effect on a memory; they are registered, so a command waiting for an engine
    leaves the head ``release_latency`` cycles after the engine's busy falls. ``hold`` (a
    debug read waiting for the SBUF port) stops DMA, ACTIVATE and COLLECTIVE dispatch.

    Parameters
    ----------
    n : int
        SBUF partitions, 1 to 64.
    sbuf_words : int
        Words per SBUF partition, 1 to 2^16.
    psum_banks : int
        PSUM banks, 1 to 16.
    psum_words : int
        Words per PSUM bank and partition, 1 to 2^16.
    dram_bytes : int
        The DRAM the range checks allow, 1 to 2^32.
    ring : bool
        The core has a collective engine (default ``False``: COLLECTIVE is BAD_FIELD).
    ranks : int
        The ring's size P, 2 to 64 (default 2; with ``ring``): a PERMUTE's shift must be in
        1..P − 1 and an all-to-all writes P·⌈cols/P⌉ words a partition.
    torus_rows : int
        R: the ring's cores form an R × (P / R) torus (default 1: a ring). P is then the size
        of the sub-ring a COLLECTIVE's ``dim`` names: P / R along a row, R along a column
        (COLUMN on a ring is BAD_FIELD).
    link_width : int
        The rows a COLLECTIVE must give, 1 to ``n`` (default 1).
    vector_engine : bool
        The activation path runs the vector commands (TENSOR_TENSOR, TENSOR_SCALAR,
        TENSOR_REDUCE, TRANSPOSE; default ``True``); without it they are BAD_OPCODE.
    sparse : bool
        The tensor engine has the sparse mode (every pattern of ``golden.isa.Sparsity``;
        default ``False``).

    Raises
    ------
    TypeError
        If an integer parameter is not an integer, or ``vector_engine`` or ``sparse`` not a
        bool.
    ValueError
        If an integer parameter is out of range.
    """

    def __init__(self, *, n: int, sbuf_words: int, psum_banks: int, psum_words: int,
                 dram_bytes: int, ring: bool = False, ranks: int = 2, link_width: int = 1,
                 vector_engine: bool = True, sparse: bool = False, torus_rows: int = 1):
        check_core_sizes(n=n, sbuf_words=sbuf_words, psum_banks=psum_banks,
                         psum_words=psum_words, dram_bytes=dram_bytes)
        self.n, self.sbuf_words, self.psum_banks = n, sbuf_words, psum_banks
        self.psum_words, self.dram_bytes, self.ring = psum_words, dram_bytes, bool(ring)
        self.link_width = check_int("link_width", link_width, lo=1, hi=n)
        self.ranks = check_int("ranks", ranks, lo=2, hi=64)
        self.torus_rows = check_torus_rows(torus_rows, ranks if ring else 0)
        if not isinstance(vector_engine, bool):
            raise TypeError(f"vector_engine must be a bool, not {vector_engine!r}")
        self.vector_engine = vector_engine
        if not isinstance(sparse, bool):
            raise TypeError(f"sparse must be a bool, not {sparse!r}")
        self.sparse = sparse
        #: Cycles from a descriptor's entry to its dispatch at the earliest: its late checks,
        #: its checks' verdict and the hazard compares are registered (see the design note).
        self.dispatch_latency = 3
        #: ... for a DMA command whose checks before the DRAM bound pass (the bound's sums and
        #: compare: known with the verdict, so the same).
        self.dma_dispatch_latency = 3
        #: Cycles between two commands leaving the head, at the least.
        self.dispatch_interval = 2
        #: Cycles after an engine's busy falls before a command waiting for the engine may
        #: leave the head: the busy inputs are registered.
        self.release_latency = 1
        ports = {
            "desc": In(stream.Signature(DESCRIPTOR_BITS)),
            "dma": Out(stream.Signature(dma_command_layout(n, sbuf_words))),
            "te": Out(stream.Signature(DESCRIPTOR_BITS)),
            "act": Out(stream.Signature(DESCRIPTOR_BITS)),
            "seed": Out(stream.Signature(64)),
            "coll": Out(stream.Signature(DESCRIPTOR_BITS)),
            "dma_busy": In(1),
            "te_feed_busy": In(1),  # the tensor feeder is reading SBUF for a command
            "te_busy": In(1),  # the tensor engine still computes or writes PSUM
            "te_done": In(1),  # a MATMUL's last PSUM write lands (one pulse per MATMUL)
            "te_done_bank": In(range(max(psum_banks, 2))),  # ... in this bank
            "act_busy": In(1),  # the activation path reads or writes for a command
            "coll_busy": In(1),
            "dma_error": In(1),  # the DMA command running (or last) got an error response
            "coll_timeout": In(1),  # the collective engine's watchdog abandoned its command
            "te_loading": In(1),  # the tensor engine takes a stationary tile's rows
            "te_tags_bad": In(1),  # ... and the last one it took broke its pattern
            "hold": In(1),
            "clear_error": In(1),
            "busy": Out(1),
            "error_code": Out(ErrorCode),
            "error_index": Out(ERROR_INDEX_BITS),
            "executed": Out(32),
        }
        super().__init__(ports)

    @staticmethod
    def _slot_layout() -> data.StructLayout:
        """A slot: a descriptor with its checks' results and its regions, for the dispatch."""
        return data.StructLayout({
            "desc": DESCRIPTOR_BITS,
            "checks": _CHECKS,  # which of its opcode's checks pass (see elaborate)
            "room0": signed(34),  # dram_bytes - dram_addr
            "nbytes": 18,  # cols * size
            "ls_ratio": range(MAX_RATIO + 1),  # a LOAD_STATIONARY's R
            "bounds": _Bounds.layout,
        })

    def _vector_checks(self, op, f):
        """TENSOR_TENSOR / TENSOR_SCALAR / TENSOR_REDUCE: (ok, code) in the ISS's order (the
        range checks late)."""
        n, banks, pwords = self.n, self.psum_banks, self.psum_words
        reduce = op == Opcode.TENSOR_REDUCE
        ins = ["in0"] + (["in1"] if op == Opcode.TENSOR_TENSOR else [])
        alu = f.alu.as_value()
        alu_ok = ((alu == _isa.AluOp.ADD) | (alu == _isa.AluOp.MAX) | (alu == _isa.AluOp.MIN)
                  if reduce else alu <= int(max(_isa.AluOp)))
        checks = [(alu_ok & (f.mode.as_value() <= int(max(_isa.Rounding))),
                   ErrorCode.BAD_FIELD)]
        for i in ins:
            dt = getattr(f, f"{i}_dtype").as_value()
            checks.append(((dt <= int(max(_isa.Dtype)))
                           & (getattr(f, f"{i}_sbuf") | (dt == _isa.Dtype.FP32)),
                           ErrorCode.BAD_DTYPE))
        checks += [(f.dtype.as_value() <= int(max(_isa.Dtype)), ErrorCode.BAD_DTYPE),
                   ((f.rows != 0) & (f.cols != 0), ErrorCode.BAD_SHAPE),
                   (_late_rect(n, self.sbuf_words), ErrorCode.BAD_RANGE)]
        for k, i in enumerate(ins):
            def in_range(s, k=k, i=i):
                f = _slot_fields(op, s)
                sbuf, bank = getattr(f, f"{i}_sbuf"), getattr(f, f"{i}_bank")
                return Mux(sbuf, _late_source(k, n, self.sbuf_words)(s),
                           (bank < banks) & (s.bounds.src_hi[k] <= pwords)
                           & (s.bounds.phi <= n))
            checks.append((in_range, ErrorCode.BAD_RANGE))
            if not reduce:
                def apart(s, k=k, i=i):
                    return (~getattr(_slot_fields(op, s), f"{i}_sbuf")
                            | _late_apart(op, f"{i}_addr", k)(s))
                checks.append((apart, ErrorCode.BAD_RANGE))
        return checks

    def _vector_dispatch(self, m, hv, case, ok, head, te_e, te_r, dma_e, act_held, act_e,
                         coll_e, matmul_writes, act_r, act_srcs, early_terms):
        """The vector commands go to the activation path as ACTIVATE does: its region is the
        SBUF words they write, and each PSUM operand waits for the MATMULs writing it."""
        for o in _VECTOR_OPS:
            f, bounds = hv.v[o], hv.bounds
            ins = ([] if o == Opcode.TRANSPOSE else
                   ["in0"] + (["in1"] if o == Opcode.TENSOR_TENSOR else []))

            def free(s, o=o, ins=ins):  # slot s's command: its engines free, its operands' RAW
                f, bounds = s.v[o], s.bounds
                raws = []  # a MATMUL in flight writes operand k
                for k, i in enumerate(ins):
                    sbuf, bank, addr = (getattr(f, f"{i}_{x}") for x in ("sbuf", "bank", "addr"))
                    raws.append(matmul_writes(sbuf, bank, bounds.source(k, addr)))
                return (~act_e & ~dma_e & ~coll_e
                        & ~(te_e & te_r.overlaps(*bounds.region))), *raws

            with case(o) as go:
                rect = bounds.region
                name = o.name.lower()
                m.d.comb += go.eq(~self.hold & early_terms(
                    free, f"{name}_go", *(f"{name}_raw{k}" for k in range(len(ins)))))
                with m.If(go & ok):
                    m.d.sync += self.act.valid.eq(1)
                with m.If(~act_held):
                    m.d.sync += [self.act.payload.eq(head), *act_r.set(*rect)]
                    for k, (region, psum, bank_sig) in enumerate(act_srcs):
                        if k < len(ins):
                            i = ins[k]
                            sbuf, bank, addr = (getattr(f, f"{i}_{x}")
                                                for x in ("sbuf", "bank", "addr"))
                            m.d.sync += [*region.set(*bounds.source(k, addr)),
                                         psum.eq(~sbuf), bank_sig.eq(bank)]
                        else:
                            m.d.sync += psum.eq(0)

    def elaborate(self, platform):
        # Design note: two slots hold a descriptor each; the older is the head, which the dispatch
        # reads. A descriptor's checks run as it enters a slot: each check's result is a bit of
        # the slot's `checks`, registered beside the descriptor with its regions, the shapes the
        # dispatch needs and the DRAM bound's parts (the room, rows x stride in two DSP
        # products). The range checks are late: a cycle after the entry they compare the sums
        # the regions registered (part + rows, addr + cols, ...), so no check chains an adder
        # into a compare as the descriptor enters (that was the path at 90.6 MHz); the DRAM
        # bound's sums are formed in that cycle too. A cycle after that each slot has its
        # verdict (the first failing check's code, registered), and the bound's compare; whether
        # it passes is two registers, formed from the values those take (`passes`). Whether
        # a descriptor enters depends only on the slots' valid bits, never on the dispatch.
        # The dispatch decision reads registers only: every hazard compare (an engine's record
        # against the head's regions) is formed in the cycle before and registered (`early`),
        # for each slot and chosen by `cur` (`early_head`: no multiplexer of the slots' wide
        # records in front of the compares' carry chains).
        # Those inputs change only as a command leaves the head (dispatched or failed), which
        # also loads a record, or as one enters an empty head, so the head waits one cycle
        # after either (`settled`): at most one dispatch every two cycles, at the earliest three
        # cycles after a descriptor entered. With one register stage fewer the sequencer was
        # 62.9 MHz on the ECP5-85F, its path the compares -> go -> the records' enables. The
        # MATMUL checks read the k and R of the last LOAD_STATIONARY that entered
        # before it (it dispatches first, or it fails and the MATMUL is dropped with it). Each
        # engine runs one command at a time; the hazard records are the regions of the command
        # each engine holds. An engine's payload and hazard record load the head's fields in
        # every cycle the engine is free (not `held`), dispatched or not: the dispatch cycle is
        # the last such, and nothing reads them before it. So only the valid bits, the indices
        # and the counts wait for the dispatch decision.
        m = Module()
        n, words, banks, pwords = self.n, self.sbuf_words, self.psum_banks, self.psum_words

        # The two slots (see the design note) and the head: the older slot's record.
        slot_layout = self._slot_layout()
        slots = [Signal(slot_layout, name=f"slot{i}") for i in range(2)]
        slot_valid = [Signal(name=f"slot{i}_valid") for i in range(2)]
        cur = Signal()  # the older slot: the head
        h = Signal(slot_layout)
        m.d.comb += h.eq(Mux(cur, slots[1], slots[0]))
        head, head_valid = h.desc, Signal()
        m.d.comb += head_valid.eq(Mux(cur, slot_valid[1], slot_valid[0]))
        op = Signal(4)
        m.d.comb += op.eq(head[:4])
        # The head's opcode as it was in the cycle before, one bit an opcode: the dispatch
        # reads it (not the live one, behind the `cur` multiplexer), which is exact while
        # `settled`; every cycle the dispatch reads (`ok`) is one. (Decoded as it is
        # registered: a case's bit is one register, not a compare, in front of its `go`.)
        op_is = Signal(1 << 4)
        m.d.sync += op_is.eq(Const(1, 1 << 4) << op)
        hv = _SlotView(h)
        v = hv.v

        error = Signal(ErrorCode)
        error_index = Signal(ERROR_INDEX_BITS)
        executed = Signal(32)
        m.d.comb += [self.error_code.eq(error), self.error_index.eq(error_index),
                     self.executed.eq(executed)]
        # K of the last LOAD_STATIONARY (0: none yet, or its tags were bad)
        stat_k = Signal(range(MAX_RATIO * n + 1))
        # R: the moving rows a partition holds for its tile (1 dense; m / n of its pattern)
        stat_ratio = Signal(range(MAX_RATIO + 1), init=1)
        dma_index = Signal(ERROR_INDEX_BITS)  # the position of the DMA command dispatched last
        coll_index = Signal(ERROR_INDEX_BITS)  # ... and of the COLLECTIVE

        # --- Checks, of the descriptor entering the head register (or of the head's). -------
        late_rect = _late_rect(n, words)  # the rectangle's range check (late)

        entry = Signal()  # a descriptor enters a slot this cycle
        chk = Signal(DESCRIPTOR_BITS)
        m.d.comb += chk.eq(self.desc.payload)
        cv = {o: data.View(DESCRIPTOR_LAYOUTS[o], chk) for o in Opcode}

        # A LOAD_STATIONARY reads its tile's rows (slots) from as many partitions; a MATMUL
        # after a sparse one reads R words of ceil(K / R) partitions a moving column.
        patterns = parse_sparsity(_PATTERNS if self.sparse else ())
        chk_ls, chk_mm = cv[Opcode.LOAD_STATIONARY], cv[Opcode.MATMUL]
        chk_ls_slots = slots_of(m, chk_ls.k, chk_ls.sparsity.as_value(), patterns,
                                name="chk_ls_slots")
        chk_ls_ratio = ratio_of(m, chk_ls.sparsity.as_value(), patterns, name="chk_ls_ratio")
        # A MATMUL is checked against the last LOAD_STATIONARY that entered a slot before it:
        # every command ahead of it dispatches first, or fails and takes it along (`drop`,
        # which sets these back to the last dispatched one's).
        last_k, last_ratio = Signal.like(stat_k), Signal.like(stat_ratio)
        if self.sparse:
            chk_mm_rows = ceil_div(m, chk_mm.k, last_ratio, name="chk_mm_rows")
            chk_mm_words = times_ratio(m, chk_mm.f, last_ratio, name="chk_mm_words", width=18)
        else:  # R is 1
            chk_mm_rows, chk_mm_words = chk_mm.k, chk_mm.f
        # The command's regions (see _Bounds), computed as it enters and registered beside it.
        bounds, bounds_q = _Bounds("chk"), hv.bounds
        # A DMA command's DRAM bound, last byte <= dram_bytes, that is (rows - 1) * stride <=
        # room = dram_bytes - dram_addr - cols * size, is checked in three steps: as the
        # command enters, dram_bytes - dram_addr and cols * size; in the slot, rows * stride
        # in two partial products (a DSP each, between registers: from the command queue's
        # LUT RAM through a DSP was a timing path), the room and room + stride; then the sum
        # of the partial products and the compare (`beyond`). These are formed from the
        # fields of a DMA command whatever the opcode (no opcode decoding before them; only a
        # DMA command's are read). The head waits for it (`aged`) if it is a DMA command whose
        # checks before the bound pass (`bound`); its verdict (below) has the checks before the
        # bound and after it apart.
        dma_f = cv[Opcode.DMA_LOAD]  # (DMA_STORE's layout is the same)
        assert DESCRIPTOR_LAYOUTS[Opcode.DMA_STORE] == DESCRIPTOR_LAYOUTS[Opcode.DMA_LOAD]
        shift = Signal(2)  # log2 of the element's bytes
        with m.Switch(dma_f.dtype.as_value()):
            with m.Case(*(int(d) for d in _isa.Dtype if d.nbytes == 2)):
                m.d.comb += shift.eq(1)
            with m.Case(*(int(d) for d in _isa.Dtype if d.nbytes == 4)):
                m.d.comb += shift.eq(2)
        room0, nbytes = Signal(signed(34)), Signal(18)  # dram_bytes - dram_addr; cols * size
        m.d.comb += [room0.eq(self.dram_bytes - dma_f.dram_addr),
                     nbytes.eq(dma_f.cols << shift)]
        # What a slot records: the descriptor, its checks and its regions. Entering, it goes
        # to the head's slot if that is empty, else to the other.
        checks = Signal(_CHECKS)  # which of chk's checks pass (the `table` below says which)
        m.d.comb += checks.eq(0)  # (bits an opcode does not use: one process drives them all)
        record = Signal(slot_layout)
        m.d.comb += [record.desc.eq(chk), record.checks.eq(checks),
                     record.room0.eq(room0), record.nbytes.eq(nbytes),
                     record.ls_ratio.eq(chk_ls_ratio), record.bounds.eq(bounds.sig)]
        target = Signal()
        m.d.comb += target.eq(Mux(head_valid, ~cur, cur))
        # each slot's DRAM bound compare (registered with its verdict), and whether it is known
        beyonds, aged = [], []
        for i, slot in enumerate(slots):
            with m.If(entry & (target == i)):
                m.d.sync += slot.eq(record)
            span_lo = Signal(27, name=f"slot{i}_span_lo")  # rows * dram_stride[:18]
            span_hi = Signal(23, name=f"slot{i}_span_hi")  # rows * dram_stride[18:]
            room = Signal(signed(35), name=f"slot{i}_room")  # dram_bytes - dram_addr - bytes
            reach = Signal(signed(36), name=f"slot{i}_reach")  # room + stride
            beyond = Signal(name=f"slot{i}_beyond")
            age = Signal(2, name=f"slot{i}_age")
            f = _slot_fields(Opcode.DMA_LOAD, slot)
            m.d.comb += beyond.eq((room < 0) | (span_lo + (span_hi << 18) > reach))
            m.d.sync += [span_lo.eq(f.rows * f.dram_stride[:18]),
                         span_hi.eq(f.rows * f.dram_stride[18:]),
                         room.eq(slot.room0 - slot.nbytes),
                         reach.eq(slot.room0 - slot.nbytes + f.dram_stride),
                         age.eq(Cat(1, age[0]))]
            with m.If(entry & (target == i)):
                m.d.sync += age.eq(0)
            beyonds.append(beyond)
            aged.append(age)
        ls_ratio = h.ls_ratio
        # The dispatch reads its compares registered (see the design note): each is formed in
        # the cycle before from the head and the hazard records, which change only as a command
        # leaves the head (dispatched or failed) or enters an empty one. `settled`: neither
        # happened in the cycle before, so the registered compares are the head's and the
        # records' of this cycle; the head waits while it is not.
        settled = Signal()

        early_regs = []  # (register, value): assigned in every cycle, after the dispatch

        def early(value, name):
            """``value`` as it was in the cycle before (exact while ``settled``). Registered
            in every cycle, whatever the opcode (the dispatch's cases are on ``op_is``)."""
            q = Signal(Value.cast(value).shape(), name=f"early_{name}")
            early_regs.append((q, value))
            return q

        slot_views = [_SlotView(slot) for slot in slots]

        def early_head(fn, name):
            """``early`` of ``fn``'s value for the head, a function of a slot's view: formed
            for each slot and chosen by `cur` (so the compares read the slots' registers, not
            the head's wide multiplexer in front of their carry chains: timing)."""
            return early(Mux(cur, fn(slot_views[1]), fn(slot_views[0])), name)

        def early_terms(fn, name, *waits):
            """Whether the head may go, from ``fn``'s values for a slot: whether its engines
            are free, then whether each wait holds (``waits`` names them), each term chosen
            for the head and registered on its own, as ``early_head`` does (so the compares
            behind a wait and the engines' terms meet after their registers, in the
            dispatch's gate: timing)."""
            per_slot = [fn(view) for view in slot_views]  # (free, *waits) a slot
            terms = [early(Mux(cur, per_slot[1][k], per_slot[0][k]), term)
                     for k, term in enumerate((name, *waits))]
            return terms[0] & ~Cat(*terms[1:]).any() if waits else terms[0]

        # Each check's result enters the slot as a bit of `checks` (a late check's is registered
        # a cycle later); the first failing one's code is found in the slot two cycles after
        # the entry (below), from `table`: for each opcode case, the bits (or late checks) and
        # codes of the checks before the DRAM bound ("fault") and after it.
        table = {}
        cases = []

        @contextlib.contextmanager
        def opcase(*ops):
            table[ops] = {"fault": [], "fault_after": []}
            cases.append(ops)
            with m.Case(*ops):
                yield
            cases.pop()

        # Each opcode's checks have bits of their own, assigned after the opcode switch,
        # whatever the opcode: no opcode multiplexer between a check and its bit.
        pending = []  # (bit, ok)

        def chain(checks_, target="fault"):
            """checks_: (ok, code) in order; the first not ok is the fault (``target``). An ok
            that is a function is a late check: of the slot, registered a cycle after entry."""
            entries = table[cases[-1]]
            for ok, code in checks_:
                if callable(ok):
                    entries[target].append((ok, code))
                    continue
                j = len(pending)
                assert j < _CHECKS, "more checks than Sequencer's _CHECKS bits"
                pending.append((j, ok))
                entries[target].append((j, code))

        with m.Switch(chk[:4]):
            for o in (Opcode.DMA_LOAD, Opcode.DMA_STORE):
                with opcase(o):
                    f = cv[o]
                    dt = f.dtype.as_value()
                    m.d.comb += bounds.rect(f.part, f.rows, f.sbuf_addr, f.cols)
                    align = Mux(shift == 2, 0b11, Mux(shift == 1, 0b01, 0b00))
                    chain([(dt <= int(max(_isa.Dtype)), ErrorCode.BAD_DTYPE),
                           ((f.rows != 0) & (f.cols != 0), ErrorCode.BAD_SHAPE),
                           (late_rect, ErrorCode.BAD_RANGE)])
                    # (then the bound)
                    chain([(((f.dram_addr[:2] | f.dram_stride[:2]) & align) == 0,
                            ErrorCode.BAD_ALIGN)], target="fault_after")
            with opcase(Opcode.LOAD_STATIONARY):
                f = cv[Opcode.LOAD_STATIONARY]
                m.d.comb += bounds.rect(f.part, chk_ls_slots, f.sbuf_addr, f.m)
                sp = f.sparsity.as_value()
                chain([((sp == 0) | ((sp <= int(max(_isa.Sparsity))) & self.sparse),
                        ErrorCode.BAD_FIELD),
                       (f.fmt.as_value() <= int(max(_isa.OPERAND_DTYPES)), ErrorCode.BAD_DTYPE),
                       ((f.k >= 1) & (chk_ls_slots >= 1) & (chk_ls_slots <= n) & (f.m >= 1)
                        & (f.m <= n), ErrorCode.BAD_SHAPE),
                       (late_rect, ErrorCode.BAD_RANGE)])
            with opcase(Opcode.MATMUL):
                f = cv[Opcode.MATMUL]
                m.d.comb += [*bounds.rect(f.part, chk_mm_rows, f.sbuf_addr, chk_mm_words),
                             _exact(bounds.psum_hi, f.psum_addr + f.f)]
                chain([(f.fmt.as_value() <= int(max(_isa.OPERAND_DTYPES)), ErrorCode.BAD_DTYPE),
                       (f.f != 0, ErrorCode.BAD_SHAPE),
                       ((last_k != 0) & (f.k == last_k), ErrorCode.BAD_SHAPE),
                       (late_rect, ErrorCode.BAD_RANGE),
                       (lambda s: (_slot_fields(Opcode.MATMUL, s).bank < banks)
                        & (s.bounds.psum_hi <= pwords), ErrorCode.BAD_RANGE)])
            with opcase(Opcode.ACTIVATE):
                f = cv[Opcode.ACTIVATE]
                m.d.comb += [*bounds.rect(f.part, f.rows, f.dst_addr, f.cols),
                             _exact(bounds.src_hi[0], f.src_addr + f.cols)]

                def src_ok(s):
                    a = _slot_fields(Opcode.ACTIVATE, s)
                    return Mux(a.src_sbuf,
                               _late_source(0, n, words)(s)
                               & _late_apart(Opcode.ACTIVATE, "src_addr", 0)(s),
                               (a.src_bank < banks) & (s.bounds.src_hi[0] <= pwords))
                chain([((f.func.as_value() <= int(max(_isa.ActivationFunc)))
                        & (f.mode.as_value() <= int(max(_isa.Rounding))), ErrorCode.BAD_FIELD),
                       (f.dtype.as_value() <= int(max(_isa.Dtype)), ErrorCode.BAD_DTYPE),
                       ((f.rows != 0) & (f.cols != 0), ErrorCode.BAD_SHAPE),
                       (late_rect, ErrorCode.BAD_RANGE),
                       (src_ok, ErrorCode.BAD_RANGE),
                       (~f.bias_en | (f.bias_addr < words), ErrorCode.BAD_RANGE)])
            with opcase(Opcode.COLLECTIVE):
                f = cv[Opcode.COLLECTIVE]
                m.d.comb += bounds.rect(f.part, f.rows, f.sbuf_addr, f.cols)  # (for its check)
                # P: the size of the sub-ring `dim` names (a ring's row is the ring).
                R = self.torus_rows
                P_row = self.ranks // R if self.ring else 0
                P_col = R if self.ring and R > 1 else 0
                on_col = f.dim.as_value() == _isa.CollectiveDim.COLUMN
                cop = f.coll_op.as_value()
                permute = cop == _isa.CollectiveOp.PERMUTE
                routed = (cop == _isa.CollectiveOp.ALL_TO_ALL) | permute

                def a2a_words(P):  # the words an all-to-all writes a partition: P·⌈cols/P⌉
                    if not P:
                        return 0
                    if P & (P - 1) == 0:
                        k = P.bit_length() - 1
                        return ((f.cols + P - 1) >> k) << k
                    return f.cols + (P - f.cols % P) % P

                a2a = Signal(18)
                m.d.comb += a2a.eq(Mux(on_col, a2a_words(P_col), a2a_words(P_row)))
                out = Mux(permute, f.cols, a2a)
                meet = (f.sbuf_addr < f.dst_addr + out) & (f.dst_addr < f.sbuf_addr + f.cols)
                no_ring = Const(int(P_row == 0))  # (then BAD_FIELD below)
                # (outside a ring a PERMUTE's shift is never right: P - 1 = -1; COLUMN needs
                # a torus)
                def below(P):  # (a constant 0 where there is no such ring)
                    return f.shift < P if P else Const(0)

                shift_ok = (f.shift != 0) & Mux(on_col, below(P_col), below(P_row))
                dim_ok = ~on_col | Const(int(P_col != 0))
                chain([((cop <= int(max(_isa.CollectiveOp))) & dim_ok & (~permute | shift_ok),
                        ErrorCode.BAD_FIELD),
                       ((f.rows != 0) & (f.cols != 0), ErrorCode.BAD_SHAPE),
                       (f.rows == self.link_width, ErrorCode.BAD_SHAPE),
                       (late_rect, ErrorCode.BAD_RANGE),
                       (~routed | (f.dst_addr + out <= words) | no_ring, ErrorCode.BAD_RANGE),
                       (~routed | ~meet | no_ring, ErrorCode.BAD_RANGE),
                       (Const(int(self.ring)), ErrorCode.BAD_FIELD)])
            with opcase(Opcode.BARRIER, Opcode.SET_SEED):
                pass
            if self.vector_engine:
                for o in (Opcode.TENSOR_TENSOR, Opcode.TENSOR_SCALAR, Opcode.TENSOR_REDUCE):
                    with opcase(o):
                        f = cv[o]
                        out_cols = 1 if o == Opcode.TENSOR_REDUCE else f.cols
                        m.d.comb += bounds.rect(f.part, f.rows, f.dst_addr, out_cols)
                        for i in range(2 if o == Opcode.TENSOR_TENSOR else 1):
                            m.d.comb += _exact(bounds.src_hi[i],
                                               getattr(f, f"in{i}_addr") + f.cols)
                        chain(self._vector_checks(o, f))
                with opcase(Opcode.TRANSPOSE):
                    f = cv[Opcode.TRANSPOSE]
                    # The rectangle: the words it writes; its source's ends beside it.
                    m.d.comb += [*bounds.rect(f.dst_part, f.cols, f.dst_addr, f.rows),
                                 _exact(bounds.sig.src_phi, f.part + f.rows),
                                 _exact(bounds.src_hi[0], f.src_addr + f.cols)]

                    def src_ok(s):
                        return (s.bounds.src_phi <= n) & (s.bounds.src_hi[0] <= words)

                    def apart(s):  # the source and the destination share no word
                        t, b = _slot_fields(Opcode.TRANSPOSE, s), s.bounds
                        meet = ((t.part < b.phi) & (t.dst_part < b.src_phi)
                                & (t.src_addr < b.hi) & (t.dst_addr < b.src_hi[0]))
                        return ~meet

                    chain([((f.rows != 0) & (f.cols != 0), ErrorCode.BAD_SHAPE),
                           (src_ok, ErrorCode.BAD_RANGE),
                           (late_rect, ErrorCode.BAD_RANGE),
                           (apart, ErrorCode.BAD_RANGE)])
        m.d.comb += [checks[j].eq(ok) for j, ok in pending]

        # The late checks' results, registered a cycle after the descriptor entered; the
        # verdict of each slot's checks a cycle after that: its first failing check before the
        # DRAM bound (`fault`: BAD_OPCODE for an opcode not built), after it (`after`), and
        # whether it is a DMA command whose checks before it pass (`bound`: then the DRAM
        # bound, `beyond`, stands between the two; it is known in the same cycle).
        # `clean`: every check passes (the DRAM bound aside), registered with the codes.
        late_fns = list({id(j): j for entries in table.values()
                         for part_ in entries.values() for j, _ in part_ if callable(j)}
                        .values())
        late_index = {id(fn): k for k, fn in enumerate(late_fns)}
        head_fault = Signal(ErrorCode)  # the head's first failing check, or OK
        faults, readies, passes = [], [], []
        for i, slot in enumerate(slots):
            late_i = Signal(max(len(late_fns), 1), name=f"slot{i}_late")
            m.d.sync += [late_i[k].eq(fn(slot)) for k, fn in enumerate(late_fns)]
            fault_i = Signal(ErrorCode, name=f"slot{i}_fault")
            after_i = Signal(ErrorCode, name=f"slot{i}_after")
            bound_d, clean_d = Signal(name=f"slot{i}_bound"), Signal(name=f"slot{i}_clean")
            m.d.sync += [fault_i.eq(ErrorCode.OK), after_i.eq(ErrorCode.OK)]
            with m.Switch(slot.desc[:4]):
                for ops, entries in table.items():
                    with m.Case(*ops):
                        def holds(j, slot=slot, late_i=late_i):  # a check's bit
                            return late_i[late_index[id(j)]] if callable(j) else slot.checks[j]

                        for part_, sig in (("fault", fault_i), ("fault_after", after_i)):
                            for k, (j, code) in enumerate(entries[part_]):
                                with (m.If if k == 0 else m.Elif)(~holds(j)):
                                    m.d.sync += sig.eq(code)
                        every = entries["fault"] + entries["fault_after"]
                        m.d.comb += clean_d.eq(Cat(1, *(holds(j) for j, _ in every)).all())
                        if Opcode.DMA_LOAD in ops or Opcode.DMA_STORE in ops:
                            passed = Cat(holds(j) for j, _ in entries["fault"]).all()
                            m.d.comb += bound_d.eq(passed)
                with m.Default():
                    m.d.sync += fault_i.eq(ErrorCode.BAD_OPCODE)
            # A DMA command whose checks before the DRAM bound pass, beyond it (registered
            # with the codes: no logic between the bound's compare and the register).
            out_i = Signal(name=f"slot{i}_out_of_bounds")
            # Ready, and every check before and after the bound passes: registered from the
            # values its terms take in the next cycle, so the dispatch's `ok` reads two
            # registers a slot. The age's next is its low bit but in the cycle a descriptor
            # enters the slot: then, in the next, the slot is not the head or the head is not
            # settled (`ok` and `fail` read nothing of it).
            clean_i = Signal(name=f"slot{i}_ready_clean")
            m.d.sync += [out_i.eq(bound_d & beyonds[i]), clean_i.eq(aged[i][0] & clean_d)]
            verdict = Mux(out_i, ErrorCode.BAD_RANGE, after_i)
            faults.append(Mux(fault_i != ErrorCode.OK, fault_i, verdict))
            readies.append(aged[i][1])  # its verdict is known (and a DMA command's bound)
            passes.append(clean_i & ~out_i)
        m.d.comb += head_fault.eq(Mux(cur, faults[1], faults[0]))
        head_ready = Mux(cur, readies[1], readies[0])
        head_passes = Mux(cur, passes[1], passes[0])  # ready, and its head_fault is OK

        # --- Hazard records: the regions of the command each engine holds. ------------------
        word = range(words + 1)
        part = range(n + 1)
        Region = functools.partial(_Region, pshape=part, wshape=word)

        dma_r, dma_load = Region("dma"), Signal()  # the SBUF words a DMA command touches
        te_r = Region("te")  # ... the tensor feeder reads
        act_r = Region("act")  # ... an ACTIVATE writes
        pword = range(pwords + 1)
        # The words an ACTIVATE reads (compared only when they are PSUM words).
        act_src = Region("act_src", wshape=range(max(words, pwords) + 1))
        act_psum, act_bank = Signal(), Signal(range(max(banks, 2)))
        # ... and the second operand's of a TENSOR_TENSOR.
        act_src1 = Region("act_src1", wshape=range(max(words, pwords) + 1))
        act_psum1, act_bank1 = Signal(), Signal(range(max(banks, 2)))
        act_srcs = ((act_src, act_psum, act_bank), (act_src1, act_psum1, act_bank1))
        # MATMULs in flight per PSUM bank, and the union of the PSUM words they write.
        mm_count = [Signal(range(_MAX_MATMULS + 1), name=f"mm_count{b}") for b in range(banks)]
        # ... whether the count is not 0, and whether it is _MAX_MATMULS (registered with it)
        mm_live = [Signal(name=f"mm_live{b}") for b in range(banks)]
        mm_full = [Signal(name=f"mm_full{b}") for b in range(banks)]
        mm_r = [Region(f"mm{b}", wshape=pword) for b in range(banks)]
        # A bank's MATMUL reported written this cycle; and whether the bank is live, and full,
        # in the next cycle if nothing is dispatched in this one: the dispatch reads them
        # registered with its compares (`early`: exact while `settled`, when the cycle before
        # dispatched nothing), so no count register lies in front of its `go`.
        mm_dec = [self.te_done & (self.te_done_bank == b) for b in range(banks)]
        mm_live_d = [Mux(mm_dec[b], mm_count[b] != 1, mm_live[b]) for b in range(banks)]
        mm_full_d = [~mm_dec[b] & mm_full[b] for b in range(banks)]
        stat_m = Signal(part)  # m of the last LOAD_STATIONARY: a MATMUL writes partitions < m

        def matmul_writes(sbuf, bank, src):
            """A MATMUL in flight writes a word of the PSUM source ``src`` of bank ``bank``
            (none if the source is in SBUF: ``sbuf``)."""
            return Cat(~sbuf & (bank == b) & mm_r[b].overlaps(*src) & mm_live_d[b]
                       for b in range(banks)).any()

        # An engine is held from the cycle it is offered a command (its stream's valid), through
        # the cycle after it took it (when its busy, rising then, is not yet registered), while
        # its busy is up, and a cycle past its busy's fall: a command behind it waits that cycle
        # more. Held is one register: in cycle t + 1 it is `valid | (valid & ready, registered)
        # | busy, registered`, which is the cycle t's `dispatched to it | valid | busy` (a
        # stream's valid is set only by the dispatch and cleared as the engine takes it).
        # Design note: each case's `go` is registered, formed in the cycle before from the
        # compares' values and each engine's `valid | busy` (its held state in the next cycle
        # if nothing is dispatched in this one: exact while `settled`), as `early` forms the
        # compares; so between the registers and a dispatch's enables lie only the case's
        # opcode bit, `ok` and `hold` (timing). A case whose command also waits on PSUM (a
        # MATMUL's hazards, an operand a MATMUL writes) registers each wait beside the engines'
        # term (`early_terms`): the compares behind a wait and the engines' terms meet in the
        # gate after the registers, not in front of one.
        held_regs = []

        def held(name, streams, busy, ops):
            """The engine's held register, and its value in the next cycle if nothing is
            dispatched in this one."""
            reg, engaged = Signal(name=f"{name}_held"), Signal(name=f"{name}_engaged")
            m.d.comb += engaged.eq(Cat(s.valid for s in streams).any() | busy)
            held_regs.append((reg, engaged, ops))
            return reg, engaged

        dma_held, dma_e = held("dma", [self.dma], self.dma_busy,
                               (Opcode.DMA_LOAD, Opcode.DMA_STORE))
        te_held, te_e = held("te", [self.te], self.te_feed_busy,
                             (Opcode.LOAD_STATIONARY, Opcode.MATMUL))
        act_held, act_e = held("act", [self.act, self.seed], self.act_busy,
                               (Opcode.ACTIVATE, Opcode.SET_SEED, *_VECTOR_OPS))
        coll_held, coll_e = held("coll", [self.coll], self.coll_busy, (Opcode.COLLECTIVE,))
        te_busy_q = Signal()  # (idle a cycle late too, never early: te_held covers the take)
        m.d.sync += te_busy_q.eq(self.te_busy)
        all_idle = ~dma_held & ~te_held & ~te_busy_q & ~act_held & ~coll_held
        # ... in the next cycle, if nothing is dispatched in this one
        all_idle_e = ~dma_e & ~te_e & ~self.te_busy & ~act_e & ~coll_e

        # --- Dispatch. -------------------------------------------------------------------------
        for s in (self.dma, self.te, self.act, self.seed, self.coll):
            with m.If(s.ready):
                m.d.sync += s.valid.eq(0)

        go = Signal()  # the head (legal) is dispatched this cycle
        abort = Signal()  # a running command's error arrives: nothing is dispatched
        engine_error = Signal()  # abort's BUS_ERROR / LINK_TIMEOUT (one register)
        ok = Signal()  # the head is legal and may go (if its engine is free)
        # After a sparse LOAD_STATIONARY nothing is dispatched until its tile has loaded and
        # its tags are known good (a bad tile stops the queue right behind it, as the ISS).
        tags_wait = Signal()
        # The sparse LOAD_STATIONARY's index: it follows `executed` until the wait begins (so
        # it is enabled by a register, not by the dispatch).
        tags_index = Signal(ERROR_INDEX_BITS)
        with m.If(~tags_wait):
            m.d.sync += tags_index.eq(executed)
        # (settled: the head was valid in the cycle before and did not leave, so it is valid)
        # (`abort`'s third cause, BAD_TAGS, arrives only while `tags_wait`: left out here, it
        # keeps the tensor engine's held state out of `ok`)
        m.d.comb += ok.eq(settled & head_passes & ~engine_error & ~tags_wait)
        mm_go = Signal()  # a MATMUL is dispatched this cycle (to mm.bank)
        ls, mm = v[Opcode.LOAD_STATIONARY], v[Opcode.MATMUL]
        # Which bank the head's MATMUL names, one bit a bank, registered (exact while
        # `settled`, as every cycle mm_go is): a bank's count and region are enabled by a
        # register, not by a compare behind the head's multiplexer.
        def bank_is(s):  # slot s's MATMUL's bank, one bit a bank
            return Cat(*(s.v[Opcode.MATMUL].bank == b for b in range(banks)))

        mm_bank_is = early_head(bank_is, "mm_bank_is")
        d = v[Opcode.DMA_LOAD]
        a = v[Opcode.ACTIVATE]
        # Each opcode case drives a `go` of its own, zero outside the case; the head's is
        # their OR, and a case's enables read its own (no decoding between `op_is` and them).
        case_go = {}  # opcode -> its case's go
        gos = []  # every case's go

        def any_go(ops):  # the OR of the go of the cases of ``ops`` (each case once)
            cases_ = {id(case_go[o]): case_go[o] for o in ops if o in case_go}
            return Cat(*cases_.values()).any()

        @contextlib.contextmanager
        def case(*ops):
            go_ = Signal(name=f"go_{ops[0].name.lower()}")
            case_go.update((o, go_) for o in ops)
            gos.append(go_)
            with m.If(Cat(op_is[o.value] for o in ops).any()):
                yield go_

        with case(Opcode.DMA_LOAD, Opcode.DMA_STORE) as go_dma:
            rect = bounds_q.region
            is_load = op_is[Opcode.DMA_LOAD.value]
            m.d.comb += go_dma.eq(~self.hold & early_head(lambda s: (
                ~dma_e & ~act_e & ~coll_e
                & ~((s.op == Opcode.DMA_LOAD) & te_e & te_r.overlaps(*s.bounds.region))),
                "dma_go"))
            with m.If(go_dma & ok):
                m.d.sync += [self.dma.valid.eq(1), dma_index.eq(executed)]
            with m.If(~dma_held):  # (see the design note: recorded, dispatched or not)
                p = self.dma.payload
                m.d.sync += [*dma_r.set(*rect), dma_load.eq(is_load),
                             p.store.eq(~is_load), p.dtype.eq(d.dtype), p.part.eq(d.part),
                             p.rows.eq(d.rows), p.sbuf_addr.eq(d.sbuf_addr),
                             p.cols.eq(d.cols), p.dram_addr.eq(d.dram_addr),
                             p.dram_stride.eq(d.dram_stride)]
        with case(Opcode.LOAD_STATIONARY, Opcode.MATMUL) as go_te:
            is_mm = op_is[Opcode.MATMUL.value]
            rect = bounds_q.region

            def te_free(s):  # slot s's command: its engines free, a MATMUL's PSUM waits
                mm_, rect_, psum_hi = s.v[Opcode.MATMUL], s.bounds.region, s.bounds.psum_hi
                is_mm_ = s.op == Opcode.MATMUL
                full = (bank_is(s) & Cat(*mm_full_d)).any()  # the bank counts _MAX_MATMULS
                # A MATMUL writes PSUM partitions 0 .. m-1, the words it names of its bank:
                # it waits while an ACTIVATE reads them (from either of its sources; each
                # source's wait a term of its own).
                war = [is_mm_ & act_e & psum_ & (bank_ == mm_.bank)
                       & src_.overlaps(0, stat_m, mm_.psum_addr, psum_hi)
                       for psum_, bank_, src_ in ((act_psum, act_bank, act_src),
                                                  (act_psum1, act_bank1, act_src1))]
                free = (~te_e & ~coll_e & ~(dma_e & dma_load & dma_r.overlaps(*rect_))
                        & ~(act_e & act_r.overlaps(*rect_)))
                return free, is_mm_ & full, *war

            m.d.comb += go_te.eq(early_terms(te_free, "te_go", "te_mm_full", "te_mm_war0",
                                             "te_mm_war1"))
            with m.If(~te_held):
                m.d.sync += [self.te.payload.eq(head), *te_r.set(*rect)]
            with m.If(go_te & ok):
                m.d.sync += self.te.valid.eq(1)
                with m.If(is_mm):
                    m.d.comb += mm_go.eq(1)
                with m.Else():
                    m.d.sync += [stat_k.eq(ls.k), stat_m.eq(ls.m), stat_ratio.eq(ls_ratio)]
                    with m.If(early_head(
                            lambda s: s.v[Opcode.LOAD_STATIONARY].sparsity.as_value() != 0,
                            "ls_sparse")):
                        m.d.sync += tags_wait.eq(1)
        with case(Opcode.ACTIVATE) as go_act:
            rect = bounds_q.region
            src = bounds_q.source(0, a.src_addr)

            def act_free(s):  # slot s's command: its engines free, its source's RAW
                a_ = s.v[Opcode.ACTIVATE]
                # a MATMUL in flight writes PSUM words it reads
                raw = matmul_writes(a_.src_sbuf, a_.src_bank, s.bounds.source(0, a_.src_addr))
                return (~act_e & ~dma_e & ~coll_e
                        & ~(te_e & te_r.overlaps(*s.bounds.region))), raw

            m.d.comb += go_act.eq(~self.hold & early_terms(act_free, "act_go", "act_raw"))
            with m.If(~act_held):
                m.d.sync += [self.act.payload.eq(head), *act_r.set(*rect), *act_src.set(*src),
                             act_psum.eq(~a.src_sbuf), act_bank.eq(a.src_bank),
                             act_psum1.eq(0)]
            with m.If(go_act & ok):
                m.d.sync += self.act.valid.eq(1)
        if self.vector_engine:
            self._vector_dispatch(m, hv, case, ok, head, te_e, te_r, dma_e, act_held,
                                  act_e, coll_e, matmul_writes, act_r, act_srcs, early_terms)
        with case(Opcode.SET_SEED) as go_seed:
            m.d.comb += go_seed.eq(early(~act_e, "seed_go"))
            with m.If(~act_held):
                m.d.sync += self.seed.payload.eq(v[Opcode.SET_SEED].seed)
            with m.If(go_seed & ok):
                m.d.sync += self.seed.valid.eq(1)
        with case(Opcode.BARRIER) as go_barrier:
            m.d.comb += go_barrier.eq(early(all_idle_e, "barrier_go"))
        with case(Opcode.COLLECTIVE) as go_coll:
            m.d.comb += go_coll.eq(~self.hold & early(all_idle_e, "coll_go"))
            with m.If(~coll_held):
                m.d.sync += self.coll.payload.eq(head)
            with m.If(go_coll & ok):
                m.d.sync += [self.coll.valid.eq(1), coll_index.eq(executed)]
        m.d.comb += go.eq(Cat(*gos).any())

        # MATMULs in flight per bank: one more as one is dispatched, one less as the tensor
        # engine reports its last write; the region grows by each dispatched MATMUL's and is
        # set afresh by the first one after the count fell to zero.
        for b in range(banks):
            inc = mm_go & mm_bank_is[b]
            dec = mm_dec[b]
            # (live and full from compares of the count beside the decision, not of the sum)
            c = mm_count[b]
            up, down = inc & ~dec, dec & ~inc
            # (c + 1 and c - 1 beside the decision, chosen after it: no carry chain behind it)
            m.d.sync += [c.eq(Mux(up, c + 1, Mux(down, c - 1, c))),
                         mm_live[b].eq(Mux(up, 1, Mux(down, c != 1, c != 0))),
                         mm_full[b].eq(Mux(up, c == _MAX_MATMULS - 1, ~down & (c == _MAX_MATMULS)))]
            r = mm_r[b]
            lo, hi = mm.psum_addr, bounds_q.psum_hi
            grows = [early(stat_m > r.phi, f"mm{b}_phi_grows"),
                     early_head(lambda s, r=r: s.v[Opcode.MATMUL].psum_addr < r.lo,
                                f"mm{b}_lo_grows"),
                     early_head(lambda s, r=r: s.bounds.psum_hi > r.hi, f"mm{b}_hi_grows")]
            with m.If(inc):
                with m.If((c == 0) | ((c == 1) & dec)):
                    m.d.sync += r.set(0, stat_m, lo, hi)
                with m.Else():
                    m.d.sync += [r.phi.eq(Mux(grows[0], stat_m, r.phi)),
                                 r.lo.eq(Mux(grows[1], lo, r.lo)),
                                 r.hi.eq(Mux(grows[2], hi, r.hi))]

        m.d.sync += [q.eq(value) for q, value in early_regs]
        early_regs = None  # (an `early` below this would be left unassigned: it fails)

        # --- The head register, errors and counting. -----------------------------------------
        stopped = error != ErrorCode.OK
        dispatch = ok & go
        for reg, engaged, ops in held_regs:
            m.d.sync += reg.eq((ok & any_go(ops)) | engaged)
        fail = settled & head_ready & ~head_passes & ~tags_wait
        # A slot free (or the queue stopped, dropping what arrives): registers only.
        m.d.comb += self.desc.ready.eq(stopped | ~(slot_valid[0] & slot_valid[1]))
        m.d.comb += entry.eq(self.desc.valid & self.desc.ready & ~stopped & ~abort)
        with m.If(self.clear_error):
            m.d.sync += error.eq(ErrorCode.OK)
        with m.If(dispatch | fail):  # the head leaves; the other slot is the head next
            m.d.sync += cur.eq(~cur)
            for i in range(2):
                with m.If(cur == i):
                    m.d.sync += slot_valid[i].eq(0)
        with m.If(dispatch):
            m.d.sync += executed.eq(executed + 1)
        for i in range(2):
            with m.If(entry & (target == i)):
                m.d.sync += slot_valid[i].eq(1)
        drop = Signal()  # an error stops the queue: both slots are dropped
        with m.If(fail):  # after clear_error: an error in the same cycle is not lost
            m.d.comb += drop.eq(1)
            m.d.sync += [error.eq(head_fault), error_index.eq(executed)]
        # Errors of running commands: on the rising edge of the engine's flag (the DMA's stays
        # up until its next command; the collective engine's likewise). The DMA and the
        # collective engine never run at the same time, so at most one rises in a cycle.
        # Design note: each flag's edge is taken as it arrives and registered (the flag is
        # registered too, for the edge), so an error arrives a cycle after its engine raised
        # it: the engines sit apart from the sequencer on the device, and the edge reaches the
        # dispatch (`ok`, `abort`) and every enable behind it (a timing path), which so reads
        # one register for both. A command dispatched in that cycle still runs, as one
        # dispatched before the error was raised does (docs/contract.md §1).
        dma_error_q, coll_timeout_q = Signal(), Signal()
        bus_error, link_timeout = Signal(), Signal()
        bus_error_d = self.dma_error & ~dma_error_q
        link_timeout_d = self.coll_timeout & ~coll_timeout_q
        m.d.sync += [dma_error_q.eq(self.dma_error), coll_timeout_q.eq(self.coll_timeout),
                     bus_error.eq(bus_error_d), link_timeout.eq(link_timeout_d),
                     engine_error.eq(bus_error_d | link_timeout_d)]
        tags_known = tags_wait & ~te_held & ~self.te_loading
        bad_tags = tags_known & self.te_tags_bad
        # No descriptor enters the head register in the cycle such an error arrives.
        m.d.comb += abort.eq(engine_error | bad_tags)
        with m.If(tags_known):
            m.d.sync += tags_wait.eq(0)
        with m.If(bad_tags):  # nothing was dispatched after the LOAD_STATIONARY
            # The tensor engine forgot the tile: so does the MATMUL check, whatever the code.
            m.d.sync += stat_k.eq(0)
            with m.If(~stopped):  # an earlier command's error (a DMA's BUS_ERROR) stands
                m.d.comb += drop.eq(1)
                m.d.sync += [error.eq(ErrorCode.BAD_TAGS), error_index.eq(tags_index)]
        with m.If(bus_error):  # last: it wins over a check error in the same cycle
            m.d.comb += drop.eq(1)
            m.d.sync += [error.eq(ErrorCode.BUS_ERROR), error_index.eq(dma_index)]
        with m.Elif(link_timeout):
            m.d.comb += drop.eq(1)
            m.d.sync += [error.eq(ErrorCode.LINK_TIMEOUT), error_index.eq(coll_index)]
        with m.If(entry & (chk[:4] == Opcode.LOAD_STATIONARY)):
            m.d.sync += [last_k.eq(cv[Opcode.LOAD_STATIONARY].k), last_ratio.eq(chk_ls_ratio)]
        with m.If(drop):  # (after the entry: a descriptor entering in this cycle goes too)
            m.d.sync += [slot_valid[0].eq(0), slot_valid[1].eq(0),
                         last_k.eq(stat_k), last_ratio.eq(stat_ratio)]
        with m.If(bad_tags):  # the tile is forgotten, whether or not the queue was stopped
            m.d.sync += last_k.eq(0)
        m.d.sync += settled.eq(head_valid & ~dispatch & ~fail & ~drop)
        # (busy while an engine's error is on its way: the engine may be idle already)
        m.d.comb += self.busy.eq(slot_valid[0] | slot_valid[1] | ~all_idle | bus_error
                                 | link_timeout)
        return m
