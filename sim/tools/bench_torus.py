"""Benchmark: the torus collectives against their bandwidth bounds, beside the ring's.

Part of ``make bench``'s *collectives* section (:func:`sim.tools.bench.run_all`): an R × C
torus of collective engines (``hdl.torus:CollectiveTorus``, Verilator) runs all-reduces and
all-to-alls of n words per node through ``sim.cli.allreduce.run_collectives`` (``nclite
allreduce --torus``), every word of every node checked bit-exact against
``golden.collective``. *Bound* is ``golden.collective.torus_bound_cycles``: a node runs one
sub-ring command at a time on one link pair, so the bound is the sum of the schedule's steps'
ring bounds (all-reduce: about 2(RC − 1)/(RC) · n/W, the ring's over R·C nodes; all-to-all:
the column step's and R row steps'). *Cycles* run from the first command to the last node's
idle, every step included. A ring of the same R·C engines runs the same n for comparison.
"""

from __future__ import annotations

from sim.cli.allreduce import run_collectives
from sim.tools.bench import efficiency_row

__all__ = ["TORUS_RUNS", "TORUS_QUICK", "TARGET", "TARGET_N", "bench_torus", "render_torus",
           "torus_failures", "readme_rows"]

#: (op, R, C, W) of each run; every run at each of :data:`SIZES`, then on a ring of R·C.
TORUS_RUNS = [("all_reduce", 2, 2, 4), ("all_reduce", 2, 4, 4), ("all_to_all", 2, 2, 4),
              ("all_to_all", 2, 4, 4)]
SIZES = [1024, 16384]
TORUS_QUICK = ([("all_reduce", 2, 2, 4)], [1024])
LATENCY = 8
#: The issue's target: at least this fraction of the bound for n >= TARGET_N words.
TARGET, TARGET_N = 0.9, 16384


def bench_torus(quick: bool = False, progress=None) -> list[dict]:
    """Run :data:`TORUS_RUNS` (or the quick set) on the torus and on a ring of as many
    engines; one item per run, topology and size."""
    runs, sizes = TORUS_QUICK if quick else (TORUS_RUNS, SIZES)
    items = []
    for op, rows, cols, w in runs:
        for torus in ((rows, cols), None):
            where = f"{rows}x{cols} torus" if torus else f"ring of {rows * cols}"
            if progress:
                progress(f"{op.replace('_', '-')} on a {where}: W={w} n={sizes} in verilator "
                         "...")
            head = {"op": op, "rows": rows, "cols": cols, "link_width": w,
                    "topology": "torus" if torus else "ring"}
            try:
                r = run_collectives(ranks=None if torus else rows * cols, torus=torus,
                                    sizes=sizes, link_width=w, op=op, latency=LATENCY,
                                    error_vs_float64=False)
                new = [{**head, "latency": LATENCY, "words": run["words"],
                        "cycles": run["cycles"], "bound_cycles": run["bound_cycles"],
                        "efficiency": run["efficiency"], "bit_exact": run["bit_exact"]}
                       for run in r["runs"]]
                if progress:
                    progress("  cycles " + ", ".join(f"{i['cycles']}" for i in new)
                             + "; efficiency " + ", ".join(f"{i['efficiency']:.3f}"
                                                           for i in new))
            except Exception as exc:  # noqa: BLE001 - recorded; run_all reports it at the end
                new = [{**head, "words": sizes, "error": f"{type(exc).__name__}: {exc}"}]
                if progress:
                    progress(f"  FAILED: {new[0]['error'].splitlines()[0]}")
            items += new
    return items


def _name(r: dict) -> str:
    return r["op"].replace("_", "-")


def _where(r: dict) -> str:
    return (f"{r['rows']}x{r['cols']} torus" if r["topology"] == "torus"
            else f"ring of {r['rows'] * r['cols']}")


def render_torus(items: list | None) -> list[str]:
    """The section's markdown table."""
    if not items:
        return []
    lines = [
        "",
        "## Torus collectives",
        "",
        "An R x C torus of collective engines (`hdl.torus:CollectiveTorus`, Verilator; each "
        "node a row engine and a column engine, one command at a time), links of W fp32 words "
        f"per beat with a latency of {LATENCY} cycles and no stalls, beside a ring of as many "
        "engines; every word of every node checked bit-exact against `golden.collective`. "
        "Torus all-reduce: reduce-scatter along the rows, all-reduce along the columns, "
        "all-gather along the rows; all-to-all: down the columns, then along the rows "
        "(`golden.collective.torus_schedule`). *Cycles*: first command to the last node's "
        "idle. *Bound* = `golden.collective.torus_bound_cycles` (the sum of the steps' ring "
        "bounds: one link pair per node at a time) or the ring's; *efficiency* = bound / "
        f"cycles. Target: >= {TARGET} for n >= {TARGET_N}.",
        "",
        "| op | topology | W | n (words per node) | cycles | bound | efficiency | bit-exact |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    return lines + [efficiency_row([_name(r), _where(r), r["link_width"]], r, TARGET,
                                   TARGET_N, fmt=lambda v: f"{v:,}") for r in items]


def torus_failures(items: list | None) -> list[str]:
    """What failed or was not bit-exact (``run_all`` reports it)."""
    bad = []
    for r in items or []:
        if "error" in r:
            bad.append(f"{_name(r)} on a {_where(r)} W={r['link_width']}: "
                       f"{r['error'].splitlines()[0]}")
        elif not r["bit_exact"]:
            bad.append(f"{_name(r)} on a {_where(r)} W={r['link_width']} n={r['words']}: "
                       "not bit-exact")
    return bad


def readme_rows(items: list | None) -> list[tuple[str, str, str]]:
    """README's headline rows: the torus runs at the largest n, each with the ring's cycles
    at the same n."""
    ok = [r for r in items or [] if "error" not in r]
    torus = [r for r in ok if r["topology"] == "torus"]
    if not torus:
        return []
    top = max(r["words"] for r in torus)
    rows = []
    for op in ("all_reduce", "all_to_all"):
        sel = [r for r in torus if r["op"] == op and r["words"] == top]
        if not sel:
            continue
        effs = sorted(r["efficiency"] for r in sel)
        span = f"{effs[0]:.3f}" if effs[0] == effs[-1] else f"{effs[0]:.3f} – {effs[-1]:.3f}"
        vs = []
        for r in sel:
            ring = [x for x in ok if x["topology"] == "ring" and x["op"] == op
                    and x["words"] == top and x["rows"] * x["cols"] == r["rows"] * r["cols"]
                    and x["link_width"] == r["link_width"]]
            vs.append(f"{r['rows']}x{r['cols']}: {r['cycles']:,} cycles".replace(",", " ")
                      + (f" (ring: {ring[0]['cycles']:,})".replace(",", " ") if ring else ""))
        words = f"{top:,}".replace(",", " ")
        rows.append((f"torus {_name(sel[0])}, n = {words} words", f"{span} of its bound",
                     "; ".join(vs) + "; bit-exact"))
    return rows
