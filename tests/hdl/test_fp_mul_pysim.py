# amaranth: UnusedElaboratable=no
"""FpMultiplier in amaranth.sim, bit-exact against numpy float32 multiplication.

Reference: each operand is widened to float32 with ml_dtypes, multiplied in float32, and any
NaN is replaced by the canonical 0x7FC00000 (docs/contract.md §4).

Coverage: all 256 x 256 pairs of every fp8 format combination at stages 0, 1, 3 and
FP_MUL_MAX_CUTS (pysim needs ~130 us a vector: these runs are marked ``slow``, for make
test-full; make test checks every fp8 product of the combinational multiplier in Icarus and
Verilator, ``tests/hdl/test_arith_rtl.py::test_fp8_products_exhaustive``); random fp8 pairs,
bf16 x bf16 (random with exponents steered at the overflow and fp32-subnormal regions,
every exponent of the product with and without the normalising carry, and all pairs of
special values) and bf16 x fp8 at every stage count up to FP_MUL_MAX_CUTS + 1
(each register placement, and one extra output register), pipelined runs with a random clock
enable; reserved/disabled format tags; parameter validation; Verilog conversion.
Seed: ``NCLITE_SEED`` (default 1).
"""

import os

import ml_dtypes
import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import Value
from amaranth.sim import Simulator

from hdl.formats import Fmt
from hdl.fp_mul import FP_MUL_MAX_CUTS, FpMultiplier
from sim.tb.vectors import seeded_rng
from sim.verify.latency import shift_hint

SEED = int(os.environ.get("NCLITE_SEED", "1"))
QNAN = 0x7FC0_0000
ALL_FORMATS = (Fmt.BF16, Fmt.FP8_E4M3, Fmt.FP8_E5M2)
FP8 = (Fmt.FP8_E4M3, Fmt.FP8_E5M2)
# Every stage count up to the last phase boundary, and one extra output register beyond it.
STAGES = list(range(FP_MUL_MAX_CUTS + 2))
_NUMPY = {
    Fmt.BF16: (ml_dtypes.bfloat16, np.uint16, 0xFFFF),
    Fmt.FP8_E4M3: (ml_dtypes.float8_e4m3fn, np.uint8, 0xFF),
    Fmt.FP8_E5M2: (ml_dtypes.float8_e5m2, np.uint8, 0xFF),
}
# bf16 special and boundary values: ±0, ±min/max subnormal, ±min normal, ±1, ±2, ±0.5, ±max,
# ±inf, quiet and signalling NaNs of both signs.
BF16_SPECIALS = [s | v for s in (0x0000, 0x8000) for v in (
    0x0000, 0x0001, 0x0040, 0x007F, 0x0080, 0x0081, 0x3F00, 0x3F80, 0x4000, 0x7F7F, 0x7F7E,
    0x7F80, 0x7FC0, 0x7F81, 0x7FFF)]



def widen(raw, fmt, formats=ALL_FORMATS):
    """Raw operand bits -> float32 as the contract widens them; NaN for unbuilt/reserved tags."""
    raw, fmt = np.asarray(raw, dtype=np.uint32), np.asarray(fmt)
    out = np.full(raw.shape, np.nan, dtype=np.float32)
    for f in formats:
        dtype, storage, mask = _NUMPY[f]
        sel = fmt == f.value
        out[sel] = (raw[sel] & mask).astype(storage).view(dtype).astype(np.float32)
    return out


def reference(a, a_fmt, b, b_fmt, formats=ALL_FORMATS):
    with np.errstate(all="ignore"):
        prod = widen(a, a_fmt, formats) * widen(b, b_fmt, formats)
    bits = prod.view(np.uint32).copy()
    bits[np.isnan(prod)] = QNAN
    return bits


def simulate(dut, a, a_fmt, b, b_fmt, *, en_prob=1.0, rng=None):
    """Drive one vector per enabled cycle; return ``result`` for each vector, in order.

    With ``en_prob < 1`` the clock enable is random; while it is low, random junk is driven on
    the operand ports (it must not enter the pipeline) and ``result`` must hold still.
    """
    n, stages = len(a), dut.latency
    vectors = list(zip(*(np.asarray(x).tolist() for x in (a, a_fmt, b, b_fmt)), strict=True))
    results = []
    sim = Simulator(dut)

    # Raw values on the enum ports, so that the reserved tag 3 can be driven too. Only changed
    # ports are written (pysim time is per event).
    ports = [Value.cast(p) for p in (dut.a, dut.a_fmt, dut.b, dut.b_fmt)]
    last = [None] * 4

    def drive(ctx, vec):
        for i, value in enumerate(vec):
            if value != last[i]:
                ctx.set(ports[i], value)
                last[i] = value

    if stages == 0:
        async def testbench(ctx):
            for vec in vectors:
                drive(ctx, vec)
                results.append(ctx.get(dut.result))
    else:
        sim.add_clock(1e-6)
        rng = rng or seeded_rng("en")

        async def testbench(ctx):
            ticks = 0  # enabled clock edges so far; vector i is issued at edge i (0-based)
            while len(results) < n:
                en = ticks >= n or rng.random() < en_prob
                ctx.set(dut.en, en)
                if not en:
                    drive(ctx, rng.integers(0, [1 << 16, 4, 1 << 16, 4]).tolist())
                elif ticks < n:
                    drive(ctx, vectors[ticks])
                before = ctx.get(dut.result)
                await ctx.tick()
                if en:
                    ticks += 1
                    if ticks >= stages:  # vector ticks - stages has reached `result`
                        results.append(ctx.get(dut.result))
                else:
                    assert ctx.get(dut.result) == before, (
                        f"seed={SEED}: result changed while en=0 (stages={stages})")

    sim.add_testbench(testbench)
    sim.run()
    return np.array(results, dtype=np.uint32)


def check(dut, a, a_fmt, b, b_fmt, *, what, formats=ALL_FORMATS, **kwargs):
    a, a_fmt, b, b_fmt = (np.asarray(x, dtype=np.uint32) for x in (a, a_fmt, b, b_fmt))
    got = simulate(dut, a, a_fmt, b, b_fmt, **kwargs)
    want = reference(a, a_fmt, b, b_fmt, formats)
    assert len(got) == len(want)
    bad = np.flatnonzero(got != want)
    if len(bad):
        lines = [
            f"  a=0x{a[i]:04x} ({_fmt_name(a_fmt[i])}) * b=0x{b[i]:04x} ({_fmt_name(b_fmt[i])}):"
            f" got 0x{got[i]:08x}, want 0x{want[i]:08x}"
            for i in bad[:10]]
        pytest.fail(f"seed={SEED} {what} stages={dut.latency}: {len(bad)}/{len(a)} mismatches"
                    f"{shift_hint(got, want, dut.latency)}\n" + "\n".join(lines))
    return want


def _fmt_name(v):
    return Fmt(int(v)).golden_name if v != 3 else "reserved(3)"


def random_bf16_pairs(rng, n):
    """bf16 pairs whose exponent sums cluster at fp32 overflow and the fp32 subnormal range.

    Mantissas are often sparse (low bits zero) so that products have few significant bits and
    rounding ties occur.
    """
    man = rng.integers(0, 128, (2, n))
    keep = rng.integers(0, 8, (2, n))
    sparse = rng.random((2, n)) < 0.5
    man = np.where(sparse, man & ~((1 << (7 - keep)) - 1) & 0x7F, man)
    mode = rng.integers(0, 4, n)
    # Sum of biased exponents T = ea + eb: unbiased product exponent is T - 254.
    target = np.select(
        [mode == 1, mode == 2],
        [rng.integers(254 + 124, 254 + 130, n), rng.integers(254 - 160, 254 - 120, n)],
        rng.integers(0, 510, n))
    ea = np.clip(rng.integers(0, 255, n), target - 254, np.minimum(target, 254))
    ea = np.where(mode == 0, rng.integers(0, 256, n), ea)  # uniform, including inf/NaN
    eb = np.where(mode == 0, rng.integers(0, 256, n), np.clip(target - ea, 0, 254))
    eb = np.where(mode == 3, 0, eb)  # subnormal (or zero) b
    sign = rng.integers(0, 2, (2, n))
    a = (sign[0] << 15) | (ea << 7) | man[0]
    b = (sign[1] << 15) | (eb << 7) | man[1]
    swap = rng.random(n) < 0.5
    return np.where(swap, b, a), np.where(swap, a, b)


# --- fp8 x fp8 -----------------------------------------------------------------------------

@pytest.mark.parametrize("stages", [pytest.param(s, marks=pytest.mark.slow)
                                    for s in (0, 1, 3, FP_MUL_MAX_CUTS)])
@pytest.mark.parametrize("a_fmt,b_fmt", [(x, y) for x in FP8 for y in FP8],
                         ids=lambda f: f.golden_name)
def test_fp8_exhaustive(a_fmt, b_fmt, stages):
    rng = seeded_rng("fp8x", a_fmt, b_fmt)
    ai, bi = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    # Random junk in the upper byte: it must be ignored.
    a = ai.ravel() | (rng.integers(0, 256, ai.size) << 8)
    b = bi.ravel() | (rng.integers(0, 256, bi.size) << 8)
    n = a.size
    check(FpMultiplier(stages=stages), a, np.full(n, a_fmt.value), b, np.full(n, b_fmt.value),
          what=f"fp8 exhaustive {a_fmt.golden_name} x {b_fmt.golden_name}")


@pytest.mark.parametrize("stages", STAGES[1:])
def test_fp8_random_pipelined(stages):
    rng = seeded_rng("fp8r", stages)
    n = 4000
    check(FpMultiplier(stages=stages), rng.integers(0, 1 << 16, n), rng.integers(1, 3, n),
          rng.integers(0, 1 << 16, n), rng.integers(1, 3, n), what="fp8 random",
          en_prob=0.7, rng=rng)


# --- bf16 x bf16 ---------------------------------------------------------------------------

@pytest.mark.parametrize("stages", STAGES)
def test_bf16_specials(stages):
    a, b = np.meshgrid(BF16_SPECIALS, BF16_SPECIALS, indexing="ij")
    n = a.size
    check(FpMultiplier(stages=stages), a.ravel(), np.zeros(n), b.ravel(), np.zeros(n),
          what="bf16 special pairs")


@pytest.mark.parametrize("stages", STAGES)
def test_bf16_random(stages):
    rng = seeded_rng("bf16", stages)
    n = 4000
    a, b = random_bf16_pairs(rng, n)
    want = check(FpMultiplier(stages=stages), a, np.zeros(n), b, np.zeros(n),
                 what="bf16 random", en_prob=0.8 if stages else 1.0, rng=rng)
    # The vectors must reach the interesting rounding cases.
    # (Rounding up to the smallest normal cannot happen: an exact product has at most 16
    # significant bits, so one below 2^-126 is at most 2^-126 - 2^-142, far from the rounding
    # threshold 2^-126 - 2^-150.)
    with np.errstate(all="ignore"):
        exact = widen(a, np.zeros(n)).astype(np.float64) * widen(b, np.zeros(n)).astype(np.float64)
        r = want.view(np.float32).astype(np.float64)
        finite = np.isfinite(exact) & (exact != 0)
        inexact = finite & np.isfinite(r) & (r != exact)
        cover = {
            "inexact subnormal": np.sum(inexact),
            "tie": np.sum(inexact & (np.abs(exact - r) == 2.0**-150)),
            "underflow to 0": np.sum(finite & (r == 0)),
            "overflow to inf": np.sum(finite & np.isinf(r)),
            "exact subnormal": np.sum(finite & (r == exact) & (np.abs(r) < 2.0**-126)),
        }
    assert min(cover.values()) >= 3, f"seed={SEED}: weak coverage {cover}"


def exponent_sweep_pairs():
    """bf16 pairs whose product's exponent takes every value from -266 to 254, each with
    significands that do and do not carry into the exponent (1 x 1, 1.5 x 1, 1.5 x 1.5,
    1.9921875 x 1.9921875: products in [1, 2) and [2, 4)), signs alternating: every class
    boundary of the product (overflow from 2^128, normal from 2^-126, the subnormal shift
    clamped at 25) on both sides and both carries."""
    pairs = []
    for e in range(-266, 255):
        ea = e // 2  # (both normal from -252 on)
        for k, (ma, mb) in enumerate(((1.0, 1.0), (1.5, 1.0), (1.5, 1.5),
                                      (1.9921875, 1.9921875))):
            a, b = ma * 2.0**ea * (-1) ** (e + k), mb * 2.0**(e - ea)
            ra, rb = (np.array(v, dtype=ml_dtypes.bfloat16) for v in (a, b))
            if float(ra) == a and float(rb) == b:  # (a subnormal holds fewer bits)
                pairs.append((int(ra.view(np.uint16)), int(rb.view(np.uint16))))
    return np.array(pairs).T


@pytest.mark.parametrize("stages", STAGES)
def test_bf16_exponent_sweep(stages):
    a, b = exponent_sweep_pairs()
    sums = {round(np.log2(abs(float(x)))) for x in
            widen(a, np.zeros(len(a))).astype(np.float64) * widen(b, np.zeros(len(b)))}
    assert {-266, -151, -150, -127, -126, 127, 128, 254} <= sums
    check(FpMultiplier(stages=stages), a, np.zeros(len(a)), b, np.zeros(len(b)),
          what="bf16 product exponent sweep")


# --- bf16 x fp8 ----------------------------------------------------------------------------

@pytest.mark.parametrize("stages", STAGES)
def test_bf16_fp8_mixed_random(stages):
    rng = seeded_rng("mixed", stages)
    n = 3000
    bf, _ = random_bf16_pairs(rng, n)
    fp8 = rng.integers(0, 1 << 16, n)
    fp8_fmt = rng.integers(1, 3, n)
    swap = rng.random(n) < 0.5
    check(FpMultiplier(stages=stages), np.where(swap, fp8, bf), np.where(swap, fp8_fmt, 0),
          np.where(swap, bf, fp8), np.where(swap, 0, fp8_fmt), what="bf16 x fp8 random",
          en_prob=0.8 if stages else 1.0, rng=rng)


def test_bf16_specials_x_all_fp8():
    sp, f8 = np.meshgrid(BF16_SPECIALS, np.arange(256), indexing="ij")
    sp, f8 = sp.ravel(), f8.ravel()
    n = sp.size
    for fmt in FP8:
        check(FpMultiplier(stages=0), np.concatenate([sp, f8]),
              np.concatenate([np.zeros(n), np.full(n, fmt.value)]), np.concatenate([f8, sp]),
              np.concatenate([np.full(n, fmt.value), np.zeros(n)]),
              what=f"bf16 specials x all {fmt.golden_name}")


# --- format tags ---------------------------------------------------------------------------

@pytest.mark.parametrize("stages", [0, 1])
def test_reserved_tag_is_nan(stages):
    ops = np.array(BF16_SPECIALS + [0x3F80, 0x0038, 0x0000])
    n = len(ops)
    for a_fmt, b_fmt in [(3, 0), (0, 3), (3, 3), (3, 1), (2, 3)]:
        got = simulate(FpMultiplier(stages=stages), ops, np.full(n, a_fmt), ops[::-1],
                       np.full(n, b_fmt))
        assert np.all(got == QNAN), (
            f"seed={SEED}: tags a={a_fmt} b={b_fmt}: " + " ".join(f"0x{x:08x}" for x in got))


@pytest.mark.parametrize("formats", [("bf16",), ("fp8_e4m3",), ("fp8_e5m2", "bf16")])
def test_disabled_formats(formats):
    dut = FpMultiplier(stages=1, formats=formats)
    enabled = dut.formats
    assert enabled == tuple(sorted({Fmt[f.upper()] for f in formats}, key=lambda f: f.value))
    rng = seeded_rng("disabled", formats)
    n = 3000
    a, b = random_bf16_pairs(rng, n)
    check(dut, a, rng.integers(0, 4, n), b, rng.integers(0, 4, n), formats=enabled,
          what=f"formats={formats}", rng=rng)
    # The reference treats unbuilt formats as NaN; make sure that case is actually exercised.
    got = simulate(FpMultiplier(stages=0, formats=formats), [0x3F80], [_missing(enabled)],
                   [0x3F80], [enabled[0].value])
    assert got[0] == QNAN, f"seed={SEED}: unbuilt format gave 0x{got[0]:08x}"


def _missing(enabled):
    return next(f.value for f in ALL_FORMATS if f not in enabled)


# --- parameters and conversion ---------------------------------------------------------------

@pytest.mark.parametrize("kwargs,exc,param", [
    ({"formats": ("fp16",)}, ValueError, "formats"),
    ({"formats": "bf16"}, TypeError, "formats"),
    ({"formats": ()}, ValueError, "formats"),
    ({"stages": -1}, ValueError, "stages"),
    ({"stages": 1.5}, TypeError, "stages"),
    ({"stages": True}, TypeError, "stages"),
])
def test_bad_parameters(kwargs, exc, param):
    with pytest.raises(exc, match=param):
        FpMultiplier(**kwargs)


def test_attributes():
    dut = FpMultiplier(stages=2, formats=["fp8_e5m2", Fmt.BF16])
    assert dut.latency == 2
    assert dut.formats == (Fmt.BF16, Fmt.FP8_E5M2)
    assert FpMultiplier().latency == 1
    assert FpMultiplier().formats == ALL_FORMATS


@pytest.mark.parametrize("stages", STAGES)
def test_converts_to_verilog(stages):
    text = verilog.convert(FpMultiplier(stages=stages), name="fp_mul", emit_src=False)
    assert "module fp_mul" in text
    for port in ("a", "a_fmt", "b", "b_fmt", "en", "result"):
        assert f" {port};" in text or f" {port}," in text, port
