"""``ncc``: collectives over the ring of cores a kernel runs on (``--cores P``), as the
collective engine runs them (``golden.collective``).

The buffer of a collective is ``link_width`` (W) partitions of the tile, flattened word by
word: element i is partition ``p0 + i % W``, word ``f0 + i // W`` (``golden.iss``); a column of
the tile is one row (link beat) of W words. ``all_reduce``, ``reduce_scatter`` and
``all_gather`` work in place on an SBUF float32 tile. An ``all_reduce`` may take any multiple
of W partitions (one collective per band of W); every element becomes the fp32 sum over the
cores in the ring's order, the same bits on every core. ``reduce_scatter`` and ``all_gather``
take exactly W partitions: the buffer's chunks are ``golden.collective.chunk_words``' (chunk r:
the r-th of P near-equal runs of columns); after a reduce-scatter core r holds the reduced
chunk r, after an all-gather every core holds every core's chunk r at chunk r's place.

``all_to_all(src, dst)`` and ``permute(src, dst, shift)`` copy the SBUF tile ``src`` (W
partitions, any dtype: the words move unchanged) into the tile ``dst`` of the same partitions
and dtype, which must not share a word with it; ``src`` is left as it was. With C columns in
``src`` and b_j the columns of chunk j: after an all-to-all, core j's ``dst`` (W x P·⌈C / P⌉)
holds chunk j of core i at columns i·b_j .. (i + 1)·b_j (``golden.collective.all_to_all``; the
other columns are left as they were); after a permute, core (r + shift) mod P's ``dst``
(W x C) holds core r's ``src``.

Every core must issue the same collectives in the same order, with buffers of the same size
(and a permute the same shift; the ISS raises otherwise: the hardware's outcome is not
defined). The tiles' places may differ from core to core.

**A torus** (a kernel whose ``CONFIG`` sets ``torus_rows`` R: its P cores form an R x P/R
torus, core r = i·C + j in row i, column j): each function above takes ``dim`` -- ``"row"``
(the default; on a ring, the ring) runs it among the C cores of the core's row, ``"column"``
among the R cores of its column, P being that sub-ring's size. ``torus_all_reduce(tile)`` sums
over every core (reduce-scatter along the rows, all-reduce along the columns, all-gather along
the rows: ``golden.collective.torus_schedule``); ``torus_all_to_all(src, tmp, dst)`` is the
all-to-all over every core (``dst`` of core k: chunk k of every core r at columns r·b .. (r +
1)·b, b = C / P) down the columns into ``tmp`` and then along the rows; its C must be a
multiple of P.
"""

from __future__ import annotations

from golden.collective import out_rows, torus_schedule
from golden.isa import FIELDS, CollectiveDim, CollectiveOp, Dtype, Opcode

from .trace import SBUF, KernelError, as_view, current

__all__ = ["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "permute",
           "torus_all_reduce", "torus_all_to_all", "step_fields"]

_MAX_COLS = (1 << dict(FIELDS[Opcode.COLLECTIVE])["cols"]) - 1
_MAX_SHIFT = (1 << dict(FIELDS[Opcode.COLLECTIVE])["shift"]) - 1


def step_fields(step, *, part: int, base: int, link_width: int, shift: int = 0) -> dict:
    """The COLLECTIVE descriptor's fields of one sub-ring step of a torus schedule
    (``golden.collective.TorusStep``: its rows of W words are SBUF words ``base + row`` of
    the W partitions from ``part``)."""
    if step.words % link_width:
        raise ValueError(f"a COLLECTIVE moves whole columns of {link_width} words, not "
                         f"{step.words} words")
    return {"coll_op": int(step.op), "part": part, "rows": link_width,
            "sbuf_addr": base + step.addr, "cols": step.words // link_width,
            "dst_addr": base + step.dst, "shift": shift, "dim": int(step.dim)}


def _dim(k, dim, name: str) -> tuple[CollectiveDim, int]:
    """``dim`` ("row" or "column") and P, the size of that sub-ring of the kernel's cores."""
    if k.ranks < 2:
        raise KernelError(f"{name} needs a ring of cores: run the kernel with --cores P >= 2 "
                          f"(it runs on {k.ranks})")
    names = {"row": CollectiveDim.ROW, "column": CollectiveDim.COLUMN}
    if dim not in names:
        raise KernelError(f"{name}: dim must be 'row' or 'column', not {dim!r}")
    d = names[dim]
    if d == CollectiveDim.COLUMN and k.cfg.torus_rows < 2:
        raise KernelError(f"{name}: dim 'column' needs a torus (CONFIG's torus_rows >= 2)")
    return d, k.cfg.dim_ranks(d)


def _collective(op: CollectiveOp, tile, *, bands: bool, dim: str = "row") -> None:
    k = current()
    v = as_view(tile, "tile")
    name = op.name.lower()
    d, _ = _dim(k, dim, name)
    if v.buffer != SBUF or v.dtype != Dtype.FP32:
        raise KernelError(f"{name} works on an SBUF float32 tile, not a {v.buffer} "
                          f"{v.dtype.golden_name} one")
    w = k.cfg.link_width
    rows, cols = v.shape
    if bands and rows % w:
        raise KernelError(f"{name}: the tile's partitions must be a multiple of the link width "
                          f"{w}, not {rows}")
    if not bands and rows != w:
        raise KernelError(f"{name}: the tile must have exactly the link width's {w} partitions, "
                          f"not {rows}")
    if cols > _MAX_COLS:
        raise KernelError(f"{name}: at most {_MAX_COLS} words a partition, not {cols}")
    for p in range(v.p0, v.p1, w):
        k.emit(Opcode.COLLECTIVE, coll_op=int(op), part=p, rows=w,
               sbuf_addr=v.base.addr + v.f0, cols=cols, dst_addr=0, shift=0, dim=int(d))
    k.wrote(v)


def all_reduce(tile, *, dim: str = "row") -> None:
    """Every element of ``tile`` becomes its sum over all cores of the ring (on a torus, of
    ``dim``'s sub-ring): ring reduce-scatter, then all-gather."""
    _collective(CollectiveOp.ALL_REDUCE, tile, bands=True, dim=dim)


def reduce_scatter(tile, *, dim: str = "row") -> None:
    """Core r's chunk r of ``tile`` becomes the sum of every core's chunk r (the other chunks
    hold the ring's partial sums afterwards); r is the rank in ``dim``'s sub-ring."""
    _collective(CollectiveOp.REDUCE_SCATTER, tile, bands=False, dim=dim)


def all_gather(tile, *, dim: str = "row") -> None:
    """Chunk r of every core's ``tile`` becomes core r's chunk r (r: the rank in ``dim``'s
    sub-ring)."""
    _collective(CollectiveOp.ALL_GATHER, tile, bands=False, dim=dim)


def _routed(op: CollectiveOp, src, dst, shift: int, dim: str = "row") -> None:
    """ALL_TO_ALL / PERMUTE of the SBUF tile ``src`` into ``dst``: checked, then emitted."""
    k = current()
    name = op.name.lower()
    s, d = as_view(src, "src"), as_view(dst, "dst")
    dim_code, P = _dim(k, dim, name)
    for what, v in (("src", s), ("dst", d)):
        if v.buffer != SBUF:
            raise KernelError(f"{name}: {what} must be an SBUF tile, not a {v.buffer} one")
    if d.dtype != s.dtype:
        raise KernelError(f"{name}: dst must have src's dtype ({s.dtype.golden_name}): the "
                          f"words move unchanged, not {d.dtype.golden_name}")
    w = k.cfg.link_width
    rows, cols = s.shape
    if rows != w:
        raise KernelError(f"{name}: src must have exactly the link width's {w} partitions, "
                          f"not {rows}")
    if cols > _MAX_COLS:
        raise KernelError(f"{name}: at most {_MAX_COLS} words a partition, not {cols}")
    if op == CollectiveOp.PERMUTE and (isinstance(shift, bool) or not isinstance(shift, int)
                                       or not 1 <= shift <= min(P - 1, _MAX_SHIFT)):
        raise KernelError(f"{name}: shift must be an integer in 1..{P - 1} (the cores "
                          f"- 1), not {shift!r}")
    want = (w, out_rows(op, rows * cols, P, w))
    if d.shape != want:
        how = (f"P x ceil({cols} / P) = {want[1]} columns for P = {P} cores"
               if op == CollectiveOp.ALL_TO_ALL else f"src's {cols} columns")
        raise KernelError(f"{name}: dst must be {want} ({how}), not {d.shape}")
    if d.p0 != s.p0:
        raise KernelError(f"{name}: dst must be on src's partitions {s.p0}..{s.p1 - 1} (a "
                          f"collective has one first partition), not {d.p0}..{d.p1 - 1}")
    src_addr, dst_addr = s.base.addr + s.f0, d.base.addr + d.f0
    if src_addr < dst_addr + want[1] and dst_addr < src_addr + cols:
        raise KernelError(f"{name}: dst shares SBUF words with src")
    k.emit(Opcode.COLLECTIVE, coll_op=int(op), part=s.p0, rows=w, sbuf_addr=src_addr,
           cols=cols, dst_addr=dst_addr, shift=shift, dim=int(dim_code))
    k.wrote(d)


def all_to_all(src, dst, *, dim: str = "row") -> None:
    """Core j's ``dst`` (W x P·⌈C / P⌉) receives chunk j of every core i's ``src`` (W x C) at
    columns i·b_j .. (i + 1)·b_j, b_j the columns of chunk j (its own chunk j too); columns of
    ``dst`` past a core's P·b_j, and ``src``, are left as they were. (i, j: ranks in ``dim``'s
    sub-ring.)"""
    _routed(CollectiveOp.ALL_TO_ALL, src, dst, 0, dim)


def permute(src, dst, shift: int, *, dim: str = "row") -> None:
    """Core (r + ``shift``) mod P's ``dst`` (W x C, like ``src``) receives core r's ``src``;
    1 <= shift <= P - 1 (r, P: of ``dim``'s sub-ring)."""
    _routed(CollectiveOp.PERMUTE, src, dst, shift, dim)


def _torus(k, name: str) -> tuple[int, int]:
    if k.ranks < 2 or k.cfg.torus_rows < 2:
        raise KernelError(f"{name} needs a torus of cores: a CONFIG with torus_rows >= 2 and "
                          f"--cores a multiple of it (it runs on {k.ranks}, torus_rows "
                          f"{k.cfg.torus_rows})")
    return k.cfg.torus_rows, k.ranks // k.cfg.torus_rows


def _emit_steps(k, steps, part: int, base: int) -> None:
    for step in steps:
        k.emit(Opcode.COLLECTIVE, **step_fields(step, part=part, base=base,
                                                link_width=k.cfg.link_width))


def torus_all_reduce(tile) -> None:
    """Every element of ``tile`` (an SBUF float32 tile of a multiple of W partitions) becomes
    its sum over every core of the torus: reduce-scatter along the rows, all-reduce of the
    core's chunk along the columns, all-gather along the rows (the same bits on every
    core)."""
    k = current()
    R, C = _torus(k, "torus_all_reduce")
    v = as_view(tile, "tile")
    if v.buffer != SBUF or v.dtype != Dtype.FP32:
        raise KernelError(f"torus_all_reduce works on an SBUF float32 tile, not a {v.buffer} "
                          f"{v.dtype.golden_name} one")
    w = k.cfg.link_width
    rows, cols = v.shape
    if rows % w:
        raise KernelError(f"torus_all_reduce: the tile's partitions must be a multiple of the "
                          f"link width {w}, not {rows}")
    if cols > _MAX_COLS:
        raise KernelError(f"torus_all_reduce: at most {_MAX_COLS} words a partition, not "
                          f"{cols}")
    steps = torus_schedule(CollectiveOp.ALL_REDUCE, cols * w, R, C, w)[k.rank]
    for p in range(v.p0, v.p1, w):
        _emit_steps(k, steps, p, v.base.addr + v.f0)
    k.wrote(v)


def torus_all_to_all(src, tmp, dst) -> None:
    """The all-to-all over every core of the torus (core k's ``dst`` holds chunk k of every
    core r's ``src`` at columns r·b .. (r + 1)·b, b = C / P, C the columns of ``src``, a
    multiple of P): down the columns into ``tmp``, then along the rows into ``dst``. ``src``,
    ``tmp`` and ``dst``: SBUF tiles of W partitions and C columns, one dtype, the same
    partitions, no word shared."""
    k = current()
    R, C = _torus(k, "torus_all_to_all")
    views = [as_view(t, n) for t, n in ((src, "src"), (tmp, "tmp"), (dst, "dst"))]
    w = k.cfg.link_width
    s = views[0]
    cols = s.shape[1]
    for v, n in zip(views, ("src", "tmp", "dst"), strict=True):
        if v.buffer != SBUF or v.shape != (w, cols) or v.dtype != s.dtype or v.p0 != s.p0:
            raise KernelError(f"torus_all_to_all: {n} must be an SBUF tile of {(w, cols)} "
                              f"{s.dtype.golden_name} on src's partitions, not a {v.buffer} "
                              f"{v.shape} {v.dtype.golden_name} one at partition {v.p0}")
    if cols % k.ranks or cols > _MAX_COLS:
        raise KernelError(f"torus_all_to_all: src's columns must be a multiple of the "
                          f"{k.ranks} cores (and at most {_MAX_COLS}), not {cols}")
    addrs = [v.base.addr + v.f0 for v in views]
    for a in range(3):
        for b in range(a + 1, 3):
            if addrs[a] < addrs[b] + cols and addrs[b] < addrs[a] + cols:
                raise KernelError("torus_all_to_all: src, tmp and dst must not share SBUF "
                                  "words")
    steps = torus_schedule(CollectiveOp.ALL_TO_ALL, cols * w, R, C, w, addr=addrs[0],
                           tmp=addrs[1], dst=addrs[2])[k.rank]
    _emit_steps(k, steps, s.p0, 0)
    k.wrote(views[1])
    k.wrote(views[2])
