"""The collective engine: one per core, ring all-reduce / reduce-scatter / all-gather, and the
routed all-to-all and permute."""

from amaranth.hdl import Array, Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, enum, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .fp32_add import FP32_ADD_MAX_STAGES, Fp32Adder
from .instances import shared
from .params import check_int, check_one_of
from .pipeline import delay

__all__ = ["CollectiveOp", "CollectiveDim", "CollectiveEngine", "COLLECTIVE_ADD_STAGES",
           "LINK_WIDTHS",
           "collective_command_layout", "link_layout", "tag_layout", "ROUTED_OPS", "check_ranks",
           "check_link_width", "check_depth", "check_watchdog", "setup_cycles",
           "DEFAULT_WATCHDOG_CYCLES", "MIN_WATCHDOG_CYCLES", "MAX_WATCHDOG_CYCLES"]

#: The adders' default pipeline depth: 100 MHz or more for the engine on an ECP5-85F (speed 6;
#: ``synth/report.md``), where 2 stages reach about 72.
COLLECTIVE_ADD_STAGES = 4
#: Link widths (fp32 words per beat) the engine can be built for.
LINK_WIDTHS = (1, 2, 4)
#: Largest ring the engine can be built for (the chunk table has ranks + 1 entries).
MAX_RANKS = 64
#: The link watchdog's default: cycles without a beat on either link before a command is
#: abandoned (``watchdog_cycles``; 0 turns the watchdog off).
DEFAULT_WATCHDOG_CYCLES = 1 << 16
#: Its smallest value: above the receiver's pipeline (1 + 7 adder stages), so that when the
#: watchdog fires no received beat is still on its way to memory.
MIN_WATCHDOG_CYCLES = 16
MAX_WATCHDOG_CYCLES = 1 << 30


class CollectiveOp(enum.Enum, shape=3):
    """The ``op`` field of a collective command (mirrored by ``golden.collective``)."""

    ALL_REDUCE = 0  #: reduce-scatter then all-gather: every rank ends with the sum
    REDUCE_SCATTER = 1  #: rank r ends with the reduced chunk r
    ALL_GATHER = 2  #: rank r contributes chunk r; every rank ends with all chunks
    ALL_TO_ALL = 3  #: rank r's chunk j goes to slot r of rank j's destination
    PERMUTE = 4  #: rank r's buffer goes to rank (r + shift) mod P's destination
    # 5..7 are reserved: an engine given one sets `error` and drops the command.


class CollectiveDim(enum.Enum, shape=1):
    """The ``dim`` field of a torus collective command (``hdl.torus``; mirrored by
    ``golden.isa``)."""

    ROW = 0  #: the ring of the node's row: C ranks (on a ring of cores: the ring itself)
    COLUMN = 1  #: the ring of the node's column: R ranks


#: The operations that route tagged beats (the others run the ring schedule).
ROUTED_OPS = (CollectiveOp.ALL_TO_ALL, CollectiveOp.PERMUTE)


def check_ranks(ranks) -> int:
    """``ranks``: 2 to :data:`MAX_RANKS` (:func:`~hdl.params.check_int`'s errors)."""
    return check_int("ranks", ranks, lo=2, hi=MAX_RANKS)


def check_link_width(link_width) -> int:
    """``link_width``: one of :data:`LINK_WIDTHS` (:func:`~hdl.params.check_one_of`'s)."""
    return check_one_of("link_width", link_width, LINK_WIDTHS, note="(fp32 words per beat)")


def check_depth(depth) -> int:
    """``depth``: 1 to 2^20 rows (:func:`~hdl.params.check_int`'s errors)."""
    return check_int("depth", depth, lo=1, hi=1 << 20, note="(rows of link_width words)")


def check_watchdog(watchdog_cycles) -> int:
    """``watchdog_cycles``: 0 or :data:`MIN_WATCHDOG_CYCLES` to :data:`MAX_WATCHDOG_CYCLES`."""
    return check_int("watchdog_cycles", watchdog_cycles, lo=MIN_WATCHDOG_CYCLES,
                     hi=MAX_WATCHDOG_CYCLES, also=(0,), note="(0: no watchdog)")


def setup_cycles(ranks: int, depth: int) -> int:
    """Cycles a command spends before its first memory read: the long division of its beat
    count by ``ranks`` (one cycle per bit of ``0..depth``), the chunk table (``ranks + 1``
    entries) and the look-up of the first chunk. The first read (``tx_rd.en`` or
    ``rx_rd.en``) of a ring command is issued this many cycles after the clock edge that
    takes the command (``tests/hdl/test_collective_units.py::test_setup_takes_setup_cycles``)."""
    return depth.bit_length() + ranks + 2


def collective_command_layout(depth: int, link_width: int) -> data.StructLayout:
    """One collective command: ``op`` over ``words`` fp32 words from row ``addr`` on; the
    routed ops write rows from ``dst`` on, a permute to rank + ``shift``."""
    return data.StructLayout({
        "op": CollectiveOp,
        "addr": range(max(depth, 2)),  # first row (of link_width words) of the buffer
        "words": range(depth * link_width + 1),  # n, 1..; addr + ceil(n / W) <= depth
        "dst": range(max(depth, 2)),  # ALL_TO_ALL, PERMUTE: first row of the destination
        "shift": range(MAX_RANKS),  # PERMUTE: 1 .. ranks - 1
    })


def tag_layout(ranks: int) -> data.StructLayout:
    """The tag every beat carries beside its words (used by the routed ops; the ring ops send
    zeros): its destination and origin ranks, ``last`` (the buffer's last row: its lanes
    past n are not written) and ``end`` (the origin's end-of-command token, no data)."""
    return data.StructLayout({"dest": range(ranks), "origin": range(ranks), "last": 1,
                              "end": 1})


def link_layout(ranks: int, link_width: int) -> data.StructLayout:
    """One beat on a link: ``link_width`` fp32 words and a :func:`tag_layout` tag."""
    return data.StructLayout({"data": data.ArrayLayout(32, link_width),
                              "tag": tag_layout(ranks)})


class _ChunkWalker:
    """The chunks one machine (TX or RX) visits: its step, chunk, and row within the chunk.

    After ``load`` is set, the next cycle looks up the chunk's rows in the table; then
    ``beat`` is 1 while rows remain, and the machine sets ``move`` when it handles ``row``. At
    the chunk's end the walker steps to chunk (c − 1) mod P, or sets ``done`` after ``steps``.
    """

    def __init__(self, name: str, ranks: int, rows: range):
        self.step = Signal(range(2 * ranks), name=f"{name}_step")
        self.chunk = Signal(range(ranks), name=f"{name}_chunk")
        self.row = Signal(rows, name=f"{name}_row")
        self.end = Signal(rows, name=f"{name}_end")
        self.load = Signal(name=f"{name}_load")
        self.done = Signal(init=1, name=f"{name}_done")
        self.beat = Signal(name=f"{name}_beat")
        self.move = Signal(name=f"{name}_move")
        # row != end, kept in a register: `beat` then comes from registers alone (it feeds the
        # link handshakes and, through them, the watchdog: a timing path).
        self.left = Signal(name=f"{name}_left")

    def start(self, chunk) -> list:
        return [self.step.eq(0), self.chunk.eq(chunk), self.load.eq(1), self.done.eq(0)]

    def walk(self, m, *, base, starts, steps, dec):
        with m.If(self.load):
            first, after = starts[self.chunk], starts[self.chunk + 1]
            m.d.sync += [self.row.eq(base + first), self.end.eq(base + after),
                         self.left.eq(first != after), self.load.eq(0)]
        with m.Elif(~self.done):
            with m.If(~self.left):
                m.d.sync += [self.step.eq(self.step + 1), self.chunk.eq(dec(self.chunk))]
                with m.If(self.step + 1 == steps):
                    m.d.sync += self.done.eq(1)
                with m.Else():
                    m.d.sync += self.load.eq(1)
            with m.Else():
                m.d.comb += self.beat.eq(1)
        with m.If(self.move):
            m.d.sync += [self.row.eq(self.row + 1), self.left.eq(self.row + 1 != self.end)]


class CollectiveEngine(wiring.Component):
    """One core's collective engine: ring all-reduce, reduce-scatter and all-gather in fp32.

    The engine works on a buffer of ``n`` fp32 words in its core's local memory, starting at
    row ``addr``; a row holds ``link_width`` (W) words, so the buffer is B = ⌈n/W⌉ rows and
    only its last row may be partial (the lanes past ``n`` are never written). All ranks of
    the ring run the same sequence of commands; each engine learns its place from ``rank``.

    Numerics and schedule: exactly ``golden.collective`` (its docstring is the contract):
    B beats in P contiguous chunks of ⌊B/P⌋ or ⌈B/P⌉ beats; step s sends one chunk to the
    right and receives another from the left; a reduce-scatter step computes
    ``received + local`` with an :class:`~hdl.fp32_add.Fp32Adder` per lane (IEEE binary32,
    RNE, canonical NaN) and writes it back in place, an all-gather step stores what arrives.
    What a step sends is what the previous step received, so beats stream on: the transmitter
    sends row i of step s as soon as the receiver has written row i of step s − 1 and the
    previous rows have gone; nothing waits for a whole chunk.

    **Routed operations** (ALL_TO_ALL, PERMUTE; ``golden.collective``'s contract and
    schedule): out of place, from the buffer at ``addr`` to the destination rows from ``dst``.
    Every beat carries a :func:`tag_layout` tag (destination, origin, ``last``, ``end``). The
    engine injects its own beats -- for an all-to-all the chunks for ranks r − 1, r − 2, …,
    r + 1 (farthest first), for a permute the whole buffer to rank r + ``shift`` -- then an
    ``end`` token that travels P − 1 hops; it copies its own chunk of an all-to-all to its own
    slot locally (a third machine, through ``rx_rd``, in the cycles the receiver does not
    write). A received beat for this rank is written to its origin's slot (slot o: rows
    ``dst + o·b_r``, b_r the rows of chunk r; a permute: rows from ``dst``); any other beat goes
    into a forward FIFO, whose beats leave before the engine injects another of its own. The
    receiver closes after the P − 1 ``end`` tokens of the other ranks, which follow every beat
    of theirs on every link (each origin's beats take one path, in order), so no beat of a
    later command is taken for this one, and the engine finishes once it has sent its own
    token and forwarded all others. A command with ``dst`` rows past the memory
    (``P·⌈B/P⌉`` rows for an all-to-all, B for a permute) or meeting the source is found
    after the setup's division: it sets ``error`` and moves nothing.

    Ports:

    * ``cmd`` (stream of :func:`collective_command_layout`): taken when the engine is idle.
      A command with a reserved ``op``, ``words`` = 0, a buffer past the memory or a permute's
      ``shift`` outside 1..P − 1 is taken and dropped, and sets the sticky ``error``.
    * ``tx`` / ``rx`` (streams of :func:`link_layout`: W fp32 words and a tag): the ring links
      to rank + 1 and from rank − 1. In the ring ops ``rx.ready`` never depends on ``tx``; in
      the routed ones a beat to forward waits for room in the forward FIFO, which drains into
      ``tx`` before anything else. No deadlock: a rank starts offering a beat of its own only
      while its forward FIFO is empty, and holds at most one offered; the FIFO is P + 1 deep, so
      after the last such offer anywhere at most P beats enter the ring and at least one slot
      stays free, and a free slot always lets the beat behind it move (bursty link stalls can
      otherwise fill every link and FIFO with beats for other ranks: found by review, with
      ``tests/hdl/test_collective_routed_pysim.py``). Lanes past ``n`` in the last beat are
      sent as +0 and ignored on receipt.
    * ``tx_rd``, ``rx_rd`` (two read ports, one-cycle latency, not transparent) and ``wr`` (a
      write port with a per-lane enable) of the local memory; rows of W words.
    * ``rank`` (input): this core's position in the ring, 0..ranks − 1, constant while busy.
    * ``busy``; ``cycles``: the cycles the last (or current) command took, from the cycle
      after it was taken until idle.
    * ``timeout``: the watchdog abandoned the last command (below); it stays set until the
      engine takes its next command. ``tx_flush``: one cycle, the cycle after the watchdog
      fires: the link behind ``tx`` should drop every beat it still holds from this engine
      (the ring tops wire it to :class:`~hdl.ring.LinkModel`'s ``flush``).

    Link watchdog (``watchdog_cycles`` = T, 0: none): a running command (after its setup)
    that sees no handshake on ``tx`` nor on ``rx`` (nor, in an all-to-all, a row of its own
    chunk copied: that copy may be all that is left of it) for T consecutive cycles is
    abandoned at
    the end of the T-th: the engine returns to idle at once (``busy`` falls, ``timeout``
    rises, ``cycles`` counts setup + work + T), drops what it holds (the walkers stop, the tx
    FIFO and a read in flight are emptied; no received beat is in flight: T is above the
    receiver's pipeline), and pulses ``tx_flush`` so that its outgoing link drops the beats
    the next rank never took. Every rank that entered the collective stops the same way (the
    ring has stopped), each flushing its own outgoing link, so no stale beat reaches a later
    collective -- start the next one only after every rank that entered has timed out. The
    buffer's contents are undefined after a timeout (some rows may be reduced). T must exceed
    the longest legitimate wait: the link latency, stalls, and how much later than its
    neighbours a rank may enter a collective (in a core: the other cores' work before it).

    Timing: a command spends ``setup_cycles`` (a B ÷ P long division and the chunk table)
    before its first beat; then each step costs two cycles of bookkeeping per machine. With
    links that never stall, a beat is sent every cycle, so an all-reduce of B beats takes
    about 2·(P − 1)·⌈B/P⌉ cycles plus the ring's latency once — the bandwidth-optimal ring
    time (``make bench`` measures the ratio). A received beat is written ``1 + add_stages``
    cycles after it arrives.

    Parameters
    ----------
    ranks : int
        P, the cores in the ring, 2 to :data:`MAX_RANKS` (64).
    link_width : int
        W, fp32 words per beat and per memory row: one of :data:`LINK_WIDTHS` (1, 2 or 4).
    depth : int
        Rows of the local memory, 1 to 2^20 (default 1024).
    add_stages : int
        The adders' pipeline depth, 0 to :data:`~hdl.fp32_add.FP32_ADD_MAX_STAGES` (7; default
        :data:`COLLECTIVE_ADD_STAGES`, 4).
    watchdog_cycles : int
        T, the link watchdog: 0 (none) or :data:`MIN_WATCHDOG_CYCLES` to
        :data:`MAX_WATCHDOG_CYCLES` (default :data:`DEFAULT_WATCHDOG_CYCLES`).

    Raises
    ------
    TypeError
        If a parameter is not an integer.
    ValueError
        If a parameter is out of range.
    """

    TX_FIFO_DEPTH = 4  # read latency 1 + the link's ready: 2 would do, 4 absorbs jitter

    def __init__(self, *, ranks: int, link_width: int = 1, depth: int = 1024,
                 add_stages: int = COLLECTIVE_ADD_STAGES,
                 watchdog_cycles: int = DEFAULT_WATCHDOG_CYCLES):
        self.ranks = check_ranks(ranks)
        self.watchdog_cycles = check_watchdog(watchdog_cycles)
        self.link_width = check_link_width(link_width)
        self.depth = check_depth(depth)
        self.add_stages = check_int("add_stages", add_stages, lo=0, hi=FP32_ADD_MAX_STAGES)
        self.addr_width = max(depth - 1, 1).bit_length()
        self.beat_bits = depth.bit_length()  # holds 0..depth
        self.setup_cycles = setup_cycles(ranks, depth)
        #: The routed ops' forward FIFO: P + 1 beats (the no-deadlock argument, ``tx``).
        self.fwd_fifo_depth = ranks + 1
        self.cmd_layout = collective_command_layout(depth, link_width)
        row = data.ArrayLayout(32, link_width)
        self.link_layout = link_layout(ranks, link_width)
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "rank": In(range(ranks)),
            "tx": Out(stream.Signature(self.link_layout)),
            "rx": In(stream.Signature(self.link_layout)),
            "tx_rd": In(memory.ReadPort.Signature(addr_width=self.addr_width, shape=row)),
            "rx_rd": In(memory.ReadPort.Signature(addr_width=self.addr_width, shape=row)),
            "wr": In(memory.WritePort.Signature(addr_width=self.addr_width, shape=row,
                                                granularity=1)),
            "busy": Out(1),
            "error": Out(1),
            "cycles": Out(32),
            "timeout": Out(1),
            "tx_flush": Out(1),
        })

    def elaborate(self, platform):
        # Design note.
        #
        # Two machines run each command after the setup: the transmitter (TX) walks the chunks
        # it sends, reading rows through `tx_rd` into a small FIFO that feeds `tx`; the
        # receiver (RX) walks the chunks it receives, reading the local row through `rx_rd`
        # as a beat arrives, adding (or not) and writing it `1 + add_stages` cycles later.
        # RX never waits for TX, so the ring has no cycle of waits. TX waits for RX in one
        # place: step s >= 1 sends the chunk RX received in step s - 1, row by row, so a row is
        # read only once RX's write of it has happened (the `written` scoreboard: the step and
        # row of the latest write; writes happen in step and row order). The read port is not
        # transparent, and the scoreboard is updated on the same edge as the write, so a read
        # issued after the check sees the new value.
        #
        # No other hazards: a chunk is reduced at most once per command, and a chunk a rank
        # overwrites in the all-gather was sent by it P - 1 steps earlier -- a causal chain
        # once round the ring separates that read from the write (golden/collective.py).
        m = Module()
        P, W, L = self.ranks, self.link_width, self.add_stages
        depth = self.depth
        row_shape = data.ArrayLayout(32, W)
        cmd = self.cmd.payload

        rows = range(depth + 1)
        running = Signal()
        error = Signal()
        m.d.comb += [self.error.eq(error), self.busy.eq(running)]
        op = Signal(CollectiveOp)
        routed = Signal()  # the command is ALL_TO_ALL or PERMUTE
        permute = Signal()
        dst = Signal(rows)
        shift = Signal(range(MAX_RANKS))
        base = Signal(rows)
        last_row = Signal(rows)  # the buffer's last row (may be partial)
        last_mask = Signal(W)  # its valid lanes
        steps = Signal(range(2 * P - 1))  # steps of this command: P - 1 or 2(P - 1)

        def dec(c):  # (c - 1) mod P
            return Mux(c == 0, P - 1, c - 1)

        # --- Command intake and legality. ----------------------------------------------------
        # As wide as `words` (whose field can hold more than depth * W): no wrap-around, so
        # an oversized n can never pass for a small one.
        new_beats = Signal(len(cmd.words) + 1)
        m.d.comb += new_beats.eq((cmd.words + (W - 1)) >> (W.bit_length() - 1))
        op_v = cmd.op.as_value()
        shift_ok = (cmd.shift != 0) & (cmd.shift < P)
        legal = ((op_v <= CollectiveOp.PERMUTE.value)
                 & (cmd.words != 0) & (cmd.addr + new_beats <= depth)
                 & ((op_v != CollectiveOp.PERMUTE.value) | shift_ok))
        # The link watchdog: `abort` in the T-th cycle in a row without a beat on tx or rx.
        abort = Signal()
        timeout = Signal()
        flush = Signal()
        m.d.comb += [self.timeout.eq(timeout), self.tx_flush.eq(flush)]
        m.d.sync += flush.eq(abort)
        cycles = Signal(32)
        m.d.comb += self.cycles.eq(cycles)
        with m.If(running):
            m.d.sync += cycles.eq(cycles + 1)

        # --- Setup: q, e = divmod(B, P) by long division, then the chunk table. ------------
        nb = self.beat_bits
        div_src = Signal(nb)
        div_rem = Signal(range(2 * P))
        div_q = Signal(nb)
        div_left = Signal(range(nb + 1))
        starts = Array(Signal(rows, name=f"chunk_start{c}") for c in range(P + 1))
        tab_c = Signal(range(P + 2))
        tab_acc = Signal(rows)

        # --- TX and RX machine state. --------------------------------------------------------
        tx, rx = _ChunkWalker("tx", P, rows), _ChunkWalker("rx", P, rows)
        finished = Signal()  # RUN: both machines done, nothing in flight
        wr_any = Signal()  # RX has written a row in this command

        # --- Routed ops' state (ALL_TO_ALL, PERMUTE). ----------------------------------------
        # B, the region they write (P * ceil(B / P) rows for an all-to-all, B for a permute;
        # e = div_rem) and whether it fits: registers, one adder or compare each, as their
        # inputs are set at the intake (B) and by the end of DIVIDE, and RUN reads route_ok
        # after TABLE's P + 1 >= 3 cycles.
        beats = Signal(rows)  # B
        out_rows = Signal(range(depth + 2 * P + 1))
        route_ok = Signal()
        m.d.sync += [
            beats.eq(last_row + 1 - base),
            out_rows.eq(Mux(permute | (div_rem == 0), beats, beats + P - div_rem)),
            route_ok.eq((dst + out_rows <= depth)
                        & ((base + beats <= dst) | (dst + out_rows <= base))),
        ]
        wptr = Array(Signal(rows, name=f"slot_ptr{o}") for o in range(P))  # next row per origin
        slot_c = Signal(range(P))
        slot_acc = Signal(rows)
        own_start = Signal(rows)
        own_end = Signal(rows)
        m.d.comb += [own_start.eq(starts[self.rank]), own_end.eq(starts[self.rank + 1])]
        slot_rows = Mux(permute, 0, own_end - own_start)  # b_r
        dest_perm = Signal(range(P))  # a permute's destination: rank + shift mod P
        inj_chunk = Signal(range(P))
        inj_left = Signal(range(P + 1))
        inj_row = Signal(rows)
        inj_end = Signal(rows)
        inj_load = Signal()
        inj_done = Signal(init=1)
        inj_beat = Signal()
        end_sent = Signal(init=1)
        ends_seen = Signal(range(P))
        cp_row = Signal(rows)
        cp_end = Signal(rows)
        cp_dst = Signal(rows)
        cp_load = Signal()
        cp_done = Signal(init=1)
        cp_beat = Signal()
        in_route = Signal()
        route_finished = Signal()

        with m.FSM(name="phase") as phase:
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += timeout.eq(0)
                    with m.If(legal):
                        m.d.sync += [
                            running.eq(1), cycles.eq(0), op.eq(cmd.op), base.eq(cmd.addr),
                            routed.eq((op_v == CollectiveOp.ALL_TO_ALL.value)
                                      | (op_v == CollectiveOp.PERMUTE.value)),
                            permute.eq(op_v == CollectiveOp.PERMUTE.value),
                            dst.eq(cmd.dst), shift.eq(cmd.shift),
                            last_row.eq(cmd.addr + new_beats - 1),
                            div_src.eq(new_beats), div_rem.eq(0), div_q.eq(0),
                            div_left.eq(nb),
                        ]
                        for j in range(W):
                            m.d.sync += last_mask[j].eq(((cmd.words - 1) & (W - 1)) >= j)
                        m.next = "DIVIDE"
                    with m.Else():
                        m.d.sync += error.eq(1)
            # lab4 begin: chunk_table
            with m.State("DIVIDE"):
                trial = Cat(div_src[-1], div_rem)  # (rem << 1) | next dividend bit
                fits = trial >= P
                m.d.sync += [div_src.eq(div_src << 1), div_q.eq(Cat(fits, div_q)),
                             div_rem.eq(Mux(fits, trial - P, trial)), div_left.eq(div_left - 1)]
                with m.If(div_left == 1):
                    m.d.sync += [tab_c.eq(0), tab_acc.eq(0)]
                    m.next = "TABLE"
            with m.State("TABLE"):
                m.d.sync += [starts[tab_c].eq(tab_acc),
                             tab_acc.eq(tab_acc + div_q + (tab_c < div_rem)),
                             tab_c.eq(tab_c + 1)]
                with m.If(tab_c == P):
                    gather = op == CollectiveOp.ALL_GATHER
                    rank = self.rank
                    m.d.sync += [
                        steps.eq(Mux(op == CollectiveOp.ALL_REDUCE, 2 * (P - 1), P - 1)),
                        *tx.start(Mux(gather, rank, dec(rank))),
                        *rx.start(Mux(gather, dec(rank), dec(dec(rank)))),
                    ]
                    m.next = "RUN"
            # lab4 end: chunk_table
            with m.State("SLOTS"):
                # Slot o of the destination: rows dst + o * b_r (a permute: all at dst).
                m.d.sync += [wptr[slot_c].eq(slot_acc), slot_acc.eq(slot_acc + slot_rows),
                             slot_c.eq(slot_c + 1)]
                with m.If(slot_c == P - 1):
                    m.d.sync += [inj_chunk.eq(dec(self.rank)),
                                 inj_left.eq(Mux(permute, 1, P - 1)), inj_load.eq(1),
                                 inj_done.eq(0), end_sent.eq(0), ends_seen.eq(0),
                                 cp_load.eq(~permute), cp_done.eq(permute),
                                 dest_perm.eq(Mux(self.rank + shift >= P,
                                                  self.rank + shift - P, self.rank + shift))]
                    m.next = "ROUTE"
            with m.State("ROUTE"):
                m.d.comb += in_route.eq(1)
                with m.If(route_finished):
                    m.d.sync += running.eq(0)
                    m.next = "IDLE"
                with m.If(abort):
                    m.d.sync += [running.eq(0), timeout.eq(1)]
                    m.next = "IDLE"
            with m.State("RUN"):
                with m.If(routed):
                    # A routed op leaves the ring ops' path here, in the cycle the walkers
                    # look up their first chunks (they move no row: stopped now), so that the
                    # chunk table above stays the ring ops' alone.
                    m.d.sync += [tx.done.eq(1), tx.load.eq(0), rx.done.eq(1), rx.load.eq(0)]
                    with m.If(route_ok):
                        m.d.sync += [slot_c.eq(0), slot_acc.eq(dst)]
                        m.next = "SLOTS"
                    with m.Else():
                        m.d.sync += [running.eq(0), error.eq(1)]
                        m.next = "IDLE"
                with m.Elif(finished):
                    m.d.sync += [running.eq(0), wr_any.eq(0)]
                    m.next = "IDLE"
                with m.If(abort):
                    m.d.sync += [running.eq(0), wr_any.eq(0), timeout.eq(1)]
                    m.next = "IDLE"

        # --- TX: read rows into the FIFO that feeds `tx`. ------------------------------------
        # The ring ops' TX machine and the routed ops' injection share the read port and the
        # FIFO (a beat and its tag; the ring ops send a zero tag).
        link = self.link_layout
        tag_shape = tag_layout(P)
        tx_fifo = fifo.SyncFIFO(width=link.size, depth=self.TX_FIFO_DEPTH)
        # An abandoned command's beats go in the cycle after `abort` (`flush`, a register:
        # `abort` depends on this cycle's link handshakes, a long path into every FIFO
        # register); `tx` offers nothing meanwhile. Moves in the abort cycle itself are
        # harmless: what they write is in a FIFO by the flush cycle, which empties it, and
        # the machines are done.
        m.submodules.tx_fifo = ResetInserter(flush)(tx_fifo)
        rd_pending = Signal()  # a tx_rd read was issued last cycle
        rd_mask = Signal(W)
        rd_tag = Signal(tag_shape)
        wr_step = Signal(range(2 * P))
        wr_row = Signal(rows)
        room = tx_fifo.level + rd_pending < self.TX_FIFO_DEPTH
        ready_row = (tx.step == 0) | (wr_any & ((wr_step >= tx.step) | (
            (wr_step + 1 == tx.step) & (wr_row >= tx.row))))
        tx.walk(m, base=base, starts=starts, steps=steps, dec=dec)
        # (Each cycle at most one of the ring TX's read, an injected read and the end token
        # enters the FIFO: `routed` keeps the two machines apart even from a state no command
        # reaches, which the FIFO proofs' induction starts from.)
        m.d.comb += tx.move.eq(tx.beat & room & ready_row & ~routed)

        # Injection (routed ops): the chunks for r - 1, r - 2, ..., r + 1, or (a permute) the
        # whole buffer; then the end token.
        inj_move = Signal()
        with m.If(inj_load):
            m.d.sync += [inj_row.eq(Mux(permute, base, base + starts[inj_chunk])),
                         inj_end.eq(Mux(permute, last_row + 1, base + starts[inj_chunk + 1])),
                         inj_load.eq(0)]
        with m.Elif(~inj_done):
            with m.If(inj_row == inj_end):
                m.d.sync += [inj_left.eq(inj_left - 1), inj_chunk.eq(dec(inj_chunk))]
                with m.If(inj_left == 1):
                    m.d.sync += inj_done.eq(1)
                with m.Else():
                    m.d.sync += inj_load.eq(1)
            with m.Else():
                m.d.comb += inj_beat.eq(1)
        m.d.comb += inj_move.eq(inj_beat & room & routed)
        with m.If(inj_move):
            m.d.sync += inj_row.eq(inj_row + 1)
        end_push = Signal()
        m.d.comb += end_push.eq(inj_done & ~inj_load & ~end_sent & ~rd_pending & room
                                & routed)
        with m.If(end_push):
            m.d.sync += end_sent.eq(1)

        rd_row = Mux(routed, inj_row, tx.row)
        m.d.comb += [self.tx_rd.en.eq(tx.move | inj_move), self.tx_rd.addr.eq(rd_row)]
        m.d.sync += [rd_pending.eq(tx.move | inj_move),
                     rd_mask.eq(Mux(rd_row == last_row, last_mask, (1 << W) - 1)),
                     rd_tag.eq(0)]
        with m.If(routed):
            m.d.sync += [rd_tag.dest.eq(Mux(permute, dest_perm, inj_chunk)),
                         rd_tag.origin.eq(self.rank), rd_tag.last.eq(inj_row == last_row)]
        masked = Signal(row_shape)
        for j in range(W):
            m.d.comb += masked[j].eq(Mux(rd_mask[j], self.tx_rd.data[j], 0))
        end_token = Signal(link)
        m.d.comb += [end_token.tag.dest.eq(dec(self.rank)), end_token.tag.origin.eq(self.rank),
                     end_token.tag.end.eq(1)]
        m.d.comb += [tx_fifo.w_en.eq(rd_pending | end_push),
                     tx_fifo.w_data.eq(Mux(rd_pending, Cat(masked, rd_tag), end_token))]

        # The forward FIFO (routed ops): its beats go first. Once a beat is offered on `tx`,
        # it stays offered until taken (`hold`), even if a forwarded beat arrives meanwhile.
        fwd = fifo.SyncFIFO(width=link.size, depth=self.fwd_fifo_depth)
        m.submodules.fwd_fifo = ResetInserter(flush)(fwd)
        hold, hold_fwd = Signal(), Signal()
        use_fwd = Mux(hold, hold_fwd, fwd.r_rdy)
        m.d.comb += [
            self.tx.valid.eq(Mux(use_fwd, fwd.r_rdy, tx_fifo.r_rdy) & ~flush),
            self.tx.payload.eq(Mux(use_fwd, fwd.r_data, tx_fifo.r_data)),
            fwd.r_en.eq(use_fwd & self.tx.ready), tx_fifo.r_en.eq(~use_fwd & self.tx.ready),
        ]
        m.d.sync += [hold.eq(self.tx.valid & ~self.tx.ready), hold_fwd.eq(use_fwd)]

        # --- RX: take a beat, read the local row, add (or not), write. -----------------------
        meta_layout = data.StructLayout({
            "valid": 1, "row": range(depth), "mask": W, "reduce": 1, "step": range(2 * P)})
        s1 = Signal(meta_layout)  # the beat taken last cycle; its local row is on rx_rd.data
        s1_data = Signal(row_shape)
        take = rx.move
        rx.walk(m, base=base, starts=starts, steps=steps, dec=dec)
        m.d.comb += take.eq(rx.beat & self.rx.valid)
        m.d.sync += [
            s1.valid.eq(take), s1.row.eq(rx.row), s1.step.eq(rx.step),
            s1.mask.eq(Mux(rx.row == last_row, last_mask, (1 << W) - 1)),
            s1.reduce.eq((op != CollectiveOp.ALL_GATHER) & (rx.step < P - 1)),
            s1_data.eq(self.rx.payload.data),
        ]

        # Routed ops: a beat for this rank is written to its origin's slot the next cycle;
        # another goes on through the forward FIFO. The own chunk's copy (all-to-all) reads
        # through rx_rd in the cycles no received beat will be written.
        rb = self.rx.payload
        mine = rb.tag.dest == self.rank
        rx_open = in_route & (ends_seen != P - 1)
        take_r = Signal()
        m.d.comb += [take_r.eq(self.rx.valid & rx_open & (mine | fwd.w_rdy)),
                     fwd.w_en.eq(take_r & ~mine), fwd.w_data.eq(rb),
                     self.rx.ready.eq(rx.beat | (rx_open & (mine | fwd.w_rdy)))]
        got = take_r & mine & ~rb.tag.end
        with m.If(take_r & rb.tag.end):  # (P - 1 tokens reach every rank: all but its own)
            m.d.sync += ends_seen.eq(ends_seen + 1)
        rw = Signal(meta_layout)  # a received beat to write (row, mask) ...
        rw_data = Signal(row_shape)
        cw = Signal(meta_layout)  # ... or a copied row, its data on rx_rd.data
        m.d.sync += [rw.valid.eq(got), rw.row.eq(wptr[rb.tag.origin]),
                     rw.mask.eq(Mux(rb.tag.last, last_mask, (1 << W) - 1)),
                     rw_data.eq(rb.data)]
        with m.If(got):
            m.d.sync += wptr[rb.tag.origin].eq(wptr[rb.tag.origin] + 1)
        with m.If(cp_load):
            m.d.sync += [cp_row.eq(base + own_start), cp_end.eq(base + own_end),
                         cp_dst.eq(wptr[self.rank]), cp_load.eq(0)]
        with m.Elif(~cp_done):
            with m.If(cp_row == cp_end):
                m.d.sync += cp_done.eq(1)
            with m.Else():
                m.d.comb += cp_beat.eq(1)
        cp_move = cp_beat & ~got
        with m.If(cp_move):
            m.d.sync += [cp_row.eq(cp_row + 1), cp_dst.eq(cp_dst + 1)]
        m.d.sync += [cw.valid.eq(cp_move), cw.row.eq(cp_dst),
                     cw.mask.eq(Mux(cp_row == last_row, last_mask, (1 << W) - 1))]
        m.d.comb += [self.rx_rd.en.eq(take | cp_move),
                     self.rx_rd.addr.eq(Mux(routed, cp_row, rx.row))]
        adders = []
        for j in range(W):
            add = shared(Fp32Adder(stages=L), "hdl.fp32_add:Fp32Adder", {"stages": L},
                         clocked=L > 0)
            m.submodules[f"add{j}"] = add
            # The contract's order: received + local (golden.collective).
            m.d.comb += [add.en.eq(1), add.a.eq(s1_data[j]), add.b.eq(self.rx_rd.data[j])]
            adders.append(add)
        meta_w = delay(m, s1, L, name="meta")
        data_w = delay(m, s1_data, L, name="rx_data")
        with m.If(rw.valid):
            m.d.comb += self.wr.addr.eq(rw.row)
            for j in range(W):
                m.d.comb += [self.wr.data[j].eq(rw_data[j]), self.wr.en[j].eq(rw.mask[j])]
        with m.Elif(cw.valid):
            m.d.comb += self.wr.addr.eq(cw.row)
            for j in range(W):
                m.d.comb += [self.wr.data[j].eq(self.rx_rd.data[j]),
                             self.wr.en[j].eq(cw.mask[j])]
        with m.Else():
            m.d.comb += self.wr.addr.eq(meta_w.row)
            for j in range(W):
                m.d.comb += [
                    self.wr.data[j].eq(Mux(meta_w.reduce, adders[j].result, data_w[j])),
                    self.wr.en[j].eq(meta_w.valid & meta_w.mask[j]),
                ]
        with m.If(meta_w.valid):
            m.d.sync += [wr_any.eq(1), wr_step.eq(meta_w.step), wr_row.eq(meta_w.row)]

        # In-flight received beats, and the end of the command.
        in_flight = Signal(range(L + 3))
        m.d.sync += in_flight.eq(in_flight + take - meta_w.valid)
        m.d.comb += finished.eq(tx.done & rx.done & ~tx.load & ~rx.load & (in_flight == 0)
                                & ~rd_pending & (tx_fifo.level == 0))
        m.d.comb += route_finished.eq(inj_done & ~inj_load & end_sent & ~rd_pending
                                      & (tx_fifo.level == 0) & (fwd.level == 0)
                                      & (ends_seen == P - 1) & cp_done & ~cp_load
                                      & ~rw.valid & ~cw.valid)

        # The watchdog counts the cycles of RUN since the last beat on either link.
        T = self.watchdog_cycles
        if T:
            quiet = Signal(range(T), name="wd_quiet")
            # (the own chunk's copy is progress too: it may be all that is left of a command)
            beat = ((self.tx.valid & self.tx.ready) | (self.rx.valid & self.rx.ready)
                    | (cp_beat & ~got))
            in_run = running & (phase.ongoing("RUN") | in_route)
            with m.If(~in_run | beat):
                m.d.sync += quiet.eq(0)
            with m.Else():
                m.d.sync += quiet.eq(quiet + 1)
            done_now = Mux(in_route, route_finished, finished)
            m.d.comb += abort.eq(in_run & ~beat & ~done_now & (quiet == T - 1))
            with m.If(abort):  # (after the walkers' own updates: this wins)
                m.d.sync += [tx.done.eq(1), tx.load.eq(0), rx.done.eq(1), rx.load.eq(0),
                             inj_done.eq(1), inj_load.eq(0), end_sent.eq(1), cp_done.eq(1),
                             cp_load.eq(0)]
        return m
