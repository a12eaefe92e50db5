"""``python -m sim.verify.formal [--fast] [--list] [--engine E] [--summary PATH] [NAME...]``: run
formal properties.

Prints one line per property (name, mode, depth, engine, result, seconds), writes
``build/formal/results.json`` and ``build/formal/results.md``, and exits 1 if any result is
not the expected one (PASS, or FAIL for a mutant). ``--summary PATH`` also writes the results
without the machine's paths (``make formal`` writes ``docs/formal.json``, the README's figures);
only a run of every property may write it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from .flow import BUILD_DIR, ENGINES, run_property
from .registry import MUTANTS, PROPERTIES, by_name, how


def _markdown(results, total: float) -> str:
    lines = ["# Formal verification results", "",
             f"`python -m sim.verify.formal`: {sum(r.ok for r in results)}/{len(results)} as "
             f"expected, {total:.0f} s.", "",
             "| property | mode | depth | engine | result | expected | seconds |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.name} | {r.mode} | {r.depth} | {r.engine} | {r.status} | "
                     f"{r.expected} | {r.seconds:.1f} |")
    failed = [r for r in results if not r.ok]
    if failed:
        lines += ["", "## Not as expected", ""]
        for r in failed:
            lines.append(f"* {r.name}: {r.status} ({'; '.join(r.failed) or r.detail}) "
                         f"trace: {r.trace or '-'}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.verify.formal", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help="properties to run")
    parser.add_argument("--fast", action="store_true", help="only the make-test subset")
    parser.add_argument("--list", action="store_true", help="list the properties and exit")
    parser.add_argument("--summary", type=Path, metavar="PATH",
                        help="also write the results without paths here (every property only)")
    parser.add_argument("--engine", choices=sorted(ENGINES),
                        help="run every property with this solver instead of its own")
    args = parser.parse_args(argv)
    try:
        props = by_name(args.names) if args.names else PROPERTIES + MUTANTS
    except KeyError as exc:
        parser.error(exc.args[0])
    if args.fast:
        props = [p for p in props if p.fast]
    if args.summary and (args.names or args.fast or args.engine):
        parser.error("--summary needs a run of every property (no NAME, --fast or --engine)")
    if args.list:
        for p in props:
            print(f"{p.name:32} {p.group:9} {how(p.mode, p.depth):32} "
                  f"{'fast' if p.fast else 'slow':4}  expect {p.expect}\n    {p.doc}")
        return 0
    results = []
    start = time.monotonic()
    for p in props:
        r = run_property(p, engine=args.engine)
        results.append(r)
        mark = "ok" if r.ok else "NOT AS EXPECTED"
        extra = f"  {'; '.join(r.failed)}" if r.failed and not r.ok else ""
        extra += f"  {r.detail}" if r.detail and not r.ok else ""
        extra += f"  trace: {r.trace}" if r.trace and not r.ok else ""
        print(f"{r.name:32} {r.mode:5} {r.depth:3} {r.engine:9} {r.status:8} "
              f"{r.seconds:7.1f}s  {mark}{extra}", flush=True)
    total = time.monotonic() - start
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    (BUILD_DIR / "results.json").write_text(json.dumps(
        {"seconds": round(total, 1), "results": [r.as_dict() for r in results]}, indent=2)
        + "\n")
    (BUILD_DIR / "results.md").write_text(_markdown(results, total))
    if args.summary:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or "?"
        keep = ("name", "group", "mode", "depth", "engine", "status", "expected", "seconds",
                "ok")
        args.summary.write_text(json.dumps(
            {"commit": commit, "seconds": round(total, 1),
             "results": [{k: r.as_dict()[k] for k in keep} for r in results]}, indent=1)
            + "\n")
    bad = [r for r in results if not r.ok]
    print(f"{len(results) - len(bad)}/{len(results)} as expected in {total:.0f} s "
          f"(build/formal/results.md)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
