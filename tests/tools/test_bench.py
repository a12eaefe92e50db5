"""`nclite bench`: Yosys generic cell counts, and the results.json / results.md writer."""

import json

import pytest

from sim.tools import bench
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
                            collectives=False, core=False, speed=False, training=False,
                            sparsity=False)
    assert bench.failures(results) == []
    assert results["sim_speed_models"] is None
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
    assert len(data["sim_speed_models"]) == len(bench.speed_runs(quick=True))
    assert data["only"] is None
    assert "## Simulation speed\n" in path_md.read_text()


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
    throughput line (the throughput run itself is tests/hdl/test_sru_rtl.py's)."""
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


def test_core_section_rendering_and_failures():
    """The roofline table, the demo's MLP line, and a program that is not bit-exact with the
    ISS (GEMMs or MLP) reported as a failure (figures made up)."""
    row = {"dtype": "bf16", "m": 16, "k": 16, "f": 64, "commands": 40, "cycles": 500,
           "utilization": 0.512, "bound": 1.0, "intensity": 2.0, "macs":
           16 * 16 * 64, "perf": {"tensor_busy": 400, "dma_busy": 300, "activation_busy": 50}}
    mlp = {"n": 4, "layers": [[16, 12], [12, 8]], "batch": 16, "commands": 71,
           "bit_exact": True, "macs": 4608, "utilization": 0.36, "params": {"data_width": 64},
           "perf": {"busy": 800, "tensor_busy": 640, "dma_busy": 462, "activation_busy": 130,
                    "moving_columns": 288}}
    core = {"configs": [{"n": 4, "bytes_per_cycle": 8, "bit_exact": True, "rows": [row]}],
            "mlp": mlp}
    results = {"sim_speed": [], "synth": [], "core": core}
    md = bench.render_md(results)
    assert "| 4 | 8 | bf16 | 16 x 16 x 64 | 40 | 500 | 51.2 % | 100 % | 2.00 | 80 % | 60 % | " \
           "10 % |" in md
    assert "800 cycles, 36.0 % of the MAC slots" in md
    assert bench.failures(results) == []
    core["configs"][0]["bit_exact"] = False
    mlp["bit_exact"] = False
    bad = bench.failures(results)
    assert len(bad) == 2 and all("not bit-exact" in b for b in bad), bad


def _speed_item(**kw) -> dict:
    """A simulation-speed item as bench_model_speed returns it (figures made up)."""
    item = {"workload": "te_gemm", "label": "8x8 tensor engine GEMM", "simulator": "verilator",
            "size": [64, 64, 64], "run": "GEMM 64 x 64 x 64", "bit_exact": True,
            "testbench": {"cycles": 9000, "wall_s": 0.2, "cycles_per_s": 45000.0,
                          "own_cycles_per_s": 50000.0},
            "model": {"cycles": 3_000_000, "wall_s": 3.0, "cycles_per_s": 1e6, "clock": "gpi"},
            "python_clock": None, "ratio": 1e6 / 45000, "build_s": 70.0, "target": 60000,
            "bare_seconds": 3.0}
    item.update(kw)
    return item


def test_model_speed_in_both_simulators(simulator):
    """The section's measurement on a small PE-chain run: the testbench's figures from
    cocotb's timing of the test, the bare-clock run on the same build, a fresh build timed
    (Icarus only here: a fresh Verilator build takes tens of seconds, see the slow test);
    two runs as one (``fastest_speed``: the faster of each kind, the build of the first).
    20 vectors: no other test here runs that demo (a shared run directory races under xdist)."""
    runs = [bench.bench_model_speed("pe_chain", simulator, 20, bare_seconds=0.2,
                                    build=simulator == "icarus" and i == 0) for i in range(2)]
    r = bench.fastest_speed(runs)
    assert r["bit_exact"] and r["simulator"] == simulator and r["run"] == "20 vectors"
    tb, model = r["testbench"], r["model"]
    assert r["testbench_runs"] == [run["testbench"]["cycles_per_s"] for run in runs]
    assert tb["cycles_per_s"] == max(r["testbench_runs"])
    assert model["cycles_per_s"] == max(run["model"]["cycles_per_s"] for run in runs)
    assert r["build_s"] == runs[0]["build_s"]
    # 20 vectors, the weight load and the pipeline's drain, the reset before them.
    assert 20 + bench.SIM_LENGTH <= tb["cycles"] < 200, tb
    assert model["cycles"] > 1000 and model["clock"] == "gpi", model
    for fig in (tb, model):
        assert fig["wall_s"] > 0 and fig["cycles_per_s"] == pytest.approx(
            fig["cycles"] / fig["wall_s"]), fig
    assert tb["own_cycles_per_s"] > 0
    assert r["ratio"] == pytest.approx(model["cycles_per_s"] / tb["cycles_per_s"])
    if simulator == "icarus":  # cocotb's default clock is a Python coroutine there
        assert r["python_clock"]["clock"] == "py" and r["python_clock"]["cycles"] > 0
        assert r["build_s"] > 0 and r["target"] is None
    else:
        assert r["python_clock"] is None and r["build_s"] is None
        assert r["target"] == bench.SPEED_TARGETS["pe_chain"]
    assert set(r["steps_wall_s"]) == {"workload", "bare_clock", "fresh_build"}
    results = {"sim_speed": [], "synth": [], "sim_speed_models": [r]}
    assert bench.failures(results) == []
    md = bench.render_md(results)
    assert "## Simulation speed\n" in md
    assert f"| PE chain k = {bench.SIM_LENGTH} | {simulator} | 20 vectors: " in md
    assert f"| {r['ratio']:.1f} |" in md


@pytest.mark.slow
def test_fresh_verilator_build_is_timed():
    """A fresh Verilator build of a recorded run's model, in a directory of its own."""
    from sim import runner
    from sim.cli.pe_chain import run_pe_chain_demo

    with bench.recording_runs() as calls:
        run_pe_chain_demo(simulator="verilator", length=2, vectors=4)
    (call,) = calls
    before = set((call["result"].verilog.parent).iterdir())
    assert bench.fresh_build_seconds(call) > 1
    assert set(call["result"].verilog.parent.iterdir()) == before, "the cached build is kept"
    assert not list((runner.build_root() / "bench").glob("fresh-build-*"))


def test_recording_runs_restores_the_runner():
    from sim import runner

    real = runner.run
    with pytest.raises(ValueError, match="simulator must be"):
        with bench.recording_runs() as calls:
            assert runner.run is not real
            runner.run("hdl.pe:PE", {}, "sim.tb.pe_chain", "no-such-simulator")
    assert runner.run is real
    (call,) = calls
    assert call["result"] is None and call["error"].startswith("ValueError: simulator must")
    assert call["factory"] == "hdl.pe:PE" and call["simulator"] == "no-such-simulator"


def test_cocotb_test_timing(tmp_path):
    def xml(*cases):
        body = "".join(
            f'<testcase name="t{i}" time="{wall:.3f}"><properties>'
            f'<property name="sim_time_unit" value="{unit}" />'
            f'<property name="sim_time_duration" value="{ns}" />'
            f'<property name="sim_time_ratio" value="{ns / wall}" /></properties></testcase>'
            for i, (ns, wall, unit) in enumerate(cases))
        path = tmp_path / f"results{len(cases)}{cases[0][2]}.xml"
        path.write_text(f"<testsuites><testsuite>{body}</testsuite></testsuites>")
        return path

    t = bench.cocotb_test_timing(xml((123450.0, 0.0123456, "ns")))
    assert t["cycles"] == 12345 and t["wall_s"] == pytest.approx(0.0123456)  # not rounded
    assert t["cycles_per_s"] == pytest.approx(12345 / 0.0123456)
    with pytest.raises(ValueError, match="2 tests"):
        bench.cocotb_test_timing(xml((10.0, 1.0, "ns"), (10.0, 1.0, "ns")))
    with pytest.raises(ValueError, match="simulated time in 'us'"):
        bench.cocotb_test_timing(xml((10.0, 1.0, "us")))


def test_top_inputs(tmp_path):
    v = tmp_path / "top.v"
    v.write_text("module \\top.sub (a, clk);\n  input a;\n  input clk;\nendmodule\n"
                 "module top(clk, rst, x, y, z);\n  input clk;\n  wire clk;\n  input rst;\n"
                 "  input [15:0] x;\n  input signed [3:0] y;\n  output z;\nendmodule\n")
    assert bench.top_inputs(v) == ["x", "y"]
    (tmp_path / "other.v").write_text(v.read_text())
    with pytest.raises(ValueError, match="no module other"):
        bench.top_inputs(tmp_path / "other.v")


def test_speed_section_rendering_and_failures():
    slow = _speed_item(testbench={"cycles": 9000, "wall_s": 0.5, "cycles_per_s": 18000.0,
                                  "own_cycles_per_s": None}, ratio=1e6 / 18000)
    icarus = _speed_item(simulator="icarus", target=None, build_s=None,
                         python_clock={"cycles": 1000, "wall_s": 1.0, "cycles_per_s": 1000.0,
                                       "clock": "py"})
    results = {"sim_speed": [], "synth": [], "sim_speed_models": [
        _speed_item(), slow, icarus, _speed_item(bit_exact=False),
        {"workload": "pe_chain", "label": "PE chain k = 8", "simulator": "icarus",
         "run": "100 vectors", "error": "SimulationFailed: boom\nmore"}]}
    md = bench.render_md(results)
    assert ("| 8x8 tensor engine GEMM | verilator | GEMM 64 x 64 x 64: 9 000 cycles in 0.20 s | "
            "45 000 (target 60 000: **below**) | 1 000 000 (3 000 000) | 22.2 | - | 70.0 |") in md
    assert "| 18 000 (target 60 000: **below**) |" in md
    assert "| 45 000 | 1 000 000 (3 000 000) | 22.2 | 1 000 | - |" in md  # Icarus: no target
    assert "**not bit-exact**" in md and "FAILED: SimulationFailed: boom |" in md
    assert "8x8 tensor engine GEMM in verilator 50 000" in md  # the testbench's own figure
    assert "about 3 s of wall time" in md
    ok = _speed_item(testbench=dict(_speed_item()["testbench"], cycles_per_s=60000.0))
    assert "| 60 000 (target 60 000) |" in bench.render_md({"sim_speed_models": [ok]})
    bad = bench.failures(results)
    assert len(bad) == 2 and any("not bit-exact" in b for b in bad), bad


def test_speed_runs_and_sections():
    full, quick = bench.speed_runs(), bench.speed_runs(quick=True)
    assert len(full) == len(quick) == 2 * len(bench.SPEED_WORKLOADS)
    assert all(build for *_, build in full)
    assert [s for _, s, *_, build in quick if build] == ["icarus"] * len(bench.SPEED_WORKLOADS)
    assert bench.count_runs(quick=True, **bench.section_args(["sim-speed"])) == len(quick)
    assert bench.section_args(None) == {}
    args = bench.section_args(["sim-speed", "core"])
    assert args["speed"] and args["core"] and not args["gemm"] and args["sim_runs"] == []
    with pytest.raises(ValueError, match="unknown bench section"):
        bench.section_args(["speed"])


def test_cli_sections_are_bench_sections():
    from sim.cli.app import bench as bench_command

    (only,) = [p for p in bench_command.params if p.name == "only"]
    assert tuple(only.type.choices) == bench.SECTIONS


def _training_run(mode, lr, moved, same=True):
    steps = 60
    return {"mode": mode, "lr": lr, "steps": steps, "cores": 4, "seed": 0,
            "mlp": {"inputs": 64, "hidden": 32, "classes": 10, "batch": 8},
            "train_samples": 1438, "test_samples": 359, "loss": [1.0] * 10 + [0.25] * 50,
            "moved": [moved] * steps, "accuracy": [(30, 0.5), (60, 0.875)],
            "same_on_every_core": same}


def test_training_section_rendering_and_failures(tmp_path):
    """The training section: one row per run with its end figures (the means of the last 50
    steps), the RTL sentence, the plot; a run whose cores disagree, an RTL mismatch and a
    failure are reported."""
    from sim.tools import bench_training as bt

    rtl = {"steps": 2, "cores": 4, "config": {"n": 8}, "bit_exact": True, "mismatch": "",
           "cycles": [100, 120, 110, 90], "same_as_iss_run": True}
    tr = {"steps": 60, "lrs": [0.5, 0.01], "rtl": rtl,
          "runs": [_training_run(m, lr, 0.5 if m == "rne" else 1.0)
                   for lr in (0.5, 0.01) for m in ("fp32", "rne", "sr")]}
    md = bench.render_md({"training": tr})
    assert "## Training on the cores" in md
    assert "| 0.01 | bf16 weights, RNE | 0.2500 | 87.5 % | 50.0 % |" in md
    assert "120 cycles (60 a step)" in md and "bit-exact with the ISS" in md
    assert bt.training_failures(tr) == []
    png = bt.plot_training(tr, tmp_path / "training.png")
    assert png.stat().st_size > 1000
    bad = dict(tr, rtl=dict(rtl, bit_exact=False, mismatch="core 1 DRAM byte 4"),
               runs=[_training_run("sr", 0.5, 1.0, same=False)])
    assert "**NOT bit-exact**: core 1 DRAM byte 4" in bench.render_md({"training": bad})
    assert len(bt.training_failures(bad)) == 2
    assert bt.training_failures({"error": "RuntimeError: x"}) == ["training: RuntimeError: x"]
    assert "FAILED: RuntimeError: x" in bench.render_md({"training": {"error": "RuntimeError: x"}})
