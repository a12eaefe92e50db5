"""cocotb testbench: ``hdl.fp32_add.Fp32Adder`` against ``golden.fp32.fp32_add``, bit for bit.

Every pair of fp32 special values, >= 10^4 random pairs (clustered exponents, cancellation,
exact ties) and random clock-enable stalls. Parameters come from the runner (``stages``) and
``NCLITE_VECTORS`` sets the number of random pairs.
"""

import os

import cocotb

from golden.fp32 import fp32_add
from sim import tbutil, vectors
from sim.pipeline_tb import PipelineTB


@cocotb.test()
async def adder_matches_golden(dut):
    n = int(os.environ.get("NCLITE_VECTORS", "10000"))
    a, b = vectors.operand_pairs("fp32", "fp32", tbutil.rng(1), n)
    expected = fp32_add(a, b)
    dut.a.value = 0
    dut.b.value = 0
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    tb = PipelineTB(dut, tbutil.params().get("stages", 2))
    dut._log.info("adder: %d vector pairs, seed %d", len(a), tbutil.seed())
    await tb.run({"a": a, "b": b}, {"result": expected},
                 lambda i: f"a=0x{int(a[i]):08x} b=0x{int(b[i]):08x}")
