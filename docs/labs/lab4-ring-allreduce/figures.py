"""The pictures of lab 4 (ring all-reduce), from the project's golden model and cycle figures.

    .venv/bin/python docs/labs/lab4-ring-allreduce/figures.py

* ``img/ring_p4.png`` -- an all-reduce on a ring of P = 4, one word per chunk: after every
  step, what each rank's chunks hold (which ranks' values, in the order they were added) and
  which chunk it just received. The schedule is ``golden.collective.ring_steps`` run in
  lockstep with the golden fp32 add by ``schedule.py`` (next to this file), whose final buffers
  equal ``golden.collective.run_collective``'s.
* ``img/efficiency.png`` -- (a) the engine's all-reduce cycles as a model (the setup of
  ``hdl.collective.setup_cycles``, 2(P - 1) steps of ceil(B/P) beats + 2 cycles, one link
  latency and the adder) against the ring bound 2(P - 1)/P * n/W, with cycle counts measured
  by ``nclite allreduce`` in Icarus (the table ``MEASURED`` below); (b) and (c) the bandwidth
  and latency terms of the ring beside a reduce-then-broadcast through one root and a binary
  tree.

Deterministic (no randomness, the Agg backend, no software version in the PNG metadata).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

LAB = Path(__file__).resolve().parent
ROOT = LAB.parents[2]
IMG = LAB / "img"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(LAB))

from golden.collective import CollectiveOp, ring_bound_cycles, ring_steps  # noqa: E402
from hdl.collective import COLLECTIVE_ADD_STAGES as ADD_STAGES  # noqa: E402
from hdl.collective import setup_cycles  # noqa: E402
from schedule import contents  # noqa: E402
from sim.cli.allreduce import ring_params  # noqa: E402

_SAVE = {"dpi": 110, "metadata": {"Software": None}}

#: Cycle counts of all-reduces measured with `nclite allreduce --sim icarus` (seed 1):
#: `nclite allreduce --ranks 3 --link-width 2 --latency 3 --n 16 --n 64 --n 256 --n 1000
#: --n 1024 --sim icarus` and `nclite allreduce --ranks 4 --link-width 4 --latency 8
#: --n 16384 --sim icarus` (about a minute): (P, W, latency) -> {n: cycles}.
MEASURED = {
    (3, 2, 3): {16: 62, 64: 75, 256: 203, 1000: 699, 1024: 715},
    (4, 4, 8): {16384: 6189},
}


def model_cycles(n: int, ranks: int, width: int, latency: int) -> int:
    """All-reduce cycles when every chunk is longer than the pipeline (see the lab text)."""
    beats = -(-n // width)
    depth = ring_params(ranks, width, n)["depth"]
    return (setup_cycles(ranks, depth) + 2 * (ranks - 1) * (-(-beats // ranks) + 2)
            + latency + ADD_STAGES + 1)


def fig_ring() -> Path:
    p = 4
    frames = list(contents(CollectiveOp.ALL_REDUCE, p, p, 1))
    steps = [ring_steps(CollectiveOp.ALL_REDUCE, p, r) for r in range(p)]
    cmap = plt.get_cmap("Blues")
    box_w, box_h, gap_x, gap_y = 1.7, 0.8, 1.0, 0.3
    col_w = p * box_w + gap_x
    band_h = p * (box_h + gap_y) + 1.4
    fig, ax = plt.subplots(figsize=(13, 6.2))
    for j, (s, phase, terms) in enumerate(frames):
        # start and the reduce-scatter in the top band, the all-gather below
        col, band = (j, 1) if j < p else (j - p + 1, 0)
        x0, yb = col * col_w, band * band_h
        title = "start" if s < 0 else f"after step {s} ({phase})"
        ax.text(x0 + p * box_w / 2, yb + p * (box_h + gap_y) + 0.05, title, ha="center",
                va="bottom", fontsize=9)
        for r in range(p):
            y0 = yb + (p - 1 - r) * (box_h + gap_y)
            recv = steps[r][s].recv if s >= 0 else None
            if col == 0 or (band == 0 and col == 1):
                ax.text(x0 - 0.15, y0 + box_h / 2, f"rank {r}", ha="right", va="center",
                        fontsize=8)
            for c in range(p):
                t = terms[r][c]
                full = len(t) == p
                ax.add_patch(Rectangle((x0 + c * box_w, y0), box_w, box_h,
                                       facecolor=cmap(0.12 + 0.75 * len(t) / p),
                                       edgecolor="#c44e52" if c == recv else "0.4",
                                       lw=2.4 if c == recv else 0.6, zorder=3 if c == recv
                                       else 2))
                ax.text(x0 + (c + 0.5) * box_w, y0 + box_h / 2, "+".join(map(str, t)),
                        ha="center", va="center", fontsize=7.5, zorder=4,
                        color="white" if full else "black")
        for c in range(p):
            ax.text(x0 + (c + 0.5) * box_w, yb - 0.25, f"chunk {c}", ha="center", va="center",
                    fontsize=6.5, color="0.35")
    ax.text(0.0, p * (box_h + gap_y) * 0.55, "a label lists the ranks whose values\n"
            "a chunk sums, in the order they\nwere added: 2+3+0 = (x2 + x3) + x0\n\n"
            "red: the chunk a rank received\nin that step (+ in the reduce-scatter,\n"
            "a copy in the all-gather)\n\nrank r sends to rank r + 1 (mod 4)",
            ha="left", va="center", fontsize=9)
    ax.set_xlim(-1.2, p * col_w)
    ax.set_ylim(-0.5, 2 * band_h - 0.9)
    ax.axis("off")
    ax.set_title("All-reduce on a ring of 4 ranks, one word per chunk (golden schedule)",
                 fontsize=11)
    fig.tight_layout()
    path = IMG / "ring_p4.png"
    fig.savefig(path, **_SAVE)
    plt.close(fig)
    return path


def fig_efficiency() -> Path:
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(13, 3.9),
                                        gridspec_kw={"width_ratios": [1.5, 1, 1]})
    ns = np.unique(np.geomspace(16, 65536, 120).astype(int))
    for (p, w, lat), color in (((3, 2, 3), "#4c72b0"), ((4, 4, 8), "#dd8452")):
        eff = [ring_bound_cycles(0, int(n), p, w) / model_cycles(int(n), p, w, lat) for n in ns]
        ax1.semilogx(ns, eff, color=color, label=f"model P={p} W={w} latency {lat}")
        meas = MEASURED[(p, w, lat)]
        ax1.semilogx(list(meas), [ring_bound_cycles(0, n, p, w) / c for n, c in meas.items()],
                     "o", color=color, mfc="none", ms=7, label=f"measured (Icarus) P={p}")
    ax1.axhline(1, color="k", lw=0.8, ls="--")
    ax1.set_xlabel("n (fp32 words per rank)")
    ax1.set_ylabel("ring bound / cycles")
    ax1.set_title("(a) efficiency of the engine's all-reduce", fontsize=10)
    ax1.set_ylim(0, 1.05)
    ax1.legend(fontsize=7.5, loc="lower right")
    ax1.grid(alpha=0.3, which="both")

    ps = np.arange(2, 65)
    ax2.plot(ps, 2 * (ps - 1) / ps, label="ring: 2(P-1)/P")
    ax2.plot(ps, [2 * math.ceil(math.log2(p)) for p in ps], label="binary tree: 2 log2 P")
    ax2.plot(ps, 2 * (ps - 1), label="one root: 2(P-1)")
    ax2.set_yscale("log")
    ax2.set_xlabel("P (ranks)")
    ax2.set_ylabel("time / (n/W)")
    ax2.set_title("(b) bandwidth term (n/W large)", fontsize=10)
    ax2.legend(fontsize=7.5)
    ax2.grid(alpha=0.3, which="both")

    ax3.plot(ps, 2 * (ps - 1), label="ring: 2(P-1) steps")
    ax3.plot(ps, [2 * math.ceil(math.log2(p)) for p in ps], label="binary tree: 2 log2 P")
    ax3.set_xlabel("P (ranks)")
    ax3.set_ylabel("link latencies in sequence")
    ax3.set_title("(c) latency term (n small)", fontsize=10)
    ax3.legend(fontsize=7.5)
    ax3.grid(alpha=0.3)
    fig.tight_layout()
    path = IMG / "efficiency.png"
    fig.savefig(path, **_SAVE)
    plt.close(fig)
    return path


def main() -> None:
    IMG.mkdir(exist_ok=True)
    for (p, w, lat), meas in MEASURED.items():  # the model holds where chunks are long
        for n, cycles in meas.items():
            if -(-n // w) // p >= 64:
                assert abs(model_cycles(n, p, w, lat) - cycles) <= 2, (p, w, lat, n, cycles)
    for make in (fig_ring, fig_efficiency):
        print(make().relative_to(ROOT))


if __name__ == "__main__":
    main()
