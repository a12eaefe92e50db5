"""The ISS's sparse LOAD_STATIONARY and MATMUL (``golden.iss``, ``golden.sparse``): a compressed
tile DMA'd into SBUF (tags in bits 16..19 of its words) and a moving tile in the sparse layout
give the contract's sparse matmul in PSUM, overwrite and accumulate; the checks of the new
field and shapes; bad tags are BAD_TAGS, counted, and forget the tile."""

from __future__ import annotations

import numpy as np
import pytest

from golden.fp32 import fp32_add
from golden.isa import ErrorCode, Opcode, Sparsity, encode
from golden.iss import CoreConfig, NeuronCoreISS
from golden.sparse import (
    PATTERNS,
    compress,
    moving_from_layout,
    moving_layout,
    pack_words,
    pattern,
    sparse_matmul_tile,
)
from sim.host.programs import BF16, FP8_E4M3, FP8_E5M2, FP32
from sim.tb import vectors

CFG = CoreConfig(n=4, sbuf_words=128, psum_banks=2, psum_words=8, sparse=True)
FMT_NAMES = {BF16: "bf16", FP8_E4M3: "fp8_e4m3", FP8_E5M2: "fp8_e5m2"}
SPARSITY = {s.pattern: s for s in Sparsity if s.pattern}




def _dma(addr, rows, cols, sbuf_addr):
    return encode(Opcode.DMA_LOAD, dtype=FP32, part=0, rows=rows, sbuf_addr=sbuf_addr,
                  cols=cols, dram_addr=addr, dram_stride=4 * cols)


def _ls(sp, k, m, fmt=BF16, addr=0, part=0):
    return encode(Opcode.LOAD_STATIONARY, fmt=fmt, part=part, k=k, m=m, sbuf_addr=addr,
                  sparsity=int(sp))


def _mm(k, f, fmt=BF16, addr=64, acc=0, bank=0):
    return encode(Opcode.MATMUL, fmt=fmt, part=0, k=k, f=f, sbuf_addr=addr, bank=bank,
                  psum_addr=0, accumulate=acc)


def test_sparsity_codes():
    assert [s.pattern for s in Sparsity] == [None, *PATTERNS]


def test_moving_layout_round_trips(seed):
    rng = vectors.seeded_rng("sparse-layout", seed=seed)
    for name in PATTERNS:
        p = pattern(name)
        for k in (1, p.ratio, 2 * p.ratio + 1, 4 * p.ratio):
            mv = rng.integers(0, 1 << 16, (k, 3)).astype(np.uint16)
            words = moving_layout(mv, p)
            assert words.shape == (-(-k // p.ratio), 3 * p.ratio)
            # Row kk of the tile is partition kk // R, word f * R + kk % R.
            kk, f = k - 1, 2
            assert words[kk // p.ratio, f * p.ratio + kk % p.ratio] == mv[kk, f]
            assert np.array_equal(moving_from_layout(words, p, k), mv)


@pytest.mark.parametrize("s_fmt", list(FMT_NAMES))
@pytest.mark.parametrize("name", list(PATTERNS))
def test_sparse_program_is_the_contracts_matmul(name, s_fmt, seed):
    """DMA a packed compressed tile and a moving tile in the sparse layout, LOAD_STATIONARY,
    MATMUL (overwrite), MATMUL (accumulate): PSUM is sparse_matmul_tile, then p + s."""
    rng = vectors.seeded_rng("iss-sparse", name, s_fmt, seed=seed)
    p = pattern(name)
    m_fmt = int(rng.choice(list(FMT_NAMES)))
    for k in sorted({1, p.m - 1, p.m + p.n - 1, p.ratio * CFG.n}):
        if p.slots(k) > CFG.n:
            continue
        m, f = int(rng.integers(1, CFG.n + 1)), int(rng.integers(1, CFG.psum_words + 1))
        dense = vectors.operands(FMT_NAMES[s_fmt], rng, (k, m), 0.1)
        values, tags = compress(dense, FMT_NAMES[s_fmt], vectors.sparse_mask(rng, p, k, m), p)
        mv = vectors.operands(FMT_NAMES[m_fmt], rng, (k, f), 0.1)
        mv2 = vectors.operands(FMT_NAMES[m_fmt], rng, (k, f), 0.1)
        iss = NeuronCoreISS(CFG)
        iss.write_dram(0, pack_words(values, tags), FP32)
        lay, lay2 = moving_layout(mv, p), moving_layout(mv2, p)
        iss.write_dram(4096, lay, FP32)
        iss.write_dram(8192, lay2, FP32)
        rows, cols = lay.shape
        program = [_dma(0, *values.shape, 0), _dma(4096, rows, cols, 64),
                   _dma(8192, rows, cols, 96), _ls(SPARSITY[name], k, m, s_fmt),
                   _mm(k, f, m_fmt), _mm(k, f, m_fmt, addr=96, acc=1)]
        assert iss.run(program) == ErrorCode.OK, (iss.error_reason, seed)
        s1 = sparse_matmul_tile(values, tags, FMT_NAMES[s_fmt], mv, FMT_NAMES[m_fmt], p)
        s2 = sparse_matmul_tile(values, tags, FMT_NAMES[s_fmt], mv2, FMT_NAMES[m_fmt], p)
        want = fp32_add(s1, s2)
        got = iss.psum[:m, 0, :f]
        same = (got == want) | (np.isnan(got.view(np.float32)) & np.isnan(want.view(np.float32)))
        assert same.all(), f"{name} K = {k}, seed {seed}"
        assert not iss.psum[m:].any() and iss.executed == len(program)


def _one_tile(iss, name, k, m, tags_edit=None):
    """SBUF word 0.. of partitions 0..: a packed compressed tile (random), tags edited."""
    rng = vectors.seeded_rng("iss-sparse-one", name, k)
    p = pattern(name)
    dense = vectors.operands("bf16", rng, (k, m), 0.0)
    values, tags = compress(dense, "bf16", vectors.sparse_mask(rng, p, k, m), p)
    if tags_edit:
        tags_edit(tags)
    iss.sbuf[:values.shape[0], :m] = pack_words(values, tags)


@pytest.mark.parametrize("what, edit", [
    ("past the group", lambda t: t.__setitem__((1, 0), 15)),
    ("not increasing", lambda t: t.__setitem__((1, 1), t[0, 1])),
])
def test_bad_tags_stop_the_queue_and_forget_the_tile(what, edit):
    iss = NeuronCoreISS(CFG)
    _one_tile(iss, "4:16", 16, 2)
    assert iss.run([_ls(Sparsity.S4_16, 16, 2)]) == ErrorCode.OK
    before = iss.sbuf.copy()
    _one_tile(iss, "4:16", 16, 2, edit)
    bad = iss.sbuf.copy()
    iss2 = NeuronCoreISS(CFG)
    iss2.sbuf[...] = bad
    assert iss2.run([encode(Opcode.BARRIER), _ls(Sparsity.S4_16, 16, 2)]) == ErrorCode.BAD_TAGS
    assert (iss2.error_index, iss2.executed) == (1, 2), what
    assert iss2.te.stationary_shape is None and np.array_equal(iss2.sbuf, bad)
    iss2.clear_error()
    assert iss2.run([_mm(16, 1)]) == ErrorCode.BAD_SHAPE  # no tile: a new load is needed
    assert not np.array_equal(before, bad)


def test_a_short_last_group_is_checked_against_k():
    """K = 6 in 2:4: the second group has rows 4, 5 and keeps both; a tag of 2 there points
    past K."""
    iss = NeuronCoreISS(CFG)
    _one_tile(iss, "2:4", 6, 1, lambda t: t.__setitem__((3, 0), 2))
    assert iss.run([_ls(Sparsity.S2_4, 6, 1)]) == ErrorCode.BAD_TAGS
    assert "beyond the group's 2 rows" in iss.error_reason


@pytest.mark.parametrize("what, program, code, cfg", [
    ("reserved sparsity", [_ls(5, 4, 1)], ErrorCode.BAD_FIELD, CFG),
    ("no sparse mode", [_ls(Sparsity.S2_4, 4, 1)], ErrorCode.BAD_FIELD,
     CoreConfig(n=4, sbuf_words=128)),
    ("slots above n", [_ls(Sparsity.S2_4, 9, 1)], ErrorCode.BAD_SHAPE, CFG),
    ("k 0", [_ls(Sparsity.S4_8, 0, 1)], ErrorCode.BAD_SHAPE, CFG),
    ("slots past SBUF", [_ls(Sparsity.S4_16, 16, 1, part=1)], ErrorCode.BAD_RANGE, CFG),
    ("moving past SBUF", [_ls(Sparsity.S4_16, 16, 1), _mm(16, 10, addr=90)],
     ErrorCode.BAD_RANGE, CFG),
    ("mm k is the dense k", [_ls(Sparsity.S4_16, 16, 1), _mm(4, 1)], ErrorCode.BAD_SHAPE, CFG),
])
def test_sparse_checks(what, program, code, cfg):
    """Each check: the code, and nothing changed (the valid tile of zeros loads fine)."""
    iss = NeuronCoreISS(cfg)
    iss.sbuf[:4, :4] = (np.arange(4, dtype=np.uint32) % 4)[:, None] << 16  # tags 0 1 2 3
    sbuf = iss.sbuf.copy()
    assert iss.run(program) == code, what
    assert iss.error_index == len(program) - 1 and np.array_equal(iss.sbuf, sbuf)
    assert not iss.psum.any()
