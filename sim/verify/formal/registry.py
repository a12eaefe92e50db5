"""Every formal property of nclite, by name (``python -m sim.verify.formal --list`` prints them).

``PROPERTIES`` are the design's proofs (expected PASS); ``MUTANTS`` are deliberately broken
designs or too-tight bounds whose proofs must FAIL, so that no PASS is vacuous. ``fast`` ones run in
``make test`` (tests/verify/test_formal.py), all of them in ``make formal``.
"""

from __future__ import annotations

from . import sequencer as seq
from . import sru
from .fifos import FIFO_CASES, fifo_top
from .flow import FormalProperty
from .mutants import CountingSource, OverfillingProducer
from .streams import PROTOCOL_CASES, protocol_top

__all__ = ["PROPERTIES", "MUTANTS", "by_name", "how"]


def how(mode: str, depth: int) -> str:
    return (f"k-induction, k={depth}" if mode == "prove"
            else f"bounded, {depth} cycles from reset")


def _protocol(case) -> FormalProperty:
    doc = (f"stream rules on every stream port of {case.name} ({how(case.mode, case.depth)}): "
           "produced streams keep valid and payload while stalled, assuming the same of "
           "consumed streams"
           + (f"; fixed inputs: {', '.join(case.fixed)}" if case.fixed else "")
           + (f"; waived in and after a cycle of: {', '.join(case.waive)}" if case.waive else "")
           + (f". {case.note}" if case.note else ""))
    return FormalProperty(f"stream_{case.name}", "stream", doc,
                          lambda: protocol_top(case.build(), case.fixed, case.waive, case.env),
                          case.mode, case.depth, engine=case.engine, fast=case.fast)


def _fifo(case) -> FormalProperty:
    under = ("r_en -> r_rdy" if case.underflow == "r_en" else
             f"{case.underflow}.valid -> r_rdy and a {case.underflow} handshake pops it")
    doc = (f"no overflow (w_en -> w_rdy) and no underflow ({under}) of the SyncFIFO in "
           f"{case.name}, plus its stream rules ({how(case.mode, case.depth)})")
    return FormalProperty(f"fifo_{case.name}", "fifo", doc,
                          lambda: fifo_top(case.build(), case.underflow, case.fixed, case.owner,
                                           case.waive, case.env),
                          case.mode, case.depth, engine=case.engine, fast=case.fast)


_SEQ_SMALL = {"take": 1, "busy": 2, "hold": 1}


def _all() -> list[FormalProperty]:
    props = [
        FormalProperty(
            "sru_bf16_rne_rtz", "sru",
            "StochasticRounder fp32 -> bf16, RNE and RTZ, saturate on and off: equal to a "
            "reference written on the bits (NaN, inf, overflow, saturation, subnormals) for "
            "every fp32 input (stages=0, lanes=1; k-induction, k=1: a full proof)",
            sru.sru_bf16_top, "prove", 1, engine="boolector", fast=True),
    ]
    props += [_protocol(case) for case in PROTOCOL_CASES]
    props += [_fifo(case) for case in FIFO_CASES]
    small = seq.bound_for(**_SEQ_SMALL)
    props += [
        FormalProperty(
            "sequencer_liveness_small", "sequencer",
            f"Sequencer never stuck > {small} cycles (busy or offered a descriptor, none "
            f"accepted) for any descriptor, engines taking within {_SEQ_SMALL['take']} and "
            f"busy within {_SEQ_SMALL['busy']} cycles, hold <= {_SEQ_SMALL['hold']} "
            "(bounded, 24 cycles from reset)",
            lambda: seq.sequencer_liveness_top(**_SEQ_SMALL), "bmc", 24, engine="boolector",
            fast=True),
        FormalProperty(
            "sequencer_liveness", "sequencer",
            f"Sequencer never stuck > {seq.BOUND} cycles for any descriptor, engines taking "
            f"within {seq.TAKE} and busy within {seq.BUSY} cycles, hold <= {seq.HOLD} "
            "(bounded, 34 cycles from reset)",
            seq.sequencer_liveness_top, "bmc", 34, engine="boolector", fast=False),
    ]
    return props


def _mutants() -> list[FormalProperty]:
    small = seq.bound_for(**_SEQ_SMALL)
    return [
        FormalProperty("mutant_source_drop_valid", "mutant",
                       "a source that withdraws valid while stalled: the stream rule must FAIL",
                       lambda: protocol_top(CountingSource("drop_valid")), "bmc", 4,
                       engine="boolector", fast=True, expect="FAIL"),
        FormalProperty("mutant_source_change_payload", "mutant",
                       "a source that changes its payload while stalled: must FAIL",
                       lambda: protocol_top(CountingSource("change_payload")), "bmc", 4,
                       engine="boolector", fast=True, expect="FAIL"),
        FormalProperty("mutant_source_control", "mutant",
                       "the same source without the bug: must PASS (k-induction, k=2)",
                       lambda: protocol_top(CountingSource(None)), "prove", 2,
                       engine="boolector", fast=True),
        FormalProperty("mutant_fifo_overflow", "mutant",
                       "a producer that ignores w_rdy: the FIFO overflow check must FAIL",
                       lambda: fifo_top(OverfillingProducer(), "o"), "bmc", 6,
                       engine="boolector", fast=True, expect="FAIL"),
        FormalProperty("mutant_sru_ties_away", "mutant",
                       "the bf16 reference with ties away from zero: the SRU proof must FAIL",
                       lambda: sru.sru_bf16_top(mutant=True), "prove", 1, engine="boolector",
                       fast=True, expect="FAIL"),
        FormalProperty("mutant_sequencer_tight", "mutant",
                       f"sequencer_liveness_small with the bound {small - 1} instead of {small}: "
                       "must FAIL (the check is live and its bound tight)",
                       lambda: seq.sequencer_liveness_top(**_SEQ_SMALL, bound=small - 1),
                       "bmc", 24, engine="boolector", fast=False, expect="FAIL"),
    ]


PROPERTIES: list[FormalProperty] = _all()
MUTANTS: list[FormalProperty] = _mutants()


def by_name(names) -> list[FormalProperty]:
    """The properties and mutants called ``names`` (KeyError naming the unknown ones)."""
    table = {p.name: p for p in PROPERTIES + MUTANTS}
    missing = [n for n in names if n not in table]
    if missing:
        raise KeyError(f"unknown formal properties: {', '.join(missing)} "
                       f"(python -m sim.verify.formal --list)")
    return [table[n] for n in names]
