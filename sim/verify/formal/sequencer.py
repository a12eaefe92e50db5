"""The sequencer never deadlocks: any command stream keeps moving, and it always returns to idle.

Harness: ``Sequencer(n=2, sbuf_words=4, psum_banks=1, psum_words=4, dram_bytes=64, ring=True)``
with every input free, the descriptor payload included (all 256 bits: any opcode, any fields,
legal or not). The engines are modelled by assumptions only:

* each engine takes a command offered to it within ``TAKE`` cycles (``valid & ~ready`` at most
  ``TAKE`` cycles in a row) on ``dma``, ``te``, ``act``, ``seed`` and ``coll``;
* an engine's busy inputs (``dma_busy``; ``te_feed_busy`` and ``te_busy``; ``act_busy``;
  ``coll_busy``) may be high only within ``BUSY`` cycles after it took a command (``act_busy``
  after an ``act`` or ``seed`` command) -- free inside that window, so any shorter pattern is
  covered;
* ``te_done`` (a MATMUL's last PSUM write) pulses once for each MATMUL the tensor feeder
  took, at any time within the tensor engine's ``BUSY`` window, never for none (``te_done_bank``
  0, the only bank);
* ``hold`` (a debug read waiting for the SBUF port) is high at most ``HOLD`` cycles in a row;
* ``dma_error`` and ``coll_timeout`` rise only in a cycle after one in which their engine's
  busy was high (the DMA raises its error while busy, the collective engine its timeout as
  its busy falls); they fall at any time;
* ``desc`` follows the stream rules; ``clear_error`` and any input added later are free.

Asserted: the sequencer is never "stuck" for ``BOUND`` cycles in a row, where stuck means busy
or offered a descriptor, and no descriptor accepted this cycle. So a descriptor offered is
accepted within ``BOUND`` cycles (executed, or dropped with an error code set, or dropped
because an error is pending), and once no more descriptors come, ``busy`` falls within
``BOUND`` cycles: the sequencer returns to idle or to its error state for any command. The
stream rules are asserted on its five command outputs too.
"""

from __future__ import annotations

from amaranth.hdl import Assume, Module, Signal

from .harness import FormalTop, bounded_run

__all__ = ["sequencer_liveness_top", "bound_for", "TAKE", "BUSY", "HOLD", "BOUND"]

TAKE = 2  # cycles an engine may leave a command offered
BUSY = 3  # cycles after taking a command in which an engine's busy may be high
HOLD = 2  # cycles in a row ``hold`` may be high
#: Cycles in a row the sequencer may be stuck. Worst case: the sequencer holds two commands
#: (its head and the one behind). The head waits for the engine that took the previous command
#: (TAKE + 1 cycles offered, BUSY of busy, 1 to dispatch), the command behind waits likewise
#: for the head's engine, and its own engine takes it and stays busy (TAKE + 1 + BUSY) before
#: ``busy`` can fall; ``hold`` may hold back each of the two dispatches by HOLD; plus 1. A
#: smaller bound fails (the mutant ``mutant_sequencer_tight``; both bounds were found with
#: BMC for these TAKE/BUSY/HOLD and for the small ones). With a single head register it was
#: 2 * (TAKE + 1 + BUSY) + HOLD + 1: the command behind waited in the command queue, offered
#: but not taken, and its wait counted as stuck only until the head left. Registering the
#: dispatch's compares and checks (a command waits at least two cycles in the sequencer, three a
#: DMA command) left both bounds as they were: BMC finds the same tight ones. Registering the
#: engines' busy inputs adds a cycle to each of the three waits (an engine counts as free a
#: cycle after its busy falls): 3 * (TAKE + 2 + BUSY) + 2 * HOLD + 1, again tight by BMC.
#: An engine's error arriving a cycle after it rises (``busy`` stays up that cycle, as the
#: engine may be idle already) adds 1: 3 * (TAKE + 2 + BUSY) + 2 * HOLD + 2, tight by BMC.
BOUND = 3 * (TAKE + 2 + BUSY) + 2 * HOLD + 2  # = bound_for(TAKE, BUSY, HOLD) = 27


def bound_for(take: int, busy: int, hold: int) -> int:
    """:data:`BOUND` for other engine bounds."""
    return 3 * (take + 2 + busy) + 2 * hold + 2


def _busy_window(m: Module, took, busies, name: str, limit: int) -> Signal:
    """Assume ``busies`` are low except within ``limit`` cycles after ``took`` (a handshake);
    returns the window's counter (0: closed)."""
    window = Signal(range(limit + 1), name=f"{name}__window")
    with m.If(took):
        m.d.sync += window.eq(limit)
    with m.Elif(window != 0):
        m.d.sync += window.eq(window - 1)
    for busy in busies:
        m.d.comb += Assume(~busy | (window != 0), f"{name}: busy only after a command")
    return window


def _rises_after_busy(m: Module, flag, busy, name: str) -> None:
    """Assume ``flag`` (an engine's error) rises only in a cycle after one in which its
    engine was busy: the DMA raises its error while busy (busy falls a cycle later at the
    earliest), the collective engine its timeout as its busy falls."""
    flag_q, busy_q = Signal(name=f"{name}__q"), Signal(name=f"{name}__busy_q")
    m.d.sync += [flag_q.eq(flag), busy_q.eq(busy)]
    m.d.comb += Assume(~(flag & ~flag_q) | busy_q, f"{name}: rises only after a busy cycle")


def _matmul_done(m: Module, top, dut, te_window) -> None:
    """Assume ``te_done`` pulses once per MATMUL taken, before the tensor engine's window
    closes, and never without one outstanding (``te_done_bank`` 0)."""
    from hdl.isa import Opcode

    took = dut.te.valid & dut.te.ready & (dut.te.payload[:4] == Opcode.MATMUL)
    done = top.input("te_done")
    outstanding = Signal(range(16), name="mm__outstanding")
    m.d.sync += outstanding.eq(outstanding + took - done)
    m.d.comb += [Assume(~done | (outstanding != 0), "te_done: only for a MATMUL taken"),
                 Assume((te_window != 0) | (outstanding == 0),
                        "te_done: every MATMUL done within the window"),
                 Assume(top.input("te_done_bank") == 0, "te_done_bank: the only bank")]


def sequencer_liveness_top(*, take: int = TAKE, busy: int = BUSY, hold: int = HOLD,
                           bound: int | None = None) -> FormalTop:
    """The harness above, with the engine bounds ``take``, ``busy``, ``hold`` and the stuck
    bound ``bound`` (default :func:`bound_for` of them). A ``bound`` below that gives a
    failing proof (the check is not vacuous, and the bound is tight)."""
    if bound is None:
        bound = bound_for(take, busy, hold)
    from hdl.sequencer import Sequencer

    dut = Sequencer(n=2, sbuf_words=4, psum_banks=1, psum_words=4, dram_bytes=64, ring=True)

    def build(m, top):
        def fire(s):
            return s.valid & s.ready

        for name in ("dma", "te", "act", "seed", "coll"):
            s = getattr(dut, name)
            bounded_run(m, s.valid & ~s.ready, take, f"{name}_take", assume=True)
        _busy_window(m, fire(dut.dma), [top.input("dma_busy")], "dma", busy)
        te_window = _busy_window(m, fire(dut.te), [top.input("te_feed_busy"),
                                                   top.input("te_busy")], "te", busy)
        _matmul_done(m, top, dut, te_window)
        _busy_window(m, fire(dut.act) | fire(dut.seed), [top.input("act_busy")], "act", busy)
        _busy_window(m, fire(dut.coll), [top.input("coll_busy")], "coll", busy)
        bounded_run(m, top.input("hold"), hold, "hold", assume=True)
        for flag, busy_in in (("dma_error", "dma_busy"), ("coll_timeout", "coll_busy")):
            _rises_after_busy(m, top.input(flag), top.input(busy_in), flag)
        stuck = (dut.busy | dut.desc.valid) & ~fire(dut.desc)
        bounded_run(m, stuck, bound, "sequencer stuck", assume=False)

    return FormalTop(dut, build, rules=True)
