"""golden.fp32 (fp32 add/mul, widening multiply, contract-order dot product) vs references.

References: Berkeley SoftFloat 3 through softfloatpy (f32_add / f32_mul with the rounding
mode set to NEAR_EVEN; its conversions bf16_to_f32 and f16_to_f32; fp8 widened by a decoder
written here from the OCP field layout and cross-checked bit for bit with ml_dtypes), and
float64 for the dot-product error bound. Match rule: bit-exact, except that a NaN reference
is matched by any golden NaN - and every golden NaN must be exactly 0x7FC00000.

Coverage: fp32 add and mul on every pair of ``sim.tb.vectors.special_bits("fp32")`` plus 10^5
random pairs plus tie pairs (``sim.tb.vectors.operand_pairs``); widen_mul for all 16 pairs of
{bf16, fp8_e4m3, fp8_e5m2, fp16} (fp8 x fp8 exhaustively); dot vs SoftFloat in the contract's
order, vs float64 within K * 2**-24 * sum|w*x| (+ underflow), and its edge cases.
Seed: ``NCLITE_SEED`` (default 1); every assertion message names it and the operands in hex.
"""

import itertools
import math
import os
import struct

import numpy as np
import pytest
import softfloatpy as sf

from golden import formats as gf
from golden.fp32 import dot, fp32_add, fp32_mul, widen_mul
from sim.tb.vectors import operand_pairs, random_bits, seeded_rng, special_bits

SEED = int(os.environ.get("NCLITE_SEED", "1"))
QNAN = 0x7FC00000
N_RANDOM = 100_000
MUL_FORMATS = ("bf16", "fp8_e4m3", "fp8_e5m2", "fp16")



@pytest.fixture(autouse=True)
def _softfloat_rne():
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    yield


# --- SoftFloat reference -------------------------------------------------------------------


def _sf32(bits: int) -> sf.Float32:
    return sf.Float32.from_bytes(bits.to_bytes(4, "big"))  # softfloatpy is big-endian


def _sf_binop(op, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SoftFloat ``op`` element by element on uint32 fp32 patterns."""
    f32 = sf.Float32.from_bytes
    out = [int.from_bytes(op(f32(x.to_bytes(4, "big")), f32(y.to_bytes(4, "big"))).to_bytes(),
                          "big")
           for x, y in zip(a.tolist(), b.tolist(), strict=True)]
    return np.array(out, dtype=np.uint32)


def _sf_widen_table(name: str) -> np.ndarray:
    """fp32 patterns of every pattern of a 16- or 8-bit format, by a reference conversion."""
    f = gf.FORMATS[name]
    codes = range(1 << f.bits)
    if name == "bf16":
        conv = [sf.bf16_to_f32(sf.BFloat16.from_bytes(c.to_bytes(2, "big"))) for c in codes]
    elif name == "fp16":
        conv = [sf.f16_to_f32(sf.Float16.from_bytes(c.to_bytes(2, "big"))) for c in codes]
    else:
        return np.array([_fp8_to_fp32_reference(c, f) for c in codes], dtype=np.uint32)
    return np.array([int.from_bytes(x.to_bytes(), "big") for x in conv], dtype=np.uint32)


def _fp8_to_fp32_reference(c: int, f) -> int:
    """Exact fp8 -> fp32 from the OCP field layout (NaN -> sign | 0x7FC00000)."""
    sign = c >> 7
    e = (c >> f.man_bits) & ((1 << f.exp_bits) - 1)
    m = c & ((1 << f.man_bits) - 1)
    e_all = (1 << f.exp_bits) - 1
    nan_man = m != 0 if f.has_inf else m == (1 << f.man_bits) - 1
    if e == e_all and nan_man:
        return sign << 31 | QNAN
    if f.has_inf and e == e_all:
        return sign << 31 | 0x7F800000
    if e == 0:
        value = math.ldexp(m, 1 - f.bias - f.man_bits)
    else:
        value = math.ldexp((1 << f.man_bits) | m, e - f.bias - f.man_bits)
    return struct.unpack(">I", struct.pack(">f", -value if sign else value))[0]


_WIDEN = {}


def _widen_table(name: str) -> np.ndarray:
    if name not in _WIDEN:
        _WIDEN[name] = _sf_widen_table(name)
    return _WIDEN[name]


# --- checking --------------------------------------------------------------------------------


def _is_nan32(b: np.ndarray) -> np.ndarray:
    return (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)


def _check(what: str, got: np.ndarray, ref: np.ndarray, *operands: np.ndarray) -> None:
    """Bit-exact, NaN vs NaN allowed; golden NaNs must be canonical. ``operands`` share the
    leading shape of ``got`` (a dot's operands have an extra K axis)."""
    assert got.dtype == np.uint32 and got.shape == ref.shape, (what, got.dtype, got.shape)
    ok = (got == ref) | (_is_nan32(ref) & (got == QNAN))
    bad = ~ok | (_is_nan32(got) & (got != QNAN))
    if bad.any():
        rows = []
        for i in np.flatnonzero(bad)[:10]:
            ops = [np.asarray(o).reshape(got.size, -1)[i].tolist() for o in operands]
            ops = " ".join(f"{v[0]:#x}" if len(v) == 1 else "[" + " ".join(f"{e:#x}" for e in v)
                           + "]" for v in ops)
            rows.append(f"  {ops} -> golden {int(got.ravel()[i]):#010x}, "
                        f"reference {int(ref.ravel()[i]):#010x}")
        pytest.fail(f"seed={SEED} {what}: {int(bad.sum())} of {got.size} differ "
                    f"(operands in hex -> result):\n" + "\n".join(rows))


# --- fp32 add / mul vs SoftFloat --------------------------------------------------------------


@pytest.mark.parametrize("op", ["add", "mul"])
def test_fp32_vs_softfloat(op):
    a, b = operand_pairs("fp32", "fp32", seeded_rng(f"fp32_{op}"), N_RANDOM)
    n_special = special_bits("fp32").size ** 2
    assert len(a) >= n_special + N_RANDOM
    golden = {"add": fp32_add, "mul": fp32_mul}[op](a, b)
    ref = _sf_binop({"add": sf.f32_add, "mul": sf.f32_mul}[op], a, b)
    _check(f"fp32_{op}", golden, ref, a, b)
    # Both orders of the operands, and subtraction as the addition of the negation.
    if op == "add":
        _check("fp32_add swapped", fp32_add(b, a), ref, b, a)
        neg = b ^ np.uint32(0x80000000)
        _check("fp32_add(a, -b)", fp32_add(a, neg), _sf_binop(sf.f32_sub, a, b), a, neg)
    else:
        _check("fp32_mul swapped", fp32_mul(b, a), ref, b, a)


def test_fp32_contract_examples():
    """Cases the contract spells out, checked without any reference library."""
    cases = [
        (fp32_add, 0x7F800000, 0xFF800000, QNAN),  # inf - inf = NaN
        (fp32_add, 0xFF800000, 0x7F800000, QNAN),
        (fp32_mul, 0x7F800000, 0x00000000, QNAN),  # inf * 0
        (fp32_mul, 0x80000000, 0xFF800000, QNAN),
        (fp32_add, 0x7F800001, 0x3F800000, QNAN),  # signalling NaN operand
        (fp32_add, 0xFFC12345, 0x3F800000, QNAN),  # negative NaN with payload
        (fp32_mul, 0x3F800000, 0xFFFFFFFF, QNAN),
        (fp32_add, 0x80000000, 0x80000000, 0x80000000),  # -0 + -0 = -0
        (fp32_add, 0x00000000, 0x80000000, 0x00000000),  # +0 + -0 = +0
        (fp32_add, 0x3F800000, 0xBF800000, 0x00000000),  # x - x = +0 under RNE
        (fp32_add, 0x00000001, 0x00000001, 0x00000002),  # subnormals kept
        (fp32_add, 0x00800000, 0x80000001, 0x007FFFFF),  # result subnormal
        (fp32_mul, 0x00800000, 0x3F000000, 0x00400000),  # min normal / 2: subnormal, exact
        (fp32_mul, 0x00000001, 0x3F000000, 0x00000000),  # tie to even: 0
        (fp32_mul, 0x00000003, 0x3F000000, 0x00000002),  # tie to even: 2
        (fp32_mul, 0x80000001, 0x3F000000, 0x80000000),  # -0 from underflow
        (fp32_add, 0x3F800000, 0x33800000, 0x3F800000),  # 1 + 2^-24: tie, stays even
        (fp32_add, 0x3F800000, 0x34400000, 0x3F800002),  # 1 + 3*2^-24: tie, up to even
        (fp32_add, 0x3F800001, 0x33800000, 0x3F800002),  # (1 + ulp) + half ulp: up to even
        (fp32_add, 0x7F7FFFFF, 0x73000000, 0x7F800000),  # max + half ulp: overflow to inf
        (fp32_add, 0x7F7FFFFF, 0x72FFFFFF, 0x7F7FFFFF),
        (fp32_mul, 0x7F7FFFFF, 0x40000000, 0x7F800000),  # overflow to inf
        (fp32_mul, 0xFF7FFFFF, 0x40000000, 0xFF800000),
        (fp32_mul, 0x3F800800, 0x3F800800, 0x3F801000),  # (1 + 2^-12)^2: tie to even
    ]
    for fn, a, b, want in cases:
        got = int(fn(a, b))
        assert got == want, (f"seed={SEED} {fn.__name__}({a:#010x}, {b:#010x}) = {got:#010x}, "
                             f"want {want:#010x}")


def test_fp32_shapes_and_broadcast():
    a = np.arange(12, dtype=np.uint32).reshape(3, 4) * np.uint32(0x01000000)
    b = np.uint32(0x40000000)
    for fn in (fp32_add, fp32_mul):
        r = fn(a, b)
        assert r.shape == (3, 4) and r.dtype == np.uint32
        assert np.array_equal(r.ravel(), fn(a.ravel(), np.full(12, b)))
        assert fn(0x3F800000, 0x3F800000).shape == ()
    # Python ints and lists are accepted; result bits are uint32.
    assert fp32_add([0x3F800000], [0x3F800000]).tolist() == [0x40000000]


# --- widening multiply --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2", "bf16", "fp16"])
def test_reference_widening_matches_ml_dtypes(name):
    """The reference widening tables used below agree with ml_dtypes (NaN: only NaN-ness, as
    SoftFloat's conversions return its default NaN)."""
    f = gf.FORMATS[name]
    codes = np.arange(1 << f.bits, dtype=np.uint64).astype(f.uint_dtype)
    ml = codes.view(f.dtype).astype(np.float32).view(np.uint32)
    table = _widen_table(name)
    nan = _is_nan32(ml)
    bad = (table != ml) & ~nan
    bad |= nan != _is_nan32(table)
    assert not bad.any(), f"seed={SEED} {name} reference widening differs: {codes[bad][:8]}"


@pytest.mark.parametrize(("fa", "fb"), list(itertools.product(MUL_FORMATS, MUL_FORMATS)))
def test_widen_mul_vs_softfloat(fa, fb):
    ga, gb = gf.FORMATS[fa], gf.FORMATS[fb]
    if ga.bits == 8 and gb.bits == 8:  # exhaustive
        a = np.repeat(np.arange(256, dtype=np.uint8), 256)
        b = np.tile(np.arange(256, dtype=np.uint8), 256)
    else:
        a, b = operand_pairs(fa, fb, seeded_rng(f"widen_mul_{fa}_{fb}"), 20_000)
    golden = widen_mul(a, fa, b, fb)
    ref = _sf_binop(sf.f32_mul, _widen_table(fa)[a], _widen_table(fb)[b])
    _check(f"widen_mul({fa} x {fb})", golden, ref, a, b)


@pytest.mark.parametrize(("fa", "fb"), list(itertools.product(["fp8_e4m3", "fp8_e5m2"],
                                                              repeat=2)))
def test_fp8_products_exact(fa, fb):
    """Contract: fp8 x fp8 products are exact in fp32 (checked against float64)."""
    a = np.repeat(np.arange(256, dtype=np.uint8), 256)
    b = np.tile(np.arange(256, dtype=np.uint8), 256)
    finite = ~(gf.is_nan_bits(a, fa) | gf.is_inf_bits(a, fa) | gf.is_nan_bits(b, fb)
               | gf.is_inf_bits(b, fb))
    with np.errstate(invalid="ignore"):
        exact = gf.from_bits(a, fa).astype(np.float64) * gf.from_bits(b, fb).astype(np.float64)
    got = gf.fp32_from_bits(widen_mul(a, fa, b, fb)).astype(np.float64)
    bad = finite & (got != exact)
    assert not bad.any(), f"seed={SEED} {fa} x {fb} inexact: {a[bad][:8]} {b[bad][:8]}"


def test_widen_mul_mixed_and_validation():
    # e4m3 448 * e5m2 57344 = 25690112 (exact); bf16 max * e4m3 2 overflows to inf.
    assert int(widen_mul(0x7E, "fp8_e4m3", 0x7B, "fp8_e5m2")) == gf.fp32_bits(448.0 * 57344.0)
    assert int(widen_mul(0x7F7F, "bf16", 0x40, "fp8_e4m3")) == 0x7F800000
    assert int(widen_mul(0x7F, "fp8_e4m3", 0x00, "fp8_e5m2")) == QNAN  # NaN * 0
    assert int(widen_mul(0x7C, "fp8_e5m2", 0x00, "fp8_e4m3")) == QNAN  # inf * 0
    # bf16 * bf16 can underflow into fp32 subnormals: 2^-126 * 2^-10 = 2^-136.
    assert int(widen_mul(0x0080, "bf16", 0x3A80, "bf16")) == 1 << 13
    # Mixed shapes broadcast.
    r = widen_mul(np.full((2, 1), 0x3F80, np.uint16), "bf16", np.arange(3, dtype=np.uint8),
                  "fp8_e4m3")
    assert r.shape == (2, 3)


# --- dot product -----------------------------------------------------------------------------


def _sf_dot(w32: np.ndarray, x32: np.ndarray) -> np.ndarray:
    """SoftFloat in the contract's order over the last axis of widened fp32 operands."""
    f32 = sf.Float32.from_bytes
    out = []
    for wr, xr in zip(w32.reshape(-1, w32.shape[-1]).tolist(),
                      x32.reshape(-1, x32.shape[-1]).tolist(), strict=True):
        s = _sf32(0)
        for w, x in zip(wr, xr, strict=True):
            s = sf.f32_add(s, sf.f32_mul(f32(w.to_bytes(4, "big")), f32(x.to_bytes(4, "big"))))
        out.append(int.from_bytes(s.to_bytes(), "big"))
    return np.array(out, dtype=np.uint32).reshape(w32.shape[:-1])


@pytest.mark.parametrize(("fw", "fx"), list(itertools.product(MUL_FORMATS[:3], repeat=2)))
def test_dot_vs_softfloat(fw, fx):
    rng = seeded_rng(f"dot_sf_{fw}_{fx}")
    for k in (1, 2, 3, 16, 64):
        rows = 4096 // k
        w = random_bits(fw, rng, rows * k).reshape(rows, k)
        x = random_bits(fx, rng, rows * k).reshape(rows, k)
        # Keep most rows finite so the sums are meaningful: drop NaNs/infs in 3 rows of 4.
        for arr, f in ((w, fw), (x, fx)):
            special = gf.is_nan_bits(arr, f) | gf.is_inf_bits(arr, f)
            tame = (rng.random((rows, 1)) < 0.75) & special
            arr[tame] = arr[tame] & gf.FORMATS[f].uint_dtype.type(gf.FORMATS[f].sign_mask)
        golden = dot(w, fw, x, fx)
        ref = _sf_dot(_widen_table(fw)[w], _widen_table(fx)[x])
        _check(f"dot({fw} x {fx}, K={k})", golden, ref, w, x)


def _dot_bound_case(fw, fx, rng, rows, k):
    """Operands with mixed signs and exponents near a common scale (cancellation happens)."""
    w = random_bits(fw, rng, rows * k).reshape(rows, k)
    x = random_bits(fx, rng, rows * k).reshape(rows, k)
    special = (gf.is_nan_bits(w, fw) | gf.is_inf_bits(w, fw) | gf.is_nan_bits(x, fx)
               | gf.is_inf_bits(x, fx))
    finite = ~special.any(-1)
    return w[finite], x[finite]


@pytest.mark.parametrize(("fw", "fx"), list(itertools.product(MUL_FORMATS[:3], repeat=2)))
def test_dot_error_bound(fw, fx):
    """|dot - exact| <= K * u * sum|w*x| + K * 2**-150 for finite results (u = 2**-24).

    K * u is Jeannerod & Rump's bound for recursive dot products under round to nearest; the
    second term covers products that underflow (absolute error <= half the smallest fp32
    subnormal each). The exact value is math.fsum of the float64 products (each exact: at most
    22 significant bits), correctly rounded to float64, so 2**-52 * |exact| is added too.
    """
    rng = seeded_rng(f"dot_bound_{fw}_{fx}")
    u = 2.0**-24
    checked = 0
    for k in (1, 2, 7, 32, 128):
        w, x = _dot_bound_case(fw, fx, rng, 20_000 // k, k)
        got = gf.fp32_from_bits(dot(w, fw, x, fx)).astype(np.float64)
        prods = gf.to_fp32(w, fw).astype(np.float64) * gf.to_fp32(x, fx).astype(np.float64)
        exact = np.array([math.fsum(r) for r in prods.tolist()])
        mag = np.abs(prods).sum(-1)
        bound = k * u * mag + k * 2.0**-150 + 2.0**-52 * np.abs(exact)
        fits = mag * (1 + k * u) < float(np.finfo(np.float32).max)  # no overflow possible
        assert np.isfinite(got[fits]).all(), f"seed={SEED} {fw}x{fx} K={k}: overflow"
        err = np.abs(got - exact)
        bad = fits & ~(err <= bound)
        if bad.any():
            i = np.flatnonzero(bad)[0]
            pytest.fail(f"seed={SEED} dot({fw} x {fx}, K={k}) error {err[i]:.3e} > bound "
                        f"{bound[i]:.3e}: w={[hex(v) for v in w[i].tolist()]} "
                        f"x={[hex(v) for v in x[i].tolist()]}")
        checked += int(fits.sum())
    assert checked > 5_000, f"seed={SEED}: only {checked} finite rows"


def test_dot_edge_cases():
    z8 = np.zeros((3, 0), np.uint8)
    r = dot(z8, "fp8_e4m3", z8, "fp8_e5m2")
    assert r.shape == (3,) and (r == 0).all()  # K = 0: +0.0
    # -0 products only: s starts at +0.0, +0 + -0 = +0.
    assert int(dot(np.full(4, 0x80, np.uint8), "fp8_e4m3", np.full(4, 0x3C, np.uint8),
                   "fp8_e5m2")) == 0
    # NaN operand, inf * 0, +inf + -inf: canonical NaN.
    one = 0x38  # e4m3 1.0
    for w, x, want in [([one, 0x7F], [0x3C, 0x3C], QNAN),  # NaN operand
                       ([one, one], [0x7C, 0x00], 0x7F800000),  # inf + 0
                       ([0, one], [0x7C, 0x3C], QNAN),  # 0 * inf
                       ([one, one], [0x7C, 0xFC], QNAN)]:  # inf + -inf
        got = int(dot(np.array(w, np.uint8), "fp8_e4m3", np.array(x, np.uint8), "fp8_e5m2"))
        assert got == want, f"dot(e4m3 {w}, e5m2 {x}) = {got:#x}, want {want:#x}"
    # Order matters: (2^24 + 1) + 1 in sequence = 2^24, while 1 + 1 + 2^24 = 2^24 + 2.
    big, one16 = 0x4B80, 0x3F80  # bf16 2^24, 1.0
    w = np.array([[big, one16, one16], [one16, one16, big]], np.uint16)
    x = np.full((2, 3), one16, np.uint16)
    assert dot(w, "bf16", x, "bf16").tolist() == [0x4B800000, 0x4B800001]
    # Leading axes broadcast: (M, 1, K) x (F, K) -> (M, F).
    w = random_bits("bf16", seeded_rng("dot_bcast"), 5 * 8).reshape(5, 1, 8)
    x = random_bits("fp8_e5m2", seeded_rng("dot_bcast_x"), 3 * 8).reshape(3, 8)
    r = dot(w, "bf16", x, "fp8_e5m2")
    assert r.shape == (5, 3)
    assert np.array_equal(r[2, 1], dot(w[2, 0], "bf16", x[1], "fp8_e5m2"))

