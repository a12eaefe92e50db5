# amaranth: UnusedElaboratable=no
"""The tensor engine in cocotb, Icarus and Verilator: bit-exact PSUM against golden/tensor."""

import numpy as np
import pytest

from sim import runner
from sim.cli.gemm import engine_params, run_gemm
from sim.host.tensor_engine import EngineConfig, TensorEngineProgram

CONFIGS = {
    "n2": {"n": 2, "psum_banks": 2, "psum_words": 8},
    # n = 4 is engine_params(4), the build of `nclite gemm --array 4` (README's tour) and of
    # test_full_rate_gemm_utilization: one Verilator model for the three.
    "n4": engine_params(4),
    "n3-deep": {"n": 3, "psum_banks": 3, "psum_words": 7, "mul_stages": 2, "add_stages": 3},
    # No pipeline at all: combinational PEs and PSUM adder (the weight rows' shortest path).
    "n2-comb": {"n": 2, "psum_banks": 2, "psum_words": 8, "mul_stages": 0, "add_stages": 0},
    # A sparse engine, every pattern: its dense path and its sparse one.
    "n4-sparse": {"n": 4, "psum_banks": 2, "psum_words": 8,
                  "sparsity": ["2:4", "4:8", "4:12", "4:16"]},
}
SPARSE_CONFIGS = ("n4-sparse",)

#: The testcases of sim/tb/tensor_engine.py, in two simulations per configuration.
TESTCASES = {
    "commands": ("random_commands,back_to_back,hidden_loads,illegal_commands,reset_midway,"
                 "special_products"),
    "gemms": "random_gemms",
}


#: ... and on the sparse engines.
SPARSE_TESTCASES = {"sparse": "sparse_commands,sparse_bad_tags"}


def _cases():
    for config in CONFIGS:
        for label, testcase in (TESTCASES | (SPARSE_TESTCASES if config in SPARSE_CONFIGS
                                             else {})).items():
            yield pytest.param(config, testcase, id=f"{label}-{config}")


@pytest.mark.parametrize("config, testcase", list(_cases()))
def test_tensor_engine(simulator, config, testcase):
    runner.run("hdl.tensor_engine:TensorEngine", CONFIGS[config], "sim.tb.tensor_engine",
               simulator, testcase=testcase, run_tag=f"{config}-{testcase.split(',')[0]}")


@pytest.mark.slow  # make test-full: about 45 s of make test's wall time (elaboration 20 s)
def test_tensor_engine_8x8(simulator):
    """The 8×8 array: fewer commands (9: one per dtype pair) and GEMMs (Icarus runs it at
    ~150 cycles per second).
    GEMMs: 1×1×1, 9×17×3 and 8×8×33 (K > N, M not a multiple of N, F beyond a bank), plus
    random shapes in Verilator."""
    icarus = simulator == "icarus"
    runner.run("hdl.tensor_engine:TensorEngine", engine_params(8), "sim.tb.tensor_engine",
               simulator, testcase="random_commands,random_gemms", run_tag="n8",
               extra_env={"NCLITE_TE_COMMANDS": "9" if icarus else "12",
                          "NCLITE_TE_GEMMS": "0" if icarus else "2"})


def test_full_rate_gemm_cycles(simulator):
    """With streams that never pause, a tiled GEMM takes exactly its ideal cycles (one moving
    column per cycle) plus one pass through the pipeline (the engine's latency: 40 cycles at
    N = 4 with the defaults) plus its first LOAD_STATIONARY (max(k, 2) cycles, the only one not
    hidden), counted from the cycle the engine takes the first command to that of its last PSUM
    write. 20 x 16 x 40 on 4 x 4 with 8 banks of 16 words: 15 blocks of C, so five rounds take
    turns on PSUM's halves and each is drained while the next computes; a drain that waited for
    idle, a round boundary that cost a cycle or a LOAD_STATIONARY not hidden would show.
    (Cycle counts, not wall time: the figure is the hardware's.)"""
    from hdl.tensor_engine import TensorEngine

    latency = TensorEngine(**engine_params(4)).latency
    r = run_gemm(m=20, k=16, f=40, n=4, simulator=simulator, error_vs_float64=False)
    assert r["bit_exact"], r["error"]
    assert r["macs"] == 20 * 16 * 40
    assert r["ideal_cycles"] == 5 * 4 * 40
    assert r["compute_cycles"] == r["ideal_cycles"] + latency + 4, (latency, r)


@pytest.mark.parametrize("sparsity", ["2:4", "4:16"])
def test_full_rate_sparse_gemm_cycles(simulator, sparsity):
    """A sparse GEMM at full rate takes its ideal cycles (one moving column per cycle, each
    covering R·n rows of K: 4 rows a PE row for 4:16, 2 for 2:4) plus one pass through the
    pipeline plus its first LOAD_STATIONARY (n compressed rows), as a dense one: the sparse
    loads are hidden too. 12 x 40 x 20 on 4 x 4 (K not a multiple of R·n, M past n)."""
    from golden.sparse import pattern
    from hdl.tensor_engine import TensorEngine

    params = engine_params(4, sparse=True)
    latency = TensorEngine(**params).latency
    r = run_gemm(m=12, k=40, f=20, n=4, simulator=simulator, sparsity=sparsity)
    assert r["bit_exact"], r["error"]
    assert r["macs"] == 12 * 40 * 20 and r["max_error_over_bound"] <= 1
    assert r["ideal_cycles"] == 3 * -(-40 // (4 * pattern(sparsity).ratio)) * 20
    assert r["compute_cycles"] == r["ideal_cycles"] + latency + 4, (latency, r)


def test_played_gemm_takes_the_cycles_of_a_driven_one(simulator):
    """A full-rate GEMM whose input streams are played from batches
    (``hdl.sim_batch.PlayedStreams``, how ``nclite gemm`` runs) takes the cycles the same GEMM
    takes with every beat driven from Python, and is bit-exact both ways."""
    runs = [run_gemm(m=8, k=12, f=24, n=4, simulator=simulator, error_vs_float64=False,
                     played=played) for played in (False, True)]
    for r in runs:
        assert r["bit_exact"], r["error"]
    keys = ("cycles", "compute_cycles", "drain_cycles")
    assert [runs[0][k] for k in keys] == [runs[1][k] for k in keys]


def test_played_gemm_needs_full_rate():
    with pytest.raises(ValueError, match="gaps must be 0"):
        run_gemm(m=1, k=1, f=1, n=2, gaps=0.2, played=True)


def test_elaborates_at_16():
    """The 16x16 array elaborates: its own logic around 256 PE instances, and each kind of
    submodule among them once (the copies are identical: elaborating all of them took 11 s)."""
    from amaranth.hdl import Fragment

    from hdl.instances import sharing
    from hdl.tensor_engine import TensorEngine
    from sim.runner import _resolve

    with sharing() as modules:
        Fragment.get(TensorEngine(n=16), None)
    assert any(factory == "hdl.pe:PE" for factory, _ in modules.values()), modules
    for factory, params in modules.values():
        Fragment.get(_resolve(factory)(**params), None)


@pytest.mark.parametrize("kwargs, param", [
    ({"n": 0}, "n"), ({"n": 200}, "n"), ({"n": 4, "psum_banks": 0}, "psum_banks"),
    ({"n": 4, "psum_words": 0}, "psum_words"), ({"n": 4, "formats": ["fp16"]}, "formats"),
    ({"n": 4, "add_stages": 9}, "add_stages"), ({"n": 4, "sparsity": ["3:4"]}, "sparsity"),
])
def test_bad_parameters_fail_at_elaboration(kwargs, param):
    from hdl.tensor_engine import TensorEngine

    with pytest.raises(ValueError, match=param):
        TensorEngine(**kwargs)


def test_sparsity_must_be_a_collection():
    from hdl.tensor_engine import TensorEngine

    with pytest.raises(TypeError, match="sparsity must be a collection of pattern names"):
        TensorEngine(n=4, sparsity="4:16")


def test_driver_rejects_bad_commands():
    cfg = EngineConfig(n=4, psum_banks=2, psum_words=8, formats=("bf16", "fp8_e4m3"))
    prog = TensorEngineProgram(cfg)
    with pytest.raises(ValueError, match="multiply_moving needs a load_stationary"):
        prog.multiply_moving(np.zeros((2, 2), np.uint16), "bf16", bank=0, addr=0,
                             accumulate=False)
    with pytest.raises(ValueError, match="stationary tile"):
        prog.load_stationary(np.zeros((5, 2), np.uint16), "bf16")  # K > n
    with pytest.raises(ValueError, match="fmt"):
        prog.load_stationary(np.zeros((2, 2), np.uint8), "fp8_e5m2")  # not built
    prog.load_stationary(np.zeros((2, 3), np.uint16), "bf16")
    with pytest.raises(ValueError, match="does not fit"):
        prog.multiply_moving(np.zeros((2, 5), np.uint16), "bf16", bank=0, addr=4,
                             accumulate=False)
    with pytest.raises(ValueError, match="bank"):
        prog.multiply_moving(np.zeros((2, 1), np.uint16), "bf16", bank=2, addr=0,
                             accumulate=False)
    with pytest.raises(ValueError, match="K = 3"):
        prog.multiply_moving(np.zeros((3, 1), np.uint16), "bf16", bank=0, addr=0,
                             accumulate=False)


def test_gemm_rejects_bad_shapes():
    with pytest.raises(ValueError, match="m must be"):
        run_gemm(m=0, k=1, f=1, n=2)
    with pytest.raises(ValueError, match="a_fmt"):
        run_gemm(m=1, k=1, f=1, n=2, a_fmt="fp16")


def test_command_encoder_is_amaranths(seed):
    """``sim.host.tensor_engine`` encodes commands and drain requests without Amaranth's
    ``const`` (for speed): the same integers as ``Const.cast(layout.const(...))``, every field
    at its limits and at random."""
    from amaranth.hdl import Const

    from hdl.tensor_engine import command_layout, drain_request_layout
    from sim.host.tensor_engine import struct_encoder

    rng = np.random.default_rng(seed)
    for layout in (command_layout(8, 8, 32), drain_request_layout(8, 32)):
        encode = struct_encoder(layout)
        for _ in range(200):
            values = {}
            for name, f in layout:
                members = list(f.shape) if isinstance(f.shape, type) else None
                if members:
                    values[name] = members[int(rng.integers(len(members)))]
                else:
                    top = (1 << f.width) - 1
                    values[name] = int(rng.choice([0, top, int(rng.integers(top + 1))]))
            want = Const.cast(layout.const(values)).value
            assert encode(values) == want, (values, seed)
