# amaranth: UnusedElaboratable=no
"""SystolicArray in amaranth.sim (no Verilog simulator), bit-exact against golden/tensor_engine.py.

The testbench is the array's contract (hdl/systolic.py): weights are shifted in from the
bottom row, ``n`` rows per tile in natural order; moving columns enter unskewed, one per
enabled cycle, the first column of a tile carrying ``swap``; the ``n`` column sums of a moving
column appear together on ``result`` exactly ``latency`` enabled cycles later and must equal
:func:`golden.tensor_engine.matmul_tile` of the tile (``s = +0 + a[0,m]·b[0,f] + …`` in PE-row
order), bit for bit. Tiles follow each other double-buffered: the next tile's weights shift
into the shadow registers while the current tile streams, as soon as the current tile's
``swap`` wavefront has left the array.

Cases: arrays of 1 to 4 PEs a side with the PE's default pipeline (5 multiplier and 6 adder
stages) and shallower ones; every pair of operand formats; random clock enable with junk
driven on the inputs while it is low. Seed: ``NCLITE_SEED`` (default 1), printed on failure.
A few seconds in all (it is the fast check of lab 2, docs/labs/lab2-systolic/).
"""

import os

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


def random_tile(rng, n, f_cols, *, wild=False):
    """A random (stationary n x n, its format, moving n x f_cols, its format).

    Tame tiles hold normal-distributed values, so that nearly every sum is finite and a sum
    that meets a wrong partner shows; ``wild`` ones the full mix of sim.tb.vectors (subnormals,
    overflow, ties, a few infinities and NaNs).
    """
    s_fmt, m_fmt = (str(f) for f in rng.choice(INPUT_FORMATS, 2))
    if wild:
        return (operands(s_fmt, rng, (n, n), specials=0.03), s_fmt,
                operands(m_fmt, rng, (n, f_cols), specials=0.03), m_fmt)
    return (to_bits(rng.standard_normal((n, n)), s_fmt), s_fmt,
            to_bits(rng.standard_normal((n, f_cols)), m_fmt), m_fmt)


def run_array(dut, tiles, *, en_prob=1.0, rng=None):
    """Run ``tiles`` through ``dut`` (see the module docstring); return, per tile, the
    ``result`` rows of its moving columns as a uint32 array of shape (n, F)."""
    n, latency = dut.n, dut.latency
    assert latency >= 1, "the testbench samples results after clock edges"
    # The swap of a column entering at enabled edge e reaches PE (k, m) k·add_stages + m
    # enabled edges later; weights of the next tile may shift once it has passed every PE.
    clear = (n - 1) * dut.add_stages + (n - 1) + 1
    pack_x = _packer(Moving, n)
    pack_w = _packer(Weight, n)
    rng = rng or seeded_rng("en")
    x_port, w_port = Value.cast(dut.x_in), Value.cast(dut.w_in)
    results = [np.zeros((n, mov.shape[1]), dtype=np.uint32) for _, _, mov, _ in tiles]
    want = [matmul_tile(stat, s_fmt, mov, m_fmt) for stat, s_fmt, mov, m_fmt in tiles]

    total = sum(r.shape[1] for r in results)
    max_cycles = 20 * (total + len(tiles) * (n + clear) + latency) + 100

    def junk(port):
        return int.from_bytes(rng.bytes(len(port) // 8 + 1), "little") % (1 << len(port))

    async def testbench(ctx):
        loaded = 0  # tiles whose n weight rows are all shifted in
        shifted = 0  # rows of tile `loaded` shifted so far
        swapped = 0  # tiles whose first (swap) column has entered the array
        since_swap = clear  # enabled edges since the last swap column entered
        cur, col = 0, 0  # the next moving column to issue: tile, column
        issued = []  # per enabled edge: (tile, column), or None for a bubble
        collected = 0
        for _ in range(max_cycles):
            if collected == total:
                return
            en = bool(rng.random() < en_prob)
            # Weight shifts (independent of en): the next tile, once the swap of the tile
            # before it has passed every PE.
            shift = loaded < len(tiles) and loaded == swapped and since_swap >= clear
            if shift:
                stat, s_fmt = tiles[loaded][:2]
                row = stat[shifted]  # rows go in in natural order: row 0 first, ends on top
                ctx.set(w_port, pack_w([{"data": row[c], "fmt": CODES[s_fmt]}
                                        for c in range(n)]))
            else:
                ctx.set(w_port, junk(w_port))
            ctx.set(dut.w_shift, shift)
            # Moving columns, on enabled cycles, of tiles whose weights are all in.
            this = None
            if not en:
                ctx.set(x_port, junk(x_port))
            elif cur < loaded:
                _, _, mov, m_fmt = tiles[cur]
                ctx.set(x_port, pack_x([{"data": mov[k, col], "fmt": CODES[m_fmt],
                                         "swap": col == 0} for k in range(n)]))
                this = (cur, col)
                col += 1
                if col == mov.shape[1]:
                    cur, col = cur + 1, 0
            else:
                ctx.set(x_port, 0)  # a bubble: +0 operands, no swap
            ctx.set(dut.en, en)
            await ctx.tick()
            if shift:
                shifted += 1
                if shifted == n:
                    loaded, shifted = loaded + 1, 0
            if en:
                issued.append(this)
                since_swap += 1
                if this is not None and this[1] == 0:
                    swapped, since_swap = swapped + 1, 1
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


def check(dut, tiles, **kwargs):
    got, want = run_array(dut, tiles, **kwargs)
    for t, (g, w) in enumerate(zip(got, want, strict=True)):
        bad = np.argwhere(g != w)
        if len(bad):
            stat, s_fmt, mov, m_fmt = tiles[t]
            lines = [f"  tile {t} ({s_fmt} x {m_fmt}), column sum m={m}, moving column f={f}:"
                     f" got 0x{g[m, f]:08x}, want 0x{w[m, f]:08x}" for m, f in bad[:8]]
            pytest.fail(f"seed={SEED} n={dut.n} mul_stages={dut.mul_stages} "
                        f"add_stages={dut.add_stages}: {len(bad)}/{g.size} sums differ from "
                        f"golden.tensor_engine.matmul_tile\n" + "\n".join(lines))


CONFIGS = {
    "n1": dict(n=1, mul_stages=1, add_stages=1),
    "n2-default": dict(n=2),
    "n3-m2a3": dict(n=3, mul_stages=2, add_stages=3),
    "n4-m1a2": dict(n=4, mul_stages=1, add_stages=2),
    "n4-comb-add": dict(n=4, mul_stages=1, add_stages=0),
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_tiles_back_to_back(config):
    """Four tiles, each of another format pair and width, double-buffered, en always 1."""
    rng = seeded_rng("tiles", config)
    dut = SystolicArray(**CONFIGS[config])
    check(dut, [random_tile(rng, dut.n, f, wild=wild) for f, wild in ((5, False), (1, True),
                                                                       (3, False), (4, True))])


@pytest.mark.parametrize("config", ["n2-default", "n3-m2a3"])
def test_random_clock_enable(config):
    """The clock enable drops at random; junk on the inputs while it is low is ignored."""
    rng = seeded_rng("en", config)
    dut = SystolicArray(**CONFIGS[config])
    check(dut, [random_tile(rng, dut.n, f, wild=wild) for f, wild in ((4, False), (2, True))],
          en_prob=0.7, rng=rng)


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
