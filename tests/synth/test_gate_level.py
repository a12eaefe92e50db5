# amaranth: UnusedElaboratable=no
"""Gate-level simulation (issue 25, point 3): designs after Yosys's ``synth_ecp5``, with the
cells' simulation models (`synth/gate_level.py`), run by the RTL's own cocotb testbenches.

`make test`: the two cell models this project writes (Yosys ships MULT18X18D and DP16KD as
black boxes) against references computed here, and two synthesized designs that use them: the
board's AXI memory (block RAM, true dual-port) in both simulators; the fp32 multiplier (DSPs)
in both in `make test-full` (make test's budget, tests/conftest.py).
`make test-full`: the board top (core, DRAM, UART bridge) running the board's UART GEMM test,
bit-exact with golden, in both simulators.
"""

import random
import subprocess

import pytest

from sim import runner, toolchain
from synth import gate_level


def _icarus(tmp_path, testbench: str, top: str) -> str:
    """Compile ``testbench`` with the project's cell models in Icarus (the 4-state simulator:
    the models' X on undefined behaviour must show), run it, return its output."""
    toolchain.activate()
    src = tmp_path / "tb.v"
    src.write_text(testbench + "\n" + gate_level.MULT18X18D_MODEL + "\n"
                   + gate_level.DP16KD_MODEL)
    out = tmp_path / "tb.vvp"
    subprocess.run(["iverilog", "-g2012", "-s", top, "-o", str(out), str(src)], check=True,
                   capture_output=True, text=True)
    run = subprocess.run(["vvp", "-n", str(out)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_mult18x18d_model_signed_and_unsigned(tmp_path, seed):
    """P = A x B over 18-bit operands, each signed when its SIGNEDx is 1: 400 random products
    and the corners (0, 1, -1, the largest and smallest values) in all four signednesses,
    references in Python."""
    rng = random.Random(seed)
    corners = [0, 1, 0x1FFFF, 0x20000, 0x3FFFF]
    cases = [(a, b, sa, sb) for a in corners for b in corners for sa in (0, 1) for sb in (0, 1)]
    cases += [(rng.getrandbits(18), rng.getrandbits(18), i % 2, (i // 2) % 2)
              for i in range(400)]
    lines = []
    for a, b, sa, sb in cases:

        def value(x, signed):
            return x - (1 << 18) if signed and x >> 17 else x

        p = (value(a, sa) * value(b, sb)) & ((1 << 36) - 1)
        lines.append(f"{sa:x}{sb:x}_{a:05x}_{b:05x}_{p:09x}")
    (tmp_path / "vectors.hex").write_text("\n".join(lines) + "\n")
    a_pins = ", ".join(f".A{i}(a[{i}])" for i in range(18))
    b_pins = ", ".join(f".B{i}(b[{i}])" for i in range(18))
    p_pins = ", ".join(f".P{i}(p[{i}])" for i in range(36))
    testbench = f"""
module tb;
  reg [87:0] vectors [0:{len(lines) - 1}];
  reg [17:0] a, b; reg sa, sb; wire [35:0] p; integer i, bad = 0;
  MULT18X18D dut({a_pins}, {b_pins}, .SIGNEDA(sa), .SIGNEDB(sb), {p_pins});
  initial begin
    $readmemh("{tmp_path}/vectors.hex", vectors);
    for (i = 0; i < {len(lines)}; i = i + 1) begin
      {{sa, sb}} = {{vectors[i][80], vectors[i][76]}};
      a = vectors[i][73:56]; b = vectors[i][53:36];
      #1;
      if (p !== vectors[i][35:0]) begin
        bad = bad + 1;
        $display("MISMATCH a=%h b=%h sa=%b sb=%b p=%h want %h", a, b, sa, sb, p, vectors[i][35:0]);
      end
    end
    $display("checked %0d, %0d wrong", i, bad);
    $finish;
  end
endmodule
"""
    out = _icarus(tmp_path, testbench, "tb")
    assert f"checked {len(lines)}, 0 wrong" in out, f"seed {seed}: {out[-2000:]}"


def test_dp16kd_model_modes_and_collisions(tmp_path):
    """Reads a cycle after the address, byte enables, each WRITEMODE's output on a write (the
    old word, the new one, or the last read kept), the output held at 0 while reset is (both
    RESETMODEs), and X where the chip leaves a same-word read/write of the two ports
    undefined."""

    def ram(name, mode, resetmode="SYNC"):
        pins = []
        for port in "AB":
            pins += [f".DI{port}{i}(di{port}_{name}[{i}])" for i in range(18)]
            pins += [f".DO{port}{i}(do{port}_{name}[{i}])" for i in range(18)]
            pins += [f".AD{port}{i}(ad{port}_{name}[{i}])" for i in range(14)]
            pins += [f".CLK{port}(clk)", f".CE{port}(1'b1)", f".OCE{port}(1'b1)",
                     f".WE{port}(we{port}_{name})", f".RST{port}(rst{port}_{name})",
                     f".CS{port}0(1'b0)", f".CS{port}1(1'b0)", f".CS{port}2(1'b0)"]
        decl = "".join(f"  reg [17:0] di{p}_{name} = 0; wire [17:0] do{p}_{name}; "
                       f"reg [13:0] ad{p}_{name} = 0; reg we{p}_{name} = 0, "
                       f"rst{p}_{name} = 0;\n" for p in "AB")
        return (decl + f'  DP16KD #(.WRITEMODE_A("{mode}"), .WRITEMODE_B("{mode}"), '
                f'.RESETMODE("{resetmode}")) {name}({", ".join(pins)});\n')

    def word(addr, be=3):
        return f"{{4'd{addr >> 6}, 6'd{addr & 63}, 2'b0, 2'd{be}}}"

    def all_a(text):  # the same port-A assignment on the three RAMs
        return " ".join(text.replace("{r}", r) for r in ("rbw", "wt", "nrm"))

    # Each step: drive the ports, clock once, then check (after the edge) the outputs.
    testbench = f"""
module tb;
  reg clk = 0; integer bad = 0;
{ram("rbw", "READBEFOREWRITE", "ASYNC")}{ram("wt", "WRITETHROUGH")}{ram("nrm", "NORMAL")}
  task step; begin #1 clk = 1; #1 clk = 0; end endtask
  task want(input [17:0] got, input [17:0] expected, input [8*32:1] what); begin
    if (got !== expected) begin bad = bad + 1; $display("%0s: %h, want %h", what, got, expected);
    end end endtask
  initial begin
    // Word 5 = 0x2abcd, then a read of word 7 (0) into the outputs.
    {all_a("adA_{r} = " + word(5) + "; diA_{r} = 18'h2abcd; weA_{r} = 1;")}
    step;
    {all_a("adA_{r} = " + word(7) + "; weA_{r} = 0;")}
    step;
    want(doA_nrm, 18'h0, "read of word 7");
    // Word 5 = 0x1234 on each RAM: what each write mode shows.
    {all_a("adA_{r} = " + word(5) + "; diA_{r} = 18'h01234; weA_{r} = 1;")}
    step;
    want(doA_rbw, 18'h2abcd, "read-before-write: old word");
    want(doA_wt, 18'h01234, "write-through: new word");
    want(doA_nrm, 18'h0, "normal: last read kept");
    // Port B reads word 5; port A writes the low byte of word 5 only (byte enable 01).
    {all_a("weA_{r} = 0;")} adB_rbw = {word(5)}; adB_wt = {word(5)};
    step;
    want(doB_rbw, 18'h01234, "port B reads port A's word");
    adA_wt = {word(5, 1)}; diA_wt = 18'h3ffff; weA_wt = 1;
    step;
    want(doA_wt, 18'h013ff, "byte enable 01: bits 8..0");  // 0x01234: 9 << 9 kept
    want(doB_wt, 18'hxxxxx, "B reads while A writes");
    weA_wt = 0;
    step;
    want(doB_wt, 18'h013ff, "the merged word");
    // Reset held: the output is 0 through clock edges (ASYNC and SYNC), reads resume after.
    rstB_rbw = 1; rstB_wt = 1;
    #1 want(doB_rbw, 18'h0, "asynchronous reset, at once");
    step;
    want(doB_rbw, 18'h0, "asynchronous reset held");
    want(doB_wt, 18'h0, "synchronous reset");
    rstB_rbw = 0; rstB_wt = 0;
    step;
    want(doB_rbw, 18'h01234, "after reset");
    // Both ports write word 9 on one edge: the word is undefined.
    adA_rbw = {word(9)}; adB_rbw = {word(9)}; diA_rbw = 1; diB_rbw = 2;
    weA_rbw = 1; weB_rbw = 1;
    step;
    weA_rbw = 0; weB_rbw = 0;
    step;
    want(doA_rbw, 18'hxxxxx, "both wrote: undefined");
    $display("%0d wrong", bad);
    $finish;
  end
endmodule
"""
    out = _icarus(tmp_path, testbench, "tb")
    assert "\n0 wrong" in "\n" + out, out[-2000:]


@pytest.mark.parametrize("design, params, test_module, testcase, env", [
    ("hdl.fp32_mul:Fp32Multiplier", {"stages": 2}, "sim.tb.fp32_arith",
     "multiplier_matches_golden", {"NCLITE_VECTORS": "500"}),
    ("hdl.axi_mem:AxiMemory", {"size_bytes": 2048, "addr_width": 16}, "sim.tb.axi_mem",
     "random_traffic,raw_bursts,throughput", {}),
], ids=["fp32-multiplier-dsp", "axi-memory-bram"])
def test_gate_level_units(simulator, design, params, test_module, testcase, env):
    """The RTL's testbench on the synthesized netlist, bit-exact with golden as the RTL is.
    (Icarus runs the multiplier's 1 500 cells about 20 times slower than Verilator: its run
    is in `make test-full`, tests/conftest.py.)"""
    runner.run(design, params, test_module, simulator, testcase=testcase, gates=True,
               run_tag="gates", extra_env=env)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # (Icarus's run alone is longer than the suite's 900 s default)
def test_gate_level_board_gemm(simulator):
    """The board top after synth_ecp5 runs the board's UART GEMM test (the host tool's code,
    through the UART pins; its mixed-fp8 GEMM, 2x4 e4m3 by 4x3 e5m2), bit-exact with
    golden. About 50 000 cycles: the 31 000 cells take Icarus some 25 minutes (Verilator's
    build, at -O0, most of its run)."""
    from sim.tb.board import BOARD_SIM

    runner.run("hdl.board:BoardTop", BOARD_SIM, "sim.tb.board", simulator,
               testcase="gemm_over_uart", gates=True, run_tag="gates",
               extra_env={"NCLITE_BOARD_GEMMS": "1"})
