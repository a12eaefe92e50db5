"""Design-space sweeps: ``nclite synth sweep`` -> synth/sweep.md, sweep.json, sweep.png.

A grid of array size N, PE pipeline stages (multiplier / adder), input formats and FPGA part,
one :func:`synth.fpga.fpga_synth` run for each point (Yosys + nextpnr, the report's fixed seed
and 100 MHz target), on `Dask <https://docs.dask.org>`_: a local cluster of ``workers``
processes by default, or any running Dask scheduler (``scheduler="tcp://host:8786"``) whose
workers have nclite installed, so that a large sweep spreads over many machines. Each worker
caches its results under its own ``build/synth/`` as the report does (keyed by the Verilog, the
tool versions and the flow): a sweep run again on the same machines only re-runs new points.

The result has one row per point: LUTs, DSPs, Fmax, multiply-accumulates per cycle (the
design's MACs: N² for a tensor engine, N for a PE column) and their product, MMAC/s, with the
Pareto-optimal points marked: those no other point dominates (at most their LUTs, at least
their Fmax and MACs per cycle, and better in one of the three).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import uuid
from dataclasses import dataclass
from pathlib import Path

from .fpga import DEVICES, fmax_mhz, result_line
from .report import FORMAT_SETS, REPORT_DIR, SEED, TARGET_MHZ, Job, tool_versions

__all__ = ["DESIGNS", "Grid", "parse_grid", "sweep_jobs", "run_sweep", "pareto", "render_md",
           "plot", "write_sweep"]

SCHEMA = 1


@dataclass(frozen=True)
class Design:
    """A design the sweep can vary: its factory, how N enters its parameters, its MACs."""

    factory: str
    size_param: str | None  # the constructor's parameter N sets (None: N must be 1)
    macs: object  # N -> multiply-accumulates per cycle
    has_formats: bool = True  # False: a PE, whose operands arrive decoded (formats "all" only)


#: The designs a sweep can vary, by name.
DESIGNS = {
    "tensor_engine": Design("hdl.tensor_engine:TensorEngine", "n", lambda n: n * n),
    "pe_column": Design("hdl.pe:PEColumn", "rows", lambda n: n),
    "pe": Design("hdl.pe:PE", None, lambda n: 1, has_formats=False),
}


@dataclass(frozen=True)
class Grid:
    """The axes of a sweep; every combination is a point."""

    design: str = "tensor_engine"
    sizes: tuple[int, ...] = (1, 2)
    stages: tuple[tuple[int, int], ...] = ((5, 6), (2, 3))
    formats: tuple[str, ...] = ("all", "bf16")
    devices: tuple[str, ...] = ("ecp5-85f",)
    timing: bool = True

    @property
    def points(self) -> int:
        return len(self.sizes) * len(self.stages) * len(self.formats) * len(self.devices)


def _items(text: str, param: str) -> list[str]:
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise ValueError(f"{param} must name at least one value, not {text!r}")
    return items


def parse_grid(*, design: str = "tensor_engine", sizes: str = "1,2", stages: str = "5/6,2/3",
               formats: str = "all,bf16", devices: str = "ecp5-85f",
               timing: bool = True) -> Grid:
    """A :class:`Grid` from comma-separated lists (the CLI's options).

    ``stages`` items are ``MUL/ADD`` (the PE's ``mul_stages`` / ``add_stages``). Every value is
    checked here, naming the option (ValueError), before anything is synthesized.
    """
    from hdl.fp32_add import FP32_ADD_MAX_STAGES
    from hdl.fp_mul import FP_MUL_MAX_CUTS

    if design not in DESIGNS:
        raise ValueError(f"design must be one of {', '.join(DESIGNS)}, not {design!r}")
    size_list = []
    for item in _items(sizes, "n"):
        if not item.isdigit() or not 1 <= int(item) <= 128:
            raise ValueError(f"n must be integers from 1 to 128, not {item!r}")
        size_list.append(int(item))
    if DESIGNS[design].size_param is None and size_list != [1]:
        raise ValueError(f"n must be 1 for design {design!r} (one PE), not {sizes!r}")
    stage_list = []
    for item in _items(stages, "stages"):
        mul, _, add = item.partition("/")
        if not (mul.isdigit() and add.isdigit()) or int(mul) > FP_MUL_MAX_CUTS \
                or int(add) > FP32_ADD_MAX_STAGES:
            raise ValueError(f"stages must be MUL/ADD pairs (0-{FP_MUL_MAX_CUTS} / "
                             f"0-{FP32_ADD_MAX_STAGES}), not {item!r}")
        stage_list.append((int(mul), int(add)))
    format_list = _items(formats, "formats")
    for fs in format_list:
        if fs not in FORMAT_SETS:
            raise ValueError(f"formats must be among {', '.join(FORMAT_SETS)}, not {fs!r}")
    if not DESIGNS[design].has_formats and format_list != ["all"]:
        raise ValueError(f"formats must be 'all' for design {design!r} (its operands arrive "
                         f"decoded; the array's edge decoders read the formats), not {formats!r}")
    device_list = _items(devices, "device")
    for dev in device_list:
        if dev not in DEVICES:
            raise ValueError(f"device must be among {', '.join(DEVICES)}, not {dev!r}")

    def unique(seq):
        return tuple(dict.fromkeys(seq))

    return Grid(design, unique(size_list), unique(stage_list), unique(format_list),
                unique(device_list), timing)


def sweep_jobs(grid: Grid) -> list[Job]:
    """One :class:`~synth.report.Job` per point of ``grid``, in a fixed order."""
    d = DESIGNS[grid.design]
    out = []
    for n, (mul, add), fs, dev in itertools.product(grid.sizes, grid.stages, grid.formats,
                                                    grid.devices):
        params = {"mul_stages": mul, "add_stages": add}
        if d.has_formats:
            params["formats"] = FORMAT_SETS[fs]
        if d.size_param:
            params[d.size_param] = n
        out.append(Job(label=f"{grid.design} N={n} stages={mul}/{add} {fs}", group="sweep",
                       factory=d.factory, params=params,
                       name=f"sweep_{grid.design}_n{n}_s{mul}_{add}_{fs}", device=dev,
                       timing=grid.timing, macs=d.macs(n), n=n, formats=fs,
                       mul_stages=mul, add_stages=add))
    return out


def _client(scheduler: str | None, workers: int, processes: bool):
    """A Dask client: of ``scheduler`` if given, else of a new local cluster (closed with it)."""
    from distributed import Client, LocalCluster

    if scheduler:
        return Client(scheduler), None
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                           dashboard_address=None, silence_logs=logging.ERROR)
    return Client(cluster), cluster


def run_sweep(grid: Grid, *, scheduler: str | None = None, workers: int = 2,
              processes: bool = True, run=None) -> dict:
    """Synthesize every point of ``grid`` on Dask; return the sweep (the JSON's contents).

    ``scheduler``: a Dask scheduler's address (its workers run the jobs); else a local cluster
    of ``workers`` processes (threads with ``processes=False``). ``run`` is the function each
    job runs (default :func:`synth.report._run`: synthesis, errors recorded in the result).
    """
    from distributed import as_completed

    from sim.cli.progress import bar

    from .report import _run

    run = run or _run
    todo = sweep_jobs(grid)
    client, cluster = _client(scheduler, workers, processes)
    results: dict[int, dict] = {}
    try:
        where = scheduler or f"a local Dask cluster of {workers} workers"
        with bar(f"sweep on {where}", len(todo), prefix="[sweep] ") as progress:
            run_id = uuid.uuid4().hex[:8]  # sweeps sharing a scheduler keep their own keys
            futures = {client.submit(run, job, key=f"nclite-sweep-{run_id}-{i}-{job['name']}-"
                                     f"{job['device']}", pure=False): i
                       for i, job in enumerate(todo)}
            for future in as_completed(futures):
                i = futures[future]
                try:
                    r = future.result()
                except Exception as exc:  # noqa: BLE001 - a lost worker: the point's row says so
                    r = {**todo[i], "error": f"{type(exc).__name__}: {exc}"}
                results[i] = r
                progress.log(f"{todo[i]['label']} on {todo[i]['device']}: {result_line(r)}")
                progress.advance()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    rows = [results[i] for i in range(len(todo))]
    front = pareto(rows)
    for i, r in enumerate(rows):
        r["pareto"] = i in front
    return {"schema": SCHEMA, "seed": SEED, "target_mhz": TARGET_MHZ, "tools": tool_versions(),
            "grid": {"design": grid.design, "n": list(grid.sizes),
                     "stages": [f"{m}/{a}" for m, a in grid.stages],
                     "formats": list(grid.formats), "devices": list(grid.devices),
                     "timing": grid.timing},
            "scheduler": scheduler or f"local ({workers} workers)", "results": rows}


def _objectives(r: dict) -> tuple[float, float, float] | None:
    """(LUTs, Fmax, MACs per cycle) of a result; None for a failed one. No Fmax (area only,
    or timing skipped): 0, so such points compete on LUTs and MACs alone."""
    if "error" in r or "area" not in r:
        return None
    fmax = fmax_mhz(r) or 0.0
    return (r["area"]["luts"], fmax, r["macs"])


def pareto(results: list[dict]) -> set[int]:
    """Indices of the results no other dominates: another with at most the LUTs, at least the
    Fmax and at least the MACs per cycle, and better in one of them."""
    points = {i: o for i, r in enumerate(results) if (o := _objectives(r)) is not None}

    def dominates(a, b):
        no_worse = a[0] <= b[0] and a[1] >= b[1] and a[2] >= b[2]
        return no_worse and a != b

    return {i for i, p in points.items()
            if not any(dominates(q, p) for j, q in points.items() if j != i)}


def _mmacs(r: dict) -> float | None:
    fmax = fmax_mhz(r)
    return round(fmax * r["macs"], 1) if fmax else None


def render_md(sweep: dict) -> str:
    """The sweep as a markdown page: the grid, the tools, one table row per point."""
    g = sweep["grid"]
    lines = [
        f"# Design-space sweep: {g['design']}",
        "",
        f"Generated by `nclite synth sweep` (`synth/sweep.py`) on {sweep['scheduler']}: "
        f"N in {g['n']}, PE stages (multiplier/adder) {g['stages']}, formats {g['formats']}, "
        f"parts {g['devices']}; seed {sweep['seed']}, target {sweep['target_mhz']:g} MHz"
        + ("" if g["timing"] else ", area only") + ". Tools: "
        + ", ".join(f"{k} {v}" for k, v in sweep["tools"].items()) + ".",
        "",
        "MMAC/s is Fmax x MACs per cycle. **Pareto** marks the points no other dominates: none "
        "has at most their LUTs, at least their Fmax and MACs per cycle, and is better in one "
        "(`sweep.png` plots them).",
        "",
        "| design | part | N | stages | formats | LUTs | DSPs | Fmax (MHz) | MACs/cycle "
        "| MMAC/s | Pareto |",
        "|---|---|---:|---|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for r in sweep["results"]:
        stages = f"{r['mul_stages']}/{r['add_stages']}"
        if "error" in r:
            error = r["error"].splitlines()[0].replace("|", "/")
            lines.append(f"| {g['design']} | {r['device']} | {r['n']} | {stages} | "
                         f"{r['formats']} | failed: {error} ||||||")
            continue
        timing = r.get("timing") or {}
        fmax = timing.get("fmax_mhz")
        fmax_text = f"{fmax:.1f}" if fmax else ("-" if not timing else
                                                 timing.get("skipped", "-"))
        mmacs = _mmacs(r)
        lines.append(
            f"| {g['design']} | {r['device']} | {r['n']} | {stages} | {r['formats']} | "
            f"{r['area']['luts']} | {r['area'].get('dsps', 0)} | {fmax_text} | {r['macs']} | "
            f"{mmacs if mmacs is not None else '-'} | {'**yes**' if r['pareto'] else ''} |")
    return "\n".join(lines) + "\n"


def plot(sweep: dict, path: Path) -> Path:
    """LUTs against Fmax (MACs per cycle, if the sweep placed nothing), marker area by MACs per
    cycle, marker shape by part, the Pareto front in red and labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    rows = [r for r in sweep["results"] if _objectives(r) is not None]
    placed = any(_objectives(r)[1] for r in rows)

    def y(r):
        return _objectives(r)[1] if placed else r["macs"]

    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110)
    devices = sorted({r["device"] for r in rows})
    markers = dict(zip(devices, "os^Dv", strict=False))
    for dev in devices:
        pts = [r for r in rows if r["device"] == dev]
        ax.scatter([r["area"]["luts"] for r in pts], [y(r) for r in pts],
                   s=[40 * math.sqrt(r["macs"]) for r in pts],
                   c=["tab:red" if r["pareto"] else "tab:gray" for r in pts],
                   marker=markers[dev], alpha=0.75, edgecolors="black", linewidths=0.5)
    for i, r in enumerate(r for r in rows if r["pareto"]):
        ax.annotate(f"N={r['n']} {r['mul_stages']}/{r['add_stages']} {r['formats']}",
                    (r["area"]["luts"], y(r)), textcoords="offset points",
                    xytext=(6, 5 if i % 2 == 0 else -11), fontsize=7)
    luts = [r["area"]["luts"] for r in rows]
    if luts and max(luts) > 4 * min(luts):
        ax.set_xscale("log")
    ax.set_xlabel("LUTs" + (" (log)" if ax.get_xscale() == "log" else ""))
    ax.set_ylabel("Fmax (MHz; 0: not placed)" if placed else "MACs per cycle (area only)")
    ax.set_title(f"{sweep['grid']['design']}: Pareto front in red (fewer LUTs, higher Fmax, "
                 "more MACs/cycle); marker area ~ MACs/cycle", fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(handles=[Line2D([], [], marker=markers[d], linestyle="", color="white",
                              markeredgecolor="black", label=d) for d in devices],
              loc="best", fontsize=8, title="part", title_fontsize=8)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return path


def write_sweep(sweep: dict, out_dir: Path = REPORT_DIR) -> list[Path]:
    """Write ``sweep.json``, ``sweep.md`` and ``sweep.png`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    js = out_dir / "sweep.json"
    js.write_text(json.dumps(sweep, indent=1, sort_keys=True) + "\n")
    md = out_dir / "sweep.md"
    md.write_text(render_md(sweep))
    return [md, js, plot(sweep, out_dir / "sweep.png")]
