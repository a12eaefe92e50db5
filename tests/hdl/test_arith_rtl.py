"""The arithmetic units' RTL in cocotb, Icarus and Verilator, bit-exact against golden/."""

import pytest

from hdl.fp32_mul import FP32_MUL_MAX_STAGES
from sim import runner


@pytest.mark.parametrize("stages", [0, 3])
def test_fp32_adder(simulator, stages):
    runner.run("hdl.fp32_add:Fp32Adder", {"stages": stages}, "sim.tb.fp32_arith", simulator,
               testcase="adder_matches_golden")


@pytest.mark.parametrize("params", [
    {"stages": 0}, {"stages": 3}, {"stages": FP32_MUL_MAX_STAGES},
    {"stages": FP32_MUL_MAX_STAGES, "operand_register": True},
], ids=["stages0", "stages3", "stages-max", "stages-max-operand-register"])
def test_fp32_multiplier(simulator, params):
    runner.run("hdl.fp32_mul:Fp32Multiplier", params, "sim.tb.fp32_arith",
               simulator, testcase="multiplier_matches_golden")


@pytest.mark.parametrize("params", [
    {"stages": 0},
    {"stages": 2},
    {"stages": 1, "formats": ["fp8_e4m3", "fp8_e5m2"]},
], ids=["comb-all", "stages2-all", "fp8-only"])
def test_fp_multiplier(simulator, params):
    runner.run("hdl.fp_mul:FpMultiplier", params, "sim.tb.fp_mul", simulator,
               testcase="multiplier_matches_golden")


def test_fp8_products_exhaustive(simulator):
    """All 4 x 65536 fp8 x fp8 products (junk in the upper bytes) of the combinational
    multiplier, bit-exact with golden: what Amaranth's simulator took 35 s for
    (tests/hdl/test_fp_mul_pysim.py, now in make test-full), in both simulators."""
    runner.run("hdl.sim_batch:CycleReplay",
               {"design": "hdl.fp_mul:FpMultiplier", "params": {"stages": 0}, "k": 16},
               "sim.tb.fp_mul", simulator, testcase="fp8_products_exhaustive")
