"""`nclite demo` end to end: both simulators, bit-exact, and the cycle count it claims."""

import pytest

from sim.demo import format_result, run_pe_chain_demo


@pytest.mark.parametrize("dtype", ["bf16", "fp8_e5m2"])
def test_demo_is_bit_exact_and_counts_cycles(simulator, dtype):
    r = run_pe_chain_demo(simulator=simulator, length=4, vectors=64, dtype=dtype, seed=3)
    assert r["bit_exact"], r
    # Full rate: 4 weight shifts, then one vector per cycle, then the pipeline drains.
    assert r["latency"] == 1 + 4 * 2
    assert r["cycles"] == 4 + 64 + r["latency"] - 1
    assert r["macs"] == 64 * 4
    assert r["utilization"] == pytest.approx(64 / r["cycles"])
    assert "bit-exact with golden" in format_result(r)
