"""golden.formats (format descriptors, encode/decode, exact widening) and sim.tb.vectors.

References: ml_dtypes (``finfo``, ``astype``, ``isnan``/``isinf``) and a per-element decoder
written here from the field layout. Coverage: every bit pattern of the 8- and 16-bit formats,
10^5 random fp32 patterns, the canonical NaNs of the contract, unknown-format and bad-bits
errors, agreement with ``hdl.formats.Fmt``, and the shape/determinism of the test vectors.
Seed: ``NCLITE_SEED`` (default 1); every assertion message names it and the operands in hex.
"""

import math
import os

import ml_dtypes
import numpy as np
import pytest

from golden import formats as gf
from golden.formats import FORMATS, INPUT_FORMATS
from golden.fp32 import dot, fp32_add, fp32_mul, widen_mul
from sim.tb.vectors import operand_pairs, random_bits, seeded_rng, special_bits

SEED = int(os.environ.get("NCLITE_SEED", "1"))
NARROW = [n for n in FORMATS if FORMATS[n].bits <= 16]
FINFO_DTYPE = {"fp32": np.float32, "bf16": ml_dtypes.bfloat16, "fp16": np.float16,
               "fp8_e4m3": ml_dtypes.float8_e4m3fn, "fp8_e5m2": ml_dtypes.float8_e5m2}
CANONICAL_NAN = {"fp32": 0x7FC00000, "bf16": 0x7FC0, "fp16": 0x7E00, "fp8_e4m3": 0x7F,
                 "fp8_e5m2": 0x7E}



def _hex(values, limit: int = 8) -> str:
    values = np.asarray(values).ravel()[:limit]
    return "[" + ", ".join(f"{int(v):#x}" for v in values) + "]"


def _all_bits(name: str) -> np.ndarray:
    f = FORMATS[name]
    return np.arange(1 << f.bits, dtype=np.uint64).astype(f.uint_dtype)


def _decode_reference(b: int, f) -> float:
    """Value of one bit pattern from the field layout (float64 holds every value exactly)."""
    sign = -1.0 if b >> (f.bits - 1) else 1.0
    e = (b >> f.man_bits) & ((1 << f.exp_bits) - 1)
    m = b & ((1 << f.man_bits) - 1)
    if e == (1 << f.exp_bits) - 1:
        if f.has_inf:
            return sign * math.inf if m == 0 else math.copysign(math.nan, sign)
        if m == (1 << f.man_bits) - 1:
            return math.copysign(math.nan, sign)
    if e == 0:
        return sign * math.ldexp(m, 1 - f.bias - f.man_bits)
    return sign * math.ldexp((1 << f.man_bits) + m, e - f.bias - f.man_bits)


# --- descriptors -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(FORMATS))
def test_descriptor_matches_finfo(name):
    f = FORMATS[name]
    fi = ml_dtypes.finfo(FINFO_DTYPE[name])
    assert f.name == name and f.dtype == np.dtype(FINFO_DTYPE[name])
    assert f.bits == fi.bits and f.man_bits == fi.nmant and f.exp_bits == fi.nexp, name
    assert f.max_finite == float(fi.max), (name, f.max_finite, fi.max)
    assert f.min_normal == float(fi.smallest_normal), name
    assert f.min_subnormal == float(fi.smallest_subnormal), name
    assert f.emin == int(fi.minexp) and f.emax == int(fi.maxexp) - 1, name
    for field, value in [("max_finite", fi.max), ("min_normal", fi.smallest_normal),
                         ("min_subnormal", fi.smallest_subnormal), ("one", 1.0)]:
        bits = getattr(f, f"{field}_bits")
        got = float(gf.from_bits(np.array(bits, dtype=f.uint_dtype), f))
        assert got == float(value), f"{name}.{field}_bits={bits:#x} decodes to {got}"
    assert float(gf.from_bits(f.max_subnormal_bits, f)) == float(fi.smallest_normal) - float(
        fi.smallest_subnormal)
    assert f.has_inf == (name != "fp8_e4m3")
    if f.has_inf:
        assert float(gf.from_bits(f.inf_bits, f)) == math.inf
    else:
        assert f.inf_bits is None and f.nan_encoding == "fn"


def test_contract_numbers():
    assert FORMATS["fp8_e4m3"].max_finite == 448.0 and FORMATS["fp8_e4m3"].bias == 7
    assert FORMATS["fp8_e5m2"].max_finite == 57344.0 and FORMATS["fp8_e5m2"].bias == 15
    assert FORMATS["bf16"].bias == 127 and FORMATS["fp32"].bias == 127
    assert gf.FP32_CANONICAL_NAN == 0x7FC00000


@pytest.mark.parametrize("name", list(FORMATS))
def test_canonical_nan(name):
    f = FORMATS[name]
    assert f.canonical_nan_bits == CANONICAL_NAN[name], f"{name}: {f.canonical_nan_bits:#x}"
    assert bool(gf.is_nan_bits(f.canonical_nan_bits, f)), name
    assert np.isnan(gf.from_bits(f.canonical_nan_bits, f).astype(np.float32)), name
    w = int(gf.to_fp32_bits(f.canonical_nan_bits, f))
    assert np.isnan(np.uint32(w).view(np.float32)) and w >> 31 == 0, f"{name}: {w:#x}"


def test_input_formats_mirror_hdl():
    hdl_formats = pytest.importorskip("hdl.formats")
    names = tuple(m.golden_name for m in sorted(hdl_formats.Fmt, key=lambda m: m.value))
    assert names == INPUT_FORMATS
    for m in hdl_formats.Fmt:
        assert gf.get_format(m) is FORMATS[m.golden_name]


# --- encode / decode ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", NARROW)
def test_roundtrip_exhaustive(name):
    f = FORMATS[name]
    b = _all_bits(name)
    v = gf.from_bits(b, name)
    assert v.dtype == f.dtype and v.shape == b.shape
    back = gf.to_bits(v, name)
    assert back.dtype == f.uint_dtype
    bad = back != b
    assert not bad.any(), f"seed={SEED} {name} bits->value->bits: {_hex(b[bad])}"
    # Through float32 and float64 the value survives too (NaNs aside: their payload may not).
    nan = gf.is_nan_bits(b, name)
    for wide in (np.float32, np.float64):
        with np.errstate(invalid="ignore"):  # signalling NaNs
            back = gf.to_bits(v.astype(wide), name)
        bad = (back != b) & ~nan
        assert not bad.any(), f"seed={SEED} {name} via {wide.__name__}: {_hex(b[bad])}"
        assert gf.is_nan_bits(back[nan], name).all()


def test_roundtrip_fp32_random():
    rng = seeded_rng("roundtrip_fp32")
    b = np.concatenate([rng.integers(0, 1 << 32, 100_000, dtype=np.uint64).astype(np.uint32),
                        special_bits("fp32")])
    v = gf.fp32_from_bits(b)
    assert v.dtype == np.float32
    for back in (gf.fp32_bits(v), gf.to_bits(v, "fp32"), gf.to_fp32_bits(b, "fp32")):
        bad = back != b
        assert not bad.any(), f"seed={SEED} fp32 round trip: {_hex(b[bad])}"
    nan = gf.is_nan_bits(b, "fp32")
    assert np.array_equal(nan, np.isnan(v)), f"seed={SEED}"
    assert np.array_equal(gf.is_inf_bits(b, "fp32"), np.isinf(v)), f"seed={SEED}"
    assert int(gf.fp32_bits(1.0)) == 0x3F800000 and int(gf.fp32_bits(-0.0)) == 0x80000000


def test_to_bits_rounds_like_ml_dtypes():
    x = np.array([1.0, 1.0625, 1.1875, 500.0, -1e-9, 3.0e38], dtype=np.float64)
    for name in NARROW:
        with np.errstate(over="ignore"):
            want = x.astype(FINFO_DTYPE[name]).view(FORMATS[name].uint_dtype)
        assert np.array_equal(gf.to_bits(x, name), want), name
    assert int(gf.to_bits(1.0625, "fp8_e4m3")) == 0x38  # tie to even
    assert int(gf.to_bits(500.0, "fp8_e4m3")) == 0x7F  # overflow is NaN (no saturation)


@pytest.mark.parametrize("name", NARROW)
def test_nan_inf_classification_exhaustive(name):
    b = _all_bits(name)
    v = gf.from_bits(b, name).astype(np.float32)
    assert np.array_equal(gf.is_nan_bits(b, name), np.isnan(v)), name
    assert np.array_equal(gf.is_inf_bits(b, name), np.isinf(v)), name


# --- widening ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NARROW)
def test_widening_exhaustive_vs_ml_dtypes(name):
    b = _all_bits(name)
    mine = gf.to_fp32_bits(b, name)
    assert mine.dtype == np.uint32 and mine.shape == b.shape
    assert np.array_equal(gf.to_fp32(b, name).view(np.uint32), mine)
    ref = gf.from_bits(b, name).astype(np.float32).view(np.uint32)
    nan = gf.is_nan_bits(b, name)
    bad = (mine != ref) & ~nan
    assert not bad.any(), (f"seed={SEED} {name} widening of {_hex(b[bad])}: "
                           f"{_hex(mine[bad])} != ml_dtypes {_hex(ref[bad])}")
    # NaN -> NaN of the same sign; ml_dtypes (numpy for fp16) keeps bf16/fp16 payloads too.
    m32 = mine.view(np.float32)
    assert np.isnan(m32[nan]).all() and np.array_equal(mine[nan] >> 31, ref[nan] >> 31), name
    if name in ("bf16", "fp16"):
        assert np.array_equal(mine, ref), f"{name}: NaN payloads differ from ml_dtypes"


@pytest.mark.parametrize("name", NARROW)
def test_widening_exhaustive_vs_field_decoder(name):
    f = FORMATS[name]
    b = _all_bits(name)
    with np.errstate(invalid="ignore"):  # signalling NaNs
        mine = gf.to_fp32(b, name).astype(np.float64)
    ref = np.array([_decode_reference(int(x), f) for x in b.tolist()])
    same = (mine == ref) | (np.isnan(mine) & np.isnan(ref))
    # +-0 keep their sign.
    same &= np.signbit(mine) == np.signbit(ref)
    assert same.all(), f"seed={SEED} {name}: {_hex(b[~same])}"


def test_widening_specific_values():
    cases = [("fp8_e4m3", 0x01, 0x3B000000), ("fp8_e4m3", 0x7E, 0x43E00000),
             ("fp8_e4m3", 0x7F, 0x7FF00000), ("fp8_e4m3", 0xFF, 0xFFF00000),
             ("fp8_e4m3", 0x80, 0x80000000), ("fp8_e5m2", 0x01, 0x37800000),
             ("fp8_e5m2", 0x7C, 0x7F800000), ("fp8_e5m2", 0xFC, 0xFF800000),
             ("fp8_e5m2", 0x7B, 0x47600000), ("bf16", 0x0001, 0x00010000),
             ("bf16", 0x7F81, 0x7F810000), ("fp16", 0x0001, 0x33800000)]
    for name, b, want in cases:
        got = int(gf.to_fp32_bits(b, name))
        assert got == want, f"{name} {b:#x} widens to {got:#x}, want {want:#x}"


# --- errors --------------------------------------------------------------------------------


def test_unknown_format_errors():
    with pytest.raises(ValueError, match=r"^fmt must be one of .*'fp9'"):
        gf.get_format("fp9")
    for call, param in [
        (lambda: gf.to_bits([1.0], "e4m3"), "fmt"),
        (lambda: gf.from_bits([1], "FP32"), "fmt"),
        (lambda: gf.to_fp32([1], "fp8"), "fmt"),
        (lambda: gf.is_nan_bits([1], None), "fmt"),
        (lambda: widen_mul([1], "bf16", [1], "int8"), "b_fmt"),
        (lambda: widen_mul([1], "fp8_e4m3fn", [1], "bf16"), "a_fmt"),
        (lambda: dot([1], "bf16", [1], 3), "x_fmt"),
        (lambda: dot([1], "e5m2", [1], "bf16"), "w_fmt"),
        (lambda: special_bits("fp64"), "fmt"),
        (lambda: operand_pairs("bf16", "f32", np.random.default_rng(0), 1), "fmt_b"),
    ]:
        with pytest.raises(ValueError, match=rf"^{param} must be one of"):
            call()


def test_bad_bits_errors():
    with pytest.raises(ValueError, match=r"^bits must be 8-bit patterns of fp8_e4m3.*0x100"):
        gf.from_bits([0x100], "fp8_e4m3")
    with pytest.raises(ValueError, match=r"^bits must be 16-bit patterns.*-0x1"):
        gf.to_fp32_bits(np.array([-1]), "bf16")
    with pytest.raises(TypeError, match=r"^bits must hold integer"):
        gf.is_nan_bits(np.array([1.0]), "fp32")
    with pytest.raises(ValueError, match=r"^a_bits must be 32-bit"):
        fp32_add(1 << 32, 0)
    with pytest.raises(ValueError, match=r"^b_bits must be 32-bit"):
        fp32_mul(0, -1)
    with pytest.raises(ValueError, match=r"^b_bits must be 8-bit"):
        widen_mul([1], "bf16", [0x1FF], "fp8_e5m2")
    with pytest.raises(ValueError, match=r"last \(K\) axis"):
        dot(np.zeros((2, 3), np.uint16), "bf16", np.zeros((2, 4), np.uint8), "fp8_e4m3")


# --- sim.tb.vectors ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(FORMATS))
def test_special_bits_classes(name):
    f = FORMATS[name]
    s = special_bits(name)
    assert s.dtype == f.uint_dtype and len(np.unique(s)) == len(s)
    have = set(s.tolist())
    for mag in (0, f.min_subnormal_bits, f.max_subnormal_bits, f.min_normal_bits,
                f.max_finite_bits, f.one_bits, f.one_bits + 1, f.one_bits - 1):
        assert {mag, mag | f.sign_mask} <= have, f"{name}: {mag:#x} missing"
    if f.has_inf:
        assert {f.inf_bits, f.inf_bits | f.sign_mask} <= have
    nan = gf.is_nan_bits(s, name)
    assert {f.canonical_nan_bits, f.canonical_nan_bits | f.sign_mask} <= set(s[nan].tolist())
    if f.nan_encoding == "ieee":
        quiet = 1 << (f.man_bits - 1)
        assert (s[nan] & quiet == 0).any(), f"{name}: no signalling NaN"
    if name == "fp32":
        assert nan.sum() >= 7 and {0x33800000, 0x34400000, 0x73000000} <= have


@pytest.mark.parametrize("name", list(FORMATS))
def test_random_bits_deterministic_and_mixed(name):
    f = FORMATS[name]
    a = random_bits(name, np.random.default_rng([SEED, 7]), 10_000)
    b = random_bits(name, np.random.default_rng([SEED, 7]), 10_000)
    assert a.dtype == f.uint_dtype and a.shape == (10_000,) and np.array_equal(a, b)
    e = (a.astype(np.int64) >> f.man_bits) & ((1 << f.exp_bits) - 1)
    top = f.max_finite_bits >> f.man_bits
    assert (e == 0).mean() > 0.02, f"seed={SEED} {name}: too few subnormals/zeros"
    assert (e >= top - 1).mean() > 0.04, f"seed={SEED} {name}: too few huge values"
    assert len(random_bits(name, np.random.default_rng(0), 0)) == 0


def test_operand_pairs_layout():
    rng = seeded_rng("layout")
    for fa, fb in [("fp32", "fp32"), ("bf16", "bf16"), ("fp8_e4m3", "fp8_e5m2"),
                   ("bf16", "fp8_e4m3")]:
        a, b = operand_pairs(fa, fb, rng, 1000)
        sa, sb = special_bits(fa), special_bits(fb)
        assert a.dtype == FORMATS[fa].uint_dtype and b.dtype == FORMATS[fb].uint_dtype
        k = sa.size * sb.size
        assert np.array_equal(a[:k], np.repeat(sa, sb.size))
        assert np.array_equal(b[:k], np.tile(sb, sa.size))
        extra = len(a) - k - 1000
        assert extra == 0 if fa != "fp32" else extra >= 64, (fa, fb, extra)
    # fp32 pairs include the hand-picked ties, which the golden model rounds to even.
    a, b = operand_pairs("fp32", "fp32", rng, 0)
    s = fp32_add(a, b)
    pairs = dict(zip(zip(a.tolist(), b.tolist(), strict=True), s.tolist(), strict=True))
    assert pairs[(0x3F800000, 0x33800000)] == 0x3F800000
    assert pairs[(0x3F800000, 0x34400000)] == 0x3F800002
    assert pairs[(0x7F7FFFFF, 0x73000000)] == 0x7F800000
