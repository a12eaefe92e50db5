"""Ring collectives -- all-reduce, reduce-scatter, all-gather -- step by step, as the hardware.

The contract (docs/contract.md §2 "Collective engine", §4 "Collectives"): P ranks form a ring,
rank r sends to rank (r + 1) mod P and receives from rank (r − 1) mod P. Each rank holds a
buffer of n fp32 words; the hardware moves them in *beats* of ``link_width`` (W) words.

**Chunks.** The buffer's B = ⌈n / W⌉ beats are split into P contiguous chunks: with
q, e = divmod(B, P), chunks 0..e−1 have q + 1 beats and the others q (so sizes differ by at
most one beat when P does not divide B, and a chunk may be empty when B < P). In words,
chunk c is ``[min(W·first_beat_c, n), min(W·end_beat_c, n))``: only the last beat of the
buffer can be partial, and its missing lanes are neither read into a result nor written.
Nothing is padded: every word's result depends only on the P words at its index.

**Steps** (:func:`ring_steps`). In step s every rank sends one chunk and receives another:

* reduce-scatter, s = 0..P−2: send chunk (r − s − 1) mod P, receive chunk (r − s − 2) mod P
  and reduce it in place: ``buf[i] = received[i] + buf[i]`` (received value on the left of
  the fp32 add). After P − 1 steps rank r holds the fully reduced chunk r.
* all-gather, s = 0..P−2: send chunk (r − s) mod P, receive chunk (r − s − 1) mod P and store
  it. Rank r starts with its own chunk r and ends with all P.
* all-reduce: reduce-scatter, then all-gather (2·(P − 1) steps).

What a rank sends in step s ≥ 1 is the chunk it received in step s − 1, so the hardware
streams it on as soon as each beat is reduced (no chunk is stored and forwarded whole).
Element i of chunk c is therefore reduced in ring order starting after its owner:
``((x[c+1] + x[c+2]) + x[c+3]) + … + x[c+P]`` (rank indices mod P, x[c+P] = x[c]); each add
is IEEE binary32 with RNE (:func:`golden.fp32.fp32_add`, canonical NaN 0x7FC00000). The
all-gather copies bits, so every rank ends with identical bits. After a reduce-scatter the
chunks other than a rank's own hold the partial sums the ring left there (deterministic,
compared too); after an all-gather the rank's own chunk is unchanged, NaN payloads included.

Everything here works on uint32 bit patterns with numpy; it is the reference the RTL is
compared with, bit for bit, in every word of every rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .fp32 import fp32_add
from .isa import CollectiveOp  # the operation codes: golden/isa.py, one source

__all__ = ["CollectiveOp", "LINK_WIDTHS", "Step", "chunk_beats", "chunk_words", "ring_steps",
           "run_collective", "ring_all_reduce", "ring_reduce_scatter", "ring_all_gather",
           "check_ranks", "check_link_width", "ring_bound_cycles"]

#: Link widths the hardware is built for: fp32 words per beat.
LINK_WIDTHS = (1, 2, 4)


@dataclass(frozen=True)
class Step:
    send: int  # chunk sent to rank + 1
    recv: int  # chunk received from rank - 1
    reduce: bool  # received + local (True) or store the received words (False)


def check_ranks(ranks) -> int:
    if not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 2:
        raise ValueError(f"ranks must be an integer >= 2, not {ranks!r}")
    return ranks


def check_link_width(link_width) -> int:
    if (isinstance(link_width, bool) or not isinstance(link_width, int | np.integer)
            or link_width not in LINK_WIDTHS):
        raise ValueError(f"link_width must be one of {LINK_WIDTHS}, not {link_width!r}")
    return link_width


def _check_n(n) -> int:
    if not isinstance(n, int | np.integer) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n (words per rank) must be a positive integer, not {n!r}")
    return int(n)


# lab4 begin: schedule
def chunk_beats(beats: int, ranks: int) -> list[int]:
    """Beat boundaries of the P chunks of ``beats`` beats: a list of P + 1 offsets."""
    check_ranks(ranks)
    if not isinstance(beats, int | np.integer) or isinstance(beats, bool) or beats < 0:
        raise ValueError(f"beats must be a non-negative integer, not {beats!r}")
    q, e = divmod(int(beats), ranks)
    bounds = [0]
    for c in range(ranks):
        bounds.append(bounds[-1] + q + (1 if c < e else 0))
    return bounds


def chunk_words(n: int, ranks: int, link_width: int = 1) -> list[int]:
    """Word boundaries of the P chunks of an n-word buffer: a list of P + 1 offsets."""
    n = _check_n(n)
    w = check_link_width(link_width)
    return [min(b * w, n) for b in chunk_beats(-(-n // w), ranks)]


def ring_steps(op, ranks: int, rank: int) -> list[Step]:
    """The steps rank ``rank`` executes for ``op`` (see the module docstring)."""
    op = CollectiveOp(op)
    check_ranks(ranks)
    if not isinstance(rank, int | np.integer) or isinstance(rank, bool) or not 0 <= rank < ranks:
        raise ValueError(f"rank must be in 0..{ranks - 1}, not {rank!r}")
    rs = [Step((rank - s - 1) % ranks, (rank - s - 2) % ranks, True) for s in range(ranks - 1)]
    ag = [Step((rank - s) % ranks, (rank - s - 1) % ranks, False) for s in range(ranks - 1)]
    return {CollectiveOp.ALL_REDUCE: rs + ag, CollectiveOp.REDUCE_SCATTER: rs,
            CollectiveOp.ALL_GATHER: ag}[op]
# lab4 end: schedule


def run_collective(op, buffers, link_width: int = 1) -> list[np.ndarray]:
    """Run ``op`` over the ring on ``buffers`` (one uint32 array of n words per rank).

    Returns the P buffers afterwards (new arrays; the inputs are not modified). Steps run in
    lockstep: in each step every rank sends the chunk as it was before the step (in hardware
    the chunk a rank sends is never the one it is receiving, so this is exact).
    """
    op = CollectiveOp(op)
    for b in buffers:
        if np.asarray(b).dtype.kind not in "ui":
            raise ValueError(f"buffers must hold fp32 bit patterns (unsigned integers), not "
                             f"{np.asarray(b).dtype}")
    bufs = [np.array(b, dtype=np.uint32, copy=True).reshape(-1) for b in buffers]
    ranks = check_ranks(len(bufs))
    n = _check_n(bufs[0].size)
    if any(b.size != n for b in bufs):
        raise ValueError(f"buffers: every rank's must have the same length, got "
                         f"{[b.size for b in bufs]}")
    bounds = chunk_words(n, ranks, link_width)
    steps = [ring_steps(op, ranks, r) for r in range(ranks)]
    for s in range(len(steps[0])):
        sent = [bufs[r][bounds[st.send]:bounds[st.send + 1]].copy()
                for r, st in ((r, steps[r][s]) for r in range(ranks))]
        for r in range(ranks):
            st = steps[r][s]
            incoming = sent[(r - 1) % ranks]
            lo, hi = bounds[st.recv], bounds[st.recv + 1]
            assert incoming.size == hi - lo  # the left neighbour sent the chunk we expect
            bufs[r][lo:hi] = fp32_add(incoming, bufs[r][lo:hi]) if st.reduce else incoming
    return bufs


def ring_all_reduce(buffers, link_width: int = 1) -> list[np.ndarray]:
    """Every rank ends with the ring-order sum of all ranks' buffers (identical bits)."""
    return run_collective(CollectiveOp.ALL_REDUCE, buffers, link_width)


def ring_reduce_scatter(buffers, link_width: int = 1) -> list[np.ndarray]:
    """Rank r ends with the reduced chunk r (:func:`chunk_words`) in place."""
    return run_collective(CollectiveOp.REDUCE_SCATTER, buffers, link_width)


def ring_all_gather(buffers, link_width: int = 1) -> list[np.ndarray]:
    """Rank r contributes its chunk r; every rank ends with all chunks."""
    return run_collective(CollectiveOp.ALL_GATHER, buffers, link_width)


def ring_bound_cycles(op, n: int, ranks: int, link_width: int) -> float:
    """The bandwidth-optimal ring time in cycles: (P − 1)/P · n / W per phase (two phases
    for all-reduce), i.e. 2·(P − 1)/P · n / W for all-reduce."""
    check_ranks(ranks)
    check_link_width(link_width)
    phases = 2 if CollectiveOp(op) == CollectiveOp.ALL_REDUCE else 1
    return phases * (ranks - 1) / ranks * n / link_width
