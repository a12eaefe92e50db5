"""No FIFO overflow or underflow in the components that build a ``SyncFIFO``.

The FIFOs are made inside the components' ``elaborate`` (``hdl/cmdqueue.py`` ``queue``,
``hdl/collective.py`` ``tx_fifo``, ``hdl/dma.py`` ``bursts``, ``hdl/ring.py`` ``buf``); the
harness reaches them without touching ``hdl/`` by recording every ``SyncFIFO`` built while the
DUT elaborates (:func:`~sim.verify.formal.harness.record_fifos`). Definitions, for a FIFO ``f``:

* **overflow**: ``f.w_en & ~f.w_rdy`` -- an entry handed to a full FIFO, which ``SyncFIFO``
  drops silently. Asserted never to happen. (The command queue's PUSH to a full queue does
  not reach the FIFO: the RTL turns it into the sticky overflow flag, STATUS bit 3, i.e. a
  deliberately reported drop; this proof shows no other path loses a descriptor.)
* **underflow**: the consumer taking an entry from an empty FIFO. Where the consumer pops
  with ``r_en`` as its own "taken" signal (DMA ``bursts``: a W beat that needs the next
  burst length; link ``buf``: ``o.valid & o.ready``): ``f.r_en -> f.r_rdy``. Where the FIFO's
  read side *is* an output stream (command queue ``desc``, collective ``tx``): a handshake
  on that stream pops the FIFO (``valid & ready -> r_en & r_rdy``) and ``valid`` is only
  offered with an entry (``valid -> r_rdy``), so nothing is delivered that was not stored
  and nothing is popped without being delivered, except the command queue's soft-reset
  flush, which is meant to discard. Where two FIFOs feed the stream (the collective
  engine's ``tx_fifo`` and ``fwd_fifo``): ``valid`` only with an entry in one of them, and a
  handshake pops exactly one, nothing else any (but a flush, which resets both).

Inputs are free, stream inputs follow the stream rules (assumed), run-time settings fixed.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Assert, Cat

from hdl.read_port import SBUF_READ_LATENCY

from .harness import FormalTop

__all__ = ["FifoCase", "FIFO_CASES", "fifo_top"]


@dataclass
class FifoCase:
    name: str
    build: object
    underflow: str  # "r_en": r_en -> r_rdy; or the name of the output stream the FIFO feeds
    mode: str = "prove"
    depth: int = 2
    fixed: tuple = ()
    fast: bool = True
    engine: str = "boolector"
    owner: str | None = None  # only the FIFOs elaborated by this class
    waive: tuple = ()
    env: object = None


def fifo_top(dut, underflow: str, fixed=(), owner: str | None = None, waive=(),
             env=None) -> FormalTop:
    """``dut`` with the FIFO properties above on every ``SyncFIFO`` it builds (those of class
    ``owner`` only, if given); raises if there is none. ``fixed``, ``waive``, ``env``: as
    for the stream proofs (:mod:`sim.verify.formal.streams`), whose rules are checked here too."""

    def build(m, top):
        if env is not None:
            env(m, top)
        fifos = [f for f in top.fifos if owner is None or f.owner == owner]
        if not fifos:
            raise RuntimeError(f"no SyncFIFO found in {type(dut).__name__}")
        for k, rec in enumerate(fifos):
            f = rec.fifo
            tag = f"{rec.owner} fifo {k}"
            m.d.comb += Assert(~(f.w_en & ~f.w_rdy), f"{tag}: overflow (write while full)")
            if underflow == "r_en":
                m.d.comb += Assert(~(f.r_en & ~f.r_rdy), f"{tag}: underflow (read while empty)")
            elif len(fifos) == 1:
                port = getattr(dut, underflow)
                m.d.comb += [
                    Assert(~port.valid | f.r_rdy, f"{tag}: {underflow}.valid while empty"),
                    Assert(~(port.valid & port.ready) | (f.r_en & f.r_rdy),
                           f"{tag}: {underflow} handshake without a pop"),
                ]
        if underflow != "r_en" and len(fifos) > 1:
            # Several FIFOs feed one stream (the collective engine's own beats and the beats
            # it forwards): a handshake pops exactly one of them, and nothing else pops one.
            # (A flush, ``waive``, resets the FIFOs: whatever it pops is meant to go.)
            port = getattr(dut, underflow)
            pops = sum((rec.fifo.r_en & rec.fifo.r_rdy) for rec in fifos)
            flushing = Cat(*(top.signal(k) for k in top.waive)).any()
            m.d.comb += [
                Assert(~port.valid | Cat(*(rec.fifo.r_rdy for rec in fifos)).any(),
                       f"{underflow}.valid while every FIFO feeding it is empty"),
                Assert(flushing | (pops == (port.valid & port.ready)),
                       f"{underflow}: a handshake does not pop exactly one FIFO"),
            ]

    return FormalTop(dut, build, rules=True, fixed=fixed, waive=waive)


def _cmdqueue():
    from hdl.cmdqueue import CommandQueue
    return CommandQueue(depth=2, perf_counters=1)


def _collective():
    from hdl.collective import CollectiveEngine
    return CollectiveEngine(ranks=2, link_width=1, depth=4, add_stages=1,
                            watchdog_cycles=16)


def _dma():
    from hdl.dma import DmaEngine
    return DmaEngine(n=1, words=2, max_burst=2)


def _link():
    from hdl.ring import LinkModel
    return LinkModel(link_width=1, max_latency=3)


FIFO_CASES = [
    FifoCase("cmdqueue", _cmdqueue, "desc", mode="bmc", depth=24, waive=("soft_reset",)),
    FifoCase("collective", _collective, "tx", depth=4, fixed=("rank",), waive=("tx_flush",)),
    # (induction looks as far back as a store's reads are in flight: the SBUF's read latency,
    # then the words' register)
    FifoCase("dma", _dma, "r_en", depth=SBUF_READ_LATENCY + 1),
    FifoCase("link", _link, "r_en", mode="bmc", depth=20, fixed=("latency",),
             waive=("flush",)),
]
