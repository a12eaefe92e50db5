"""``nclite kernel run --on board``'s host code (``sim.host.board.board_program``) on the
board top in simulation, driven only through its UART pins (``sim/tb/board.py``), in Icarus and
Verilator: a traced kernel's outputs bit-exact with the golden ISS. (Over pyserial the same
code runs on a real ULX3S.)"""

from __future__ import annotations

import json

import numpy as np

from sim import runner
from sim.kernels import load_kernel, trace_kernel
from sim.kernels.run import board_outputs, board_params, run_iss
from sim.tb.board import BOARD_SIM


def test_kernel_over_the_boards_uart(simulator, tmp_path):
    module = load_kernel("docs/kernels/linear.py")
    rng = np.random.default_rng(11)
    ins = {"w": rng.standard_normal((3, 3)).astype(module.nl.bfloat16),
           "x": rng.standard_normal((3, 10)).astype(module.nl.bfloat16),
           "b": rng.standard_normal((3, 1)).astype(np.float32)}
    module.inputs = lambda rng: ins
    params = {key: v for key, v in BOARD_SIM.items() if key != "divisor"}
    traced = trace_kernel(module, params=params)
    outputs = board_outputs(traced, run_iss(traced))
    k = traced.kernels[0]
    blob = tmp_path / "kernel.npz"
    np.savez(blob, program0=np.stack(k.program), dram0=k.dram[:k.dram_top],
             **{f"out_{name}": a.view(np.uint8) for name, (_, a) in outputs.items()})
    spec = {name: [addr, int(traced.outputs[0][name].dtype), list(a.shape)]
            for name, (addr, a) in outputs.items()}
    runner.run("hdl.board:BoardTop", BOARD_SIM, "sim.tb.board", simulator,
               testcase="kernel_over_uart", run_tag="kernel_over_uart",
               extra_env={"NCLITE_KERNEL": str(blob), "NCLITE_KERNEL_OUTPUTS": json.dumps(spec)})


def test_board_params_are_the_bitstreams():
    """--on board traces for the bitstream's core; a kernel that asks for another is refused
    (naming the parameter)."""
    import pytest

    from synth.board import BOARDS

    module = load_kernel("docs/kernels/linear.py")
    assert board_params(module, "ulx3s-85f") == BOARDS["ulx3s-85f"]["core"]
    module.CONFIG = {"n": 3}
    with pytest.raises(ValueError, match="n = 3"):
        board_params(module, "ulx3s-85f")
