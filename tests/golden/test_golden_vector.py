"""golden.vector (the vector engine's operations) vs references written from the contract.

References: Berkeley SoftFloat 3 through softfloatpy: f32_add / f32_sub / f32_mul (RNE) for
ADD, SUBTRACT, MULTIPLY; f32_lt_quiet (IEEE's quiet ordering) for GREATER; MAX and MIN from
IEEE 754-2019's text (a NaN operand gives NaN; else the larger / smaller by f32_lt_quiet, and
between zeros +0 is the larger) on SoftFloat's predicates; reductions by a Python loop of
np.float32 scalars. Match rule: bit-exact, except that a NaN reference is matched by any golden
NaN - and every golden NaN must be exactly 0x7FC00000.

Operands: every pair of ``sim.tb.vectors.special_bits("fp32")`` (±0, subnormals, ±inf, NaNs,
max/min) plus random pairs and ties (``sim.tb.vectors.operand_pairs``). Seed: ``NCLITE_SEED``
(default 1); every assertion message names it and the operands in hex.
"""

import os

import numpy as np
import pytest
import softfloatpy as sf

from golden import formats as gf
from golden.vector import REDUCE_OPS, AluOp, alu, reduce_free, transpose, widen
from sim.tb.vectors import operand_pairs, random_bits, seeded_rng, special_bits

SEED = int(os.environ.get("NCLITE_SEED", "1"))
QNAN = 0x7FC00000
N_RANDOM = 20_000


@pytest.fixture(autouse=True)
def _softfloat_rne():
    sf.set_rounding_mode(sf.RoundingMode.NEAR_EVEN)
    yield


def _f(bits: int) -> sf.Float32:
    return sf.Float32.from_bytes(int(bits).to_bytes(4, "big"))  # softfloatpy is big-endian


def _bits(x: sf.Float32) -> int:
    return int.from_bytes(x.to_bytes(), "big")


def _nan(b: int) -> bool:
    return (b & 0x7FFFFFFF) > 0x7F800000


def _ieee_max_min(op: AluOp, a: int, b: int) -> int:
    """IEEE 754-2019 maximum / minimum, from its text, on SoftFloat's quiet predicates."""
    if _nan(a) or _nan(b):
        return QNAN
    fa, fb = _f(a), _f(b)
    if sf.f32_eq(fa, fb):  # equal values: only the zeros differ in bits; +0 is the larger
        pos = a if not a >> 31 else b
        neg = b if pos == a else a
        return pos if op == AluOp.MAX else neg
    a_smaller = sf.f32_lt_quiet(fa, fb)
    return (b if a_smaller else a) if op == AluOp.MAX else (a if a_smaller else b)


def _reference(op: AluOp, a: int, b: int) -> int:
    if op in (AluOp.MAX, AluOp.MIN):
        return _ieee_max_min(op, a, b)
    if op == AluOp.GREATER:
        return 0x3F800000 if sf.f32_lt_quiet(_f(b), _f(a)) else 0
    fn = {AluOp.ADD: sf.f32_add, AluOp.SUBTRACT: sf.f32_sub, AluOp.MULTIPLY: sf.f32_mul}[op]
    return _bits(fn(_f(a), _f(b)))


def _assert_matches(what: str, a, b, got, want) -> None:
    got_nan = ((got & 0x7FFFFFFF) > 0x7F800000)
    assert np.all(got[got_nan] == QNAN), f"{what}: a NaN that is not 0x7FC00000 (seed {SEED})"
    want_nan = ((want & 0x7FFFFFFF) > 0x7F800000)
    bad = np.flatnonzero((got != want) & ~(got_nan & want_nan))
    if bad.size:
        i = bad[0]
        pytest.fail(f"{what} (seed {SEED}): {bad.size} mismatches, first {int(a[i]):#010x}, "
                    f"{int(b[i]):#010x}: golden {int(got[i]):#010x}, reference "
                    f"{int(want[i]):#010x}")


@pytest.mark.parametrize("op", list(AluOp), ids=lambda o: o.name)
def test_alu_matches_softfloat(op):
    """Every special pair, random pairs and ties, both operand orders."""
    a, b = operand_pairs("fp32", "fp32", seeded_rng("vector", int(op)), N_RANDOM)
    a, b = a.astype(np.uint32), b.astype(np.uint32)
    a, b = np.concatenate([a, b]), np.concatenate([b, a])
    got = alu(op, a, b)
    assert got.dtype == np.uint32 and got.shape == a.shape
    want = np.array([_reference(op, x, y) for x, y in zip(a.tolist(), b.tolist(),
                                                          strict=True)], dtype=np.uint32)
    _assert_matches(op.name, a, b, got, want)


def test_alu_hand_cases():
    """The contract's sentences, one by one."""
    pz, nz, one, inf, ninf = 0x0, 0x80000000, 0x3F800000, 0x7F800000, 0xFF800000
    snan, neg_nan = 0x7F800001, 0xFFC12345
    assert int(alu(AluOp.MAX, nz, pz)) == pz and int(alu(AluOp.MAX, pz, nz)) == pz
    assert int(alu(AluOp.MIN, pz, nz)) == nz and int(alu(AluOp.MIN, nz, pz)) == nz
    for op in (AluOp.MAX, AluOp.MIN, AluOp.ADD, AluOp.MULTIPLY, AluOp.SUBTRACT):
        assert int(alu(op, snan, one)) == QNAN and int(alu(op, one, neg_nan)) == QNAN
    assert int(alu(AluOp.SUBTRACT, inf, inf)) == QNAN
    assert int(alu(AluOp.MULTIPLY, pz, ninf)) == QNAN
    assert int(alu(AluOp.SUBTRACT, pz, pz)) == pz and int(alu(AluOp.SUBTRACT, nz, pz)) == nz
    assert int(alu(AluOp.GREATER, pz, nz)) == 0 and int(alu(AluOp.GREATER, one, snan)) == 0
    assert int(alu(AluOp.GREATER, one, nz)) == one and int(alu(AluOp.GREATER, ninf, inf)) == 0
    # Broadcasting a scalar, as TENSOR_SCALAR does.
    x = np.array([one, nz, inf], dtype=np.uint32)
    assert alu(AluOp.MAX, x, np.uint32(pz)).tolist() == [one, pz, inf]


@pytest.mark.parametrize("op", REDUCE_OPS, ids=lambda o: o.name)
def test_reduce_matches_a_loop(op):
    """Rows of random values with specials (NaN, ±inf, ±0, subnormals) among them; the
    reference folds np.float32 scalars from the contract's start value, left to right."""
    rng = seeded_rng("reduce", int(op))
    rows, cols = 64, 37
    x = random_bits("fp32", rng, rows * cols).astype(np.uint32).reshape(rows, cols)
    sp = special_bits("fp32").astype(np.uint32)
    pick = rng.random(x.shape) < 0.1
    pick[:8] = False  # some rows without specials: their sums are ordinary numbers
    x[pick] = rng.choice(sp, int(pick.sum()))
    x[8] = 0x80000000  # a row of -0: the sum is +0 (it starts from +0), max -0, min -0
    got = reduce_free(op, x)
    start = {AluOp.ADD: 0x0, AluOp.MAX: 0xFF800000, AluOp.MIN: 0x7F800000}[op]
    want = []
    for row in x.tolist():
        s = start
        for v in row:
            s = _reference(op, s, v)
        want.append(s)
    want = np.array(want, dtype=np.uint32)
    _assert_matches(f"reduce {op.name}", x[:, 0], x[:, 1], got, want)
    assert got[8] == (0 if op == AluOp.ADD else 0x80000000)


def test_reduce_rejects_other_ops_and_shapes():
    with pytest.raises(ValueError, match="op must be one of"):
        reduce_free(AluOp.SUBTRACT, np.zeros((2, 2), np.uint32))
    with pytest.raises(ValueError, match="cols >= 1"):
        reduce_free(AluOp.ADD, np.zeros((2, 0), np.uint32))


def test_widen_and_transpose_move_values_exactly():
    rng = seeded_rng("widen")
    for fmt in ("bf16", "fp8_e4m3", "fp8_e5m2", "fp16", "fp32"):
        b = random_bits(fmt, rng, 64)
        w = widen(b, fmt)
        finite = ~gf.is_nan_bits(b, fmt)
        assert np.array_equal(w.view(np.float32)[finite],
                              gf.from_bits(b, fmt)[finite].astype(np.float32)), fmt
    x = rng.integers(0, 1 << 32, size=(3, 5), dtype=np.uint64).astype(np.uint32)
    t = transpose(x)
    assert t.shape == (5, 3) and all(t[m, k] == x[k, m] for m in range(5) for k in range(3))
    with pytest.raises(ValueError, match="2-D"):
        transpose(np.zeros(3))
