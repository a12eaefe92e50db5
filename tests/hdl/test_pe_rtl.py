# amaranth: UnusedElaboratable=no
"""The PE (as a column of PEs, the dot-product chain) in cocotb, Icarus and Verilator."""

import pytest

from hdl.fp32_add import FP32_ADD_MAX_STAGES
from hdl.fp_mul import FP_MUL_MAX_CUTS
from sim import runner


@pytest.mark.parametrize("params", [
    {"rows": 1},
    {"rows": 4, "mul_stages": 1, "add_stages": 2},
    {"rows": 3, "mul_stages": 0, "add_stages": 0},
    {"rows": 5, "mul_stages": 2, "add_stages": 3, "formats": ["fp8_e4m3", "fp8_e5m2"]},
    {"rows": 3},
    {"rows": 2, "mul_stages": FP_MUL_MAX_CUTS, "add_stages": FP32_ADD_MAX_STAGES},
], ids=["1pe", "4pe", "3pe-comb", "5pe-deep-fp8", "3pe-default", "2pe-max"])
def test_pe_column(simulator, params):
    runner.run("hdl.pe:PEColumn", params, "sim.tb.pe_column", simulator)


@pytest.mark.parametrize("kwargs, param", [
    ({"mul_stages": -1}, "mul_stages"),
    ({"add_stages": 99}, "add_stages"),
    ({"add_stages": "2"}, "add_stages"),
    ({"formats": ["fp16"]}, "formats"),
    ({"formats": "bf16"}, "formats"),
])
def test_pe_bad_parameters_name_the_parameter(kwargs, param):
    from hdl.pe import PE, PEColumn

    with pytest.raises((TypeError, ValueError), match=param):
        PE(**kwargs)
    with pytest.raises((TypeError, ValueError), match=param):
        PEColumn(rows=2, **kwargs)


@pytest.mark.parametrize("rows, exc", [(0, ValueError), (-3, ValueError), (2.0, TypeError),
                                       (True, TypeError)])
def test_pe_column_bad_rows(rows, exc):
    from hdl.pe import PEColumn

    with pytest.raises(exc, match="rows"):
        PEColumn(rows=rows)
