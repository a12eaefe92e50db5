"""The tensor engine in cocotb, Icarus and Verilator: bit-exact PSUM against golden/tensor."""

import pytest

from sim import runner

CONFIGS = {
    "n2": {"n": 2, "psum_banks": 2, "psum_words": 8},
    "n4": {"n": 4, "psum_banks": 4, "psum_words": 16},
    "n3-deep": {"n": 3, "psum_banks": 3, "psum_words": 7, "mul_stages": 2, "add_stages": 3},
}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("testcase", ["random_commands,back_to_back", "random_gemms"])
def test_tensor_engine(simulator, config, testcase):
    runner.run("hdl.tensor_engine:TensorEngine", CONFIGS[config], "sim.tb_tensor_engine",
               simulator, testcase=testcase, run_tag=f"{config}-{testcase.split(',')[0]}")
