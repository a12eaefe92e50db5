"""README.md's results table is generated from the committed bench and synthesis results."""

import re

import pytest

from sim.tools import readme


def test_results_table_is_current():
    bench, synth = readme.load()
    assert not bench.get("quick"), "bench/results.json must come from a full `make bench`"
    text = (readme.REPO_ROOT / "README.md").read_text()
    assert readme.update(text, readme.render(bench, synth)) == text, (
        "README.md's results table differs from bench/results.json and synth/report.json: "
        "run `make readme`")


def test_table_shows_what_the_issue_asks_for():
    table = readme.render(*readme.load())
    for what in ("bit-exact", "of MAC slots", "LUTs", "MHz", "of the ring bound"):
        assert what in table, what


def test_update_needs_the_markers():
    with pytest.raises(ValueError, match="results:begin"):
        readme.update("no markers here", "table")
    text = f"a\n{readme.BEGIN}\nold\n{readme.END}\nb\n"
    assert readme.update(text, "new") == f"a\n{readme.BEGIN}\nnew\n{readme.END}\nb\n"


def test_reliability_table_is_current():
    text = (readme.REPO_ROOT / "README.md").read_text()
    table = readme.render_reliability(*readme.load_reliability())
    assert readme.update(text, table, readme.R_BEGIN, readme.R_END) == text, (
        "README.md's reliability table differs from docs/formal.json and docs/coverage.json: "
        "run `make readme`")
    for what in ("formal: stream protocol", "proven", "Verilator code coverage",
                 "functional coverage: sru"):
        assert what in table, what


def test_reliability_table_refuses_a_failed_proof():
    formal, coverage = readme.load_reliability()
    broken = dict(formal, results=[dict(formal["results"][0], ok=False)])
    with pytest.raises(ValueError, match="not as expected"):
        readme.render_reliability(broken, coverage)


def _speed(workload, simulator, label, tb, model, build, target=None):
    return {"workload": workload, "label": label, "simulator": simulator, "bit_exact": True,
            "testbench": {"cycles_per_s": tb}, "model": {"cycles_per_s": model},
            "build_s": build, "target": target}


def test_table_shows_the_simulation_speed():
    bench, synth = readme.load()
    bench.pop("sim_speed_models", None)  # the committed results' own rows, if any
    plain = readme.render(bench, synth)
    bench["sim_speed_models"] = [
        _speed("te_gemm", "verilator", "8x8 tensor engine GEMM", 45000.4, 1.2e6, 71.2, 60000),
        _speed("te_gemm", "icarus", "8x8 tensor engine GEMM", 300, 20000, 2.4),
        {**_speed("pe_chain", "verilator", "PE chain k = 8", 2e5, 3e5, None, 150000),
         "testbench_runs": [1.5e5, 2e5, 1.9e5]},
        {"workload": "core_gemm", "simulator": "icarus", "error": "SimulationFailed: boom"}]
    table = readme.render(bench, synth).replace("\u202f", " ")  # thousands: thin spaces
    assert "simulation speed" not in plain
    assert ("| simulation speed: 8×8 tensor engine GEMM | Verilator 45 000 (model alone "
            "1 200 000); Icarus 300 (model alone 20 000) | cycles/s with its testbench, the "
            "build not counted; target ≥ 60 000 in Verilator; build 71 s (Verilator), 2 s "
            "(Icarus) |") in table
    assert ("| simulation speed: PE chain k = 8 | Verilator 200 000 (model alone 300 000) | "
            "cycles/s with its testbench, the build not counted, the fastest of 3 runs; "
            "target ≥ 150 000 in Verilator |") in table
    assert "core_gemm" not in table and "NeuronCore N = 4 GEMM program" not in table
    # The speed runs count among the benchmark runs checked against golden (the failed one too).
    count = re.search(r"bit-exact in (\d+) of (\d+)", plain).groups()
    exact, runs = (int(n) for n in count)
    assert f"bit-exact in {exact + 3} of {runs + 4} " in table


def test_only_full_bench_results_make_the_table():
    assert readme.not_full({"quick": False, "only": None}) is None
    assert "--quick" in readme.not_full({"quick": True})
    assert "holds only sim-speed" in readme.not_full({"only": ["sim-speed"]})


def test_table_shows_the_training_runs():
    """Each learning rate's test accuracies and moved fractions (from the runs' ends), the
    RTL's cycles a step; a failed training benchmark is refused."""
    from tests.tools.test_bench import _training_run

    bench, synth = readme.load()
    rtl = {"steps": 2, "cores": 4, "config": {"n": 8}, "bit_exact": True,
           "cycles": [21000, 21960, 21900, 21950], "same_as_iss_run": True}
    bench["training"] = {"steps": 60, "lrs": [0.5, 0.01], "rtl": rtl,
                         "runs": [_training_run(m, lr, 0.25 if m == "rne" else 0.75)
                                  for lr in (0.5, 0.01) for m in ("fp32", "rne", "sr")]}
    table = readme.render(bench, synth).replace("\u202f", " ")
    assert ("| training: MLP 64-32-10 on digits, 4 cores, lr 0.01 | test accuracy: fp32 87.5 %, "
            "bf16 RNE 87.5 %, bf16 SR 87.5 % |") in table
    assert "weights moved a step: RNE 25.0 %, SR 75.0 %" in table
    assert "| training step on the RTL, 4 cores N = 8 | 10 980 cycles a step |" in table
    with pytest.raises(ValueError, match="training benchmark failed"):
        readme.render(dict(bench, training={"error": "boom"}), synth)
