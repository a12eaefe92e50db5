"""``nclite sr-demo``: a running sum of small increments, rounded by the SRU's RTL.

``acc = cast(acc + increment)`` repeated ``steps`` times, in bf16 (or another target) with
round-to-nearest-even and with stochastic rounding, beside the same sum kept in fp32. The fp32
additions happen in the testbench (numpy float32, the contract's add); every cast is done by
the simulated ``StochasticRounder`` and checked bit for bit against ``golden.sru``. Each of
the unit's lanes runs its own SR sum (its own random stream), so the picture also shows the
spread of SR. Under RNE the sum stops growing once the increment is below half an ulp of it;
under SR it follows the fp32 sum on average (the rounding is unbiased up to 2^-r ulp).
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np

from sim import runner

__all__ = ["run_sr_demo", "plot_sr_demo", "format_sr_demo"]


def run_sr_demo(*, simulator: str = "verilator", steps: int = 2000, start: float = 1.0,
                increment: float = 1e-3, lanes: int = 4, fmt: str = "bf16", seed: int = 0,
                random_bits: int = 16, png: str | Path | None = None, waves: bool = False,
                quiet: bool = True) -> dict:
    """Run the demo in ``simulator``; return the trajectories and final values (and write the
    picture to ``png`` if given)."""
    if fmt not in ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2"):
        raise ValueError(f"fmt must be bf16, fp16, fp8_e4m3 or fp8_e5m2, not {fmt!r}")
    for name, value, lo in (("steps", steps, 1), ("lanes", lanes, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, not {value!r}")
    if not (math.isfinite(increment) and math.isfinite(start)):
        raise ValueError("start and increment must be finite")
    if not 0 <= seed < 1 << 64:
        raise ValueError(f"seed must be in [0, 2**64), not {seed!r}")
    params = {"lanes": lanes, "random_bits": random_bits, "targets": [fmt]}
    cfg = {"fmt": fmt, "steps": steps, "start": start, "increment": increment, "seed": seed}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sr_demo.json"
        sim = runner.run("hdl.sru:StochasticRounder", params, "sim.tb.sru", simulator,
                         testcase="running_sum",
                         run_tag=f"sr-demo-{fmt}-{steps}-{lanes}-{seed}-{random_bits}",
                         waves=waves, quiet=quiet,
                         extra_env={"NCLITE_SRU_DEMO": json.dumps(cfg),
                                    "NCLITE_SRU_OUT": str(out)})
        r = json.loads(out.read_text())
    sr_final = np.array(r["sr"][-1], dtype=np.float64)
    r.update({
        "simulator": simulator, "seed": seed, "random_bits": random_bits,
        "bit_exact": True,  # the testbench fails the run on any difference from golden
        "exact": start + steps * float(np.float32(increment)),
        "final_fp32": r["fp32"][-1],
        "final_rne": r["rne"][-1][0],
        "final_sr": sr_final.tolist(),
        "final_sr_mean": float(sr_final.mean()),
        "wave_file": str(sim.waves) if sim.waves else None,
    })
    if png is not None:
        r["png"] = str(plot_sr_demo(r, png))
    return r


def plot_sr_demo(r: dict, png: str | Path) -> Path:
    """Draw the trajectories of :func:`run_sr_demo`'s result into ``png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    steps = np.arange(1, r["steps"] + 1)
    sr = np.array(r["sr"])
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    for lane in range(sr.shape[1]):
        ax.plot(steps, sr[:, lane], color="tab:orange", lw=0.8, alpha=0.55,
                label=f"{r['fmt']} SR (one line per lane)" if lane == 0 else None)
    ax.plot(steps, r["fp32"], color="black", lw=1.4, ls="--", label="fp32")
    ax.plot(steps, [v[0] for v in r["rne"]], color="tab:blue", lw=1.8,
            label=f"{r['fmt']} RNE")
    ax.set_xlabel("step")
    ax.set_ylabel("running sum")
    ax.set_title(f"{r['start']:g} + {r['steps']} x {r['increment']:g}, rounded to {r['fmt']} "
                 f"after every add (SRU RTL, {r['simulator']})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
    return png


def format_sr_demo(r: dict) -> str:
    sr = ", ".join(f"{v:.6g}" for v in r["final_sr"])
    lines = [
        f"SR demo: {r['start']:g} + {r['steps']} x {r['increment']:g} in {r['fmt']}, "
        f"{r['lanes']} lanes, seed {r['seed']}, r = {r['random_bits']} "
        f"({r['simulator']}, {r['cycles']} cycles)",
        f"  exact (float64):      {r['exact']:.6g}",
        f"  fp32 sum:             {r['final_fp32']:.6g}",
        f"  {r['fmt']} RNE:             {r['final_rne']:.6g}",
        f"  {r['fmt']} SR per lane:     {sr}  (mean {r['final_sr_mean']:.6g})",
        "  every cast bit-exact with the golden model: yes",
    ]
    if r.get("png"):
        lines.append(f"  picture: {r['png']}")
    return "\n".join(lines)
