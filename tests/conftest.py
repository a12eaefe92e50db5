"""pytest wiring shared by every test: the simulator parametrisation and the seed."""

import os
import re
import sys
from pathlib import Path

import pytest

# The suite's Verilator models compile with g++ -O0 unless told otherwise: its runs are short
# (75 s of Verilator simulation in all, against some 450 CPU s of builds at -O1), and -O0 builds
# in less than half the time for about 20 % slower runs (measured on the ring of cores: 96 ->
# 52 s build, the core's error test 7.7 -> 8.6 s run). `nclite demo` and `make bench` keep
# sim/toolchain.py's -O1. Set before sim.runner activates the toolchain.
os.environ.setdefault("NCLITE_VERILATOR_OPT", "-O0")

from sim.runner import SIMULATORS  # noqa: E402


def pytest_generate_tests(metafunc):
    # Every test that takes a `simulator` argument runs once per simulator: Icarus and Verilator.
    if "simulator" in metafunc.fixturenames:
        metafunc.parametrize("simulator", SIMULATORS)


@pytest.fixture
def seed() -> int:
    """The random seed of this run (NCLITE_SEED, default 1); failure messages include it."""
    return int(os.environ.get("NCLITE_SEED", "1"))


# make test's budget: 15 minutes of wall time on the 2-core CI machine (README, "Icarus or
# Verilator"). The tests below run in `make test-full` only (marked slow here, with the reason
# each can go; the older long regressions carry their own @pytest.mark.slow); the same subject
# stays in make test through a smaller or a sibling test, named after the arrow. Patterns are
# pytest node ids, '*' standing for any text. Chosen from the durations of a fresh clone's make
# test on 2026-11-27/28 (a 2-core machine on which the whole suite took 35 minutes).
FULL_ONLY: dict[str, str] = {
    # Efficiency and cycle-count runs: long by design, and `make bench` measures them.
    "tests/hdl/test_ring_rtl.py::test_*_efficiency[*]": "bench; -> test_ring's collectives",
    "tests/hdl/test_torus_rtl.py::test_torus_efficiency[*]": "bench; -> test_torus",
    "tests/hdl/test_tensor_engine_rtl.py::test_full_rate_*": "bench; -> test_tensor_engine",
    "tests/hdl/test_tensor_engine_rtl.py::test_played_gemm_takes_the_cycles_of_a_driven_one"
    "[verilator]": "-> its Icarus run (its builds cost a minute, Icarus' a second)",
    "tests/hdl/test_sru_rtl.py::test_sru_throughput[*]": "bench; -> test_sru",
    # Whole systems whose parts and a smaller whole stay in make test.
    "tests/hdl/test_multicore_rtl.py::test_core_torus[*]":
        "-> the torus of engines (test_torus), the core's programs",
    "tests/hdl/test_multicore_rtl.py::test_core_ring[*]":
        "-> the ring of engines (test_ring), the core's programs (a 77 s build)",
    "tests/kernels/test_kernel_rtl.py::test_kernel_on_rtl[*-sim/kernels/moe.py]":
        "-> the MoE kernel on the ISS, all-to-all in test_ring",
    "tests/kernels/test_kernel_fuzz.py::test_random_collectives_on_rtl[*]":
        "-> test_random_collectives_mean_what_they_say, test_ring",
    "tests/kernels/test_training.py::test_training_steps_on_rtl[*]":
        "-> the training steps on the ISS, test_sru, test_kernel_on_rtl",
    "tests/kernels/test_kernel_rtl.py::test_kernel_on_rtl[*-docs/kernels/data_parallel_matmul.py]":
        "-> matmul.py on one core's RTL, the ring of engines",
    "tests/cli/test_demo.py::test_demo_is_bit_exact_and_counts_cycles[*]": "-> test_core_demo_cli",
    "tests/cli/test_demo.py::test_core_demo_cli[icarus-*]": "-> the Verilator run",
    # The largest configurations of a component; the others stay.
    "tests/hdl/test_ring_rtl.py::test_ring[*-p4-w1]": "-> p3-w2",
    "tests/hdl/test_ring_rtl.py::test_ring[*-p2-w4]": "-> p3-w2",
    "tests/hdl/test_core_rtl.py::test_core_program[*-random_commands]": "-> the named programs",
    "tests/hdl/test_core_rtl.py::test_core_program[icarus-*]":
        "-> the Verilator runs; Icarus runs the core in test_board, test_kernel_on_rtl",
    "tests/hdl/test_core_rtl.py::test_sparse_core_program[*]":
        "-> test_tensor_engine[*-n4-sparse]",
    "tests/hdl/test_sru_rtl.py::test_sru[*-l4]": "-> l3, l2-fp8",
    "tests/hdl/test_sru_rtl.py::test_sru[*-l3-s3-r32]": "-> l3-s0-r1, l2-fp8",
    "tests/hdl/test_tensor_engine_rtl.py::test_tensor_engine[*-commands-n4]": "-> n4-sparse",
    "tests/hdl/test_tensor_engine_rtl.py::test_tensor_engine[icarus-commands-n4-sparse]":
        "-> icarus n3, verilator n4-sparse",
    "tests/hdl/test_activation_rtl.py::test_activation[*-l3-comb]": "-> l2-deep-fp8",
    "tests/hdl/test_activation_rtl.py::test_activation[*-l4]": "-> l2-deep-fp8",
    "tests/hdl/test_board_rtl.py::test_board[*-bridge_errors_on_the_board]":
        "-> test_uart_bridge's errors",
    "tests/hdl/test_uart_bridge_rtl.py::test_uart_bridge*": "-> test_board[*-gemm_over_uart]",
    "tests/hdl/test_dma_rtl.py::test_dma[*-d256]": "-> n3-w40-b4-d64 (a wide bus)",
    "tests/hdl/test_pe_rtl.py::test_pe_column[*-2pe-max]": "-> 4pe, 5pe-deep-fp8 (deeper)",
    "tests/hdl/test_pe_rtl.py::test_pe_column[*-3pe-default]": "-> 1pe (default), 3pe-comb",
    "tests/hdl/test_tensor_engine_rtl.py::test_tensor_engine[verilator-gemms-n4]":
        "-> n4-sparse, n2, n3-deep",
    "tests/hdl/test_tensor_engine_rtl.py::test_tensor_engine[*-commands-n2-comb]":
        "-> *-gemms-n2-comb, *-commands-n2",
    "tests/hdl/test_axi_mem_rtl.py::test_axi_memory_wide[*-256]": "-> *-64, test_axi_memory",
    "tests/kernels/test_kernel_board.py::test_kernel_over_the_boards_uart[*]":
        "-> test_board[*-gemm_over_uart]",
    # Icarus's run where the Verilator run of the same test stays (Icarus is the slower).
    "tests/hdl/test_torus_rtl.py::test_torus[icarus-*]": "-> verilator",
    "tests/hdl/test_tensor_engine_rtl.py::test_tensor_engine[icarus-commands-n3-deep]":
        "-> icarus-commands-n2",
    "tests/hdl/test_tensor_engine_rtl.py::test_tensor_engine[icarus-gemms-n4*]":
        "-> icarus's n2 and n3 gemms, verilator's n4-sparse",
    "tests/hdl/test_arith_rtl.py::test_fp_multiplier[icarus-comb-all]": "-> icarus-stages2-all",
    "tests/hdl/test_arith_rtl.py::test_fp_multiplier[*-fp8-only]": "-> *-all, the exhaustive fp8",
    "tests/synth/test_gate_level.py::test_gate_level_units[*-fp32-multiplier-dsp]":
        "-> the MULT18X18D model's test; axi-memory-bram on a netlist",
    "tests/hdl/test_x_safety_rtl.py::test_reset_defines_everything[neuron_core-noinit]":
        "-> core_with_dram-init (a core), the smaller tops both ways",
    # Proofs, lint and tools: the longest of each kind.
    "tests/verify/test_lint.py::test_lint_clean[collective_torus]": "-> collective_ring",
    "tests/synth/test_synth.py::test_smoke_ice40_flow": "-> test_bench's SRU area (Yosys)",
    "tests/verify/test_formal.py::test_property[sequencer_liveness_small]":
        "-> the sequencer's stream property",
    "tests/verify/test_formal.py::test_property[fifo_link]": "-> the other FIFO properties",
    "tests/verify/test_formal.py::test_property[stream_dma]": "-> the other stream properties",
    "tests/verify/test_formal.py::test_property[*_cmdqueue]": "-> the other FIFO properties",
    "tests/verify/test_formal.py::test_property[stream_activation]": "-> the other streams'",
    "tests/verify/test_formal.py::test_property[stream_tensor_engine]": "-> the other streams'",
    "tests/verify/test_formal.py::test_property[fifo_collective]": "-> the other FIFOs'",
    "tests/test_runner.py::test_verilator_inlines_above_o0": "-> make bench's -O1 builds",
    "tests/verify/test_lint.py::test_lint_clean[ring_with_dram]": "-> ring, core_with_dram",
    "tests/verify/test_lint.py::test_lint_clean[sparse_core_with_dram]": "-> core_with_dram",
    "tests/tools/test_labs.py::test_reference_passes_in_a_copy_through_make":
        "-> test_stub_fails_in_scratch_copy, make labN-check",
    "tests/tools/test_labs.py::test_each_stub_alone_fails[*]": "-> test_stub_fails_in_scratch_copy",
}
FULL_ONLY.update({f"tests/hdl/test_fp32_add_pysim.py::test_matches_numpy[{stages}]":
                  "-> stages 0, 7 and the RTL's" for stages in range(1, 7)})
# Amaranth's simulator at every stage count of the multipliers: the smallest, one register and
# the most stay, and lab 1's check (mixed bf16 x fp8 at the PE's 5 stages); the RTL runs of the
# same multipliers in both simulators stay too (tests/hdl/test_arith_rtl.py). (Added
# 2026-11-28 for the 15 minutes: a fresh clone's make test took 15:48 here.)
FULL_ONLY.update({f"tests/hdl/test_fp_mul_pysim.py::test_{name}[{stages}]":
                  "-> stages 0 or 1, 5 (mixed) and 6" for name, counts in (
                      ("fp8_random_pipelined", (2, 3, 4, 5)), ("bf16_random", (1, 2, 3, 4, 5)),
                      ("bf16_fp8_mixed_random", (1, 2, 3, 4))) for stages in counts})
FULL_ONLY.update({f"tests/hdl/test_fp32_mul_pysim.py::test_matches_golden[{stages}-False]":
                  "-> stages 0, 3 and the RTL's" for stages in (1, 2)})
FULL_ONLY["tests/hdl/test_fp32_mul_pysim.py::test_matches_golden[0-True]"] = (
    "-> the most stages with the operand register, and the RTL's")
_FULL_ONLY = {pattern: re.compile(re.escape(pattern).replace(r"\*", ".*")) for pattern in FULL_ONLY}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark FULL_ONLY's tests slow (before `-m` deselects); a pattern that names no test fails
    a whole-suite collection (the table cannot rot)."""
    used = set()
    for item in items:
        for pattern, rx in _FULL_ONLY.items():
            if rx.fullmatch(item.nodeid):
                item.add_marker(pytest.mark.slow)
                used.add(pattern)
    root = config.rootpath
    if all(Path(arg).resolve() in (root, root / "tests") for arg in config.args):
        unused = [p for p in FULL_ONLY if p not in used]
        if unused:
            raise pytest.UsageError(f"tests/conftest.py FULL_ONLY names no test: {unused}")


# --- WAVES=1: the dumps a run wrote, listed at the end (pytest -q hides a passing test's
# stderr, where sim.runner.run names each dump) ---------------------------------------------

_WAVE_LINE = "nclite: waveform written to "


def pytest_runtest_logreport(report):
    if report.when != "call":
        return
    for _, text in report.sections:
        for line in text.splitlines():
            if line.startswith(_WAVE_LINE):
                _DUMPS[line[len(_WAVE_LINE):].strip()] = report.nodeid  # the latest run


_DUMPS: dict[str, str] = {}


def pytest_terminal_summary(terminalreporter):
    if _DUMPS:
        terminalreporter.section("waveforms (WAVES=1)")
        for dump, nodeid in _DUMPS.items():
            terminalreporter.write_line(f"{dump}  ({nodeid})")


# --- A lab's stub reached (in a scratch copy whose exercise is not written yet): one line, not
# a traceback and a "created but never used" warning per half-built component ---------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.excinfo is None or call.excinfo.errisinstance(pytest.skip.Exception):
        return
    from sim.tools.lab_stub import silence_unused_elaboratables, stub_message

    # The components the failed elaboration left behind are collected after this report.
    silence_unused_elaboratables()
    line = stub_message(call.excinfo.value)
    if line is not None:
        outcome.get_result().longrepr = line
        _STUB_REACHED.append(item.nodeid)  # silent from here on: every elaboration fails


_STUB_REACHED: list[str] = []


def pytest_runtest_setup(item):
    import gc

    from amaranth._unused import MustUse

    from sim.tools.lab_stub import silence_unused_elaboratables

    if MustUse._MustUse__silence and not _STUB_REACHED:
        # The previous failure's leftovers, still silenced; pytest keeps its exception (and
        # with it their frames) in sys.last_* until the next failure: drop those first.
        for name in ("last_type", "last_value", "last_traceback", "last_exc"):
            if hasattr(sys, name):
                delattr(sys, name)
        gc.collect()
        silence_unused_elaboratables(False)
