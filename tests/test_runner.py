"""The simulation runner: both simulators, the Icarus time-0 fix, caching, failure reporting."""

import json
import os
import re
from pathlib import Path

import pytest

from sim import icarus, runner
from sim.verify import waves


def test_comb_defined_at_time_zero(simulator):
    runner.run("sim.tb.selftest_design:InitialisedComb", {}, "sim.tb.selftest", simulator)


def test_icarus_rewrite():
    """Icarus gets a copy whose always @* blocks are kicked at time 0; Verilator the original."""
    from amaranth.back import verilog

    from sim.tb.selftest_design import InitialisedComb

    raw = verilog.convert(InitialisedComb(), name="t", emit_src=False)
    assert "always @*" in raw and "initial #0" not in raw
    fixed = icarus.kick_comb_blocks(raw)
    assert fixed.count("initial #0") == 1
    path = runner.elaborate("sim.tb.selftest_design:InitialisedComb", {}, name="selftest_rewrite")
    assert "initial #0" not in path.read_text()
    assert "initial #0" in path.with_suffix(".icarus.v").read_text()


def test_nets_driven_in_pieces_get_one_driver():
    """Icarus' copy drives each wire that Yosys assigns in pieces from one assignment; the
    wires keep their names, and a design built both ways computes the same values (the whole
    suite runs on these copies in Icarus)."""
    text = """module t(a, b, y, z);
  input [3:0] a;
  input b;
  output [7:0] y;
  wire [7:0] y;
  output [1:0] z;
  wire [1:0] z;
  wire \\w.x ;
  assign y[7:4] = a;
  assign { y[3], y[1:0] } = { b, a[1:0] };
  assign y[2] = 1'h1;
  assign { z[1], \\w.x  } = { a[3], b };
  assign z[0] = \\w.x ;
endmodule
"""
    out = icarus.single_driver_nets(text)
    for net in ("y", "z"):
        assert len(re.findall(rf"assign {net}\b(?! \[)", out)) == 1, out
        assert not re.search(rf"assign (\{{ )?{net}\[", out), out
    assert "assign \\w.x  = nclite_net" in out, out
    want = "assign y = { nclite_net1[3:0], nclite_net2[2:2], nclite_net3[0:0], nclite_net2[1:0] };"
    assert want in out, out
    untouched = "module u(a, y);\n  input a;\n  output y;\n  wire y;\n  assign y = a;\nendmodule\n"
    assert icarus.single_driver_nets(untouched) == untouched
    # Left as written: an ascending range, a bit driven twice, a module with a function.
    for body in ("  wire [0:3] y;\n  assign y[0:1] = a;\n  assign y[2:3] = a;\n",
                 "  wire [3:0] y;\n  assign y[3:1] = a;\n  assign y[1:0] = a;\n",
                 "  wire [3:0] y;\n  assign y[3:2] = a;\n  assign y[1:0] = a;\n"
                 "  function f;\n    input [1:0] y;\n    f = y[0];\n  endfunction\n"):
        kept = f"module v(a);\n  input [1:0] a;\n{body}endmodule\n"
        assert icarus.single_driver_nets(kept) == kept, body


def test_uniform_memory_initialisers_become_loops():
    """A memory whose every entry starts at one value is initialised by a loop in the simulation
    Verilog; other initialisers, and short ones, stay as Yosys wrote them."""
    from amaranth.back import verilog
    from amaranth.hdl import Module
    from amaranth.lib import memory

    def design(init, depth):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=8, depth=depth, init=init)
        rd = mem.read_port()
        return m, [rd.addr, rd.data]

    def text(init, depth):
        m, ports = design(init, depth)
        return verilog.convert(m, ports=ports, name="t", emit_src=False)

    zeros = text([], 256)
    assert "mem[255] = 8'h00;" in zeros
    looped = runner._loop_memory_init(zeros)
    assert "mem[255]" not in looped and looped.count("< 256;") == 1, looped
    assert "mem[nclite_init_1] = 8'h00;" in looped
    sevens = runner._loop_memory_init(text([7] * 100, 100))
    assert "< 100;" in sevens and "mem[nclite_init_1] = 8'h07;" in sevens
    for init, depth in (([1, 2] * 64, 128), ([], 16)):  # not uniform; short
        raw = text(init, depth)
        assert runner._loop_memory_init(raw) == raw


def test_elaborate_is_cached_and_keyed_by_params():
    a = runner.elaborate("sim.tb.selftest_design:InitialisedComb", {}, name="selftest_a")
    b = runner.elaborate("sim.tb.selftest_design:InitialisedComb", {}, name="selftest_a")
    c = runner.elaborate("sim.tb.selftest_design:InitialisedComb", {}, name="selftest_c")
    assert a == b and a != c
    assert "/home/" not in a.read_text() and "/work/" not in a.read_text()


def test_failing_cocotb_test_is_reported(simulator):
    with pytest.raises(runner.SimulationFailed, match="seed 7") as failed:
        runner.run("sim.tb.selftest_design:InitialisedComb", {}, "sim.tb.selftest_fails", simulator,
                   seed=7)
    # cocotb rewrites a testbench's asserts (runner.REWRITE_ASSERTION_FILES), so the log shows
    # the values compared, not only the message.
    message, _, first = str(failed.value).partition("\nthe first failure: ")
    log = Path(message.rsplit("log: ", 1)[1]).read_text()
    assert "this failure is expected" in log and "assert 85 == 0" in log, log[-2000:]
    # The message brings the testbench's own words along: no need to open the log.
    assert first.startswith("AssertionError: this failure is expected by tests/test_runner.py")


def test_unknown_simulator():
    with pytest.raises(ValueError, match="simulator"):
        runner.run("sim.tb.selftest_design:InitialisedComb", {}, "sim.tb.selftest", "modelsim")


def test_waves_written_and_path_reported(simulator, capfd, monkeypatch):
    r = runner.run("sim.tb.selftest_design:InitialisedComb", {}, "sim.tb.selftest", simulator,
                   waves=True, run_tag="waves")
    assert r.waves is not None and r.waves.exists() and r.waves.stat().st_size > 0
    # A test's own dump (WAVES unset) is the run's file, not linked in build/waves/: two
    # tests of one design would swap the link under each other.
    assert r.waves.parent.parent.parent.parent == runner.build_root() / "sim"
    assert not r.waves.is_symlink()
    assert runner.shown_path(r.waves) in capfd.readouterr().err
    # Asked for (WAVES=1, as a user's run): linked as build/waves/<top>.<ext> and named so.
    monkeypatch.setenv("WAVES", "1")
    linked = runner.run("sim.tb.selftest_design:InitialisedComb", {}, "sim.tb.selftest",
                        simulator, waves=True, run_tag="waves")
    assert linked.waves == runner.build_root() / "waves" / f"initialised_comb{r.waves.suffix}"
    assert linked.waves.is_symlink()
    assert runner.shown_path(linked.waves) in capfd.readouterr().err
    # FST from both simulators (Verilator: VCD where liblz4-dev is missing), the ports by name.
    assert r.waves.suffix == "." + waves.wave_format(r.waves)
    assert "initialised_comb.y" in waves.signals(r.waves)


def test_testcase_names_match_exactly():
    """``testcase="errors"`` runs the test ``errors``, not also ``bus_errors``."""
    import re

    pattern = re.compile(runner._exact_filter("errors, reset_midway"))
    assert pattern.search("sim.tb.core.errors") and pattern.search("sim.tb_x.reset_midway")
    assert not pattern.search("sim.tb.core.bus_errors")
    assert not pattern.search("sim.tb.core.errors_more")
    assert runner._exact_filter(None) is None


def test_ports_only_models_with_named_internal_signals(simulator):
    """Verilator makes public the top's signals and the internal ones a testbench names;
    Icarus sees every signal."""
    runner.run("sim.tb.selftest_design:WithSubmodule", {}, "sim.tb.selftest_public", simulator,
               public=["inner.count"])


def test_public_control_file():
    text = runner.public_control_file("top", ("engine0.tx__valid", "a.b.c"))
    assert 'public_flat_rw -module "top" -var "*"' in text
    assert 'public_flat_rw -module "top.engine0" -var "tx__valid"' in text
    assert 'public_flat_rw -module "top.a.b" -var "c"' in text
    assert text.count("public_flat_rw") == 3
    for bad in ("count", "", "a..b", "a.b c", 3):
        with pytest.raises(ValueError, match="public must name"):
            runner.public_control_file("top", (bad,))


def test_public_control_file_follows_instances():
    """With the Verilog's hierarchy, a path's scope is the module its instances lead to: a
    module instantiated twice (a ring's one core module) is named once, for both."""
    text = """module top(clk);
  input clk;
  \\top.ring  ring (
    .clk(clk)
  );
endmodule
module \\top.ring (clk);
  input clk;
  core core0 (
    .clk(clk)
  );
  core core1 (
    .clk(clk)
  );
endmodule
module core(clk);
  input clk;
  \\core.sbuf  sbuf (
    .clk(clk)
  );
endmodule
module \\core.sbuf (clk);
  input clk;
  reg [7:0] mem [3:0];
endmodule
"""
    hierarchy = runner.verilog_hierarchy(text)
    assert hierarchy == {"top": {"ring": "top.ring"},
                         "top.ring": {"core0": "core", "core1": "core"},
                         "core": {"sbuf": "core.sbuf"}, "core.sbuf": {}}
    control = runner.public_control_file(
        "top", ("ring.core0.sbuf.mem", "ring.core1.sbuf.mem", "ring.x"), hierarchy)
    assert 'public_flat_rw -module "core.sbuf" -var "mem"' in control
    assert 'public_flat_rw -module "top.ring" -var "x"' in control
    assert control.count("public_flat_rw") == 3, control
    with pytest.raises(ValueError, match="top.ring has no instance 'core2'"):
        runner.public_control_file("top", ("ring.core2.sbuf.mem",), hierarchy)


def test_identical_submodules_are_one_verilog_module(tmp_path, monkeypatch):
    """In the runner's conversion an array's PEs are instances of one PE module, defined once
    and keeping their instance names; outside it, shared() gives the component itself."""
    from hdl.instances import ModuleInstance, shared
    from hdl.pe import PE

    monkeypatch.setenv("NCLITE_BUILD_DIR", str(tmp_path))
    text = runner.elaborate("hdl.systolic:SystolicArray", {"n": 2}).read_text()
    hierarchy = runner.verilog_hierarchy(text)
    pes = {hierarchy["systolic_array"][f"pe_{k}_{m}"] for k in (0, 1) for m in (0, 1)}
    assert len(pes) == 1 and next(iter(pes)).startswith("pe_"), hierarchy["systolic_array"]
    assert len(re.findall(rf"^module {next(iter(pes))}\(", text, re.MULTILINE)) == 1
    pe = PE()
    assert shared(pe, "hdl.pe:PE", {}) is pe
    # share=False (the synthesis flows): every PE a module of its own, named after its path.
    plain = runner.verilog_hierarchy(
        runner.elaborate("hdl.systolic:SystolicArray", {"n": 2}, share=False).read_text())
    assert plain["systolic_array"]["pe_0_1"] == "systolic_array.pe_0_1"
    # Appending modules skips those already defined (a PE module inside two appended cores).
    once = "module a(x);\n  input x;\nendmodule\n"
    both = once + "module b(x);\n  input x;\nendmodule\n"
    assert runner._append_modules(once, both) == both
    assert isinstance(ModuleInstance(PE(), "pe"), ModuleInstance)


def test_shared_copies_are_not_unused_elaboratables(tmp_path, monkeypatch):
    """The copies an instance stands for, and the submodules they hold, are not reported as
    created but never used (Amaranth warns at collection): a ring of two cores, each holding
    the DMA, SRU, ... it made in its constructor."""
    import gc
    import warnings

    from amaranth.hdl import UnusedElaboratable

    monkeypatch.setenv("NCLITE_BUILD_DIR", str(tmp_path))
    gc.collect()  # another test's garbage (a worker runs many) is not this one's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnusedElaboratable)
        text = runner.elaborate("hdl.multicore:CoreRing",
                                {"ranks": 2, "n": 2, "sbuf_words": 16, "psum_banks": 1,
                                 "psum_words": 4, "queue_depth": 2}).read_text()
        gc.collect()
    ring = runner.verilog_hierarchy(text)["core_ring"]
    assert ring["core0"] == ring["core1"], ring
    unused = [str(w.message) for w in caught if issubclass(w.category, UnusedElaboratable)]
    assert not unused, unused[:3]


def test_waves_of_a_ports_only_model_hold_internal_scopes(simulator):
    """Tracing does not depend on what is public: the dump of a ports-only build holds the
    submodule's internal signals."""
    r = runner.run("sim.tb.selftest_design:WithSubmodule", {}, "sim.tb.selftest", simulator,
                   waves=True, run_tag="waves-internal")
    names = waves.signals(r.waves)
    assert "with_submodule.inner.held" in names, sorted(names)
    assert "with_submodule.inner.count" in names


def test_stream_library(simulator):
    """sim/tb/streams.py's source, sink (with back-pressure), monitor and wait_until."""
    runner.run("sim.tb.selftest_design:StreamRegister", {}, "sim.tb.streams_selftest", simulator)


def test_verilator_inlines_above_o0(tmp_path, monkeypatch):
    """A Verilator build above -O0 inlines every module (shared ones run 3x slower as classes
    of their own); the suite's -O0 builds do not ask for it."""
    from sim import toolchain

    monkeypatch.setenv("NCLITE_BUILD_DIR", str(tmp_path))
    toolchain.activate()
    verilog = runner.elaborate("sim.tb.selftest_design:InitialisedComb", {})
    for level, inlined in (("-O0", False), ("-O1", True)):
        flags = re.sub(r"\bOPT_FAST=\S+", f"OPT_FAST={level}", os.environ.get("MAKEFLAGS", ""))
        monkeypatch.setenv("MAKEFLAGS", flags)
        _, build_dir, _ = runner.build("verilator", verilog, verilog.stem, False)
        args = json.loads((build_dir / ".nclite-build").read_text())["args"]
        assert ("--inline-mult" in args) == inlined, (level, args)


def test_timing_log(simulator, tmp_path, monkeypatch):
    """NCLITE_TIMING_LOG: one JSON line per elaboration, build and run, with wall and CPU
    seconds (a fresh build directory, so that nothing is reused)."""
    log = tmp_path / "timing.log"
    monkeypatch.setenv("NCLITE_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setenv("NCLITE_TIMING_LOG", str(log))
    runner.run("sim.tb.selftest_design:InitialisedComb", {}, "sim.tb.selftest", simulator)
    runner.run("sim.tb.selftest_design:InitialisedComb", {}, "sim.tb.selftest", simulator)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in rows] == ["elaborate", "build", "run", "run"], rows
    assert f"/{simulator}" in rows[1]["what"] and f"/{simulator}-" in rows[2]["what"]
    assert all(r["ok"] for r in rows), rows
    # The run's CPU is the simulator's (a child process): more than nothing.
    assert all(r["wall"] >= 0 and r["cpu"] >= 0 for r in rows) and rows[2]["cpu"] > 0
