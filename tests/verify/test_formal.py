"""Formal verification (sim/verify/formal, yowasp-sby): one test per property.

The fast subset (``fast=True`` in ``sim/verify/formal/registry.py``: the SRU bf16 proof, stream
rules
on every stream component, FIFO overflow/underflow, the small sequencer liveness check, and
the mutants) runs in ``make test``; the rest is marked slow (``make test-full``) and all of it
runs in ``make formal``. Mutants are broken designs whose proofs must FAIL: they show that the
flow reports a violation (with a counterexample trace), so no PASS here is vacuous.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from amaranth.hdl import Assert

from sim.verify.formal.flow import FormalProperty, run_property
from sim.verify.formal.harness import FormalTop, stream_ports
from sim.verify.formal.mutants import CountingSource
from sim.verify.formal.registry import MUTANTS, PROPERTIES

_VENV_BIN = Path(sys.executable).parent
_HAVE_TOOLS = (shutil.which("yowasp-sby", path=str(_VENV_BIN)) is not None
               or shutil.which("yowasp-sby") is not None)

pytestmark = pytest.mark.skipif(not _HAVE_TOOLS, reason="yowasp-sby not installed "
                                "(make setup)")


def _params():
    return [pytest.param(prop, id=prop.name, marks=() if prop.fast else (pytest.mark.slow,))
            for prop in PROPERTIES + MUTANTS]


@pytest.mark.parametrize("prop", _params())
def test_property(prop: FormalProperty, tmp_path):
    result = run_property(prop, build_dir=tmp_path)
    assert result.status == prop.expect, (
        f"{prop.name}: {result.status}, expected {prop.expect}: "
        f"{'; '.join(result.failed) or result.detail} (trace: {result.trace})\n{prop.doc}")
    if prop.expect == "FAIL":  # a failure comes with its counterexample and its message
        assert result.trace and Path(result.trace).exists()
        assert result.failed


def test_broken_source_is_caught_with_its_message(tmp_path):
    """A source withdrawing valid while stalled: the flow names the broken rule and the port,
    and the same harness passes the correct source (so the failure is the bug's)."""
    bad = run_property(FormalProperty("neg", "t", "", lambda: _rules(CountingSource("drop_valid")),
                                      "bmc", 4, engine="boolector"), build_dir=tmp_path)
    assert bad.status == "FAIL"
    assert bad.failed == ["o: valid dropped while stalled"]
    good = run_property(FormalProperty("pos", "t", "", lambda: _rules(CountingSource()),
                                       "bmc", 4, engine="boolector"), build_dir=tmp_path)
    assert good.status == "PASS"


def _rules(dut):
    return FormalTop(dut, rules=True)


def test_reachable_state_is_not_assumed_away(tmp_path):
    """An assertion that the counting source never offers payload 3 must fail: the harness's
    assumptions leave the design free to run (the clock is a port, inputs are free)."""
    def build(m, top):
        m.d.comb += Assert(~top.dut.o.valid | (top.dut.o.payload != 3), "payload 3 offered")

    r = run_property(FormalProperty("reach", "t", "",
                                    lambda: FormalTop(CountingSource(), build, rules=True),
                                    "bmc", 8, engine="boolector"), build_dir=tmp_path)
    assert r.status == "FAIL" and r.failed == ["payload 3 offered"]


def test_stream_ports_found_from_the_signature():
    from hdl.sequencer import Sequencer
    seq = Sequencer(n=2, sbuf_words=4, psum_banks=1, psum_words=4, dram_bytes=64, ring=True)
    seq._MustUse__silence = True  # only its signature is looked at
    ports = {p.path: p.produced for p in stream_ports(seq)}
    assert ports["desc"] is False
    assert all(ports[name] for name in ("dma", "te", "act", "seed", "coll"))
