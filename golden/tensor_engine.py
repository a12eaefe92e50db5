"""Tensor engine: one MATMUL tile, the PSUM it writes, and a tiled GEMM on top of it.

Contract (docs/contract.md §1, §2, §4). The engine is an N x N weight-stationary array in
front of a PSUM of N partitions x B banks x W fp32 words (all zero after reset).

* ``LoadStationary(tile, fmt)`` - ``tile`` is K x M raw bit patterns of ``fmt`` (one of
  :data:`golden.formats.INPUT_FORMATS`), 1 <= K, M <= N. The array holds it padded to N x N
  with +0.0 (rows >= K and columns >= M are the bit pattern 0).
* ``MultiplyMoving(moving, fmt, bank, addr, accumulate)`` - ``moving`` is K x F raw bits of
  ``fmt`` (which may differ from the stationary tile's), K equal to the last loaded tile's,
  F >= 1, ``addr + F <= W``, ``0 <= bank < B``. For every moving column f and stationary column
  m < M the array forms ``s = +0.0; for k in 0..N-1: s = s + stat[k, m] * mov[k, f]`` with
  :func:`golden.fp32.widen_mul` products and :func:`golden.fp32.fp32_add` sums, and PSUM
  partition m, word ``addr + f`` of ``bank`` becomes ``s`` (overwrite) or ``p + s`` with the old
  value ``p`` as the left operand (accumulate). Partitions m >= M are not written. Any number
  of MultiplyMoving commands may follow one LoadStationary.

The padded rows k >= K add +0 * (+0) = +0 to ``s``; ``s`` starts at +0 and an RNE sum is -0
only if both operands are -0, so ``s`` is never -0 and ``s + (+0) = s`` bit for bit (NaN
included: it is canonical already). Hence the N-term column sum equals the contract's K-term
sum, which is what :func:`matmul_tile` computes; :class:`TensorEngineModel` computes the
padded N-term form, as the hardware does, and the tests check the two agree.

This module is numpy + ml_dtypes only.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np

from .formats import FP32_CANONICAL_NAN, INPUT_FORMATS, as_bits, get_format, to_fp32_bits
from .fp32 import fp32_add

__all__ = [
    "matmul_tile",
    "TensorEngineModel",
    "LoadStationary",
    "MultiplyMoving",
    "OutputBlock",
    "Round",
    "gemm_schedule",
    "run_gemm",
    "run_schedule",
]


def _input_format(fmt, param: str):
    f = get_format(fmt, param)
    if f.name not in INPUT_FORMATS:
        raise ValueError(f"{param} must be one of {list(INPUT_FORMATS)}, not {f.name!r}")
    return f


def _matrix(bits, fmt, param: str) -> np.ndarray:
    b = as_bits(bits, fmt, param)
    if b.ndim != 2 or 0 in b.shape:
        raise ValueError(f"{param} must be a non-empty 2-D array, got shape {b.shape}")
    return b


def _int(value, param: str, lo: int, hi: int | None = None) -> int:
    """``value`` as an int in ``[lo, hi]`` (``hi`` None: unbounded), else ValueError."""
    try:
        v = operator.index(value)
    except TypeError:
        raise ValueError(f"{param} must be an integer, not {value!r}") from None
    if v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{param} must be {rng}, not {v}")
    return v


def matmul_tile(stationary, s_fmt, moving, m_fmt) -> np.ndarray:
    """``stationary.T @ moving`` in the contract's order: fp32 bits of shape (M, F), uint32.

    ``stationary`` is K x M bit patterns of ``s_fmt``, ``moving`` K x F bit patterns of
    ``m_fmt`` (formats may differ). ``out[m, f]`` is ``s = +0.0; for k in 0..K-1:
    s = fp32_add(s, widen_mul(stationary[k, m], s_fmt, moving[k, f], m_fmt))``, computed for
    all (m, f) at once, one k (PE row) at a time. NaNs come out as 0x7FC00000.
    """
    fs = _input_format(s_fmt, "s_fmt")
    fm = _input_format(m_fmt, "m_fmt")
    st = _matrix(stationary, fs, "stationary")
    mv = _matrix(moving, fm, "moving")
    if st.shape[0] != mv.shape[0]:
        raise ValueError(f"stationary and moving must have the same K (rows), got shapes "
                         f"{st.shape} and {mv.shape}")
    # The widening is exact and numpy's float32 multiply and add are IEEE binary32 with RNE
    # (fp32_mul and fp32_add are they, plus the canonical NaN): the products of every k at
    # once, then the sums one k at a time in float32. A NaN stays a NaN through every later
    # add, so making it canonical once at the end gives each add's canonical NaN.
    st32 = to_fp32_bits(st, fs).view(np.float32)
    mv32 = to_fp32_bits(mv, fm).view(np.float32)
    with np.errstate(all="ignore"):
        products = st32[:, :, None] * mv32[:, None, :]  # (K, M, F)
        s = np.zeros(products.shape[1:], dtype=np.float32)  # +0.0
        for p in products:
            s = s + p
    return np.where(np.isnan(s), np.uint32(FP32_CANONICAL_NAN), s.view(np.uint32))


class TensorEngineModel:
    """The tensor engine and its PSUM, command by command (see the module docstring).

    Attributes: ``n``, ``banks``, ``bank_words``; ``psum`` - uint32 fp32 bits of shape
    ``(n, banks, bank_words)``, zero after construction; ``stationary`` - the loaded tile
    padded to ``(n, n)`` in its format's unsigned dtype (``None`` before the first
    :meth:`load_stationary`), with ``stationary_fmt`` (a format name) and ``stationary_shape``
    (K, M). Bad arguments raise :class:`ValueError` naming the argument (bit-pattern arrays of
    a non-integer dtype raise :class:`TypeError`, as :func:`golden.formats.as_bits` does).
    """

    def __init__(self, n: int, banks: int, bank_words: int):
        self.n = _int(n, "n", 1)
        self.banks = _int(banks, "banks", 1)
        self.bank_words = _int(bank_words, "bank_words", 1)
        self.psum = np.zeros((self.n, self.banks, self.bank_words), dtype=np.uint32)
        self.stationary: np.ndarray | None = None
        self.stationary_fmt: str | None = None
        self.stationary_shape: tuple[int, int] | None = None
        #: ``(values, tags, pattern)`` of a sparse stationary tile (``golden.sparse``), or
        #: None when the loaded tile is dense.
        self.stationary_sparse: tuple | None = None

    def load_stationary(self, tile, fmt) -> None:
        """Load a K x M tile of ``fmt`` bit patterns (1 <= K, M <= n), padded with +0."""
        f = _input_format(fmt, "fmt")
        t = _matrix(tile, f, "tile")
        if t.shape[0] > self.n or t.shape[1] > self.n:
            raise ValueError(f"tile must be at most {self.n} x {self.n} (K x M), got {t.shape}")
        padded = np.zeros((self.n, self.n), dtype=f.uint_dtype)
        padded[: t.shape[0], : t.shape[1]] = t
        self.stationary, self.stationary_fmt, self.stationary_shape = padded, f.name, t.shape
        self.stationary_sparse = None

    def forget(self) -> None:
        """No stationary tile (after a reset): a multiplication needs a new load."""
        self.stationary = self.stationary_fmt = self.stationary_shape = None
        self.stationary_sparse = None

    def load_stationary_sparse(self, values, tags, fmt, pattern, k: int) -> None:
        """Load a compressed tile (``golden.sparse``): S x M ``values`` of ``fmt`` and their
        ``tags`` in ``pattern`` for K = ``k`` rows (S = the pattern's slots of K, 1 <= S, M <=
        n). Bad tags raise ValueError (``golden.sparse.check_tags``) and leave no tile loaded
        (as the hardware, which finds them while the tile loads)."""
        from . import sparse

        f = _input_format(fmt, "fmt")
        v = _matrix(values, f, "values")
        p = sparse.pattern(pattern)
        k = _int(k, "k", 1)
        if v.shape[0] != p.slots(k) or v.shape[0] > self.n or not 1 <= v.shape[1] <= self.n:
            raise ValueError(f"values must be S x M with S = {p.slots(k)} (the slots of K = "
                             f"{k} in {p.name}) and S, M at most {self.n}, got {v.shape}")
        try:
            sparse.check_tags(tags, p, k)
        except ValueError:
            self.forget()
            raise
        self.stationary, self.stationary_fmt = None, f.name
        self.stationary_shape = (k, v.shape[1])
        self.stationary_sparse = (v.copy(), np.asarray(tags, np.uint8).copy(), p)

    def multiply_moving(self, moving, fmt, bank: int, addr: int, accumulate: bool) -> None:
        """Multiply the loaded tile by K x F ``moving`` bits of ``fmt`` into PSUM ``bank``,
        words ``addr .. addr + F - 1`` of partitions 0..M-1 (overwrite or ``p = p + s``)."""
        if self.stationary_shape is None:
            raise ValueError("moving: multiply_moving before any load_stationary "
                             "(no stationary tile)")
        f = _input_format(fmt, "fmt")
        mv = _matrix(moving, f, "moving")
        k, m = self.stationary_shape
        if mv.shape[0] != k:
            raise ValueError(f"moving must have K = {k} rows (the stationary tile's), "
                             f"got shape {mv.shape}")
        bank = _int(bank, "bank", 0, self.banks - 1)
        addr = _int(addr, "addr", 0, self.bank_words - 1)
        width = mv.shape[1]
        if addr + width > self.bank_words:
            raise ValueError(f"moving has F = {width} columns but addr + F = {addr + width} "
                             f"exceeds bank_words = {self.bank_words}")
        if not isinstance(accumulate, bool | np.bool_) and accumulate not in (0, 1):
            raise ValueError(f"accumulate must be a bool, not {accumulate!r}")
        if self.stationary_sparse is not None:
            from .sparse import sparse_matmul_tile

            values, tags, p = self.stationary_sparse
            s = sparse_matmul_tile(values, tags, self.stationary_fmt, mv, f, p)
        else:
            padded = np.zeros((self.n, width), dtype=f.uint_dtype)
            padded[:k] = mv
            s = matmul_tile(self.stationary, self.stationary_fmt, padded, f)[:m]  # N-term
        view = self.psum[:m, bank, addr : addr + width]
        view[...] = fp32_add(view, s) if accumulate else s

    def drain(self, bank: int, addr: int, count: int) -> np.ndarray:
        """A copy of PSUM words ``addr .. addr + count - 1`` of ``bank``, shape (n, count)."""
        bank = _int(bank, "bank", 0, self.banks - 1)
        addr = _int(addr, "addr", 0, self.bank_words - 1)
        count = _int(count, "count", 1, self.bank_words - addr)
        return self.psum[:, bank, addr : addr + count].copy()


# --- tiled GEMM --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadStationary:
    """Load ``A[k0:k1, m0:m1]`` as the stationary tile."""

    k0: int
    k1: int
    m0: int
    m1: int


@dataclass(frozen=True)
class MultiplyMoving:
    """Multiply by ``B[k0:k1, f0:f1]`` into PSUM ``bank`` at word ``addr``."""

    k0: int
    k1: int
    f0: int
    f1: int
    bank: int
    addr: int
    accumulate: bool


@dataclass(frozen=True)
class OutputBlock:
    """After its round, PSUM partitions ``0 .. m1-m0-1`` of ``bank``, words
    ``addr .. addr+f1-f0-1`` hold ``C[m0:m1, f0:f1]``."""

    bank: int
    addr: int
    m0: int
    m1: int
    f0: int
    f1: int


@dataclass
class Round:
    """Commands run back to back; ``blocks`` are drained from PSUM by the host once they are
    written (while the next round computes, when rounds take turns on PSUM's halves)."""

    commands: list[LoadStationary | MultiplyMoving] = field(default_factory=list)
    blocks: list[OutputBlock] = field(default_factory=list)


def _tiles(size: int, step: int) -> list[tuple[int, int]]:
    return [(i, min(i + step, size)) for i in range(0, size, step)]


def gemm_schedule(m: int, k: int, f: int, *, n: int, banks: int,
                  bank_words: int, k_tile: int | None = None) -> list[Round]:
    """Command schedule of ``C = A.T @ B`` (A: k x m, B: k x f, C: m x f) on an n x n array.

    Tiles: m-tiles of A's columns ``[i*n, min((i+1)*n, m))``, k-tiles of rows
    ``[j*t, min((j+1)*t, k))`` with ``t = k_tile`` (default n; a sparse GEMM's R·n rows, whose
    compressed tile has n rows), f-tiles of B's columns of width ``bank_words`` (the last one
    narrower). Each f-tile owns one whole PSUM bank (``addr = 0``) for the round.

    PSUM: when all of C fits (m-tiles x f-tiles <= ``banks``) or there is one bank, every round
    may use all the banks. Otherwise the banks are cut into halves (banks ``0 .. h-1`` and
    ``h .. banks-1``, ``h = banks // 2``) and rounds take turns, the first on the lower half:
    round r+1 writes no bank round r is drained from, so the host drains round r while round
    r+1 computes (PSUM ping-pong), and a round needs its banks only once the round before the
    previous one is drained.

    For each m-tile in increasing order, its f-tiles are cut into groups of at most ``g``
    consecutive f-tiles (``g = banks``, or ``h`` with ping-pong; a single group when they fit).
    Each group takes as many consecutive banks of its round's share as it has f-tiles; if they
    are not all free in the current round a new :class:`Round` starts. Then, for each k-tile
    in increasing k: one ``LoadStationary(k-tile, m-tile)`` followed by one
    ``MultiplyMoving(k-tile, f-tile, bank, 0, accumulate)`` per f-tile of the group, in
    increasing f, with ``accumulate`` False for the first k-tile and True for the others. The
    group's f-tiles become the round's :class:`OutputBlock`s. So when f needs more than ``g``
    banks, f is split across rounds and the m-tile's k-loop is repeated per group.

    Order of additions: each output element is ``((s_0 + s_1) + s_2) + ...`` over k-tiles in
    increasing k, where ``s_j`` is that k-tile's contract-order column sum (starting from +0,
    PE row order) and ``s_0`` overwrites PSUM. With k <= n this is exactly the contract's
    single-MATMUL sum. Neither the banks nor the rounds change it.
    """
    m = _int(m, "m", 1)
    k = _int(k, "k", 1)
    f = _int(f, "f", 1)
    n = _int(n, "n", 1)
    banks = _int(banks, "banks", 1)
    bank_words = _int(bank_words, "bank_words", 1)
    k_tiles = _tiles(k, n if k_tile is None else _int(k_tile, "k_tile", 1))
    f_tiles = _tiles(f, bank_words)
    m_tiles = _tiles(m, n)
    if banks == 1 or len(m_tiles) * len(f_tiles) <= banks:
        shares = [(0, banks)]  # (first bank, banks) of every round
    else:
        half = banks // 2
        shares = [(0, half), (half, banks - half)]
    group_size = min(size for _, size in shares)
    rounds: list[Round] = [Round()]
    used = 0  # banks taken in the current round
    for m0, m1 in m_tiles:
        for g in range(0, len(f_tiles), group_size):
            group = f_tiles[g : g + group_size]
            first, size = shares[(len(rounds) - 1) % len(shares)]
            if used + len(group) > size:
                rounds.append(Round())
                used = 0
                first, size = shares[(len(rounds) - 1) % len(shares)]
            cur = rounds[-1]
            bank_of = {ft: first + used + i for i, ft in enumerate(group)}
            used += len(group)
            for j, (k0, k1) in enumerate(k_tiles):
                cur.commands.append(LoadStationary(k0, k1, m0, m1))
                for f0, f1 in group:
                    cur.commands.append(MultiplyMoving(k0, k1, f0, f1, bank_of[(f0, f1)], 0,
                                                       j > 0))
            cur.blocks += [OutputBlock(bank_of[(f0, f1)], 0, m0, m1, f0, f1) for f0, f1 in group]
    return rounds


def run_gemm(a_bits, a_fmt, b_bits, b_fmt, *, n: int, banks: int, bank_words: int) -> np.ndarray:
    """``C = A.T @ B`` as fp32 bits (uint32, shape (M, F)) by running :func:`gemm_schedule` on a
    fresh :class:`TensorEngineModel` and draining each round's blocks into C.

    ``a_bits`` is K x M bit patterns of ``a_fmt`` (the stationary operand), ``b_bits`` K x F
    of ``b_fmt`` (the moving one); any sizes >= 1. See :func:`gemm_schedule` for the order of
    additions.
    """
    fa = _input_format(a_fmt, "a_fmt")
    fb = _input_format(b_fmt, "b_fmt")
    a = _matrix(a_bits, fa, "a_bits")
    b = _matrix(b_bits, fb, "b_bits")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"a_bits and b_bits must have the same K (rows), got shapes "
                         f"{a.shape} and {b.shape}")
    (k, m), f = a.shape, b.shape[1]
    te = TensorEngineModel(n, banks, bank_words)
    rounds = gemm_schedule(m, k, f, n=n, banks=banks, bank_words=bank_words)
    return run_schedule(rounds, te, lambda c: te.load_stationary(a[c.k0 : c.k1, c.m0 : c.m1],
                                                                 fa), b, fb, m)


def run_schedule(rounds, te: TensorEngineModel, load, b, b_fmt, m: int) -> np.ndarray:
    """C (fp32 bits, M x F) of a :func:`gemm_schedule` on ``te``: ``load(cmd)`` executes each
    :class:`LoadStationary` (a dense or a compressed tile), the multiplications take their
    rows and columns of ``b`` (bits of ``b_fmt``), each round's blocks are drained into C."""
    c = np.zeros((m, b.shape[1]), dtype=np.uint32)
    for rnd in rounds:
        for cmd in rnd.commands:
            if isinstance(cmd, LoadStationary):
                load(cmd)
            else:
                te.multiply_moving(b[cmd.k0 : cmd.k1, cmd.f0 : cmd.f1], b_fmt, cmd.bank,
                                   cmd.addr, cmd.accumulate)
        for blk in rnd.blocks:
            words = te.drain(blk.bank, blk.addr, blk.f1 - blk.f0)
            c[blk.m0 : blk.m1, blk.f0 : blk.f1] = words[: blk.m1 - blk.m0]
    return c
