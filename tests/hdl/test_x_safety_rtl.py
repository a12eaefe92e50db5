"""X-safety (issue 25, point 4): reset held from time zero defines every output and register.

Each top-level of the lint list (`sim.verify.lint.TOPS`, the same parameters), in Icarus: a
4-state simulator is the subject (Verilator has no X: its models are 2-state), with reset held
from time zero, every input at 0, four cycles of reset and sixteen idle cycles after it
(`sim/tb/x_safety.py` walks every signal and memory word). Twice: as Amaranth emits the Verilog
(registers with initial values), and without the registers' initial values (only the reset
defines a register, as on a flow that ignores them).

Every design passes. What it took: memory read ports also read while reset is held
(`hdl.read_port.read_enable`: their data registers have neither reset nor initial value in the
emitted Verilog), and no `Switch` shares a signal with plain assignments (Yosys wrote the
other bits as `always @*` blocks Icarus never ran: the lint checks for them now).
"""

import json
import re
from pathlib import Path

import pytest

from sim import runner
from sim.tools.bench import top_inputs
from sim.verify.lint import TOPS

#: Longer in Icarus than make test's budget has room for: make test-full.
LONG = {"ring_with_dram", "collective_torus", "sparse_core_with_dram", "board_top"}
#: About 5-10 s a run: make test runs one variant (the one that found a problem), make test-full
#: both.
ONE_VARIANT = {"neuron_core": False, "sparse_tensor_engine": True, "core_with_dram": True}


def _cases():
    for name in TOPS:
        for initialisers in (True, False):
            slow = name in LONG or ONE_VARIANT.get(name, initialisers) != initialisers
            yield pytest.param(name, initialisers, marks=[pytest.mark.slow] if slow else [],
                               id=f"{name}-{'init' if initialisers else 'noinit'}")


@pytest.mark.parametrize("name, initialisers", list(_cases()))
def test_reset_defines_everything(name, initialisers):
    factory, params = TOPS[name]
    verilog = runner.elaborate(factory, params)
    runner.run(factory, params, "sim.tb.x_safety", "icarus", initialisers=initialisers,
               extra_env={"NCLITE_X_INPUTS": json.dumps(top_inputs(verilog))},
               run_tag=f"x-{name}-{initialisers}")


def test_a_register_no_reset_reaches_is_found():
    """The check can fail: without initial values and released before any clock edge, the
    tensor engine's registers are X, and the test names them."""
    factory, params = TOPS["tensor_engine"]
    verilog = runner.elaborate(factory, params)
    with pytest.raises(runner.SimulationFailed) as failed:
        runner.run(factory, params, "sim.tb.x_safety", "icarus", initialisers=False,
                   extra_env={"NCLITE_X_INPUTS": json.dumps(top_inputs(verilog)),
                              "NCLITE_X_RESET_CYCLES": "0"},
                   run_tag="x-no-reset", quiet=True)
    log = Path(re.search(r"log: (\S+)", str(failed.value))[1]).read_text()
    assert "undefined when reset is released" in log and "tensor_engine.busy" in log, log[-2000:]
