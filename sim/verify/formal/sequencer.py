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
* ``hold`` (a debug read waiting for the SBUF port) is high at most ``HOLD`` cycles in a row;
* ``desc`` follows the stream rules; ``clear_error``, ``dma_error``, ``coll_timeout`` and any
  input added later are free.

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
#: Cycles in a row the sequencer may be stuck. Worst case: the head waits for the engine that
#: took the previous command (TAKE + 1 cycles offered, BUSY of busy, 1 to dispatch), then its
#: own engine takes it and stays busy (TAKE + 1 + BUSY) before ``busy`` can fall; ``hold``
#: may add HOLD; plus 2 for the head register and the last busy cycle. (A trace of exactly
#: this, LOAD_STATIONARY then an ACTIVATE of the words it reads, is what a smaller bound
#: fails on.)
BOUND = 2 * (TAKE + 1 + BUSY) + HOLD + 2  # = bound_for(TAKE, BUSY, HOLD) = 16


def bound_for(take: int, busy: int, hold: int) -> int:
    """:data:`BOUND` for other engine bounds."""
    return 2 * (take + 1 + busy) + hold + 2


def _busy_window(m: Module, took, busies, name: str, limit: int) -> None:
    """Assume ``busies`` are low except within ``limit`` cycles after ``took`` (a handshake)."""
    window = Signal(range(limit + 1), name=f"{name}__window")
    with m.If(took):
        m.d.sync += window.eq(limit)
    with m.Elif(window != 0):
        m.d.sync += window.eq(window - 1)
    for busy in busies:
        m.d.comb += Assume(~busy | (window != 0), f"{name}: busy only after a command")


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
        _busy_window(m, fire(dut.te), [top.input("te_feed_busy"), top.input("te_busy")], "te",
                     busy)
        _busy_window(m, fire(dut.act) | fire(dut.seed), [top.input("act_busy")], "act", busy)
        _busy_window(m, fire(dut.coll), [top.input("coll_busy")], "coll", busy)
        bounded_run(m, top.input("hold"), hold, "hold", assume=True)
        stuck = (dut.busy | dut.desc.valid) & ~fire(dut.desc)
        bounded_run(m, stuck, bound, "sequencer stuck", assume=False)

    return FormalTop(dut, build, rules=True)
