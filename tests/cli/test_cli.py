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


def test_sparse_gemm_text():
    """--sparsity: the 4:16 GEMM on the sparse engine (the n4-sparse build of the tensor
    engine's tests has other PSUM sizes; this one is `nclite gemm --array 4`'s), bit-exact,
    its MACs the dense GEMM's."""
    r = CliRunner().invoke(main, ["gemm", "--array", "4", "--m", "5", "--k", "40", "--n", "7",
                                  "--sparsity", "4:16", "--sim", "icarus"])
    assert r.exit_code == 0, r.output
    assert "A[40x5] (4:16 sparse, magnitude-pruned)" in r.output
    assert "bit-exact with golden" in r.output and "1400 dense-equivalent MACs" in r.output
    bad = CliRunner().invoke(main, ["gemm", "--array", "2", "--sparsity", "4:8"])
    assert bad.exit_code == 1 and bad.output.strip().splitlines() == [
        "nclite: error: a 4:8 GEMM needs an array size that is a multiple of 4, not 2"]


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


def test_permute_text_and_bad_shift():
    args = ["allreduce", "--ranks", "3", "--n", "77", "-w", "2", "--op", "permute",
            "--shift", "2", "--sim", "icarus"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "permute by 2 on a ring of 3 engines" in r.output
    assert "(ring bound shift*n/W = 78;" in r.output  # 2 x 39 rows
    bad = CliRunner().invoke(main, [*args[:-4], "--shift", "3"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output
    assert bad.output.strip().splitlines() == [
        "nclite: error: shift must be an integer in 1..2 (ranks - 1), not 3"]


def test_torus_text_and_errors():
    """--torus RxC: a small 2 x 2 torus of engines in Icarus, the all-to-all against the sum
    of its steps' bounds; bad shapes and ops in one line."""
    args = ["allreduce", "--torus", "2x2", "--n", "64", "-w", "2", "--op", "all-to-all",
            "--sim", "icarus"]
    r = CliRunner().invoke(main, [*args, "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):])
    assert out["torus"] == [2, 2] and out["ranks"] == 4 and out["op"] == "ALL_TO_ALL"
    (run,) = out["runs"]
    assert run["bound_cycles"] == 64 / 2 * 2  # 2 x 2: (max(1/2, 1) + max(1/2, 1)) * B
    assert run["cycles"] >= run["bound_cycles"]
    text = CliRunner().invoke(main, args).output
    assert "all-to-all on a 2x2 torus of 4 engines" in text, text
    for bad, msg in ((["--torus", "2by2"], "torus must be RxC (rows x columns, e.g. 2x4), "
                                           "not '2by2'"),
                     (["--torus", "1x4"], "rows must be an integer between 2 and 32, not 1"),
                     (["--torus", "2x2", "--op", "permute"],
                      "a torus runs all-reduce and all-to-all, not permute"),
                     (["--torus", "2x2", "--n", "10", "--op", "all-to-all"],
                      "a torus all-to-all's n must be a multiple of rows * cols * link_width "
                      "= 4, not 10"),
                     (["--torus", "2x2", "--ranks", "6"],
                      "ranks must be rows * cols = 4 on a 2x2 torus, not 6")):
        r = CliRunner().invoke(main, ["allreduce", *bad])
        assert r.exit_code != 0 and r.output.strip().splitlines() == [f"nclite: error: {msg}"], \
            r.output


def _leaves(group, path=()):
    import click

    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _leaves(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def test_every_command_explains_itself_and_has_json():
    """--help explains every option; every command but `waves` (which passes its arguments on
    to another command) prints JSON for scripts."""
    import click

    leaves = dict(_leaves(main))
    assert {("doctor",), ("demo",), ("gemm",), ("sr-demo",), ("allreduce",), ("bench",),
            ("synth", "component"), ("synth", "report"), ("board", "build"), ("board", "gemm"),
            ("waves",), ("lab", "start"), ("lab", "check"), ("lab", "list")} <= set(leaves)
    for path, cmd in leaves.items():
        assert cmd.help and len(cmd.help) > 30, f"nclite {' '.join(path)} has no help text"
        for p in cmd.params:
            if isinstance(p, click.Option):
                assert p.help, f"nclite {' '.join(path)} {p.opts[0]} has no help"
        if path != ("waves",):
            assert any("--json" in p.opts for p in cmd.params), f"nclite {' '.join(path)}"


def test_errors_deep_in_a_command_are_one_line_unless_debug():
    r = CliRunner().invoke(main, ["lab", "start", "99"])
    assert r.exit_code == 1
    assert r.output.strip().splitlines() == [r.output.strip()]
    assert r.output.startswith("nclite: error: there is no lab 99")
    r = CliRunner().invoke(main, ["--debug", "lab", "start", "99"])
    assert r.exit_code == 1 and r.exception is not None and "no lab 99" in str(r.exception)


def test_waves_passes_the_command_on():
    import os

    before = os.environ.get("WAVES")
    r = CliRunner().invoke(main, ["waves", "bench"])
    assert r.exit_code == 2 and "runs no simulation" in r.output
    r = CliRunner().invoke(main, ["waves", "gemm", "--m", "0"])
    assert r.exit_code == 2 and "--m" in r.output
    assert os.environ.get("WAVES") == before, "nclite waves leaked WAVES into the environment"
