# amaranth: UnusedElaboratable=no
"""Fp32Multiplier in amaranth.sim against golden.fp32.fp32_mul (itself checked against
Berkeley SoftFloat in test_golden_fp32.py): every special pair, random pairs, product ties
in the normal and subnormal ranges, at every stage count, with clock-enable stalls (junk
operands while stalled, the output checked to hold); bad parameters. The cocotb testbench
(sim/tb/fp32_arith.py) runs 10^4 pairs on the Verilog.
Seed: ``NCLITE_SEED`` (default 1).
"""

import os

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden.fp32 import fp32_mul
from hdl.fp32_mul import FP32_MUL_MAX_STAGES, Fp32Multiplier
from sim.tb import vectors
from sim.verify.latency import shift_hint

SEED = int(os.environ.get("NCLITE_SEED", "1"))


def _rtl(a, b, stages, operand_register=False, stall_p=0.25):
    dut = Fp32Multiplier(stages=stages, operand_register=operand_register)
    latency = dut.latency
    rng = np.random.default_rng([SEED, stages])
    sim = Simulator(dut)
    got, held = [], []  # results; results after which a stall changed the output

    async def comb(ctx):
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            ctx.set(dut.a, x)
            ctx.set(dut.b, y)
            got.append(ctx.get(dut.result))

    async def piped(ctx):
        entered = []  # operation index that entered on each enabled edge
        i = 0
        while len(got) < len(a):
            en = rng.random() >= stall_p
            ctx.set(dut.en, en)
            if en:
                ctx.set(dut.a, int(a[i]) if i < len(a) else 0)
                ctx.set(dut.b, int(b[i]) if i < len(a) else 0)
            else:  # junk a stalled pipeline must not take (nor advance on)
                ctx.set(dut.a, int(rng.integers(1 << 32)))
                ctx.set(dut.b, int(rng.integers(1 << 32)))
            await ctx.tick()
            if en:
                entered.append(i)
                i += 1
                # After the edge, the output shows the operation that entered `latency`
                # enabled edges ago (counting this one).
                if len(entered) >= latency and entered[-latency] < len(a):
                    got.append(ctx.get(dut.result))
            elif got and len(held) < 4 and ctx.get(dut.result) != got[-1]:
                held.append(len(got))  # a stalled pipeline's output must hold

    if latency == 0:
        sim.add_testbench(comb)
    else:
        sim.add_clock(1e-6)
        sim.add_testbench(piped)
    sim.run()
    assert not held, (f"stages={stages} operand_register={operand_register}: the output "
                      f"changed during a stall after results {held} (seed {SEED}): every "
                      "register must hold while en is 0")
    return np.array(got, dtype=np.uint32)


@pytest.mark.parametrize("stages, operand_register",
                         [*((s, False) for s in range(FP32_MUL_MAX_STAGES + 1)),
                          (0, True), (FP32_MUL_MAX_STAGES, True)])
def test_matches_golden(stages, operand_register):
    a, b = vectors.operand_pairs("fp32", "fp32", np.random.default_rng([SEED, 7]), 1500)
    got, want = _rtl(a, b, stages, operand_register), fp32_mul(a, b)
    bad = np.flatnonzero(got != want)
    hint = shift_hint(got, want, stages + operand_register)
    if hint:  # (the exercise's two parts that set the count)
        hint += " (the plan's cut_mul + cut_norm + cut_out; delay(m, v, k) builds k registers)"
    assert not bad.size, (f"stages={stages} operand_register={operand_register}: {bad.size} "
                          f"of {len(a)} products differ (seed {SEED}){hint}, e.g. "
                          + ", ".join(f"0x{a[i]:08x} * 0x{b[i]:08x} = 0x{got[i]:08x}, golden "
                                      f"0x{want[i]:08x}" for i in bad[:4]))



def test_vectors_reach_every_result_class():
    a, b = vectors.operand_pairs("fp32", "fp32", np.random.default_rng([SEED, 7]), 1500)
    r = fp32_mul(a, b)
    exp, man = (r >> 23) & 0xFF, r & 0x7FFFFF
    assert ((exp == 0) & (man != 0)).sum() > 50, "subnormal products"
    assert ((exp == 0xFF) & (man == 0)).sum() > 50, "overflow / inf"
    assert (r == 0x7FC00000).sum() > 50 and ((exp == 0) & (man == 0)).sum() > 50


@pytest.mark.parametrize("stages, exc", [(-1, ValueError), (FP32_MUL_MAX_STAGES + 1, ValueError),
                                         (True, TypeError), (1.0, TypeError)])
def test_bad_stages(stages, exc):
    with pytest.raises(exc, match="stages"):
        Fp32Multiplier(stages=stages)
