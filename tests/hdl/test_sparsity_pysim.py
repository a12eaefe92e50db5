"""The sparse mode's arithmetic helpers (hdl/sparsity.py) in amaranth.sim, for every input the
sequencer and the tensor feeder give them: ``slots_of`` and ``ratio_of`` against
golden.sparse's patterns, ``ceil_div`` and ``times_ratio`` against Python's integers (every K
of 10 bits, or 9 for ``ceil_div``, R in 1..4; a MATMUL's f up to 2^16 − 1, sampled). The
sparse core runs them on the Verilog (tests/hdl/test_core_rtl.py's sparse program, make
test-full)."""

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from golden import sparse
from hdl.sparsity import MAX_RATIO, SPARSITY_CODES, ceil_div, ratio_of, slots_of, times_ratio

_ALL = {SPARSITY_CODES[name]: nm for name, nm in sparse.PATTERNS.items()}


def _table(build, inputs):
    """``build(m, *signals) -> out`` over every tuple of ``inputs``: the outputs, in order."""
    m = Module()
    sigs = [Signal(width, name=f"in{i}") for i, (width, _) in enumerate(inputs)]
    out = build(m, *sigs)
    sim = Simulator(m)
    got = {}

    async def bench(ctx):
        def walk(i, values):
            if i == len(inputs):
                yield tuple(values)
                return
            for v in inputs[i][1]:
                yield from walk(i + 1, [*values, v])

        for values in walk(0, []):
            for s, v in zip(sigs, values, strict=True):
                ctx.set(s, v)
            got[values] = ctx.get(out)

    sim.add_testbench(bench)
    sim.run()
    return got


def test_slots_and_ratio_match_the_patterns():
    got = _table(lambda m, k, mode: slots_of(m, k, mode, _ALL, name="slots"),
                 [(10, range(1024)), (3, [0, *_ALL])])
    for (k, mode), slots in got.items():
        want = k if mode == 0 else sparse.Pattern(*_ALL[mode]).slots(k)
        assert slots == want, f"slots_of(K={k}, mode={mode}) = {slots}, want {want}"
    ratios = _table(lambda m, mode: ratio_of(m, mode, _ALL, name="ratio"), [(3, range(8))])
    for (mode,), r in ratios.items():
        want = sparse.Pattern(*_ALL[mode]).ratio if mode in _ALL else 1
        assert r == want, f"ratio_of(mode={mode}) = {r}, want {want}"
        assert r <= MAX_RATIO


@pytest.mark.parametrize("helper", ["ceil_div", "times_ratio"])
def test_ratio_arithmetic(helper):
    if helper == "ceil_div":  # a MATMUL's K (9 bits, as the helper requires), every R
        got = _table(lambda m, k, r: ceil_div(m, k, r, name="q"),
                     [(9, range(512)), (3, range(1, MAX_RATIO + 1))])
        want = {(k, r): -(-k // r) for k, r in got}
    else:  # a MATMUL's f: every value below 2^10, then every 97th to 2^16 - 1, and the top
        fs = [*range(1024), *range(1024, 1 << 16, 97), (1 << 16) - 1]
        got = _table(lambda m, f, r: times_ratio(m, f, r, name="w", width=18),
                     [(16, fs), (3, range(1, MAX_RATIO + 1))])
        want = {(f, r): f * r for f, r in got}
    bad = [(x, r, got[x, r], want[x, r]) for x, r in got if got[x, r] != want[x, r]]
    assert not bad, f"{helper}: (input, R, got, want) {bad[:5]} of {len(bad)}"
