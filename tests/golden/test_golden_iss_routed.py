"""The ISS's all-to-all and permute (golden/iss.py COLLECTIVE, ops 3 and 4): the checks and
their order, and programs on rings of 2, 3 and 4 cores against golden.collective's
``all_to_all`` / ``permute`` applied to the SBUF regions by plain numpy indexing (the ISS
itself goes through ``route_collective``). Seed: ``NCLITE_SEED``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from golden.collective import all_to_all, chunk_beats, permute, ring_all_reduce
from golden.isa import CollectiveOp, ErrorCode, Opcode, encode
from golden.iss import CommandError, CoreConfig, NeuronCoreISS, RingISS
from sim.host.programs import error_programs
from sim.tb.vectors import seeded_rng

A2A, PERM = CollectiveOp.ALL_TO_ALL, CollectiveOp.PERMUTE
WORDS = 32


def _cfg(ranks: int, width: int = 1) -> CoreConfig:
    return CoreConfig(n=4, sbuf_words=WORDS, psum_banks=1, psum_words=4, link_width=width,
                      ranks=ranks)


def _coll(coll_op=A2A, part=0, rows=1, sbuf_addr=0, cols=4, dst_addr=8, shift=0):
    return encode(Opcode.COLLECTIVE, coll_op=coll_op, part=part, rows=rows,
                  sbuf_addr=sbuf_addr, cols=cols, dst_addr=dst_addr, shift=shift)


def _code(iss: NeuronCoreISS, words) -> tuple[ErrorCode, str]:
    try:
        iss.check(words)
    except CommandError as err:
        return err.code, err.reason
    return ErrorCode.OK, ""


def _out(op, cols: int, ranks: int) -> int:
    return ranks * -(-cols // ranks) if op == A2A else cols


# --- checks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ranks", (2, 3, 4, 8))
def test_checks_in_order(ranks):
    """Each check of the docstring, with a later check also failing: the earlier one wins."""
    iss = NeuronCoreISS(_cfg(ranks, 2))
    out = _out(A2A, 5, ranks)
    cases = [
        # BAD_FIELD: a reserved op, or a PERMUTE's shift outside 1..P-1 -- before the shape.
        *[(_coll(coll_op=op, rows=0), ErrorCode.BAD_FIELD, "collective op") for op in (5, 6, 7)],
        *[(_coll(coll_op=PERM, shift=s, rows=0, cols=0), ErrorCode.BAD_FIELD, "shift")
          for s in (0, ranks, ranks + 1, 63)],
        # BAD_SHAPE: rows or cols 0, then rows != W -- before the source range.
        (_coll(rows=0, dst_addr=WORDS), ErrorCode.BAD_SHAPE, "rows or cols is 0"),
        (_coll(rows=2, cols=0, sbuf_addr=WORDS), ErrorCode.BAD_SHAPE, "rows or cols is 0"),
        (_coll(rows=4, sbuf_addr=WORDS), ErrorCode.BAD_SHAPE, "link width"),
        (_coll(coll_op=PERM, shift=1, rows=1, part=3), ErrorCode.BAD_SHAPE, "link width"),
        # BAD_RANGE: the source (partitions or words), before the destination.
        (_coll(rows=2, part=3, dst_addr=WORDS - 1), ErrorCode.BAD_RANGE, "SBUF partitions"),
        (_coll(rows=2, sbuf_addr=WORDS - 4, cols=5, dst_addr=0), ErrorCode.BAD_RANGE,
         "SBUF partitions"),
        # ... then the destination past SBUF, before meeting the source.
        (_coll(rows=2, sbuf_addr=WORDS - 5, cols=5, dst_addr=WORDS - out + 1),
         ErrorCode.BAD_RANGE, "outside"),
        (_coll(coll_op=PERM, shift=1, rows=2, sbuf_addr=0, cols=5, dst_addr=WORDS - 4),
         ErrorCode.BAD_RANGE, "outside"),
        (_coll(rows=2, sbuf_addr=0, cols=5, dst_addr=4), ErrorCode.BAD_RANGE, "meet"),
        # Legal: the last words exactly, and touching the source on either side.
        (_coll(rows=2, sbuf_addr=0, cols=5, dst_addr=WORDS - out), ErrorCode.OK, ""),
        (_coll(rows=2, sbuf_addr=out, cols=5, dst_addr=0), ErrorCode.OK, ""),
        (_coll(rows=2, sbuf_addr=0, cols=5, dst_addr=5), ErrorCode.OK, ""),
        *[(_coll(coll_op=PERM, shift=s, rows=2, part=2, sbuf_addr=3, cols=5, dst_addr=8),
           ErrorCode.OK, "") for s in range(1, ranks)],
        # The ring ops ignore dst_addr and shift.
        *[(_coll(coll_op=op, rows=2, sbuf_addr=0, cols=5, dst_addr=2, shift=63), ErrorCode.OK,
           "") for op in (0, 1, 2)],
    ]
    for i, (words, code, reason) in enumerate(cases):
        got, why = _code(iss, words)
        assert got == code and reason in why, (ranks, i, got, why)


@pytest.mark.parametrize(("op", "ranks"), list(itertools.product((A2A, PERM), (2, 3, 5))))
def test_destination_range_and_overlap_exhaustive(op, ranks):
    """Every source and destination place on 12 words: BAD_RANGE exactly when the
    destination's words pass the end or share a word with the source's."""
    words = 12
    cfg = CoreConfig(n=2, sbuf_words=words, psum_banks=1, psum_words=4, ranks=ranks)
    iss = NeuronCoreISS(cfg)
    shift = 1 if op == PERM else 0
    for cols in (1, 2, 3, 4):
        out = _out(op, cols, ranks)
        for src, dst in itertools.product(range(words - cols + 1), range(words + 1)):
            past = dst + out > words
            meet = bool(set(range(src, src + cols)) & set(range(dst, dst + out)))
            want = ErrorCode.BAD_RANGE if past or meet else ErrorCode.OK
            got, why = _code(iss, _coll(op, 0, 1, src, cols, dst, shift))
            assert got == want, (op.name, ranks, cols, src, dst, why)


def test_outside_a_ring():
    """ranks = 0: a PERMUTE is BAD_FIELD at once (no shift is in 1..P-1); an ALL_TO_ALL passes
    the checks of its source (its destination is not checked) and is BAD_FIELD when it runs,
    as every COLLECTIVE outside a ring; nothing changes."""
    iss = NeuronCoreISS(_cfg(0))
    assert _code(iss, _coll(PERM, shift=1, rows=0))[0] == ErrorCode.BAD_FIELD
    assert _code(iss, _coll(A2A, dst_addr=WORDS))[0] == ErrorCode.OK
    assert _code(iss, _coll(A2A, dst_addr=1))[0] == ErrorCode.OK
    assert _code(iss, _coll(A2A, sbuf_addr=WORDS - 1))[0] == ErrorCode.BAD_RANGE
    iss.sbuf[:] = np.arange(iss.sbuf.size, dtype=np.uint32).reshape(iss.sbuf.shape)
    before = iss.sbuf.copy()
    assert iss.run([_coll(A2A, dst_addr=WORDS)]) == ErrorCode.BAD_FIELD
    assert "outside a ring" in iss.error_reason and iss.executed == 0
    assert np.array_equal(iss.sbuf, before)


def test_error_programs_in_a_ring():
    """sim.host.programs.error_programs on a core with ranks = 3 as well as outside a ring:
    every case gives its code (its all-to-all destination cases are BAD_RANGE in a ring,
    BAD_FIELD outside one)."""
    for ranks in (0, 3):
        cfg = CoreConfig(n=4, sbuf_words=64, psum_banks=3, psum_words=8, ranks=ranks)
        cases = error_programs(cfg)
        for what, prog, code in cases:
            iss = NeuronCoreISS(cfg)
            assert iss.run(prog) == code, (ranks, what, iss.error_reason)
        codes = {what: code for what, _, code in cases}
        for what in ("all-to-all dst past SBUF", "all-to-all dst meets src"):
            assert codes[what] == (ErrorCode.BAD_RANGE if ranks else ErrorCode.BAD_FIELD)


# --- programs on a ring ----------------------------------------------------------------------


def _flat(sbuf, part, rows, addr, cols):
    return sbuf[part:part + rows, addr:addr + cols].T.reshape(-1).copy()


def _put(sbuf, part, rows, addr, cols, words):
    sbuf[part:part + rows, addr:addr + cols] = np.asarray(words).reshape(cols, rows).T


@pytest.mark.parametrize(("ranks", "width"), [(2, 1), (2, 4), (3, 2), (3, 1), (4, 2), (4, 4)])
def test_ring_program(ranks, width, seed):
    """A program per core: DMA loads, an ALL_TO_ALL (places differ per core), a PERMUTE of its
    result by each shift in turn, an ALL_REDUCE elsewhere, a DMA store. Every core's SBUF and
    DRAM: the expected regions rewritten, every other word unchanged."""
    rng = seeded_rng(f"iss_routed_{ranks}_{width}", seed=seed)
    cfg = CoreConfig(n=4, sbuf_words=64, psum_banks=1, psum_words=4, link_width=width,
                     dram_bytes=4096)
    cores = [NeuronCoreISS(cfg) for _ in range(ranks)]
    for c in cores:
        c.sbuf[:] = rng.integers(0, 1 << 32, c.sbuf.shape, dtype=np.uint64).astype(np.uint32)
        c.dram[:] = rng.integers(0, 256, c.dram.size, dtype=np.uint8)
    cols = int(rng.integers(1, 3 * ranks + 2))
    out = _out(A2A, cols, ranks)
    # Per core: partition, source, a2a destination, permute destination (all disjoint).
    places = []
    for _ in range(ranks):
        part = int(rng.integers(0, cfg.n - width + 1))
        src = int(rng.integers(0, 4))
        a2a = src + cols + int(rng.integers(0, 3))
        pdst = a2a + out + int(rng.integers(0, 3))
        places.append((part, src, a2a, pdst))
    shifts = list(range(1, ranks))
    programs = []
    for r, (part, src, a2a, pdst) in enumerate(places):
        load = encode(Opcode.DMA_LOAD, dtype=4, part=part, rows=width, sbuf_addr=src,
                      cols=cols, dram_addr=64 * r, dram_stride=4 * cols)
        prog = [load, _coll(A2A, part, width, src, cols, a2a, shift=r)]  # a2a ignores shift
        for s in shifts:
            prog.append(_coll(PERM, part, width, a2a, out, pdst, s))
            prog.append(_coll(PERM, part, width, pdst, out, a2a, s))  # and back: a2a += 2s
        prog.append(_coll(0, cfg.n - width, width, 60, 4, 0, 63))
        prog.append(encode(Opcode.DMA_STORE, dtype=4, part=part, rows=width, sbuf_addr=a2a,
                           cols=out, dram_addr=2048, dram_stride=4 * out))
        programs.append(prog)

    # Expected, by numpy on the same starting state.
    sb = [c.sbuf.copy() for c in cores]
    dram = [c.dram.copy() for c in cores]
    for r, (part, src, _, _) in enumerate(places):
        raw = dram[r][64 * r:64 * r + 4 * cols * width].view("<u4").reshape(width, cols)
        sb[r][part:part + width, src:src + cols] = raw
    bufs = [_flat(sb[r], p, width, s, cols) for r, (p, s, _, _) in enumerate(places)]
    beats = chunk_beats(cols, ranks)
    for j, slots in enumerate(all_to_all(bufs, width)):
        part, _, a2a, _ = places[j]
        b = beats[j + 1] - beats[j]
        region = _flat(sb[j], part, width, a2a, out)
        for i, words in enumerate(slots):
            region[i * b * width:i * b * width + words.size] = words
        _put(sb[j], part, width, a2a, out, region)
    for s in shifts:
        for frm, to in ((2, 3), (3, 2)):
            moved = permute([_flat(sb[r], p[0], width, p[frm], out)
                             for r, p in enumerate(places)], s)
            for r, p in enumerate(places):
                _put(sb[r], p[0], width, p[to], out, moved[r])
    ar = [_flat(sb[r], cfg.n - width, width, 60, 4) for r in range(ranks)]
    for r, words in enumerate(ring_all_reduce(ar, width)):
        _put(sb[r], cfg.n - width, width, 60, 4, words)
    for r, (part, _, a2a, _) in enumerate(places):
        words = sb[r][part:part + width, a2a:a2a + out].astype("<u4")
        dram[r][2048:2048 + 4 * out * width] = words.reshape(-1).view(np.uint8)

    codes = RingISS(cores).run(programs)
    assert codes == [ErrorCode.OK] * ranks, (seed, [c.error_reason for c in cores])
    for r, c in enumerate(cores):
        assert c.cfg.ranks == ranks and c.executed == len(programs[r]), f"seed={seed}"
        bad = np.argwhere(c.sbuf != sb[r])
        assert not bad.size, f"seed={seed} core {r}: SBUF differs at {bad[:4].tolist()}"
        assert np.array_equal(c.dram, dram[r]), f"seed={seed} core {r}: DRAM differs"


def test_net_effect_of_a_permute_round_trip(seed):
    """Permute by s then by P - s: every core's buffer is back (the ISS's own composition)."""
    rng = seeded_rng("iss_round_trip", seed=seed)
    for ranks in (2, 3, 4):
        cores = [NeuronCoreISS(_cfg(0, 2)) for _ in range(ranks)]
        for c in cores:
            c.sbuf[:] = rng.integers(0, 1 << 32, c.sbuf.shape, dtype=np.uint64).astype(
                np.uint32)
        start = [c.sbuf[0:2, 0:5].copy() for c in cores]
        for s in range(1, ranks):
            prog = [_coll(PERM, 0, 2, 0, 5, 10, s), _coll(PERM, 0, 2, 10, 5, 0, ranks - s)]
            assert RingISS(cores).run([prog] * ranks) == [ErrorCode.OK] * ranks
            for r, c in enumerate(cores):
                assert np.array_equal(c.sbuf[0:2, 0:5], start[r]), (seed, ranks, s, r)
                assert np.array_equal(c.sbuf[0:2, 10:15], start[(r - s) % ranks]), (seed, r)


@pytest.mark.parametrize("mismatch", ["op", "size", "shift"])
def test_mismatched_routed_commands_raise(mismatch):
    cores = [NeuronCoreISS(_cfg(0)) for _ in range(3)]
    base = dict(coll_op=PERM, part=0, rows=1, sbuf_addr=0, cols=4, dst_addr=8, shift=1)
    other = {"op": {"coll_op": A2A, "dst_addr": 16}, "size": {"cols": 5},
             "shift": {"shift": 2}}[mismatch]
    progs = [[_coll(**base)], [_coll(**base)], [_coll(**{**base, **other})]]
    with pytest.raises(RuntimeError, match="mismatched"):
        RingISS(cores).run(progs)


def test_agreeing_commands_may_differ_in_places():
    """Addresses and partitions may differ per core; an all-to-all's shift is ignored."""
    cores = [NeuronCoreISS(_cfg(0)) for _ in range(3)]
    progs = [[_coll(A2A, r, 1, 2 * r, 4, 20 - r, shift=r)] for r in range(3)]
    assert RingISS(cores).run(progs) == [ErrorCode.OK] * 3


def test_ring_sets_and_checks_ranks():
    cores = [NeuronCoreISS(_cfg(0)), NeuronCoreISS(_cfg(3)), NeuronCoreISS(_cfg(0))]
    RingISS(cores)
    assert [c.cfg.ranks for c in cores] == [3, 3, 3]
    with pytest.raises(ValueError, match="rings of \\[4\\] ranks in a ring of 3"):
        RingISS([NeuronCoreISS(_cfg(0)), NeuronCoreISS(_cfg(4)), NeuronCoreISS(_cfg(3))])


def test_routed_link_timeout():
    """An all-to-all one core never reaches: LINK_TIMEOUT on the others, nothing written."""
    cores = [NeuronCoreISS(_cfg(0)) for _ in range(3)]
    for i, c in enumerate(cores):
        c.sbuf[:] = i + 1
    codes = RingISS(cores).run([[_coll(A2A)], [_coll(A2A)], []])
    assert codes == [ErrorCode.LINK_TIMEOUT] * 2 + [ErrorCode.OK]
    assert all((c.sbuf == i + 1).all() for i, c in enumerate(cores))
