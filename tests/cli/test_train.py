"""`nclite train`: the run on the ISS (JSON, text, plot), its errors in one line, and the first
steps of the digits run on the RTL (``make test-full``: the four-core N = 8 build)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sim.cli import main


def _train(*args):
    return CliRunner().invoke(main, ["train", *args])


def test_train_json_is_the_run():
    res = _train("--steps", "4", "--rounding", "rne", "--eval-every", "2", "--seed", "3",
                 "--json")
    assert res.exit_code == 0, res.output
    (r,) = json.loads(res.stdout)
    assert (r["mode"], r["steps"], r["cores"], r["seed"], r["on"]) == ("rne", 4, 4, 3, "iss")
    assert len(r["loss"]) == 4 and all(v > 0 for v in r["loss"])
    assert [s for s, _ in r["accuracy"]] == [2, 4]
    assert r["same_on_every_core"]
    assert r["config"]["ranks"] == 4 and r["mlp"]["inputs"] == 64


def test_train_all_modes_text_and_plot(tmp_path):
    import matplotlib.image

    png = tmp_path / "train.png"
    res = _train("--steps", "3", "--rounding", "all", "--plot", str(png), "--lr", "0.01")
    assert res.exit_code == 0, res.output
    for label in ("fp32 weights", "bf16 weights, RNE", "bf16 weights, SR"):
        assert label in res.stdout
    assert "lr 0.01" in res.stdout and str(png) in res.stdout
    assert matplotlib.image.imread(png).shape[2] in (3, 4)


@pytest.mark.parametrize("args, message", [
    (["--cores", "1"], "--cores"),
    (["--rounding", "bf16"], "--rounding"),
    (["--on", "board"], "--on"),
    (["--lr", "0"], "--lr"),
    (["--steps", "0"], "--steps"),
])
def test_train_errors_are_one_line(args, message):
    res = _train(*args)
    assert res.exit_code == 2, res.output
    assert message in res.output


@pytest.mark.slow
def test_train_on_rtl_is_the_iss_run():
    """The digits run's first two steps on four RTL cores of N = 8 (Verilator): bit-exact with
    the ISS, and the same weights and losses as the ISS's per-step run."""
    res = _train("--on", "verilator", "--steps", "2", "--json")
    assert res.exit_code == 0, res.output
    (r,) = json.loads(res.stdout)
    assert r["bit_exact"], r["mismatch"]
    assert r["same_as_iss_run"]
    assert len(r["cycles"]) == 4
