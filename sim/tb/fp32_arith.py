"""cocotb testbench: the fp32 units against ``golden.fp32``, bit for bit.

``Fp32Adder`` (test ``adder_matches_golden``) against ``fp32_add`` and ``Fp32Multiplier``
(test ``multiplier_matches_golden``) against ``fp32_mul``: every pair of fp32 special values,
>= 10^4 random pairs (clustered exponents, cancellation, subnormals, exact ties of sums and
products) and random clock-enable stalls. Parameters come from the runner (``stages``,
``operand_register``) and ``NCLITE_VECTORS`` sets the number of random pairs.
"""

import os

import cocotb

from golden.fp32 import fp32_add, fp32_mul
from sim.tb import tbutil, vectors
from sim.tb.pipeline import PipelineTB


async def _check(dut, golden_op, name: str):
    n = int(os.environ.get("NCLITE_VECTORS", "10000"))
    a, b = vectors.operand_pairs("fp32", "fp32", tbutil.rng(1), n)
    expected = golden_op(a, b)
    dut.a.value = 0
    dut.b.value = 0
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    params = tbutil.params()  # the multiplier's operand register adds a cycle
    tb = PipelineTB(dut, params.get("stages", 2) + params.get("operand_register", False))
    dut._log.info("%s: %d vector pairs, seed %d", name, len(a), tbutil.seed())
    await tb.run({"a": a, "b": b}, {"result": expected},
                 lambda i: f"a=0x{int(a[i]):08x} b=0x{int(b[i]):08x}")


@cocotb.test(**tbutil.timeout(2 + 1e-4 * int(os.environ.get('NCLITE_VECTORS', '10000'))))
async def adder_matches_golden(dut):
    await _check(dut, fp32_add, "adder")


@cocotb.test(**tbutil.timeout(2 + 1e-4 * int(os.environ.get('NCLITE_VECTORS', '10000'))))
async def multiplier_matches_golden(dut):
    await _check(dut, fp32_mul, "multiplier")
