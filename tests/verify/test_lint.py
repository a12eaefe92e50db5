"""Every top-level's Verilog passes `verilator --lint-only -Wall` with the reviewed waivers."""

import pytest

from sim.verify import lint


@pytest.mark.parametrize("name", list(lint.TOPS))
def test_lint_clean(name):
    problems = lint.lint(name)
    assert not problems, "\n".join(problems[:30])


def test_lint_reports_a_warning(tmp_path, monkeypatch):
    """The lint is not blind: a design with a real -Wall warning (a width-mismatched
    port connection is waived, so take an undriven output) fails it."""
    from sim import runner

    bad = tmp_path / "bad.v"
    bad.write_text("module bad(input wire a, output wire y, output wire z);\n"
                   "  assign y = a;\nendmodule\n")  # z is never driven: UNDRIVEN
    monkeypatch.setattr(runner, "elaborate", lambda factory, params: bad)
    monkeypatch.setitem(lint.TOPS, "bad", ("x:y", {}))
    assert any("UNDRIVEN" in p for p in lint.lint("bad"))


def test_an_untriggered_block_is_found():
    """A struct whose fields a switch drives in part and plain assignments in the rest (the
    shape the sparse array's rows had) gets one-statement `always @*` blocks from Yosys;
    the lint names them, and a switch with a signal of its own has none."""
    from amaranth.back import verilog
    from amaranth.hdl import Module, Signal
    from amaranth.lib import data

    def design(own_signal: bool):
        m = Module()
        mode, reg = Signal(2), Signal(8)
        m.d.sync += reg.eq(reg + 1)
        row = Signal(data.StructLayout({"data": 8, "fmt": 2}))
        target = Signal(8) if own_signal else row.data
        if own_signal:
            m.d.comb += row.data.eq(target)
        m.d.comb += row.fmt.eq(reg[:2])
        with m.Switch(mode):
            with m.Case(0):
                m.d.comb += target.eq(reg)
        return verilog.convert(m, ports=[mode, row.as_value()], name="shape")

    assert any("reg" in s for s in lint.untriggered_blocks(design(own_signal=False)))
    assert lint.untriggered_blocks(design(own_signal=True)) == []
