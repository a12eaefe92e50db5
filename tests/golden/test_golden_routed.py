"""golden.collective's routed ops (all-to-all, permute) vs the contract.

References, none of which calls golden's routed code: the contract's statement of the results
as loops over ranks, rows and lanes on Python ints (``_ref_all_to_all``, ``_ref_permute``,
with the chunk rows from the contract's divmod arithmetic, ``_chunk_rows``); the schedule as a
cycle-by-cycle simulation of tagged beats on the unidirectional ring (``_simulate``: forwarded
beats first, end tokens travelling P - 1 hops, one write port a rank), which must deliver the
same words, count the same beats on every link as ``link_beats`` and take no fewer cycles than
``route_bound_cycles``; the bound's closed forms for P | B. Seed: ``NCLITE_SEED`` (default 1);
every assertion message names it.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass

import numpy as np
import pytest

from golden.collective import (
    ROUTED_OPS,
    CollectiveOp,
    all_to_all,
    check_shift,
    link_beats,
    out_rows,
    permute,
    ring_bound_cycles,
    ring_steps,
    route_bound_cycles,
    route_collective,
    route_plan,
    run_collective,
)
from sim.tb.vectors import random_bits, seeded_rng, special_bits

A2A, PERM = CollectiveOp.ALL_TO_ALL, CollectiveOp.PERMUTE
RANKS = range(2, 9)
WIDTHS = (1, 2, 4)
CASES = list(itertools.product(RANKS, WIDTHS))
# Patterns a copy must keep: NaN payloads (quiet, signalling, negative), +-inf, -0, +0, the
# smallest subnormal, all ones.
KEEP = np.array([0x7F800001, 0xFF800001, 0x7FBFFFFF, 0x7FC00001, 0xFFFFFFFF, 0x7F800000,
                 0xFF800000, 0x80000000, 0x00000000, 0x00000001, 0x7FC00000], np.uint32)


# --- the contract, literally -----------------------------------------------------------------


def _chunk_rows(beats: int, ranks: int) -> list[tuple[int, int]]:
    """(first row, rows) of each chunk: q, e = divmod(B, P); chunks 0..e-1 have q + 1 rows."""
    # lab4 hide begin: chunk_rows
    q, e = divmod(beats, ranks)
    out, first = [], 0
    for c in range(ranks):
        rows = q + (1 if c < e else 0)
        out.append((first, rows))
        first += rows
    return out
    # lab4 hide end: chunk_rows


def _ref_all_to_all(src: list[list[int]], dst: list[list[int]], w: int) -> list[list[int]]:
    """Rank j's destination slot i (rows i*b_j ..) gets chunk j of rank i, lanes past n not
    written."""
    p, n = len(src), len(src[0])
    chunks = _chunk_rows(-(-n // w), p)
    out = [list(d) for d in dst]
    for j in range(p):
        first, b = chunks[j]
        for i in range(p):
            for row in range(b):
                for lane in range(w):
                    word = (first + row) * w + lane
                    if word < n:
                        out[j][(i * b + row) * w + lane] = src[i][word]
    return out


def _ref_permute(src: list[list[int]], dst: list[list[int]], shift: int) -> list[list[int]]:
    p, n = len(src), len(src[0])
    out = [list(d) for d in dst]
    for r in range(p):
        for word in range(n):
            out[(r + shift) % p][word] = src[r][word]
    return out


def _sizes(rng: np.random.Generator, p: int, w: int) -> list[int]:
    """n = 1, W - 1, sizes with B < P, B = P (P | B), P*W + 1 (uneven), random ones up to
    3000 (uneven chunks, mostly)."""
    fixed = {1, w - 1, w * (p - 1) - 1, w * (p - 1), p * w, p * w + 1, 3 * p * w - 1,
             int(rng.integers(2, 200)), int(rng.integers(200, 3001))}
    return sorted(v for v in fixed if v >= 1)


def _data(rng: np.random.Generator, p: int, n: int) -> np.ndarray:
    """(P, n) 32-bit patterns: random fp32 bits with specials, KEEP at the start of every rank."""
    x = random_bits("fp32", rng, p * n).reshape(p, n).astype(np.uint32)
    pick = rng.random((p, n)) < 0.1
    x[pick] = rng.choice(special_bits("fp32"), int(pick.sum())).astype(np.uint32)
    x[:, :KEEP.size] = KEEP[:n]
    return x


def _assert_bits(seed, what, got, want) -> None:
    got, want = np.asarray(got), np.asarray(want, dtype=np.uint32)
    assert got.dtype == np.uint32 and got.shape == want.shape, (
        f"seed={seed} {what}: got {got.dtype} {got.shape}, want uint32 {want.shape}")
    bad = np.flatnonzero(got != want)
    if bad.size:
        i = int(bad[0])
        pytest.fail(f"seed={seed} {what}: {bad.size} of {got.size} words differ, first {i}: "
                    f"got {int(got[i]):#010x}, want {int(want[i]):#010x}")


# --- results ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("ranks", "width"), CASES)
def test_all_to_all(ranks, width, seed):
    """route_collective and all_to_all against the literal statement, bit for bit, with random
    previous destination contents (kept where nothing is written) and regions longer than
    out_rows."""
    rng = seeded_rng(f"a2a_{ranks}_{width}", seed=seed)
    for n in _sizes(rng, ranks, width):
        x = _data(rng, ranks, n)
        x0 = x.copy()
        rows = out_rows(A2A, n, ranks, width)
        beats = -(-n // width)
        assert rows == ranks * -(-beats // ranks), f"seed={seed} n={n}"
        d = rows * width + int(rng.integers(0, 2 * width + 1))
        prev = rng.integers(0, 1 << 32, (ranks, d), dtype=np.uint64).astype(np.uint32)
        prev0 = prev.copy()
        got = route_collective(A2A, list(x), list(prev), width)
        want = _ref_all_to_all(x.tolist(), prev.tolist(), width)
        what = f"all-to-all P={ranks} W={width} n={n}"
        assert np.array_equal(x, x0) and np.array_equal(prev, prev0), f"seed={seed} {what}"
        assert len(got) == ranks, f"seed={seed} {what}"
        for j in range(ranks):
            _assert_bits(seed, f"{what} rank {j}", got[j], want[j])
            assert not np.shares_memory(got[j], prev), f"seed={seed} {what} aliases dst"
        # all_to_all: out[j][i] is chunk j of rank i.
        chunks = _chunk_rows(beats, ranks)
        slots = all_to_all(list(x), width)
        for j, (first, b) in enumerate(chunks):
            lo, hi = min(first * width, n), min((first + b) * width, n)
            for i in range(ranks):
                _assert_bits(seed, f"{what} all_to_all[{j}][{i}]", slots[j][i], x[i, lo:hi])
                assert not np.shares_memory(slots[j][i], x), f"seed={seed} {what}"
        # The words written: the chunk's on each of P slots, within out_rows.
        for j, (first, b) in enumerate(chunks):
            written = sum(s.size for s in slots[j])
            assert written == ranks * (min((first + b) * width, n) - min(first * width, n))
            assert written <= ranks * b * width <= rows * width, f"seed={seed} {what}"


@pytest.mark.parametrize(("ranks", "width"), CASES)
def test_permute(ranks, width, seed):
    """route_collective and permute against the literal statement for every shift."""
    rng = seeded_rng(f"permute_{ranks}_{width}", seed=seed)
    for n in _sizes(rng, ranks, width):
        x = _data(rng, ranks, n)
        rows = out_rows(PERM, n, ranks, width)
        assert rows == -(-n // width), f"seed={seed} n={n}"
        d = rows * width + int(rng.integers(0, 3))
        prev = rng.integers(0, 1 << 32, (ranks, d), dtype=np.uint64).astype(np.uint32)
        for s in range(1, ranks):
            what = f"permute P={ranks} W={width} n={n} s={s}"
            got = route_collective(PERM, x, prev, width, s)
            want = _ref_permute(x.tolist(), prev.tolist(), s)
            moved = permute(x, s)
            for j in range(ranks):
                _assert_bits(seed, f"{what} rank {j}", got[j], want[j])
                _assert_bits(seed, f"{what} permute() rank {j}", moved[j], x[(j - s) % ranks])
                assert not np.shares_memory(moved[j], x), f"seed={seed} {what}"


def test_specials_move_unchanged(seed):
    """Every KEEP pattern lands bit-exactly (a copy never canonicalises a NaN or flushes -0),
    in both ops, for buffers made of nothing else."""
    for ranks, width in ((2, 1), (3, 2), (5, 4), (8, 1)):
        n = KEEP.size * ranks
        x = np.stack([np.roll(np.resize(KEEP, n), r) for r in range(ranks)])
        a2a = route_collective(A2A, x, np.zeros((ranks, out_rows(A2A, n, ranks, width) * width),
                                                np.uint32), width)
        want = _ref_all_to_all(x.tolist(), np.zeros((ranks, a2a[0].size), int).tolist(), width)
        for j in range(ranks):
            _assert_bits(seed, f"a2a specials P={ranks} W={width} rank {j}", a2a[j], want[j])
        assert all(np.isin(KEEP, np.concatenate(a2a)).tolist()), f"seed={seed}"
        pm = route_collective(PERM, x, np.zeros((ranks, n + width), np.uint32), width, 1)
        for j in range(ranks):
            _assert_bits(seed, f"permute specials rank {j}", pm[j][:n], x[(j - 1) % ranks])


def test_worked_example():
    """P = 3, W = 2, n = 9: B = 5 rows, chunks of 2, 2, 1 rows; out_rows = 3 * 2 = 6. Rank 2's
    chunk is row 4, lane 0 only (word 8): its slots are one row each, lane 1 never written."""
    x = np.array([[100 * r + i for i in range(9)] for r in range(3)], np.uint32)
    prev = np.full((3, 12), 0xEEEEEEEE, np.uint32)
    got = route_collective(A2A, x, prev, 2)
    e = 0xEEEEEEEE
    assert got[0].tolist() == [0, 1, 2, 3, 100, 101, 102, 103, 200, 201, 202, 203]
    assert got[1].tolist() == [4, 5, 6, 7, 104, 105, 106, 107, 204, 205, 206, 207]
    assert got[2].tolist() == [8, e, 108, e, 208, e, e, e, e, e, e, e]
    got = route_collective(PERM, x, prev[:, :10], 2, 2)
    assert got[1].tolist() == [*range(200, 209), e] and got[0].tolist() == [*range(100, 109), e]


# --- the schedule ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Beat:
    origin: int
    dest: int = -1
    row: int = -1
    last: bool = False
    end: bool = False
    words: tuple = ()


def _simulate(op, x: np.ndarray, prev: np.ndarray, w: int, shift: int = 0):
    """The routing of the module docstring, cycle by cycle: links of latency one cycle, one
    beat each a cycle; a rank forwards a received beat (priority) or injects its next one;
    it writes one row a cycle, a received beat for itself first, its local copy otherwise.
    Returns (destinations, data beats per link, cycles until every rank is done)."""
    p, n = x.shape
    beats = -(-n // w)
    chunks = _chunk_rows(beats, p)
    plan = [[(r - k) % p for k in range(1, p)] if op == A2A else [(r + shift) % p]
            for r in range(p)]

    def rows(d):
        return range(chunks[d][0], sum(chunks[d])) if op == A2A else range(beats)

    def words(o, row):
        return tuple(int(x[o, row * w + lane]) for lane in range(w) if row * w + lane < n)

    queue = [deque([*(_Beat(r, d, row, row == beats - 1, False, words(r, row))
                      for d in plan[r] for row in rows(d)), _Beat(r, end=True)])
             for r in range(p)]
    local = [deque(rows(r)) if op == A2A else deque() for r in range(p)]
    out = prev.copy()
    arrived = np.zeros((p, p), int)  # arrived[r][o]: beats from o written at r
    ends = [0] * p
    crossings = [0] * p
    link: list[_Beat | None] = [None] * p

    def write(r, o, k, data):
        base = (o * chunks[r][1] + k) * w if op == A2A else k * w
        out[r, base:base + len(data)] = data

    cycle = 0
    while not all(not queue[r] and not local[r] and ends[r] == p - 1 for r in range(p)):
        assert cycle < 100 * (beats + p), "the routing does not finish"
        new = [None] * p
        for r in range(p):
            b, wrote, fwd = link[(r - 1) % p], False, None
            if b is not None and b.end:
                ends[r] += 1
                # Every beat of its origin for this rank came before its end token.
                want = len(rows(r)) if r in plan[b.origin] else 0
                assert arrived[r, b.origin] == want, (r, b.origin)
                if (r + 1) % p != b.origin:
                    fwd = b
            elif b is not None and b.dest == r:
                k = arrived[r, b.origin]
                assert b.row == rows(r)[k], "a stream arrived out of row order"
                assert b.last == (b.row == beats - 1)
                write(r, b.origin, k, b.words)
                arrived[r, b.origin] += 1
                wrote = True
            elif b is not None:
                fwd = b
            new[r] = fwd if fwd is not None else (queue[r].popleft() if queue[r] else None)
            if new[r] is not None and not new[r].end:
                crossings[r] += 1
            if not wrote and local[r]:
                row = local[r].popleft()
                write(r, r, row - chunks[r][0], words(r, row))
        link = new
        cycle += 1
    return out, crossings, cycle


def _brute_link_beats(op, n, p, w, shift=0) -> list[int]:
    """Per link r -> r+1: the rows of every stream o -> d whose path o, o+1, ..., d uses it."""
    beats = -(-n // w)
    chunks = _chunk_rows(beats, p)
    count = [0] * p
    for o in range(p):
        dests = [d for d in range(p) if d != o] if op == A2A else [(o + shift) % p]
        for d in dests:
            r = o
            while r != d:
                count[r] += chunks[d][1] if op == A2A else beats
                r = (r + 1) % p
    return count


@pytest.mark.parametrize("ranks", RANKS)
def test_route_plan(ranks):
    for r in range(ranks):
        plan = route_plan(A2A, ranks, r)
        assert plan == [(r - k) % ranks for k in range(1, ranks)], (r, plan)
        assert sorted(plan) == sorted(set(range(ranks)) - {r})  # every other rank, once
        dist = [(d - r) % ranks for d in plan]
        assert dist == sorted(dist, reverse=True), dist  # farthest first
        assert route_plan(int(A2A), ranks, r, shift=5) == plan  # shift ignored
        for s in range(1, ranks):
            assert route_plan(PERM, ranks, r, s) == [(r + s) % ranks]


@pytest.mark.parametrize(("ranks", "width"), CASES)
def test_link_beats_and_bound(ranks, width, seed):
    """link_beats against the path-walking count and the docstring's crossing rule; the bound
    against its definition."""
    rng = seeded_rng(f"links_{ranks}_{width}", seed=seed)
    for n in _sizes(rng, ranks, width):
        beats = -(-n // width)
        chunks = _chunk_rows(beats, ranks)
        got = link_beats(A2A, n, ranks, width)
        assert got == _brute_link_beats(A2A, n, ranks, width), f"seed={seed} n={n}"
        rule = [sum(chunks[d][1] for o in range(ranks) for d in range(ranks)
                    if d != o and (r - o) % ranks < (d - o) % ranks) for r in range(ranks)]
        assert got == rule, f"seed={seed} n={n}"
        writes = max(ranks * b for _, b in chunks)
        assert route_bound_cycles(A2A, n, ranks, width) == float(max(max(got), writes))
        for s in range(1, ranks):
            got = link_beats(PERM, n, ranks, width, s)
            assert got == _brute_link_beats(PERM, n, ranks, width, s) == [s * beats] * ranks
            assert route_bound_cycles(PERM, n, ranks, width, s) == float(s * beats)


@pytest.mark.parametrize("ranks", RANKS)
def test_bound_closed_forms(ranks):
    """For P | B: all-to-all max((P-1)/2, 1) * B (P = 4: 1.5 B; P = 2: B, the write port);
    permute by s: s * B. Every link carries the same load then."""
    for width in WIDTHS:
        for beats in (ranks, 3 * ranks, 64 * ranks):
            n = beats * width - (width - 1)  # a partial last row: still B rows
            bound = route_bound_cycles(A2A, n, ranks, width)
            assert bound == max((ranks - 1) / 2, 1) * beats, (ranks, width, beats, bound)
            assert len(set(link_beats(A2A, n, ranks, width))) == 1
            for s in range(1, ranks):
                assert route_bound_cycles(PERM, n, ranks, width, s) == s * beats
    assert route_bound_cycles(A2A, 4096, 4, 1) == 1.5 * 4096
    assert route_bound_cycles(A2A, 4096, 2, 4) == 1024.0
    assert route_bound_cycles(A2A, 8 * 100, 8, 1) == 3.5 * 800
    # Uneven: P = 3, B = 4 (chunks 2, 1, 1): rank 0 writes 3 * 2 rows; link loads are
    # 0 -> 1: (0->1, 0->2, 2->1) 1 + 1 + 1 = 3 ... the bound is the write port's 6.
    assert route_bound_cycles(A2A, 4, 3, 1) == 6.0


@pytest.mark.parametrize(("ranks", "width"), [(2, 1), (2, 4), (3, 2), (4, 1), (5, 2), (6, 4),
                                              (7, 1), (8, 2)])
def test_schedule_simulation(ranks, width, seed):
    """Tagged beats through the ring, cycle by cycle: the destinations are route_collective's,
    every stream arrives in row order and before its end token, each link carries link_beats'
    beats, and the time is at least route_bound_cycles and at most 2P cycles more."""
    rng = seeded_rng(f"schedule_{ranks}_{width}", seed=seed)
    for n in (1, width * (ranks - 1), ranks * width, ranks * width * 6,
              int(rng.integers(2, 40 * width * ranks))):
        x = _data(rng, ranks, n)
        for op, shifts in ((A2A, [0]), (PERM, range(1, ranks))):
            prev = rng.integers(0, 1 << 32, (ranks, out_rows(op, n, ranks, width) * width),
                                dtype=np.uint64).astype(np.uint32)
            for s in shifts:
                what = f"seed={seed} {op.name} P={ranks} W={width} n={n} s={s}"
                out, crossings, cycles = _simulate(op, x, prev, width, s)
                want = route_collective(op, x, prev, width, s)
                for j in range(ranks):
                    _assert_bits(seed, f"{what} rank {j}", out[j], want[j])
                assert crossings == link_beats(op, n, ranks, width, s), what
                bound = route_bound_cycles(op, n, ranks, width, s)
                # The bound is a bound, and this schedule comes within 2P cycles of it (the
                # ring's fill and the end tokens' trip; measured: at most 2(P - 1) for
                # all-to-all and P for permute, for every B up to 12P).
                assert bound <= cycles <= bound + 2 * ranks, (what, cycles, bound)


# --- validation ------------------------------------------------------------------------------


def test_validation():
    ok = [np.ones(5, np.uint32)] * 3
    dst = [np.zeros(6, np.uint32)] * 3
    for op in (0, 1, 2, CollectiveOp.ALL_REDUCE):
        for call in (lambda op=op: route_collective(op, ok, dst),
                     lambda op=op: out_rows(op, 5, 3),
                     lambda op=op: route_plan(op, 3, 0),
                     lambda op=op: link_beats(op, 5, 3),
                     lambda op=op: route_bound_cycles(op, 5, 3)):
            with pytest.raises(ValueError, match="not a routed collective"):
                call()
    for op in (5, 7, -1, "PERMUTE"):
        with pytest.raises(ValueError, match="CollectiveOp"):
            route_collective(op, ok, dst)
    for bad in (0, 3, -1, True, 1.0, None):
        with pytest.raises(ValueError, match="shift must be an integer in 1..2"):
            route_collective(PERM, ok, dst, 1, bad)
        with pytest.raises(ValueError, match="shift"):
            permute(ok, bad)
        with pytest.raises(ValueError, match="shift"):
            route_plan(PERM, 3, 0, bad)
        with pytest.raises(ValueError, match="shift"):
            link_beats(PERM, 5, 3, 1, bad)
        with pytest.raises(ValueError, match="shift"):
            route_bound_cycles(PERM, 5, 3, 1, bad)
    assert [check_shift(s, 4) for s in (1, 2, 3, np.int64(2))] == [1, 2, 3, 2]
    assert route_collective(A2A, ok, dst, 1, 7)[0].size == 6  # shift ignored by all-to-all
    with pytest.raises(ValueError, match="ranks"):
        route_collective(A2A, ok[:1], dst[:1])
    with pytest.raises(ValueError, match="ranks"):
        out_rows(A2A, 5, 1)
    with pytest.raises(ValueError, match="one region per rank"):
        route_collective(A2A, ok, dst[:2])
    with pytest.raises(ValueError, match="must hold 6 words"):
        route_collective(A2A, ok, [np.zeros(6, np.uint32)] * 2 + [np.zeros(5, np.uint32)])
    with pytest.raises(ValueError, match="must hold 5 words"):
        route_collective(PERM, ok, [np.zeros(4, np.uint32)] * 3, 1, 1)
    with pytest.raises(ValueError, match="same length"):
        route_collective(A2A, [np.ones(5, np.uint32)] * 2 + [np.ones(4, np.uint32)], dst)
    with pytest.raises(ValueError, match="n "):
        route_collective(PERM, [np.zeros(0, np.uint32)] * 3, dst, 1, 1)
    with pytest.raises(ValueError, match="src must hold"):
        route_collective(A2A, [np.ones(5, np.float32)] * 3, dst)
    with pytest.raises(ValueError, match="dst must hold"):
        route_collective(A2A, ok, [np.zeros(6, np.float32)] * 3)
    for bad in (3, 0, True):
        with pytest.raises(ValueError, match="link_width"):
            route_collective(A2A, ok, dst, bad)
        with pytest.raises(ValueError, match="link_width"):
            out_rows(PERM, 5, 3, bad)
    for rank in (-1, 3, True):
        with pytest.raises(ValueError, match="rank must"):
            route_plan(A2A, 3, rank)
    assert set(ROUTED_OPS) == {A2A, PERM}
    for op in (A2A, PERM, 3, 4):  # (not in test_golden_collective.py: lab 4 stubs ring_steps)
        with pytest.raises(ValueError, match="not a ring-step collective"):
            ring_steps(op, 3, 0)
    # The ring ops still run; the routed ones are not ring steps.
    assert run_collective(0, ok)[0].tolist() == [3] * 5  # three smallest subnormals, exact
    assert ring_bound_cycles(0, 6, 3, 1) == 8.0
