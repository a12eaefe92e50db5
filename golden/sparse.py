"""Structured sparsity along K: the n:m patterns, the compressed stationary tile, and the sparse
matmul of the numerics contract (``docs/contract.md`` §4, "Sparse matmul").

**Patterns.** ``2:4``, ``4:8``, ``4:12``, ``4:16`` (:data:`PATTERNS`): along K, the rows of a
stationary tile fall into groups of m consecutive rows (group g: rows ``g·m .. g·m + m − 1``;
the last group may be shorter), and in every column each group keeps exactly ``min(n, rows of
the group)`` positions. (Exactly, not at most: the hardware's slots are all used, as in
NVIDIA's 2:4. A kernel that wants fewer keeps a zero, which is then a real zero: see below.)

**Compressed tile.** :func:`compress` turns a dense K x M tile and its mask of kept positions
into ``values`` (S x M bit patterns of the tile's format) and ``tags`` (S x M, uint8): group
g's slots are rows ``offset(g) .. offset(g) + min(n, rows) − 1`` (``offset(g)`` the slots of
the groups before it), in increasing K order; a slot's tag is its row's position in the group,
``0 .. m − 1`` (2 bits for 2:4, 3 for 4:8, 4 for 4:12 and 4:16). A tile breaking the pattern
is a ValueError naming the column and the group. :func:`check_tags` is what a core checks of a
compressed tile (every tag inside its group, increasing within it).

**Sparse matmul.** A pruned position is *absent*, not a zero: for a stationary column m with
kept rows ``k1 < k2 < ...``, ``s = +0.0; for k in (k1, k2, ...): s = s + a[k, m] · b[k, f]``
(fp32, the products exact, each add RNE; NaN results canonical 0x7FC00000), so an inf or NaN
in a pruned row of the moving tile never reaches a sum (a dense matmul with zeros there would
make it NaN: 0 · inf), and no ``+0`` product is added where a row is pruned (which would turn
a ``−0`` sum into ``+0``). :func:`sparse_matmul_tile` computes it.

numpy + ml_dtypes only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .formats import FP32_CANONICAL_NAN, to_fp32_bits
from .tensor_engine import _input_format, _matrix

__all__ = ["PATTERNS", "Pattern", "pattern", "compress", "decompress", "check_tags",
           "sparse_matmul_tile", "TAG_SHIFT", "pack_words", "unpack_words", "moving_layout",
           "moving_from_layout", "magnitude_mask", "run_sparse_gemm"]

#: In SBUF a compressed tile's word holds its value in the low bits (as a dense tile's) and its
#: tag in bits ``TAG_SHIFT .. TAG_SHIFT + 3``; the other bits are ignored.
TAG_SHIFT = 16

#: The patterns, by name: (n kept, of every m rows).
PATTERNS = {"2:4": (2, 4), "4:8": (4, 8), "4:12": (4, 12), "4:16": (4, 16)}


@dataclass(frozen=True)
class Pattern:
    """An n:m pattern: ``n`` kept of every ``m`` rows along K."""

    n: int
    m: int

    @property
    def name(self) -> str:
        return f"{self.n}:{self.m}"

    @property
    def ratio(self) -> int:
        """m / n: the dense rows of K a stationary row (slot) stands for, at most; also the
        moving rows a partition holds in the core's sparse moving layout."""
        return self.m // self.n

    @property
    def tag_bits(self) -> int:
        """Bits of a tag (a position in a group of m rows)."""
        return (self.m - 1).bit_length()

    def groups(self, k: int) -> list[tuple[int, int, int]]:
        """``(first row, rows, slots)`` of each group of a K-row tile."""
        return [(g0, min(self.m, k - g0), min(self.n, k - g0)) for g0 in range(0, k, self.m)]

    def slots(self, k: int) -> int:
        """Rows of the compressed tile of a K-row tile."""
        return sum(s for *_, s in self.groups(k))

    def group_of_slot(self, k: int) -> np.ndarray:
        """The first row of each slot's group (length :meth:`slots`)."""
        return np.concatenate([np.full(s, g0) for g0, _, s in self.groups(k)]).astype(np.int64)


def pattern(p) -> Pattern:
    """A :class:`Pattern` from its name (``"4:16"``) or itself; ValueError for any other."""
    if isinstance(p, Pattern) and (p.n, p.m) in PATTERNS.values():
        return p
    if isinstance(p, str) and p in PATTERNS:
        return Pattern(*PATTERNS[p])
    raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, not {p!r}")


def compress(tile, fmt, mask, p) -> tuple[np.ndarray, np.ndarray]:
    """``(values, tags)`` of the K x M tile ``tile`` (bit patterns of ``fmt``) keeping the
    positions where ``mask`` (K x M, bool) is true, in pattern ``p``. Raises ValueError if a
    group of a column keeps other than ``min(n, rows of the group)`` positions."""
    p = pattern(p)
    f = _input_format(fmt, "fmt")
    t = _matrix(tile, f, "tile")
    mask = np.asarray(mask)
    if mask.shape != t.shape or mask.dtype != np.bool_:
        raise ValueError(f"mask must be a bool array of the tile's shape {t.shape}, not "
                         f"{mask.dtype} {mask.shape}")
    k, cols = t.shape
    values = np.zeros((p.slots(k), cols), dtype=t.dtype)
    tags = np.zeros((p.slots(k), cols), dtype=np.uint8)
    row = 0
    for g0, rows, slots in p.groups(k):
        kept = mask[g0:g0 + rows]
        counts = kept.sum(axis=0)
        bad = np.flatnonzero(counts != slots)
        if bad.size:
            c = int(bad[0])
            raise ValueError(
                f"column {c}, rows {g0}..{g0 + rows - 1}: {int(counts[c])} kept; {p.name} keeps "
                f"exactly {slots} of {'these' if rows < p.m else 'every'} {rows} rows (keep a "
                f"zero to fill a slot: it is then multiplied)")
        for c in range(cols):
            pos = np.flatnonzero(kept[:, c])
            values[row:row + slots, c] = t[g0 + pos, c]
            tags[row:row + slots, c] = pos
        row += slots
    return values, tags


def check_tags(tags, p, k: int) -> None:
    """Raise ValueError unless ``tags`` is the tag array of a compressed K-row tile of pattern
    ``p``: :meth:`Pattern.slots` rows, every tag inside its group's rows, strictly increasing
    within a group."""
    p = pattern(p)
    tags = np.asarray(tags)
    if tags.ndim != 2 or tags.shape[0] != p.slots(k):
        raise ValueError(f"tags must have {p.slots(k)} rows for K = {k} in {p.name}, not "
                         f"shape {tags.shape}")
    row = 0
    for g0, rows, slots in p.groups(k):
        t = tags[row:row + slots].astype(np.int64)
        if (t >= rows).any():
            c = int(np.argwhere(t >= rows)[0][1])
            raise ValueError(f"column {c}: a tag of rows {g0}..{g0 + rows - 1} is "
                             f"{int(t[:, c].max())}, beyond the group's {rows} rows")
        if slots > 1 and (np.diff(t, axis=0) <= 0).any():
            c = int(np.argwhere(np.diff(t, axis=0) <= 0)[0][1])
            raise ValueError(f"column {c}: the tags of rows {g0}..{g0 + rows - 1} do not "
                             f"increase: {t[:, c].tolist()}")
        row += slots


def decompress(values, tags, fmt, p, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The dense K x M tile (+0 where pruned) and its mask, of a compressed tile."""
    p = pattern(p)
    f = _input_format(fmt, "fmt")
    v = _matrix(values, f, "values")
    check_tags(tags, p, k)
    rows = p.group_of_slot(k)[:, None] + np.asarray(tags, np.int64)
    cols = np.broadcast_to(np.arange(v.shape[1]), v.shape)
    dense = np.zeros((k, v.shape[1]), dtype=v.dtype)
    mask = np.zeros((k, v.shape[1]), dtype=bool)
    dense[rows, cols] = v
    mask[rows, cols] = True
    return dense, mask


def sparse_matmul_tile(values, tags, s_fmt, moving, m_fmt, p) -> np.ndarray:
    """The sparse matmul of the compressed stationary tile (``values``, ``tags`` of pattern
    ``p``, ``s_fmt``) and the dense K x F ``moving`` tile (``m_fmt``): fp32 bits (M, F),
    uint32; ``out[m, f] = s`` over the kept rows of column m in increasing K (the module's
    text)."""
    fs = _input_format(s_fmt, "s_fmt")
    fm = _input_format(m_fmt, "m_fmt")
    v = _matrix(values, fs, "values")
    mv = _matrix(moving, fm, "moving")
    k = mv.shape[0]
    p = pattern(p)
    if v.shape[0] != p.slots(k):
        raise ValueError(f"values must have {p.slots(k)} rows (the slots of K = {k} in "
                         f"{p.name}), not {v.shape[0]}")
    check_tags(tags, p, k)
    rows = p.group_of_slot(k)[:, None] + np.asarray(tags, np.int64)  # (S, M): K row of a slot
    v32 = to_fp32_bits(v, fs).view(np.float32)
    mv32 = to_fp32_bits(mv, fm).view(np.float32)
    with np.errstate(all="ignore"):
        s = np.zeros((v.shape[1], mv.shape[1]), dtype=np.float32)  # +0.0
        for j in range(v.shape[0]):  # slot j of every column: increasing K per column
            s = s + v32[j][:, None] * mv32[rows[j]]  # products exact; each add RNE
    return np.where(np.isnan(s), np.uint32(FP32_CANONICAL_NAN), s.view(np.uint32))


def pack_words(values, tags) -> np.ndarray:
    """The SBUF words (uint32) of a compressed tile: ``value | tag << TAG_SHIFT``."""
    v = np.asarray(values).astype(np.uint32)
    t = np.asarray(tags).astype(np.uint32)
    if v.shape != t.shape or (t > 15).any():
        raise ValueError(f"tags must be 4-bit and of the values' shape {v.shape}, not "
                         f"{t.shape}")
    return v | (t << np.uint32(TAG_SHIFT))


def unpack_words(words, value_mask: int) -> tuple[np.ndarray, np.ndarray]:
    """``(values, tags)`` of SBUF words: ``words & value_mask`` and their 4 tag bits."""
    w = np.asarray(words, dtype=np.uint32)
    return w & np.uint32(value_mask), (w >> np.uint32(TAG_SHIFT)) & np.uint32(0xF)


def moving_layout(moving, p) -> np.ndarray:
    """A dense K x F moving tile as the core's sparse MATMUL reads it from SBUF:
    ``ceil(K / R)`` partitions (R = :attr:`Pattern.ratio`) of ``F · R`` words, row k of the
    tile in partition ``k // R``, word ``f · R + k % R`` (rows past K: 0). One beat of the
    multiplication reads R consecutive words of every partition."""
    r = pattern(p).ratio
    mv = np.asarray(moving)
    k, f = mv.shape
    rows = -(-k // r)
    padded = np.zeros((rows * r, f), dtype=mv.dtype)
    padded[:k] = mv
    return padded.reshape(rows, r, f).transpose(0, 2, 1).reshape(rows, f * r)


def moving_from_layout(words, p, k: int) -> np.ndarray:
    """The K x F moving tile of its SBUF layout (:func:`moving_layout`'s inverse)."""
    r = pattern(p).ratio
    w = np.asarray(words)
    rows, fr = w.shape
    if fr % r or rows != -(-k // r):
        raise ValueError(f"a sparse moving tile of K = {k} is {-(-k // r)} partitions of "
                         f"F x {r} words, not {w.shape}")
    return w.reshape(rows, fr // r, r).transpose(0, 2, 1).reshape(rows * r, fr // r)[:k]


def magnitude_mask(tile, fmt, p) -> np.ndarray:
    """The mask that keeps, in each group of each column of the K x M ``tile`` (bits of
    ``fmt``), its ``min(n, rows)`` largest magnitudes (NaN largest; ties to the lower row):
    magnitude pruning, the usual way to make a dense matrix n:m sparse."""
    p = pattern(p)
    f = _input_format(fmt, "fmt")
    t = _matrix(tile, f, "tile")
    with np.errstate(invalid="ignore"):  # NaN bit patterns (signalling ones too)
        mag = np.abs(to_fp32_bits(t, f).view(np.float32).astype(np.float64))
    mag[np.isnan(mag)] = np.inf
    mask = np.zeros(t.shape, dtype=bool)
    for g0, rows, slots in p.groups(t.shape[0]):
        order = np.argsort(-mag[g0:g0 + rows], axis=0, kind="stable")[:slots]
        np.put_along_axis(mask[g0:g0 + rows], order, True, axis=0)
    return mask


def run_sparse_gemm(a_bits, a_fmt, mask, b_bits, b_fmt, p, *, n: int, banks: int,
                    bank_words: int) -> np.ndarray:
    """``C = A.T @ B`` of the n:m-sparse A (K x M bits of ``a_fmt`` keeping ``mask``) as fp32
    bits (M, F): ``golden.tensor_engine.gemm_schedule`` with k-tiles of R·n rows (R = m / n;
    ``n`` a multiple of the pattern's n, so that tiles start on groups), each k-tile's
    compressed tile by :func:`compress` and its sum by the tensor engine model's sparse path;
    over k-tiles ``((s_0 + s_1) + s_2) + ...`` as a dense GEMM adds them."""
    from .tensor_engine import TensorEngineModel, gemm_schedule, run_schedule

    p = pattern(p)
    if n % p.n:
        raise ValueError(f"n must be a multiple of {p.n} for {p.name} (k-tiles start on "
                         f"groups), not {n}")
    fa, fb = _input_format(a_fmt, "a_fmt"), _input_format(b_fmt, "b_fmt")
    a, b = _matrix(a_bits, fa, "a_bits"), _matrix(b_bits, fb, "b_bits")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"a_bits and b_bits must have the same K, got {a.shape} and {b.shape}")
    (k, m), f = a.shape, b.shape[1]
    mask = np.asarray(mask)
    te = TensorEngineModel(n, banks, bank_words)

    def load(cmd) -> None:
        v, t = compress(a[cmd.k0:cmd.k1, cmd.m0:cmd.m1], fa,
                        mask[cmd.k0:cmd.k1, cmd.m0:cmd.m1], p)
        te.load_stationary_sparse(v, t, fa, p, cmd.k1 - cmd.k0)

    rounds = gemm_schedule(m, k, f, n=n, banks=banks, bank_words=bank_words,
                           k_tile=p.ratio * n)
    return run_schedule(rounds, te, load, b, fb, m)
