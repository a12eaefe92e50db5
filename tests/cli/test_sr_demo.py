"""``nclite sr-demo`` end to end in both simulators: a running sum rounded by the SRU RTL.

The expectations come from the arithmetic, not from a run: with start 1 and increment 10^-3
(below half an ulp of bf16 at 1, 2^-8), RNE never moves; SR is unbiased up to 2^-16 ulp per
step, and each step's rounding error has variance at most ulp^2 / 4, with ulp <= 2^-7 while
the sum stays below 2: after s steps every lane lies within 6 standard deviations
(6 * sqrt(s) * 2^-8) of the fp32 sum, and their mean within 6 / sqrt(lanes) of that. The
testbench itself fails the run if any cast differs from golden/.
"""

import json
import math

from click.testing import CliRunner

from sim.cli import main


def test_sr_demo(simulator, tmp_path):
    png = tmp_path / "sr.png"
    steps, lanes = 300, 4
    r = CliRunner().invoke(main, ["sr-demo", "--sim", simulator, "--steps", str(steps),
                                  "--lanes", str(lanes), "--seed", "7", "--out", str(png),
                                  "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):])
    assert out["bit_exact"] and len(out["sr"]) == len(out["rne"]) == steps
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out["final_rne"] == 1.0, "RNE must stagnate: 1e-3 is below half an ulp of 1"
    fp32 = out["final_fp32"]
    assert abs(fp32 - (1 + steps * 1e-3)) < 1e-4
    sigma = math.sqrt(steps) * 2.0 ** -8
    for v in out["final_sr"]:
        assert abs(v - fp32) <= 6 * sigma, (v, fp32)
    assert abs(out["final_sr_mean"] - fp32) <= 6 * sigma / math.sqrt(lanes)
    assert len(set(out["final_sr"])) > 1, "lanes must not share one random stream"


def test_sr_demo_rejects_bad_options():
    for args in (["--steps", "0"], ["--dtype", "int8"], ["--lanes", "0"]):
        r = CliRunner().invoke(main, ["sr-demo", *args])
        assert r.exit_code != 0 and "Traceback" not in r.output, args
