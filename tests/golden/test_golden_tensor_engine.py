"""golden.tensor_engine (matmul_tile, TensorEngineModel, gemm_schedule, run_gemm) vs the contract.

References: a per-element Python loop over golden.fp32's scalar ``fp32_add``/``widen_mul`` and
a second one in plain ``np.float32`` arithmetic on ml_dtypes-widened operands (contract order,
docs/contract.md §4); the padded N-term column sum the array computes; a symbolic replay of the
GEMM schedule; and float64 (``math.fsum``) for the GEMM error bound.
Seed: ``NCLITE_SEED`` (default 1); failure messages name it and the shapes.
"""

import itertools
import math
import os

import numpy as np
import pytest

from golden import formats as gf
from golden.fp32 import fp32_add, widen_mul
from golden.tensor_engine import (
    LoadStationary,
    MultiplyMoving,
    Round,
    TensorEngineModel,
    gemm_schedule,
    matmul_tile,
    run_gemm,
)
from sim.tb.vectors import random_bits, seeded_rng, special_bits

SEED = int(os.environ.get("NCLITE_SEED", "1"))
QNAN = 0x7FC00000
FMTS = ("bf16", "fp8_e4m3", "fp8_e5m2")
PAIRS = list(itertools.product(FMTS, FMTS))
U = 2.0**-24



def _mixed_bits(fmt, rng, shape) -> np.ndarray:
    """Random patterns (sim.tb.vectors.random_bits) with ~1/4 replaced by special values."""
    n = int(np.prod(shape))
    b = random_bits(fmt, rng, n)
    sp = special_bits(fmt)
    pick = rng.random(n) < 0.25
    b[pick] = rng.choice(sp, int(pick.sum()))
    return b.reshape(shape)


def _loop_reference(st, sf, mv, mf) -> np.ndarray:
    """The contract's sum, one element and one k at a time, with scalar golden.fp32 calls."""
    k, m = st.shape
    out = np.zeros((m, mv.shape[1]), dtype=np.uint32)
    for i, j in itertools.product(range(m), range(mv.shape[1])):
        s = 0
        for r in range(k):
            s = int(fp32_add(s, widen_mul(int(st[r, i]), sf, int(mv[r, j]), mf)))
        out[i, j] = s
    return out


def _numpy_reference(st, sf, mv, mf) -> np.ndarray:
    """The same sum in plain np.float32 (ml_dtypes widening); NaN results as 0x7FC00000."""
    a = gf.from_bits(st, sf).astype(np.float32)
    b = gf.from_bits(mv, mf).astype(np.float32)
    out = np.zeros((st.shape[1], mv.shape[1]), dtype=np.uint32)
    with np.errstate(all="ignore"):
        for i, j in itertools.product(range(st.shape[1]), range(mv.shape[1])):
            s = np.float32(0.0)
            for r in range(st.shape[0]):
                s = np.float32(s + np.float32(a[r, i] * b[r, j]))
            out[i, j] = QNAN if np.isnan(s) else int(np.array(s).view(np.uint32))
    return out


def _assert_bits_equal(what: str, got: np.ndarray, want: np.ndarray) -> None:
    bad = np.argwhere(got != want)
    if bad.size:
        i = tuple(bad[0])
        pytest.fail(f"seed={SEED} {what}: {len(bad)} mismatches, first at {i}: "
                    f"got {int(got[i]):#010x}, want {int(want[i]):#010x}")


# --- matmul_tile -------------------------------------------------------------------------------


@pytest.mark.parametrize("sf,mf", PAIRS)
def test_matmul_tile_vs_loops(sf, mf):
    """Bit-exact vs two per-element loops, random + special operands (NaN, inf, +-0, subnormals,
    max finite), for every pair of input formats including mixed ones."""
    rng = seeded_rng(f"tile_{sf}_{mf}")
    for k, m, f in [(1, 1, 1), (1, 3, 2), (4, 2, 5), (7, 5, 3), (16, 3, 4)]:
        st = _mixed_bits(sf, rng, (k, m))
        mv = _mixed_bits(mf, rng, (k, f))
        got = matmul_tile(st, sf, mv, mf)
        assert got.shape == (m, f) and got.dtype == np.uint32
        what = f"matmul_tile({sf} {k}x{m}, {mf} {k}x{f})"
        _assert_bits_equal(what + " vs fp32 loop", got, _loop_reference(st, sf, mv, mf))
        _assert_bits_equal(what + " vs np.float32 loop", got, _numpy_reference(st, sf, mv, mf))


def test_matmul_tile_specials():
    """Hand-made cases: bf16 products overflow to inf and cancel to NaN, -0 sums are +0."""
    big = gf.to_bits(np.array([3e38, 3e38]), "bf16")  # (3e38)^2 and 3e38 * 2 overflow
    two = gf.to_bits(np.array([2.0, -2.0]), "bf16")
    st = np.array([[big[0]], [big[1]]], np.uint16)  # K=2, M=1
    mv = np.stack([two, two], axis=0)  # K=2, F=2: columns (2, 2) and (-2, -2)
    got = matmul_tile(st, "bf16", mv, "bf16")
    assert got[0].tolist() == [0x7F800000, 0xFF800000], [hex(x) for x in got[0]]
    mv2 = np.array([[two[0]], [two[1]]], np.uint16)  # +inf + -inf
    assert int(matmul_tile(st, "bf16", mv2, "bf16")[0, 0]) == QNAN
    neg0 = np.full((3, 2), 0x80, np.uint8)  # e4m3 -0
    pos = np.full((3, 4), 0x38, np.uint8)  # e4m3 +1.0
    assert not matmul_tile(neg0, "fp8_e4m3", pos, "fp8_e4m3").any()  # +0 + (-0) ... = +0
    # e4m3 NaN x anything, e5m2 inf x 0
    assert int(matmul_tile(np.array([[0x7F]], np.uint8), "fp8_e4m3",
                           np.array([[0x00]], np.uint8), "fp8_e5m2")[0, 0]) == QNAN
    assert int(matmul_tile(np.array([[0x7C]], np.uint8), "fp8_e5m2",
                           np.array([[0x00]], np.uint16), "bf16")[0, 0]) == QNAN


@pytest.mark.parametrize("sf,mf", PAIRS)
def test_padded_equals_k_terms(sf, mf):
    """The array's N-term sum over the +0-padded tile equals the contract's K-term sum.

    The column sum starts at +0 and an RNE sum is -0 only when both operands are -0, so it is
    never -0; adding the padding's +0 * +0 = +0 then leaves it unchanged. Checked on random +
    special data and on tiles whose products are all -0 (their sum must be +0, not -0).
    """
    rng = seeded_rng(f"pad_{sf}_{mf}")
    n = 8
    neg_zero_s = np.full((3, 4), 1 << (gf.get_format(sf).bits - 1))
    pos_one_m = np.full((3, 5), gf.get_format(mf).one_bits)
    cases = [(neg_zero_s, pos_one_m)]
    for k, m, f in [(1, 1, 1), (3, 8, 6), (7, 2, 9), (8, 5, 4)]:
        cases.append((_mixed_bits(sf, rng, (k, m)), _mixed_bits(mf, rng, (k, f))))
    for st, mv in cases:
        st = gf.as_bits(st, sf)
        mv = gf.as_bits(mv, mf)
        (k, m), f = st.shape, mv.shape[1]
        k_terms = matmul_tile(st, sf, mv, mf)
        assert not (k_terms == 0x80000000).any(), f"seed={SEED} a column sum is -0"
        st_pad = np.zeros((n, n), st.dtype)
        st_pad[:k, :m] = st
        mv_pad = np.zeros((n, f), mv.dtype)
        mv_pad[:k] = mv
        n_terms = matmul_tile(st_pad, sf, mv_pad, mf)
        what = f"padded N={n} vs K-term ({sf} {k}x{m}, {mf} {k}x{f})"
        _assert_bits_equal(what, n_terms[:m], k_terms)
        # Columns >= M are not +0 in general (+0 * inf = NaN) - the array never writes them.
        te = TensorEngineModel(n, 1, f)
        te.load_stationary(st, sf)
        te.multiply_moving(mv, mf, 0, 0, False)
        _assert_bits_equal("model " + what, te.drain(0, 0, f)[:m], k_terms)


def test_matmul_tile_speed():
    rng = seeded_rng("speed")
    st = random_bits("bf16", rng, 16 * 16).reshape(16, 16)
    mv = random_bits("fp8_e5m2", rng, 16 * 512).reshape(16, 512)
    import time

    t = time.perf_counter()
    out = matmul_tile(st, "bf16", mv, "fp8_e5m2")
    assert out.shape == (16, 512)
    assert time.perf_counter() - t < 0.5


# --- TensorEngineModel -------------------------------------------------------------------------


def test_model_overwrite_accumulate_and_untouched():
    """Overwrite puts s, accumulate puts fp32_add(old, s); nothing else in PSUM changes."""
    rng = seeded_rng("model")
    n, banks, words = 6, 3, 10
    te = TensorEngineModel(n, banks, words)
    assert te.psum.shape == (n, banks, words) and te.psum.dtype == np.uint32
    assert not te.psum.any()
    background = gf.fp32_bits(rng.standard_normal((n, banks, words)).astype(np.float32))
    te.psum[...] = background
    k, m, f, bank, addr = 4, 3, 5, 1, 4
    st = _mixed_bits("fp8_e4m3", rng, (k, m))
    mv1 = _mixed_bits("bf16", rng, (k, f))
    mv2 = _mixed_bits("fp8_e5m2", rng, (k, f))
    te.load_stationary(st, "fp8_e4m3")
    te.multiply_moving(mv1, "bf16", bank, addr, False)
    s1 = matmul_tile(st, "fp8_e4m3", mv1, "bf16")
    want = background.copy()
    want[:m, bank, addr : addr + f] = s1
    _assert_bits_equal("overwrite", te.psum, want)
    te.multiply_moving(mv2, "fp8_e5m2", bank, addr, True)  # second MM on the same tile
    s2 = matmul_tile(st, "fp8_e4m3", mv2, "fp8_e5m2")
    want[:m, bank, addr : addr + f] = fp32_add(s1, s2)
    _assert_bits_equal("accumulate", te.psum, want)
    te.multiply_moving(mv2, "fp8_e5m2", bank, addr, False)
    want[:m, bank, addr : addr + f] = s2
    _assert_bits_equal("overwrite after accumulate", te.psum, want)
    assert np.array_equal(te.drain(bank, addr, f), want[:, bank, addr : addr + f])
    # A new, larger tile replaces the old one; fresh PSUM accumulate of zeros gives s.
    te2 = TensorEngineModel(n, banks, words)
    st2 = _mixed_bits("bf16", rng, (n, n))
    mv3 = _mixed_bits("bf16", rng, (n, words))
    te2.load_stationary(st, "fp8_e4m3")
    te2.load_stationary(st2, "bf16")
    te2.multiply_moving(mv3, "bf16", 2, 0, True)
    _assert_bits_equal("accumulate onto reset PSUM", te2.drain(2, 0, words),
                       matmul_tile(st2, "bf16", mv3, "bf16"))


def _errors():
    z8 = np.zeros((2, 3), np.uint8)

    def fresh():
        te = TensorEngineModel(4, 2, 8)
        te.load_stationary(z8, "fp8_e4m3")
        return te

    return [
        (lambda: TensorEngineModel(0, 2, 8), "n"),
        (lambda: TensorEngineModel(4, 0, 8), "banks"),
        (lambda: TensorEngineModel(4, 2, 0), "bank_words"),
        (lambda: fresh().load_stationary(np.zeros((5, 2), np.uint8), "fp8_e4m3"), "tile"),
        (lambda: fresh().load_stationary(np.zeros((2, 5), np.uint8), "fp8_e4m3"), "tile"),
        (lambda: fresh().load_stationary(np.zeros((0, 2), np.uint8), "fp8_e4m3"), "tile"),
        (lambda: fresh().load_stationary(np.zeros(3, np.uint8), "fp8_e4m3"), "tile"),
        (lambda: fresh().load_stationary(z8, "fp9"), "fmt"),
        (lambda: fresh().load_stationary(z8, "fp32"), "fmt"),
        (lambda: fresh().load_stationary(np.full((2, 2), 300), "fp8_e4m3"), "tile"),
        (lambda: TensorEngineModel(4, 2, 8).multiply_moving(z8, "bf16", 0, 0, False),
         "load_stationary"),
        (lambda: fresh().multiply_moving(np.zeros((3, 4), np.uint8), "fp8_e5m2", 0, 0, False),
         "moving"),
        (lambda: fresh().multiply_moving(np.zeros((2, 9), np.uint8), "fp8_e5m2", 0, 0, False),
         "F"),
        (lambda: fresh().multiply_moving(np.zeros((2, 4), np.uint8), "fp8_e5m2", 0, 5, False),
         "addr"),
        (lambda: fresh().multiply_moving(z8, "fp8_e5m2", 0, 8, False), "addr"),
        (lambda: fresh().multiply_moving(z8, "fp8_e5m2", 0, -1, False), "addr"),
        (lambda: fresh().multiply_moving(z8, "fp8_e5m2", 2, 0, False), "bank"),
        (lambda: fresh().multiply_moving(z8, "fp8_e5m2", -1, 0, False), "bank"),
        (lambda: fresh().multiply_moving(z8, "fp8_e5m2", 0, 0, 2), "accumulate"),
        (lambda: fresh().multiply_moving(z8, "e5m2", 0, 0, False), "fmt"),
        (lambda: fresh().drain(2, 0, 1), "bank"),
        (lambda: fresh().drain(0, 8, 1), "addr"),
        (lambda: fresh().drain(0, 4, 5), "count"),
        (lambda: matmul_tile(z8, "fp8_e4m3", np.zeros((3, 3), np.uint8), "fp8_e4m3"), "K"),
        (lambda: run_gemm(z8, "bf16", np.zeros((3, 3), np.uint16), "bf16", n=4, banks=1,
                          bank_words=4), "K"),
        (lambda: gemm_schedule(1, 0, 1, n=4, banks=1, bank_words=4), "k"),
    ]


@pytest.mark.parametrize("i", range(len(_errors())))
def test_errors_name_the_argument(i):
    call, name = _errors()[i]
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        call()


# --- gemm_schedule -----------------------------------------------------------------------------


def _replay(rounds: list[Round], m, k, f, n, banks, bank_words) -> None:
    """Replay a schedule symbolically and check every rule; fail with the configuration."""
    cfg = f"seed={SEED} m={m} k={k} f={f} n={n} banks={banks} bank_words={bank_words}"
    covered = np.zeros((m, f), dtype=int)
    for r, rnd in enumerate(rounds):
        assert rnd.commands and rnd.blocks, f"{cfg}: round {r} is empty"
        # psum[(partition, bank, word)] = (row of C, column of C, list of k ranges summed)
        psum: dict = {}
        ls = None
        banks_used = set()
        for c in rnd.commands:
            if isinstance(c, LoadStationary):
                assert 0 <= c.k0 < c.k1 <= k and c.k1 - c.k0 <= n, f"{cfg}: {c}"
                assert 0 <= c.m0 < c.m1 <= m and c.m1 - c.m0 <= n, f"{cfg}: {c}"
                ls = c
                continue
            assert isinstance(c, MultiplyMoving), f"{cfg}: {c}"
            assert ls is not None and (c.k0, c.k1) == (ls.k0, ls.k1), f"{cfg}: K of {c} vs {ls}"
            assert 0 <= c.f0 < c.f1 <= f and 0 <= c.bank < banks, f"{cfg}: {c}"
            assert 0 <= c.addr and c.addr + c.f1 - c.f0 <= bank_words, f"{cfg}: {c}"
            assert c.accumulate == (c.k0 > 0), f"{cfg}: accumulate of {c}"
            banks_used.add(c.bank)
            for p, w in itertools.product(range(ls.m1 - ls.m0), range(c.f1 - c.f0)):
                key, tgt = (p, c.bank, c.addr + w), (ls.m0 + p, c.f0 + w)
                if c.accumulate:
                    assert key in psum and psum[key][:2] == tgt, f"{cfg}: {c} accumulates {key}"
                    assert psum[key][2][-1][1] == c.k0, f"{cfg}: k order at {key}"
                    psum[key][2].append((c.k0, c.k1))
                else:
                    psum[key] = (*tgt, [(c.k0, c.k1)])
        assert len(banks_used) <= banks, f"{cfg}: round {r} uses {banks_used}"
        for b in rnd.blocks:
            for p, w in itertools.product(range(b.m1 - b.m0), range(b.f1 - b.f0)):
                mm, ff, ks = psum[(p, b.bank, b.addr + w)]
                assert (mm, ff) == (b.m0 + p, b.f0 + w), f"{cfg}: {b} holds C[{mm},{ff}]"
                assert ks[0][0] == 0 and ks[-1][1] == k, f"{cfg}: {b} summed k ranges {ks}"
            covered[b.m0 : b.m1, b.f0 : b.f1] += 1
    assert (covered == 1).all(), f"{cfg}: C elements covered {covered.min()}..{covered.max()}x"


SCHEDULE_CASES = [
    (1, 1, 1, 4, 1, 1), (5, 7, 9, 4, 2, 4), (4, 4, 4, 4, 1, 4), (9, 13, 3, 4, 4, 8),
    (3, 5, 40, 4, 3, 4), (17, 33, 65, 8, 8, 16), (2, 2, 12, 2, 5, 3), (16, 16, 512, 16, 8, 64),
]


def _shares(m, f, n, banks, bank_words) -> list[range]:
    """The banks each round may use, in turn, as the docstring states them."""
    if banks == 1 or -(-m // n) * -(-f // bank_words) <= banks:
        return [range(banks)]
    return [range(banks // 2), range(banks // 2, banks)]


@pytest.mark.parametrize("m,k,f,n,banks,bank_words", SCHEDULE_CASES)
def test_schedule_rules(m, k, f, n, banks, bank_words):
    """Tiles fit the array and banks, accumulate is False exactly on the first k-tile, every C
    element lands in exactly one block holding all of k, rounds take turns on PSUM's halves
    when C does not fit (so a round writes no bank the round before it is drained from), and a
    round only ends when the next group of f-tiles does not fit in its share's free banks."""
    rounds = gemm_schedule(m, k, f, n=n, banks=banks, bank_words=bank_words)
    _replay(rounds, m, k, f, n, banks, bank_words)
    shares = _shares(m, f, n, banks, bank_words)
    for r, rnd in enumerate(rounds):
        written = {c.bank for c in rnd.commands if isinstance(c, MultiplyMoving)}
        assert written <= set(shares[r % len(shares)]), f"seed={SEED} round {r}: {written}"
    for r, (a, b) in enumerate(itertools.pairwise(rounds)):
        first_group = [blk for blk in b.blocks if blk.m0 == b.blocks[0].m0]
        assert len(a.blocks) + len(first_group) > len(shares[r % len(shares)]), (
            f"seed={SEED} a round ended with free banks: {a.blocks} then {b.blocks}")
        if len(shares) == 2:
            assert not {blk.bank for blk in a.blocks} & {blk.bank for blk in b.blocks}
    f_tiles = -(-f // bank_words)
    n_ls = sum(isinstance(c, LoadStationary) for r in rounds for c in r.commands)
    k_tiles, m_tiles = -(-k // n), -(-m // n)
    group = min(len(s) for s in shares)
    assert n_ls == m_tiles * k_tiles * -(-f_tiles // group)


def test_schedule_pingpong_shape():
    """64 x 64 x 64 on 8 x 8 with 8 banks of 32 words: 16 blocks of C in 8 banks, so four rounds
    of two m-tiles each, on banks 0-3, 4-7, 0-3, 4-7."""
    rounds = gemm_schedule(64, 64, 64, n=8, banks=8, bank_words=32)
    assert [sorted({b.bank for b in r.blocks}) for r in rounds] == [[0, 1, 2, 3], [4, 5, 6, 7]] * 2
    assert [sorted({b.m0 for b in r.blocks}) for r in rounds] == [[0, 8], [16, 24], [32, 40],
                                                                  [48, 56]]
    one = gemm_schedule(16, 64, 64, n=8, banks=8, bank_words=16)  # 2 x 4 blocks: one round
    assert len(one) == 1 and sorted(b.bank for b in one[0].blocks) == list(range(8))


def test_schedule_random():
    rng = seeded_rng("schedule")
    for _ in range(150):
        m, k, f = (int(x) for x in rng.integers(1, 40, 3))
        n, banks, bank_words = int(rng.integers(1, 9)), int(rng.integers(1, 6)), int(
            rng.integers(1, 12))
        _replay(gemm_schedule(m, k, f, n=n, banks=banks, bank_words=bank_words), m, k, f, n,
                banks, bank_words)


# --- run_gemm ----------------------------------------------------------------------------------


GEMM_SHAPES = [  # (k, m, f, n, banks, bank_words)
    (1, 1, 1, 4, 1, 4),
    (3, 5, 7, 4, 2, 4),  # K < N, M and F not multiples
    (9, 4, 4, 4, 2, 4),  # K > N: accumulation groups
    (13, 6, 17, 4, 2, 4),  # F needs 5 banks > 2: F split across rounds
    (20, 11, 33, 8, 3, 8),
    (37, 3, 50, 16, 2, 16),
    (16, 16, 12, 16, 4, 4),
]


def _tiled_reference(a, af, b, bf, n) -> np.ndarray:
    """((s_0 + s_1) + s_2) + ... over k-tiles of n rows, s_j = matmul_tile of the slices."""
    c = matmul_tile(a[:n], af, b[:n], bf)
    for k0 in range(n, a.shape[0], n):
        c = fp32_add(c, matmul_tile(a[k0 : k0 + n], af, b[k0 : k0 + n], bf))
    return c


@pytest.mark.parametrize("af,bf", PAIRS)
def test_run_gemm_bit_exact(af, bf):
    """run_gemm equals the k-tile sum order of the docstring, specials included; with K <= N it
    equals a single matmul_tile."""
    rng = seeded_rng(f"gemm_exact_{af}_{bf}")
    for k, m, f, n, banks, words in GEMM_SHAPES:
        a = _mixed_bits(af, rng, (k, m))
        b = _mixed_bits(bf, rng, (k, f))
        got = run_gemm(a, af, b, bf, n=n, banks=banks, bank_words=words)
        what = f"run_gemm({af} A {k}x{m}, {bf} B {k}x{f}, n={n} banks={banks} W={words})"
        _assert_bits_equal(what, got, _tiled_reference(a, af, b, bf, n))
        if k <= n:
            _assert_bits_equal(what + " vs one tile", got, matmul_tile(a, af, b, bf))


def _finite_bits(fmt, rng, shape) -> np.ndarray:
    """Finite values whose products with each other are exact in fp32 (no under/overflow):
    fp8 - every finite pattern; bf16 - random mantissa, exponent in [-20, 20]."""
    f = gf.get_format(fmt)
    size = int(np.prod(shape))
    sign = rng.integers(0, 2, size).astype(np.uint32) << (f.bits - 1)
    if fmt == "bf16":
        e = rng.integers(-20, 21, size) + f.bias
        bits = sign | (e.astype(np.uint32) << f.man_bits) | rng.integers(0, 128, size)
    else:
        bits = rng.integers(0, 1 << f.bits, size).astype(np.uint32)
        bad = gf.is_nan_bits(bits, f) | gf.is_inf_bits(bits, f)
        bits[bad] = sign[bad]  # +-0 instead
    return gf.as_bits(bits.astype(f.uint_dtype), f).reshape(shape)


@pytest.mark.parametrize("af,bf", PAIRS)
def test_run_gemm_error_bound(af, bf):
    """|C - exact| <= gamma_K * sum_k |a_k b_k| per element, gamma_K = K u / (1 - K u), u = 2^-24.

    Every product of these inputs is exact in fp32 (fp8 x fp8: 8-bit significands and no
    under/overflow; bf16 factors have exponents in [-20, 20] so bf16 x bf16 and bf16 x fp8
    products have <= 16 significant bits and stay normal). Each C element is therefore a
    sum of K exact terms in some order of K fp32 RNE additions (the k-tile grouping is just
    another summation tree; its leading +0 + p adds are exact), whose error is at most
    gamma_{K-1} * sum|terms| (Higham, Accuracy and Stability, §4.2) <= gamma_K * sum|terms|.
    The exact sum is taken from the fp32-widened inputs: their float64 products are exact and
    ``math.fsum`` rounds their sum once (relative 2^-53), which the bound adds; a further
    2^-50 relative slack covers evaluating the bound itself in float64.
    """
    rng = seeded_rng(f"gemm_bound_{af}_{bf}")
    for k, m, f, n, banks, words in GEMM_SHAPES:
        a = _finite_bits(af, rng, (k, m))
        b = _finite_bits(bf, rng, (k, f))
        c = gf.fp32_from_bits(run_gemm(a, af, b, bf, n=n, banks=banks, bank_words=words))
        a64 = gf.to_fp32(a, af).astype(np.float64)
        b64 = gf.to_fp32(b, bf).astype(np.float64)
        prod = a64[:, :, None] * b64[:, None, :]  # (K, M, F), exact
        assert np.isfinite(c).all()
        gamma = k * U / (1 - k * U)
        what = f"seed={SEED} run_gemm({af} A {k}x{m}, {bf} B {k}x{f}, n={n} banks={banks} " \
               f"W={words})"
        for i, j in itertools.product(range(m), range(f)):
            exact = math.fsum(prod[:, i, j])
            mag = math.fsum(np.abs(prod[:, i, j]))
            bound = (gamma + 2.0**-53) * mag * (1 + 2.0**-50)
            err = abs(float(c[i, j]) - exact)
            assert err <= bound, (f"{what}: C[{i},{j}] = {float(c[i, j])!r}, exact {exact!r}, "
                                  f"error {err:.3e} > bound {bound:.3e}")
