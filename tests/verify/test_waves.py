"""Waveforms: ``--waves`` dumps FST from both simulators, with Amaranth's names under the
component's scope, and the committed ``docs/waves/tensor_engine.gtkw`` fits those dumps.

What the simulation test checks, per simulator, on the dump of a 2x2 tensor engine running a
2x2x2 GEMM (what ``nclite gemm --array 2 ... --waves`` writes):

* the file exists and is FST (first bytes, not the name); VCD from Verilator only where
  ``liblz4-dev`` is missing (then the runner says so);
* its names and widths, read by ``sim.verify.waves`` with pywellen: the top scope is
  ``tensor_engine`` with the ports as Amaranth names them, the PEs are
  ``tensor_engine.array.pe_<k>_<m>``;
* its values, read back with pywellen: the PSUM rows drained (``drain_resp`` handshakes at
  rising clock edges) are the golden model's result, column by column, and a struct field's
  own signal equals the bits of the plain vector that the save file shows instead;
* every signal the save file names is in the dump with the width the save file expects;
* the committed save file is what ``sim/verify/waves.py`` writes for this dump (both simulators give
  the same file);
* where GTKWave and Xvfb are installed: GTKWave itself opens the dump with the save file and
  finds every trace (it drops the ones it cannot find without a word).

A truncated dump is refused with a ValueError (gtkwave_command then names the dump alone).
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from sim import runner, toolchain
from sim.cli import gemm
from sim.verify import waves

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


def _check_values(dump: Path, golden: np.ndarray, escape: str) -> None:
    """The dump's values, read back with pywellen, against the golden model's result."""
    t = "tensor_engine."
    edges = waves.rising_edges(dump, t + "clk", [t + s for s in (
        "drain_resp__valid", "drain_resp__ready", "drain_resp__payload", "cmd__payload",
        f"{escape}cmd__payload.op", f"{escape}cmd__payload.k")])
    assert len(edges) > 20 and all(b - a == 10_000 for (a, _), (b, _) in itertools.pairwise(edges))
    drained = [v[t + "drain_resp__payload"] for _, v in edges
               if v[t + "drain_resp__valid"] == 1 and v[t + "drain_resp__ready"] == 1]
    m, f = golden.shape  # PSUM word f holds column f of C, row m in bits 32m..32m+31
    assert drained == [sum(int(golden[i, j]) << (32 * i) for i in range(m)) for j in range(f)]
    # The save file shows a struct field as bits of the plain vector (verilog_fields).
    fields = waves.verilog_fields(waves.find_verilog(dump))
    checked = 0
    for _, v in edges:
        vec = v[t + "cmd__payload"]
        if not isinstance(vec, int):  # x before the first command (Icarus)
            continue
        for field in ("op", "k"):
            whole, hi, lo = fields[f"{t}cmd__payload.{field}"]
            assert whole == t + "cmd__payload"
            assert v[f"{t}{escape}cmd__payload.{field}"] == (vec >> lo) & ((2 << (hi - lo)) - 1)
        checked += 1
    assert checked > 20


def test_tensor_engine_waves(simulator, tmp_path, monkeypatch):
    golden = []
    golden_gemm = gemm.golden_gemm
    monkeypatch.setattr(gemm, "golden_gemm",
                        lambda *a, **kw: golden.append(np.asarray(golden_gemm(*a, **kw)))
                        or golden[-1])
    r = gemm.run_gemm(m=2, k=2, f=2, n=2, simulator=simulator, waves=True)
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
    _check_values(dump, golden[0], escape)

    assert waves.missing_signals(waves.TENSOR_ENGINE_GTKW, names) == []
    generated = waves.gtkw_text(names, waves.verilog_fields(waves.find_verilog(dump)))
    assert generated == waves.TENSOR_ENGINE_GTKW.read_text(), (
        "docs/waves/tensor_engine.gtkw is stale: regenerate it with "
        f"'python -m sim.verify.waves {dump}'")
    command = waves.gtkwave_command(dump).split()
    assert command[0] == "gtkwave" and Path(command[1]).resolve() == dump.resolve()
    assert Path(command[2]).resolve() == waves.TENSOR_ENGINE_GTKW

    truncated = tmp_path / dump.name
    truncated.write_bytes(dump.read_bytes()[:dump.stat().st_size // 2])
    with pytest.raises(ValueError):
        waves.signals(truncated)
    assert waves.gtkwave_command(truncated).split()[1:] == [str(truncated)]

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


def test_vcd_values(tmp_path):
    vcd = tmp_path / "dump.vcd"
    vcd.write_text("$timescale 1ps $end\n$scope module top $end\n$var wire 1 ! clk $end\n"
                   "$var wire 4 \" data [3:0] $end\n$var wire 1 # en $end\n"
                   "$upscope $end\n$enddefinitions $end\n"
                   "#0\nx!\nbxx01 \"\nz#\n#5\n1!\nb101 \"\n#10\n0!\n1#\n#15\n1!\n"
                   "b1100 \"\n#20\n0!\n#25\n1!\n")
    assert waves.signals(vcd) == {"top.clk": 1, "top.data": 4, "top.en": 1}
    assert waves.changes(vcd, ["top.data", "top.en"]) == {
        "top.data": [(0, "xx01"), (5, 5), (15, 12)], "top.en": [(0, "z"), (10, 1)]}
    # x -> 1 is a rising edge (Verilog's posedge); each edge sees the values from before it.
    assert waves.rising_edges(vcd, "top.clk", ["top.data", "top.en"]) == [
        (5, {"top.data": "xx01", "top.en": "z"}), (15, {"top.data": 5, "top.en": 1}),
        (25, {"top.data": 12, "top.en": 1})]
    with pytest.raises(KeyError):
        waves.changes(vcd, ["top.nothing"])


def test_vcd_one_bit_elements_are_bits(tmp_path):
    # wellen reads 1-bit VCD variables named x[i] as bits of one vector x (the way some
    # simulators dump a vector bit by bit): a 1-bit array element loses its index. Wider
    # elements (wr__data[0] [31:0]) keep their names, and FST is not affected.
    vcd = tmp_path / "dump.vcd"
    vcd.write_text("$timescale 1ps $end\n$scope module top $end\n$var wire 1 ! x[0] $end\n"
                   "$var wire 1 # x[1] $end\n$var wire 8 $ y[0] [7:0] $end\n$upscope $end\n"
                   "$enddefinitions $end\n#0\n0!\n1#\nb11 $\n")
    assert waves.signals(vcd) == {"top.x": 2, "top.y[0]": 8}


def test_unreadable_dump(tmp_path):
    bad = tmp_path / "dump.fst"
    bad.write_bytes(b"\x00" * 64)
    for read in (waves.wave_format, waves.signals):
        with pytest.raises(ValueError):
            read(bad)
    assert waves.gtkwave_command(bad).split() == ["gtkwave", str(bad)]


def test_gtkw_names_plain_vectors_only():
    # Escaped identifiers (struct fields) are named differently by Icarus (\a.b) and
    # Verilator (a.b): the save file must name only plain vectors, and bits of them.
    named = waves.gtkw_signals(waves.TENSOR_ENGINE_GTKW)
    assert named and all("\\" not in n and "[" not in n for n in named)
    leaves = {n.rsplit(".", 1)[1] for n in named}
    assert {"clk", "cmd__payload", "psum_out", "wr__data"} <= leaves
