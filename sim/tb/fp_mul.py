"""cocotb testbench: ``hdl.fp_mul.FpMultiplier`` against ``golden.fp32.widen_mul``, bit for bit.

For every pair of enabled input formats (mixed pairs included): all pairs of that pair's
special values and random pairs, interleaved so the format tags change from cycle to cycle;
plus operations with a disabled or reserved (3) format tag, which must give the canonical NaN.
Random clock-enable stalls throughout.
"""

import os

import cocotb
import numpy as np

from golden.formats import FP32_CANONICAL_NAN
from golden.fp32 import widen_mul
from sim.tb import tbutil, vectors
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
