"""``make lint``'s RTL part: ``verilator --lint-only -Wall`` on the Verilog of every top-level.

Each design of :data:`TOPS` is elaborated to Verilog (the runner's cache, with the parameters
the tests use, so the elaboration is shared) and linted with every Verilator warning on. Only
two reviewed waiver files apply: ``sim/verilator_waivers.vlt`` (the simulation build's) and
``sim/verify/verilator_lint.vlt`` (what ``-Wall`` adds for generated code); every other warning
is an error. The Verilog must also have no combinational block that a 4-state simulator would
leave unrun (:func:`untriggered_blocks`). ``python -m sim.verify.lint`` lints them all;
``tests/verify/test_lint.py`` runs one test per design.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from sim import runner, toolchain

__all__ = ["TOPS", "LINT_WAIVERS", "lint", "untriggered_blocks"]

LINT_WAIVERS = Path(__file__).resolve().parent / "verilator_lint.vlt"

#: name -> (factory, parameters): every top-level the project simulates or builds.
TOPS: dict[str, tuple[str, dict]] = {
    "neuron_core": ("hdl.core:NeuronCore", {"n": 4, "sbuf_words": 64, "psum_banks": 4,
                                             "psum_words": 16, "queue_depth": 64}),
    # The ring of NeuronCores (hdl.multicore.CoreRing) and the single core, each with RTL DRAM
    # and the AXI stall injector, as the whole-core simulations run them (hdl.sim_top).
    # (Two small cores: the same modules as the demo's four, each core's link to the next.)
    "ring_with_dram": ("hdl.sim_top:RingWithDram", {"ranks": 2, "n": 2, "sbuf_words": 16,
                                                    "psum_banks": 2, "psum_words": 4,
                                                    "link_width": 2, "queue_depth": 8,
                                                    "te_mul_stages": 1, "te_add_stages": 1,
                                                    "dram_bytes": 4096}),
    "core_with_dram": ("hdl.sim_top:CoreWithDram", {"n": 2, "sbuf_words": 64, "psum_banks": 2,
                                                    "psum_words": 8, "dram_bytes": 4096,
                                                    "queue_depth": 16}),
    "board_top": ("hdl.board:BoardTop", {"divisor": 4, "n": 2, "sbuf_words": 64,
                                         "psum_banks": 2, "psum_words": 8, "dram_bytes": 4096,
                                         "queue_depth": 16}),
    "tensor_engine": ("hdl.tensor_engine:TensorEngine", {"n": 2, "psum_banks": 2,
                                                         "psum_words": 8}),
    # The sparse mode: the tensor engine with every pattern, and a core built with it.
    "sparse_tensor_engine": ("hdl.tensor_engine:TensorEngine",
                             {"n": 4, "psum_banks": 2, "psum_words": 8,
                              "sparsity": ["2:4", "4:8", "4:12", "4:16"]}),
    "sparse_core_with_dram": ("hdl.sim_top:CoreWithDram",
                              {"n": 4, "sbuf_words": 64, "psum_banks": 2, "psum_words": 8,
                               "dram_bytes": 4096, "queue_depth": 16, "sparse": True}),
    "pe_column": ("hdl.pe:PEColumn", {"rows": 4, "mul_stages": 1, "add_stages": 2}),
    "stochastic_rounder": ("hdl.sru:StochasticRounder", {"lanes": 4}),
    "activation_engine": ("hdl.activation:ActivationEngine", {"lanes": 4}),
    "collective_ring": ("hdl.ring:CollectiveRing", {"ranks": 3, "link_width": 2, "depth": 1024,
                                                    "max_latency": 8, "add_stages": 0}),
    "collective_torus": ("hdl.torus:CollectiveTorus", {"rows": 2, "cols": 3, "link_width": 2,
                                                       "depth": 256, "max_latency": 8}),
    "dma_engine": ("hdl.dma:DmaEngine", {"n": 4, "words": 64}),
    "command_queue": ("hdl.cmdqueue:CommandQueue", {"depth": 4}),
    "uart_bridge": ("hdl.uart_bridge:UartAxiLiteBridge", {"divisor": 4, "timeout": 40}),
    "axi_memory": ("hdl.axi_mem:AxiMemory", {"size_bytes": 2048, "addr_width": 16}),
}


#: A combinational block as Yosys writes it without its time-zero trigger: ``always @*`` and
#: one statement, no ``begin``.
_UNTRIGGERED = re.compile(r"^\s*always @\*\n(?!\s*begin\b)\s+(?P<statement>[^\n]*)", re.M)


def untriggered_blocks(verilog_text: str) -> list[str]:
    """The statements of ``always @*`` blocks that a 4-state simulator may never run.

    Yosys writes the bits of a signal that a ``Switch`` drives in part, and plain assignments
    drive in the rest, as one-statement ``always @*`` blocks without the dummy trigger it gives
    its other blocks: Icarus runs such a block only when an input changes, so one fed by
    registers that keep their initial values leaves its bits X forever (the sparse array's
    rows and the SRU's decoded lanes had them). Give the switch a signal of its own."""
    return [m["statement"] for m in _UNTRIGGERED.finditer(verilog_text)]


def lint(name: str) -> list[str]:
    """Lint one design of :data:`TOPS`; returns Verilator's warnings and any
    :func:`untriggered_blocks` (empty: clean)."""
    factory, params = TOPS[name]
    toolchain.activate()
    verilog = runner.elaborate(factory, params)
    proc = subprocess.run(
        ["verilator", "--lint-only", "-Wall", "--top-module", verilog.stem,
         str(runner.VERILATOR_WAIVERS), str(LINT_WAIVERS), str(verilog)],
        capture_output=True, text=True, timeout=600)
    problems = [line for line in (proc.stdout + proc.stderr).splitlines()
                if line.startswith(("%Warning", "%Error")) and "Exiting due to" not in line]
    if proc.returncode != 0 and not problems:
        problems = [f"verilator exited with status {proc.returncode}: "
                    + (proc.stderr.strip().splitlines() or ["no message"])[-1]]
    problems += [f"%Untriggered: {verilog.name}: `always @*` block a 4-state simulator may "
                 f"never run: {statement} (drive the Switch into a signal of its own)"
                 for statement in untriggered_blocks(verilog.read_text())]
    return problems


def main() -> int:
    bad = 0
    for name in TOPS:
        problems = lint(name)
        print(f"{'ok  ' if not problems else 'FAIL'} {name}: {TOPS[name][0]} {TOPS[name][1]}")
        for line in problems[:20]:
            print(f"     {line}")
        bad += bool(problems)
    print(f"{len(TOPS) - bad} of {len(TOPS)} top-levels lint-clean "
          "(verilator --lint-only -Wall, reviewed waivers)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
