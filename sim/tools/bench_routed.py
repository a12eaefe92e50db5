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
from sim.tools.bench import efficiency_row

__all__ = ["ROUTED_RUNS", "ROUTED_QUICK", "TARGET", "TARGET_N", "bench_routed", "render_routed",
           "routed_failures", "readme_rows", "bench_moe", "render_moe", "moe_failures",
           "moe_rows"]

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
    return lines + [efficiency_row([_name(r), r["ranks"], r["link_width"]], r, TARGET,
                                   TARGET_N, fmt=lambda v: f"{v:,}") for r in items]


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


# --- The expert-parallel MoE layer (``nclite demo --only moe``) --------------------------------


def bench_moe(progress=None) -> dict:
    """``sim.cli.demo.run_moe_demo`` in Verilator: cycles, busy cycles and the collective
    engine's share of them, per core."""
    from sim.cli.demo import run_moe_demo

    if progress:
        progress("MoE layer on 4 cores in verilator ...")
    try:
        r = run_moe_demo(simulator="verilator", seed=1)
    except Exception as exc:  # noqa: BLE001 - recorded; run_all reports it at the end
        r = {"error": f"{type(exc).__name__}: {exc}"}
    if progress:
        progress("  " + (r["error"].splitlines()[0] if "error" in r else
                         "collective " + ", ".join(f"{100 * s:.1f} %" for s in r["comm_share"])
                         + " of busy cycles"))
    return r


def render_moe(r: dict | None) -> list[str]:
    if not r:
        return []
    lines = ["", "## Mixture-of-experts layer", ""]
    if "error" in r:
        return lines + [f"FAILED: {r['error'].splitlines()[0]}"]
    lines += [
        f"`nclite demo --only moe` (`sim.kernels.moe`, Verilator, seed {r['seed']}): "
        f"{r['ranks']} cores (N = 4, links {r['link_width']} words), {r['tokens']} tokens of "
        f"{r['d']} features a core, top-1 routing, capacity {r['capacity']} "
        f"({r['dropped']} dropped), expert MLP {r['d']} -> {r['h']} -> {r['d']}, two "
        "all-to-alls; every memory of every core bit-exact with the ring ISS: "
        f"{'yes' if r['bit_exact'] else '**NO**'}. *Cycles*: from the first command pushed to "
        "idle (the host's AXI4-Lite pushes set the pace: more commands than the queue holds); "
        "*busy*: the core's busy counter; *collective*: the collective engine's busy cycles "
        "(both all-to-alls).",
        "",
        "| core | cycles | busy | tensor | activation | DMA | collective | collective / busy |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    if r["bit_exact"]:
        for c, (cyc, p, s) in enumerate(zip(r["cycles"], r["perf"], r["comm_share"],
                                            strict=True)):
            lines.append(f"| {c} | {cyc:,} | {p['busy']:,} | {p['tensor_busy']:,} | "
                         f"{p['activation_busy']:,} | {p['dma_busy']:,} | "
                         f"{p['collective_busy']:,} | {100 * s:.1f} % |")
    return lines


def moe_failures(r: dict | None) -> list[str]:
    if not r:
        return []
    if "error" in r:
        return [f"MoE layer: {r['error'].splitlines()[0]}"]
    return [] if r["bit_exact"] else [f"MoE layer: not bit-exact: {r['mismatch']}"]


def moe_rows(r: dict | None) -> list[tuple[str, str, str]]:
    if not r or "error" in r or not r["bit_exact"]:
        return []
    shares = [100 * s for s in r["comm_share"]]
    busy = max(p["busy"] for p in r["perf"])
    return [(f"MoE layer, {r['ranks']} cores (expert-parallel, two all-to-alls)",
             f"{max(r['cycles']):,} cycles (busy {busy:,}); collective engine "
             f"{min(shares):.1f} – {max(shares):.1f} % of busy cycles".replace(",", " "),
             f"{r['tokens']} tokens of {r['d']} features a core, top-1, bit-exact with the "
             "ring ISS in every memory")]
