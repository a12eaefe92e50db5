"""The contract's structured sparsity (``golden.sparse``): compression round-trips and refuses
tiles that break their pattern; the sparse matmul is the contract's loop over the kept rows
(a literal scalar statement of it, bit for bit), a pruned inf or NaN never reaches a sum, it
equals a dense matmul with zeros wherever that has no inf, NaN or sign of zero to differ on,
and it is close to float64's sum of the kept products."""

from __future__ import annotations

import numpy as np
import pytest

from golden.formats import FP32_CANONICAL_NAN, to_fp32_bits
from golden.sparse import (
    PATTERNS,
    Pattern,
    check_tags,
    compress,
    decompress,
    magnitude_mask,
    pattern,
    sparse_matmul_tile,
)
from golden.tensor_engine import matmul_tile
from sim.tb import vectors

FORMATS = ("bf16", "fp8_e4m3", "fp8_e5m2")




def _normal_bf16(rng, shape) -> np.ndarray:
    """Normal values as bf16 bit patterns (finite, no overflow in a product)."""
    import ml_dtypes

    return rng.standard_normal(shape).astype(ml_dtypes.bfloat16).view(np.uint16)


def _f32(bits) -> np.ndarray:
    return np.asarray(bits, np.uint32).view(np.float32)


def _literal(values, tags, s_fmt, moving, m_fmt, p, k) -> np.ndarray:
    """The contract's text, one output element and one kept row at a time (numpy float32
    scalars: IEEE binary32 with RNE)."""
    a, mask = decompress(values, tags, s_fmt, p, k)
    a32 = _f32(to_fp32_bits(a, s_fmt))
    b32 = _f32(to_fp32_bits(moving, m_fmt))
    out = np.zeros((a.shape[1], b32.shape[1]), np.uint32)
    with np.errstate(all="ignore"):
        for m in range(a.shape[1]):
            for f in range(b32.shape[1]):
                s = np.float32(0.0)
                for kk in range(k):
                    if mask[kk, m]:
                        s = np.float32(s + np.float32(a32[kk, m] * b32[kk, f]))
                out[m, f] = FP32_CANONICAL_NAN if np.isnan(s) else np.float32(s).view(np.uint32)
    return out


def test_patterns():
    assert list(PATTERNS) == ["2:4", "4:8", "4:12", "4:16"]
    assert [pattern(p).tag_bits for p in PATTERNS] == [2, 3, 4, 4]
    assert pattern("4:16").groups(20) == [(0, 16, 4), (16, 4, 4)]
    assert pattern("4:8").groups(10) == [(0, 8, 4), (8, 2, 2)]
    assert pattern("2:4").slots(7) == 2 + 2
    for bad in ("3:4", "4:16 ", 4, None, Pattern(3, 8)):
        with pytest.raises(ValueError, match="pattern must be one of 2:4, 4:8, 4:12, 4:16"):
            pattern(bad)


@pytest.mark.parametrize("name", list(PATTERNS))
def test_compress_round_trips(name, seed):
    rng = vectors.seeded_rng("sparse-round-trip", name, seed=seed)
    p = pattern(name)
    for k in (1, p.n, p.m, p.m + 1, 3 * p.m - 1, 4 * p.m):
        tile = vectors.operands("bf16", rng, (k, 5), 0.2)
        mask = vectors.sparse_mask(rng, p, k, 5)
        values, tags = compress(tile, "bf16", mask, p)
        assert values.shape == tags.shape == (p.slots(k), 5)
        check_tags(tags, p, k)
        dense, back = decompress(values, tags, "bf16", p, k)
        assert np.array_equal(back, mask), (name, k, seed)
        assert np.array_equal(dense[mask], np.asarray(tile)[mask]), (name, k, seed)
        assert not dense[~mask].any()


@pytest.mark.parametrize("keep, message", [
    (3, "column 1, rows 0..7: 3 kept; 4:8 keeps exactly 4 of every 8 rows"),
    (5, "column 1, rows 0..7: 5 kept"),
])
def test_compress_refuses_a_broken_pattern(keep, message):
    mask = np.zeros((8, 3), bool)
    mask[:4] = True
    mask[:, 1] = False
    mask[:keep, 1] = True
    with pytest.raises(ValueError, match=message):
        compress(np.zeros((8, 3), np.uint16), "bf16", mask, "4:8")


def test_compress_refuses_a_short_group_kept_short():
    mask = np.zeros((10, 1), bool)
    mask[:4] = True
    mask[8] = True  # the last group has 2 rows: both must be kept
    with pytest.raises(ValueError, match="rows 8..9: 1 kept; 4:8 keeps exactly 2 of these 2"):
        compress(np.zeros((10, 1), np.uint16), "bf16", mask, "4:8")


def test_compress_checks_its_mask():
    with pytest.raises(ValueError, match="mask must be a bool array of the tile's shape"):
        compress(np.zeros((4, 2), np.uint16), "bf16", np.ones((4, 2), np.int8), "2:4")
    with pytest.raises(ValueError, match="mask must be a bool array"):
        compress(np.zeros((4, 2), np.uint16), "bf16", np.ones((4, 3), bool), "2:4")


@pytest.mark.parametrize("tags, message", [
    ([[0], [4]], "a tag of rows 0..3 is 4, beyond the group's 4 rows"),
    ([[2], [1]], "the tags of rows 0..3 do not increase: \\[2, 1\\]"),
    ([[1], [1]], "do not increase"),
    ([[0]], "tags must have 2 rows for K = 4 in 2:4"),
])
def test_bad_tags_are_named(tags, message):
    with pytest.raises(ValueError, match=message):
        check_tags(np.array(tags), "2:4", 4)


@pytest.mark.parametrize("s_fmt", FORMATS)
@pytest.mark.parametrize("name", list(PATTERNS))
def test_sparse_matmul_is_the_contracts_loop(name, s_fmt, seed):
    """Special values (NaN, inf, ±0, subnormals, max) in the kept values and in the moving
    tile; bit for bit with the literal statement (any NaN is the canonical one)."""
    rng = vectors.seeded_rng("sparse-literal", name, s_fmt, seed=seed)
    p = pattern(name)
    k, cols, f = 2 * p.m + 3, 3, 4
    tile = vectors.operands(s_fmt, rng, (k, cols), 0.25)
    values, tags = compress(tile, s_fmt, vectors.sparse_mask(rng, p, k, cols), p)
    moving = vectors.operands("bf16", rng, (k, f), 0.25)
    got = sparse_matmul_tile(values, tags, s_fmt, moving, "bf16", p)
    want = _literal(values, tags, s_fmt, moving, "bf16", p, k)
    assert np.array_equal(got, want), (name, s_fmt, seed, np.argwhere(got != want)[:3])


@pytest.mark.parametrize("name", list(PATTERNS))
def test_pruned_specials_never_reach_a_sum(name, seed):
    """inf and NaN in the moving tile's rows that a column prunes change nothing of that
    column; a dense matmul with zeros there would be NaN."""
    rng = vectors.seeded_rng("sparse-pruned", name, seed=seed)
    p = pattern(name)
    k, f = 2 * p.m, 3
    mask = np.zeros((k, 1), bool)
    for g0, _, slots in p.groups(k):
        mask[g0:g0 + slots] = True  # the first slots of each group
    tile = vectors.operands("bf16", rng, (k, 1), 0.0)
    values, tags = compress(tile, "bf16", mask, p)
    finite = _normal_bf16(rng, (k, f))
    poisoned = finite.copy()
    poisoned[~mask[:, 0]] = rng.choice([0x7F80, 0xFF80, 0x7FC0, 0x7F81], (int((~mask).sum()), f))
    a = sparse_matmul_tile(values, tags, "bf16", finite, "bf16", p)
    b = sparse_matmul_tile(values, tags, "bf16", poisoned, "bf16", p)
    assert np.array_equal(a, b), (name, seed)
    dense, _ = decompress(values, tags, "bf16", p, k)
    assert np.isnan(_f32(matmul_tile(dense, "bf16", poisoned, "bf16"))).all()


@pytest.mark.parametrize("name", list(PATTERNS))
def test_equals_dense_with_zeros_when_the_moving_tile_is_finite(name, seed):
    """With a finite moving tile (specials in the kept values allowed) the dense matmul of the
    zero-filled tile has the same bits: a pruned row adds a ±0 product, and s + ±0 is s (the
    sum starts at +0, so it is never -0)."""
    rng = vectors.seeded_rng("sparse-dense", name, seed=seed)
    p = pattern(name)
    k, cols, f = 3 * p.m, 4, 6
    tile = vectors.operands("bf16", rng, (k, cols), 0.2)
    values, tags = compress(tile, "bf16", vectors.sparse_mask(rng, p, k, cols), p)
    moving = _normal_bf16(rng, (k, f))
    dense, _ = decompress(values, tags, "bf16", p, k)
    got = sparse_matmul_tile(values, tags, "bf16", moving, "bf16", p)
    assert np.array_equal(got, matmul_tile(dense, "bf16", moving, "bf16")), (name, seed)


@pytest.mark.parametrize("name", list(PATTERNS))
def test_close_to_float64(name, seed):
    """The fp32 sum of the kept products within the bound gamma_k * sum |products| of
    float64's."""
    rng = vectors.seeded_rng("sparse-f64", name, seed=seed)
    p = pattern(name)
    k, cols, f = 4 * p.m, 4, 5
    tile = _normal_bf16(rng, (k, cols))
    mask = vectors.sparse_mask(rng, p, k, cols)
    values, tags = compress(tile, "bf16", mask, p)
    moving = _normal_bf16(rng, (k, f))
    a = _f32(to_fp32_bits(np.where(mask, tile, 0), "bf16")).astype(np.float64)
    b = _f32(to_fp32_bits(moving, "bf16")).astype(np.float64)
    exact = a.T @ b
    bound = p.slots(k) * 2.0 ** -24 * (np.abs(a).T @ np.abs(b))
    got = _f32(sparse_matmul_tile(values, tags, "bf16", moving, "bf16", p)).astype(np.float64)
    assert (np.abs(got - exact) <= bound).all(), (name, seed)


@pytest.mark.parametrize("name", list(PATTERNS))
def test_magnitude_mask_keeps_the_largest(name, seed):
    rng = vectors.seeded_rng("sparse-magnitude", name, seed=seed)
    p = pattern(name)
    k = 2 * p.m + 3
    tile = vectors.operands("bf16", rng, (k, 6), 0.1)
    mask = magnitude_mask(tile, "bf16", p)
    compress(tile, "bf16", mask, p)  # exactly min(n, rows) a group: the pattern holds
    with np.errstate(invalid="ignore"):
        mag = np.abs(_f32(to_fp32_bits(tile, "bf16")).astype(np.float64))
    mag[np.isnan(mag)] = np.inf
    for g0, rows, _ in p.groups(k):
        kept, pruned = mask[g0:g0 + rows], ~mask[g0:g0 + rows]
        g = mag[g0:g0 + rows]
        for c in range(6):
            if pruned[:, c].any():
                assert g[kept[:, c], c].min() >= g[pruned[:, c], c].max(), (name, c, seed)


@pytest.mark.parametrize("name", list(PATTERNS))
def test_sparse_gemm_is_its_tiles_folded(name, seed):
    """run_sparse_gemm over the schedule (k-tiles of R·n, banks, rounds) equals the contract's
    sparse matmul of each k-tile, added over k-tiles in order (fp32, p = p + s): specials in
    both operands, M past n, F past a bank, K not a multiple of the tile."""
    from golden.fp32 import fp32_add
    from golden.sparse import run_sparse_gemm

    rng = vectors.seeded_rng("sparse-gemm", name, seed=seed)
    p, n = pattern(name), 4
    k, m, f = 2 * p.ratio * n + p.m + 1, n + 2, 11
    a = vectors.operands("bf16", rng, (k, m), 0.05)
    b = vectors.operands("fp8_e4m3", rng, (k, f), 0.05)
    mask = vectors.sparse_mask(rng, p, k, m)
    got = run_sparse_gemm(a, "bf16", mask, b, "fp8_e4m3", p, n=n, banks=3, bank_words=4)
    want = None
    t = p.ratio * n
    for k0 in range(0, k, t):
        v, tg = compress(np.asarray(a)[k0:k0 + t], "bf16", mask[k0:k0 + t], p)
        s = sparse_matmul_tile(v, tg, "bf16", np.asarray(b)[k0:k0 + t], "fp8_e4m3", p)
        want = s if want is None else fp32_add(want, s)
    same = (got == want) | (np.isnan(_f32(got)) & np.isnan(_f32(want)))
    assert same.all(), (name, seed)
    with pytest.raises(ValueError, match="n must be a multiple of 4"):
        run_sparse_gemm(a, "bf16", mask, b, "fp8_e4m3", "4:8", n=6, banks=3, bank_words=4)


def test_gemm_schedule_k_tile():
    from golden.tensor_engine import LoadStationary, gemm_schedule

    def k_tiles(**kw):
        return sorted({(c.k0, c.k1) for r in gemm_schedule(3, 20, 5, n=4, banks=2,
                                                            bank_words=8, **kw)
                       for c in r.commands if isinstance(c, LoadStationary)})

    assert k_tiles() == k_tiles(k_tile=4) == [(0, 4), (4, 8), (8, 12), (12, 16), (16, 20)]
    assert k_tiles(k_tile=16) == [(0, 16), (16, 20)]
