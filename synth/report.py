"""The area and timing report: ``make synth-report`` -> synth/report.md, report.json, PNG plots.

Every figure comes from :func:`synth.fpga.fpga_synth` (Yosys + nextpnr from PyPI, fixed seed),
so the report regenerates on any machine with ``make synth-report``; results are cached, a
re-run with nothing changed takes seconds. The default stage counts of each component are read
from the component itself, so the report follows the code.
"""

from __future__ import annotations

import json
import math
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .fpga import DEVICES, fmax_mhz, fpga_synth, result_line, tool_versions

__all__ = ["Job", "jobs", "collect", "render_md", "plots", "write_report", "SMOKE_JOB"]

REPORT_DIR = Path(__file__).resolve().parent
SCHEMA = 1
SEED = 1
TARGET_MHZ = 100.0
MAIN_DEVICE = "ecp5-85f"

#: Published anchors the report puts beside ours (not measured here).
ANCHORS = [
    {"design": "Gemmini int8 PE", "luts": 737, "dsps": None, "device": "Virtex-7",
     "source": "Gemmini's issue tracker (reported figure)"},
    {"design": "HakuTPU fp8 MAC", "luts": 99, "dsps": 0.5, "device": "-",
     "source": "HakuTPU (reported figure, per MAC)"},
    {"design": "Berkeley HardFloat addRecFN (IEEE fp32 add), between registers", "luts": 787,
     "dsps": 0, "device": "ECP5-85F speed 6", "fmax_mhz": 39,
     "source": "issue #7: measured in this flow by the planners, not re-measured here"},
]

FORMAT_SETS = {"all": ["bf16", "fp8_e4m3", "fp8_e5m2"], "bf16": ["bf16"],
               "fp8": ["fp8_e4m3", "fp8_e5m2"]}


class Job(dict):
    """One synthesis: ``label``, ``group``, ``factory``, ``params``, ``name``, ``device``,
    ``timing``, ``macs`` (multiply-accumulates per cycle, for per-MAC figures), ``n``."""


def _default(cls, param: str):
    import inspect

    return inspect.signature(cls.__init__).parameters[param].default


def _defaults() -> dict:
    """The PE's default pipeline depths, read off its constructor."""
    from hdl.pe import PE

    return {"mul_stages": _default(PE, "mul_stages"), "add_stages": _default(PE, "add_stages")}


def jobs(*, quick: bool = False) -> list[Job]:
    """The report's syntheses. ``quick``: the components and N = 2, 4 only."""
    from hdl.sru import SRU_DEFAULT_STAGES

    d = _defaults()
    st = f"mul_stages={d['mul_stages']} add_stages={d['add_stages']}"
    out: list[Job] = []

    def add(label, group, factory, params, name, device=MAIN_DEVICE, timing=True, macs=0, n=0,
            formats="all"):
        out.append(Job(label=label, group=group, factory=factory, params=params, name=name,
                       device=device, timing=timing, macs=macs, n=n, formats=formats))

    # The adder and the multiplier as the PE builds them.
    add(f"Fp32Adder stages={d['add_stages']}", "component", "hdl.fp32_add:Fp32Adder",
        {"stages": d["add_stages"]}, "fp32_adder")
    add(f"FpMultiplier stages={d['mul_stages']}", "component", "hdl.fp_mul:FpMultiplier",
        {"stages": d["mul_stages"]}, "fp_multiplier")
    # The PE takes decoded operands; the array decodes them at its edge, one decoder per row
    # and per column, built for the formats the engine reads.
    add(f"PE {st}", "pe", "hdl.pe:PE", {}, "pe", macs=1, n=1)
    for fs, formats in FORMAT_SETS.items():
        add(f"OperandDecoder, {fs}", "component", "hdl.fp_mul:OperandDecoder",
            {"formats": formats}, f"operand_decoder_{fs}", formats=fs)
    add("PEColumn of 4 rows (default stages)", "pe_column", "hdl.pe:PEColumn", {"rows": 4},
        "pe_column4", macs=4, n=4)
    add(f"SRU lane (all targets, {SRU_DEFAULT_STAGES} stages)", "component",
        "hdl.sru:StochasticRounder", {"lanes": 1}, "sru_lane")
    add("CollectiveEngine P=4 W=1 depth=256", "component", "hdl.collective:CollectiveEngine",
        {"ranks": 4, "link_width": 1, "depth": 256}, "collective_engine")
    # The NeuronCore's other blocks, at the sizes of its N = 2 row below.
    core2 = {"n": 2, "sbuf_words": 256, "psum_banks": 4, "psum_words": 16}
    add("Sequencer N=2 sbuf 256 words psum 4x16", "core_block", "hdl.sequencer:Sequencer",
        {**core2, "dram_bytes": 1 << 16}, "sequencer")
    add("ActivationEngine lanes=2", "core_block", "hdl.activation:ActivationEngine",
        {"lanes": 2}, "activation_engine")
    add("DmaEngine N=2 words=256 (32-bit AXI)", "core_block", "hdl.dma:DmaEngine",
        {"n": 2, "words": 256}, "dma_engine")
    add("CommandQueue depth=8", "core_block", "hdl.cmdqueue:CommandQueue", {}, "command_queue")
    sizes = [2, 4] if quick else [2, 4, 8]
    for n in sizes:
        # N = 8 (~74k LUTs) fills ~90 % of the 85F: area only (its place-and-route alone
        # would take hours in this flow).
        add(f"TensorEngine N={n}, all formats", "tensor_engine",
            "hdl.tensor_engine:TensorEngine", {"n": n}, f"tensor_engine_n{n}",
            timing=n <= 4, macs=n * n, n=n)
    for fs in ("bf16", "fp8"):
        add(f"TensorEngine N=4, {fs}", "tensor_engine_formats", "hdl.tensor_engine:TensorEngine",
            {"n": 4, "formats": FORMAT_SETS[fs]}, f"tensor_engine_n4_{fs}", timing=False,
            macs=16, n=4, formats=fs)
    for n in [2] if quick else [2, 4]:
        add(f"NeuronCore N={n} sbuf 256 words psum 4x16", "core", "hdl.core:NeuronCore",
            {**core2, "n": n},
            f"neuron_core_n{n}", timing=n <= 2, macs=n * n, n=n)
    # The same PE and the small core on the other parts: does it fit, how fast.
    for dev in ("ecp5-25f", "ice40-up5k"):
        add(f"PE {st}", "devices", "hdl.pe:PE", {}, "pe", device=dev, macs=1, n=1)
        add("NeuronCore N=2 sbuf 256 words psum 4x16", "devices", "hdl.core:NeuronCore",
            core2, "neuron_core_n2",
            device=dev, timing=False, macs=4, n=2)
    return out


#: The fast smoke test of the flow (inside ``make test``): one small component, area + timing.
SMOKE_JOB = Job(label="Fp32Multiplier stages=2", group="smoke",
                factory="hdl.fp32_mul:Fp32Multiplier", params={"stages": 2},
                name="fp32_multiplier", device="ice40-up5k", timing=True, macs=0, n=0,
                formats="-")


def _run(job: Job) -> dict:
    t0 = time.monotonic()
    try:
        r = fpga_synth(job["factory"], job["params"], device=job["device"], name=job["name"],
                       seed=SEED, freq=TARGET_MHZ, timing=job["timing"])
        r.pop("tools", None)
    except Exception as exc:  # noqa: BLE001 - recorded in the report
        r = {"error": f"{type(exc).__name__}: {exc}"}
    return {**job, **r, "seconds": round(time.monotonic() - t0, 1)}


def collect(*, quick: bool = False, workers: int = 2, selected: list[Job] | None = None) -> dict:
    """Run every job (``workers`` at a time, cached ones instantly); return the results."""
    from sim.cli.progress import bar

    todo = selected if selected is not None else jobs(quick=quick)
    results = []
    pool = ThreadPoolExecutor(max(1, workers))
    futures = [(job, pool.submit(_run, job)) for job in todo]
    try:
        with bar("synthesis", len(todo), prefix="[synth] ") as progress:
            _collect_results(futures, results, progress)
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)  # the queued jobs do not start
        raise
    pool.shutdown()
    versions = tool_versions()
    return {"schema": SCHEMA, "seed": SEED, "target_mhz": TARGET_MHZ, "tools": versions,
            "boards": _board_builds(versions),
            "devices": {k: {"part": v.part, "luts": v.luts, "dsps": v.dsps, "brams": v.brams}
                        for k, v in DEVICES.items()},
            "defaults": _defaults(), "anchors": ANCHORS, "results": results,
            "scaling": _scaling(results)}


def _collect_results(futures, results: list, progress) -> None:
    """Wait for the jobs in order, log each result, move the bar."""
    for job, fut in futures:
        progress.status(f"{job['label']} on {job['device']}")
        r = fut.result()
        progress.log(f"{job['label']} on {job['device']}: {result_line(r)}")
        progress.advance()
        results.append(r)


def _board_builds(versions: dict | None = None) -> dict:
    """The reports of the bitstreams built so far (``make bitstream``), by board (``versions``:
    the tools', as :func:`~synth.fpga.tool_versions` gives them, if known).

    A board with no build here keeps the committed report's entry, and a build whose key is
    not the current design's (:func:`~synth.board.bitstream_key`) keeps its own: both marked
    ``stale`` (built from an earlier design: the report says so until ``make bitstream``
    rebuilds it).
    """
    from sim.runner import build_root

    from .board import BOARDS, bitstream_key

    out = {}
    committed = REPORT_DIR / "report.json"
    previous = (json.loads(committed.read_text()).get("boards") or {}) if committed.exists() \
        else {}
    for board in BOARDS:
        f = build_root() / "board" / board / "report.json"
        if not f.exists():
            if board in previous:
                out[board] = {**previous[board], "stale": True}
            continue
        r = json.loads(f.read_text())
        out[board] = {k: r[k] for k in ("core", "clock_hz", "osc_hz", "baud", "seed", "fmax_mhz",
                                        "utilization", "bitstream_bytes") if k in r}
        if r.get("key") != bitstream_key(board, versions):
            out[board]["stale"] = True
        pnr = f.parent / "work" / "nclite.pnr.json"
        if pnr.exists():
            from .fpga import _critical_path

            out[board]["critical_path"] = _critical_path(json.loads(pnr.read_text()))
    return out


def _scaling(results: list[dict]) -> dict | None:
    """Least-squares fit of log(LUTs) = a + b log(N) over the tensor engines: b is the exponent."""
    pts = [(r["n"], r["area"]["luts"]) for r in results
           if r["group"] == "tensor_engine" and "area" in r]
    if len(pts) < 2:
        return None
    xs = [math.log(n) for n, _ in pts]
    ys = [math.log(v) for _, v in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs)
    a = my - b * mx
    return {"points": pts, "exponent": round(b, 3), "coefficient": round(math.exp(a), 1)}


def _fmt(v, digits=0):
    if v is None:
        return "-"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def render_md(report: dict) -> str:
    res = report["results"]
    d = report["defaults"]
    lines = ["# nclite synthesis report", "",
             "Generated by `make synth-report` (`nclite synth report`) from `synth/report.py`; "
             "do not edit by hand. Every number is measured here by Yosys and nextpnr from PyPI "
             f"(seed {report['seed']}, target {report['target_mhz']:g} MHz), except the anchors, "
             "which are published figures.", "",
             "**Flow.** Area: Yosys `synth_ecp5` / `synth_ice40 -dsp` of the bare component. "
             "*LUTs* are LUT4-equivalents: LUT4 + 2 x CCU2C (carry cell) + 2 x TRELLIS_DPR16X4 "
             "on ECP5, SB_LUT4 on iCE40. Timing: the component between registers "
             "(`synth/harness.py`: every input from a shift register, every output into one), "
             "placed and routed by nextpnr; Fmax is nextpnr's for the clock.", "",
             f"Default pipeline: PE `mul_stages={d['mul_stages']}`, "
             f"`add_stages={d['add_stages']}`.", "", "## Tools", ""]
    lines += [f"- {k}: `{v}`" for k, v in report["tools"].items()]

    def table(rows, title):
        out = ["", f"## {title}", "",
               "| design | device | LUTs | FFs | DSPs | BRAMs | LUTs/MAC | DSPs/MAC | Fmax MHz "
               "| critical path (start -> end, levels) |",
               "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in rows:
            if "error" in r:
                msg = r["error"].splitlines()[0][:80].replace("|", "/")
                out.append(f"| {r['label']} | {r['device']} | error: {msg} | | | | | | | |")
                continue
            a, t = r["area"], r.get("timing") or {}
            macs = r.get("macs") or 0
            per = (_fmt(a["luts"] / macs, 0), _fmt(a["dsps"] / macs, 2)) if macs else ("", "")
            if "skipped" in t:
                fmax, path = "-", t["skipped"]
            elif t:
                cp = t.get("critical_path") or {}
                fmax = _fmt(t.get("fmax_mhz"), 1)
                path = (f"`{_short(cp.get('from'))}` -> `{_short(cp.get('to'))}`, "
                        f"{cp.get('logic_levels')}" if cp else "")
            else:
                fmax, path = "-", "area only"
            out.append(f"| {r['label']} | {r['device']} | {a['luts']} | {a['ffs']} | "
                       f"{a['dsps']} | {a['brams']} | {per[0]} | {per[1]} | {fmax} | {path} |")
        return out

    def group(*names):
        return [r for r in res if r["group"] in names]

    lines += table(group("component", "pe", "pe_column"), "Components on ECP5-85F (speed 6)")
    lines += table(group("tensor_engine", "tensor_engine_formats"),
                   "Tensor engine: area per MAC and growth with N")
    sc = report.get("scaling")
    if sc:
        lines += ["", f"LUTs of the tensor engine grow as **N^{sc['exponent']:.2f}** "
                      f"(least-squares fit over N = {', '.join(str(n) for n, _ in sc['points'])}:"
                      f" LUTs ~ {sc['coefficient']:g} N^{sc['exponent']:.2f}). The N^2 PEs "
                      "and their skew registers give an exponent of 2; the parts that grow as N "
                      "or not at all (PSUM addressing, command logic, the accumulate adders) "
                      "pull it below 2 at small N.",
                  "", "![LUTs against N](area_scaling.png)", "",
                  "![LUTs per MAC by format set](luts_per_mac.png)"]
    lines += table(group("core_block"), "The core's other blocks (the sizes of its N = 2 row)")
    lines += table(group("core"), "The whole NeuronCore")
    lines += table(group("devices"), "Other parts: ECP5-25F and iCE40 UP5K")
    lines += ["", "## Fit on the parts", "",
              "| design | part | LUT use | DSP use | BRAM use | fits |",
              "|---|---|---:|---:|---:|---|"]
    for r in res:
        if "area" not in r or r["group"] not in ("core", "devices", "tensor_engine"):
            continue
        dev = report["devices"][r["device"]]
        a = r["area"]
        fits = all(a[k] <= dev[c] for k, c in (("luts", "luts"), ("dsps", "dsps"),
                                                  ("brams", "brams")))
        lines.append(f"| {r['label']} | {dev['part']} | {100 * a['luts'] / dev['luts']:.0f} % "
                     f"| {a['dsps']}/{dev['dsps']} | {a['brams']}/{dev['brams']} | "
                     f"{'yes' if fits else '**no**'} |")
    for board, b in (report.get("boards") or {}).items():
        util = b["utilization"]
        comb, ff = util.get("TRELLIS_COMB", {}), util.get("TRELLIS_FF", {})
        lines += ["", f"## The {board} bitstream (`make bitstream BOARD={board}`)", "",
                  f"NeuronCore {b['core']} with {b['core'].get('dram_bytes', 0) // 1024} KiB of "
                  f"block RAM as DRAM and the UART bridge at {b['baud']} baud "
                  f"(`docs/fpga.md`). nextpnr seed {b['seed']}.", "",
                  "| resource | used | available | use |", "|---|---:|---:|---:|"]
        for cell, v in util.items():
            lines.append(f"| {cell} | {v['used']} | {v['available']} | "
                         f"{100 * v['used'] / v['available']:.0f} % |")
        if b.get("stale"):
            lines += ["", "**Built from an earlier design** than the rest of this report (no "
                          "bitstream was built since); `make bitstream` rebuilds it and the "
                          "next `make synth-report` shows the new one."]
        fmax = ", ".join(f"{v} MHz" for v in b["fmax_mhz"].values())
        clock = (f"the core's {b['clock_hz'] / 1e6:g} MHz clock (the PLL's, from the board's "
                 f"{b['osc_hz'] / 1e6:g} MHz)" if "osc_hz" in b
                 else f"the board's {b['clock_hz'] / 1e6:g} MHz clock")
        lines += ["", f"Fmax {fmax} against {clock}; "
                      f"{comb.get('used', 0)} of {comb.get('available', 1)} LUT sites "
                      f"({100 * comb.get('used', 0) / comb.get('available', 1):.0f} %) and "
                      f"{ff.get('used', 0)} flip-flops."]
        cp = b.get("critical_path")
        if cp:
            where = ("outside the tensor engine, whose units keep their shallow pipelines"
                     if ".te." not in f".{_short(cp['from'])}" else "in the tensor engine")
            lines += ["", f"Its critical path runs from `{_short(cp['from'])}` to "
                          f"`{_short(cp['to'])}` ({cp['logic_levels']} logic levels, "
                          f"{cp['delay_ns']} ns), {where}."]
    lines += ["", "## Anchors (published figures, not measured here)", "",
              "| design | LUTs | DSPs | device | Fmax MHz | source |",
              "|---|---:|---:|---|---:|---|"]
    for a in report["anchors"]:
        lines.append(f"| {a['design']} | {a['luts']} | {_fmt(a['dsps'], 1)} | {a['device']} | "
                     f"{_fmt(a.get('fmax_mhz'))} | {a['source']} |")
    pe = next((r for r in res if r["group"] == "pe" and "area" in r), None)
    dec = next((r for r in res if r["factory"] == "hdl.fp_mul:OperandDecoder"
                and r["formats"] == "all" and "area" in r), None)
    if pe:
        t = pe.get("timing") or {}
        lines += ["", f"Our default PE (bf16 + both fp8, fp32 accumulate) uses "
                      f"**{pe['area']['luts']} LUTs + {pe['area']['dsps']} DSP** and reaches "
                      f"**{_fmt(t.get('fmax_mhz'), 1)} MHz** on the ECP5-85F; HardFloat's fp32 "
                      "adder alone is 787 LUTs at 39 MHz in the same flow."]
        if dec:
            lines += ["", "The PE takes its operands decoded (sign, class flags, exponent, "
                          "normalised significand): the array decodes each weight and each moving "
                          "operand once at its edge, with one `OperandDecoder` per column and "
                          f"one per row ({dec['area']['luts']} LUTs each for all three formats), "
                          "so an N x N array has 2N decoders for its N^2 PEs instead of two in "
                          "every PE."]
    adder = next((r for r in res if r["factory"] == "hdl.fp32_add:Fp32Adder" and "area" in r),
                 None)
    lines += ["", "## Timing", "",
              f"The PE is pipelined to {d['mul_stages']} multiplier and {d['add_stages']} adder "
              "stages by default: the alignment shift of the adder is split in two, its rounded "
              "output is registered (so a column does not chain one PE's rounding into the next "
              "PE's compare), the DSP's product is registered, and the multiplier classifies "
              "it with one adder (the exponent field, with the normalising carry as its carry-in). "
              "Numerics are unchanged: every stage count "
              "is checked against the golden model bit for bit."]
    if adder:
        t = adder.get("timing") or {}
        lines += ["", f"HardFloat's `addRecFN` keeps values in a recoded format so that "
                      "subnormals cost nothing in the adder; a PE could keep its partial sums "
                      "recoded and convert only at the array's edges. We considered it and did "
                      "not need it: our IEEE adder with subnormals, at "
                      f"{d['add_stages']} stages, is **{adder['area']['luts']} LUTs at "
                      f"{_fmt(t.get('fmax_mhz'), 1)} MHz**, against HardFloat's 787 LUTs at "
                      "39 MHz between registers in this flow."]
    lines += ["", "![Fmax of the components](fmax.png)", ""]
    return "\n".join(lines)


def _short(cell: str | None) -> str:
    if not cell:
        return "?"
    # "design.add.b_TRELLIS_FF_Q_14" -> "add.b": the register's name, without the cell suffix.
    for marker in ("_TRELLIS_", "_SB_"):
        cell = cell.split(marker)[0]
    return cell.removeprefix("design.").removeprefix("top.")


def plots(report: dict, out_dir: Path) -> list[Path]:
    """area_scaling.png, luts_per_mac.png, fmax.png; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = [r for r in report["results"] if "area" in r]
    written = []
    sc = report.get("scaling")
    if sc:
        fig, ax = plt.subplots(figsize=(5.5, 4))
        ns = [n for n, _ in sc["points"]]
        ax.loglog(ns, [v for _, v in sc["points"]], "o", label="TensorEngine (measured)")
        xs = [ns[0] * (ns[-1] / ns[0]) ** (i / 50) for i in range(51)]
        ax.loglog(xs, [sc["coefficient"] * x ** sc["exponent"] for x in xs], "-",
                  label=f"fit: N^{sc['exponent']:.2f}")
        for dev in ("ecp5-25f", "ecp5-85f"):
            ax.axhline(report["devices"][dev]["luts"], ls=":", color="gray")
            ax.text(ns[0], report["devices"][dev]["luts"] * 1.05,
                    report["devices"][dev]["part"], fontsize=7, color="gray")
        ax.set_xlabel("N (array is N x N)")
        ax.set_ylabel("LUT4-equivalents (ECP5)")
        ax.set_title("Tensor engine area against N")
        ax.legend(fontsize=8)
        fig.tight_layout()
        written.append(out_dir / "area_scaling.png")
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)
    def bars(name, labels, values, marks, xlabel, **bar_kw):
        # A horizontal bar chart with reference lines (x, linestyle, colour, label).
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.barh(labels, values, **bar_kw)
        for x, ls, color, label in marks:
            ax.axvline(x, ls=ls, color=color, label=label)
        ax.set_xlabel(xlabel)
        ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.01), ncol=2, frameon=False)
        ax.tick_params(axis="y", labelsize=7)
        fig.tight_layout()
        written.append(out_dir / name)
        fig.savefig(written[-1], dpi=110)
        plt.close(fig)

    per = [r for r in res if r["macs"] and r["device"] == MAIN_DEVICE
           and r["group"] in ("pe", "tensor_engine", "tensor_engine_formats")]
    if per:
        bars("luts_per_mac.png",
             [r["label"].replace("mul_stages=", "m").replace(" add_stages=", "/a") for r in per],
             [r["area"]["luts"] / r["macs"] for r in per],
             [(737, "--", "C3", "Gemmini int8 PE (Virtex-7)"), (99, "--", "C2", "HakuTPU fp8 MAC"),
              (787, ":", "C4", "HardFloat fp32 adder alone")],
             "LUTs per MAC (ECP5)", label="nclite")
    timed = [r for r in res if fmax_mhz(r) and r["device"] == MAIN_DEVICE]
    if timed:
        bars("fmax.png", [r["label"] for r in timed], [fmax_mhz(r) for r in timed],
             [(report["target_mhz"], "--", "C3", f"target {report['target_mhz']:g} MHz"),
              (39, ":", "C4", "HardFloat fp32 adder alone")],
             "Fmax on ECP5-85F speed 6 (MHz)")
    return written


def write_report(report: dict, out_dir: Path = REPORT_DIR) -> list[Path]:
    """Write the report; a report with failed jobs goes to build/synth/report-failed/ instead of
    over a good one (the caller says so and exits non-zero)."""
    if any("error" in r for r in report["results"]) and out_dir == REPORT_DIR:
        from sim.runner import build_root

        out_dir = build_root() / "synth" / "report-failed"
    out_dir.mkdir(parents=True, exist_ok=True)
    # Run-dependent fields stay out of the committed files.
    report = {**report, "results": [{k: v for k, v in r.items() if k not in ("cached", "seconds")}
                                    for r in report["results"]]}
    (out_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    (out_dir / "report.md").write_text(render_md(report))
    return [out_dir / "report.json", out_dir / "report.md", *plots(report, out_dir)]
