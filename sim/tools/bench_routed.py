"""Benchmark: the routed collectives (all-to-all, permute) against their bandwidth bounds.

Part of ``make bench``'s *collectives* section (:func:`sim.tools.bench.run_all`): P collective
engines in a ring (``hdl.ring:CollectiveRing``, Verilator) run all-to-alls and permutes of n
words per rank through ``sim.cli.allreduce.run_collectives``, every word of every rank checked
bit-exact against ``golden.collective``. *Bound* is
``golden.collective.route_bound_cycles``: on a one-way ring of links of one beat (W words) a
cycle, the busiest link's data beats or the busiest write port's rows, whichever is more
(an all-to-all: (P − 1)/2 · B for P >= 3 and B for P = 2, B = n / W rows; a permute by s:
s · B); *efficiency* = bound / cycles.
"""

from __future__ import annotations

from sim.cli.allreduce import run_collectives

__all__ = ["ROUTED_RUNS", "ROUTED_QUICK", "TARGET", "TARGET_N", "bench_routed", "render_routed",
           "routed_failures", "readme_rows"]

#: (op, P, W, shift) of each run; every run at each of :data:`SIZES`.
ROUTED_RUNS = [("all_to_all", 2, 4, 0), ("all_to_all", 4, 4, 0), ("all_to_all", 8, 4, 0),
               ("all_to_all", 4, 1, 0), ("permute", 4, 4, 1), ("permute", 4, 4, 3)]
SIZES = [1024, 16384]
ROUTED_QUICK = ([("all_to_all", 4, 4, 0), ("permute", 4, 4, 1)], [1024])
LATENCY = 8
#: The issue's target: at least this fraction of the bound for n >= TARGET_N words.
TARGET, TARGET_N = 0.9, 16384


def bench_routed(quick: bool = False, progress=None) -> list[dict]:
    """Run :data:`ROUTED_RUNS` (or the quick set); one item per run and size."""
    runs, sizes = ROUTED_QUICK if quick else (ROUTED_RUNS, SIZES)
    items = []
    for op, ranks, w, shift in runs:
        if progress:
            progress(f"{op.replace('_', '-')}: P={ranks} W={w}"
                     f"{f' shift={shift}' if shift else ''} n={sizes} in verilator ...")
        try:
            r = run_collectives(ranks=ranks, sizes=sizes, link_width=w, op=op,
                                latency=LATENCY, error_vs_float64=False, shift=shift or 1)
            new = [{"op": op, "ranks": ranks, "link_width": w, "shift": shift,
                    "latency": LATENCY, "words": run["words"], "cycles": run["cycles"],
                    "bound_cycles": run["bound_cycles"], "efficiency": run["efficiency"],
                    "bit_exact": run["bit_exact"]} for run in r["runs"]]
            if progress:
                progress("  efficiency " + ", ".join(f"{i['efficiency']:.3f}" for i in new))
        except Exception as exc:  # noqa: BLE001 - recorded; run_all reports it at the end
            new = [{"op": op, "ranks": ranks, "link_width": w, "shift": shift, "words": sizes,
                    "error": f"{type(exc).__name__}: {exc}"}]
            if progress:
                progress(f"  FAILED: {new[0]['error'].splitlines()[0]}")
        items += new
    return items


def _name(r: dict) -> str:
    return "all-to-all" if r["op"] == "all_to_all" else f"permute by {r['shift']}"


def render_routed(items: list | None) -> list[str]:
    """The section's markdown table."""
    if not items:
        return []
    lines = [
        "",
        "## All-to-all and permute",
        "",
        f"P collective engines in a ring (`hdl.ring:CollectiveRing`, Verilator), links of W "
        f"fp32 words per beat with a latency of {LATENCY} cycles and no stalls; every word of "
        "every rank checked bit-exact against `golden.collective`. Beats are routed with a tag "
        "(destination, origin); a rank forwards what is not for it. *Bound* = "
        "`golden.collective.route_bound_cycles`: the busiest link's beats or the busiest "
        "write port's rows on the one-way ring ((P − 1)/2 · n/W for an all-to-all of P >= 3, "
        "n/W for P = 2, s · n/W for a permute by s); *efficiency* = bound / cycles. Target: "
        f">= {TARGET} for n >= {TARGET_N}.",
        "",
        "| op | P | W | n (words per rank) | cycles | bound | efficiency | bit-exact |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in items:
        if "error" in r:
            lines.append(f"| {_name(r)} | {r['ranks']} | {r['link_width']} | {r['words']} | "
                         f"FAILED: {r['error'].splitlines()[0][:100]} | | | |")
            continue
        eff = f"{r['efficiency']:.3f}"
        if r["words"] >= TARGET_N and r["efficiency"] < TARGET:
            eff = f"**{eff}** (below {TARGET})"
        lines.append(f"| {_name(r)} | {r['ranks']} | {r['link_width']} | {r['words']:,} | "
                     f"{r['cycles']:,} | {round(r['bound_cycles']):,} | {eff} | "
                     f"{'yes' if r['bit_exact'] else '**NO**'} |")
    return lines


def routed_failures(items: list | None) -> list[str]:
    """What failed or was not bit-exact (``run_all`` reports it)."""
    bad = []
    for r in items or []:
        if "error" in r:
            bad.append(f"{_name(r)} P={r['ranks']} W={r['link_width']}: "
                       f"{r['error'].splitlines()[0]}")
        elif not r["bit_exact"]:
            bad.append(f"{_name(r)} P={r['ranks']} W={r['link_width']} n={r['words']}: "
                       "not bit-exact")
    return bad


def readme_rows(items: list | None) -> list[tuple[str, str, str]]:
    """README's headline rows: the largest n of each op."""
    ok = [r for r in items or [] if "error" not in r]
    if not ok:
        return []
    top = max(r["words"] for r in ok)
    rows = []
    for op, what in (("all_to_all", "ring all-to-all"), ("permute", "ring permute")):
        sel = [r for r in ok if r["op"] == op and r["words"] == top]
        if not sel:
            continue
        effs = sorted(r["efficiency"] for r in sel)
        span = f"{effs[0]:.3f}" if effs[0] == effs[-1] else f"{effs[0]:.3f} – {effs[-1]:.3f}"
        detail = "P = " + ", ".join(str(p) for p in sorted({r["ranks"] for r in sel}))
        if op == "permute":
            detail = "P = 4, shift = " + ", ".join(str(r["shift"]) for r in sel)
        words = f"{top:,}".replace(",", " ")
        rows.append((f"{what}, n = {words} words", f"{span} of its bound",
                     f"{detail}; routed beats, bit-exact"))
    return rows
