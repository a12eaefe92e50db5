"""The nclite CLI: gemm end to end on a small engine, errors as one line."""

import json

from click.testing import CliRunner

from sim.cli import main


def test_gemm_json_is_bit_exact():
    r = CliRunner().invoke(main, ["gemm", "--array", "2", "--m", "3", "--k", "3", "--n", "5",
                                  "--dtype", "fp8_e5m2", "--sim", "icarus", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):])
    assert out["bit_exact"] and out["macs"] == 3 * 3 * 5 and out["n"] == 2
    assert out["compute_cycles"] >= out["ideal_cycles"] > 0


def test_errors_are_one_line():
    r = CliRunner().invoke(main, ["gemm", "--m", "0"])
    assert r.exit_code != 0 and "Traceback" not in r.output


def test_allreduce_json_and_text():
    args = ["allreduce", "--ranks", "3", "--n", "40", "--n", "1000", "-w", "2",
            "--op", "all-gather", "--latency", "2", "--sim", "icarus"]
    r = CliRunner().invoke(main, [*args, "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):])
    assert out["op"] == "ALL_GATHER" and out["ranks"] == 3 and out["link_width"] == 2
    assert [run["words"] for run in out["runs"]] == [40, 1000]
    for run in out["runs"]:
        assert run["bound_cycles"] == 2 / 3 * run["words"] / 2  # (P-1)/P * n / W
        assert run["cycles"] >= run["bound_cycles"] and run["efficiency"] <= 1
    text = CliRunner().invoke(main, args).output
    assert "all-gather on a ring of 3 engines" in text and "efficiency" in text
