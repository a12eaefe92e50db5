# amaranth: UnusedElaboratable=no
"""cocotb testbench: ``hdl.fp_mul.FpMultiplier`` against ``golden.fp32.widen_mul``, bit for bit.

For every pair of enabled input formats (mixed pairs included): all pairs of that pair's
special values and random pairs, interleaved so the format tags change from cycle to cycle;
plus operations with a disabled or reserved (3) format tag, which must give the canonical NaN.
Random clock-enable stalls throughout (``multiplier_matches_golden``). And every fp8 x fp8
product, on a combinational multiplier played from inside the simulator
(``fp8_products_exhaustive``, on a ``hdl.sim_batch.CycleReplay`` top).
"""

import os

import cocotb
import numpy as np

from golden.formats import FP32_CANONICAL_NAN
from golden.fp32 import widen_mul
from hdl.sim_batch import CycleReplay
from sim.tb import batches, tbutil, vectors
from sim.tb.pipeline import PipelineTB


@cocotb.test(**tbutil.timeout(2 + 1e-4 * int(os.environ.get('NCLITE_VECTORS', '10000'))))
async def multiplier_matches_golden(dut):
    p = tbutil.params()
    enabled = p.get("formats", list(tbutil.FORMAT_CODES))
    n = int(os.environ.get("NCLITE_VECTORS", "10000"))
    rng = tbutil.rng(2)
    cols = {"a": [], "a_fmt": [], "b": [], "b_fmt": []}
    expected = []
    pairs = [(fa, fb) for fa in enabled for fb in enabled]
    for fa, fb in pairs:
        a, b = vectors.operand_pairs(fa, fb, rng, max(1, n // len(pairs)))
        cols["a"].append(a.astype(np.uint32))
        cols["b"].append(b.astype(np.uint32))
        cols["a_fmt"].append(np.full(a.size, tbutil.FORMAT_CODES[fa]))
        cols["b_fmt"].append(np.full(b.size, tbutil.FORMAT_CODES[fb]))
        expected.append(widen_mul(a, fa, b, fb))
    # Formats the unit was not built for, and the reserved tag 3: canonical NaN.
    for code in sorted(set(range(4)) - {tbutil.FORMAT_CODES[f] for f in enabled}):
        k = 64
        cols["a"].append(rng.integers(0, 1 << 16, k).astype(np.uint32))
        cols["b"].append(rng.integers(0, 1 << 16, k).astype(np.uint32))
        cols["a_fmt"].append(np.full(k, code))
        cols["b_fmt"].append(np.full(k, tbutil.FORMAT_CODES[enabled[0]]))
        expected.append(np.full(k, FP32_CANONICAL_NAN, dtype=np.uint32))
    ops = {key: np.concatenate(v) for key, v in cols.items()}
    expected = np.concatenate(expected)
    order = rng.permutation(expected.size)  # interleave the format pairs
    ops = {key: v[order] for key, v in ops.items()}
    expected = expected[order]
    for key in ops:
        getattr(dut, key).value = 0
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    tb = PipelineTB(dut, p.get("stages", 1))
    names = {v: k for k, v in tbutil.FORMAT_CODES.items()}
    dut._log.info("multiplier: %d operations, formats %s, seed %d", expected.size, enabled,
                  tbutil.seed())

    def describe(i):
        return (f"a=0x{int(ops['a'][i]):04x} ({names.get(int(ops['a_fmt'][i]), 'reserved')}) "
                f"b=0x{int(ops['b'][i]):04x} ({names.get(int(ops['b_fmt'][i]), 'reserved')})")

    await tb.run(ops, {"result": expected}, describe)


#: The fp8 formats' tags, for the exhaustive products.
FP8 = ("fp8_e4m3", "fp8_e5m2")


@cocotb.test(**tbutil.timeout(4 * 65536 * 1e-5 + 2))
async def fp8_products_exhaustive(dut):
    """All 256 x 256 operand pairs of each of the four fp8 format pairs, with random junk in
    the operands' upper bytes (the multiplier must ignore it), through a combinational
    ``FpMultiplier`` on a :class:`~hdl.sim_batch.CycleReplay` top: one product a cycle,
    played from inside the simulator (no Python per cycle), every result against
    ``golden.fp32.widen_mul`` (itself checked exhaustively against SoftFloat)."""
    top = tbutil.params()
    replay_top = CycleReplay(**top)  # not elaborated: its layouts and the multiplier's latency
    if replay_top.design.latency != 0:
        raise ValueError("the exhaustive products run on the combinational multiplier")
    rng = tbutil.rng(5)
    byte_a, byte_b = (v.ravel() for v in np.meshgrid(np.arange(256), np.arange(256),
                                                     indexing="ij"))
    cols = {"a": [], "a_fmt": [], "b": [], "b_fmt": []}
    expected = []
    for fa in FP8:
        for fb in FP8:
            cols["a"].append(byte_a | rng.integers(0, 256, byte_a.size) << 8)
            cols["b"].append(byte_b | rng.integers(0, 256, byte_b.size) << 8)
            cols["a_fmt"].append(np.full(byte_a.size, tbutil.FORMAT_CODES[fa]))
            cols["b_fmt"].append(np.full(byte_b.size, tbutil.FORMAT_CODES[fb]))
            expected.append(widen_mul(byte_a, fa, byte_b, fb))
    ops = {key: np.concatenate(v).astype(np.uint64) for key, v in cols.items()}
    expected = np.concatenate(expected)
    # A combinational result shows in the cycle its operands are played, and the replay top
    # samples it after the next clock edge, with the next cycle's operands on the inputs:
    # sample i is the product of beat i + 1, so the first beat is played twice.
    ops = {key: np.concatenate([v[:1], v]) for key, v in ops.items()}
    inputs = batches.layout_bits(replay_top.input_layout, len(expected) + 1, en=1, **ops)
    dut.inputs__valid.value = 0
    dut.outputs__ready.value = 1
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    samples = await batches.replay(dut, inputs, k=top["k"])
    got = batches.field_values(samples, replay_top.output_layout, "result")[:len(expected)]
    bad = np.flatnonzero(got.astype(np.uint32) != expected)
    names = {v: k for k, v in tbutil.FORMAT_CODES.items()}
    assert not len(bad), (
        f"{len(bad)} of {len(expected)} fp8 products differ from golden in "
        f"{tbutil.simulator()} (seed {tbutil.seed()}):\n  " + "\n  ".join(
            f"a=0x{int(ops['a'][i + 1]):04x} ({names[int(ops['a_fmt'][i + 1])]}) "
            f"b=0x{int(ops['b'][i + 1]):04x} ({names[int(ops['b_fmt'][i + 1])]}): "
            f"0x{int(got[i]):08x}, golden 0x{int(expected[i]):08x}" for i in bad[:8]))
    dut._log.info("%d fp8 products bit-exact, seed %d", len(expected), tbutil.seed())
