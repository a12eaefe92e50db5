# amaranth: UnusedElaboratable=no
"""cocotb testbench: ``hdl.pe.PEColumn`` (a chain of PEs) against ``golden.fp32.dot``.

Several stationary tiles, each with its own weight format, stream vectors of random formats
(mixed with the weights' format: bf16 x fp8, e4m3 x e5m2, ...). The next tile's weights are
shifted into the shadow registers while the current tile computes (double buffering), at
random moments, also during stalls; the first vector of each tile carries ``swap``. Random
clock-enable stalls and bubbles throughout; every dot product compared bit for bit.
"""

import os

import cocotb
import numpy as np

from golden.fp32 import dot
from hdl.pe import PEColumn
from sim.tb import tbutil, vectors
from sim.tb.pipeline import BUBBLE, PipelineTB


def _vectors() -> int:
    """At least 10^4 multiply-accumulates per configuration (one per PE and vector)."""
    rows = tbutil.params().get("rows", 1)
    return int(os.environ.get("NCLITE_VECTORS", max(3000, -(-10000 // rows))))


# The cocotb timeout, in simulated time: 100 cycles per vector (the run needs a few).
@cocotb.test(timeout_time=100 * tbutil.CLOCK_PERIOD_NS * (_vectors() + 100), timeout_unit="ns")
async def column_matches_golden(dut):
    p = tbutil.params()
    rows = p["rows"]
    column = PEColumn(**p)  # only for its timing attributes (not elaborated here)
    skew, latency = column.row_skew, column.latency
    enabled = p.get("formats", list(tbutil.FORMAT_CODES))
    rng = tbutil.rng(3)
    n_target = _vectors()

    tiles = []  # (weights, weight format)
    x_cols, fmt_col, swap_col, tile_col, expected = [], [], [], [], []
    total = 0
    while total < n_target:
        wf = str(rng.choice(enabled))
        w = vectors.operands(wf, rng, (rows,), 0.125)
        count = int(rng.choice([1, 2, 3, int(rng.integers(4, 80))]))
        tiles.append((w, wf))
        xf = rng.choice(enabled, count)
        x = np.zeros((count, rows), dtype=np.int64)
        exp = np.zeros(count, dtype=np.int64)
        for f in enabled:
            sel = xf == f
            if sel.any():
                x[sel] = vectors.operands(f, rng, (int(sel.sum()), rows), 0.125)
                exp[sel] = dot(w, wf, x[sel], f)
        packed = [sum(int(v) << (16 * k) for k, v in enumerate(vec)) for vec in x]
        x_cols += packed
        fmt_col += [tbutil.FORMAT_CODES[f] for f in xf]
        swap_col += [1] + [0] * (count - 1)
        tile_col += [len(tiles) - 1] * count
        expected += exp.tolist()
        total += count
    ops = {"x": np.array(x_cols, dtype=object), "x_fmt": np.array(fmt_col),
           "x_swap": np.array(swap_col)}

    for name in ("en", "w_shift", "w_in", "x", "x_fmt", "x_swap"):
        getattr(dut, name).value = 0
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    tb = PipelineTB(dut, latency)

    # Weight loading: tile t + 1 may shift in once tile t's swap operand has passed the last
    # row (its swap happened there), and tile t + 1's first vector may enter once all `rows`
    # shifts are done. Shift j lands in row rows - 1 - j, so the last row's weight goes first.
    state = {"loading": 0, "shifted": 0, "swap_edge": {}, "seen": 0}

    def may_issue(i):
        t = tile_col[i]
        return not swap_col[i] or (state["loading"] > t or (
            state["loading"] == t and state["shifted"] == rows))

    def each_cycle():
        entered = tb.entered
        while state["seen"] < len(entered):  # note the edge on which each tile's swap entered
            op = entered[state["seen"]]
            if op != BUBBLE and swap_col[op]:
                state["swap_edge"][tile_col[op]] = state["seen"]
            state["seen"] += 1
        t = state["loading"]
        if state["shifted"] == rows and t + 1 < len(tiles) and t in state["swap_edge"]:
            state["loading"], state["shifted"] = t + 1, 0  # tile t is in use: load the next
            t += 1
        prev_passed = t == 0 or (t - 1 in state["swap_edge"] and
                                 len(entered) > state["swap_edge"][t - 1] + (rows - 1) * skew)
        shift = state["shifted"] < rows and prev_passed and tb.rng.random() < 0.7
        if shift:
            w, wf = tiles[t]
            dut.w_in.value = int(w[rows - 1 - state["shifted"]]) | tbutil.FORMAT_CODES[wf] << 16
            state["shifted"] += 1
        else:
            dut.w_in.value = int(tb.rng.integers(0, 1 << 18))  # ignored without w_shift
        dut.w_shift.value = int(shift)

    def describe(i):
        w, wf = tiles[tile_col[i]]
        names = {v: k for k, v in tbutil.FORMAT_CODES.items()}
        xs = [(int(ops["x"][i]) >> (16 * k)) & 0xFFFF for k in range(rows)]
        return (f"tile {tile_col[i]} w ({wf}) = {tbutil.hexs(w, 4)}, "
                f"x ({names[int(fmt_col[i])]}) = {tbutil.hexs(xs, 4)}")

    dut._log.info("PE column: %d rows, %d tiles, %d vectors, latency %d, seed %d",
                  rows, len(tiles), total, latency, tbutil.seed())
    await tb.run(ops, {"result": np.array(expected)}, describe, may_issue=may_issue,
                 each_cycle=each_cycle, bubble={"x_swap": 0})
