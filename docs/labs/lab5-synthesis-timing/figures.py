"""The pictures of lab 5 (synthesis and timing), from the project's own code and report.

    .venv/bin/python docs/labs/lab5-synthesis-timing/figures.py

* ``img/pipeline_trace.png`` -- ``Fp32Multiplier(stages=3)`` run in amaranth.sim with clock-enable
  stalls: the operation each pipeline register holds, cycle by cycle (the registers are the ones
  ``hdl.pipeline.delay`` builds, read directly and decoded).
* ``img/adder_cuts.png`` -- where ``Fp32Adder`` puts its registers for each stage count
  (``hdl.fp32_add._BOUNDARIES``) and the Fmax its design note records for each.
* ``img/area_per_mac.png`` -- the tensor engine's LUTs against N, and LUTs and FFs per MAC from
  the PE to the NeuronCore (``synth/report.json``).
* ``img/critical_paths.png`` -- logic and routing delay of every critical path in
  ``synth/report.json``.

Deterministic: no randomness, the Agg backend, no software version in the PNG metadata.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

LAB = Path(__file__).resolve().parent
ROOT = LAB.parents[2]
IMG = LAB / "img"
sys.path.insert(0, str(ROOT))

_SAVE = {"dpi": 110, "metadata": {"Software": None}}


# --- Fp32Multiplier(stages=3), register by register -------------------------------------------

def _trace_multiplier():
    """Run the 3-stage multiplier with stalls; return (en, inputs, {register: ops}) per cycle.

    An operation is named by its index; ``None`` is a register still holding its reset value
    or a bubble."""
    from amaranth.sim import Simulator

    import hdl.fp32_mul as fm

    registers = {}
    original = fm.delay

    def recording_delay(m, value, cycles, *, name, en=None):
        out = original(m, value, cycles, name=name, en=en)
        if cycles:
            registers[name] = out
        return out

    fm.delay = recording_delay
    try:
        dut = fm.Fp32Multiplier(stages=3)
        sim = Simulator(dut)  # elaborates the design, so `registers` fills here
    finally:
        fm.delay = original
    assert list(registers) == ["prod", "norm", "result"], registers

    ops = [np.float32(i + 1) * np.float32(1.5) for i in range(8)]  # exact, distinct products
    a_in = [np.float32(i + 1).view(np.uint32) for i in range(8)]
    b_in = np.float32(1.5).view(np.uint32)
    by_value = {float(p): i for i, p in enumerate(ops)}
    enable = [1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1]

    def decode(name, c):
        if name == "prod":
            value = 0.0 if c.zero or c.sig == 0 else c.sig * 2.0 ** (c.exp - 46)
        elif name == "norm":
            value = 0.0 if c.zero or c.exp == 0 else (2**23 + c.man) * 2.0 ** (c.exp - 150)
        else:
            value = float(np.uint32(c.as_value().value).view(np.float32))
        return by_value.get(value)

    rows = {"en": [], "in": [], "prod": [], "norm": [], "result": []}

    async def bench(ctx):
        nxt = 0
        for en in enable:
            op = nxt if nxt < len(ops) else None
            ctx.set(dut.en, en)
            ctx.set(dut.a, int(a_in[op]) if op is not None else 0)
            ctx.set(dut.b, int(b_in) if op is not None else 0)
            rows["en"].append(en)
            rows["in"].append(op)
            for name, reg in registers.items():
                rows[name].append(decode(name, ctx.get(reg)))
            await ctx.tick()
            if en:
                nxt += 1

    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # The output is the product of the operation that entered three enabled edges earlier.
    entered = [op for en, op in zip(rows["en"], rows["in"], strict=True) if en]
    shown = [r for en, r in zip(rows["en"], rows["result"], strict=True) if en]
    assert shown[3:] == entered[:len(shown) - 3], (entered, shown)
    return rows


def pipeline_trace(path: Path) -> None:
    rows = _trace_multiplier()
    cycles = len(rows["en"])
    labels = [("in", "a, b at the inputs"), ("prod", "prod_d1  (after the 24x24 multiply)"),
              ("norm", "norm_d1  (after normalisation)"), ("result", "result_d1  = result")]
    colors = plt.get_cmap("tab10").colors
    fig, ax = plt.subplots(figsize=(11, 3.6))
    for t in range(cycles):
        if not rows["en"][t]:
            ax.add_patch(Rectangle((t, -0.5), 1, len(labels) + 1, color="0.88", zorder=0))
        ax.text(t + 0.5, 0, str(rows["en"][t]), ha="center", va="center", fontsize=10,
                color="black" if rows["en"][t] else "firebrick")
        for r, (key, _) in enumerate(labels, start=1):
            op = rows[key][t]
            if op is None:
                ax.text(t + 0.5, r, "·", ha="center", va="center", color="0.5")
                continue
            ax.add_patch(Rectangle((t + 0.08, r - 0.38), 0.84, 0.76, color=colors[op],
                                   alpha=0.85, zorder=1))
            ax.text(t + 0.5, r, "ABCDEFGH"[op], ha="center", va="center", color="white",
                    fontweight="bold", zorder=2)
    ax.set_xlim(0, cycles)
    ax.set_ylim(len(labels) + 0.5, -0.5)
    ax.set_yticks(range(len(labels) + 1), ["en"] + [text for _, text in labels])
    ax.set_xticks(np.arange(cycles) + 0.5, [str(t) for t in range(cycles)])
    ax.set_xlabel("clock cycle (grey: en = 0, every register holds)")
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title("Fp32Multiplier(stages=3) in amaranth.sim: operation A..H (A = 1.0 x 1.5, "
                 "B = 2.0 x 1.5, ...) in each register", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, **_SAVE)
    plt.close(fig)


# --- Fp32Adder: the cuts for each stage count --------------------------------------------------

_PHASES = [("unpacked", "compare\nswap"), ("shifted", "coarse\nshift"),
           ("aligned", "fine shift\nsticky"), ("added", "add\n28 bit"),
           ("counted", "leading\nzeros"), ("normalised", "normalise\nshift"),
           ("rounded", "round\npack")]


def _adder_fmax() -> dict[int, float]:
    """The per-stage Fmax table of Fp32Adder's design note, checked against _BOUNDARIES."""
    from hdl.fp32_add import _BOUNDARIES

    text = (ROOT / "hdl" / "fp32_add.py").read_text()
    fmax = {}
    for m in re.finditer(r"^\s*#\s+(\d)\s+([a-z, ]+?)\s+\((\d+) MHz\)\s*$", text, re.M):
        stages, names = int(m[1]), m[2].strip()
        want = set(_BOUNDARIES[stages])
        got = {p for p, _ in _PHASES} if names == "every boundary" else set(names.split(", "))
        assert got == want, (stages, got, want)
        fmax[stages] = float(m[3])
    assert sorted(fmax) == list(range(1, 8)), fmax
    return fmax


def adder_cuts(path: Path) -> None:
    from hdl.fp32_add import _BOUNDARIES

    fmax = _adder_fmax()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.6), width_ratios=[3.2, 1], sharey=True)
    box, gap = 1.0, 0.35
    for s in range(8):
        y = s
        ax.plot([-gap + 0.2, len(_PHASES) * (box + gap) - 0.2], [y, y], color="0.35", lw=0.8,
                zorder=0)
        ax.add_patch(Rectangle((-gap + 0.06, y - 0.38), 0.22, 0.76, color="0.6"))
        x = 0.0
        for name, _ in _PHASES:
            ax.add_patch(Rectangle((x, y - 0.3), box, 0.6, facecolor="#dbe8f5",
                                   edgecolor="#4a72a8"))
            x += box
            if name in _BOUNDARIES[s]:
                ax.add_patch(Rectangle((x + 0.06, y - 0.38), 0.22, 0.76, color="firebrick"))
            elif name == "rounded":  # the harness captures a combinational output
                ax.add_patch(Rectangle((x + 0.06, y - 0.38), 0.22, 0.76, color="0.6"))
            x += gap
    for i, (_, label) in enumerate(_PHASES):
        ax.text(i * (box + gap) + box / 2, -0.75, label, ha="center", va="bottom", fontsize=8)
    ax.set_xlim(-gap, len(_PHASES) * (box + gap))
    ax.set_ylim(7.6, -1.9)
    ax.set_yticks(range(8), [f"stages={s}" for s in range(8)])
    ax.set_xticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title("Fp32Adder: red = a pipeline register of the adder, grey = the harness's "
                 "registers", fontsize=10)
    ys = sorted(fmax)
    bx.barh(ys, [fmax[s] for s in ys], color="#4a72a8", height=0.6)
    for s in ys:
        bx.text(fmax[s] + 2, s, f"{fmax[s]:.0f}", va="center", fontsize=9)
    bx.text(2, 0, "(not measured)", va="center", fontsize=8, color="0.4")
    bx.set_xlim(0, 150)
    bx.set_xlabel("Fmax, MHz (ECP5-85F speed 6)")
    bx.set_title("design note of hdl/fp32_add.py", fontsize=10)
    for spine in ("top", "right"):
        bx.spines[spine].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, **_SAVE)
    plt.close(fig)


# --- synth/report.json: area per MAC -----------------------------------------------------------

def _report() -> dict:
    return json.loads((ROOT / "synth" / "report.json").read_text())


def area_per_mac(path: Path) -> None:
    rep = _report()
    res = [r for r in rep["results"] if r["device"] == "ecp5-85f" and "error" not in r]

    def pick(group, **params):
        return [r for r in res if r["group"] == group
                and all(r["params"].get(k) == v for k, v in params.items())]

    te = sorted(pick("tensor_engine"), key=lambda r: r["n"])
    sc = rep["scaling"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    ns = np.array([r["n"] for r in te])
    ax.loglog(ns, [r["area"]["luts"] for r in te], "o", color="#4a72a8", ms=8,
              label="TensorEngine, all formats (Yosys)")
    fine = np.geomspace(1.5, 10, 50)
    ax.loglog(fine, sc["coefficient"] * fine ** sc["exponent"], "-", color="#4a72a8", lw=1,
              label=f"fit {sc['coefficient']:.0f} N^{sc['exponent']:.2f}")
    n2 = te[0]["area"]["luts"] / te[0]["n"] ** 2
    ax.loglog(fine, n2 * fine ** 2, "--", color="0.5", lw=1, label="N^2 through N = 2")
    ax.axhline(rep["devices"]["ecp5-85f"]["luts"], color="firebrick", lw=1)
    ax.text(1.6, rep["devices"]["ecp5-85f"]["luts"] * 1.12, "LUTs of an ECP5-85F",
            color="firebrick", fontsize=8)
    ax.set_xticks([2, 4, 8], ["2", "4", "8"])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("N (an N x N array)")
    ax.set_ylabel("LUTs")
    ax.set_title("LUTs of the tensor engine against N", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")

    points = [("PE", pick("pe"))]
    points += [("column\nof 4", pick("pe_column"))]
    points += [(f"TE\nN={r['n']}", [r]) for r in te]
    points += [(f"core\nN={r['n']}", [r]) for r in sorted(pick("core"), key=lambda r: r["n"])]
    names = [p for p, _ in points]
    recs = [rs[0] for _, rs in points]
    x = np.arange(len(recs))
    luts = [r["area"]["luts"] / r["macs"] for r in recs]
    ffs = [r["area"]["ffs"] / r["macs"] for r in recs]
    bx.bar(x - 0.2, luts, 0.4, color="#4a72a8", label="LUTs per MAC")
    bx.bar(x + 0.2, ffs, 0.4, color="#e39c37", label="FFs per MAC")
    for i, v in enumerate(luts):
        bx.text(i - 0.2, v + 40, f"{v:.0f}", ha="center", fontsize=7, rotation=90,
                va="bottom")
    bx.set_xticks(x, names, fontsize=8)
    bx.set_ylim(0, max(luts) * 1.25)
    bx.set_title("per MAC, ECP5-85F (1 DSP per MAC in every PE)", fontsize=10)
    bx.legend(fontsize=8, loc="upper left")
    for a in (ax, bx):
        for spine in ("top", "right"):
            a.spines[spine].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, **_SAVE)
    plt.close(fig)


def critical_paths(path: Path) -> None:
    rep = _report()
    rows = []
    for r in rep["results"]:
        t = r.get("timing") or {}
        cp = t.get("critical_path")
        if cp and t.get("fmax_mhz"):
            short = {"ecp5-85f": "85F", "ecp5-25f": "25F", "ice40-up5k": "UP5K"}[r["device"]]
            rows.append((f"{r['label']}  [{short}]", cp, t["fmax_mhz"]))
    for board, b in rep.get("boards", {}).items():
        cp = b.get("critical_path")
        if cp:
            rows.append((f"{board} bitstream: NeuronCore N={b['core']['n']} + UART + RAM",
                         cp, min(b["fmax_mhz"].values())))
    fig, ax = plt.subplots(figsize=(11, 0.42 * len(rows) + 1.2))
    y = np.arange(len(rows))
    logic = [cp["logic_ns"] for _, cp, _ in rows]
    route = [cp["routing_ns"] for _, cp, _ in rows]
    ax.barh(y, logic, color="#4a72a8", label="logic (LUTs, carry chains, DSPs)")
    ax.barh(y, route, left=logic, color="#b8c9de", label="routing (wires between them)")
    for i, (_, cp, f) in enumerate(rows):
        ax.text(cp["logic_ns"] + cp["routing_ns"] + 0.4, i,
                f"{f:.1f} MHz, {cp['logic_levels']} levels", va="center", fontsize=8)
    ax.set_yticks(y, [label for label, _, _ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(a + b for a, b in zip(logic, route, strict=True)) * 1.3)
    ax.set_xlabel("delay of the critical path, ns (the clock period must be longer)")
    ax.set_title("Critical paths in synth/report.json (nextpnr, seed 1, target 100 MHz)",
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    for spine in ("top", "right"):
        ax.spines[spine].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, **_SAVE)
    plt.close(fig)


def main() -> None:
    IMG.mkdir(exist_ok=True)
    for name, fn in [("pipeline_trace", pipeline_trace), ("adder_cuts", adder_cuts),
                     ("area_per_mac", area_per_mac), ("critical_paths", critical_paths)]:
        out = IMG / f"{name}.png"
        fn(out)
        print(out.relative_to(ROOT))


if __name__ == "__main__":
    main()
