"""Ring collectives -- all-reduce, reduce-scatter, all-gather step by step, as the hardware --
and the routed all-to-all and permute.

The contract (docs/contract.md §2 "Collective engine", §4 "Collectives"): P ranks form a ring,
rank r sends to rank (r + 1) mod P and receives from rank (r − 1) mod P. Each rank holds a
buffer of n fp32 words; the hardware moves them in *beats* (rows) of ``link_width`` (W) words.

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

**All-to-all and permute** (:func:`route_collective`) are out of place: they read the buffer
(the *source*, unchanged) and write a *destination* region of rows starting at row ``dst``,
which must not meet the source. They move bits and never round (any 32-bit contents). With
b_j the rows of chunk j:

* ALL_TO_ALL: rank j's destination holds P slots of b_j rows each; slot i (rows
  dst + i·b_j .. dst + (i+1)·b_j) receives chunk j of rank i, its words in order (rank j's own
  slot j its own chunk j). Only the chunk's words are written: for the chunk that holds the
  buffer's partial last row, that row's missing lanes are not. The region an all-to-all may
  write, the same on every rank, is :func:`out_rows` = P·⌈B / P⌉ rows from dst (P·b_0).
* PERMUTE by s (1 <= s <= P−1): rank (r + s) mod P's destination rows dst .. dst + B receive
  rank r's whole buffer (its n words; out rows = B).

**Routing** (the hardware's schedule; the results do not depend on it, :func:`route_plan`,
:func:`link_beats`, :func:`route_bound_cycles` describe it). Both ops run on the same
unidirectional ring: every beat carries a tag -- its destination rank, its origin rank,
``last`` (it is the buffer's last row) and ``end`` (an end-of-stream token, no data). A rank
injects its own beats in a fixed order: for ALL_TO_ALL the chunks for destinations r−1, r−2,
..., r+1 (mod P: farthest first), each chunk's rows in order, its own chunk r copied locally
and never sent; for PERMUTE all B rows to destination r+s. Then it injects an ``end`` token,
which travels P−1 hops (every other rank sees it). A beat a rank receives is written to the
slot of its origin if its destination is this rank (in arrival order, which is row order:
every origin's beats to one destination follow one path, first in first out), and forwarded
to r+1 otherwise; a forwarded beat has priority over an injection. A rank is done when its
own beats are out, its local copy written and the P−1 other ranks' ``end`` tokens have
arrived (an origin's token follows all its beats).

**Torus** (:func:`torus_groups`, :func:`torus_schedule`, :func:`run_torus_schedule`). R x C
cores, rank r = i·C + j (row i in 0..R−1, column j in 0..C−1); the row links go
(i, j) -> (i, (j + 1) mod C), the column links (i, j) -> ((i + 1) mod R, j); a ring of P
cores is the 1 x P torus. A COLLECTIVE names its dimension (``dim``,
:class:`~golden.isa.CollectiveDim`) and runs as the ring op or routed op above within one
*sub-ring*: ROW, the C cores of its row (sub-rank j); COLUMN, the R cores of its column
(sub-rank i). A torus collective is a sequence of such sub-ring collectives, the same for
every core, with W the link width and addresses in rows of W words:

* ALL_REDUCE of n words (B = ⌈n / W⌉ rows at ``addr``): (1) REDUCE_SCATTER along the row
  on all n words; (2) ALL_REDUCE along the column on chunk j of that row split
  (:func:`chunk_words` (n, C, W): rows addr + start_j / W .., n_j = end_j − start_j words);
  (3) ALL_GATHER along the row on all n words. A word of chunk j is therefore the column
  ring's sum (order above, over the R cores of column j) of the row ring's sums (over the C
  cores of each row): bits identical on every rank. When chunk j is empty (B < C) the cores
  of column j skip step 2 (their programs are one COLLECTIVE shorter).
* ALL_TO_ALL of n words, n a multiple of R·C·W (B = n / W rows, b = B / (R·C) a
  destination's): (1) ALL_TO_ALL along the column from ``addr`` to ``tmp`` (block i' of rank
  (i, j), its chunks for ranks (i', 0..C−1), goes to slot i of (i', j)); (2..R+1) for
  g = 0..R−1, ALL_TO_ALL along the row of the B/R rows at tmp + g·B/R into dst + g·B/R.
  Block g of (i', j) came from (g, j), and its chunk j'' lands in slot j of (i', j''): rows
  dst + (g·C + j)·b, the source's global rank. So the result is exactly the flat all-to-all
  over the R·C ranks (rank r's chunk k in slot r of rank k), with no transpose.

Everything here works on uint32 bit patterns with numpy; it is the reference the RTL is
compared with, bit for bit, in every word of every rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .fp32 import fp32_add
from .isa import CollectiveDim, CollectiveOp  # the codes: golden/isa.py, one source

__all__ = ["CollectiveOp", "CollectiveDim", "LINK_WIDTHS", "RING_OPS", "ROUTED_OPS", "Step",
           "chunk_beats", "chunk_words", "ring_steps", "run_collective", "ring_all_reduce",
           "ring_reduce_scatter", "ring_all_gather", "check_ranks", "check_link_width",
           "check_shift", "ring_bound_cycles", "out_rows", "route_plan", "link_beats",
           "route_bound_cycles", "all_to_all", "permute", "route_collective", "TORUS_OPS",
           "TorusStep", "torus_groups", "torus_schedule", "run_torus_schedule",
           "torus_all_reduce", "torus_all_to_all", "torus_bound_cycles"]

#: Link widths the hardware is built for: fp32 words per beat.
LINK_WIDTHS = (1, 2, 4)
#: The in-place ops that run the ring schedule (:func:`ring_steps`).
RING_OPS = (CollectiveOp.ALL_REDUCE, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_GATHER)
#: The out-of-place ops that route tagged beats (:func:`route_collective`).
ROUTED_OPS = (CollectiveOp.ALL_TO_ALL, CollectiveOp.PERMUTE)


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


def check_shift(shift, ranks: int) -> int:
    """A PERMUTE's shift: an integer in 1..P−1."""
    check_ranks(ranks)
    if (isinstance(shift, bool) or not isinstance(shift, int | np.integer)
            or not 1 <= shift <= ranks - 1):
        raise ValueError(f"shift must be an integer in 1..{ranks - 1} (ranks - 1), not "
                         f"{shift!r}")
    return int(shift)


def _check_rank(rank, ranks: int) -> int:
    if not isinstance(rank, int | np.integer) or isinstance(rank, bool) or not 0 <= rank < ranks:
        raise ValueError(f"rank must be in 0..{ranks - 1}, not {rank!r}")
    return int(rank)


def _op_among(op, ops: tuple, kind: str, instead: str) -> CollectiveOp:
    op = CollectiveOp(op)
    if op not in ops:
        raise ValueError(f"{op.name} is not a {kind} collective (it {instead})")
    return op


def _ring_op(op) -> CollectiveOp:
    return _op_among(op, RING_OPS, "ring-step", "is routed: route_collective")


def _routed_op(op) -> CollectiveOp:
    return _op_among(op, ROUTED_OPS, "routed", "runs the ring steps: run_collective")


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
    op = _ring_op(op)
    check_ranks(ranks)
    _check_rank(rank, ranks)
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
    op = _ring_op(op)
    bufs = _buffers(buffers)
    ranks, n = len(bufs), bufs[0].size
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


def _bit_patterns(buffers, what: str) -> list[np.ndarray]:
    """uint32 copies of ``buffers``, flat (bit patterns: unsigned integers, else ValueError)."""
    for b in buffers:
        if np.asarray(b).dtype.kind not in "ui":
            raise ValueError(f"{what} must hold fp32 bit patterns (unsigned integers), not "
                             f"{np.asarray(b).dtype}")
    return [np.array(b, dtype=np.uint32, copy=True).reshape(-1) for b in buffers]


def _buffers(buffers, what: str = "buffers") -> list[np.ndarray]:
    """P >= 2 uint32 copies of n >= 1 words each (bit patterns: unsigned integers)."""
    bufs = _bit_patterns(buffers, what)
    check_ranks(len(bufs))
    n = _check_n(bufs[0].size)
    if any(b.size != n for b in bufs):
        raise ValueError(f"{what}: every rank's must have the same length, got "
                         f"{[b.size for b in bufs]}")
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
    op = _ring_op(op)
    check_ranks(ranks)
    check_link_width(link_width)
    phases = 2 if op == CollectiveOp.ALL_REDUCE else 1
    return phases * (ranks - 1) / ranks * n / link_width


# --- all-to-all and permute ----------------------------------------------------------------


def _shift_for(op: CollectiveOp, shift, ranks: int) -> int:
    """PERMUTE: the checked shift; ALL_TO_ALL: 0 (its shift is ignored)."""
    return check_shift(shift, ranks) if op == CollectiveOp.PERMUTE else 0


def out_rows(op, n: int, ranks: int, link_width: int = 1) -> int:
    """The rows from ``dst`` a routed op may write on a rank of n words, the same on every
    rank (commands are checked against it): P·⌈B / P⌉ for ALL_TO_ALL (P slots of the largest
    chunk), B for PERMUTE (B = ⌈n / W⌉)."""
    op = _routed_op(op)
    n, ranks, w = _check_n(n), check_ranks(ranks), check_link_width(link_width)
    beats = -(-n // w)
    return ranks * -(-beats // ranks) if op == CollectiveOp.ALL_TO_ALL else beats


def route_plan(op, ranks: int, rank: int, shift: int = 0) -> list[int]:
    """The destination ranks whose beats ``rank`` injects, in order: ALL_TO_ALL
    [r−1, r−2, ..., r+1] (mod P, farthest first; its own chunk is copied locally), PERMUTE
    [(r + shift) mod P]. Each destination's rows go out in row order, then an ``end`` token."""
    op = _routed_op(op)
    ranks = check_ranks(ranks)
    rank = _check_rank(rank, ranks)
    if op == CollectiveOp.PERMUTE:
        return [(rank + check_shift(shift, ranks)) % ranks]
    return [(rank - k) % ranks for k in range(1, ranks)]


def _flows(op: CollectiveOp, n: int, ranks: int, link_width: int, shift: int):
    """(origin, destination, rows) of every beat stream the op sends over the ring."""
    bounds = chunk_beats(-(-n // link_width), ranks)
    for o in range(ranks):
        for d in route_plan(op, ranks, o, shift):
            rows = (bounds[d + 1] - bounds[d] if op == CollectiveOp.ALL_TO_ALL
                    else bounds[-1])
            yield o, d, rows


def link_beats(op, n: int, ranks: int, link_width: int = 1, shift: int = 0) -> list[int]:
    """The data beats (rows) crossing each link r -> r+1 (a list of P; ``end`` tokens not
    counted): a stream of b rows from o to d crosses link r iff (r − o) mod P < (d − o) mod P."""
    op = _routed_op(op)
    n, ranks, w = _check_n(n), check_ranks(ranks), check_link_width(link_width)
    shift = _shift_for(op, shift, ranks)
    beats = [0] * ranks
    for o, d, rows in _flows(op, n, ranks, w, shift):
        for k in range((d - o) % ranks):
            beats[(o + k) % ranks] += rows
    return beats


def route_bound_cycles(op, n: int, ranks: int, link_width: int = 1, shift: int = 0) -> float:
    """The bandwidth bound in cycles of a routed op on the unidirectional ring: one row per
    cycle on each link and into each rank's write port, so the largest of
    :func:`link_beats` and of the rows a rank writes (ALL_TO_ALL P·b_j, its own slot
    included; PERMUTE B).

    Derivation for P | B (b = B / P rows a chunk): an all-to-all stream at distance
    k = (d − o) mod P crosses k links; every origin sends one stream at each k = 1..P−1, so
    the links carry P·b·(1 + ... + P−1) = b·P²(P−1)/2 rows in all and, by symmetry, each
    b·P(P−1)/2 = (P−1)/2 · B; each rank writes P·b = B rows. So all-to-all takes
    max((P−1)/2, 1)·B: B for P = 2 and 3 (P = 2: the write port, which also writes the own
    slot, binds), 1.5·B for P = 4, 3.5·B for P = 8. A permute by s: P streams of B rows, each
    crossing s links, s·B on every link, B written: max(s, 1)·B = s·B. (For P ∤ B the counts
    are exact, not the formula.)"""
    op = _routed_op(op)
    n, ranks, w = _check_n(n), check_ranks(ranks), check_link_width(link_width)
    shift = _shift_for(op, shift, ranks)
    bounds = chunk_beats(-(-n // w), ranks)
    if op == CollectiveOp.ALL_TO_ALL:
        writes = max(ranks * (bounds[j + 1] - bounds[j]) for j in range(ranks))
    else:
        writes = bounds[-1]
    return float(max(max(link_beats(op, n, ranks, w, shift)), writes))


def all_to_all(buffers, link_width: int = 1) -> list[list[np.ndarray]]:
    """``out[j][i]``: chunk j (:func:`chunk_words`) of rank i's buffer, a copy: what rank j's
    destination slot i receives."""
    bufs = _buffers(buffers)
    ranks, n = len(bufs), bufs[0].size
    bounds = chunk_words(n, ranks, link_width)
    return [[bufs[i][bounds[j]:bounds[j + 1]].copy() for i in range(ranks)]
            for j in range(ranks)]


def permute(buffers, shift: int) -> list[np.ndarray]:
    """``out[(r + shift) mod P]``: rank r's buffer (copies)."""
    bufs = _buffers(buffers)
    ranks = len(bufs)
    shift = check_shift(shift, ranks)
    return [bufs[(j - shift) % ranks] for j in range(ranks)]


def route_collective(op, src, dst, link_width: int = 1, shift: int = 0) -> list[np.ndarray]:
    """Run a routed op (ALL_TO_ALL or PERMUTE) on the ranks' sources ``src`` (P uint32
    arrays of n words) into their destinations ``dst`` (P uint32 arrays of D >= :func:`out_rows`
    · W words each: word i is row i // W, lane i % W of the region from row ``dst``; their
    previous contents). Returns new destination arrays, each its input with exactly the words
    the op writes replaced (the inputs are not modified)."""
    op = _routed_op(op)
    bufs = _buffers(src, "src")
    ranks, n = len(bufs), bufs[0].size
    w = check_link_width(link_width)
    shift = _shift_for(op, shift, ranks)
    outs = _bit_patterns(dst, "dst")
    if len(outs) != ranks:
        raise ValueError(f"dst: one region per rank ({ranks}), not {len(outs)}")
    need = out_rows(op, n, ranks, w) * w
    if any(b.size < need for b in outs):
        raise ValueError(f"dst: every rank's region must hold {need} words ({need // w} rows "
                         f"of {w}), got {[b.size for b in outs]}")
    if op == CollectiveOp.PERMUTE:
        for j, buf in enumerate(permute(bufs, shift)):
            outs[j][:n] = buf
        return outs
    beats = chunk_beats(-(-n // w), ranks)
    for j, slots in enumerate(all_to_all(bufs, w)):
        slot = (beats[j + 1] - beats[j]) * w  # words of a slot: b_j rows
        for i, words in enumerate(slots):
            outs[j][i * slot:i * slot + words.size] = words
    return outs


# --- the 2-D torus -------------------------------------------------------------------------

#: The collectives a torus runs as a schedule of sub-ring collectives (:func:`torus_schedule`).
TORUS_OPS = (CollectiveOp.ALL_REDUCE, CollectiveOp.ALL_TO_ALL)


@dataclass(frozen=True)
class TorusStep:
    """One sub-ring collective of a torus schedule, as a core issues it: ``op`` along ``dim``
    on the ``words`` (n) words from row ``addr``; a routed op writes the rows from ``dst``
    (a ring op works in place: its ``dst`` is its ``addr``). A row holds W = link_width words
    (in the ISS, one SBUF word of the W partitions: ``sbuf_addr`` and ``dst_addr`` are rows,
    ``cols`` = words / W)."""

    op: CollectiveOp
    dim: CollectiveDim
    addr: int
    words: int
    dst: int


def _check_int(value, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, not {value!r}")
    return int(value)


def _check_torus(rows, cols) -> tuple[int, int]:
    """R >= 1 rows of C >= 2 cores (R = 1: a ring)."""
    return _check_int(rows, "rows", 1), _check_int(cols, "cols", 2)


def _check_dim(dim) -> CollectiveDim:
    if not isinstance(dim, bool) and isinstance(dim, int | np.integer) and dim in (0, 1):
        return CollectiveDim(int(dim))
    raise ValueError(f"dim must be a CollectiveDim (0 ROW, 1 COLUMN), not {dim!r}")


def torus_groups(rows: int, cols: int, dim) -> list[list[int]]:
    """The sub-rings of an R x C torus along ``dim``, each the list of its global ranks in
    sub-rank (ring) order: ROW, R rows ``[i·C + j for j in 0..C−1]``; COLUMN (R >= 2),
    C columns ``[i·C + j for i in 0..R−1]``."""
    rows, cols = _check_torus(rows, cols)
    dim = _check_dim(dim)
    if dim == CollectiveDim.ROW:
        return [[i * cols + j for j in range(cols)] for i in range(rows)]
    if rows < 2:
        raise ValueError(f"dim COLUMN needs a torus: rows must be >= 2, not {rows}")
    return [[i * cols + j for i in range(rows)] for j in range(cols)]


def _check_apart(a_name: str, a: int, a_rows: int, b_name: str, b: int, b_rows: int) -> None:
    """Rows a .. a + a_rows − 1 and b .. b + b_rows − 1 must not meet."""
    if a < b + b_rows and b < a + a_rows:
        raise ValueError(f"{a_name}'s rows {a}..{a + a_rows - 1} must not meet {b_name}'s "
                         f"{b}..{b + b_rows - 1}")


def torus_schedule(op, words: int, rows: int, cols: int, link_width: int = 1, *,
                   addr: int = 0, dst: int = 0, tmp: int = 0) -> list[list[TorusStep]]:
    """The sub-ring collectives every rank of an R x C torus issues for ``op`` on its
    ``words`` (n) words at row ``addr``, in program order: one list per rank (index = global
    rank i·C + j). Addresses are rows of W = ``link_width`` words.

    * ALL_REDUCE (in place; ``dst`` and ``tmp`` unused): REDUCE_SCATTER along ROW on
      (addr, n); ALL_REDUCE along COLUMN on rank (i, j)'s chunk j of that row split
      (:func:`chunk_words` (n, C, W): from row addr + start_j / W, n_j = end_j − start_j
      words); ALL_GATHER along ROW on (addr, n). If chunk j is empty (B = ⌈n / W⌉ < C, for
      j >= B) the ranks of column j have no COLUMN step: their lists are one shorter.
    * ALL_TO_ALL (n a multiple of R·C·W, B = n / W rows): ALL_TO_ALL along COLUMN from
      (addr, n) to ``tmp``, then for g = 0..R−1 ALL_TO_ALL along ROW of (tmp + g·B/R, n/R)
      into dst + g·B/R. The B rows at ``tmp`` must meet neither the B rows at ``addr`` nor
      the B rows at ``dst`` (``dst`` may be ``addr``). The result is the flat
      :func:`all_to_all` over the R·C ranks (see the module docstring).

    On R = 1 (a ring) either op is the ring's own: one ROW step (ALL_TO_ALL from addr to dst,
    n still a multiple of C·W). The other ops raise :class:`ValueError`: a torus runs them
    only as a dim's sub-ring op."""
    op = CollectiveOp(op)
    if op not in TORUS_OPS:
        raise ValueError(f"{op.name}: the torus runs ALL_REDUCE and ALL_TO_ALL; use a dim's "
                         f"sub-ring op for the others")
    n = _check_int(words, "words", 1)
    rows, cols = _check_torus(rows, cols)
    w = check_link_width(link_width)
    addr, dst, tmp = (_check_int(v, k, 0) for k, v in (("addr", addr), ("dst", dst),
                                                        ("tmp", tmp)))
    ranks, beats = rows * cols, -(-n // w)
    row, col = CollectiveDim.ROW, CollectiveDim.COLUMN
    if op == CollectiveOp.ALL_REDUCE:
        if rows == 1:
            return [[TorusStep(op, row, addr, n, addr)] for _ in range(ranks)]
        bounds = chunk_words(n, cols, w)
        out = []
        for r in range(ranks):
            lo, hi = bounds[r % cols], bounds[r % cols + 1]
            steps = [TorusStep(CollectiveOp.REDUCE_SCATTER, row, addr, n, addr)]
            if hi > lo:  # lo is a whole number of rows: only the buffer's last row is partial
                steps.append(TorusStep(op, col, addr + lo // w, hi - lo, addr + lo // w))
            steps.append(TorusStep(CollectiveOp.ALL_GATHER, row, addr, n, addr))
            out.append(steps)
        return out
    if n % (ranks * w):
        raise ValueError(f"words must be a multiple of rows·cols·link_width = {ranks * w} for "
                         f"a torus all-to-all, not {n}")
    if rows == 1:
        _check_apart("dst", dst, beats, "addr", addr, beats)
        return [[TorusStep(op, row, addr, n, dst)] for _ in range(ranks)]
    _check_apart("tmp", tmp, beats, "addr", addr, beats)
    _check_apart("tmp", tmp, beats, "dst", dst, beats)
    block = beats // rows
    steps = [TorusStep(op, col, addr, n, tmp)]
    steps += [TorusStep(op, row, tmp + g * block, n // rows, dst + g * block)
              for g in range(rows)]
    return [list(steps) for _ in range(ranks)]


def _torus_rounds(schedule, rows: int, cols: int) -> list[list[tuple[list[int], list]]]:
    """The order a schedule runs in: each rank runs its steps in order; a sub-ring (a group of
    :func:`torus_groups`) runs a step once each member's next step is along its dim. A round
    is every sub-ring whose members are all ready (they are disjoint), as a list of (group,
    its members' steps in group order). Members must agree on the op and the words, and
    every step must run (else ValueError)."""
    rows, cols = _check_torus(rows, cols)
    ranks = rows * cols
    if len(schedule) != ranks:
        raise ValueError(f"schedule: one list of steps per rank ({ranks} = rows·cols), not "
                         f"{len(schedule)}")
    dims = (CollectiveDim.ROW,) + ((CollectiveDim.COLUMN,) if rows >= 2 else ())
    for r, steps in enumerate(schedule):
        for st in steps:
            if not isinstance(st, TorusStep):
                raise ValueError(f"schedule: rank {r} has {st!r}, not a TorusStep")
            if st.dim not in dims:
                raise ValueError(f"schedule: rank {r} has a step along {st.dim!r}: COLUMN "
                                 f"needs a torus (rows >= 2)")
    groups = [(d, g) for d in dims for g in torus_groups(rows, cols, d)]
    pos, rounds = [0] * ranks, []
    while True:
        waiting = [r for r in range(ranks) if pos[r] < len(schedule[r])]
        if not waiting:
            return rounds
        ready = []
        for d, g in groups:
            if all(pos[r] < len(schedule[r]) and schedule[r][pos[r]].dim == d for r in g):
                steps = [schedule[r][pos[r]] for r in g]
                kinds = {(CollectiveOp(s.op).name, s.words) for s in steps}
                if len(kinds) != 1:
                    raise ValueError(f"the {d.name} sub-ring of ranks {g}: its members' steps "
                                     f"disagree on (op, words): {sorted(kinds)}")
                ready.append((g, steps))
        if not ready:
            at = {r: CollectiveDim(schedule[r][pos[r]].dim).name for r in waiting}
            raise ValueError(f"the schedule deadlocks: no sub-ring has all its members at a "
                             f"step along its dim (rank: dim of its next step) {at}")
        rounds.append(ready)
        for g, _ in ready:
            for r in g:
                pos[r] += 1


def run_torus_schedule(schedule, memories, rows: int, cols: int, link_width: int = 1,
                       shift: int = 0) -> None:
    """Execute ``schedule`` (:func:`torus_schedule`'s form: one list of :class:`TorusStep`
    per rank) on ``memories``, R·C flat uint32 numpy arrays (rank r's memory: rows of W =
    ``link_width`` words, word k of row a at a·W + k), in place.

    Each rank runs its steps in order; a sub-ring (:func:`torus_groups` of the step's dim)
    runs a step once every member has reached a step along that dim, and its members' steps
    must agree on the op and the words (addresses may differ). A ring op runs
    :func:`run_collective` in place on words addr·W .. addr·W + n of each member's memory; a
    routed op :func:`route_collective` (``shift`` for a PERMUTE) from them into the
    :func:`out_rows` (op, n, group size, W) rows from ``dst``, which must not meet the
    source's rows. Everything is checked before anything runs: a :class:`ValueError`
    (mismatched members, a step that can never run, a region past a memory) changes
    nothing."""
    w = check_link_width(link_width)
    rounds = _torus_rounds(schedule, rows, cols)
    mems = list(memories)
    if len(mems) != len(schedule):
        raise ValueError(f"memories: one per rank ({len(schedule)}), not {len(mems)}")
    for m in mems:
        if not isinstance(m, np.ndarray) or m.dtype != np.uint32 or m.ndim != 1:
            raise ValueError("memories must be flat uint32 numpy arrays (changed in place)")
    runs = []
    for ready in rounds:
        for group, steps in ready:
            op, n, size = CollectiveOp(steps[0].op), steps[0].words, len(group)
            _op_among(op, RING_OPS + ROUTED_OPS, "known", "is reserved")
            if op == CollectiveOp.PERMUTE:
                check_shift(shift, size)
            out = out_rows(op, n, size, w) if op in ROUTED_OPS else 0
            for r, st in zip(group, steps, strict=True):
                a = _check_int(st.addr, "addr", 0)
                end = a * w + n if out == 0 else (_check_int(st.dst, "dst", 0) + out) * w
                if a * w + n > mems[r].size or end > mems[r].size:
                    raise ValueError(f"rank {r}: {op.name} along {CollectiveDim(st.dim).name} "
                                     f"reaches word {max(a * w + n, end) - 1} of a memory of "
                                     f"{mems[r].size}")
                if out:
                    _check_apart(f"rank {r}: {op.name}'s destination", st.dst, out,
                                 "its source", a, -(-n // w))
            runs.append((group, steps, op, n, out))
    for group, steps, op, n, out in runs:
        src = [mems[r][st.addr * w:st.addr * w + n] for r, st in zip(group, steps, strict=True)]
        if op in RING_OPS:
            for view, new in zip(src, run_collective(op, src, w), strict=True):
                view[:] = new
            continue
        dst = [mems[r][st.dst * w:(st.dst + out) * w] for r, st in zip(group, steps,
                                                                       strict=True)]
        for view, new in zip(dst, route_collective(op, src, dst, w, shift), strict=True):
            view[:] = new


def _torus_buffers(buffers, rows: int, cols: int) -> list[np.ndarray]:
    bufs = _buffers(buffers)
    rows, cols = _check_torus(rows, cols)
    if len(bufs) != rows * cols:
        raise ValueError(f"buffers: one per rank ({rows * cols} = rows·cols), not {len(bufs)}")
    return bufs


def torus_all_reduce(buffers, rows: int, cols: int, link_width: int = 1) -> list[np.ndarray]:
    """The all-reduce of an R x C torus on ``buffers`` (R·C uint32 arrays of n words, rank
    i·C + j's at index i·C + j): :func:`torus_schedule`'s steps (reduce-scatter along the
    rows, all-reduce of chunk j along column j, all-gather along the rows). Returns new
    arrays; every rank's holds identical bits."""
    bufs = _torus_buffers(buffers, rows, cols)
    sched = torus_schedule(CollectiveOp.ALL_REDUCE, bufs[0].size, rows, cols, link_width)
    run_torus_schedule(sched, bufs, rows, cols, link_width)
    return bufs


def torus_all_to_all(buffers, rows: int, cols: int, link_width: int = 1) -> list[np.ndarray]:
    """The all-to-all of an R x C torus on ``buffers`` (R·C uint32 arrays of n words, n a
    multiple of R·C·W): :func:`torus_schedule`'s steps (along the columns into a scratch
    region, then R all-to-alls along the rows). Returns each rank's destination, n words:
    the flat :func:`all_to_all` over the R·C ranks, slot r (n / (R·C) words) of rank k
    holding chunk k of rank r."""
    bufs = _torus_buffers(buffers, rows, cols)
    n = bufs[0].size
    beats = -(-n // check_link_width(link_width))
    sched = torus_schedule(CollectiveOp.ALL_TO_ALL, n, rows, cols, link_width, addr=0,
                           tmp=beats, dst=2 * beats)
    mems = [np.concatenate([b, np.zeros(2 * n, dtype=np.uint32)]) for b in bufs]
    run_torus_schedule(sched, mems, rows, cols, link_width)
    return [m[2 * n:].copy() for m in mems]


def torus_bound_cycles(op, words: int, rows: int, cols: int, link_width: int = 1) -> float:
    """The bandwidth bound in cycles of :func:`torus_schedule` on nclite's torus: a node has
    one collective engine, which runs one sub-ring collective at a time on one link pair (the
    out and in links of one dimension, one direction each). So the sub-ring collectives of a
    round (:func:`run_torus_schedule`'s order) run side by side on disjoint links, and the
    bound is the sum over the rounds of the largest bound among the round's sub-rings:
    :func:`ring_bound_cycles` for a ring op, :func:`route_bound_cycles` for a routed op, with
    P the sub-ring's size.

    ALL_REDUCE (B = n / W rows, C | B): (C−1)/C·B for the row reduce-scatter, 2(R−1)/R·B/C
    for the column all-reduce of a chunk, (C−1)/C·B for the row all-gather:
    2(C−1)/C·B + 2(R−1)/R·B/C = 2(RC−1)/(RC)·B, the ring's bound over R·C cores (when C ∤ B
    the largest chunk, ⌈B/C⌉ rows, sets the column term). One engine and one link pair per
    node at a time gain the torus nothing in bandwidth, only in steps: 2(C−1) + 2(R−1)
    instead of 2(RC−1), each of which costs the link latency and bookkeeping -- but three
    commands instead of one, each with its setup, so small n gains only where the link
    latency outweighs the extra setups. (A node with two engines running the two halves of
    the buffer in opposite dimension orders on both link directions would divide the bound by
    up to 4: not built.)

    ALL_TO_ALL (n a multiple of R·C·W): the column all-to-all of n words over R, then R row
    all-to-alls of n/R words over C: every word crosses the memory twice (stored and
    forwarded through ``tmp``), and the bound is route_bound(n over R) + R·route_bound(n/R
    over C) = (max((R−1)/2, 1) + max((C−1)/2, 1))·B, against max((RC−1)/2, 1)·B on the flat
    ring of R·C: 2x2 2·B vs 1.5·B (the torus is slower: P = 2's write port binds both
    phases), 2x4 and 4x2 2.5·B vs 3.5·B, 4x4 3·B vs 7.5·B.

    On R = 1 the bound is the ring op's."""
    words = _check_int(words, "words", 1)
    w = check_link_width(link_width)
    beats = -(-words // w)
    sched = torus_schedule(op, words, rows, cols, w, addr=0, tmp=beats, dst=2 * beats)
    total = 0.0
    for ready in _torus_rounds(sched, rows, cols):
        total += max((ring_bound_cycles if st[0].op in RING_OPS else route_bound_cycles)(
            st[0].op, st[0].words, len(g), w) for g, st in ready)
    return total
