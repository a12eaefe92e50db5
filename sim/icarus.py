"""Rewrites that make Amaranth's Verilog simulate correctly and fast in Icarus Verilog.

:func:`icarus_verilog` turns the Verilog that ``amaranth.back.verilog`` writes (through Yosys'
``write_verilog``) into the copy ``sim.runner`` builds for Icarus; Verilator builds the
original. Both rewrites keep every signal and its value: only how Icarus schedules them changes.

* :func:`kick_comb_blocks`: combinational blocks run once at time 0 (a correctness fix).
* :func:`single_driver_nets`: a wire that Yosys drives in pieces gets one driver (a speed fix).
"""

from __future__ import annotations

import re
from collections import defaultdict

__all__ = ["icarus_verilog", "kick_comb_blocks", "single_driver_nets"]

_KICK_REG = re.compile(
    r"^(\s*)reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;", re.MULTILINE)


def kick_comb_blocks(verilog_text: str) -> str:
    """Make Amaranth's Verilog evaluate its combinational blocks at time 0 in Icarus.

    Yosys writes combinational processes as ``always @*`` blocks that all read a dummy register
    ``$auto$...dump_module$1``, declared ``= 0``, so that a simulator starts them once. Icarus
    11 gives a declaration initialiser no event, so a block whose inputs are all initialised
    registers or constants stays X forever (amaranth issue 1629). Here the dummy register gets
    its value from ``initial #0`` instead: that change happens after every ``always`` block is
    waiting, so each runs once at time 0. (Rewriting to ``always_comb`` also works but made
    Icarus about 1.8 times slower on a PE column.) Icarus only: Verilator evaluates all
    combinational logic at start-up and, without ``--timing``, rejects the delay.
    ``tests/test_runner.py`` holds a design that shows X without this rewrite.
    """
    return _KICK_REG.sub(r"\1reg \2;\n\1initial #0 \2 = 1'b0;", verilog_text)


# A (possibly escaped) identifier: an escaped one runs to the next space, which belongs to it.
_NAME = r"(?:\\\S+ |[A-Za-z_][A-Za-z0-9_$]*)"
_DECL = re.compile(r"^\s*(?:wire|output|input)\s+(?:signed\s+)?(?:\[(\d+):(\d+)\]\s*)?("
                   + _NAME + r")\s*;", re.MULTILINE)
_ASSIGN = re.compile(r"^([ \t]*)assign (.+?) = (.+);\n", re.MULTILINE)
_PIECE = re.compile(r"^\s*(" + _NAME + r")\s*(?:\[(\d+)(?::(\d+))?\])?\s*$")


def _lhs_pieces(lhs: str, widths: dict) -> list[tuple[str, int, int]] | None:
    """An assignment's left side as (net, msb, lsb) pieces, most significant first; None if it
    is not a net, a bit, a part or a concatenation of those."""
    lhs = lhs.strip()
    parts = re.split(r",(?![^\[]*\])", lhs[1:-1]) if lhs.startswith("{") else [lhs]
    pieces = []
    for part in parts:
        m = _PIECE.match(part + " ")  # the space ends an escaped name the strip cut short
        if m is None:
            return None
        name = m[1].strip()
        if m[2] is not None:
            msb = int(m[2])
            lsb = int(m[3]) if m[3] is not None else msb
        elif name in widths:
            msb, lsb = widths[name]
        else:
            return None
        pieces.append((name, msb, lsb))
    return pieces


def _spelled(name: str) -> str:
    return name + " " if name.startswith("\\") else name


def _single_driver_module(module: str) -> str:
    if re.search(r"^\s*(function|task)\b", module, re.MULTILINE):
        return module  # their declarations would shadow the module's: not what Yosys writes
    widths = {m[3].strip(): (int(m[1]), int(m[2])) if m[1] else (0, 0)
              for m in _DECL.finditer(module)}
    assigns = [(m, _lhs_pieces(m[2], widths)) for m in _ASSIGN.finditer(module)]
    driven = defaultdict(int)
    for _, pieces in assigns:
        for name, _, _ in pieces or ():
            driven[name] += 1
    split = {name for name, count in driven.items()
             if count > 1 and name in widths and widths[name][0] >= widths[name][1]}
    # A net with an ascending piece ([0:3]), or a bit driven twice (X in Verilog), stays as is.
    seen: dict[str, set[int]] = defaultdict(set)
    for _, pieces in assigns:
        for name, msb, lsb in pieces or ():
            if name in split and (msb < lsb or seen[name] & set(range(lsb, msb + 1))):
                split.discard(name)
            seen[name] |= set(range(lsb, msb + 1))
    if not split:
        return module
    bits: dict[str, dict[int, tuple[str, int]]] = {name: {} for name in split}
    replaced: dict[int, tuple[int, str]] = {}
    for number, (m, pieces) in enumerate(
            (a for a in assigns if a[1] and any(p[0] in split for p in a[1])), start=1):
        # The right side goes to a temporary of the left side's width; each piece takes its
        # bits from there (as the assignment to the concatenation would).
        indent, width = m[1], sum(msb - lsb + 1 for _, msb, lsb in pieces)
        tmp = f"nclite_net{number}"
        lines = [f"{indent}wire [{width - 1}:0] {tmp};\n", f"{indent}assign {tmp} = {m[3]};\n"]
        offset = width
        for name, msb, lsb in pieces:
            offset -= msb - lsb + 1
            if name in split:
                for bit in range(lsb, msb + 1):
                    bits[name][bit] = (tmp, offset + bit - lsb)
            else:
                part = "" if widths.get(name) == (msb, lsb) else f"[{msb}:{lsb}]"
                lines.append(f"{indent}assign {_spelled(name)}{part} = "
                             f"{tmp}[{offset + msb - lsb}:{offset}];\n")
        replaced[m.start()] = (m.end(), "".join(lines))
    drivers = []
    for name in sorted(split):
        msb, lsb = widths[name]
        items, bit = [], msb
        while bit >= lsb:
            source = bits[name].get(bit)
            if source is None:  # driven elsewhere (a submodule's port): leave it to that driver
                items.append("1'bz")
                bit -= 1
                continue
            tmp, index = source
            run = 1
            while bit - run >= lsb and bits[name].get(bit - run) == (tmp, index - run):
                run += 1
            items.append(f"{tmp}[{index}:{index - run + 1}]")
            bit -= run
        drivers.append(f"  assign {_spelled(name)} = {{ {', '.join(items)} }};\n")
    out, pos = [], 0
    for start in sorted(replaced):
        end, text = replaced[start]
        out += [module[pos:start], text]
        pos = end
    out.append(module[pos:])
    body = "".join(out)
    end = body.rindex("endmodule")
    return body[:end] + "".join(drivers) + body[end:]


def single_driver_nets(verilog_text: str) -> str:
    """Give every wire that ``write_verilog`` assigns in pieces a single continuous driver.

    Yosys writes a wire whose bits come from several places as several assignments to its
    parts (``assign x[7:4] = a; assign { x[3], x[1] } = b;``). For such a net Icarus resolves
    its drivers bit by bit with strengths, at every change of any of them: that took about
    half of Icarus' time on the SRU and a quarter on the collective ring. Here each of those
    assignments writes a temporary ``nclite_net<n>`` of its width instead, and one
    assignment builds the wire from the temporaries' bits (bits no assignment drives are
    ``z`` there, as before). The wire keeps its name and its value at every instant.
    """
    modules = re.split(r"(?=^module )", verilog_text, flags=re.MULTILINE)
    return "".join(_single_driver_module(m) if m.startswith("module ") else m for m in modules)


def icarus_verilog(verilog_text: str) -> str:
    """The copy of ``verilog_text`` that Icarus builds: both rewrites of this module."""
    return single_driver_nets(kick_comb_blocks(verilog_text))
