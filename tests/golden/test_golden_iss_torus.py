"""The ISS on a 2-D torus (golden/iss.py: ``CoreConfig.torus_rows``, COLLECTIVE's ``dim``,
:class:`RingISS` matching sub-rings): the configuration's checks, BAD_FIELD for COLUMN
without a torus, the shift and the destination checked against the sub-ring's P, and
programs built from ``golden.collective.torus_schedule`` on 2 x 2 and 2 x 4 tori against
``torus_all_reduce`` and the flat ``all_to_all`` of the SBUF regions (read by plain numpy
indexing), with the link timeouts of cores that never join. Seed: ``NCLITE_SEED``.
"""

from __future__ import annotations

import numpy as np
import pytest

from golden.collective import all_to_all, ring_all_reduce, torus_all_reduce, torus_schedule
from golden.isa import CollectiveDim, CollectiveOp, ErrorCode, Opcode, encode
from golden.iss import CommandError, CoreConfig, NeuronCoreISS, RingISS
from sim.tb.vectors import seeded_rng

ROW, COL = CollectiveDim.ROW, CollectiveDim.COLUMN
AR, A2A, PERM = CollectiveOp.ALL_REDUCE, CollectiveOp.ALL_TO_ALL, CollectiveOp.PERMUTE
WORDS = 64


def _cfg(ranks: int = 0, rows: int = 1, width: int = 1) -> CoreConfig:
    return CoreConfig(n=4, sbuf_words=WORDS, psum_banks=1, psum_words=4, link_width=width,
                      ranks=ranks, torus_rows=rows)


def _coll(coll_op=AR, part=0, rows=1, sbuf_addr=0, cols=4, dst_addr=32, shift=0, dim=ROW):
    return encode(Opcode.COLLECTIVE, coll_op=coll_op, part=part, rows=rows,
                  sbuf_addr=sbuf_addr, cols=cols, dst_addr=dst_addr, shift=shift, dim=dim)


def _code(iss: NeuronCoreISS, words) -> tuple[ErrorCode, str]:
    try:
        iss.check(words)
    except CommandError as err:
        return err.code, err.reason
    return ErrorCode.OK, ""


def _flat(sbuf, part, rows, addr, cols):
    return sbuf[part:part + rows, addr:addr + cols].T.reshape(-1).copy()


def _program(steps, part: int, width: int) -> list:
    """A core's COLLECTIVEs for its torus_schedule steps: W partitions from ``part``, a row
    = an SBUF word."""
    return [_coll(st.op, part, width, st.addr, st.words // width, st.dst, 0, st.dim)
            for st in steps]


def _random_cores(rng, R: int, C: int, width: int) -> list[NeuronCoreISS]:
    cores = [NeuronCoreISS(_cfg(0, R, width)) for _ in range(R * C)]
    for c in cores:
        c.sbuf[:] = rng.integers(0, 1 << 32, c.sbuf.shape, dtype=np.uint64).astype(np.uint32)
    return cores


# --- the configuration ---------------------------------------------------------------------


@pytest.mark.parametrize(("ranks", "rows", "match"), [
    (4, 0, "torus_rows must be an integer >= 1"), (4, -1, "torus_rows must be"),
    (4, True, "torus_rows must be"), (4, 2.0, "torus_rows must be"),
    (6, 4, "torus_rows \\(4\\) must divide ranks \\(6\\)"),
    (2, 2, "torus_rows \\(2\\) must leave rows of at least 2 cores"),
    (3, 3, "torus_rows \\(3\\) must leave rows"),
])
def test_config_rejects(ranks, rows, match):
    with pytest.raises(ValueError, match=match):
        _cfg(ranks, rows)


def test_config_accepts_and_sizes_the_sub_rings():
    assert _cfg().torus_rows == 1
    assert _cfg(0, 2).torus_rows == 2  # no ring yet: RingISS gives it its ranks
    c = _cfg(8, 2)
    assert (c.dim_ranks(ROW), c.dim_ranks(COL)) == (4, 2)
    c = _cfg(6, 3)
    assert (c.dim_ranks(ROW), c.dim_ranks(COL)) == (2, 3)
    assert _cfg(5).dim_ranks(ROW) == 5 and _cfg(0, 2).dim_ranks(ROW) == 0


# --- the checks ----------------------------------------------------------------------------


@pytest.mark.parametrize(("ranks", "rows"), [(4, 1), (0, 1), (3, 1)])
def test_column_without_a_torus_is_bad_field(ranks, rows):
    """Before the shape (rows 0) and the range; after the reserved op."""
    iss = NeuronCoreISS(_cfg(ranks, rows))
    for op in (AR, A2A, CollectiveOp.REDUCE_SCATTER):
        got, why = _code(iss, _coll(op, rows=0, sbuf_addr=WORDS, dim=COL))
        assert (got, "COLUMN needs a torus" in why) == (ErrorCode.BAD_FIELD, True), why
    assert "collective op" in _code(iss, _coll(6, rows=0, dim=COL))[1]
    assert _code(iss, _coll(dim=ROW))[0] == ErrorCode.OK
    assert _code(NeuronCoreISS(_cfg(4, 2)), _coll(dim=COL))[0] == ErrorCode.OK


@pytest.mark.parametrize(("ranks", "rows"), [(8, 2), (8, 4), (6, 3), (6, 2), (4, 2)])
def test_shift_against_the_sub_ring(ranks, rows):
    iss = NeuronCoreISS(_cfg(ranks, rows))
    for dim, P in ((ROW, ranks // rows), (COL, rows)):
        for s in range(0, 10):
            got, why = _code(iss, _coll(PERM, cols=4, dst_addr=8, shift=s, dim=dim))
            want = ErrorCode.OK if 1 <= s <= P - 1 else ErrorCode.BAD_FIELD
            assert got == want, (ranks, rows, dim.name, s, why)
        # BAD_FIELD before BAD_SHAPE
        assert _code(iss, _coll(PERM, rows=0, shift=P, dim=dim))[0] == ErrorCode.BAD_FIELD


@pytest.mark.parametrize(("ranks", "rows"), [(8, 2), (8, 4), (6, 3)])
def test_destination_against_the_sub_ring(ranks, rows):
    """An all-to-all's destination is P·ceil(cols / P) words, P the sub-ring's."""
    iss = NeuronCoreISS(_cfg(ranks, rows))
    for dim, P in ((ROW, ranks // rows), (COL, rows)):
        for cols in (1, 3, 5, 7):
            out = P * -(-cols // P)
            ok = _code(iss, _coll(A2A, sbuf_addr=0, cols=cols, dst_addr=WORDS - out, dim=dim))
            past = _code(iss, _coll(A2A, sbuf_addr=0, cols=cols, dst_addr=WORDS - out + 1,
                                    dim=dim))
            touch = _code(iss, _coll(A2A, sbuf_addr=out, cols=cols, dst_addr=0, dim=dim))
            meet = _code(iss, _coll(A2A, sbuf_addr=out - 1, cols=cols, dst_addr=0, dim=dim))
            assert ok[0] == touch[0] == ErrorCode.OK, (dim.name, cols, ok, touch)
            assert past[0] == ErrorCode.BAD_RANGE and "outside" in past[1], (dim.name, cols)
            assert meet[0] == ErrorCode.BAD_RANGE and "meet" in meet[1], (dim.name, cols)


def test_encode_defaults_dim_to_row():
    """Programs written before the field encode the same bits: dim 0, ROW."""
    f = dict(coll_op=AR, part=0, rows=1, sbuf_addr=0, cols=4, dst_addr=0, shift=0)
    assert np.array_equal(encode(Opcode.COLLECTIVE, **f), encode(Opcode.COLLECTIVE, **f, dim=0))
    assert not np.array_equal(encode(Opcode.COLLECTIVE, **f),
                              encode(Opcode.COLLECTIVE, **f, dim=1))


# --- RingISS on a torus --------------------------------------------------------------------


def test_ring_checks_the_torus():
    RingISS([NeuronCoreISS(_cfg(0, 2)) for _ in range(4)])
    with pytest.raises(ValueError, match="tori of \\[1, 2\\] rows"):
        RingISS([NeuronCoreISS(_cfg(0, r)) for r in (2, 2, 1, 2)])
    with pytest.raises(ValueError, match="torus_rows 2 does not split 3"):
        RingISS([NeuronCoreISS(_cfg(0, 2)) for _ in range(3)])
    with pytest.raises(ValueError, match="torus_rows 4 does not split 6"):
        RingISS([NeuronCoreISS(_cfg(0, 4)) for _ in range(6)])
    with pytest.raises(ValueError, match="torus_rows 2 does not split 2"):
        RingISS([NeuronCoreISS(_cfg(0, 2)) for _ in range(2)])
    cores = [NeuronCoreISS(_cfg(0, 2)) for _ in range(6)]
    RingISS(cores)
    assert [(c.cfg.ranks, c.cfg.torus_rows) for c in cores] == [(6, 2)] * 6


@pytest.mark.parametrize(("R", "C", "W", "cols"), [
    (2, 2, 1, 6), (2, 2, 2, 5), (2, 4, 1, 9), (2, 4, 2, 3), (2, 4, 4, 2), (2, 4, 1, 1)])
def test_torus_all_reduce_program(R, C, W, cols, seed):
    """torus_schedule's steps as COLLECTIVEs (addresses and partitions per core) against
    torus_all_reduce of the regions; every other word unchanged. cols < C: the columns of
    the empty chunks issue one COLLECTIVE fewer."""
    rng = seeded_rng("iss_torus_ar", R, C, W, cols, seed=seed)
    cores = _random_cores(rng, R, C, W)
    places = [(int(rng.integers(0, 4 - W + 1)), int(rng.integers(0, WORDS - cols)))
              for _ in cores]
    programs = [_program(torus_schedule(AR, cols * W, R, C, W, addr=a)[r], p, W)
                for r, (p, a) in enumerate(places)]
    if cols < C:
        assert {len(p) for p in programs} == {2, 3}, seed
    before = [c.sbuf.copy() for c in cores]
    want = torus_all_reduce([_flat(c.sbuf, p, W, a, cols) for c, (p, a) in
                             zip(cores, places, strict=True)], R, C, W)
    assert RingISS(cores).run(programs) == [ErrorCode.OK] * (R * C), seed
    for r, (c, (p, a)) in enumerate(zip(cores, places, strict=True)):
        assert c.executed == len(programs[r]), (seed, r)
        assert np.array_equal(_flat(c.sbuf, p, W, a, cols), want[r]), f"seed={seed} core {r}"
        other = np.ones(c.sbuf.shape, bool)
        other[p:p + W, a:a + cols] = False
        assert np.array_equal(c.sbuf[other], before[r][other]), f"seed={seed} core {r}"


@pytest.mark.parametrize(("R", "C", "W", "k"), [(2, 2, 1, 3), (2, 2, 4, 1), (2, 4, 2, 2),
                                                (2, 4, 1, 1)])
def test_torus_all_to_all_program(R, C, W, k, seed):
    """src -> tmp along the columns, tmp -> dst along the rows: every core's destination is
    the flat all-to-all over the R·C cores; src unchanged, tmp scratch, the rest unchanged."""
    rng = seeded_rng("iss_torus_a2a", R, C, W, k, seed=seed)
    cores = _random_cores(rng, R, C, W)
    cols = R * C * k
    places = []
    for _ in cores:
        src = int(rng.integers(0, 3))
        tmp = src + cols + int(rng.integers(0, 3))
        places.append((int(rng.integers(0, 4 - W + 1)), src, tmp,
                       tmp + cols + int(rng.integers(0, 3))))
    programs = [_program(torus_schedule(A2A, cols * W, R, C, W, addr=s, tmp=t, dst=d)[r], p, W)
                for r, (p, s, t, d) in enumerate(places)]
    before = [c.sbuf.copy() for c in cores]
    srcs = [_flat(c.sbuf, p, W, s, cols) for c, (p, s, _, _) in zip(cores, places, strict=True)]
    want = [np.concatenate(slots) for slots in all_to_all(srcs, W)]
    assert RingISS(cores).run(programs) == [ErrorCode.OK] * (R * C), seed
    for r, (c, (p, s, t, d)) in enumerate(zip(cores, places, strict=True)):
        assert np.array_equal(_flat(c.sbuf, p, W, d, cols), want[r]), f"seed={seed} core {r}"
        assert np.array_equal(_flat(c.sbuf, p, W, s, cols), srcs[r]), f"seed={seed} core {r}"
        other = np.ones(c.sbuf.shape, bool)
        other[p:p + W, t:t + cols] = other[p:p + W, d:d + cols] = False
        assert np.array_equal(c.sbuf[other], before[r][other]), f"seed={seed} core {r}"


def test_sub_rings_run_independently(seed):
    """Each row all-reduces along ROW, each column along COLUMN, in different numbers and
    orders per sub-ring: the k-th COLLECTIVE of a sub-ring is one collective."""
    rng = seeded_rng("iss_torus_independent", seed=seed)
    R, C = 2, 2
    cores = _random_cores(rng, R, C, 1)
    start = [c.sbuf.copy() for c in cores]
    # Row 0 adds words 0..3 twice along ROW; core 1 and 3 (column 1) words 8..11 along COLUMN
    # first. Core 1: ROW, COLUMN, ROW; core 3: COLUMN; cores 0: ROW, ROW; core 2: nothing.
    row, col = _coll(AR, cols=4, sbuf_addr=0), _coll(AR, cols=4, sbuf_addr=8, dim=COL)
    programs = [[row, row], [row, col, row], [], [col]]
    assert RingISS(cores).run(programs) == [ErrorCode.OK] * 4, seed
    r0 = [_flat(s, 0, 1, 0, 4) for s in (start[0], start[1])]
    twice = ring_all_reduce(ring_all_reduce(r0))
    assert np.array_equal(_flat(cores[0].sbuf, 0, 1, 0, 4), twice[0]), seed
    assert np.array_equal(_flat(cores[1].sbuf, 0, 1, 0, 4), twice[1]), seed
    c1 = ring_all_reduce([_flat(s, 0, 1, 8, 4) for s in (start[1], start[3])])
    assert np.array_equal(_flat(cores[1].sbuf, 0, 1, 8, 4), c1[0]), seed
    assert np.array_equal(_flat(cores[3].sbuf, 0, 1, 8, 4), c1[1]), seed
    assert np.array_equal(cores[2].sbuf, start[2]), seed


def test_a_row_never_joined_times_out_while_another_completes(seed):
    """2 x 2: core 3 never joins its row's all-reduce: core 2 LINK_TIMEOUT (counted, its
    buffer as it was), core 3 OK; row 0 completes."""
    rng = seeded_rng("iss_torus_timeout", seed=seed)
    cores = _random_cores(rng, 2, 2, 1)
    start = [c.sbuf.copy() for c in cores]
    row = _coll(AR, cols=4)
    codes = RingISS(cores).run([[row], [row], [row, row], []])
    assert codes == [ErrorCode.OK, ErrorCode.OK, ErrorCode.LINK_TIMEOUT, ErrorCode.OK], seed
    assert cores[2].error_index == 0 and cores[2].executed == 1
    assert "cores [3] never joined" in cores[2].error_reason
    want = ring_all_reduce([_flat(start[r], 0, 1, 0, 4) for r in (0, 1)])
    assert np.array_equal(_flat(cores[0].sbuf, 0, 1, 0, 4), want[0]), seed
    assert np.array_equal(cores[2].sbuf, start[2]) and np.array_equal(cores[3].sbuf, start[3])


def test_mismatched_dims_time_out():
    """Core 0 waits along ROW, core 2 along COLUMN with core 0 (which never comes): no
    sub-ring can run once column 1 is done, so both time out."""
    cores = [NeuronCoreISS(_cfg(0, 2)) for _ in range(4)]
    row, col = _coll(AR, cols=4), _coll(AR, cols=4, dim=COL)
    codes = RingISS(cores).run([[row], [col], [col], [col]])
    assert codes == [ErrorCode.LINK_TIMEOUT, ErrorCode.OK, ErrorCode.LINK_TIMEOUT, ErrorCode.OK]
    assert "cores [1] never joined" in cores[0].error_reason
    assert "cores [0] never joined" in cores[2].error_reason


def test_mismatched_commands_in_a_sub_ring_raise():
    cores = [NeuronCoreISS(_cfg(0, 2)) for _ in range(4)]
    progs = [[_coll(AR, cols=4, dim=COL)], [_coll(AR, cols=4, dim=COL)],
             [_coll(AR, cols=4, dim=COL)], [_coll(AR, cols=5, dim=COL)]]
    with pytest.raises(RuntimeError, match="mismatched"):
        RingISS(cores).run(progs)
    # Different sizes in different sub-rings are fine.
    cores = [NeuronCoreISS(_cfg(0, 2)) for _ in range(4)]
    progs = [[_coll(AR, cols=4, dim=COL)], [_coll(AR, cols=5, dim=COL)],
             [_coll(AR, cols=4, dim=COL)], [_coll(AR, cols=5, dim=COL)]]
    assert RingISS(cores).run(progs) == [ErrorCode.OK] * 4


def test_column_on_a_ring_fails_and_the_others_time_out():
    cores = [NeuronCoreISS(_cfg()) for _ in range(3)]
    progs = [[_coll(AR, cols=4)], [_coll(AR, cols=4)], [_coll(AR, cols=4, dim=COL)]]
    codes = RingISS(cores).run(progs)
    assert codes == [ErrorCode.LINK_TIMEOUT] * 2 + [ErrorCode.BAD_FIELD]
    assert cores[2].executed == 0
