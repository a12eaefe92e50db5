"""``make bench``'s sparsity section: dense-equivalent MACs per cycle of dense and n:m-sparse
GEMMs (2:4, 4:8, 4:12, 4:16) at N = 4 and 8, on the tensor engine alone (``nclite gemm
--sparsity``, Verilator, full rate) and on a whole NeuronCore (the library's GEMM program,
DMA and drain included, every memory checked against the ISS); and the area of a
sparse-capable tensor engine against a dense one (Yosys generic cells; ECP5 LUT4s, FFs and
DSPs after ``synth_ecp5``, no place and route).

A GEMM's dense-equivalent MACs are its M·K·F (a sparse A counts as the dense matrix it stands
for); per cycle over the compute cycles (the engine) or the core's busy cycles. A's pruning is
by magnitude (``golden.sparse.magnitude_mask``).

:func:`bench_sparsity` measures; :func:`render_sparsity` writes the markdown section;
:func:`sparsity_failures` lists what failed; :func:`readme_rows` the README's table rows.
"""

from __future__ import annotations

__all__ = ["MODES", "SPARSE_SIZES", "te_shape", "core_shape", "AREA_PARAMS", "TARGETS",
           "bench_sparsity", "render_sparsity", "sparsity_failures", "readme_rows"]

#: Dense first: the others' speedups are over it.
MODES = ("dense", "2:4", "4:8", "4:12", "4:16")
SPARSE_SIZES = (4, 8)
#: The issue's targets on the tensor engine (speedup over dense) and on area (LUTs ratio).
TARGETS = {"4:16": 3.5, "2:4": 1.8, "luts_ratio": 1.5}
#: The engines whose area is compared (ECP5 and generic cells), at N = 4 with the default PSUM.
AREA_PARAMS = (("dense", {"n": 4}),
               ("sparse 2:4 only", {"n": 4, "sparsity": ["2:4"]}),
               ("sparse, every pattern", {"n": 4, "sparsity": ["2:4", "4:8", "4:12", "4:16"]}))


def te_shape(n: int) -> tuple[int, int, int]:
    """(M, K, F) of the tensor-engine runs: two M tiles, K = 16N (whole groups and k-tiles of
    every pattern), F = 16N (the loads hidden behind long multiplications)."""
    return 2 * n, 16 * n, 16 * n


def core_shape(n: int) -> tuple[int, int, int]:
    """(M, K, F) of the core runs: the roofline section's largest square GEMM (128³ at N = 4,
    256³ at N = 8), where the dense program is compute-bound (90 % of the array)."""
    return 32 * n, 32 * n, 32 * n


def core_params(n: int) -> dict:
    """The core of the runs: the roofline section's build at this N with the sparse mode."""
    from sim.tools.bench import ROOFLINE

    return {**next(p for p, _ in ROOFLINE if p["n"] == n), "sparse": True}


def _te_runs(quick: bool, progress) -> list[dict]:
    from sim.cli.gemm import run_gemm

    rows = []
    for n in SPARSE_SIZES[:1] if quick else SPARSE_SIZES:
        m, k, f = te_shape(n)
        dense = None
        for mode in MODES:
            sp = None if mode == "dense" else mode
            if progress:
                progress(f"sparsity: tensor engine N={n}, {mode} {m}x{k}x{f} ...")
            try:
                r = run_gemm(m=m, k=k, f=f, n=n, simulator="verilator", sparsity=sp,
                             sparse_engine=True, error_vs_float64=False)
                row = {"n": n, "mode": mode, "m": m, "k": k, "f": f,
                       "bit_exact": r["bit_exact"], "compute_cycles": r["compute_cycles"],
                       "ideal_cycles": r["ideal_cycles"], "macs": r["macs"],
                       "macs_per_cycle": r["macs_per_cycle"]}
            except Exception as exc:  # noqa: BLE001 - recorded; the others still run
                row = {"n": n, "mode": mode, "error": f"{type(exc).__name__}: {exc}"}
            if mode == "dense" and "error" not in row:
                dense = row
            if dense and "error" not in row:
                row["speedup"] = row["macs_per_cycle"] / dense["macs_per_cycle"]
            rows.append(row)
    return rows


def _core_runs(quick: bool, progress) -> list[dict]:
    from golden.isa import Dtype
    from sim.cli.demo import run_gemm_bench

    rows = []
    for n in SPARSE_SIZES[:1] if quick else SPARSE_SIZES:
        m, k, f = core_shape(n)
        if progress:
            progress(f"sparsity: NeuronCore N={n}, {m}x{k}x{f} dense and sparse ...")
        try:
            r = run_gemm_bench([(m, k, f, int(Dtype.BF16), None if mode == "dense" else mode)
                                for mode in MODES], simulator="verilator",
                               params=core_params(n))
        except Exception as exc:  # noqa: BLE001 - recorded
            rows.append({"n": n, "error": f"{type(exc).__name__}: {exc}"})
            continue
        dense = r["rows"][0]["macs"] / r["rows"][0]["cycles"]
        for mode, row in zip(MODES, r["rows"], strict=True):
            mpc = row["macs"] / row["cycles"]
            rows.append({"n": n, "mode": mode, "m": m, "k": k, "f": f,
                         "bit_exact": r["bit_exact"], "cycles": row["cycles"],
                         "macs": row["macs"], "macs_per_cycle": mpc, "speedup": mpc / dense,
                         "tensor_share": row["tensor_share"], "dram_bytes": row["dram_bytes"],
                         "perf": row["perf"]})
    return rows


def _area(progress) -> list[dict]:
    from synth.fpga import fpga_synth
    from synth.yosys import generic_cells

    rows = []
    for label, params in AREA_PARAMS:
        if progress:
            progress(f"sparsity: area of the tensor engine, {label} ...")
        try:
            ecp5 = fpga_synth("hdl.tensor_engine:TensorEngine", params, timing=False)["area"]
            gen = generic_cells("hdl.tensor_engine:TensorEngine", params)
            rows.append({"engine": label, "params": params, "cells": gen["cells"],
                         "by_class": gen["by_class"],
                         **{key: ecp5[key] for key in ("luts", "ffs", "dsps", "brams")}})
        except Exception as exc:  # noqa: BLE001 - recorded
            rows.append({"engine": label, "params": params,
                         "error": f"{type(exc).__name__}: {exc}"})
    base = rows[0]
    for row in rows:
        if "error" not in row and "error" not in base:
            row["luts_ratio"] = row["luts"] / base["luts"]
            row["cells_ratio"] = row["cells"] / base["cells"]
    return rows


def bench_sparsity(quick: bool = False, progress=None) -> dict:
    """The three parts (quick: N = 4 only, and no area)."""
    return {"targets": TARGETS, "tensor_engine": _te_runs(quick, progress),
            "core": _core_runs(quick, progress), "area": [] if quick else _area(progress)}


def _x(v) -> str:
    return "–" if v is None else f"{v:.2f}x"


def render_sparsity(section: dict | None) -> list[str]:
    if not section:
        return []
    if "error" in section:
        return ["## Structured sparsity", "", f"FAILED: {section['error']}", ""]
    lines = ["## Structured sparsity", "",
             "Dense-equivalent MACs (M·K·F of the dense GEMM) per cycle; A n:m-sparse along K "
             "by magnitude, compressed; every run bit-exact with the golden model. Tensor "
             "engine alone: compute cycles at full rate (`nclite gemm --sparsity`), all modes "
             "on the sparse-capable engine. Whole core: the library's GEMM program, cycles "
             "from the core's busy counter.", "",
             "| where | N | M x K x F | mode | cycles | MACs/cycle | vs dense | bit-exact |",
             "|---|---|---|---|---|---|---|---|"]
    for where, key, cyc in (("tensor engine", "tensor_engine", "compute_cycles"),
                            ("NeuronCore", "core", "cycles")):
        for r in section.get(key, []):
            if "error" in r:
                lines.append(f"| {where} | {r['n']} | | {r.get('mode', '')} | FAILED: "
                             f"{r['error'].splitlines()[0]} | | | |")
                continue
            lines.append(f"| {where} | {r['n']} | {r['m']}x{r['k']}x{r['f']} | {r['mode']} | "
                         f"{r[cyc]} | {r['macs_per_cycle']:.1f} | {_x(r.get('speedup'))} | "
                         f"{'yes' if r['bit_exact'] else 'NO'} |")
    t = section.get("targets", TARGETS)
    lines += ["", f"Targets on the tensor engine: 4:16 >= {t['4:16']}x and 2:4 >= {t['2:4']}x "
                  f"the dense MACs per cycle.", ""]
    if section.get("area"):
        lines += ["Area of the tensor engine, N = 4, PSUM 8 x 16 (Yosys generic cells; ECP5 "
                  "after `synth_ecp5`, before place and route): target LUTs <= "
                  f"{t['luts_ratio']}x the dense engine's.", "",
                  "| engine | generic cells | ECP5 LUTs | FFs | DSPs | LUTs vs dense |",
                  "|---|---|---|---|---|---|"]
        for a in section["area"]:
            if "error" in a:
                lines.append(f"| {a['engine']} | FAILED: {a['error'].splitlines()[0]} "
                             "| | | | |")
                continue
            lines.append(f"| {a['engine']} | {a['cells']} | {a['luts']} | {a['ffs']} | "
                         f"{a['dsps']} | {_x(a.get('luts_ratio'))} |")
        lines.append("")
    return lines


def sparsity_failures(section: dict | None) -> list[str]:
    if not section:
        return []
    if "error" in section:
        return [f"sparsity: {section['error']}"]
    bad = []
    for key in ("tensor_engine", "core"):
        for r in section.get(key, []):
            if "error" in r or not r.get("bit_exact"):
                bad.append(f"sparsity {key} N={r['n']} {r.get('mode')}: "
                           f"{r.get('error') or 'not bit-exact'}")
    bad += [f"sparsity area {a['engine']}: {a['error']}" for a in section.get("area", [])
            if "error" in a]
    return bad


def readme_rows(section: dict | None) -> list[tuple[str, str, str]]:
    """The README's rows: dense-equivalent MACs per cycle and the speedups, per place and N;
    the LUTs of the sparse-capable engines against the dense one."""
    if not section or "error" in section:
        return []
    rows = []
    for key, where in (("tensor_engine", "tensor engine"), ("core", "whole core")):
        for n in SPARSE_SIZES:
            got = {r["mode"]: r for r in section.get(key, [])
                   if r.get("n") == n and "error" not in r}
            if len(got) != len(MODES):
                continue
            d = got["dense"]
            rows.append((f"sparse GEMM, {where} {n}×{n}, {d['m']}×{d['k']}×{d['f']}",
                         "vs dense: " + ", ".join(f"{m} {got[m]['speedup']:.2f}×"
                                                  for m in MODES[1:]),
                         f"dense-equivalent MACs/cycle ({d['macs_per_cycle']:.1f} dense); A "
                         "pruned by magnitude, compressed; bit-exact"))
    area = {a["engine"]: a for a in section.get("area", []) if "error" not in a}
    if len(area) == len(AREA_PARAMS):
        d, s24, s = (area[label] for label, _ in AREA_PARAMS)
        rows.append(("sparse-capable tensor engine N = 4",
                     f"{s['luts_ratio']:.2f}× the dense LUTs (2:4 only: "
                     f"{s24['luts_ratio']:.2f}×)",
                     f"ECP5 after synth_ecp5: {_int(d['luts'])} → {_int(s['luts'])} LUTs, "
                     f"{d['dsps']} → {s['dsps']} DSPs"))
    return rows


def _int(n: int) -> str:
    return f"{n:,}".replace(",", " ")
