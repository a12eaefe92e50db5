"""``nisa``: the instructions, as NKI's ``nki.isa`` names them (``dst`` first, as in NKI 2.x).

Each call checks its operands against the core (shapes, dtypes, buffers, partitions, the
descriptor's field widths) and records the descriptors that do it (``golden.isa``); a
:class:`~sim.kernels.trace.KernelError` names the kernel's line otherwise.

=====================================  =========================================================
call                                   descriptors
=====================================  =========================================================
``dma_copy(dst, src)``                 DMA_LOAD (DRAM -> SBUF) or DMA_STORE (SBUF -> DRAM)
``nc_matmul(dst, stationary, moving,   LOAD_STATIONARY (unless that tile is loaded already,
accumulate=False)``                    unchanged) and MATMUL into the PSUM tile ``dst``; a
                                       ``compressed(tile, pattern, dtype, k)`` stationary
                                       tile: the sparse ones (``golden.sparse``)
``activation(dst, op, data, bias=None, ACTIVATE: ``dst = cast(op(data * scale + bias))``
scale=1.0, rounding=, saturate=)``
``tensor_copy(dst, src, rounding=,     ACTIVATE with ``nl.copy``, scale 1, no bias: a cast
saturate=)``
``tensor_tensor(dst, data1, data2,     TENSOR_TENSOR: ``dst = cast(data1 op data2)``
op, rounding=, saturate=)``            (the vector engine, as the four below)
``tensor_scalar(dst, data, op,         TENSOR_SCALAR: ``dst = cast(data op operand)``
operand, reverse=, ...)``
``tensor_reduce(dst, data, op,         TENSOR_REDUCE: each partition's row folded into
axis=1, ...)``                         ``dst[p, 0]``
``nc_transpose(dst, data)``            TRANSPOSE: ``dst[m, k] = data[k, m]``, bits moved
``set_seed(seed)`` / ``barrier()``     SET_SEED / BARRIER
=====================================  =========================================================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden import sparse
from golden.isa import (
    DTYPE_BYTES,
    OPERAND_DTYPES,
    ActivationFunc,
    AluOp,
    Dtype,
    Opcode,
    Rounding,
    Sparsity,
)
from golden.rounding import DEFAULT_SATURATE

from .trace import HBM, PSUM, SBUF, KernelError, View, as_view, current, dtype_of

__all__ = ["dma_copy", "load_stationary", "nc_matmul", "Compressed", "compressed", "activation",
           "tensor_copy", "tensor_tensor", "tensor_scalar", "tensor_reduce", "nc_transpose",
           "set_seed", "barrier"]

_NEG_ZERO = 0x80000000
_FIELD16 = (1 << 16) - 1


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise KernelError(message)


def _in(view: View, buffers, what: str) -> None:
    names = {SBUF: "nl.sbuf", PSUM: "nl.psum", HBM: "nl.shared_hbm"}
    _need(view.buffer in buffers, f"{what} must be in {' or '.join(names[b] for b in buffers)}"
                                  f", not {names[view.buffer]}")


def _same_shape(a: View, b: View, what: str) -> None:
    _need(a.shape == b.shape, f"{what}: shapes differ, {a.shape} and {b.shape}")


def dma_copy(dst, src) -> None:
    """Copy ``src`` to ``dst``, one DRAM and one SBUF: DRAM rows are SBUF partitions. Bits move
    unchanged, so both have the same dtype (the DMA never converts)."""
    k = current()
    dst, src = as_view(dst, "dst"), as_view(src, "src")
    if src.buffer == HBM and dst.buffer == SBUF:
        op, dram, tile = Opcode.DMA_LOAD, src, dst
    elif src.buffer == SBUF and dst.buffer == HBM:
        op, dram, tile = Opcode.DMA_STORE, dst, src
    else:
        raise KernelError(f"dma_copy moves between nl.shared_hbm and nl.sbuf, not from "
                          f"{src.buffer} to {dst.buffer}")
    _same_shape(dst, src, "dma_copy")
    _need(dram.dtype == tile.dtype, f"dma_copy: dtypes differ ({src.dtype.golden_name} to "
                                    f"{dst.dtype.golden_name}); the DMA moves bits, use "
                                    f"tensor_copy to convert")
    rows, cols = src.shape
    size = DTYPE_BYTES[dram.dtype]
    _need(cols <= _FIELD16, f"dma_copy: at most {_FIELD16} columns a command, not {cols}")
    t = dram.base
    k.emit(op, dtype=int(dram.dtype), part=tile.p0, rows=rows, sbuf_addr=tile.base.addr + tile.f0,
           cols=cols, dram_addr=t.addr + (dram.p0 * t.shape[1] + dram.f0) * size,
           dram_stride=t.shape[1] * size)
    if op == Opcode.DMA_LOAD:
        k.wrote(tile)


def _stationary(k, st: View) -> None:
    _in(st, (SBUF,), "stationary")
    _need(st.dtype in OPERAND_DTYPES, f"stationary must be bfloat16, float8_e4m3 or "
                                      f"float8_e5m2, not {st.dtype.golden_name}")
    kk, m = st.shape
    _need(m <= k.cfg.n, f"stationary has at most N = {k.cfg.n} columns (M), not {m}")
    if k.stationary != st.key():
        k.emit(Opcode.LOAD_STATIONARY, fmt=int(st.dtype), part=st.p0, k=kk, m=m,
               sbuf_addr=st.base.addr + st.f0, sparsity=0)
        k.stationary = st.key()


def _load_compressed(k, st: Compressed) -> None:
    """LOAD_STATIONARY of a compressed tile, unless it is the one loaded."""
    m = st.tile.shape[1]
    _need(m <= k.cfg.n, f"stationary has at most N = {k.cfg.n} columns (M), not {m}")
    key = (*st.tile.key(), st.pattern, st.k, int(st.dtype))
    if k.stationary != key:
        k.emit(Opcode.LOAD_STATIONARY, fmt=int(st.dtype), part=st.tile.p0, k=st.k, m=m,
               sbuf_addr=st.tile.base.addr + st.tile.f0,
               sparsity=int(next(s for s in Sparsity if s.pattern == st.pattern)))
        k.stationary = key


def _nc_matmul_sparse(k, dst, st: Compressed, mv: View, accumulate) -> None:
    _need(k.cfg.sparse, "nc_matmul: a compressed stationary tile needs a core with the sparse "
                        "mode (CoreConfig.sparse)")
    _in(mv, (SBUF,), "moving")
    _in(dst, (PSUM,), "dst")
    _need(mv.dtype in OPERAND_DTYPES, f"nc_matmul: moving must be bfloat16, float8_e4m3 or "
                                      f"float8_e5m2, not {mv.dtype.golden_name}")
    r, kk, m = st.ratio, st.k, st.tile.shape[1]
    rows, words = mv.shape
    _need(rows == -(-kk // r) and words % r == 0,
          f"nc_matmul: a {st.pattern} moving tile of K = {kk} is {-(-kk // r)} partitions of "
          f"F x {r} words (golden.sparse.moving_layout), not {mv.shape}")
    _matmul(k, dst, mv, kk, m, words // r, accumulate, lambda: _load_compressed(k, st))


def _matmul(k, dst: View, mv: View, kk: int, m: int, f: int, accumulate, load) -> None:
    """The checks both kinds of ``nc_matmul`` share, then ``load()`` (the stationary tile,
    unless loaded) and the MATMUL of ``mv`` (K = ``kk``, F = ``f``) into ``dst``."""
    _need(m <= k.cfg.n, f"nc_matmul: stationary has at most N = {k.cfg.n} columns (M), not {m}")
    _need(dst.shape == (m, f), f"nc_matmul: dst must be (M, F) = ({m}, {f}), not {dst.shape}")
    _need(dst.p0 == 0, f"nc_matmul: dst must start at partition 0 (the array's first column), "
                       f"not {dst.p0}")
    if not isinstance(accumulate, (bool, np.bool_)):
        raise KernelError(f"nc_matmul: accumulate must be True or False, not {accumulate!r}")
    load()
    k.emit(Opcode.MATMUL, fmt=int(mv.dtype), part=mv.p0, k=kk, f=f,
           sbuf_addr=mv.base.addr + mv.f0, bank=dst.base.bank, psum_addr=dst.base.addr + dst.f0,
           accumulate=int(bool(accumulate)))
    k.macs += kk * m * f
    k.wrote(dst)


def load_stationary(stationary) -> None:
    """Load ``stationary`` (an SBUF tile as ``nc_matmul`` takes it, or a :class:`Compressed`
    one) into the array now, unless it is the one loaded: the next ``nc_matmul`` with it then
    loads nothing. (nclite's: NKI's compiler places the loads; here a kernel may issue one
    early, so that it overlaps the DMA commands after it.)"""
    if isinstance(stationary, Compressed):
        _need(current().cfg.sparse, "load_stationary: a compressed tile needs a core with the "
                                    "sparse mode (CoreConfig.sparse)")
        _load_compressed(current(), stationary)
    else:
        _stationary(current(), as_view(stationary, "stationary"))


@dataclass(frozen=True)
class Compressed:
    """A compressed stationary tile for ``nc_matmul`` (``golden.sparse``), made by
    :func:`compressed`."""

    tile: View  #: S x M SBUF words: value | tag << 16 (``golden.sparse.pack_words``)
    pattern: str  #: ``"2:4"``, ``"4:8"``, ``"4:12"`` or ``"4:16"``
    dtype: Dtype  #: the values' format (bf16 or fp8)
    k: int  #: the rows of K it stands for

    @property
    def ratio(self) -> int:
        return sparse.pattern(self.pattern).ratio


def compressed(tile, pattern: str, dtype, k: int) -> Compressed:
    """A compressed stationary tile of ``pattern`` standing for K = ``k`` rows: ``tile`` the
    SBUF tile of its packed words (``golden.sparse.pack_words``: S = slots(K) partitions, M
    words; a float32 tile, as ``dma_copy`` brings the words unchanged), ``dtype`` its values'
    format. ``nc_matmul`` takes it as its stationary operand on a core with the sparse mode."""
    k_ = current()
    view = as_view(tile, "tile")
    _in(view, (SBUF,), "compressed tile")
    _need(pattern in sparse.PATTERNS, f"pattern must be one of {', '.join(sparse.PATTERNS)}, "
                                      f"not {pattern!r}")
    d = dtype_of(dtype)
    _need(d in OPERAND_DTYPES, f"compressed: dtype must be bfloat16, float8_e4m3 or "
                               f"float8_e5m2, not {d.golden_name}")
    _need(view.dtype == Dtype.FP32, f"compressed: the tile holds 32-bit words (value and tag): "
                                    f"float32, not {view.dtype.golden_name}")
    _need(isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 1,
          f"compressed: k must be a positive integer, not {k!r}")
    slots = sparse.pattern(pattern).slots(int(k))
    _need(view.shape[0] == slots, f"compressed: K = {k} in {pattern} has {slots} rows, the "
                                  f"tile {view.shape[0]}")
    _need(slots <= k_.cfg.n, f"compressed: K = {k} in {pattern} needs {slots} rows, more "
                             f"than N = {k_.cfg.n}")
    return Compressed(view, pattern, d, int(k))


def nc_matmul(dst, stationary, moving, accumulate: bool = False) -> None:
    """``dst = stationary.T @ moving`` (or ``dst += ...`` with ``accumulate``): stationary
    ``(K, M)`` and moving ``(K, F)`` SBUF tiles of bf16 / fp8 (K, M <= N, F <= a PSUM bank),
    ``dst`` an ``(M, F)`` PSUM tile from partition 0. fp32 products and sums in the contract's
    order (``golden.tensor_engine``). The stationary tile is loaded only when it is not the one
    loaded last (same tile, same part, unchanged since).

    A :class:`Compressed` stationary tile (:func:`compressed`; a core with the sparse mode):
    the sparse matmul of ``golden.sparse``, K up to R·N; ``moving`` is then the K x F tile in
    the sparse layout, ``ceil(K / R)`` partitions of ``F · R`` words
    (``golden.sparse.moving_layout``), and MACs count the dense K·M·F."""
    k = current()
    dst = as_view(dst, "dst")
    if isinstance(stationary, Compressed):
        _nc_matmul_sparse(k, dst, stationary, as_view(moving, "moving"), accumulate)
        return
    st, mv = as_view(stationary, "stationary"), as_view(moving, "moving")
    _in(st, (SBUF,), "stationary")
    _in(mv, (SBUF,), "moving")
    _in(dst, (PSUM,), "dst")
    for name, v in (("stationary", st), ("moving", mv)):
        _need(v.dtype in OPERAND_DTYPES, f"nc_matmul: {name} must be bfloat16, float8_e4m3 or "
                                         f"float8_e5m2, not {v.dtype.golden_name}")
    (kk, m), (k2, f) = st.shape, mv.shape
    _need(kk == k2, f"nc_matmul: stationary and moving must share K (their partitions), not "
                    f"{kk} and {k2}")
    _matmul(k, dst, mv, kk, m, f, accumulate, lambda: _stationary(k, st))


_ROUNDING = {"rne": Rounding.RNE, "rtz": Rounding.RTZ, "sr": Rounding.SR}


def _rounding(rounding) -> Rounding:
    if isinstance(rounding, Rounding):
        return rounding
    if isinstance(rounding, str) and rounding.lower() in _ROUNDING:
        return _ROUNDING[rounding.lower()]
    raise KernelError(f"rounding must be 'rne', 'rtz' or 'sr', not {rounding!r}")


def _fp32_bits(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise KernelError(f"{what} must be a number (an fp32 immediate), not {value!r}")
    try:
        with np.errstate(over="ignore"):
            f = np.float32(value)
        exact = float(f) == float(value) or not np.isfinite(float(value))
    except OverflowError:
        exact = False
    if not exact:
        raise KernelError(f"{what} = {value!r} is not an fp32 value")
    return int(np.array(f).view(np.uint32))


def activation(dst, op, data, bias=None, scale: float = 1.0, *, rounding="rne",
               saturate: bool | None = None) -> None:
    """``dst = cast(op(data * scale + bias))`` on the activation engine: ``data`` a PSUM tile or
    an SBUF float32 tile, ``dst`` an SBUF tile of any dtype on the same partitions (lane l of the
    engine reads and writes partition l); ``bias`` an SBUF float32 ``(rows, 1)`` tile on the same
    partitions or None; ``scale`` an fp32 number; ``op`` ``nl.copy`` or ``nl.relu``. The cast
    (fp32 to ``dst``'s dtype) rounds by ``rounding`` ('rne', 'rtz', 'sr': the PRNG lanes of
    ``set_seed``); ``saturate`` defaults to True for fp8 targets, False otherwise."""
    k = current()
    dst, data = as_view(dst, "dst"), as_view(data, "data")
    _in(dst, (SBUF,), "dst")
    _in(data, (SBUF, PSUM), "data")
    try:
        func = ActivationFunc(op)
    except ValueError:
        raise KernelError(f"activation: op must be nl.copy or nl.relu (the engine's "
                          f"functions), not {op!r}") from None
    _same_shape(dst, data, "activation")
    _need(dst.p0 == data.p0, f"activation: data and dst must be on the same partitions (lane l "
                             f"reads and writes partition l), not from {data.p0} and {dst.p0}")
    rows, cols = data.shape
    _need(cols <= _FIELD16, f"activation: at most {_FIELD16} columns a command, not {cols}")
    src_sbuf = data.buffer == SBUF
    if src_sbuf:
        _need(data.dtype == Dtype.FP32, f"activation: an SBUF data tile must be float32 (the "
                                        f"engine reads fp32 words), not "
                                        f"{data.dtype.golden_name}")
        apart = abs((data.base.addr + data.f0) - (dst.base.addr + dst.f0))
        _need(data.base is not dst.base or apart == 0 or apart >= cols,
              "activation: SBUF data and dst overlap without being the same words")
    bias_en, bias_addr = 0, 0
    if bias is not None:
        b = as_view(bias, "bias")
        _in(b, (SBUF,), "bias")
        _need(b.dtype == Dtype.FP32, f"activation: bias must be float32, not "
                                     f"{b.dtype.golden_name}")
        _need(b.shape == (rows, 1) and b.p0 == data.p0,
              f"activation: bias must be one column on data's partitions {data.p0}.."
              f"{data.p1 - 1}, not shape {b.shape} from partition {b.p0}")
        bias_en, bias_addr = 1, b.base.addr + b.f0
    mode = _rounding(rounding)
    if saturate is None:
        saturate = DEFAULT_SATURATE[dst.dtype.golden_name]
    if not isinstance(saturate, (bool, np.bool_)):
        raise KernelError(f"activation: saturate must be True, False or None, not {saturate!r}")
    k.emit(Opcode.ACTIVATE, func=int(func), src_sbuf=int(src_sbuf), part=data.p0, rows=rows,
           cols=cols, src_bank=0 if src_sbuf else data.base.bank,
           src_addr=data.base.addr + data.f0, bias_en=bias_en, bias_addr=bias_addr,
           scale=_fp32_bits(scale, "scale"), dtype=int(dst.dtype), mode=int(mode),
           saturate=int(bool(saturate)), dst_addr=dst.base.addr + dst.f0)
    k.wrote(dst)


def tensor_copy(dst, src, *, rounding="rne", saturate: bool | None = None) -> None:
    """``dst = cast(src)``: a PSUM tile or an SBUF float32 tile into an SBUF tile of any dtype
    on the same partitions (``activation`` with ``nl.copy``, scale 1 and no bias, which leave
    every fp32 value as it is, -0 and NaN payloads included, before the cast)."""
    activation(dst, ActivationFunc.IDENTITY, src, None, 1.0, rounding=rounding,
               saturate=saturate)


# --- The vector engine ------------------------------------------------------------------------

#: The numpy functions NKI kernels pass as ``op`` -> the engine's operation.
_UFUNCS = {np.add: AluOp.ADD, np.subtract: AluOp.SUBTRACT, np.multiply: AluOp.MULTIPLY,
           np.maximum: AluOp.MAX, np.minimum: AluOp.MIN, np.greater: AluOp.GREATER}


_NL_NAMES = {AluOp.ADD: "add", AluOp.SUBTRACT: "subtract", AluOp.MULTIPLY: "multiply",
             AluOp.MAX: "maximum", AluOp.MIN: "minimum", AluOp.GREATER: "greater"}


def _alu(op, what: str, allowed=tuple(AluOp)) -> AluOp:
    try:
        code = op if isinstance(op, AluOp) else _UFUNCS.get(op)
    except TypeError:  # unhashable
        code = None
    if code not in allowed:
        names = ", ".join(f"nl.{_NL_NAMES[o]}" for o in allowed)
        raise KernelError(f"{what}: op must be one of {names} (or numpy's), not {op!r}")
    return code


def _vector_engine(k, what: str) -> None:
    _need(k.cfg.vector_engine, f"{what} runs on the vector engine, which this core does not "
                               f"have (golden.iss.CoreConfig(vector_engine=True))")


def _operand(v: View, dst: View, name: str, what: str, *, elementwise: bool = True) -> dict:
    """The fields of a vector operand ``in0`` / ``in1`` read into ``dst``'s lanes (an
    ``elementwise`` one has ``dst``'s shape and is ``dst`` or apart from it in SBUF)."""
    _in(v, (SBUF, PSUM), f"{what}: {name}")
    if elementwise:
        _same_shape(dst, v, what)
    _need(v.p0 == dst.p0, f"{what}: {name} and dst must be on the same partitions (lane l "
                          f"reads and writes partition l), not from {v.p0} and {dst.p0}")
    addr = v.base.addr + v.f0
    if v.buffer == SBUF and elementwise:
        apart = abs(addr - (dst.base.addr + dst.f0))
        _need(apart == 0 or apart >= v.shape[1],
              f"{what}: {name} and dst overlap in SBUF without being the same words")
    return {"sbuf": int(v.buffer == SBUF), "bank": 0 if v.buffer == SBUF else v.base.bank,
            "addr": addr, "dtype": int(v.dtype)}


def _result(dst: View, what: str, rounding, saturate) -> dict:
    _in(dst, (SBUF,), f"{what}: dst")
    if saturate is None:
        saturate = DEFAULT_SATURATE[dst.dtype.golden_name]
    if not isinstance(saturate, (bool, np.bool_)):
        raise KernelError(f"{what}: saturate must be True, False or None, not {saturate!r}")
    return {"dtype": int(dst.dtype), "mode": int(_rounding(rounding)),
            "saturate": int(bool(saturate)), "dst_addr": dst.base.addr + dst.f0}


def _fields(prefix: str, operand: dict) -> dict:
    return {f"{prefix}_{key}": value for key, value in operand.items()}


def tensor_tensor(dst, data1, data2, op, *, rounding="rne", saturate: bool | None = None
                  ) -> None:
    """``dst = cast(data1 op data2)`` elementwise on the vector engine: ``data1`` and
    ``data2`` SBUF tiles of any dtype or PSUM tiles (float32), ``dst`` an SBUF tile of any
    dtype, all of one shape on the same partitions. ``op``: ``nl.add``, ``nl.subtract``,
    ``nl.multiply``, ``nl.maximum``, ``nl.minimum``, ``nl.greater`` (or numpy's functions).
    One IEEE binary32 operation on the exactly widened inputs (``golden.vector``), then the cast
    as ``activation``'s (``rounding``, ``saturate``)."""
    k = current()
    what = "tensor_tensor"
    _vector_engine(k, what)
    dst, a, b = as_view(dst, "dst"), as_view(data1, "data1"), as_view(data2, "data2")
    code = _alu(op, what)
    rows, cols = dst.shape
    _need(cols <= _FIELD16, f"{what}: at most {_FIELD16} columns a command, not {cols}")
    out = _result(dst, what, rounding, saturate)
    k.emit(Opcode.TENSOR_TENSOR, alu=int(code), part=dst.p0, rows=rows, cols=cols,
           **_fields("in0", _operand(a, dst, "data1", what)),
           **_fields("in1", _operand(b, dst, "data2", what)), **out)
    k.wrote(dst)


def tensor_scalar(dst, data, op, operand, *, reverse: bool = False, rounding="rne",
                  saturate: bool | None = None) -> None:
    """``dst = cast(data op operand)`` (``cast(operand op data)`` with ``reverse``) on the
    vector engine: ``data`` an SBUF tile of any dtype or a PSUM tile, ``operand`` an fp32
    number, ``dst`` an SBUF tile of ``data``'s shape and partitions; ``op`` as
    :func:`tensor_tensor`'s."""
    k = current()
    what = "tensor_scalar"
    _vector_engine(k, what)
    dst, x = as_view(dst, "dst"), as_view(data, "data")
    code = _alu(op, what)
    if not isinstance(reverse, (bool, np.bool_)):
        raise KernelError(f"{what}: reverse must be True or False, not {reverse!r}")
    rows, cols = dst.shape
    _need(cols <= _FIELD16, f"{what}: at most {_FIELD16} columns a command, not {cols}")
    out = _result(dst, what, rounding, saturate)
    k.emit(Opcode.TENSOR_SCALAR, alu=int(code), reverse=int(bool(reverse)), part=dst.p0,
           rows=rows, cols=cols, **_fields("in0", _operand(x, dst, "data", what)),
           scalar=_fp32_bits(operand, f"{what}: operand"), **out)
    k.wrote(dst)


def tensor_reduce(dst, data, op, axis: int = 1, *, rounding="rne",
                  saturate: bool | None = None) -> None:
    """``dst[p, 0] = cast(fold of data[p, :])`` along the free axis (``axis`` 1, the only one
    the engine folds): ``op`` ``nl.add`` (from +0.0), ``nl.maximum`` (from -inf) or
    ``nl.minimum`` (from +inf), in increasing column order; ``data`` an SBUF tile of any dtype
    or a PSUM tile, ``dst`` an SBUF ``(rows, 1)`` tile on its partitions."""
    k = current()
    what = "tensor_reduce"
    _vector_engine(k, what)
    dst, x = as_view(dst, "dst"), as_view(data, "data")
    code = _alu(op, what, (AluOp.ADD, AluOp.MAX, AluOp.MIN))
    _need(axis in (1, -1), f"{what}: the engine folds the free axis (axis=1), not axis={axis!r}")
    rows, cols = x.shape
    _need(dst.shape == (rows, 1), f"{what}: dst must be ({rows}, 1), not {dst.shape}")
    _need(cols <= _FIELD16, f"{what}: at most {_FIELD16} columns a command, not {cols}")
    out = _result(dst, what, rounding, saturate)
    k.emit(Opcode.TENSOR_REDUCE, alu=int(code), part=x.p0, rows=rows, cols=cols,
           **_fields("in0", _operand(x, dst, "data", what, elementwise=False)), **out)
    k.wrote(dst)


def nc_transpose(dst, data) -> None:
    """``dst[m, k] = data[k, m]``: the (K, M) SBUF tile ``data`` (any dtype) into the (M, K)
    SBUF tile ``dst`` of the same dtype, the words moved unchanged (M <= N partitions from any
    first one). ``dst`` must not share a word with ``data``. (A PSUM result is copied to SBUF
    first: ``tensor_copy`` to a float32 tile.)"""
    k = current()
    what = "nc_transpose"
    _vector_engine(k, what)
    dst, x = as_view(dst, "dst"), as_view(data, "data")
    _in(dst, (SBUF,), f"{what}: dst")
    _in(x, (SBUF,), f"{what}: data")
    rows, cols = x.shape
    _need(dst.shape == (cols, rows), f"{what}: dst must be ({cols}, {rows}), not {dst.shape}")
    _need(dst.dtype == x.dtype, f"{what}: dst must have data's dtype "
                                f"({x.dtype.golden_name}): a transpose moves bits, not "
                                f"{dst.dtype.golden_name}")
    src_addr, dst_addr = x.base.addr + x.f0, dst.base.addr + dst.f0
    meet = (x.p0 < dst.p1 and dst.p0 < x.p1 and src_addr < dst_addr + rows
            and dst_addr < src_addr + cols)
    _need(not meet, f"{what}: dst shares SBUF words with data")
    k.emit(Opcode.TRANSPOSE, part=x.p0, rows=rows, cols=cols, src_addr=src_addr,
           dst_part=dst.p0, dst_addr=dst_addr)
    k.wrote(dst)


def set_seed(seed: int) -> None:
    """Restart every PRNG lane of the activation engine from ``seed`` (64 bits)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or \
            not 0 <= seed < 1 << 64:
        raise KernelError(f"set_seed: seed must be an integer in [0, 2**64), not {seed!r}")
    current().emit(Opcode.SET_SEED, seed=int(seed))


def barrier() -> None:
    """Wait until every engine is idle (ordering only)."""
    current().emit(Opcode.BARRIER)
