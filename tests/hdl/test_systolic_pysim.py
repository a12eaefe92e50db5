# amaranth: UnusedElaboratable=no
"""SystolicArray in amaranth.sim (no Verilog simulator), bit-exact against golden/tensor_engine.py.

The testbench is the array's contract (hdl/systolic.py): a tile's k rows go in one per cycle
(``w_valid``, ``w_row``, ``w_in``) into the shadow weights while the previous tile still
computes; moving columns enter unskewed, one per enabled cycle, the first column of a tile
carrying ``swap`` (and ``pad`` in rows >= k); the ``n`` column sums of a moving column appear
together on ``result`` exactly ``latency`` enabled cycles later and must equal
:func:`golden.tensor_engine.matmul_tile` of the tile padded with +0 rows (``s = +0 +
a[0,m]·b[0,f] + …`` in PE-row order), bit for bit. Tiles follow each other at the limits of the
background load rule: ``early`` puts a tile's rows from the cycle of the previous tile's swap
column on and its own swap column right after its last row; ``late`` puts its swap column as
early as the previous tile allows and its rows as late as the rule allows (``e = t − 1 + k·δ``:
with ``add_stages`` > 0 the rows keep coming while the swap wavefront runs behind them).

Cases: arrays of 1 to 4 PEs a side with the PE's default pipeline (5 multiplier and 6 adder
stages) and shallower ones; every pair of operand formats; partial tiles whose padding rows
hold the old tiles' weights (infinities and NaNs among them); random clock enable with junk
driven on the inputs while it is low. Seed: ``NCLITE_SEED`` (default 1), printed on failure.
A few seconds in all (it is the fast check of lab 2, docs/labs/lab2-systolic/).
"""

import os
import re

import numpy as np
import pytest
from amaranth.hdl import Value
from amaranth.lib import data
from amaranth.sim import Simulator

from golden.formats import INPUT_FORMATS, to_bits
from golden.tensor_engine import matmul_tile
from hdl.formats import Fmt
from hdl.pe import Moving, Weight
from hdl.systolic import SystolicArray
from sim.tb.vectors import operands, seeded_rng

SEED = int(os.environ.get("NCLITE_SEED", "1"))
CODES = {f.golden_name: f.value for f in Fmt}



def _packer(layout, n):
    """A function packing n per-lane field dicts into the integer of an ArrayLayout port."""
    layout = data.Layout.cast(layout)
    fields = [(name, field.offset) for name, field in layout]
    width = layout.size

    def pack(lanes):
        word = 0
        for i, lane in enumerate(lanes):
            for name, offset in fields:
                word |= int(lane.get(name, 0)) << (i * width + offset)
        return word
    return pack


def random_tile(rng, n, f_cols, *, wild=False, k=None):
    """A random (stationary k x n, its format, moving k x f_cols, its format); k = n unless
    given.

    Tame tiles hold normal-distributed values, so that nearly every sum is finite and a sum
    that meets a wrong partner shows; ``wild`` ones the full mix of sim.tb.vectors (subnormals,
    overflow, ties, a few infinities and NaNs).
    """
    k = n if k is None else k
    s_fmt, m_fmt = (str(f) for f in rng.choice(INPUT_FORMATS, 2))
    if wild:
        return (operands(s_fmt, rng, (k, n), specials=0.03), s_fmt,
                operands(m_fmt, rng, (k, f_cols), specials=0.03), m_fmt)
    return (to_bits(rng.standard_normal((k, n)), s_fmt), s_fmt,
            to_bits(rng.standard_normal((k, f_cols)), m_fmt), m_fmt)


def schedule(tiles, delta: int, mode: str):
    """Per tile, the enabled cycles of its rows and of its swap (first) column, at the limits
    of the background load rule (see the module docstring)."""
    plan, last_row, last_col, prev_swap = [], -1, -1, None
    for stat, _, mov, _ in tiles:
        k = stat.shape[0]
        if mode == "late" and delta and prev_swap is not None:
            swap = max(last_col + 1, prev_swap + 1, last_row + 2)
            rows = [swap - 1 + r for r in range(k)]
        else:
            first = max(last_row + 1, 0 if prev_swap is None else prev_swap)
            rows = [first + r for r in range(k)]
            swap = max(rows[-1] + 1, last_col + 1)
        plan.append((rows, swap))
        last_row, last_col, prev_swap = rows[-1], swap + mov.shape[1] - 1, swap
    return plan


#: Enabled cycles the testbench runs on after the last expected sums, so that a diagnosis can
#: find sums that come late.
TAIL = 4


def run_array(dut, tiles, *, en_prob=1.0, rng=None, mode="early", plan=None, probe=None):
    """Run ``tiles`` through ``dut`` (see the module docstring); return, per tile, the
    ``result`` rows of its moving columns as a uint32 array of shape (n, F), and golden's.
    ``probe``, a dict, receives ``trace`` (``result`` after each enabled cycle) and ``issued``
    (each enabled cycle's (tile, column) or None), for :func:`diagnose`."""
    n, latency = dut.n, dut.latency
    assert latency >= 1, "the testbench samples results after clock edges"
    pack_x = _packer(Moving, n)
    pack_w = _packer(Weight, n)
    rng = rng or seeded_rng("en")
    x_port, w_port = Value.cast(dut.x_in), Value.cast(dut.w_in)
    results = [np.zeros((n, mov.shape[1]), dtype=np.uint32) for _, _, mov, _ in tiles]

    def padded(a):
        return np.vstack([a, np.zeros((n - a.shape[0], a.shape[1]), dtype=a.dtype)])

    want = [matmul_tile(padded(stat), s_fmt, padded(mov), m_fmt)
            for stat, s_fmt, mov, m_fmt in tiles]
    plan = plan or schedule(tiles, min(dut.add_stages, 1), mode)
    rows_at = {e: (t, r) for t, (rows, _) in enumerate(plan) for r, e in enumerate(rows)}
    cols_at = {swap + c: (t, c) for t, (_, swap) in enumerate(plan)
               for c in range(tiles[t][2].shape[1])}
    end = max(cols_at) + latency + 1
    total = sum(r.shape[1] for r in results)
    max_cycles = int(20 * end / max(en_prob, 0.05)) + 100

    def junk(port):
        return int.from_bytes(rng.bytes(len(port) // 8 + 1), "little") % (1 << len(port))

    async def testbench(ctx):
        step = 0  # enabled cycles so far
        issued = []  # per enabled edge: (tile, column), or None for a bubble
        trace = []  # per enabled edge: result after it
        if probe is not None:
            probe.update(trace=trace, issued=issued)
        collected = 0
        tail = TAIL if probe is not None else 0
        for _ in range(max_cycles):
            if collected == total:
                if tail == 0:
                    return
                tail -= 1
            en = bool(rng.random() < en_prob)
            ctx.set(dut.en, en)
            if not en:  # junk everywhere, w_valid included
                for port in (w_port, x_port, dut.w_row, dut.w_valid):
                    ctx.set(port, junk(port))
                await ctx.tick()
                continue
            row = rows_at.get(step)
            if row is not None:
                t, r = row
                stat, s_fmt = tiles[t][:2]
                ctx.set(w_port, pack_w([{"data": stat[r, c], "fmt": CODES[s_fmt]}
                                        for c in range(n)]))
                ctx.set(dut.w_row, r)
            else:
                ctx.set(w_port, junk(w_port))
                ctx.set(dut.w_row, junk(dut.w_row))
            ctx.set(dut.w_valid, row is not None)
            this = cols_at.get(step)
            if this is not None:
                t, c = this
                _, _, mov, m_fmt = tiles[t]
                k = mov.shape[0]
                ctx.set(x_port, pack_x([{"data": mov[i, c] if i < k else 0,
                                         "fmt": CODES[m_fmt], "swap": c == 0, "pad": i >= k}
                                        for i in range(n)]))
            else:
                ctx.set(x_port, 0)  # a bubble: +0 operands, no swap
            await ctx.tick()
            step += 1
            issued.append(this)
            if probe is not None:
                trace.append([ctx.get(dut.result[i]) for i in range(n)])
            if len(issued) >= latency and issued[-latency] is not None:
                t, c = issued[-latency]
                results[t][:, c] = [ctx.get(dut.result[i]) for i in range(n)]
                collected += 1
        raise AssertionError(f"seed={SEED}: testbench did not finish in {max_cycles} cycles")

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(testbench)
    sim.run()
    return results, want


def diagnose(probe, want, n: int, latency: int) -> str:
    """What a wrong array most likely has wrong, from when each column's right sums appear.

    For each column m, the delay d (0, ±1, ±2, …) at which ``result[m]`` shows golden's sum of
    every moving column d enabled cycles after the array's ``latency``, if there is one.
    """
    trace, issued = probe["trace"], probe["issued"]
    offsets = {}
    for m in range(n):
        for d in sorted(range(-latency, TAIL + 1), key=lambda d: (abs(d), d)):
            seen = ok = 0
            for i, this in enumerate(issued):
                s = i + latency - 1 + d
                if this is None or not 0 <= s < len(trace):
                    continue
                seen += 1
                ok += trace[s][m] == want[this[0]][m, this[1]]
            if seen and ok == seen:
                offsets[m] = d
                break
    late = {m: d for m, d in offsets.items() if d}
    lost = [m for m in range(n) if m not in offsets]
    if not lost and len(set(offsets.values())) == 1 and late:
        d = late[0]
        return (f"every column's sums come {abs(d)} enabled cycle(s) "
                f"{'late' if d > 0 else 'early'}: skew + PE chain + deskew add up to "
                f"{latency + d}, not self.latency = {latency}")
    if not lost and late:
        return ("the columns' sums come at different times ("
                + ", ".join(f"column {m}: {d:+d}" for m, d in sorted(offsets.items()))
                + " cycles; + late, - early): look at the deskew")
    if lost:
        where = ", ".join(map(str, lost))
        return (f"column(s) {where} never show the right sums, at any delay: operands meet "
                "the wrong partial sums (some rows): look at the rows' skew and at how x "
                "and psum chain through the PEs" + (
                    f" (columns {', '.join(f'{m}: {d:+d}' for m, d in late.items())} are "
                    "only late)" if late else ""))
    return ("every column's timing is right, yet some sums differ: look at the weights "
            "(w_in, w_shift) and the swap")


def check(dut, tiles, **kwargs):
    # With the clock enable dropping, a register that ignores it fails only here.
    stalls = ("; the clock enable drops at random here: does every register of yours (the PEs' "
              "en, the delay lines' en) hold while en is 0?" if kwargs.get("en_prob", 1) < 1
              else "")
    probe = {}
    got, want = run_array(dut, tiles, probe=probe, **kwargs)
    for t, (g, w) in enumerate(zip(got, want, strict=True)):
        bad = np.argwhere(g != w)
        if len(bad):
            stat, s_fmt, mov, m_fmt = tiles[t]
            lines = [f"  tile {t} ({s_fmt} x {m_fmt}), column sum m={m}, moving column f={f}:"
                     f" got 0x{g[m, f]:08x}, want 0x{w[m, f]:08x}" for m, f in bad[:8]]
            pytest.fail(f"seed={SEED} n={dut.n} mul_stages={dut.mul_stages} "
                        f"add_stages={dut.add_stages}: {len(bad)}/{g.size} sums differ from "
                        f"golden.tensor_engine.matmul_tile\n  likely: "
                        f"{diagnose(probe, want, dut.n, dut.latency)}{stalls}\n"
                        + "\n".join(lines))


CONFIGS = {
    "n1": dict(n=1, mul_stages=1, add_stages=1),
    "n2-default": dict(n=2),
    "n3-m2a3": dict(n=3, mul_stages=2, add_stages=3),
    "n4-m1a2": dict(n=4, mul_stages=1, add_stages=2),
    "n4-comb-add": dict(n=4, mul_stages=1, add_stages=0),
}

# (moving columns, wild values, rows) per tile: a tile of each kind, short multiplications
# (one column: the next tile's rows straddle its swap) and partial tiles after full ones.
SHAPES = ((5, False, None), (1, True, None), (3, False, 1), (1, True, None), (4, True, 2),
          (2, False, None))


@pytest.mark.parametrize("mode", ["early", "late"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_tiles_back_to_back(config, mode):
    """Six tiles of other format pairs, widths and row counts, loaded in the background at
    the limits of the rule, en always 1."""
    rng = seeded_rng("tiles", config, mode)
    dut = SystolicArray(**CONFIGS[config])
    check(dut, [random_tile(rng, dut.n, f, wild=wild, k=None if k is None else min(k, dut.n))
                for f, wild, k in SHAPES], mode=mode)


@pytest.mark.parametrize("mode", ["early", "late"])
@pytest.mark.parametrize("config", ["n2-default", "n3-m2a3"])
def test_random_clock_enable(config, mode):
    """The clock enable drops at random; junk on the inputs while it is low is ignored, and
    the limits of the load rule hold in enabled cycles."""
    rng = seeded_rng("en", config, mode)
    dut = SystolicArray(**CONFIGS[config])
    check(dut, [random_tile(rng, dut.n, f, wild=wild) for f, wild in ((4, False), (2, True),
                                                                       (1, True), (3, False))],
          en_prob=0.7, rng=rng, mode=mode)


def test_padding_rows_without_bf16():
    """A partial tile right after reset on an array without bf16: the rows never loaded hold
    the reset value (format 0, bf16) and must still give +0, not the multiplier's NaN for a
    format it lacks."""
    rng = seeded_rng("no-bf16")
    dut = SystolicArray(n=3, mul_stages=1, add_stages=2, formats=("fp8_e4m3",))
    tiles = [(operands("fp8_e4m3", rng, (k, 3), specials=0.05), "fp8_e4m3",
              operands("fp8_e4m3", rng, (k, f), specials=0.05), "fp8_e4m3")
             for k, f in ((1, 3), (2, 2), (3, 1), (1, 2))]
    check(dut, tiles)


def test_the_rule_is_tight():
    """The background load rule is tight at both ends: a row presented one cycle later than
    ``t − 1 + k·δ`` misses its swap (the PE multiplies the old tile's weight), and one
    presented before the previous swap reached its row replaces a weight still in use. So the
    testbench's schedules are the limits, not margins."""
    dut = SystolicArray(n=2, mul_stages=1, add_stages=2)  # δ = 1
    rng = seeded_rng("tight")
    tiles = [random_tile(rng, 2, 3), random_tile(rng, 2, 3)]
    for plan in ([([0, 1], 2), ([2, 3], 5)], schedule(tiles, 1, "late")):
        probe = {}
        got, want = run_array(dut, tiles, plan=plan, probe=probe)
        assert all((g == w).all() for g, w in zip(got, want, strict=True)), (
            f"two tiles at the load rule's limits (rows, swap per tile: {plan}) give wrong "
            f"sums (seed {SEED})\n  likely: {diagnose(probe, want, dut.n, dut.latency)}")
    # Too late: the second tile's last row one cycle after the limit.
    plan = schedule(tiles, 1, "late")
    rows, swap = plan[1]
    plan[1] = ([*rows[:-1], rows[-1] + 1], swap)
    got, want = run_array(dut, tiles, plan=plan)
    assert (got[0] == want[0]).all() and not (got[1] == want[1]).all()
    # Too early: the second tile's row 0 one cycle before the first tile's swap column; its
    # row 1 in the cycle of that swap column (row k may go in only k·δ cycles after it).
    for plan in ([([0, 1], 3), ([2, 3], 6)], [([0, 1], 2), ([3, 2], 5)]):
        got, want = run_array(dut, tiles, plan=plan)
        assert not (got[0] == want[0]).all() and (got[1] == want[1]).all(), plan


def test_every_format_pair():
    """All nine (stationary, moving) format pairs through one array, tile after tile."""
    rng = seeded_rng("pairs")
    dut = SystolicArray(n=2, mul_stages=1, add_stages=2)
    tiles = []
    for s_fmt in INPUT_FORMATS:
        for m_fmt in INPUT_FORMATS:
            tiles.append((operands(s_fmt, rng, (2, 2), specials=0.05), s_fmt,
                          operands(m_fmt, rng, (2, 3), specials=0.05), m_fmt))
    check(dut, tiles)


def test_latency_attribute():
    for kw in CONFIGS.values():
        dut = SystolicArray(**kw)
        n = dut.n
        assert dut.latency == n * dut.add_stages + dut.mul_stages + n - 1


def test_diagnosis_names_the_fault():
    """The `likely:` line of a failure (lab 2's self-check): from synthetic traces of a 2-column
    array whose sums come at the right time, late, column by column late, or never."""
    latency, n = 5, 2
    want = [np.array([[10, 11, 12], [20, 21, 22]], dtype=np.uint32)]
    issued = [(0, 0), (0, 1), (0, 2)] + [None] * (latency + TAIL)

    def trace(delays):
        out = [[0] * n for _ in issued]
        for i, this in enumerate(issued):
            for m, d in enumerate(delays):
                s = i + latency - 1 + (d or 0)
                if this and 0 <= s < len(out):
                    out[s][m] = int(want[0][m, this[1]]) + (0 if d is not None else 99)
        return {"trace": out, "issued": issued}

    assert "timing is right" in diagnose(trace([0, 0]), want, n, latency)
    assert diagnose(trace([2, 2]), want, n, latency).startswith(
        "every column's sums come 2 enabled cycle(s) late: skew + PE chain + deskew add up to 7")
    assert "1 enabled cycle(s) early" in diagnose(trace([-1, -1]), want, n, latency)
    assert "column 0: +0, column 1: +1 cycles; + late, - early): look at the deskew" in diagnose(
        trace([0, 1]), want, n, latency)
    assert diagnose(trace([None, 1]), want, n, latency).startswith(
        "column(s) 0 never show the right sums")


def test_names_the_save_file_relies_on():
    """The names the waveform save file and the figures find: the PEs ``pe_<k>_<m>``, each
    row's skew line ``x_row<k>`` and each column's deskew line ``sum_col<m>`` (lab 2's text
    asks for them)."""
    from amaranth.back import rtlil

    dut = SystolicArray(n=3, mul_stages=1, add_stages=2)
    text = rtlil.convert(dut, name="array")
    # (Which registers each line has is the exercise: only names that every solution has.)
    missing = [name for name in ("pe_0_0", "pe_2_1", "x_row1_d1", "sum_col0_d1")
               if not re.search(rf"[ .\\]{re.escape(name)}\b", text)]
    assert not missing, (
        f"no {missing} in the elaborated array: name the PEs f\"pe_{{k}}_{{col}}\", the skew "
        "lines f\"x_row{k}\" and the deskew lines f\"sum_col{col}\"")
