"""`nclite bench`: Yosys generic cell counts, and the results.json / results.md writer."""

import json

import pytest

from sim import bench
from synth.yosys import cell_class, generic_cells

GATES = {"$_AND_", "$_OR_", "$_XOR_", "$_NAND_", "$_NOR_", "$_XNOR_", "$_ANDNOT_", "$_ORNOT_",
         "$_NOT_"}


def test_generic_cells_of_the_fp32_adder():
    comb = generic_cells("hdl.fp32_add:Fp32Adder", {"stages": 0})
    piped = generic_cells("hdl.fp32_add:Fp32Adder", {"stages": 2})
    for r in (comb, piped):
        assert r["cells"] > 100, r
        assert r["cells"] == sum(r["by_type"].values()) == sum(r["by_class"].values())
        assert GATES & set(r["by_type"]), r
        assert r["yosys_version"].startswith("Yosys ")
    assert comb["by_class"]["ff"] == 0, comb
    assert piped["by_class"]["ff"] > 0, piped
    # Cached: a second call returns the same figures.
    assert generic_cells("hdl.fp32_add:Fp32Adder", {"stages": 0}) == comb


def test_cell_class():
    assert cell_class("$_SDFFE_PP0P_") == cell_class("$_DFF_P_") == "ff"
    assert cell_class("$_MUX_") == "mux"
    assert cell_class("$_XOR_") == cell_class("$_NOT_") == "logic"


def test_bench_writes_json_and_md(tmp_path):
    # A small subset of the real run (the full --quick run is the slow test below).
    results = bench.collect(quick=True, sim_runs=[("icarus", 32, 16)],
                            synth_designs=bench.SYNTH_DESIGNS[:1], gemm=False, sru=False,
                            collectives=False, core=False)
    assert bench.failures(results) == []
    path_json, path_md = bench.write_results(results, tmp_path / "out")
    data = json.loads(path_json.read_text())
    assert {"schema", "date", "git", "tools", "sim_speed", "synth"} <= set(data)
    assert {"yosys", "verilator", "iverilog"} <= set(data["tools"])
    (sim,) = data["sim_speed"]
    assert sim["simulator"] == "icarus" and sim["vectors"] == 16 and sim["bit_exact"]
    assert {"cycles", "sim_cycles_per_s", "utilization"} <= set(sim)
    (syn,) = data["synth"]
    assert syn["cells"] > 100 and set(syn["by_class"]) == {"logic", "mux", "ff"}
    md = path_md.read_text()
    assert "## Simulation speed of the PE chain" in md and "## Yosys generic cell counts" in md
    assert "wall-clock figure of this machine" in md
    assert "| icarus | 16 |" in md and "| Fp32Adder stages=0 |" in md


def test_failed_items_are_reported():
    results = {"sim_speed": [{"simulator": "icarus", "vectors": 4, "error": "boom\nmore"}],
               "synth": [{"design": "X", "error": "YosysFailed: bad"}]}
    md = bench.render_md(results)
    assert "FAILED: boom" in md and "FAILED: YosysFailed: bad" in md
    assert len(bench.failures(results)) == 2


@pytest.mark.slow
def test_run_all_quick(tmp_path):
    path_json, path_md = bench.run_all(tmp_path, quick=True)
    data = json.loads(path_json.read_text())
    assert len(data["sim_speed"]) == len(bench.SIM_RUNS)
    assert len(data["synth"]) == len(bench.SYNTH_DESIGNS)
    assert path_md.exists()


def test_gemm_section_rendering_and_failures():
    item = {"n": 4, "m": 16, "k": 16, "f": 16, "a_fmt": "bf16", "b_fmt": "bf16",
            "simulator": "verilator", "bit_exact": True, "macs": 4096, "compute_cycles": 80,
            "ideal_cycles": 64, "drain_cycles": 20, "utilization": 0.8,
            "sim_cycles_per_s": 1000.0, "shape": "square"}
    results = {"sim_speed": [], "synth": [], "gemm": [item, dict(item, bit_exact=False)],
               "gemm_speed": [dict(item, error="RuntimeError: boom")]}
    md = bench.render_md(results)
    assert "| 4 | bf16 x bf16 | square | 16 x 16 x 16 | 80 | 64 | 80.0 % | 20 | yes |" in md
    assert "**NO**" in md and "FAILED: RuntimeError: boom" in md
    bad = bench.failures(results)
    assert len(bad) == 2 and any("not bit-exact" in b for b in bad)


def test_sru_area_and_report():
    """Cells per lane from the 1- and 2-lane builds; the report renders them and the
    throughput line (the throughput run itself is tests/test_sru_rtl.py's)."""
    r = bench.bench_sru_area(["fp8_e5m2"])
    assert r["cells_per_lane"] > 300 and r["shared_cells"] > 0, r
    assert r["per_lane_by_class"]["ff"] >= 192, "each lane holds a 192-bit XORWOW state"
    md = "\n".join(bench._render_sru({"area": [r], "throughput": {
        "beats": 10, "cycles": 12, "lanes": 4, "latency": 2, "elements_per_cycle": 40 / 12}}))
    assert "## Stochastic-rounding unit" in md and "fp8_e5m2" in md
    assert "3.33 elements per cycle" in md


def test_collectives_section_rendering_and_failures():
    item = {"ranks": 4, "link_width": 2, "latency": 8, "words": 16384, "cycles": 6200,
            "bound_cycles": 6144.0, "efficiency": 6144 / 6200, "setup_cycles": 20,
            "bit_exact": True}
    slow = dict(item, cycles=8000, efficiency=6144 / 8000)
    results = {"sim_speed": [], "synth": [], "collectives": [
        item, slow, dict(item, bit_exact=False),
        {"ranks": 8, "link_width": 1, "words": [1024], "error": "SimulationFailed: hung"}]}
    md = bench.render_md(results)
    assert "## Ring all-reduce" in md
    assert "| 4 | 2 | 16 384 | 6 200 | 6 144 | 0.991 | yes |" in md
    assert "**0.768** (below 0.9)" in md
    assert "FAILED: SimulationFailed: hung" in md
    bad = bench.failures(results)
    assert len(bad) == 2 and any("not bit-exact" in b for b in bad), bad
