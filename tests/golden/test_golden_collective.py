"""golden.collective (ring all-reduce, reduce-scatter, all-gather) vs the contract.

References, none of which runs golden's step loop: the chunk layout from the contract's beat
arithmetic, word by word (``_chunk_of``) and as properties of the bounds; the schedule as
properties of ``ring_steps`` (every chunk received once, forwarding, neighbour agreement);
for every word a plain ``np.float32`` scalar sum in ring order starting after the chunk's
owner, ``((x[c+1] + x[c+2]) + ...) + x[c+P]`` (NaN canonicalised to 0x7FC00000 here), and the
partial sums of that order that a reduce-scatter leaves on each rank; float64 ``math.fsum``
for the gamma_{P-1} error bound; raw-bit copies for the all-gather. Negative controls show
that the references can tell the ring order from rank order, the reversed ring and owner
first. Seed: ``NCLITE_SEED`` (default 1); every assertion message names it.
"""

import itertools
import math

import numpy as np
import pytest

from golden.collective import (
    LINK_WIDTHS,
    CollectiveOp,
    Step,
    check_link_width,
    check_ranks,
    chunk_beats,
    chunk_words,
    ring_all_gather,
    ring_all_reduce,
    ring_bound_cycles,
    ring_reduce_scatter,
    ring_steps,
    run_collective,
)
from sim.tb.vectors import random_bits, seeded_rng, special_bits

QNAN = 0x7FC00000
U = 2.0**-24
RANKS = (2, 3, 4, 8)
WIDTHS = (1, 2, 4)
CASES = list(itertools.product(RANKS, WIDTHS))
OPS = (CollectiveOp.ALL_REDUCE, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER)
F32_MAX = float(np.finfo(np.float32).max)


def _bits(*values) -> np.ndarray:
    return np.array(values, dtype=np.float32).view(np.uint32)


# Values whose sums tie or round: 1 and its neighbours, half and 1.5 ulp of 1, half an ulp of
# max finite, max finite, the subnormal/normal boundary.
TIE_BITS = _bits(1.0, -1.0, 1 + 2**-23, 2**-24, -(2**-24), 3 * 2**-24, 2**-23, 2.0**103,
                 -(2.0**103), F32_MAX, -F32_MAX, 2.0**-126, -(2.0**-149), 2.0**-149, 0.0, -0.0)
SPECIAL_BITS = special_bits("fp32")
NAN_BITS = SPECIAL_BITS[(SPECIAL_BITS & 0x7FFFFFFF) > 0x7F800000]



def _is_nan(b: np.ndarray) -> np.ndarray:
    return (np.asarray(b, np.uint32) & 0x7FFFFFFF) > 0x7F800000


def _chunk_of(n: int, ranks: int, width: int) -> np.ndarray:
    """The chunk of every word, straight from the contract: B = ceil(n / W) beats, q, e =
    divmod(B, P), the first e chunks have q + 1 beats, the others q; word i is in beat i // W."""
    beats = -(-n // width)
    q, e = divmod(beats, ranks)
    b = np.arange(n) // width
    big = e * (q + 1)  # beats [0, big) are the e larger chunks
    return np.where(b < big, b // (q + 1), e + (b - big) // max(q, 1))


def _seq_sum(values) -> int:
    """Left-to-right sum of fp32 values in plain np.float32 scalars; NaN -> 0x7FC00000."""
    s = np.float32(values[0])
    for v in values[1:]:
        s = np.float32(s) + np.float32(v)
    return QNAN if np.isnan(s) else int(np.float32(s).view(np.uint32))


def _reference(x: np.ndarray, chunk: np.ndarray, order) -> np.ndarray:
    """Word i summed over the ranks ``order(c, P)`` (rank indices mod P) with c = chunk[i].

    A single term is returned as its raw bits (a word nobody added to)."""
    p, n = x.shape
    xf = x.view(np.float32)
    out = np.empty(n, np.uint32)
    with np.errstate(all="ignore"):
        for i in range(n):
            ranks = [k % p for k in order(int(chunk[i]), p)]
            out[i] = x[ranks[0], i] if len(ranks) == 1 else _seq_sum(xf[ranks, i])
    return out


def _ring_order(c, p):
    return range(c + 1, c + p + 1)  # the contract: after the owner, ending with the owner


def _rank_order(c, p):
    return range(p)


def _reversed_ring(c, p):
    return range(c - 1, c - p - 1, -1)


def _owner_first(c, p):
    return range(c, c + p)


def _partial_order(r):
    """Reduce-scatter: rank r's chunk c holds x[c+1] + ... + x[r] in ring order (one term, the
    untouched local word, when r = c + 1; all P terms when r = c)."""
    return lambda c, p: range(c + 1, c + 1 + (r - c - 1) % p + 1)


def _mixed(rng: np.random.Generator, p: int, n: int) -> np.ndarray:
    """(P, n) fp32 patterns: sim.tb.vectors.random_bits, ~5 % specials (NaN payloads, +-inf, +-0,
    subnormals, max/min normal); columns drawn wholly from TIE_BITS (~15 %), from tiny values
    (subnormals and the lowest normal binade, both signs: ~5 %) and all -0 (~2 %)."""
    x = random_bits("fp32", rng, p * n).reshape(p, n)
    pick = rng.random((p, n)) < 0.05
    x[pick] = rng.choice(SPECIAL_BITS, int(pick.sum()))
    kind = rng.random(n)
    cols = kind < 0.15
    x[:, cols] = rng.choice(TIE_BITS, (p, int(cols.sum())))
    cols = (kind >= 0.15) & (kind < 0.20)
    x[:, cols] = rng.integers(0, 1 << 24, (p, int(cols.sum()))) | (
        rng.integers(0, 2, (p, int(cols.sum()))) << 31)
    x[:, kind >= 0.98] = 0x80000000
    return x


def _sizes(rng: np.random.Generator, p: int, w: int) -> list[int]:
    fixed = {1, p - 1, p, p + 1, w * p - 1, w * p + 1, w * (p - 1) + 1}
    return sorted((fixed | {int(rng.integers(2, 200)), int(rng.integers(1000, 2500))}) - {0})


def _assert_bits(seed: int, what: str, got: np.ndarray, want: np.ndarray, x=None) -> None:
    assert got.dtype == np.uint32 and got.shape == want.shape, (
        f"seed={seed} {what}: got {got.dtype} {got.shape}, want uint32 {want.shape}")
    bad = np.flatnonzero(got != want)
    if bad.size:
        i = int(bad[0])
        col = "" if x is None else f", inputs {[hex(v) for v in x[:, i].tolist()]}"
        pytest.fail(f"seed={seed} {what}: {bad.size} of {got.size} words differ, first word "
                    f"{i}: got {int(got[i]):#010x}, want {int(want[i]):#010x}{col}")


# --- chunks --------------------------------------------------------------------------------


@pytest.mark.parametrize(("ranks", "width"), CASES)
def test_chunk_words(ranks, width, seed):
    """P + 1 monotone bounds 0..n; beat counts differ by <= 1, larger first; starts are
    multiples of W; empty chunks iff ceil(n / W) < P; word i lies in chunk _chunk_of(i)."""
    for n in [*range(1, 301), 1000, 1023, 2048, 4097, 9999]:
        b = chunk_words(n, ranks, width)
        what = f"seed={seed} chunk_words({n}, {ranks}, {width}) = {b}"
        assert len(b) == ranks + 1 and b[0] == 0 and b[-1] == n, \
            f"{what}: P + 1 bounds from 0 to n"
        assert all(type(v) is int for v in b), f"{what}: Python ints"
        assert all(lo <= hi for lo, hi in itertools.pairwise(b)), f"{what}: bounds increase"
        nonempty = [lo for lo, hi in itertools.pairwise(b) if lo < hi]
        assert all(v % width == 0 for v in nonempty), \
            f"{what}: every non-empty chunk starts on a beat (a multiple of W = {width})"
        assert all(v == n for v in b[len(nonempty):]), f"{what}: empty chunks come last, at n"
        beats = [(-(-hi // width) - lo // width) if lo < hi else 0
                 for lo, hi in itertools.pairwise(b)]
        assert sum(beats) == -(-n // width), f"{what}: beats {beats} sum to ceil(n / W)"
        assert max(beats) - min(beats) <= 1, f"{what}: beats {beats} differ by at most 1"
        assert beats == sorted(beats, reverse=True), \
            f"{what}: beats {beats}, the larger chunks first"
        empty = sum(v == 0 for v in beats)
        assert empty == max(ranks - -(-n // width), 0), \
            f"{what}: beats {beats}, empty chunks only when there are fewer beats than ranks"
        chunk = _chunk_of(n, ranks, width)
        for c in range(ranks):
            assert (chunk[b[c]:b[c + 1]] == c).all(), (
                f"{what}: chunk {c} should hold words {np.flatnonzero(chunk == c).tolist()}")


def test_chunk_beats():
    for ranks in (2, 3, 4, 5, 8):
        for beats in range(0, 70):
            b = chunk_beats(beats, ranks)
            sizes = [hi - lo for lo, hi in itertools.pairwise(b)]
            assert len(b) == ranks + 1 and b[0] == 0 and b[-1] == beats, (beats, ranks, b)
            assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True), b
            assert sizes.count(beats // ranks + 1) == beats % ranks, b
    assert chunk_beats(0, 3) == [0, 0, 0, 0]
    assert chunk_beats(10, 4) == [0, 3, 6, 8, 10]
    assert chunk_words(10, 4, 4) == [0, 4, 8, 10, 10]  # 3 beats: the last chunk is empty
    assert chunk_words(9, 2, 2) == [0, 6, 9]  # 5 beats, the last one partial


# --- schedule ------------------------------------------------------------------------------


@pytest.mark.parametrize("ranks", range(2, 10))
def test_ring_steps(ranks):
    rs = {r: ring_steps(CollectiveOp.REDUCE_SCATTER, ranks, r) for r in range(ranks)}
    ag = {r: ring_steps(CollectiveOp.ALL_GATHER, ranks, r) for r in range(ranks)}
    for r in range(ranks):
        assert ring_steps(CollectiveOp.ALL_REDUCE, ranks, r) == rs[r] + ag[r]
        assert ring_steps(0, ranks, r) == rs[r] + ag[r] and ring_steps(2, ranks, r) == ag[r]
        for steps, reduce in ((rs[r], True), (ag[r], False)):
            assert len(steps) == ranks - 1 and all(isinstance(s, Step) for s in steps)
            assert all(s.reduce is reduce for s in steps), steps
            assert all(s.send != s.recv for s in steps), steps  # lockstep is exact
            for s in range(1, ranks - 1):
                assert steps[s].send == steps[s - 1].recv, (r, s, steps)  # stream it on
        recv = [s.recv for s in rs[r]]
        assert sorted(recv) == sorted(set(range(ranks)) - {(r - 1) % ranks}), (r, recv)
        assert recv[-1] == r, (r, recv)  # rank r finishes with its chunk r reduced
        assert rs[r][0].send == (r - 1) % ranks  # the untouched chunk starts the ring
        assert ag[r][0].send == r, (r, ag[r])  # the all-gather starts with the own chunk
        assert ag[r][0].send == rs[r][-1].recv  # ... which is what the reduce-scatter ended on
        assert sorted(s.recv for s in ag[r]) == sorted(set(range(ranks)) - {r}), ag[r]
        for s in range(ranks - 1):  # rank r sends to rank r + 1
            assert rs[r][s].send == rs[(r + 1) % ranks][s].recv, (r, s)
            assert ag[r][s].send == ag[(r + 1) % ranks][s].recv, (r, s)


# --- all-reduce ----------------------------------------------------------------------------


@pytest.mark.parametrize(("ranks", "width"), CASES)
def test_all_reduce_bit_exact(ranks, width, seed):
    """Every rank's every word equals the ring-order np.float32 sum, bit for bit."""
    rng = seeded_rng(f"all_reduce_{ranks}_{width}", seed=seed)
    seen = {"nan": 0, "inf": 0, "-0": 0, "subnormal": 0, "rank order differs": 0}
    for n in _sizes(rng, ranks, width):
        x = _mixed(rng, ranks, n)
        x_in = [row.copy() for row in x]
        out = ring_all_reduce(x_in, width)
        assert len(out) == ranks, f"seed={seed}"
        chunk = _chunk_of(n, ranks, width)
        want = _reference(x, chunk, _ring_order)
        for r in range(ranks):
            _assert_bits(seed, f"all_reduce P={ranks} W={width} n={n} rank {r}", out[r], want, x)
            assert np.array_equal(x_in[r], x[r]), f"seed={seed} input of rank {r} modified"
        seen["nan"] += int((want == QNAN).sum())
        seen["inf"] += int(((want & 0x7FFFFFFF) == 0x7F800000).sum())
        seen["-0"] += int((want == 0x80000000).sum())
        seen["subnormal"] += int((((want & 0x7F800000) == 0) & ((want & 0x7FFFFF) != 0)).sum())
        if ranks > 2:
            seen["rank order differs"] += int((_reference(x, chunk, _rank_order) != want).sum())
    if ranks == 2:
        del seen["rank order differs"]  # two terms: a + b == b + a
    assert min(seen.values()) > 0, f"seed={seed} weak coverage: {seen}"


@pytest.mark.parametrize("ranks", (3, 4, 8))
def test_order_negative_control(ranks, seed):
    """The order check has teeth: other summation orders disagree with golden.

    Crafted: word c (W = 1, n = P, so word c is chunk c) is 1.0 on rank c and 2**-24 on the
    others. The ring adds the small terms first, (P-1) * 2**-24 exactly, then 1.0 (rounding to
    even on the tie for P = 4, 8); rank order starts word 0 with 1.0 and every 2**-24 after it
    ties back to 1.0. Random data: rank order, the reversed ring (P >= 4: for P = 3 it only
    swaps the first two terms) and owner-first all differ from golden somewhere.
    """
    x = np.full((ranks, ranks), _bits(2**-24)[0], np.uint32)
    np.fill_diagonal(x, _bits(1.0)[0])
    chunk = _chunk_of(ranks, ranks, 1)
    assert (chunk == np.arange(ranks)).all()
    got = ring_all_reduce(x)
    ring = {3: 1 + 2**-23, 4: 1 + 2**-22, 8: 1 + 2**-21}[ranks]
    assert (got[0] == _bits(ring)[0]).all(), f"seed={seed} {[hex(v) for v in got[0].tolist()]}"
    _assert_bits(seed, "crafted vs ring order", got[0], _reference(x, chunk, _ring_order))
    rank = _reference(x, chunk, _rank_order)
    assert rank[0] == _bits(1.0)[0] and (rank != got[0]).any(), f"seed={seed} rank order {rank}"

    rng = seeded_rng(f"order_control_{ranks}", seed=seed)
    n = 400
    x = _mixed(rng, ranks, n)
    chunk = _chunk_of(n, ranks, 2)
    got = ring_all_reduce(x, 2)[ranks - 1]
    _assert_bits(seed, f"random P={ranks} vs ring order", got, _reference(x, chunk, _ring_order))
    wrong = [_rank_order, _owner_first] + ([_reversed_ring] if ranks >= 4 else [])
    for order in wrong:
        diff = int((_reference(x, chunk, order) != got).sum())
        assert diff > 0, f"seed={seed} P={ranks}: {order.__name__} agrees with golden everywhere"


def _finite_data(rng: np.random.Generator, p: int, n: int) -> np.ndarray:
    """Finite fp32 with |x| < 2**101, so no partial sum of 8 overflows: random_bits with the
    exponent field capped (inf/NaN become large finite values), and a third gaussian."""
    x = random_bits("fp32", rng, p * n).reshape(p, n)
    e = (x >> 23) & 0xFF
    x = np.where(e > 227, (x & 0x807FFFFF) | (rng.integers(100, 228, x.shape) << 23), x)
    gauss = rng.random(n) < 1 / 3
    x[:, gauss] = rng.standard_normal((p, int(gauss.sum()))).astype(np.float32).view(np.uint32)
    return x.astype(np.uint32)


@pytest.mark.parametrize("ranks", RANKS)
def test_all_reduce_error_bound(ranks, seed):
    """|golden - exact| <= gamma_{P-1} * sum|x| (recursive summation, u = 2**-24; additions
    whose result is subnormal are exact, so no underflow term). exact = math.fsum of the P
    values in float64, correctly rounded to float64, so 2**-52 * |exact| is added as slack."""
    rng = seeded_rng(f"bound_{ranks}", seed=seed)
    k = ranks - 1
    gamma = k * U / (1 - k * U)
    ratios = []
    for width in WIDTHS:
        n = int(rng.integers(1000, 2000))
        x = _finite_data(rng, ranks, n)
        out = ring_all_reduce(x, width)
        for r in range(1, ranks):
            _assert_bits(seed, f"P={ranks} W={width} rank {r} vs rank 0", out[r], out[0])
        got = out[0].view(np.float32).astype(np.float64)
        vals = x.view(np.float32).astype(np.float64)
        assert np.isfinite(vals).all() and np.abs(vals).sum(0).max() < F32_MAX / 2
        assert np.isfinite(got).all(), f"seed={seed} P={ranks} W={width}: overflow"
        exact = np.array([math.fsum(col) for col in vals.T.tolist()])
        bound = gamma * np.abs(vals).sum(0) + 2.0**-52 * np.abs(exact)
        err = np.abs(got - exact)
        bad = ~(err <= bound)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            pytest.fail(f"seed={seed} P={ranks} W={width} word {i}: error {err[i]:.3e} > bound "
                        f"{bound[i]:.3e}, inputs {[hex(v) for v in x[:, i].tolist()]}")
        ratios.append(err / np.where(bound > 0, bound, 1))
    ratio = np.concatenate(ratios)
    assert (ratio > 0).mean() > 0.1, f"seed={seed} P={ranks}: errors too rare, bound vacuous"
    assert ratio.max() > 0.1, f"seed={seed} P={ranks}: max error/bound only {ratio.max():.3g}"


# --- special values ------------------------------------------------------------------------


@pytest.mark.parametrize(("ranks", "width"), CASES)
def test_nan_inputs(ranks, width, seed):
    """A word with any NaN input (quiet, signalling, payloads, either sign) is 0x7FC00000 on
    every rank; no other NaN pattern is ever produced."""
    rng = seeded_rng(f"nan_{ranks}_{width}", seed=seed)
    n = int(rng.integers(100, 400))
    x = _mixed(rng, ranks, n)
    x[_is_nan(x)] = _bits(1.5)[0]
    cols = rng.random(n) < 0.3
    for i in np.flatnonzero(cols):
        where = rng.choice(ranks, int(rng.integers(1, ranks + 1)), replace=False)
        x[where, i] = rng.choice(NAN_BITS, where.size)
    out = ring_all_reduce(x, width)
    for r in range(ranks):
        assert (out[r][cols] == QNAN).all(), f"seed={seed} P={ranks} W={width} rank {r}"
        assert (out[r][_is_nan(out[r])] == QNAN).all(), f"seed={seed} non-canonical NaN"
        _assert_bits(seed, f"rank {r} vs rank 0", out[r], out[0])


@pytest.mark.parametrize(("ranks", "width"), CASES)
def test_infinities_and_overflow(ranks, width, seed):
    """n = P * W, so chunk c is words c*W .. c*W+W-1; in case j of each table chunk c has the
    special value(s) at rank (c + j) mod P: every position relative to the owner is tried."""
    rng = seeded_rng(f"inf_{ranks}_{width}", seed=seed)
    n = ranks * width
    chunk = _chunk_of(n, ranks, width)
    assert (chunk == np.arange(n) // width).all()
    inf, ninf, big, nbig = _bits(np.inf, -np.inf, F32_MAX, -F32_MAX)

    def run(what, fill, place, want):
        x = np.full((ranks, n), fill, np.uint32) if fill is not None else np.abs(
            rng.standard_normal((ranks, n)) + 0.5).astype(np.float32).view(np.uint32)
        for i in range(n):
            place(x, int(chunk[i]), i)
        out = ring_all_reduce(x, width)
        for r in range(ranks):
            _assert_bits(seed, f"P={ranks} W={width} {what} rank {r}", out[r],
                         np.full(n, want, np.uint32), x)

    for j in range(ranks):
        def at(v, j=j):
            return lambda x, c, i: x.__setitem__(((c + j) % ranks, i), v)

        run(f"+inf at owner+{j} with finite", None, at(inf), inf)
        run(f"-inf at owner+{j} with finite", None, at(ninf), ninf)
        run(f"+0 at owner+{j} with -0", _bits(-0.0)[0], at(0), 0)
        for k in range(ranks):
            if k != j:
                def pair(x, c, i, j=j, k=k):
                    x[(c + j) % ranks, i] = inf
                    x[(c + k) % ranks, i] = ninf

                run(f"+inf at owner+{j}, -inf at owner+{k}", None, pair, QNAN)
    run("all -0", _bits(-0.0)[0], lambda x, c, i: None, 0x80000000)
    run("all max finite", big, lambda x, c, i: None, inf)
    run("all -max finite", nbig, lambda x, c, i: None, ninf)
    # +max everywhere, -max at the owner (added last): overflow first for P >= 3, so +inf;
    # rank order would give +max for chunk 0. For P = 2: max + (-max) = +0.
    run("max ... max, -max last", big, lambda x, c, i: x.__setitem__((c, i), nbig),
        inf if ranks > 2 else 0)


# --- reduce-scatter and all-gather ---------------------------------------------------------


@pytest.mark.parametrize(("ranks", "width"), CASES)
def test_reduce_scatter(ranks, width, seed):
    """Rank r's chunk r is the all-reduce's chunk r; its chunk c holds the ring-order partial
    sum x[c+1] + ... + x[r]; chunk r - 1 is untouched (raw bits, NaN payloads kept)."""
    rng = seeded_rng(f"reduce_scatter_{ranks}_{width}", seed=seed)
    for n in (1, ranks + 1, width * ranks + 1, int(rng.integers(2, 300)),
              int(rng.integers(500, 1200))):
        x = _mixed(rng, ranks, n)
        x0 = x.copy()
        rs = ring_reduce_scatter(x, width)
        ar = ring_all_reduce(x, width)
        assert np.array_equal(x, x0), f"seed={seed} input modified"
        chunk = _chunk_of(n, ranks, width)
        for r in range(ranks):
            what = f"reduce_scatter P={ranks} W={width} n={n} rank {r}"
            own = chunk == r
            _assert_bits(seed, what + " own chunk vs all-reduce", rs[r][own], ar[r][own])
            _assert_bits(seed, what, rs[r], _reference(x, chunk, _partial_order(r)), x)
            left = chunk == (r - 1) % ranks
            _assert_bits(seed, what + " untouched chunk", rs[r][left], x[r][left])


@pytest.mark.parametrize(("ranks", "width"), CASES)
def test_all_gather(ranks, width, seed):
    """Every rank ends with chunk c of rank c, raw bits (sNaN, payloads, -0 unchanged)."""
    rng = seeded_rng(f"all_gather_{ranks}_{width}", seed=seed)
    keep = np.array([0x7F800001, 0xFF800001, 0x7FBFFFFF, 0x7FC00001, 0xFFFFFFFF, 0x80000000,
                     0x00000001], np.uint32)
    for n in (1, ranks - 1, ranks, width * ranks + 1, int(rng.integers(2, 300)), 1500):
        x = random_bits("fp32", rng, ranks * n).reshape(ranks, n)
        chunk = _chunk_of(n, ranks, width)
        for c in range(ranks):  # the first words of every chunk: patterns that must survive
            idx = np.flatnonzero(chunk == c)[: keep.size]
            x[:, idx] = keep[: idx.size]
        x0 = x.copy()
        out = ring_all_gather(list(x), width)
        assert np.array_equal(x, x0), f"seed={seed} input modified"
        want = x[chunk, np.arange(n)]
        for r in range(ranks):
            _assert_bits(seed, f"all_gather P={ranks} W={width} n={n} rank {r}", out[r], want)
        if n >= ranks * keep.size * width:
            assert np.isin(keep, out[0]).all(), f"seed={seed} special pattern lost"


def test_ops_agree_with_run_collective(seed):
    rng = seeded_rng("ops", seed=seed)
    x = _mixed(rng, 4, 37)
    for op, fn in zip(OPS, (ring_all_reduce, ring_reduce_scatter, ring_all_gather), strict=True):
        for got, want in zip(run_collective(int(op), x, 2), fn(x, 2), strict=True):
            _assert_bits(seed, f"{op.name}", got, want)
    lists = [[int(v) for v in row] for row in x]  # plain Python lists are buffers too
    for got, want in zip(ring_all_reduce(lists, 4), ring_all_reduce(x, 4), strict=True):
        _assert_bits(seed, "list input", got, want)


# --- validation, inputs, bound -------------------------------------------------------------


def test_inputs_not_modified_and_outputs_fresh(seed):
    rng = seeded_rng("immutable", seed=seed)
    x = _mixed(rng, 3, 50)
    bufs = [row.copy() for row in x]
    for op in OPS:
        out = run_collective(op, bufs, 2)
        for r in range(3):
            assert np.array_equal(bufs[r], x[r]), f"seed={seed} {op.name} modified rank {r}"
            assert not np.shares_memory(out[r], bufs[r]), f"seed={seed} {op.name} aliases"
        out[0][:] = 0
        assert np.array_equal(bufs[0], x[0]), f"seed={seed}"


def test_validation():
    ok = [np.ones(5, np.uint32)] * 3
    with pytest.raises(ValueError, match="ranks"):
        ring_all_reduce([np.ones(5, np.uint32)])
    with pytest.raises(ValueError, match="ranks"):
        ring_all_gather([])
    with pytest.raises(ValueError, match="same length"):
        ring_all_reduce([np.ones(5, np.uint32), np.ones(4, np.uint32)])
    with pytest.raises(ValueError, match="same length"):
        ring_reduce_scatter([np.ones(5, np.uint32)] * 2 + [np.ones(6, np.uint32)])
    with pytest.raises(ValueError, match="n "):
        ring_all_reduce([np.zeros(0, np.uint32)] * 2)
    for bad in (3, 0, 8, True, False, "4", None):
        with pytest.raises(ValueError, match="link_width"):
            ring_all_reduce(ok, bad)
        with pytest.raises(ValueError, match="link_width"):
            chunk_words(5, 3, bad)
        with pytest.raises(ValueError, match="link_width"):
            check_link_width(bad)
    assert [check_link_width(w) for w in LINK_WIDTHS] == [1, 2, 4]
    for bad in (1, 0, -2, True, 2.0, "3"):
        with pytest.raises(ValueError, match="ranks"):
            check_ranks(bad)
        with pytest.raises(ValueError, match="ranks"):
            ring_steps(0, bad, 0)
    for bad in (0, -1, 1.0):
        with pytest.raises(ValueError, match="n "):
            chunk_words(bad, 2)
    for rank in (-1, 4, 5):
        with pytest.raises(ValueError, match="rank must"):
            ring_steps(CollectiveOp.ALL_REDUCE, 4, rank)
    for op in (5, 7, -1, "ALL_REDUCE"):
        with pytest.raises(ValueError, match="CollectiveOp"):
            run_collective(op, ok)
        with pytest.raises(ValueError, match="CollectiveOp"):
            ring_steps(op, 3, 0)
        with pytest.raises(ValueError, match="CollectiveOp"):
            ring_bound_cycles(op, 100, 3, 1)
    for op in (3, 4, CollectiveOp.ALL_TO_ALL, CollectiveOp.PERMUTE):  # routed, not ring steps
        with pytest.raises(ValueError, match="not a ring-step collective"):
            run_collective(op, ok)
        with pytest.raises(ValueError, match="not a ring-step collective"):
            ring_bound_cycles(op, 100, 3, 1)


@pytest.mark.parametrize(("ranks", "width"), CASES)
def test_ring_bound_cycles(ranks, width):
    for n in (1, 7, 1000, 4096, 123457):
        ar = 2 * (ranks - 1) * n / (ranks * width)
        assert ring_bound_cycles(CollectiveOp.ALL_REDUCE, n, ranks, width) == pytest.approx(ar)
        assert ring_bound_cycles(0, n, ranks, width) == pytest.approx(ar)
        for op in (CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER, 1, 2):
            assert ring_bound_cycles(op, n, ranks, width) == pytest.approx(ar / 2)
    assert ring_bound_cycles(0, 4096, 8, 4) == 1792.0  # 2 * 7/8 * 1024
