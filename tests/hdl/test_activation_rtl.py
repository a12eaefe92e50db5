# amaranth: UnusedElaboratable=no
"""The activation engine in cocotb, Icarus and Verilator: bit-exact against golden.activation.

Configurations: 4 lanes with the default pipelines and every dtype; 3 lanes fully
combinational (glue, mul, add and SRU at 0 stages: the intake then follows the SRU's ready
directly); 2 lanes with other pipeline depths and an fp8-only SRU (other dtypes are illegal).
"""

import pytest

from hdl.fp32_mul import FP32_MUL_MAX_STAGES
from hdl.sru import SRU_MAX_STAGES
from sim import runner

ACT = "hdl.activation:ActivationEngine"
CONFIGS = {
    "l4": ({"lanes": 4}, "60"),
    "l3-comb": ({"lanes": 3, "glue_stages": 0, "mul_stages": 0, "add_stages": 0, "sru_stages": 0},
                "30"),
    "l2-deep-fp8": ({"lanes": 2, "glue_stages": 2, "mul_stages": 3, "add_stages": 5,
                     "sru_stages": 2,
                     "random_bits": 8, "targets": ["fp8_e4m3", "fp8_e5m2"]}, "30"),
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_activation(simulator, config):
    params, commands = CONFIGS[config]
    runner.run(ACT, params, "sim.tb.activation", simulator, run_tag=config,
               extra_env={"NCLITE_COMMANDS": commands})


@pytest.mark.parametrize("kwargs, param", [
    ({"lanes": 0}, "lanes"), ({"lanes": 2, "glue_stages": 4}, "glue_stages"),
    ({"lanes": 2, "mul_stages": FP32_MUL_MAX_STAGES + 1}, "mul_stages"),
    ({"lanes": 2, "add_stages": 8}, "add_stages"),
    ({"lanes": 2, "sru_stages": SRU_MAX_STAGES + 1}, "sru_stages"),
    ({"lanes": 2, "targets": ["int8"]}, "targets"),
])
def test_bad_parameters_fail_at_elaboration(kwargs, param):
    from hdl.activation import ActivationEngine

    with pytest.raises(ValueError, match=param):
        ActivationEngine(**kwargs)


def test_func_codes_match_golden():
    from golden.activation import ActivationFunc as G
    from hdl.activation import ActivationFunc as H

    assert {m.name: m.value for m in H} == {m.name: m.value for m in G}
