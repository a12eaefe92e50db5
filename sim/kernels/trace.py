"""Tracing a kernel: tensors in DRAM, SBUF and PSUM, their allocation, and the descriptors.

A kernel is a plain Python function. While it runs inside :func:`tracing`, every
``nl.ndarray`` allocates a :class:`Tensor` and every ``nisa`` / ``ncc`` instruction checks its
operands and appends one or more descriptors (``golden.isa``) to the :class:`Kernel`'s program,
each with the kernel's file and line that issued it. Nothing runs here: the program runs
afterwards on the golden ISS, the RTL or the board.

**Layout.** A tile's partition axis is SBUF's (PSUM's) partitions: a ``(p, f)`` tile holds
element ``[i, j]`` in partition ``i``, word ``addr + j`` (PSUM: bank ``bank``, word
``addr + j``). Every element is one 32-bit word whatever its dtype (narrow values zero-extended,
as the DMA leaves them). A tile reserves its ``f`` words in every partition; tiles never overlap.
A DRAM tensor is a row-major ``(rows, cols)`` array at a 64-byte boundary.

**Lifetime.** A tile is freed when the kernel drops its last reference to it, at the end of a
``with nl.scope():`` block that made it, or when the kernel returns. A tile made in a loop body
is freed when the next iteration rebinds its name (CPython frees it at once), which is after the
next one is made: two take turns, double buffered. Where only one fits, make it in a scope. A
freed tile's words may be given to a new tile; the core runs commands in program order (the
sequencer's hazard checks keep it so), so no command sees a newer tile's data through an older
one.

**Errors.** Every check raises :class:`KernelError` naming the kernel's file and line, before
any descriptor is made: a kernel that traces is one the core accepts.
"""

from __future__ import annotations

import contextlib
import os
import sys
import weakref
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from golden.isa import DTYPE_BYTES, Dtype, Opcode, encode
from golden.iss import CoreConfig

__all__ = ["KernelError", "Buffer", "Tensor", "View", "Kernel", "tracing", "current", "dtype_of",
           "NUMPY_DTYPES", "where"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_SKIP = (_PACKAGE + os.sep, os.path.abspath(contextlib.__file__))


class KernelError(Exception):
    """An illegal kernel statement: ``str(err)`` is ``"FILE:LINE: message"`` (the kernel's
    line that issued it); :attr:`file`, :attr:`line` and :attr:`reason` hold the parts."""

    def __init__(self, reason: str, loc: tuple[str, int] | None = None):
        self.file, self.line = loc if loc is not None else where()
        self.reason = reason
        super().__init__(f"{_show(self.file)}:{self.line}: {reason}")


def _show(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def where() -> tuple[str, int]:
    """The file and line of the innermost frame outside this package (and ``contextlib``, for
    the end of an ``nl.scope()`` block): the kernel's statement (or the caller's, for code that
    calls the API directly)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = os.path.abspath(frame.f_code.co_filename)
        if not name.startswith(_SKIP):
            return name, frame.f_lineno
        frame = frame.f_back
    return "<kernel>", 0


class Buffer(str):
    """Where a tensor lives (``nl.sbuf``, ``nl.psum``, ``nl.shared_hbm``)."""

    __slots__ = ()


SBUF, PSUM, HBM = Buffer("sbuf"), Buffer("psum"), Buffer("hbm")

#: The numpy (ml_dtypes) dtype of each of the core's dtypes: what a kernel's inputs and
#: outputs hold.
NUMPY_DTYPES = {Dtype.BF16: np.dtype(ml_dtypes.bfloat16),
                Dtype.FP8_E4M3: np.dtype(ml_dtypes.float8_e4m3fn),
                Dtype.FP8_E5M2: np.dtype(ml_dtypes.float8_e5m2),
                Dtype.FP16: np.dtype(np.float16), Dtype.FP32: np.dtype(np.float32)}
_BY_NUMPY = {v: k for k, v in NUMPY_DTYPES.items()}


def dtype_of(value, what: str = "dtype") -> Dtype:
    """The core's :class:`~golden.isa.Dtype` of ``value``: a ``Dtype``, a numpy / ml_dtypes
    dtype (or type) of one of the five formats, or its name (``"bfloat16"``)."""
    if isinstance(value, Dtype):
        return value
    try:
        d = np.dtype(value)
    except TypeError:
        d = None
    if d is not None and d in _BY_NUMPY:
        return _BY_NUMPY[d]
    names = ", ".join(str(v) for v in NUMPY_DTYPES.values())
    raise KernelError(f"{what} must be one of {names}, not {value!r}")


def _slice(key, size: int, axis: str) -> tuple[int, int]:
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        i = int(key) + (size if key < 0 else 0)
        if not 0 <= i < size:
            raise KernelError(f"index {int(key)} out of range for the {axis} axis of size {size}")
        return i, i + 1
    if isinstance(key, slice):
        if key.step not in (None, 1):
            raise KernelError(f"the {axis} axis takes slices with step 1, not {key.step}")
        lo, hi, _ = key.indices(size)
        if (key.start is not None and not -size <= key.start <= size) or \
                (key.stop is not None and not -size <= key.stop <= size):
            raise KernelError(f"slice {key.start}:{key.stop} outside the {axis} axis of size "
                              f"{size}")
        if hi <= lo:
            raise KernelError(f"slice {key.start}:{key.stop} of the {axis} axis is empty")
        return lo, hi
    raise KernelError(f"index the {axis} axis with an integer or a slice, not {key!r}")


class _Region:
    """Indexing shared by :class:`Tensor` and :class:`View` (both 2-D)."""

    def __getitem__(self, key) -> View:
        if not isinstance(key, tuple):
            key = (key, slice(None))
        if len(key) != 2:
            raise KernelError(f"tensors are 2-D: index with [rows, cols], not {len(key)} "
                              f"indices")
        base, (p0, p1), (f0, f1) = self._parts()
        q0, q1 = _slice(key[0], p1 - p0, "partition" if base.buffer != HBM else "row")
        g0, g1 = _slice(key[1], f1 - f0, "free" if base.buffer != HBM else "column")
        return View(base, p0 + q0, p0 + q1, f0 + g0, f0 + g1)


class Tensor(_Region):
    """A tensor the kernel allocated (or an input): ``buffer``, ``shape`` (2-D), ``dtype``.
    SBUF: words ``addr ..`` of every partition; PSUM: bank ``bank``, words ``addr ..``; DRAM:
    byte ``addr``. Index it (``t[0:4, 8:16]``) for a :class:`View` of a part."""

    def __init__(self, kernel: Kernel, buffer: Buffer, shape, dtype: Dtype, name: str):
        self._kernel = weakref.ref(kernel)
        self.buffer, self.shape, self.dtype, self.name = buffer, shape, dtype, name
        self.serial = kernel.next_serial()
        self.freed: tuple[str, int] | None = None  #: where it was freed
        self.addr = self.bank = 0

    def _parts(self):
        return self, (0, self.shape[0]), (0, self.shape[1])

    def free(self, loc=None) -> None:
        if self.freed is None:
            self.freed = loc or where()
            k = self._kernel()
            if k is not None:
                k.release(self)

    def __del__(self):
        if self.buffer != HBM and self.freed is None:
            with contextlib.suppress(Exception):
                self.free(("<dropped>", 0))

    def __repr__(self) -> str:
        return f"<{self.name}: {self.buffer} {self.shape} {self.dtype.golden_name}>"


@dataclass(frozen=True, eq=False)
class View(_Region):
    """Rows (partitions) ``p0 .. p1 - 1`` and columns ``f0 .. f1 - 1`` of a :class:`Tensor`."""

    base: Tensor
    p0: int
    p1: int
    f0: int
    f1: int

    def _parts(self):
        return self.base, (self.p0, self.p1), (self.f0, self.f1)

    @property
    def shape(self) -> tuple[int, int]:
        return self.p1 - self.p0, self.f1 - self.f0

    @property
    def buffer(self) -> Buffer:
        return self.base.buffer

    @property
    def dtype(self) -> Dtype:
        return self.base.dtype

    def key(self) -> tuple:
        """Which words of which tensor: the same key, the same words (while nothing writes
        them: :meth:`Kernel.wrote`)."""
        return self.base.serial, self.p0, self.p1, self.f0, self.f1

    def overlaps(self, key: tuple) -> bool:
        """Whether this view shares a word with the view of ``key`` (:meth:`key`'s, perhaps
        followed by more: a compressed tile's pattern and K)."""
        serial, p0, p1, f0, f1 = key[:5]
        return (serial == self.base.serial and self.p0 < p1 and p0 < self.p1
                and self.f0 < f1 and f0 < self.f1)


def as_view(x, what: str) -> View:
    """``x`` (a :class:`Tensor` or :class:`View`) as a view, checked to be live."""
    if isinstance(x, Tensor):
        x = x[:, :]
    if not isinstance(x, View):
        raise KernelError(f"{what} must be a tensor or a slice of one, not {type(x).__name__}")
    if x.base.freed is not None:
        f, line = x.base.freed
        at = f" (freed at {_show(f)}:{line})" if line else f" ({f})"
        raise KernelError(f"{what} ({x.base.name}) is used after it was freed{at}")
    return x


class _Intervals:
    """Free word ranges of one space, first fit."""

    def __init__(self, size: int):
        self.size = size
        self.free: list[tuple[int, int]] = [(0, size)]

    def take(self, words: int, at: int | None = None) -> int | None:
        """The first free run of ``words`` words (or exactly ``at .. at + words - 1``, if
        free), taken; None if there is none."""
        for i, (lo, hi) in enumerate(self.free):
            start = lo if at is None else at
            if lo <= start and start + words <= hi:
                self.free[i:i + 1] = [span for span in ((lo, start), (start + words, hi))
                                      if span[1] > span[0]]
                return start
        return None

    def give(self, lo: int, words: int) -> None:
        spans = sorted([*self.free, (lo, lo + words)])
        merged: list[tuple[int, int]] = []
        for a, b in spans:
            if merged and merged[-1][1] == a:
                merged[-1] = (merged[-1][0], b)
            else:
                merged.append((a, b))
        self.free = merged

    def largest(self) -> int:
        return max((hi - lo for lo, hi in self.free), default=0)


@dataclass
class Kernel:
    """One core's trace of a kernel: its program, the kernel line of each command, its DRAM
    image and tensors, and counters (MACs of its ``nc_matmul`` s)."""

    cfg: CoreConfig
    rank: int = 0
    ranks: int = 1
    program: list = field(default_factory=list)
    lines: list = field(default_factory=list)  #: (file, line) of each command
    macs: int = 0

    def __post_init__(self):
        self.dram = np.zeros(self.cfg.dram_bytes, dtype=np.uint8)
        self.dram_top = 0
        self.dram_tensors: list[Tensor] = []
        self._sbuf = _Intervals(self.cfg.sbuf_words)
        self._psum = [_Intervals(self.cfg.psum_words) for _ in range(self.cfg.psum_banks)]
        self._serial = 0
        self._live: dict[int, weakref.ref] = {}
        self._scopes: list[list[weakref.ref]] = []
        self.stationary: tuple | None = None  #: the key of the loaded stationary tile

    def next_serial(self) -> int:
        self._serial += 1
        return self._serial

    # --- allocation ---------------------------------------------------------------------------

    def dram_tensor(self, shape, dtype: Dtype, name: str, data=None) -> Tensor:
        rows, cols = shape
        dtype = dtype_of(dtype, f"{name}'s dtype")
        size = DTYPE_BYTES[dtype]
        t = Tensor(self, HBM, (rows, cols), dtype, name)
        t.addr = self.dram_top
        end = t.addr + rows * cols * size
        if end > self.cfg.dram_bytes:
            raise KernelError(f"DRAM overflow: {name} {shape} {dtype.golden_name} needs bytes "
                              f"{t.addr}..{end - 1}, DRAM has {self.cfg.dram_bytes}")
        self.dram_top = -(-end // 64) * 64
        if data is not None:  # values of the dtype, or its bit patterns as integers
            d = np.asarray(data)
            d = d.astype(f"<u{size}") if d.dtype.kind in "ui" else \
                np.ascontiguousarray(d).view(f"<u{size}")
            self.dram[t.addr:end] = d.reshape(-1).view(np.uint8)
        self.dram_tensors.append(t)
        return t

    def tile(self, shape, dtype: Dtype, buffer: Buffer, name: str, *,
             addr: int | None = None, bank: int | None = None) -> Tensor:
        """A tile; ``addr`` (and for PSUM ``bank``) place it there instead of the first free
        run (direct allocation: an error if those words are taken)."""
        p, f = shape
        c = self.cfg
        if p > c.n:
            raise KernelError(f"a {buffer} tile has at most N = {c.n} partitions (its first "
                              f"axis), not {p}")
        t = Tensor(self, buffer, (p, f), dtype_of(dtype, f"{name}'s dtype"), name)
        if buffer == SBUF and addr is not None:
            if self._sbuf.take(f, addr) is None:
                raise KernelError(f"SBUF words {addr}..{addr + f - 1} are not free for {name}")
            t.addr = addr
        elif buffer == PSUM and (addr is not None or bank is not None):
            if dtype != Dtype.FP32:
                raise KernelError(f"PSUM holds float32 only, not {dtype.golden_name}")
            bank, addr = bank or 0, addr or 0
            if not 0 <= bank < c.psum_banks or \
                    self._psum[bank].take(f, addr) is None:
                raise KernelError(f"PSUM bank {bank}, words {addr}..{addr + f - 1} are not "
                                  f"free for {name}")
            t.bank, t.addr = bank, addr
        elif buffer == SBUF:
            addr = self._sbuf.take(f)
            if addr is None:
                raise KernelError(f"SBUF overflow: {name}, {shape}, needs {f} words of "
                                  f"every partition; the largest free run is "
                                  f"{self._sbuf.largest()} of {c.sbuf_words}")
            t.addr = addr
        else:
            if dtype != Dtype.FP32:
                raise KernelError(f"PSUM holds float32 only, not {dtype.golden_name}")
            if f > c.psum_words:
                raise KernelError(f"a PSUM tile has at most {c.psum_words} words a partition "
                                  f"(one bank), not {f}")
            for bank, space in enumerate(self._psum):
                addr = space.take(f)
                if addr is not None:
                    t.bank, t.addr = bank, addr
                    break
            else:
                largest = max(s.largest() for s in self._psum)
                raise KernelError(f"PSUM overflow: {name}, {shape}, needs {f} words in one "
                                  f"bank; the largest free run is {largest} of {c.psum_words}"
                                  f" ({c.psum_banks} banks)")
        self._live[t.serial] = weakref.ref(t)
        if self._scopes:
            self._scopes[-1].append(weakref.ref(t))
        return t

    def release(self, t: Tensor) -> None:
        if self._live.pop(t.serial, None) is None:
            return
        if t.buffer == SBUF:
            self._sbuf.give(t.addr, t.shape[1])
        elif t.buffer == PSUM:
            self._psum[t.bank].give(t.addr, t.shape[1])

    @contextlib.contextmanager
    def scope(self):
        self._scopes.append([])
        try:
            yield
        finally:
            loc = where()
            for ref in self._scopes.pop():
                t = ref()
                if t is not None:
                    t.free(loc)

    def finish(self) -> None:
        """The kernel returned: every tile is freed."""
        for ref in list(self._live.values()):
            t = ref()
            if t is not None:
                t.free(("<end of kernel>", 0))

    # --- commands -----------------------------------------------------------------------------

    def emit(self, op: Opcode, **fields) -> None:
        try:
            words = encode(op, **fields)
        except ValueError as exc:  # a field too wide: the tracer's checks should catch it first
            raise KernelError(f"{op.name}: {exc}") from None
        self.program.append(words)
        self.lines.append(where())

    def wrote(self, view: View) -> None:
        """An instruction writes ``view``: a loaded stationary tile it overlaps is stale."""
        if self.stationary is not None and view.overlaps(self.stationary):
            self.stationary = None


_CURRENT: list[Kernel] = []


def current() -> Kernel:
    """The kernel being traced (a :class:`KernelError` outside :func:`tracing`)."""
    if not _CURRENT:
        raise KernelError("nclite kernel instructions run only while a kernel is traced "
                          "(sim.kernels.run_kernel, nclite kernel run)")
    return _CURRENT[-1]


@contextlib.contextmanager
def tracing(kernel: Kernel):
    """Make ``kernel`` the one that ``nl`` and ``nisa`` calls record into."""
    _CURRENT.append(kernel)
    try:
        yield kernel
    finally:
        _CURRENT.pop()
        kernel.finish()
