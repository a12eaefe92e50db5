"""hdl.fp32_compare.Fp32Compare in Amaranth's simulator against golden.vector.alu (MAX, MIN,
GREATER) on every pair of fp32 special values (±0, subnormals, ±inf, NaNs of both signs and
payloads, max/min) and random pairs. (On the emitted Verilog, in both simulators, it is checked
inside the activation/vector engine: tests/hdl/test_activation_rtl.py.)"""

import numpy as np
from amaranth.sim import Simulator

from golden.isa import AluOp
from golden.vector import alu
from hdl.fp32_compare import Fp32Compare
from sim.tb.vectors import operand_pairs, seeded_rng


def test_compare_matches_golden(seed):
    a, b = operand_pairs("fp32", "fp32", seeded_rng("fp32_compare", seed=seed), 2000)
    a, b = a.astype(np.uint32), b.astype(np.uint32)
    want = {name: alu(op, a, b) for name, op in
            (("max", AluOp.MAX), ("min", AluOp.MIN), ("greater", AluOp.GREATER))}
    dut = Fp32Compare()
    got = {name: [] for name in want}

    async def bench(ctx):
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            ctx.set(dut.a, x)
            ctx.set(dut.b, y)
            for name in got:
                got[name].append(ctx.get(getattr(dut, name)))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    for name, w in want.items():
        bad = np.flatnonzero(np.array(got[name], dtype=np.uint32) != w)
        assert not bad.size, (f"{name} (seed {seed}): {bad.size} differ, first a="
                              f"{int(a[bad[0]]):#010x} b={int(b[bad[0]]):#010x}: RTL "
                              f"{got[name][bad[0]]:#010x}, golden {int(w[bad[0]]):#010x}")
