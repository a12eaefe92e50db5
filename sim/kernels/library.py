"""The core's programs as kernels: tiled GEMMs, dense layers and MLPs (``nisa`` calls inside a
kernel being traced), what the demo, the bench, the board tool and the tests run; and
elementwise operations, reductions and transposes of DRAM matrices on the vector engine
(:func:`elementwise`, :func:`reduce_columns`, :func:`transpose`: the pieces of a training
step).

:func:`gemm` computes ``out = cast(f(A.T @ B + bias))`` with the tiles of
``golden.tensor_engine.gemm_schedule`` (N x N stationary tiles, moving tiles of one PSUM bank's
width W) and the same order of additions: every output element sums its K tiles in increasing
order, the first overwriting PSUM (so with the identity, scale 1, no bias and an fp32 result,
C's bits equal ``golden.tensor_engine.run_gemm``'s). The program is written so that the engines
overlap, as a tuned NKI kernel is:

* **Units.** The output is cut into units of one M tile x a group of at most
  ``max(1, banks // 2)`` F tiles (every F tile one PSUM bank). Consecutive units use alternate
  halves of PSUM (ping-pong), so the drain of one unit (ACTIVATE, DMA store) runs while the
  tensor engine fills the other half with the next.
* **SBUF reuse.** When they fit, B's columns of a group stay in SBUF for all the group's units
  (loaded once), and the stationary tiles of a unit are loaded as one block, double buffered:
  unit u + 1's block is loaded while unit u computes. Otherwise tiles are loaded one by one
  into ping-pong areas just before use (:meth:`Workspace.plan` says which).
* **Background work between multiplications.** The sequencer dispatches in program order and a
  command waiting at the head holds back those behind it, so the loads for the next unit and the
  drain of the previous one are spread one command after each MATMUL, never queued in a block
  in front of the tensor engine's work.

SBUF plan (words of every partition), placed directly (``nl.ndarray(..., addr=)``): the output
staging area ``0 .. W - 1``, the bias column at ``W``, then the areas of :meth:`Workspace.plan`;
matrices kept in SBUF between layers (:class:`SbufMatrix`) from the top down. A core needs at
least ``2N + 3W + 1`` SBUF words.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from golden import sparse
from golden.isa import DTYPE_BYTES, DTYPE_NAMES, OPERAND_DTYPES, ActivationFunc, Dtype, Rounding
from golden.rounding import DEFAULT_SATURATE

from . import isa as nisa
from . import language as nl
from .collectives import all_reduce
from .trace import NUMPY_DTYPES, Kernel, KernelError, Tensor, current, tracing

__all__ = ["Workspace", "SbufMatrix", "SparseMatrix", "sparse_matrix", "sparse_moving",
           "GemmPlan", "gemm", "dense", "mlp",
           "data_parallel_gemm", "elementwise", "reduce_columns", "transpose", "traced"]


@dataclass(frozen=True)
class SbufMatrix:
    """A matrix kept in SBUF between commands, in N-row tiles: row r in partition r mod N,
    column c at word ``addr + (r // N) * cols + c`` of ``tile``. :func:`gemm` leaves a result
    so (``out``) and takes B so (``mov``): the output tiles of one layer are the moving tiles of
    the next, as NKI kernels keep activations in SBUF."""

    tile: Tensor
    rows: int
    cols: int

    @property
    def dtype(self) -> Dtype:
        return self.tile.dtype

    @property
    def addr(self) -> int:
        return self.tile.addr

    @property
    def shape(self) -> tuple[int, int]:
        return self.rows, self.cols


@dataclass(frozen=True)
class GemmPlan:
    """Where :func:`gemm` keeps its tiles in SBUF (words of every partition)."""

    group: int  #: F tiles (PSUM banks) a unit
    a_block: bool  #: a unit's stationary tiles as one block (else tile by tile)
    a_addr: tuple[int, int]  #: its two areas (block or tile)
    b_resident: bool  #: B's columns of a group stay in SBUF for the group's units
    b_addr: tuple[int, int]  #: the area (both the same) or the two tile areas


def _tiles(size: int, step: int) -> list[tuple[int, int]]:
    return [(i, min(i + step, size)) for i in range(0, size, step)]


class Workspace:
    """The SBUF plan of the kernel being traced: the staging area, the bias column, the tile
    areas, and the :class:`SbufMatrix` es kept between layers."""

    def __init__(self):
        cfg = current().cfg
        need = 2 * cfg.n + 3 * cfg.psum_words + 1
        if cfg.sbuf_words < need:
            raise KernelError(f"sbuf_words must be at least 2 * N + 3 * psum_words + 1 = {need} "
                              f"for these programs, not {cfg.sbuf_words}")
        self.cfg = cfg
        self.out_addr = 0
        self.bias_addr = cfg.psum_words
        self.free_addr = cfg.psum_words + 1  # the first word the tile areas may use
        self._live: list[SbufMatrix] = []

    @property
    def top(self) -> int:
        """The SBUF matrices live from this word up; the tile areas below it."""
        return min((t.addr for t in self._live), default=self.cfg.sbuf_words)

    def sbuf_matrix(self, rows: int, cols: int, dtype) -> SbufMatrix | None:
        """An :class:`SbufMatrix` just below the live ones, or None if it would leave the tile
        areas less than ``2N + 2W`` words (then keep the matrix in DRAM)."""
        cfg = self.cfg
        words = -(-rows // cfg.n) * cols
        if self.top - words - self.free_addr < 2 * cfg.n + 2 * cfg.psum_words:
            return None
        t = SbufMatrix(nl.ndarray((cfg.n, words), NUMPY_DTYPES[Dtype(dtype)], buffer=nl.sbuf,
                                  addr=self.top - words, name="an SBUF matrix"), rows, cols)
        self._live.append(t)
        return t

    def free(self, t: SbufMatrix) -> None:
        """Give back an :class:`SbufMatrix`' words (its commands are all issued)."""
        self._live.remove(t)
        t.tile.free()

    def plan(self, m: int, k: int, f: int, *, b_in_sbuf: bool = False,
             ratio: int = 1) -> GemmPlan:
        """The SBUF areas of an M x K x F GEMM below the SBUF matrices: B resident if it fits
        (it saves a reload per unit; none with ``b_in_sbuf``), then the stationary blocks;
        else tile-sized ping-pong areas. ``ratio``: a sparse GEMM's R (k-tiles of R·N rows,
        moving tiles R words a column)."""
        cfg = self.cfg
        n, w, lo = cfg.n, cfg.psum_words, self.free_addr
        room = self.top - lo
        group = max(1, cfg.psum_banks // 2)
        k_tiles = -(-k // (ratio * n))
        b_width = min(f, group * w) * ratio
        b_words, a_words = k_tiles * b_width, k_tiles * n
        if b_in_sbuf:
            b_words = 0
        b_resident = b_words + 2 * n <= room
        b_need = b_words if b_resident else 2 * w * ratio
        a_block = b_need + 2 * a_words <= room
        a_size = a_words if a_block else n
        a_addr = (lo, lo + a_size)
        b0 = lo + 2 * a_size
        b_addr = (b0, b0) if b_resident else (b0, b0 + w * ratio)
        if not b_resident and b0 + 2 * w * ratio > self.top:
            raise KernelError(f"an M x K x F GEMM with moving tiles {ratio} words a column "
                              f"needs {b0 + 2 * w * ratio - self.top} SBUF words more (at "
                              f"least 2 * N + (2R + 1) * psum_words + 1 in all)")
        return GemmPlan(group, a_block, a_addr, b_resident, b_addr)


class _Area:
    """A tile placed at ``addr`` and ``words`` wide in every partition; ``at(a, rows, cols,
    part)`` is its view at SBUF word ``a``."""

    def __init__(self, addr: int, words: int, dtype, name: str):
        self.tile = nl.ndarray((current().cfg.n, max(words, 1)), NUMPY_DTYPES[Dtype(dtype)],
                               buffer=nl.sbuf, addr=addr, name=name)

    def at(self, addr: int, rows: int, cols: int, part: int = 0):
        off = addr - self.tile.addr
        return self.tile[part:part + rows, off:off + cols]


@dataclass(frozen=True)
class SparseMatrix:
    """An n:m-sparse stationary matrix A (K x M) in DRAM, as :func:`gemm` takes it: each k-tile
    of R·N rows compressed (``golden.sparse.compress``) into N rows of ``packed`` (float32
    words, ``golden.sparse.pack_words``; rows past a tile's slots 0). :func:`sparse_matrix`
    makes one."""

    packed: Tensor
    pattern: str
    dtype: Dtype  #: the values' format
    k: int

    @property
    def shape(self) -> tuple[int, int]:
        return self.k, self.packed.shape[1]


def sparse_matrix(kern: Kernel, bits, fmt, mask, pattern: str, name: str) -> SparseMatrix:
    """A DRAM :class:`SparseMatrix` of the K x M ``bits`` of ``fmt`` keeping ``mask`` (every
    group of every column keeps exactly its pattern's count: ``golden.sparse.compress``)."""
    p = sparse.pattern(pattern)
    n = kern.cfg.n
    if n % p.n:
        raise KernelError(f"a {p.name} matrix needs N a multiple of {p.n}, not {n}")
    fmt = Dtype(fmt)
    bits, mask = np.asarray(bits), np.asarray(mask)
    k, m = bits.shape
    t = p.ratio * n
    packed = np.zeros((n * -(-k // t), m), np.uint32)
    for j, (k0, k1) in enumerate(_tiles(k, t)):
        v, tags = sparse.compress(bits[k0:k1], fmt.golden_name, mask[k0:k1], p)
        packed[j * n:j * n + v.shape[0]] = sparse.pack_words(v, tags)
    return SparseMatrix(kern.dram_tensor(packed.shape, Dtype.FP32, name, data=packed),
                        p.name, fmt, k)


def sparse_moving(kern: Kernel, bits, fmt, pattern: str, name: str) -> Tensor:
    """The K x F moving matrix ``bits`` of ``fmt`` as a DRAM tensor in the sparse layout
    (``golden.sparse.moving_layout``: ceil(K / R) rows of F·R), :func:`gemm`'s ``mov`` with a
    :class:`SparseMatrix`."""
    lay = sparse.moving_layout(np.asarray(bits), pattern)
    return kern.dram_tensor(lay.shape, Dtype(fmt), name, data=lay)


def gemm(ws: Workspace, a: Tensor, mov, out, *, func: int = ActivationFunc.IDENTITY,
         bias: Tensor | None = None, dtype: int = Dtype.FP32, mode: int = Rounding.RNE,
         saturate: bool | None = None, keep_in_sbuf: bool = False):
    """``out = cast(f(A.T @ B + bias))``: A (K x M DRAM tensor, bf16/fp8) stationary, B (K x F)
    moving, ``bias`` an M x 1 fp32 DRAM column (one value per output row), ``out`` M x F of
    ``dtype``. ``mov`` and ``out`` may be :class:`SbufMatrix` es: B read from SBUF, the result
    left there, with no DMA. With ``keep_in_sbuf`` (M <= N, F <= W) the result stays in the
    staging area, whose tile this returns. ``saturate`` defaults to the command layer's rule
    (on for fp8, ``golden.rounding.DEFAULT_SATURATE``). It takes every PSUM bank while it runs
    and the SBUF below the live :class:`SbufMatrix` es (the kernel must hold no other tiles
    there). The schedule: see the module's text.

    ``a`` may be a :class:`SparseMatrix` (a core with the sparse mode): then ``mov`` is B in the
    sparse layout (:func:`sparse_moving`), the k-tiles have R·N rows, and each MATMUL multiplies
    a compressed tile (``nisa.compressed``); C's bits are ``golden.sparse.run_sparse_gemm``'s."""
    cfg = ws.cfg
    if saturate is None:
        saturate = DEFAULT_SATURATE.get(DTYPE_NAMES[dtype], False)
    if out is not None and out.dtype != dtype:
        raise KernelError(f"out holds dtype {out.dtype} but the cast is to {dtype}")
    sp = a if isinstance(a, SparseMatrix) else None
    r = sparse.pattern(sp.pattern).ratio if sp else 1
    a_dram = sp.packed if sp else a
    a_rows, m = a.shape
    k, f = mov.shape
    if sp:
        if isinstance(mov, SbufMatrix) or mov.shape[0] != -(-sp.k // r) or mov.shape[1] % r:
            raise KernelError(f"a {sp.pattern} GEMM takes B from DRAM in the sparse layout "
                              f"({-(-sp.k // r)} rows of F x {r}), not {mov.shape}")
        k, f = sp.k, mov.shape[1] // r
    if a_rows != k:
        raise KernelError(f"A and B must share K, got {a_rows} and {k}")
    n, w = cfg.n, cfg.psum_words
    if keep_in_sbuf and (m > n or f > w):
        raise KernelError("keep_in_sbuf needs M <= N and F <= psum_words")
    b_in_sbuf, out_in_sbuf = isinstance(mov, SbufMatrix), isinstance(out, SbufMatrix)
    plan = ws.plan(m, k, f, b_in_sbuf=b_in_sbuf, ratio=r)
    k_tiles, f_tiles = _tiles(k, r * n), _tiles(f, w)

    def a_rows_of(j: int) -> tuple[int, int]:
        """Rows of ``a_dram`` holding k-tile j's stationary tile."""
        k0, k1 = k_tiles[j]
        return (j * n, j * n + sparse.pattern(sp.pattern).slots(k1 - k0)) if sp else (k0, k1)

    def b_rows_of(j: int) -> tuple[int, int]:
        """Rows of ``mov`` holding k-tile j's moving rows."""
        k0, k1 = k_tiles[j]
        return (j * n, j * n + -(-(k1 - k0) // r)) if sp else (k0, k1)
    groups = [f_tiles[g:g + plan.group] for g in range(0, len(f_tiles), plan.group)]
    units = [(mt, g) for g in range(len(groups)) for mt in _tiles(m, n)]
    half = plan.group if 2 * plan.group <= cfg.psum_banks else 0  # the other half's offset

    stage = None if out_in_sbuf else _Area(ws.out_addr, w, dtype, "the output staging area")
    bias_area = _Area(ws.bias_addr, 1, Dtype.FP32, "the bias column") if bias is not None \
        else None
    a_area = _Area(plan.a_addr[0], 2 * (plan.a_addr[1] - plan.a_addr[0]), a_dram.dtype,
                   "the stationary areas")
    b_area = None
    if not b_in_sbuf:
        b_words = (len(k_tiles) * min(f, plan.group * w) if plan.b_resident else 2 * w) * r
        b_area = _Area(plan.b_addr[0], b_words, mov.dtype, "the moving areas")
    psum = [nl.ndarray((n, w), nl.float32, buffer=nl.psum, bank=bk, addr=0,
                       name=f"PSUM bank {bk}") for bk in range(cfg.psum_banks)]

    def bank(u: int, t: int) -> int:
        return (u % 2) * half + t

    def load(area: _Area, t: Tensor, r0, r1, c0, c1, addr, part=0):
        nisa.dma_copy(area.at(addr, r1 - r0, c1 - c0, part), t[r0:r1, c0:c1])

    def a_block_tile(u: int, j: int):
        """Load unit u's stationary tile j into its block; returns the load as a callable."""
        (m0, m1), _ = units[u]
        return functools.partial(load, a_area, a_dram, *a_rows_of(j), m0, m1,
                                 plan.a_addr[u % 2] + j * n)

    def drain(u: int) -> list:
        """Unit u's PSUM blocks through ACTIVATE to ``out`` (or kept), as callables: the stores
        cut into rows of about a MATMUL's length each."""
        (m0, m1), g = units[u]
        cmds = []
        if bias is not None:
            cmds.append(functools.partial(load, bias_area, bias, m0, m1, 0, 1, ws.bias_addr))
        row_cycles = -(-w * DTYPE_BYTES[dtype] // (cfg.data_width // 8)) + 2  # a row's store
        rows_a_store = max(1, w // row_cycles)
        for t, (f0, f1) in enumerate(groups[g]):
            if out_in_sbuf:
                off = (m0 // n) * f + f0
                dst = out.tile[0:m1 - m0, off:off + f1 - f0]
            else:
                dst = stage.at(ws.out_addr, m1 - m0, f1 - f0)
            cmds.append(functools.partial(
                nisa.activation, dst, func, psum[bank(u, t)][0:m1 - m0, 0:f1 - f0],
                bias=bias_area.at(ws.bias_addr, m1 - m0, 1) if bias is not None else None,
                scale=1.0, rounding=Rounding(mode), saturate=bool(saturate)))
            if not (keep_in_sbuf or out_in_sbuf):
                cmds += [functools.partial(
                    nisa.dma_copy, out[r0:min(r0 + rows_a_store, m1), f0:f1],
                    stage.at(ws.out_addr, min(r0 + rows_a_store, m1) - r0, f1 - f0, r0 - m0))
                    for r0 in range(m0, m1, rows_a_store)]
        return cmds

    # Commands spread one after each MATMUL: (the unit they must precede, the command).
    background: list[tuple[int, object]] = []
    turn = {"a": 0, "b": 0}  # ping-pong turns of the tile-by-tile areas
    # Unit u's drain must precede the MATMULs that next write its banks: unit u + 2's with
    # PSUM ping-pong, unit u + 1's without.
    reuse = 2 if half else 1

    def tile_area(which: str, areas: tuple[int, int]) -> int:
        turn[which] += 1
        return areas[turn[which] % 2]

    def due(u: int) -> None:
        """Issue, in order, every background command that must precede unit u."""
        for entry in [e for e in background if e[0] <= u]:
            background.remove(entry)
            entry[1]()

    for u, ((m0, m1), g) in enumerate(units):
        due(u)
        if plan.a_block and u + 1 < len(units):  # the next unit's block, first
            background[:0] = [(u + 1, a_block_tile(u + 1, j)) for j in range(len(k_tiles))]
        group = groups[g]
        g0, g1 = group[0][0], group[-1][1]
        first_of_group = u == 0 or units[u - 1][1] != g
        for j, (k0, k1) in enumerate(k_tiles):
            (a0, a1), (b0, b1) = a_rows_of(j), b_rows_of(j)
            if plan.a_block:
                if u == 0:  # the first block: nothing to overlap it with yet
                    a_block_tile(0, j)()
                s_addr = plan.a_addr[u % 2] + j * n
            else:
                s_addr = tile_area("a", plan.a_addr)
                load(a_area, a_dram, a0, a1, m0, m1, s_addr)
            if plan.b_resident and first_of_group and not b_in_sbuf:
                load(b_area, mov, b0, b1, g0 * r, g1 * r, plan.b_addr[0] + j * (g1 - g0) * r)
            stationary = a_area.at(s_addr, a1 - a0, m1 - m0)
            if sp:
                stationary = nisa.compressed(stationary, sp.pattern, sp.dtype, k1 - k0)
            nisa.load_stationary(stationary)
            for t, (f0, f1) in enumerate(group):
                if b_in_sbuf:
                    off = j * f + f0
                    moving = mov.tile[0:k1 - k0, off:off + f1 - f0]
                elif plan.b_resident:
                    moving = b_area.at(plan.b_addr[0] + (j * (g1 - g0) + (f0 - g0)) * r,
                                       b1 - b0, (f1 - f0) * r)
                else:
                    m_addr = tile_area("b", plan.b_addr)
                    load(b_area, mov, b0, b1, f0 * r, f1 * r, m_addr)
                    moving = b_area.at(m_addr, b1 - b0, (f1 - f0) * r)
                nisa.nc_matmul(psum[bank(u, t)][0:m1 - m0, 0:f1 - f0], stationary, moving,
                               accumulate=j > 0)
                if background:
                    background.pop(0)[1]()
        background += [(u + reuse, cmd) for cmd in drain(u)]
    due(len(units) + reuse)
    for p in psum:
        p.free()
    for area in (a_area, b_area, bias_area):
        if area is not None:
            area.tile.free()
    return stage.tile if keep_in_sbuf else None


def dense(ws: Workspace, w: Tensor, x, bias: Tensor, *, dtype: int,
          mode: int = Rounding.RNE, saturate: bool | None = None,
          func: int = ActivationFunc.RELU, in_sbuf: bool = False):
    """A dense layer ``Y = cast(relu(W.T @ X + bias))`` into a new DRAM tensor (M x F), or with
    ``in_sbuf`` into a new :class:`SbufMatrix` where it fits (else DRAM)."""
    m, f = w.shape[1], x.shape[1]
    y = ws.sbuf_matrix(m, f, dtype) if in_sbuf else None
    if y is None:
        y = nl.ndarray((m, f), NUMPY_DTYPES[Dtype(dtype)], buffer=nl.shared_hbm)
    gemm(ws, w, x, y, func=func, bias=bias, dtype=dtype, mode=mode, saturate=saturate)
    return y


def mlp(ws: Workspace, x: Tensor, layers: list[dict]) -> Tensor:
    """Layers one after another: each ``dict(w=, bias=, dtype=, func=, mode=, saturate=)`` (w
    and bias DRAM tensors; the rest as :func:`dense`), the output of one the moving input of the
    next (its dtype must be an operand format: bf16 or fp8). The hidden activations stay in SBUF
    where they fit (no DMA between layers); the last output goes to DRAM, which this
    returns."""
    h = x
    for i, layer in enumerate(layers):
        if i and h.dtype not in OPERAND_DTYPES:
            raise KernelError(f"layer {i - 1} writes dtype {h.dtype}, which the next layer's "
                              f"MATMUL cannot take (bf16 or fp8 only)")
        prev = h
        h = dense(ws, layer["w"], h, layer["bias"], dtype=layer["dtype"],
                  func=layer.get("func", ActivationFunc.RELU),
                  mode=layer.get("mode", Rounding.RNE), saturate=layer.get("saturate"),
                  in_sbuf=i + 1 < len(layers))
        if isinstance(prev, SbufMatrix):
            ws.free(prev)
    return h


def data_parallel_gemm(ws: Workspace, a: Tensor, b: Tensor, c: Tensor) -> None:
    """This core's partial ``C_r = A_r.T @ B_r`` (M <= N, F <= W) kept in SBUF, summed over the
    ring by an all-reduce (M a multiple of the link width), and stored into ``c``."""
    m, f = a.shape[1], b.shape[1]
    part = gemm(ws, a, b, None, keep_in_sbuf=True)
    view = part[0:m, 0:f]
    all_reduce(view)
    nisa.dma_copy(c, view)
    part.free()



# --- Elementwise programs on DRAM matrices (the vector engine) ---------------------------------


def _columns_per_load(ws: Workspace, cols: int, tiles: int, chunk: int | None) -> int:
    """Columns a row tile takes at once: ``chunk`` if given, else what ``tiles`` tiles of the
    SBUF below the live matrices hold (at most a command's 65 535)."""
    if chunk is not None:
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise KernelError(f"chunk must be a positive integer, not {chunk!r}")
        return min(cols, chunk)
    return max(1, min(cols, ws.top // tiles, (1 << 16) - 1))


def _load(view):
    """A new SBUF tile holding ``view`` of a DRAM tensor (freed with the enclosing scope)."""
    tile = nl.ndarray(view.shape, view.dtype, buffer=nl.sbuf)
    nisa.dma_copy(tile, view)
    return tile


def _same_shapes(what: str, **tensors) -> tuple[int, int]:
    shapes = {name: t.shape for name, t in tensors.items() if isinstance(t, Tensor)}
    if len(set(shapes.values())) != 1:
        raise KernelError(f"{what}: shapes differ: {shapes}")
    return next(iter(shapes.values()))


def elementwise(ws: Workspace, op, a: Tensor, b, out: Tensor, *, reverse: bool = False,
                rounding="rne", saturate: bool | None = None, chunk: int | None = None) -> None:
    """``out = cast(a op b)`` element by element on DRAM matrices of one shape, ``b`` a DRAM
    matrix (TENSOR_TENSOR) or an fp32 number (TENSOR_SCALAR; ``reverse``: ``b op a``); ``op``
    as ``nisa.tensor_tensor``'s, the cast by ``rounding`` and ``saturate``. Row tiles of N
    partitions, ``chunk`` columns at a time (default: what the SBUF holds)."""
    n = ws.cfg.n
    rows, cols = _same_shapes("elementwise", a=a, b=b, out=out)
    if reverse and isinstance(b, Tensor):
        raise KernelError("elementwise: reverse is for a scalar b")
    step = _columns_per_load(ws, cols, 3, chunk)
    for r0, r1 in _tiles(rows, n):
        for c0, c1 in _tiles(cols, step):
            with nl.scope():
                ta = _load(a[r0:r1, c0:c1])
                to = nl.ndarray((r1 - r0, c1 - c0), out.dtype, buffer=nl.sbuf)
                if isinstance(b, Tensor):
                    nisa.tensor_tensor(to, ta, _load(b[r0:r1, c0:c1]), op, rounding=rounding,
                                       saturate=saturate)
                else:
                    nisa.tensor_scalar(to, ta, op, b, reverse=reverse, rounding=rounding,
                                       saturate=saturate)
                nisa.dma_copy(out[r0:r1, c0:c1], to)


def reduce_columns(ws: Workspace, op, a: Tensor, out: Tensor, *, rounding="rne",
                   saturate: bool | None = None) -> None:
    """``out[r, 0] = cast(fold of a[r, :])`` (``op`` ``nl.add``, ``nl.maximum`` or
    ``nl.minimum``, in increasing column order from the contract's start value): one
    TENSOR_REDUCE per row tile, so a row must fit the SBUF at once (a fold in parts would add
    in another order)."""
    n = ws.cfg.n
    rows, cols = a.shape
    if out.shape != (rows, 1):
        raise KernelError(f"reduce_columns: out must be ({rows}, 1), not {out.shape}")
    if _columns_per_load(ws, cols, 2, None) < cols:
        raise KernelError(f"reduce_columns: a row of {cols} columns does not fit the SBUF "
                          f"at once (a fold in parts would add in another order)")
    for r0, r1 in _tiles(rows, n):
        with nl.scope():
            to = nl.ndarray((r1 - r0, 1), out.dtype, buffer=nl.sbuf)
            nisa.tensor_reduce(to, _load(a[r0:r1, :]), op, rounding=rounding,
                               saturate=saturate)
            nisa.dma_copy(out[r0:r1, :], to)


def transpose(ws: Workspace, a: Tensor, out: Tensor) -> None:
    """``out = a.T`` (DRAM matrices of one dtype), N x N blocks through the SBUF and
    TRANSPOSE: the bits moved unchanged."""
    n = ws.cfg.n
    rows, cols = a.shape
    if out.shape != (cols, rows) or out.dtype != a.dtype:
        raise KernelError(f"transpose: out must be a ({cols}, {rows}) "
                          f"{a.dtype.golden_name} matrix, not {out.shape} "
                          f"{out.dtype.golden_name}")
    for r0, r1 in _tiles(rows, n):
        for c0, c1 in _tiles(cols, n):
            with nl.scope():
                tt = nl.ndarray((c1 - c0, r1 - r0), a.dtype, buffer=nl.sbuf)
                nisa.nc_transpose(tt, _load(a[r0:r1, c0:c1]))
                nisa.dma_copy(out[c0:c1, r0:r1], tt)


def traced(cfg, build, *, rank: int = 0, ranks: int = 1):
    """Trace ``build(k, ws)`` on one core of ``cfg`` (``golden.iss.CoreConfig``): ``build`` makes
    its DRAM tensors with ``k.dram_tensor(shape, dtype, name, data=)`` and calls this module's
    programs with the :class:`Workspace` ``ws``. Returns ``(k, what build returned)``: the
    program is ``k.program``, the DRAM image ``k.dram[:k.dram_top]``."""
    k = Kernel(cfg, rank, ranks)
    with tracing(k):
        result = build(k, Workspace())
    return k, result
