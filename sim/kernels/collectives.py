"""``ncc``: collectives over the ring of cores a kernel runs on (``--cores P``), in place on an
SBUF float32 tile, as the collective engine runs them (``golden.collective``).

The buffer of a collective is ``link_width`` (W) partitions of the tile, flattened word by
word: element i is partition ``p0 + i % W``, word ``f0 + i // W`` (``golden.iss``). An
``all_reduce`` may take any multiple of W partitions (one collective per band of W); every
element becomes the fp32 sum over the cores in the ring's order, the same bits on every core.
``reduce_scatter`` and ``all_gather`` take exactly W partitions: the buffer's chunks are
``golden.collective.chunk_words``' (chunk r: the r-th of P near-equal runs of beats); after a
reduce-scatter core r holds the reduced chunk r, after an all-gather every core holds every
core's chunk r at chunk r's place.

Every core must issue the same collectives in the same order, with buffers of the same size
(the ISS raises otherwise: the hardware's outcome is not defined).
"""

from __future__ import annotations

from golden.isa import CollectiveOp, Dtype, Opcode

from .trace import SBUF, KernelError, as_view, current

__all__ = ["all_reduce", "reduce_scatter", "all_gather"]


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
    if cols > (1 << 16) - 1:
        raise KernelError(f"{name}: at most {(1 << 16) - 1} words a partition, not {cols}")
    for p in range(v.p0, v.p1, w):
        k.emit(Opcode.COLLECTIVE, coll_op=int(op), part=p, rows=w,
               sbuf_addr=v.base.addr + v.f0, cols=cols)
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
