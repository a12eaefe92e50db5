"""A data-parallel training step of an MLP on the cores: forward, loss, backward, all-reduce,
SGD update - every number computed by the core's engines (``nisa`` / ``ncc`` calls traced into
programs).

The model: ``inputs -> hidden (relu) -> classes``, trained on the mean squared error against
one-hot targets (the activation engine has no exp, so no softmax: see docs/training.md).
Activations are laid out as NKI kernels lay them out, features on the partitions and the batch
along the free axis: X is inputs x B, H hidden x B, Z classes x B (B: one core's samples a
step). Every matrix is kept in SBUF in row tiles of N partitions: row r in partition r mod N,
column c at word ``(r // N) * cols + c`` (:class:`Rows`; the host packs DRAM tensors the same
way with :func:`to_tiles`).

One step on core r, its batch shard X_r (inputs x B), Y_r (classes x B, one-hot), B_g = P*B::

    H  = bf16_rne(relu(W1.T @ X + b1))                 tensor engine + activation engine
    Z  = W2.T @ H + b2                                 (fp32)
    D  = Z - Y;  dZ = D * (1/B_g)                      vector engine (fp32)
    loss = sum(D * D) / (2 B_g)                        reductions and a transpose
    gW2 = H @ bf16(dZ).T   gb2 = sum_b dZ              transposes of H and dZ, then MATMULs
    dH  = W2 @ bf16(dZ)                                W2 transposed on the core
    dHp = dH * (H > 0);    gb1 = sum_b dHp            greater, multiply (relu's derivative)
    gW1 = X @ bf16(dHp).T                              transposes of X and dHp
    G  = all_reduce(G)                                 the collective engines (ring)
    w  = cast(w - lr * G)                              bf16 with SR or RNE; or fp32 master
                                                       weights and their bf16 copy (``fp32``)

All parameters live in one **parameter block** (:class:`ParamLayout`: N partitions x words,
W1 | W2 | b1 | b2 in row tiles) and all gradients in one gradient block of the same layout plus
the loss word, so that the all-reduce is one collective per band of link-width partitions and
the update two vector commands. Every core runs the same commands in the same order (only its
batch differs), so after the all-reduce every core holds the same gradient and, with the same
PRNG seed, makes the same SR draws: the weights stay identical on every core.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden.isa import Dtype

from . import isa as nisa
from . import language as nl
from .collectives import all_reduce
from .trace import Kernel, KernelError, Tensor, current, tracing

__all__ = ["MODES", "Mlp", "ParamLayout", "Rows", "to_tiles", "from_tiles", "batch_tiles",
           "StepTensors", "trace_steps"]

#: How the weights are rounded by the update: bf16 weights with stochastic rounding or round to
#: nearest even; or fp32 master weights (their bf16 copy feeds the tensor engine).
MODES = ("sr", "rne", "fp32")


def _positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a positive integer, not {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
    return int(value)


@dataclass(frozen=True)
class Mlp:
    """The model's sizes: ``inputs -> hidden -> classes``, ``batch`` samples per core a
    step."""

    inputs: int = 64
    hidden: int = 32
    classes: int = 10
    batch: int = 8

    def __post_init__(self):
        for name in ("inputs", "hidden", "classes", "batch"):
            _positive(name, getattr(self, name))


def _f32(x: float) -> float:
    """``x`` rounded to the nearest fp32 value (the vector engine's scalars are fp32)."""
    return float(np.float32(x))


def _tiles(rows: int, n: int) -> int:
    return -(-rows // n)


def to_tiles(a, n: int) -> np.ndarray:
    """The (R, C) matrix ``a`` in row tiles of ``n`` partitions: an (n, ceil(R/n) * C) array,
    row r at partition r mod n, columns ``(r // n) * C ..``; zeros where no row falls."""
    a = np.asarray(a)
    rows, cols = a.shape
    t = _tiles(rows, n)
    out = np.zeros((t * n, cols), a.dtype)
    out[:rows] = a
    return out.reshape(t, n, cols).transpose(1, 0, 2).reshape(n, t * cols)


def from_tiles(block, rows: int, cols: int) -> np.ndarray:
    """The (rows, cols) matrix held in row tiles in ``block`` (n x ceil(rows/n) * cols), the
    inverse of :func:`to_tiles`."""
    block = np.asarray(block)
    n = block.shape[0]
    t = _tiles(rows, n)
    return block[:, :t * cols].reshape(n, t, cols).transpose(1, 0, 2).reshape(t * n,
                                                                               cols)[:rows]


def batch_tiles(a, n: int) -> np.ndarray:
    """A step's X or one-hot Y as its DRAM tensor holds it: row tiles of ``n``, bf16."""
    return to_tiles(a, n).astype(nl.bfloat16)


@dataclass(frozen=True)
class ParamLayout:
    """Where W1 (inputs x hidden), W2 (hidden x classes), b1 (hidden x 1) and b2 (classes x 1)
    sit in the parameter block of ``n`` partitions (words of every partition), and the loss word
    of the gradient block after them."""

    mlp: Mlp
    n: int

    @property
    def w1(self) -> int:
        return 0

    @property
    def w2(self) -> int:
        return _tiles(self.mlp.inputs, self.n) * self.mlp.hidden

    @property
    def b1(self) -> int:
        return self.w2 + _tiles(self.mlp.hidden, self.n) * self.mlp.classes

    @property
    def b2(self) -> int:
        return self.b1 + _tiles(self.mlp.hidden, self.n)

    @property
    def words(self) -> int:
        """The parameter block's words a partition."""
        return self.b2 + _tiles(self.mlp.classes, self.n)

    @property
    def loss(self) -> int:
        """The gradient block's loss word (partition 0)."""
        return self.words

    def shapes(self) -> dict[str, tuple[int, int, int]]:
        """name -> (first word, rows, cols)."""
        m = self.mlp
        return {"w1": (self.w1, m.inputs, m.hidden), "w2": (self.w2, m.hidden, m.classes),
                "b1": (self.b1, m.hidden, 1), "b2": (self.b2, m.classes, 1)}

    def pack(self, params: dict, dtype) -> np.ndarray:
        """The parameter block (n x words of ``dtype``) of ``params`` (w1, w2, b1, b2)."""
        block = np.zeros((self.n, self.words), np.float32)
        for name, (off, rows, cols) in self.shapes().items():
            a = np.asarray(params[name], np.float32).reshape(rows, cols)
            block[:, off:off + _tiles(rows, self.n) * cols] = to_tiles(a, self.n)
        return block.astype(dtype)

    def unpack(self, block) -> dict[str, np.ndarray]:
        """w1, w2, b1, b2 (float32) of a parameter block."""
        block = np.asarray(block).astype(np.float32)
        return {name: from_tiles(block[:, off:off + _tiles(rows, self.n) * cols], rows, cols)
                for name, (off, rows, cols) in self.shapes().items()}


@dataclass(frozen=True)
class Rows:
    """A rows x cols matrix in row tiles of N partitions, from word ``off`` of ``tile``."""

    tile: Tensor
    off: int
    rows: int
    cols: int

    @property
    def n(self) -> int:
        return current().cfg.n

    @property
    def tiles(self) -> int:
        return _tiles(self.rows, self.n)

    def height(self, i: int) -> int:
        return min(self.n, self.rows - i * self.n)

    def block(self, i: int, c0: int = 0, c1: int | None = None):
        """Row tile i, columns c0 .. c1 - 1: a (height, c1 - c0) view."""
        c1 = self.cols if c1 is None else c1
        w = self.off + i * self.cols
        return self.tile[0:self.height(i), w + c0:w + c1]


def _new(rows: int, cols: int, dtype, name: str) -> Rows:
    n = current().cfg.n
    return Rows(nl.ndarray((n, _tiles(rows, n) * cols), dtype, buffer=nl.sbuf, name=name), 0,
                rows, cols)


def _transpose(src: Rows, dst: Rows) -> None:
    """``dst = src.T`` in blocks of at most N x N (TRANSPOSE moves the words unchanged)."""
    n = src.n
    for i in range(src.tiles):
        r0, h = i * n, src.height(i)
        for j in range(dst.tiles):
            c0, w = j * n, dst.height(j)
            nisa.nc_transpose(dst.block(j, r0, r0 + h), src.block(i, c0, c0 + w))


def _matmul(psum: list, a: Rows, b: Rows, drain) -> None:
    """``a.T @ b`` (a: K x M, b: K x F, bf16) one M tile at a time into PSUM banks in turn,
    each accumulated over K's tiles and then handed to ``drain(m_tile, psum_view)``."""
    n = a.n
    cols = b.cols
    for mt in range(_tiles(a.cols, n)):
        m0, mh = mt * n, min(n, a.cols - mt * n)
        dst = psum[mt % len(psum)][0:mh, 0:cols]
        for kt in range(a.tiles):
            nisa.nc_matmul(dst, a.block(kt, m0, m0 + mh), b.block(kt), accumulate=kt > 0)
        drain(mt, dst)


@dataclass
class StepTensors:
    """The DRAM tensors of a traced training program: the parameter block (bf16, or fp32 in
    ``fp32`` mode), each step's batch (X and Y in row tiles, bf16) and the loss of every step
    (1 x steps, fp32)."""

    params: Tensor
    x: list[Tensor]
    y: list[Tensor]
    loss: Tensor


def _step(layout: ParamLayout, mode: str, lr: float, batch_total: int, t: StepTensors,
          s: int, psum: list, blocks: dict) -> None:
    """One training step on batch slot ``s`` (see the module's text)."""
    m = layout.mlp
    P, P32, G, bias = blocks["p"], blocks["p32"], blocks["g"], blocks["bias"]
    with nl.scope():
        # The parameters: bf16 for the tensor engine, fp32 bias columns for the activation engine.
        if mode == "fp32":
            nisa.dma_copy(P32, t.params)
            nisa.tensor_copy(P, P32)  # the bf16 copy of the master weights (RNE)
            b_tile, b_off = P32, layout.b1
        else:
            nisa.dma_copy(P, t.params)
            nisa.tensor_scalar(bias, P[:, layout.b1:layout.words], nl.multiply, 1.0)  # widen
            b_tile, b_off = bias, 0
        w1 = Rows(P, layout.w1, m.inputs, m.hidden)
        w2 = Rows(P, layout.w2, m.hidden, m.classes)
        b1 = Rows(b_tile, b_off, m.hidden, 1)
        b2 = Rows(b_tile, b_off + layout.b2 - layout.b1, m.classes, 1)
        gw1, gw2 = Rows(G, layout.w1, m.inputs, m.hidden), Rows(G, layout.w2, m.hidden, m.classes)
        gb1, gb2 = Rows(G, layout.b1, m.hidden, 1), Rows(G, layout.b2, m.classes, 1)

        x = _new(m.inputs, m.batch, nl.bfloat16, "X")
        y = _new(m.classes, m.batch, nl.bfloat16, "Y")
        nisa.dma_copy(x.tile, t.x[s])
        nisa.dma_copy(y.tile, t.y[s])

        # Forward.
        h = _new(m.hidden, m.batch, nl.bfloat16, "H")
        _matmul(psum, w1, x, lambda i, ps: nisa.activation(h.block(i), nl.relu, ps,
                                                            bias=b1.block(i)))
        z = _new(m.classes, m.batch, nl.float32, "Z")
        _matmul(psum, w2, h, lambda i, ps: nisa.activation(z.block(i), nl.copy, ps,
                                                            bias=b2.block(i)))

        # The loss and its gradient: D = Z - Y, dZ = D / B_g, loss = sum(D^2) / (2 B_g).
        d = _new(m.classes, m.batch, nl.float32, "D")
        dzf = _new(m.classes, m.batch, nl.float32, "dZ")
        dz = _new(m.classes, m.batch, nl.bfloat16, "bf16 dZ")
        sq = _new(m.classes, m.batch, nl.float32, "D^2")
        rows = _new(m.classes, 1, nl.float32, "row sums of D^2")
        for i in range(d.tiles):
            nisa.tensor_tensor(d.block(i), z.block(i), y.block(i), nl.subtract)
            nisa.tensor_scalar(dzf.block(i), d.block(i), nl.multiply, _f32(1.0 / batch_total))
            nisa.tensor_copy(dz.block(i), dzf.block(i))
            nisa.tensor_tensor(sq.block(i), d.block(i), d.block(i), nl.multiply)
            nisa.tensor_reduce(rows.block(i), sq.block(i), nl.add)
            nisa.tensor_reduce(gb2.block(i), dzf.block(i), nl.add)
        row = _new(1, m.classes, nl.float32, "the row sums in one partition")
        _transpose(rows, row)
        total = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf, name="sum of D^2")
        nisa.tensor_reduce(total, row.block(0), nl.add)
        nisa.tensor_scalar(G[0:1, layout.loss:layout.loss + 1], total, nl.multiply,
                           _f32(0.5 / batch_total))

        # Backward through the second layer.
        ht = _new(m.batch, m.hidden, nl.bfloat16, "H.T")
        _transpose(h, ht)
        dzt = _new(m.batch, m.classes, nl.bfloat16, "dZ.T")
        _transpose(dz, dzt)
        _matmul(psum, ht, dzt, lambda i, ps: nisa.tensor_copy(gw2.block(i), ps))
        w2t = _new(m.classes, m.hidden, nl.bfloat16, "W2.T")
        _transpose(w2, w2t)
        mask = _new(m.hidden, m.batch, nl.float32, "H > 0")
        dhp = _new(m.hidden, m.batch, nl.float32, "dH * (H > 0)")
        dhb = _new(m.hidden, m.batch, nl.bfloat16, "bf16 dH * (H > 0)")

        def relu_backward(i, ps):
            nisa.tensor_scalar(mask.block(i), h.block(i), nl.greater, 0.0)
            nisa.tensor_tensor(dhp.block(i), ps, mask.block(i), nl.multiply)
            nisa.tensor_copy(dhb.block(i), dhp.block(i))
            nisa.tensor_reduce(gb1.block(i), dhp.block(i), nl.add)

        _matmul(psum, w2t, dz, relu_backward)

        # Backward through the first layer.
        xt = _new(m.batch, m.inputs, nl.bfloat16, "X.T")
        _transpose(x, xt)
        dht = _new(m.batch, m.hidden, nl.bfloat16, "dHp.T")
        _transpose(dhb, dht)
        _matmul(psum, xt, dht, lambda i, ps: nisa.tensor_copy(gw1.block(i), ps))

        # Every core: the sum of the gradients (and of the losses) over the ring.
        all_reduce(G)
        # The update w <- cast(w - lr * g) of every parameter at once, from the gradient block.
        # lab3 begin: sgd_update
        grad = G[:, 0:layout.words]
        nisa.tensor_scalar(grad, grad, nl.multiply, _f32(-lr))  # -lr * g, in place (fp32)
        if mode == "fp32":
            nisa.tensor_tensor(P32, P32, grad, nl.add)
        else:
            nisa.tensor_tensor(P, P, grad, nl.add, rounding=mode)
        # lab3 end: sgd_update
        nisa.dma_copy(t.params, P32 if mode == "fp32" else P)
        nisa.dma_copy(t.loss[0:1, s:s + 1], G[0:1, layout.loss:layout.loss + 1])


def _check(layout: ParamLayout, cfg) -> None:
    m = layout.mlp
    if not cfg.vector_engine:
        raise KernelError("training needs the vector engine (vector_engine=True)")
    for what, f in (("batch", m.batch), ("classes", m.classes), ("hidden", m.hidden)):
        if f > cfg.psum_words:
            raise KernelError(f"{what} = {f} is wider than a PSUM bank ({cfg.psum_words} "
                              f"words): the training step keeps it in one bank")
    if cfg.n % cfg.link_width:
        raise KernelError(f"the all-reduce takes bands of link_width = {cfg.link_width} "
                          f"partitions; N = {cfg.n} is not a multiple")


def trace_steps(cfg, mlp: Mlp, *, mode: str, lr: float, params: np.ndarray, batches: list,
                seed: int | None, rank: int = 0, ranks: int = 1) -> tuple[Kernel, StepTensors]:
    """Trace ``len(batches)`` training steps on core ``rank`` of ``ranks`` (``cfg``: a
    ``golden.iss.CoreConfig``): ``params`` the parameter block (:meth:`ParamLayout.pack`, of
    the mode's dtype), ``batches`` this core's (X, Y) of every step (inputs x B and classes x B,
    bf16), ``seed`` the PRNG lanes' seed (a SET_SEED first; None: none, the lanes go on). The
    loss of every step goes to ``loss`` (the same on every core: the all-reduced sum)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    layout = ParamLayout(mlp, cfg.n)
    _check(layout, cfg)
    n = cfg.n
    batch_total = mlp.batch * ranks
    k = Kernel(cfg, rank, ranks)
    with tracing(k):
        pdtype = nl.float32 if mode == "fp32" else nl.bfloat16
        t = StepTensors(
            params=k.dram_tensor(params.shape, Dtype.FP32 if mode == "fp32" else Dtype.BF16,
                                 "parameters", data=np.asarray(params, pdtype)),
            x=[], y=[], loss=k.dram_tensor((1, len(batches)), Dtype.FP32, "loss"))
        for s, (xb, yb) in enumerate(batches):
            t.x.append(k.dram_tensor((n, _tiles(mlp.inputs, n) * mlp.batch), Dtype.BF16,
                                     f"X of step {s}", data=batch_tiles(xb, n)))
            t.y.append(k.dram_tensor((n, _tiles(mlp.classes, n) * mlp.batch), Dtype.BF16,
                                     f"Y of step {s}",
                                     data=batch_tiles(yb, n)))
        blocks = {
            "p": nl.ndarray((n, layout.words), nl.bfloat16, buffer=nl.sbuf, name="parameters"),
            "p32": nl.ndarray((n, layout.words), nl.float32, buffer=nl.sbuf,
                              name="fp32 parameters") if mode == "fp32" else None,
            "g": nl.ndarray((n, layout.words + 1), nl.float32, buffer=nl.sbuf,
                            name="gradients"),
            "bias": nl.ndarray((n, layout.words - layout.b1), nl.float32, buffer=nl.sbuf,
                               name="fp32 biases") if mode != "fp32" else None,
        }
        psum = [nl.ndarray((n, cfg.psum_words), nl.float32, buffer=nl.psum, bank=b, addr=0,
                           name=f"PSUM bank {b}") for b in range(cfg.psum_banks)]
        if seed is not None:
            nisa.set_seed(seed)
        for s in range(len(batches)):
            _step(layout, mode, lr, batch_total, t, s, psum, blocks)
    return k, t
