# amaranth: UnusedElaboratable=no
"""StochasticRounder and XorwowSeeder in amaranth.sim against golden.sru / golden.prng.

Fast unit tests: the seeder's lane states equal ``golden.prng.lane_state`` (seed 0 at reset and
a random 64-bit seed); the SRU at every ``stages`` with a few hundred beats of random targets,
modes and saturation flags (invalid beats among them), random input gaps and output stalls,
bit-exact with ``golden.sru.SruModel``; parameter validation; Verilog conversion. The cocotb
testbench (``sim/tb/sru.py``) runs the full-size checks on the emitted Verilog.
Seed: ``NCLITE_SEED`` (default 1).
"""

import copy
import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import Const
from amaranth.sim import Simulator

from golden.prng import lane_state
from golden.sru import SruModel
from hdl.formats import Dtype, Rounding
from hdl.sru import StochasticRounder, sru_layouts
from hdl.xorwow import XorwowSeeder, seeding_cycles
from sim.tb.vectors import cast_inputs, cast_specials, seeded_rng

SEED = int(os.environ.get("NCLITE_SEED", "1"))
NAMES = {d: d.golden_name for d in Dtype}
MODES = {m: m.golden_name for m in Rounding}



def _seeder_states(lanes, seed):
    dut = XorwowSeeder(lanes=lanes)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    got, busy_cycles = {}, [0]

    async def tb(ctx):
        if seed is not None:  # wait out the reset-time seeding, then send the seed
            while ctx.get(dut.busy):
                await ctx.tick()
            ctx.set(dut.seed.payload, seed)
            ctx.set(dut.seed.valid, 1)
            await ctx.tick()
            ctx.set(dut.seed.valid, 0)
            busy_cycles[0] = 1
        while ctx.get(dut.busy):
            if ctx.get(dut.write):
                st = ctx.get(dut.state)
                got[ctx.get(dut.lane)] = [int(st.v[i]) for i in range(5)] + [int(st.d)]
            busy_cycles[0] += 1
            await ctx.tick()

    sim.add_testbench(tb)
    sim.run()
    return got, busy_cycles[0]


def _xorwow_trace():
    """Lab 3's xorwow_trace.py (it steps ``hdl.xorwow.xorwow_step`` beside golden's)."""
    path = Path(__file__).resolve().parents[2] / "docs/labs/lab3-stochastic-rounding"
    spec = importlib.util.spec_from_file_location("xorwow_trace", path / "xorwow_trace.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_xorwow_step_matches_golden():
    """``xorwow_step`` alone (lab 3's part B), 32 steps of lanes 0 and 3 after seed 0 and a
    random seed: its output and next state equal ``golden.prng.LanePRNG``'s."""
    trace = _xorwow_trace()
    seed = int(seeded_rng("xorwow_step", seed=SEED).integers(0, 1 << 63))
    for s in (0, seed):
        for lane in (0, 3):
            for t, (got, want, s_got, s_want) in enumerate(trace.trace(s, lane, 32)):
                words = ", ".join(f"{name} {g:#010x} (want {w:#010x})" for name, g, w
                                  in zip(trace.NAMES, s_got, s_want, strict=True) if g != w)
                assert got == want and not words, (
                    f"xorwow_step, seed {s:#x}, lane {lane}, step {t}: output {got:#010x}, "
                    f"want {want:#010x}" + (f"; next state {words}" if words else ""))


@pytest.mark.parametrize("seed", [None, 0xDEADBEEF_0BADF00D])
def test_seeder_matches_golden(seed):
    lanes = 3
    got, busy = _seeder_states(lanes, seed)
    ref = lane_state(0 if seed is None else seed, lanes)
    assert sorted(got) == list(range(lanes))
    for lane in range(lanes):
        assert got[lane] == [int(v) for v in ref[lane]], f"lane {lane}"
    assert busy == seeding_cycles(lanes)


def _beats(lanes, n, rng, targets=tuple(Dtype)):
    """n random beats: per beat a dtype/mode/saturation (some invalid), lanes of fp32 inputs."""
    beats = []
    for _ in range(n):
        dtype = Dtype(int(rng.integers(0, 5)))
        mode = Rounding(int(rng.integers(0, 3)))
        raw_dtype, raw_mode = dtype.value, mode.value
        if rng.random() < 0.05:
            raw_dtype = int(rng.integers(5, 8))
        elif rng.random() < 0.05:
            raw_mode = 3
        fmt = "fp8_e4m3" if dtype is Dtype.FP32 else dtype.golden_name
        x = np.where(rng.random(lanes) < 0.2, rng.choice(cast_specials(fmt), lanes),
                     cast_inputs(fmt, rng, lanes))
        beats.append((x.astype(np.uint32), raw_dtype, raw_mode, bool(rng.integers(0, 2))))
    return beats


def _expected(lanes, beats, r, targets, seed=0):
    model = SruModel(lanes, random_bits=r, seed=seed)
    built = {d.value for d in targets}
    out = []
    for x, dtype, mode, sat in beats:
        if dtype not in built or mode == 3:
            out.append((None, 1, None))
        else:
            # (an SR beat's draws, for the failure message: the model's generators, copied)
            draws = (copy.deepcopy(model.prng).draw(r) if Rounding(mode) == Rounding.SR
                     and Dtype(dtype) != Dtype.FP32 else None)
            out.append((model.beat(x, NAMES[Dtype(dtype)], MODES[Rounding(mode)], sat), 0,
                        draws))
    return out


def _run_sru(dut, beats, rng, gaps=0.3, stalls=0.3):
    i_layout, _ = sru_layouts(dut.lanes, dut.targets)
    words = [Const.cast(i_layout.const({"data": [int(v) for v in x], "dtype": Dtype.BF16,
                                        "mode": Rounding.RNE, "saturate": sat})).value
             for x, _, _, sat in beats]
    doff, moff = i_layout["dtype"].offset, i_layout["mode"].offset
    words = [w & ~(7 << doff) & ~(3 << moff) | dt << doff | md << moff
             for w, (_, dt, md, _) in zip(words, beats, strict=True)]
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    results = []

    async def tb(ctx):
        sent, show = 0, False
        for _ in range(100_000):
            if len(results) == len(beats):
                return
            # valid, once up, stays up (payload unchanged) until the beat is taken
            show = show or (sent < len(beats) and rng.random() >= gaps)
            if show:
                ctx.set(dut.i.payload.as_value(), words[sent])
            ctx.set(dut.i.valid, show)
            ctx.set(dut.o.ready, rng.random() >= stalls)
            _, _, i_ready, o_valid, o_ready, o_payload = await ctx.tick().sample(
                dut.i.ready, dut.o.valid, dut.o.ready, dut.o.payload)
            if show and i_ready:
                sent += 1
                show = False
            if o_valid and o_ready:
                results.append(([int(o_payload.data[k]) for k in range(dut.lanes)],
                                int(o_payload.invalid)))
        raise AssertionError("SRU hung")

    sim.add_testbench(tb)
    sim.run()
    return results


@pytest.mark.parametrize("stages", [0, 1, 2, 3, 4])
def test_sru_matches_golden(stages):
    lanes, r = 2, 16
    rng = seeded_rng("sru", stages)
    dut = StochasticRounder(lanes=lanes, random_bits=r, stages=stages)
    beats = _beats(lanes, 400, rng)
    got = _run_sru(dut, beats, rng)
    _compare(got, _expected(lanes, beats, r, dut.targets), beats, lanes, r)


def _name(enum, value) -> str:
    try:
        return enum(value).name
    except ValueError:
        return f"{value} (reserved)"


def _compare(got, want, beats, lanes, r):
    """Beat by beat, the SRU's lanes (and invalid flag) against golden's; a failure names the
    beat, its inputs, target, mode, saturation and r (and an SR beat's random draws R)."""
    for t, ((g, gi), (w, wi, draws), (x, dt, md, sat)) in enumerate(
            zip(got, want, beats, strict=True)):
        drawn = "" if draws is None else f" R={[hex(int(v)) for v in draws]}"
        where = (f"beat {t}: x={[hex(int(v)) for v in x]} target={_name(Dtype, dt)} "
                 f"mode={_name(Rounding, md)}{drawn} saturate={sat} r={r} "
                 f"(NCLITE_SEED={SEED})")
        assert gi == wi, f"{where}: invalid flag {gi}, want {wi}"
        if wi:
            assert g == [0] * lanes, f"{where}: an invalid beat's lanes must be 0, got {g}"
        else:
            assert g == [int(v) for v in w], f"{where}: got {[hex(v) for v in g]}, want " \
                                             f"{[hex(int(v)) for v in w]}"


@pytest.mark.parametrize("r", [1, 5, 32])
def test_sru_random_bits(r):
    lanes = 1
    rng = seeded_rng("sru-r", r)
    dut = StochasticRounder(lanes=lanes, random_bits=r, stages=1,
                            targets=("bf16", "fp8_e5m2"))
    beats = _beats(lanes, 300, rng)
    got = _run_sru(dut, beats, rng)
    _compare(got, _expected(lanes, beats, r, dut.targets), beats, lanes, r)


def test_bad_parameters():
    for kwargs, match in [
        (dict(lanes=0), "lanes"), (dict(lanes=2.0), "lanes"),
        (dict(lanes=2, random_bits=0), "random_bits"),
        (dict(lanes=2, random_bits=33), "random_bits"),
        (dict(lanes=2, stages=5), "stages"), (dict(lanes=2, stages=True), "stages"),
        (dict(lanes=2, targets=()), "targets"), (dict(lanes=2, targets=("int8",)), "targets"),
        (dict(lanes=2, targets="bf16"), "targets"),
    ]:
        with pytest.raises((ValueError, TypeError), match=match):
            StochasticRounder(**kwargs)
    with pytest.raises(ValueError, match="lanes"):
        XorwowSeeder(lanes=0)


def test_verilog_conversion():
    dut = StochasticRounder(lanes=2, stages=3, targets=("fp8_e4m3",))
    text = verilog.convert(dut, name="sru")
    assert "module sru" in text


def test_cast_formats_match_golden():
    """hdl's CastFormat constants (derived from field widths) equal golden/formats.py's."""
    from golden.formats import get_format
    from golden.rounding import DEFAULT_SATURATE
    from hdl.formats import CAST_FORMATS

    for dtype, f in CAST_FORMATS.items():
        g = get_format(dtype.golden_name)
        assert (f.bits, f.man_bits, f.emin, f.max_finite, f.nan) == (
            g.bits, g.man_bits, g.emin, g.max_finite_bits, g.canonical_nan_bits), dtype
        assert f.inf == g.inf_bits, dtype
    assert {k for k, v in DEFAULT_SATURATE.items() if v} == {"fp8_e4m3", "fp8_e5m2"}
