"""Waveforms: ``--waves`` dumps FST from both simulators, with Amaranth's names under the
component's scope, and the committed ``docs/waves/tensor_engine.gtkw`` fits those dumps.

What the simulation test checks, per simulator, on the dump of a 2x2 tensor engine running a
2x2x2 GEMM (what ``nclite gemm --array 2 ... --waves`` writes):

* the file exists and is FST (first bytes, not the name); VCD from Verilator only where
  ``liblz4-dev`` is missing (then the runner says so);
* its names and widths, read from the FST hierarchy block (or VCD header) by ``sim.waves``
  without any other tool: the top scope is ``tensor_engine`` with the ports as Amaranth names
  them, the PEs are ``tensor_engine.array.pe_<k>_<m>``;
* every signal the save file names is in the dump with the width the save file expects;
* the committed save file is what ``sim/waves.py`` writes for this dump (both simulators give
  the same file);
* where GTKWave and Xvfb are installed: GTKWave itself opens the dump with the save file and
  finds every trace (it drops the ones it cannot find without a word).

Signal values are not read from the FST here: sim.waves reads only an FST's hierarchy (its
value blocks need a real FST reader). The save file's struct-field slices were compared by hand,
value by value, with the fields Verilator dumps under their own names.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sim import gemm, runner, toolchain, waves

PORTS = ("clk", "rst", "busy", "error", "cmd__valid", "cmd__ready", "cmd__payload",
         "weights__valid", "weights__ready", "weights__payload", "moving__valid",
         "moving__ready", "moving__payload", "drain_req__valid", "drain_req__ready",
         "drain_req__payload", "drain_resp__valid", "drain_resp__ready", "drain_resp__payload")


def _expected_format(simulator: str) -> str:
    return "vcd" if simulator == "verilator" and toolchain.verilator_fst_problem() else "fst"


def _gtkwave_traces(dump: Path, save: Path, tmp_path: Path) -> int:
    """How many traces GTKWave shows for ``dump`` opened with ``save`` (groups count twice)."""
    out = tmp_path / "traces.txt"
    script = tmp_path / "count.tcl"
    script.write_text(f"set f [open {{{out}}} w]\nputs $f [gtkwave::getTotalNumTraces]\n"
                      "close $f\ngtkwave::/File/Quit\n")
    subprocess.run(["xvfb-run", "-a", "gtkwave", "-S", str(script), str(dump), str(save)],
                   capture_output=True, timeout=300, check=True)
    return int(out.read_text())


def test_tensor_engine_waves(simulator, tmp_path):
    r = gemm.run_gemm(m=2, k=2, f=2, n=2, simulator=simulator, waves=True,
                      error_vs_float64=False)
    assert r["bit_exact"], r.get("error")
    dump = Path(r["waves"])
    fmt = _expected_format(simulator)
    assert dump.exists() and dump.suffix == f".{fmt}"
    assert waves.wave_format(dump) == fmt

    names = waves.signals(dump)
    for port in PORTS:
        assert f"tensor_engine.{port}" in names, port
    # A struct field is a signal of its own; Icarus keeps the Verilog escape in its name.
    escape = "\\" if simulator == "icarus" else ""
    assert names[f"tensor_engine.{escape}cmd__payload.op"] == 1
    assert {name.split(".")[0] for name in names} <= {"tensor_engine", "$rootio"}
    assert waves.engine_scope(names) == "tensor_engine"
    assert {f"tensor_engine.array.pe_{k}_{m}.psum_out" for k in (0, 1) for m in (0, 1)} <= set(
        names)

    assert waves.missing_signals(waves.TENSOR_ENGINE_GTKW, names) == []
    generated = waves.gtkw_text(names, waves.verilog_fields(waves.find_verilog(dump)))
    assert generated == waves.TENSOR_ENGINE_GTKW.read_text(), (
        "docs/waves/tensor_engine.gtkw is stale: regenerate it with "
        f"'python -m sim.waves {dump}'")
    command = waves.gtkwave_command(dump).split()
    assert command[0] == "gtkwave" and Path(command[1]).resolve() == dump.resolve()
    assert Path(command[2]).resolve() == waves.TENSOR_ENGINE_GTKW

    if shutil.which("gtkwave") and shutil.which("xvfb-run"):
        groups = waves.tensor_engine_traces(names)
        expected = sum(len(traces) + 2 for _, traces in groups)
        assert _gtkwave_traces(dump, waves.TENSOR_ENGINE_GTKW, tmp_path) == expected


def test_verilator_falls_back_to_vcd_without_lz4(monkeypatch, capsys):
    monkeypatch.setattr(toolchain, "_fst_probe", lambda: (None, "missing liblz4-dev"))
    runner._wave_format.cache_clear()
    try:
        assert runner._wave_format("verilator") == "vcd"
        assert runner._wave_format("verilator") == "vcd"
        assert runner._wave_format("icarus") == "fst"
    finally:
        runner._wave_format.cache_clear()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "VCD, not FST: missing liblz4-dev" in err
    tool = toolchain._check_fst_libs()
    assert not tool.ok and not tool.required and "VCD" in tool.note


def test_doctor_entry_matches_the_probe():
    tool = toolchain._check_fst_libs()
    assert tool.ok == (toolchain.verilator_fst_problem() is None)


def test_vcd_names(tmp_path):
    vcd = tmp_path / "dump.vcd"
    vcd.write_text("$timescale 1ps $end\n$scope module $rootio $end\n"
                   "$var wire 1 ! clk $end\n$upscope $end\n"
                   "$scope module top $end\n$var wire 18 \" cmd__payload [17:0] $end\n"
                   "$var wire 1 # cmd__payload.op $end\n"
                   "$scope module sub $end\n$var wire 32 $ wr__data[0] [31:0] $end\n"
                   "$upscope $end\n$upscope $end\n$enddefinitions $end\n#0\n0!\n")
    assert waves.wave_format(vcd) == "vcd"
    assert waves.signals(vcd) == {"$rootio.clk": 1, "top.cmd__payload": 18,
                                  "top.cmd__payload.op": 1, "top.sub.wr__data[0]": 32}


def test_lz4_block():
    # "ab", then 6 bytes copied from 2 back (an overlapping match), then the literal "c".
    block = bytes([0x22, ord("a"), ord("b"), 2, 0, 0x10, ord("c")])
    assert waves._lz4_block(block, 9) == b"ababababc"
    with pytest.raises(ValueError):
        waves._lz4_block(block, 10)


def test_gtkw_names_plain_vectors_only():
    # Escaped identifiers (struct fields) are named differently by Icarus (\a.b) and
    # Verilator (a.b): the save file must name only plain vectors, and bits of them.
    named = waves.gtkw_signals(waves.TENSOR_ENGINE_GTKW)
    assert named and all("\\" not in n and "[" not in n for n in named)
    leaves = {n.rsplit(".", 1)[1] for n in named}
    assert {"clk", "cmd__payload", "psum_out", "wr__data"} <= leaves
