"""`nclite demo` end to end: both simulators, bit-exact, and the cycle count it claims."""

import pytest

from sim.cli.pe_chain import format_result, run_pe_chain_demo


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


@pytest.mark.parametrize("only", [
    "mlp",  # make test (a data-parallel GEMM + all-reduce on the demo's four-core ring build
    #         runs in tests/hdl/test_multicore_rtl.py::test_core_ring[*-data_parallel])
    pytest.param("moe", marks=pytest.mark.slow, id="moe"),  # (make test: the MoE kernel
    #         runs in tests/kernels/test_kernel_rtl.py, the same build and program)
    pytest.param(None, marks=pytest.mark.slow, id="all")])
def test_core_demo_cli(simulator, only):
    """`nclite demo`: the MLP on one core and the 4-core all-reduce, both bit-exact with the
    ISS, DRAM in RTL (``hdl.sim_top``); the figures are the performance counters' (checked for
    consistency here)."""
    import json

    from click.testing import CliRunner

    from sim.cli import main
    from sim.cli.demo import format_demo

    res = CliRunner().invoke(main, ["demo", "--sim", simulator, "--seed", "5", "--json"]
                             + (["--only", only] if only else []))
    assert res.exit_code == 0, res.output
    fig = json.loads(res.stdout)  # (progress lines go to stderr)
    mlp, ring, moe = fig["mlp"], fig["ring"], fig["moe"]
    if only == "moe":
        assert mlp is None and ring is None and moe["bit_exact"], fig
        assert all(0 < s < 1 for s in moe["comm_share"]) and moe["dropped"] >= 0
        assert "nclite demo 3: an expert-parallel MoE layer" in format_demo(None, None, moe)
        return
    assert mlp["bit_exact"], fig
    assert mlp["dram"] == "memory", "the demo's DRAM is cocotbext-axi's, not the RTL memory"
    if only == "mlp":
        assert ring is None
        assert "bit-exact with the golden ISS" in format_demo(mlp, None)
        return
    assert ring["bit_exact"] and ring["dram"] == "memory", fig
    p = mlp["perf"]
    assert p["moving_columns"] * mlp["n"] ** 2 >= mlp["macs"] > 0
    assert max(p["tensor_busy"], p["dma_busy"], p["activation_busy"]) <= p["busy"]
    assert mlp["utilization"] == pytest.approx(mlp["macs"] / (mlp["n"] ** 2 * p["busy"]))
    assert len(ring["perf"]) == ring["ranks"] == 4
    assert all(q["collective_busy"] > 0 for q in ring["perf"])
    text = format_demo(mlp, ring, moe)
    assert "bit-exact with the golden ISS" in text and "core 3" in text
    assert moe["bit_exact"] and "collective" in text


def test_gemm_bench(simulator):
    """The roofline's and the speed section's GEMM programs (``make bench``) on the demo's core
    build: a bf16 and an fp8 GEMM (a dtype code given), both bit-exact with the ISS (the
    testbench compares every memory), figures consistent."""
    from golden.isa import Dtype
    from sim.cli.demo import CORE_CONFIG, run_gemm_bench

    r = run_gemm_bench([(4, 8, 16), (8, 4, 8, int(Dtype.FP8_E4M3))], params=CORE_CONFIG,
                       simulator=simulator)
    assert r["bit_exact"] and r["n"] == CORE_CONFIG["n"], r
    assert [row["dtype"] for row in r["rows"]] == ["bf16", "fp8_e4m3"], r
    for row in r["rows"]:
        assert row["macs"] == row["m"] * row["k"] * row["f"]
        assert 0 < row["utilization"] <= 1 and 0 < row["tensor_share"] <= 1, row
