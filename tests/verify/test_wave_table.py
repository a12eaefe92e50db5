"""``nclite waves show`` / ``list``: a dump's values as a text table (sim/verify/wave_table.py).

The dumps here are written by hand in VCD (values chosen so that each rule shows: an x, a
change between edges that no edge samples, two names that end alike), and the expected
tables are derived from the rules of the module's docstring, not from a run.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from sim import runner
from sim.cli import main
from sim.verify import wave_table

VCD = ("$timescale 1ps $end\n$scope module top $end\n$var wire 1 ! clk $end\n"
       "$var wire 4 \" data [3:0] $end\n$var wire 1 # en $end\n"
       "$var wire 32 % acc [31:0] $end\n"
       "$scope module sub $end\n$var wire 1 & clk $end\n$var wire 16 ' data [15:0] $end\n"
       "$upscope $end\n$upscope $end\n$enddefinitions $end\n"
       "#0\n0!\n0&\nbxx01 \"\nz#\nb0 %\nb0 '\n"
       "#5\n1!\n1&\nb101 \"\n#10\n0!\n0&\n1#\nb111111100000000000000000000000 %\n"
       "#12\nb1010 \"\n#13\nb1100 \"\n"  # between edges: the edge at 15 samples 1100 only
       "#15\n1!\n1&\nb11111110000000 '\n#20\n0!\n0&\n#25\n1!\n1&\n#30\n0!\n0&\n#35\n1!\n1&\n")


@pytest.fixture
def vcd(tmp_path):
    path = tmp_path / "dump.vcd"
    path.write_text(VCD)
    return path


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()[1:]]


def test_rows_are_rising_edges_each_value_as_the_edge_samples_it(vcd):
    # Edges at 5, 15, 25, 35 ps are cycles 0..3; each row holds the values at t - 1.
    rows = _rows(wave_table.table(vcd, ["top.data", "en"], clock="top.clk", every=True))
    assert rows == [["cycle", "time", "(ns)", "data", "en"],
                    ["0", "0.005", "xx01", "z"],
                    ["1", "0.015", "c", "1"], ["2", "0.025", "c", "1"], ["3", "0.035", "c", "1"]]
    # Only changes by default (the first and last rows shown always).
    assert [r[0] for r in _rows(wave_table.table(vcd, ["top.data"], clock="top.clk"))[1:]] == [
        "0", "1", "3"]
    assert [r[0] for r in _rows(wave_table.table(vcd, ["top.data"], clock="top.clk",
                                                 start=1, stop=2))[1:]] == ["1", "2"]


def test_radices(vcd):
    acc = wave_table.table(vcd, ["acc", "sub.data"], clock="top.clk", radix="float",
                           start=1, stop=1)
    assert _rows(acc)[1][2:] == ["1", "0"]  # 0x3f800000 as fp32; sub.data 0 as bf16
    bf16 = wave_table.table(vcd, ["sub.data"], clock="top.clk", radix="float", start=2, stop=2)
    assert _rows(bf16)[1][2:] == ["1"]  # 0x3f80 as bf16
    assert _rows(wave_table.table(vcd, ["top.data"], clock="top.clk", radix="bin",
                                  start=1, stop=1))[1][2:] == ["1100"]
    assert _rows(wave_table.table(vcd, ["top.data"], clock="top.clk", radix="dec",
                                  start=1, stop=1))[1][2:] == ["12"]
    assert _rows(wave_table.table(vcd, ["top.data"], clock="top.clk", radix="sdec",
                                  start=1, stop=1))[1][2:] == ["-4"]  # 0b1100 of 4 bits
    with pytest.raises(ValueError, match="radix"):
        wave_table.table(vcd, ["top.data"], radix="oct")


def test_names_ends_globs_and_misses(vcd):
    names = wave_table.waves.signals(vcd)
    assert wave_table.match(names, ["data"]) == ["top.data", "top.sub.data"]
    assert wave_table.match(names, ["top.data"]) == ["top.data"]
    assert wave_table.match(names, ["*.clk"]) == ["top.clk", "top.sub.clk"]
    with pytest.raises(wave_table.SignalNotFound, match="close: top.data"):
        wave_table.match(names, ["top.dat"])
    # `clk` selects two clocks: the top's is the one a bare `clk` means.
    assert wave_table.table(vcd, ["en"]).startswith("cycle c = rising edge c of top.clk ")
    with pytest.raises(ValueError, match="selects 0 1-bit signals"):
        wave_table.table(vcd, ["en"], clock="top.data")


def test_without_a_clock_a_row_per_change(vcd):
    rows = _rows(wave_table.table(vcd, ["top.data"], clock=None))
    assert rows == [["time", "(ns)", "data"], ["0.000", "xx01"], ["0.005", "5"], ["0.012", "a"],
                    ["0.013", "c"]]
    # --from between two changes: its first row is the state at that time.
    rows = _rows(wave_table.table(vcd, ["top.data"], clock=None, start=7, stop=12))
    assert rows == [["time", "(ns)", "data"], ["0.007", "5"], ["0.012", "a"]]


def test_cli(vcd):
    cli = CliRunner()
    r = cli.invoke(main, ["waves", "show", str(vcd), "top.data", "--clock", "top.clk",
                          "--to", "1"])
    assert r.exit_code == 0, r.output
    assert _rows(r.output)[1:] == [["0", "0.005", "xx01"], ["1", "0.015", "c"]]
    r = cli.invoke(main, ["waves", "list", str(vcd), "*data"])
    assert r.output.splitlines() == ["top.data  [4]", "top.sub.data  [16]"]
    r = cli.invoke(main, ["waves", "show", str(vcd), "nothing"])
    assert r.exit_code == 1 and r.output.count("\n") == 1 and "no signal 'nothing'" in r.output
    r = cli.invoke(main, ["waves", "show", str(vcd.with_name("none.fst")), "x"])
    assert r.exit_code == 1 and "no dump" in r.output and r.output.count("\n") == 1


def test_latest_dump_is_linked_in_build_waves(tmp_path, monkeypatch):
    monkeypatch.setenv("NCLITE_BUILD_DIR", str(tmp_path / "build"))
    first = tmp_path / "build" / "sim" / "te-1" / "runs" / "a" / "dump.fst"
    second = first.parent.parent / "b" / "te.fst"
    for path in (first, second):
        path.parent.mkdir(parents=True)
        path.write_text(path.parent.name)
    link = runner.link_waves(first, "tensor_engine")
    assert link == tmp_path / "build" / "waves" / "tensor_engine.fst" and link.read_text() == "a"
    assert runner.link_waves(second, "tensor_engine") == link and link.read_text() == "b"
    assert not link.readlink().is_absolute()  # the tree can move
    monkeypatch.chdir(tmp_path)
    assert runner.shown_path(link) == "build/waves/tensor_engine.fst"
    assert runner.shown_path("/elsewhere/x.fst") == "/elsewhere/x.fst"


def test_a_clock_that_never_rises_is_said_so(tmp_path):
    vcd = tmp_path / "flat.vcd"
    vcd.write_text("$timescale 1ps $end\n$scope module top $end\n$var wire 1 ! clk $end\n"
                   "$var wire 1 # en $end\n$upscope $end\n$enddefinitions $end\n#0\n0!\n0#\n"
                   "#5\n1#\n")
    with pytest.raises(ValueError, match="top.clk never rises"):
        wave_table.table(vcd, ["en"])
