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
"""

from __future__ import annotations

from golden.collective import out_rows
from golden.isa import FIELDS, CollectiveOp, Dtype, Opcode

from .trace import SBUF, KernelError, as_view, current

__all__ = ["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "permute"]

_MAX_COLS = (1 << dict(FIELDS[Opcode.COLLECTIVE])["cols"]) - 1
_MAX_SHIFT = (1 << dict(FIELDS[Opcode.COLLECTIVE])["shift"]) - 1


def _collective(op: CollectiveOp, tile, *, bands: bool) -> None:
    k = current()
    v = as_view(tile, "tile")
    name = op.name.lower()
    if k.ranks < 2:
        raise KernelError(f"{name} needs a ring of cores: run the kernel with --cores P >= 2 "
                          f"(it runs on {k.ranks})")
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
               sbuf_addr=v.base.addr + v.f0, cols=cols, dst_addr=0, shift=0)
    k.wrote(v)


def all_reduce(tile) -> None:
    """Every element of ``tile`` becomes its sum over all cores (ring reduce-scatter, then
    all-gather)."""
    _collective(CollectiveOp.ALL_REDUCE, tile, bands=True)


def reduce_scatter(tile) -> None:
    """Core r's chunk r of ``tile`` becomes the sum of every core's chunk r (the other chunks
    hold the ring's partial sums afterwards)."""
    _collective(CollectiveOp.REDUCE_SCATTER, tile, bands=False)


def all_gather(tile) -> None:
    """Chunk r of every core's ``tile`` becomes core r's chunk r."""
    _collective(CollectiveOp.ALL_GATHER, tile, bands=False)


def _routed(op: CollectiveOp, src, dst, shift: int) -> None:
    """ALL_TO_ALL / PERMUTE of the SBUF tile ``src`` into ``dst``: checked, then emitted."""
    k = current()
    name = op.name.lower()
    s, d = as_view(src, "src"), as_view(dst, "dst")
    if k.ranks < 2:
        raise KernelError(f"{name} needs a ring of cores: run the kernel with --cores P >= 2 "
                          f"(it runs on {k.ranks})")
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
                                       or not 1 <= shift <= min(k.ranks - 1, _MAX_SHIFT)):
        raise KernelError(f"{name}: shift must be an integer in 1..{k.ranks - 1} (the cores "
                          f"- 1), not {shift!r}")
    want = (w, out_rows(op, rows * cols, k.ranks, w))
    if d.shape != want:
        how = (f"P x ceil({cols} / P) = {want[1]} columns for P = {k.ranks} cores"
               if op == CollectiveOp.ALL_TO_ALL else f"src's {cols} columns")
        raise KernelError(f"{name}: dst must be {want} ({how}), not {d.shape}")
    if d.p0 != s.p0:
        raise KernelError(f"{name}: dst must be on src's partitions {s.p0}..{s.p1 - 1} (a "
                          f"collective has one first partition), not {d.p0}..{d.p1 - 1}")
    src_addr, dst_addr = s.base.addr + s.f0, d.base.addr + d.f0
    if src_addr < dst_addr + want[1] and dst_addr < src_addr + cols:
        raise KernelError(f"{name}: dst shares SBUF words with src")
    k.emit(Opcode.COLLECTIVE, coll_op=int(op), part=s.p0, rows=w, sbuf_addr=src_addr,
           cols=cols, dst_addr=dst_addr, shift=shift)
    k.wrote(d)


def all_to_all(src, dst) -> None:
    """Core j's ``dst`` (W x P·⌈C / P⌉) receives chunk j of every core i's ``src`` (W x C) at
    columns i·b_j .. (i + 1)·b_j, b_j the columns of chunk j (its own chunk j too); columns of
    ``dst`` past a core's P·b_j, and ``src``, are left as they were."""
    _routed(CollectiveOp.ALL_TO_ALL, src, dst, 0)


def permute(src, dst, shift: int) -> None:
    """Core (r + ``shift``) mod P's ``dst`` (W x C, like ``src``) receives core r's ``src``;
    1 <= shift <= P - 1."""
    _routed(CollectiveOp.PERMUTE, src, dst, shift)
