"""The pictures of lab 3 (stochastic rounding), from the project's golden model.

    .venv/bin/python docs/labs/lab3-stochastic-rounding/figures.py

* ``img/sr_neighbours.png`` -- three fp32 values between 1 and bf16's next value 1 + 2^-7,
  each rounded 4096 times with SR (``golden.rounding.round_fp32`` fed by one
  ``golden.prng.LanePRNG`` lane, r = 16): how often it goes down and up, against the contract's
  probabilities; RNE's and RTZ's single answers beside them.
* ``img/running_sum.png`` -- ``acc = cast(acc + 0.001)`` 2000 times from 0, the sum kept in
  bf16: fp32, RNE, RTZ and SR in four lanes of the golden SRU model (what ``nclite sr-demo``
  runs through the RTL).
* ``img/sr_bias.png`` -- the exact SR bias (all 2^r random values enumerated) of 400 values
  against r, with the contract's bound 2^-r ulp; and the same running sum from 1 to 3 with r
  random bits: too few bits and SR stagnates as RNE does.

Deterministic (fixed seeds, the Agg backend, no software version in the PNG metadata).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

LAB = Path(__file__).resolve().parent
ROOT = LAB.parents[2]
IMG = LAB / "img"
sys.path.insert(0, str(ROOT))

from golden.prng import LanePRNG  # noqa: E402
from golden.rounding import round_fp32  # noqa: E402

_SAVE = {"dpi": 110, "metadata": {"Software": None}}
ULP1 = 2.0**-7  # bf16's ulp in [1, 2)


def _bits(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def _bf16_value(bits) -> np.ndarray:
    """bf16 bit patterns (uint16) as float64 values."""
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32).astype(np.float64)


def cast(values, mode: str, *, rng=None, r: int = 16) -> np.ndarray:
    """fp32 values -> bf16 with ``mode`` (SR draws from ``rng``, a LanePRNG), as floats."""
    kw = {"rng": rng, "r": r} if mode == "sr" else {}
    return _bf16_value(round_fp32(_bits(values), "bf16", mode, saturate=False, **kw))


def running_sum(start: float, inc: float, steps: int, mode: str, *, lanes: int = 4,
                r: int = 16, seed: int = 0) -> np.ndarray:
    """``acc = cast(acc + inc)`` (the add in fp32) in every lane: a ``(steps + 1, lanes)``
    array of the sums, as the SRU and ``nclite sr-demo`` compute them."""
    rng = LanePRNG(lanes, seed) if mode == "sr" else None
    acc = np.full(lanes, start, dtype=np.float32)
    out = [acc.astype(np.float64)]
    for _ in range(steps):
        s = acc + np.float32(inc)
        acc = s if mode == "fp32" else cast(s, mode, rng=rng, r=r).astype(np.float32)
        out.append(acc.astype(np.float64))
    return np.array(out)


def fig_neighbours() -> Path:
    fracs = [0.3, 0.5, 0.9]  # position between 1 and 1 + ulp, in ulps
    draws = 4096
    fig, axes = plt.subplots(1, len(fracs), figsize=(9.5, 3.3), sharey=True)
    for ax, f in zip(axes, fracs, strict=True):
        x = np.float32(1 + f * ULP1)
        rng = LanePRNG(1, seed=1)
        got = cast(np.full((draws, 1), x), "sr", rng=rng)[:, 0]
        up = float((got > 1).mean())
        ax.bar([0, 1], [1 - up, up], width=0.5, color=["#4c72b0", "#dd8452"],
               label=f"SR, {draws} draws")
        ax.plot([-0.3, 0.3], [1 - f, 1 - f], "k--", lw=1)
        ax.plot([0.7, 1.3], [f, f], "k--", lw=1, label="contract: 1 - f, f")
        for mode, mark, dx in (("rne", "v", -0.12), ("rtz", "s", 0.12)):
            v = float(cast([x], mode)[0])
            ax.plot([int(v > 1) + dx], [1.04], mark, color="k", ms=7, label=mode.upper())
        ax.set_xticks([0, 1], ["1.0\n(down)", "1 + 2$^{-7}$\n(up)"])
        ax.set_title(f"x = 1 + {f} ulp  (P(up) = {up:.3f})", fontsize=10)
        ax.set_ylim(0, 1.12)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("fraction of casts")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle("fp32 -> bf16: SR picks a neighbour with probability proportional to "
                 "closeness (golden model)", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    path = IMG / "sr_neighbours.png"
    fig.savefig(path, **_SAVE)
    plt.close(fig)
    return path


def fig_running_sum() -> Path:
    steps, inc = 2000, 1e-3
    t = np.arange(steps + 1)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    sr = running_sum(0.0, inc, steps, "sr")
    for lane in range(sr.shape[1]):
        ax.plot(t, sr[:, lane], lw=0.8, color="#dd8452", alpha=0.8,
                label="bf16 SR (4 lanes)" if lane == 0 else None)
    ax.plot(t, running_sum(0.0, inc, steps, "fp32", lanes=1)[:, 0], "k", lw=1.2, label="fp32")
    ax.plot(t, running_sum(0.0, inc, steps, "rne", lanes=1)[:, 0], color="#4c72b0", lw=1.6,
            label="bf16 RNE")
    ax.plot(t, running_sum(0.0, inc, steps, "rtz", lanes=1)[:, 0], color="#55a868", lw=1.6,
            label="bf16 RTZ")
    for y in (0.25, 0.5, 1.0, 2.0):
        ax.axhline(y, color="0.8", lw=0.6, zorder=0)
    ax.set_xlabel("step")
    ax.set_ylabel("acc")
    ax.set_title("acc = bf16(acc + 0.001), 2000 steps from 0 (golden SRU model, seed 0)",
                 fontsize=10)
    ax.legend(loc="upper left", fontsize=9)
    ax.grid(alpha=0.2)
    fig.tight_layout()
    path = IMG / "running_sum.png"
    fig.savefig(path, **_SAVE)
    plt.close(fig)
    return path


def sr_bias(x_bits: np.ndarray, r: int) -> np.ndarray:
    """Exact E[SR(x)] - x in bf16 ulps, for fp32 values in [1, 2): all 2^r values of R."""
    rb = np.arange(1 << r, dtype=np.uint32)
    x = x_bits.view(np.float32).astype(np.float64)
    out = np.empty(x.size)
    for i, b in enumerate(x_bits):
        mean = _bf16_value(round_fp32(np.full(rb.size, b, np.uint32), "bf16", "sr",
                                      saturate=False, rbits=rb, r=r)).mean()
        out[i] = (mean - x[i]) / ULP1
    return out


def fig_bias() -> Path:
    rs = list(range(1, 16))  # r >= 16 is exact for bf16: d = 16 (see the text)
    rng = np.random.default_rng(3)
    x_bits = _bits(1 + rng.random(400).astype(np.float32))  # random fp32 in [1, 2)
    worst, mean = [], []
    for r in rs:
        b = sr_bias(x_bits, r)
        assert (b <= 1e-12).all() and (b > -(2.0**-r) - 1e-12).all(), r  # the contract
        worst.append(-b.min())
        mean.append(-b.mean())
    assert not sr_bias(x_bits, 16).any()  # r = d = 16: E[SR(x)] = x exactly
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    ax1.semilogy(rs, [2.0**-r for r in rs], "k--", label="bound 2$^{-r}$ ulp")
    ax1.semilogy(rs, worst, "o-", color="#c44e52", label="largest |bias|, 400 values")
    ax1.semilogy(rs, mean, "s-", color="#4c72b0", ms=4, label="mean |bias|")
    ax1.set_xlabel("r (random bits per SR decision)")
    ax1.set_ylabel("|E[SR(x)] - x|  (ulp)")
    ax1.set_title("SR bias, exact (every R enumerated)", fontsize=10)
    ax1.text(15.4, worst[-1], "r = 16: bias 0\n(D has d = 16 bits)", fontsize=8, ha="right",
             va="top")
    ax1.legend(fontsize=8, loc="lower left")
    ax1.grid(alpha=0.3, which="both")

    r_list = [1, 2, 3, 4, 6, 8, 16]
    finals = [running_sum(1.0, 1e-3, 2000, "sr", r=r)[-1] for r in r_list]
    pos = np.arange(len(r_list))
    for lane in range(4):
        ax2.plot(pos, [f[lane] for f in finals], "o", color="#dd8452", alpha=0.7,
                 label="SR lanes" if lane == 0 else None)
    ax2.plot(pos, [f.mean() for f in finals], "_", color="k", ms=18, mew=2,
             label="mean of lanes")
    ax2.axhline(1 + 2000 * 1e-3, color="k", ls="--", lw=1, label="exact: 3")
    ax2.axhline(1.0, color="#4c72b0", lw=1.5, label="RNE: 1")
    ax2.set_xticks(pos, [str(r) for r in r_list])
    ax2.set_xlabel("r")
    ax2.set_ylabel("final acc")
    ax2.set_title("1 + 2000 x 0.001 in bf16 with SR of r bits", fontsize=10)
    ax2.legend(fontsize=8, loc="center right")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    path = IMG / "sr_bias.png"
    fig.savefig(path, **_SAVE)
    plt.close(fig)
    return path


def main() -> None:
    IMG.mkdir(exist_ok=True)
    for make in (fig_neighbours, fig_running_sum, fig_bias):
        print(make().relative_to(ROOT))


if __name__ == "__main__":
    main()
