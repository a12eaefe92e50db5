"""golden.collective's 2-D torus (``torus_groups``, ``torus_schedule``, ``run_torus_schedule``,
``torus_all_reduce``, ``torus_all_to_all``, ``torus_bound_cycles``) against the contract.

References, none of which runs golden's schedule: the sub-rings written out by hand; for the
all-reduce, every word as a plain ``np.float32`` scalar sum: chunk j of the row split (the
contract's beat arithmetic, ``_chunk_of``) summed along each row in ring order after its owner
j, ``((x[i,j+1] + x[i,j+2]) + ...) + x[i,j]``, then those row sums summed along column j in
ring order after the owner c of the word's sub-chunk of chunk j (NaN canonical); a 2 x 2 case
written out term by term; float64 ``math.fsum`` for the gamma_{RC-1} bound; for the
all-to-all, golden's flat ``all_to_all`` over the R·C ranks (its slots concatenated), itself
held against literal statements in test_golden_routed.py. Negative controls: the flat ring's
order differs from the torus's. Seed: ``NCLITE_SEED`` (default 1); every assertion names it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from golden.collective import (
    CollectiveDim,
    CollectiveOp,
    TorusStep,
    all_to_all,
    ring_all_reduce,
    ring_bound_cycles,
    route_bound_cycles,
    run_torus_schedule,
    torus_all_reduce,
    torus_all_to_all,
    torus_bound_cycles,
    torus_groups,
    torus_schedule,
)
from sim.tb.vectors import random_bits, seeded_rng, special_bits

ROW, COL = CollectiveDim.ROW, CollectiveDim.COLUMN
AR, RS, AG = CollectiveOp.ALL_REDUCE, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER
A2A, PERM = CollectiveOp.ALL_TO_ALL, CollectiveOp.PERMUTE
QNAN = 0x7FC00000
U = 2.0**-24
SPECIAL_BITS = special_bits("fp32")


def _f(bits) -> np.float32:
    return np.uint32(bits).view(np.float32)


def _is_nan(b) -> np.ndarray:
    return (np.asarray(b, np.uint32) & 0x7FFFFFFF) > 0x7F800000


def _chunk_of(n: int, ranks: int, width: int) -> list[int]:
    """The chunk of every word, from the contract: B = ceil(n / W) beats, q, e = divmod(B, P),
    the first e chunks have q + 1 beats, the others q; word i is in beat i // W."""
    # lab4 hide begin: chunk_of
    q, e = divmod(-(-n // width), ranks)
    sizes = [q + 1] * e + [q] * (ranks - e)
    owner = [c for c in range(ranks) for _ in range(sizes[c])]
    return [owner[i // width] for i in range(n)]
    # lab4 hide end: chunk_of


def _seq_sum(values) -> np.float32:
    """Left-to-right np.float32 sum; a NaN result becomes 0x7FC00000."""
    with np.errstate(all="ignore"):
        s = np.float32(values[0])
        for v in values[1:]:
            s = np.float32(s + np.float32(v))
    return _f(QNAN) if np.isnan(s) else s


def _literal_all_reduce(x: np.ndarray, R: int, C: int, W: int) -> np.ndarray:
    """(R·C, n) bit patterns -> the torus all-reduce's n words, word by word (module doc)."""
    n = x.shape[1]
    xf = x.view(np.float32)
    row_chunk = _chunk_of(n, C, W)
    out = np.empty(n, np.uint32)
    for k in range(n):
        j = row_chunk[k]
        start = row_chunk.index(j)  # chunk j's first word: a whole number of rows
        n_j = row_chunk.count(j)
        c = _chunk_of(n_j, R, W)[k - start]  # the column ring's owner of this word
        row_sums = [_seq_sum([xf[i * C + (j + t) % C, k] for t in range(1, C + 1)])
                    for i in range(R)]
        s = row_sums[0] if R == 1 else _seq_sum([row_sums[(c + t) % R] for t in range(1, R + 1)])
        out[k] = np.float32(s).view(np.uint32)
    return out


def _data(rng, P: int, n: int, specials: float = 0.0) -> np.ndarray:
    x = random_bits("fp32", rng, P * n).reshape(P, n)
    if specials:
        pick = rng.random((P, n)) < specials
        x[pick] = rng.choice(SPECIAL_BITS, int(pick.sum()))
    return x


# --- the sub-rings -------------------------------------------------------------------------


def test_torus_groups():
    assert torus_groups(2, 2, ROW) == [[0, 1], [2, 3]]
    assert torus_groups(2, 2, COL) == [[0, 2], [1, 3]]
    assert torus_groups(2, 4, ROW) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert torus_groups(2, 4, COL) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert torus_groups(3, 2, ROW) == [[0, 1], [2, 3], [4, 5]]
    assert torus_groups(3, 2, COL) == [[0, 2, 4], [1, 3, 5]]
    assert torus_groups(1, 5, ROW) == [[0, 1, 2, 3, 4]]  # a ring: the 1 x P torus
    assert torus_groups(2, 2, 1) == torus_groups(2, 2, COL)


def test_torus_groups_partition_the_ranks():
    for R, C in itertools.product((1, 2, 3, 4), (2, 3, 5)):
        for d in (ROW, COL) if R > 1 else (ROW,):
            groups = torus_groups(R, C, d)
            assert sorted(itertools.chain(*groups)) == list(range(R * C)), (R, C, d)
            for g in groups:  # consecutive members are neighbours along d's links
                for a, b in zip(g, g[1:] + g[:1], strict=True):
                    i, j = divmod(a, C)
                    assert b == (i * C + (j + 1) % C if d == ROW else ((i + 1) % R) * C + j)


@pytest.mark.parametrize(("args", "match"), [
    ((0, 2, ROW), "rows must be"), ((2, 1, ROW), "cols must be"), ((2, 0, COL), "cols must be"),
    ((1, 4, COL), "COLUMN needs a torus"), ((True, 2, ROW), "rows must be"),
    ((2.0, 2, ROW), "rows must be"), ((2, 2, 2), "dim must be"), ((2, 2, "ROW"), "dim must be"),
    ((2, 2, True), "dim must be"),
])
def test_torus_groups_errors(args, match):
    with pytest.raises(ValueError, match=match):
        torus_groups(*args)


# --- the schedules -------------------------------------------------------------------------


def test_all_reduce_schedule():
    """RS along the row, AR of chunk j along the column, AG along the row; addresses in rows."""
    n, W = 10, 2  # B = 5 rows over C = 2: chunks of 3 and 2 rows (words 0..5, 6..9)
    sched = torus_schedule(AR, n, 2, 2, W, addr=7)
    assert len(sched) == 4
    for r, steps in enumerate(sched):
        lo, words = (0, 6) if r % 2 == 0 else (3, 4)
        assert steps == [TorusStep(RS, ROW, 7, n, 7), TorusStep(AR, COL, 7 + lo, words, 7 + lo),
                         TorusStep(AG, ROW, 7, n, 7)], r


def test_all_reduce_schedule_empty_chunk():
    """B < C: the columns of the empty chunks have no COLUMN step (one step fewer)."""
    sched = torus_schedule(AR, 5, 2, 4, 2)  # B = 3 rows over C = 4: chunk 3 empty
    for r, steps in enumerate(sched):
        j = r % 4
        assert len(steps) == (2 if j == 3 else 3), r
        if j < 3:
            assert steps[1] == TorusStep(AR, COL, j, 1 if j == 2 else 2, j), r


def test_all_to_all_schedule():
    R, C, W = 2, 4, 2
    n = R * C * W * 3  # B = 24 rows
    sched = torus_schedule(A2A, n, R, C, W, addr=0, tmp=24, dst=48)
    want = [TorusStep(A2A, COL, 0, n, 24), TorusStep(A2A, ROW, 24, n // 2, 48),
            TorusStep(A2A, ROW, 36, n // 2, 60)]
    assert sched == [want] * (R * C)


def test_ring_schedules():
    """R = 1: the ring's own op, one ROW step."""
    assert torus_schedule(AR, 5, 1, 3) == [[TorusStep(AR, ROW, 0, 5, 0)]] * 3
    assert torus_schedule(A2A, 6, 1, 3, addr=2, dst=8) == [[TorusStep(A2A, ROW, 2, 6, 8)]] * 3


@pytest.mark.parametrize(("op", "kw", "match"), [
    (RS, {}, "torus runs ALL_REDUCE and ALL_TO_ALL"), (AG, {}, "torus runs"),
    (PERM, {}, "torus runs"), (5, {}, "not a valid CollectiveOp"),
    (A2A, {"words": 12, "tmp": 100, "dst": 200}, "words must be a multiple of .* 16"),
    (A2A, {"words": 8, "tmp": 100, "dst": 200}, "words must be a multiple"),
    (A2A, {"tmp": 3}, "tmp's rows 3..18 must not meet addr's 0..15"),
    (A2A, {"tmp": 16, "dst": 31}, "tmp's rows 16..31 must not meet dst's 31..46"),
    (AR, {"words": 0}, "words must be"), (AR, {"addr": -1}, "addr must be"),
    (AR, {"rows": 0}, "rows must be"), (AR, {"cols": 1}, "cols must be"),
    (AR, {"link_width": 3}, "link_width"),
])
def test_schedule_errors(op, kw, match):
    args = {"words": 32, "rows": 2, "cols": 4, "link_width": 2, **kw}
    with pytest.raises(ValueError, match=match):
        torus_schedule(op, args.pop("words"), args.pop("rows"), args.pop("cols"),
                       args.pop("link_width"), **args)


def test_dst_may_be_the_source():
    """The column step consumes the source: the row steps may write over it."""
    rng = seeded_rng("torus_dst_src")
    x = rng.integers(0, 1 << 32, (4, 8), dtype=np.uint64).astype(np.uint32)
    mems = [np.concatenate([b, np.zeros(8, np.uint32)]) for b in x]
    run_torus_schedule(torus_schedule(A2A, 8, 2, 2, addr=0, tmp=8, dst=0), mems, 2, 2)
    want = [np.concatenate(s) for s in all_to_all(x)]
    assert all(np.array_equal(m[:8], w) for m, w in zip(mems, want, strict=True))


# --- running schedules ---------------------------------------------------------------------


def test_run_rejects_bad_schedules():
    mems = [np.zeros(16, np.uint32) for _ in range(4)]
    s = [TorusStep(AR, ROW, 0, 4, 0)]
    other = [TorusStep(AR, ROW, 0, 5, 0)]
    col = [TorusStep(AR, COL, 0, 4, 0)]
    cases = [
        ([s, s, s, other], "disagree on \\(op, words\\)"),  # row 1 disagrees
        ([s, col, s, s], "deadlocks"),  # rank 1 waits along COLUMN, rank 0 along ROW
        ([s, s, s], "one list of steps per rank"),
        ([s, s, s, [(AR, ROW, 0, 4, 0)]], "not a TorusStep"),
        ([[TorusStep(AR, ROW, 12, 8, 0)]] * 4, "reaches word 19 of a memory of 16"),
        ([[TorusStep(A2A, ROW, 0, 4, 3)]] * 4, "destination's rows 3..6 must not meet"),
        ([[TorusStep(A2A, ROW, 0, 4, 13)]] * 4, "reaches word 16"),
        ([[TorusStep(PERM, COL, 0, 4, 8)]] * 4, "shift must be"),
    ]
    for sched, match in cases:
        before = [m.copy() for m in mems]
        with pytest.raises(ValueError, match=match):
            run_torus_schedule(sched, mems, 2, 2)
        assert all(np.array_equal(a, b) for a, b in zip(mems, before, strict=True)), match
    with pytest.raises(ValueError, match="COLUMN needs a torus"):
        run_torus_schedule([col] * 3, [np.zeros(8, np.uint32)] * 3, 1, 3)
    with pytest.raises(ValueError, match="flat uint32"):
        run_torus_schedule([s] * 4, [np.zeros(16, np.int64)] * 4, 2, 2)


def test_run_permute_steps(seed):
    """A PERMUTE along the columns by ``shift`` then an ALL_GATHER along the rows (a
    schedule built by hand): rank (i, j)'s region holds (i - 1, j)'s, then the row's."""
    rng = seeded_rng("torus_permute", seed=seed)
    R, C = 3, 2
    x = rng.integers(0, 1 << 32, (R * C, 4), dtype=np.uint64).astype(np.uint32)
    mems = [np.concatenate([b, np.zeros(4, np.uint32)]) for b in x]
    sched = [[TorusStep(PERM, COL, 0, 4, 4), TorusStep(AG, ROW, 4, 4, 4)]] * (R * C)
    run_torus_schedule(sched, mems, R, C, shift=1)
    for r, m in enumerate(mems):
        i, j = divmod(r, C)
        src = [((i - 1) % R) * C + jj for jj in range(C)]  # the row that came in
        want = np.concatenate([x[src[0]][:2], x[src[1]][2:]])
        assert np.array_equal(m[4:], want), (seed, r)
        assert np.array_equal(m[:4], x[r]), (seed, r)


# --- all-reduce ----------------------------------------------------------------------------


def test_all_reduce_2x2_by_hand():
    """n = 2, W = 1: word 0 is row chunk 0 (owners j = 0, then column owner i = 0), word 1 row
    chunk 1: (x3 + x2) + (x1 + x0) and (x2 + x3) + (x0 + x1); rank order differs."""
    vals = np.array([[1.0, 1.0], [2**-24, -1.0], [2**-24, 2**-24], [-1.0, 2**-24]], np.float32)
    x = vals.view(np.uint32)
    f = np.float32
    with np.errstate(all="ignore"):
        w0 = f(f(vals[3, 0] + vals[2, 0]) + f(vals[1, 0] + vals[0, 0]))
        w1 = f(f(vals[2, 1] + vals[3, 1]) + f(vals[0, 1] + vals[1, 1]))
    got = torus_all_reduce(x, 2, 2)
    assert [float(w0), float(w1)] == [2**-24, 2**-23]
    for g in got:
        assert g.view(np.float32).tolist() == [w0, w1]
    flat = ring_all_reduce(x)[0].view(np.float32).tolist()
    assert flat != [w0, w1]  # the ring over 4 ranks adds in another order: 2^-23 in word 0


CASES = [(R, C, W) for R, C in ((2, 2), (2, 3), (3, 2), (2, 4)) for W in (1, 2, 4)]


@pytest.mark.parametrize(("R", "C", "W"), CASES)
def test_all_reduce_literal(R, C, W, seed):
    """Every word of every rank against the literal row-then-column sum, bit for bit, for
    sizes including n < C·W (empty chunks) and n not a multiple of W; specials included."""
    rng = seeded_rng("torus_ar", R, C, W, seed=seed)
    sizes = {1, C * W - 1, C * W + 1, R * C * W, 3 * R * C * W + W - 1, int(rng.integers(2, 60))}
    for n in sorted(s for s in sizes if s >= 1):
        x = _data(rng, R * C, n, specials=0.05)
        got = torus_all_reduce(x, R, C, W)
        want = _literal_all_reduce(x, R, C, W)
        for r, g in enumerate(got):
            assert g.dtype == np.uint32 and g.shape == (n,)
            assert np.array_equal(g, got[0]), f"seed={seed} n={n} rank {r} differs from rank 0"
            nan = _is_nan(want)
            assert np.array_equal(_is_nan(g), nan), f"seed={seed} n={n} rank {r}: NaNs"
            bad = np.flatnonzero(g[~nan] != want[~nan])
            assert not bad.size, f"seed={seed} n={n} rank {r}: words {bad[:4]} differ"


def test_all_reduce_specials_bit_for_bit(seed):
    """±0, ±inf, NaN payloads, subnormals, max: kept through the all-gather, added right:
    a word of one rank's special and the others' -0 keeps its bits (NaN: any NaN)."""
    R, C, W = 2, 3, 2
    n = SPECIAL_BITS.size
    x = np.full((R * C, n), 0x80000000, np.uint32)
    for r in range(R * C):
        xr = x.copy()
        xr[r] = SPECIAL_BITS
        got = torus_all_reduce(xr, R, C, W)
        nan = _is_nan(SPECIAL_BITS)
        for g in got:
            assert np.array_equal(_is_nan(g), nan), (seed, r)
            assert np.array_equal(g[~nan], SPECIAL_BITS[~nan]), (seed, r)


def test_all_reduce_against_float64(seed):
    """|torus - exact| <= gamma_{R+C-2} · sum |x| <= gamma_{RC-1} · sum |x| (float64 fsum: a
    word passes C - 1 row adds and R - 1 column adds), and the order is not the flat ring's
    (a negative control: some word differs)."""
    rng = seeded_rng("torus_ar_f64", seed=seed)
    differs = 0
    for R, C, W in ((2, 2, 1), (2, 4, 2), (3, 3, 4)):
        P, n = R * C, 200
        x = (rng.standard_normal((P, n)) * 2.0 ** rng.integers(-20, 20, (P, n))).astype(
            np.float32)
        got = torus_all_reduce(x.view(np.uint32), R, C, W)[0].view(np.float32)
        k = R + C - 2
        gamma = k * U / (1 - k * U)
        for i in range(n):
            exact = math.fsum(float(v) for v in x[:, i])
            bound = gamma * math.fsum(abs(float(v)) for v in x[:, i])
            assert abs(float(got[i]) - exact) <= bound, (seed, R, C, W, i)
        flat = ring_all_reduce(x.view(np.uint32), W)[0]
        differs += int(np.any(flat != got.view(np.uint32)))
    assert differs, f"seed={seed}: the torus's order never differed from the ring's"


@pytest.mark.parametrize(("R", "C"), [(1, 2), (1, 5)])
def test_on_a_ring_the_ops_are_the_rings(R, C, seed):
    rng = seeded_rng("torus_ring", R, C, seed=seed)
    x = _data(rng, C, 2 * C * 2, specials=0.05)
    for a, b in zip(torus_all_reduce(x, R, C, 2), ring_all_reduce(x, 2), strict=True):
        assert np.array_equal(a, b), seed
    want = [np.concatenate(s) for s in all_to_all(x, 2)]
    for a, b in zip(torus_all_to_all(x, R, C, 2), want, strict=True):
        assert np.array_equal(a, b), seed


def test_buffers_checked():
    x = np.zeros((4, 8), np.uint32)
    with pytest.raises(ValueError, match="one per rank \\(6 = rows·cols\\)"):
        torus_all_reduce(x, 2, 3)
    with pytest.raises(ValueError, match="unsigned integers"):
        torus_all_reduce(np.zeros((4, 8), np.float32), 2, 2)
    with pytest.raises(ValueError, match="words must be a multiple of rows·cols·link_width"):
        torus_all_to_all(np.zeros((4, 6), np.uint32), 2, 2)
    with pytest.raises(ValueError, match="words must be a multiple of rows·cols·link_width"):
        torus_all_to_all(np.zeros((4, 8), np.uint32), 2, 2, 4)


# --- all-to-all ----------------------------------------------------------------------------


@pytest.mark.parametrize(("R", "C", "W"), [(R, C, W) for R, C in ((2, 2), (2, 4), (4, 2), (3, 3))
                                           for W in (1, 2, 4)])
def test_all_to_all_is_the_flat_one(R, C, W, seed):
    """Rank k's destination: slot r holds chunk k of rank r, for all R·C ranks; bits moved
    exactly (any 32-bit patterns, NaN payloads included)."""
    rng = seeded_rng("torus_a2a", R, C, W, seed=seed)
    P = R * C
    for m in (1, 2, 3):
        n = P * W * m
        x = rng.integers(0, 1 << 32, (P, n), dtype=np.uint64).astype(np.uint32)
        x[:, ::3] = rng.choice(SPECIAL_BITS, (P, len(range(0, n, 3))))
        x[0, 0] = 0x7F800001  # a signalling NaN's payload
        got = torus_all_to_all(x, R, C, W)
        want = [np.concatenate(s) for s in all_to_all(x, W)]
        for k in range(P):
            assert got[k].dtype == np.uint32 and got[k].shape == (n,)
            assert np.array_equal(got[k], want[k]), f"seed={seed} n={n} rank {k}"
        # Literal: slot r of rank k is rank r's words k·n/P .. (k+1)·n/P.
        s = n // P
        assert all(np.array_equal(got[k][r * s:(r + 1) * s], x[r][k * s:(k + 1) * s])
                   for k in range(P) for r in range(P)), seed


# --- the bound -----------------------------------------------------------------------------


@pytest.mark.parametrize(("R", "C", "W"), CASES + [(4, 4, 1), (3, 3, 2)])
def test_bound_all_reduce(R, C, W):
    for n in (1, 3, C * W, 17 * W, R * C * W * 5, 1000):
        B = -(-n // W)
        n0 = min(-(-B // C) * W, n)  # the largest chunk: the column term
        want = 2 * (C - 1) / C * n / W + 2 * (R - 1) / R * n0 / W
        assert torus_bound_cycles(AR, n, R, C, W) == pytest.approx(want), (R, C, W, n)
        if n % (C * W) == 0:
            assert torus_bound_cycles(AR, n, R, C, W) == pytest.approx(
                ring_bound_cycles(AR, n, R * C, W)), (R, C, W, n)
            assert want == pytest.approx(2 * (R * C - 1) / (R * C) * B)


@pytest.mark.parametrize(("R", "C", "W"), [(2, 2, 1), (2, 4, 2), (4, 2, 1), (3, 3, 4),
                                           (4, 4, 2), (2, 3, 1)])
def test_bound_all_to_all(R, C, W):
    for m in (1, 2, 5):
        n = R * C * W * m
        B = n // W
        want = (max((R - 1) / 2, 1) + max((C - 1) / 2, 1)) * B
        got = torus_bound_cycles(A2A, n, R, C, W)
        assert got == pytest.approx(want), (R, C, W, n)
        assert got == pytest.approx(route_bound_cycles(A2A, n, R, W)
                                    + R * route_bound_cycles(A2A, n // R, C, W))


def test_bound_all_to_all_against_the_flat_ring():
    """The numbers the docs quote: 2x2 2B vs 1.5B (the torus slower), 2x4 2.5B vs 3.5B."""
    for R, C, torus, flat in ((2, 2, 2.0, 1.5), (2, 4, 2.5, 3.5), (4, 2, 2.5, 3.5),
                              (4, 4, 3.0, 7.5)):
        n = R * C * 8
        assert torus_bound_cycles(A2A, n, R, C) == torus * n
        assert route_bound_cycles(A2A, n, R * C) == flat * n
    assert torus_bound_cycles(AR, 12, 1, 3) == ring_bound_cycles(AR, 12, 3, 1)
    assert torus_bound_cycles(A2A, 12, 1, 3) == route_bound_cycles(A2A, 12, 3)
