"""``nl``: allocation, dtypes and the SPMD rank, as NKI's ``nki.language`` names them.

Import it as NKI kernels do: ``from sim.kernels import nl``. What the core has:

* dtypes ``nl.bfloat16``, ``nl.float8_e4m3``, ``nl.float8_e5m2``, ``nl.float16``,
  ``nl.float32`` (numpy / ml_dtypes dtypes, so that inputs and outputs are plain numpy arrays);
* buffers ``nl.sbuf``, ``nl.psum``, ``nl.shared_hbm`` (DRAM; ``nl.hbm`` is the same);
* :func:`ndarray` (a tile or a DRAM tensor), :func:`scope`, :func:`program_id`,
  :func:`num_programs`, :data:`tile_size`;
* activation functions ``nl.copy`` (``nl.identity``) and ``nl.relu``;
* the vector engine's operations ``nl.add``, ``nl.subtract``, ``nl.multiply``,
  ``nl.maximum``, ``nl.minimum``, ``nl.greater``.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from golden.isa import ActivationFunc, AluOp

from .trace import HBM, PSUM, SBUF, KernelError, Tensor, current, dtype_of, where

__all__ = ["bfloat16", "float8_e4m3", "float8_e5m2", "float16", "float32", "sbuf", "psum",
           "shared_hbm", "hbm", "ndarray", "scope", "program_id", "num_programs", "tile_size",
           "copy", "identity", "relu", "add", "subtract", "multiply", "maximum", "minimum",
           "greater"]

bfloat16 = np.dtype(ml_dtypes.bfloat16)
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)

sbuf, psum, shared_hbm = SBUF, PSUM, HBM
hbm = HBM

#: Activation functions (``op`` of ``nisa.activation``): the engine's.
copy = identity = ActivationFunc.IDENTITY
relu = ActivationFunc.RELU
#: The vector engine's operations (``op`` of ``nisa.tensor_tensor``, ``tensor_scalar``,
#: ``tensor_reduce``; numpy's ``np.add`` ... are taken too).
add, subtract, multiply = AluOp.ADD, AluOp.SUBTRACT, AluOp.MULTIPLY
maximum, minimum, greater = AluOp.MAX, AluOp.MIN, AluOp.GREATER

_BUFFERS = {SBUF: "sbuf", PSUM: "psum", HBM: "shared_hbm"}


def ndarray(shape, dtype, buffer=SBUF, name: str | None = None, *, addr: int | None = None,
            bank: int | None = None) -> Tensor:
    """A new tensor: a tile of ``shape`` ``(partitions, free)`` in ``nl.sbuf`` or ``nl.psum``
    (at most N partitions; PSUM: float32, at most one bank's words), or a DRAM tensor in
    ``nl.shared_hbm`` (any 2-D shape; zeroed). Raises :class:`KernelError` at the kernel's
    line if it does not fit. ``addr`` (SBUF: the first word; PSUM: with ``bank``) places a tile
    there, as NKI's direct allocation does; by default the first free run is taken."""
    k = current()
    if buffer not in _BUFFERS:
        raise KernelError(f"buffer must be nl.sbuf, nl.psum or nl.shared_hbm, not {buffer!r}")
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if len(shape) != 2 or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool)
                                  and s >= 1 for s in shape):
        raise KernelError(f"shape must be 2 positive integers (partitions, free), not {shape}")
    shape = (int(shape[0]), int(shape[1]))
    d = dtype_of(dtype)
    name = name or f"the {_BUFFERS[buffer]} tensor of line {where()[1]}"
    if buffer == HBM:
        if addr is not None or bank is not None:
            raise KernelError("DRAM tensors are laid out in order: no addr or bank")
        return k.dram_tensor(shape, d, name)
    if buffer == SBUF and bank is not None:
        raise KernelError("bank places PSUM tiles, not SBUF ones")
    for key, v in (("addr", addr), ("bank", bank)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))
                              or v < 0):
            raise KernelError(f"{key} must be a non-negative integer, not {v!r}")
    return k.tile(shape, d, buffer, name, addr=addr, bank=bank)


def scope():
    """``with nl.scope(): ...``: the tiles made inside are freed at the end of the block (a
    later use of one is an error), as a loop body's tiles are in NKI."""
    return current().scope()


def program_id(axis: int = 0) -> int:
    """This core's rank in the ring (0 on one core): NKI's SPMD program id."""
    if axis != 0:
        raise KernelError(f"nclite's cores form one axis: program_id(0), not axis {axis}")
    return current().rank


def num_programs(axis: int = 0) -> int:
    """The number of cores the kernel runs on (``--cores``)."""
    if axis != 0:
        raise KernelError(f"nclite's cores form one axis: num_programs(0), not axis {axis}")
    return current().ranks


@dataclass(frozen=True)
class _TileSize:
    """``nl.tile_size``: the core's limits (read while a kernel is traced)."""

    @property
    def pmax(self) -> int:
        """Partitions of a tile: N."""
        return current().cfg.n

    @property
    def psum_fmax(self) -> int:
        """Words of a PSUM tile's partition (one bank)."""
        return current().cfg.psum_words

    @property
    def gemm_stationary_fmax(self) -> int:
        """Columns of an ``nc_matmul`` stationary tile: N."""
        return current().cfg.n

    @property
    def gemm_moving_fmax(self) -> int:
        """Columns of an ``nc_matmul`` moving tile: one PSUM bank."""
        return current().cfg.psum_words

    @property
    def sbuf_words(self) -> int:
        """Words of every SBUF partition."""
        return current().cfg.sbuf_words


tile_size = _TileSize()
