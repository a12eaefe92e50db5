"""Lab 2's pictures, from a simulation of the real array and from the golden GEMM schedule.

    .venv/bin/python docs/labs/lab2-systolic/figures.py

writes into ``img/`` next to this file (deterministic):

* ``wavefront.png`` -- an ``amaranth.sim`` run of ``hdl.systolic.SystolicArray`` (n = 4, the
  PE's default 5 multiplier and 6 adder stages): 8 moving columns enter back to back, and at
  every cycle the trace records which column each PE multiplies (its ``x_in``), which column's
  partial sum it outputs (``psum_out``) and which column leaves on ``result``. The weights
  are all 1.0 and moving column j holds j + 1 in every row, so a partial sum names its column:
  PE (k, m) outputs (k + 1)(j + 1).
* ``tiling.png`` -- ``golden.tensor_engine.gemm_schedule`` for C = A.T @ B with M = 6, K = 9, F = 20
  on a 4x4 engine with 8 PSUM banks of 16 words (``nclite gemm --array 4 --m 6 --k 9 --n 20``):
  which tile of A each LOAD_STATIONARY takes, which tile of B each MULTIPLY_MOVING streams, and
  where C collects in PSUM.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from amaranth.hdl import Value  # noqa: E402
from amaranth.sim import Simulator  # noqa: E402

import hdl.systolic as systolic  # noqa: E402
from golden.formats import BF16, fp32_from_bits, to_bits  # noqa: E402
from golden.tensor_engine import LoadStationary, gemm_schedule  # noqa: E402
from hdl.pe import PE, Moving, Weight  # noqa: E402

IMG = Path(__file__).resolve().parent / "img"
META = {"Software": None}  # no version string in the PNG: the files stay byte-identical
N, COLUMNS = 4, 8


def _save(fig, name: str) -> None:
    IMG.mkdir(exist_ok=True)
    fig.savefig(IMG / name, dpi=110, metadata=META)
    plt.close(fig)
    print(f"wrote {IMG / name}")


def trace_array(n: int = N, columns: int = COLUMNS) -> dict:
    """Simulate the array; per cycle, the moving column seen at each PE's x_in and psum_out
    and at each result lane (-1: none). Cycle 0 is the one in which column 0 enters."""
    created: list[PE] = []

    class RecordedPE(PE):  # the array's own PE, remembered so the testbench can probe it
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            created.append(self)

    systolic.PE = RecordedPE
    try:
        dut = systolic.SystolicArray(n=n)
        sim = Simulator(dut)
    finally:
        systolic.PE = PE
    pes = {(k, m): created[k * n + m] for k in range(n) for m in range(n)}
    one = int(to_bits(np.float32(1.0), BF16))
    cycles = dut.latency + columns + 3
    x_seen = np.full((cycles, n, n), -1)
    sum_seen = np.full((cycles, n, n), -1)
    out_seen = np.full((cycles, n), -1)

    def column_of_operand(ctx, op) -> int:  # the PEs see operands decoded: sig * 2^(exp - 7)
        if ctx.get(op.zero) or ctx.get(op.inf) or ctx.get(op.nan):
            return -1
        value = ctx.get(op.sig) * 2.0 ** (ctx.get(op.exp) - 7)
        j = round(value) - 1
        return j if 0 <= j < columns and value == j + 1 else -1

    def column_of_sum(bits: int, k: int) -> int:
        value = float(fp32_from_bits(np.uint32(bits)))
        j = round(value / (k + 1)) - 1
        return j if 0 <= j < columns and value == (k + 1) * (j + 1) else -1

    async def testbench(ctx):
        # LOAD_STATIONARY: n rows of 1.0, one per cycle, into the shadow weights.
        ctx.set(dut.en, 1)
        ctx.set(Value.cast(dut.w_in), sum(one << (Weight.as_shape().size * c)
                                          for c in range(n)))
        ctx.set(dut.w_valid, 1)
        for r in range(n):
            ctx.set(dut.w_row, r)
            await ctx.tick()
        ctx.set(dut.w_valid, 0)
        # Bubbles (+0 operands) first, to flush the reset values out of the pipelines.
        ctx.set(Value.cast(dut.x_in), 0)
        for _ in range(dut.latency):
            await ctx.tick()
        for t in range(cycles):
            if t < columns:  # moving column t: value t + 1 in every row; column 0 swaps
                lane = Moving.const({"data": int(to_bits(np.float32(t + 1), BF16)),
                                     "swap": t == 0}).as_value().value
                ctx.set(Value.cast(dut.x_in),
                        sum(lane << (Moving.as_shape().size * k) for k in range(n)))
            else:
                ctx.set(Value.cast(dut.x_in), 0)
            for (k, m), pe in pes.items():
                x_seen[t, k, m] = column_of_operand(ctx, pe.x_in.op)
                sum_seen[t, k, m] = column_of_sum(ctx.get(pe.psum_out), k)
            for m in range(n):
                out_seen[t, m] = column_of_sum(ctx.get(dut.result[m]), n - 1)
            await ctx.tick()

    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    return {"x": x_seen, "sum": sum_seen, "out": out_seen, "latency": dut.latency,
            "add": dut.add_stages, "mul": dut.mul_stages, "n": n, "cycles": cycles}


def wavefront() -> None:
    tr = trace_array()
    n, cycles = tr["n"], tr["cycles"]
    cmap = ListedColormap(plt.get_cmap("tab10").colors[:COLUMNS])
    fig = plt.figure(figsize=(11, 8.6))
    grid = fig.add_gridspec(2, 4, height_ratios=[1.0, 2.6], hspace=0.35)

    # Top: snapshots of the array.
    for i, t in enumerate((3, 9, 15, 21)):
        ax = fig.add_subplot(grid[0, i])
        busy = tr["x"][t]
        ax.imshow(np.ma.masked_less(busy, 0), cmap=cmap, vmin=-0.5, vmax=COLUMNS - 0.5)
        for k in range(n):
            for m in range(n):
                ax.text(m, k, str(busy[k, m]) if busy[k, m] >= 0 else "·", ha="center",
                        va="center", fontsize=10, color="white" if busy[k, m] >= 0 else "#999")
        ax.set_xticks(range(n), [f"col {m}" for m in range(n)], fontsize=7)
        ax.set_yticks(range(n), [f"row {k}" for k in range(n)], fontsize=7)
        ax.set_title(f"cycle {t}", fontsize=10)
    fig.text(0.5, 0.965, f"Which moving column each PE of a {n}x{n} SystolicArray multiplies "
             f"(amaranth.sim trace, {tr['mul']} mul + {tr['add']} add stages)",
             ha="center", fontsize=11)

    # Bottom: space-time chart, one line per PE, then the result lanes.
    ax = fig.add_subplot(grid[1, :])
    labels = []
    y = 0
    for k in range(n):
        for m in range(n):
            for t in range(cycles):
                j = tr["x"][t, k, m]
                if j >= 0:
                    ax.add_patch(plt.Rectangle((t, y), 1, 0.8, color=cmap(j)))
                    ax.text(t + 0.5, y + 0.4, str(j), ha="center", va="center", fontsize=6,
                            color="white")
                s = tr["sum"][t, k, m]
                if s >= 0:
                    ax.add_patch(plt.Rectangle((t + 0.1, y + 0.1), 0.8, 0.6, fill=False,
                                               edgecolor=cmap(s), lw=1.2))
            labels.append(f"PE ({k},{m})")
            y += 1
        y += 0.5
    for m in range(n):
        for t in range(cycles):
            j = tr["out"][t, m]
            if j >= 0:
                ax.add_patch(plt.Rectangle((t, y), 1, 0.8, color=cmap(j), hatch="//",
                                           alpha=0.8))
                ax.text(t + 0.5, y + 0.4, str(j), ha="center", va="center", fontsize=6)
        labels.append(f"result[{m}]")
        y += 1
    ticks = [i + i // n * 0.5 + 0.4 for i in range(n * n)] + \
        [n * n + n * 0.5 + i + 0.4 for i in range(n)]
    ax.set_yticks(ticks, labels, fontsize=7)
    ax.set_ylim(y + 0.2, -0.2)
    ax.set_xlim(0, cycles)
    ax.set_xlabel("cycle (column j enters the array in cycle j)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("filled: the PE multiplies column j (x_in);  outlined: its psum_out holds "
                 "column j's partial sum;  hatched: column j's sums leave, deskewed, "
                 f"{tr['latency']} cycles after entering", fontsize=8.5)
    _save(fig, "wavefront.png")


def tiling() -> None:
    m, k, f, n, banks, words = 6, 9, 20, 4, 8, 16
    rounds = gemm_schedule(m, k, f, n=n, banks=banks, bank_words=words)
    commands = [(r, c) for r, rnd in enumerate(rounds) for c in rnd.commands]
    blocks = [(r, b) for r, rnd in enumerate(rounds) for b in rnd.blocks]
    m_tiles = sorted({(c.m0, c.m1) for _, c in commands if isinstance(c, LoadStationary)})
    fig, axes = plt.subplots(len(m_tiles), 3, figsize=(12, 3.2 * len(m_tiles)),
                             gridspec_kw={"width_ratios": [m, f, f]})
    k_colours = plt.get_cmap("Pastel1").colors
    for row, (m0, m1) in enumerate(m_tiles):
        ax_a, ax_b, ax_c = axes[row]
        for ax, (w, h) in ((ax_a, (m, k)), (ax_b, (f, k)), (ax_c, (f, m))):
            ax.add_patch(plt.Rectangle((0, 0), w, h, facecolor="#f2f2f2", edgecolor="#bbb"))
        ls = None
        for no, (_, cmd) in enumerate(commands, 1):
            if isinstance(cmd, LoadStationary):
                ls = cmd
                if (cmd.m0, cmd.m1) != (m0, m1):
                    continue
                colour = k_colours[cmd.k0 // n % len(k_colours)]
                ax_a.add_patch(plt.Rectangle((cmd.m0, cmd.k0), cmd.m1 - cmd.m0,
                                             cmd.k1 - cmd.k0, facecolor=colour, edgecolor="k"))
                ax_a.text((cmd.m0 + cmd.m1) / 2, (cmd.k0 + cmd.k1) / 2, f"#{no}",
                          ha="center", va="center", fontsize=8)
            elif (ls.m0, ls.m1) == (m0, m1):
                colour = k_colours[cmd.k0 // n % len(k_colours)]
                ax_b.add_patch(plt.Rectangle((cmd.f0, cmd.k0), cmd.f1 - cmd.f0,
                                             cmd.k1 - cmd.k0, facecolor=colour, edgecolor="k"))
                mode = "acc" if cmd.accumulate else "ovw"
                text = (f"#{no}: bank {cmd.bank}, {mode}" if cmd.f1 - cmd.f0 > n
                        else f"#{no}\nb{cmd.bank} {mode}")
                ax_b.text((cmd.f0 + cmd.f1) / 2, (cmd.k0 + cmd.k1) / 2, text, ha="center",
                          va="center", fontsize=7)
        for r, blk in blocks:
            if (blk.m0, blk.m1) == (m0, m1):
                ax_c.add_patch(plt.Rectangle((blk.f0, blk.m0), blk.f1 - blk.f0,
                                             blk.m1 - blk.m0, facecolor="#c9daf8",
                                             edgecolor="k"))
                text = (f"round {r}, bank {blk.bank}" if blk.f1 - blk.f0 > n
                        else f"r{r}\nb{blk.bank}")
                ax_c.text((blk.f0 + blk.f1) / 2, (blk.m0 + blk.m1) / 2, text, ha="center",
                          va="center", fontsize=7)
        titles = (f"A (K x M = {k} x {m}): LOAD_STATIONARY",
                  f"B (K x F = {k} x {f}): MULTIPLY_MOVING",
                  f"C = A.T @ B (M x F = {m} x {f}) in PSUM")
        for ax, (w, h), title, (xl, yl) in zip(
                axes[row], ((m, k), (f, k), (f, m)), titles,
                (("m", "k"), ("f", "k"), ("f", "m")), strict=True):
            ax.set_xlim(0, w)
            ax.set_ylim(h, 0)
            ax.set_aspect("equal")
            ax.set_title(f"{title}\n(m-tile {m0}..{m1 - 1})", fontsize=8.5)
            ax.set_xticks(range(0, w + 1, n))
            ax.set_yticks(range(0, h + 1, n))
            ax.set_xlabel(xl, fontsize=8)
            ax.set_ylabel(yl, fontsize=8)
            ax.tick_params(labelsize=7)
    fig.suptitle(f"golden.tensor_engine.gemm_schedule: C = A.T @ B on a {n}x{n} engine with "
                 f"{banks} "
                 f"PSUM banks of {words} words -- {len(commands)} commands, #1..#{len(commands)} "
                 "in issue order\n(colour: k-tile; ovw = overwrite PSUM, acc = accumulate "
                 "p = p + s; each f-tile owns one bank for the round)", fontsize=9.5)
    fig.tight_layout()
    _save(fig, "tiling.png")


if __name__ == "__main__":
    wavefront()
    tiling()
