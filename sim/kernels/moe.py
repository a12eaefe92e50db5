"""An expert-parallel mixture-of-experts layer on a ring of P cores: top-1 routing, tokens
dispatched to the core holding their expert by an all-to-all, the expert's MLP, and the results
combined back by a second all-to-all (Switch Transformer's layer, as NKI kernels lay it out:
features on the partitions, tokens along the free axis).

Core r holds T tokens ``x_r`` (d x T, bf16: token t is column t) and expert r's MLP
``E_r(x) = W2_r.T @ bf16(relu(W1_r.T @ x + b1_r)) + b2_r`` (fp32 out). One layer on core r::

    route   e_t = argmax_j logits[t, j], g_t = softmax(logits[t])[e_t]   the router (host)
    slots   token t -> slot (e_t, q): q-th token of core r for expert e_t; q >= C: dropped
    send    d x P·C bf16 tile: column e·C + q = x_r[:, t] (DMA a column), the rest +0
    a2a     send -> recv: core j's recv columns i·C .. = core i's tokens for expert j
    expert  y = E_j(recv)                                       tensor + activation engines
    a2a     y -> back: core r's back columns e·C + q = its token's E_e(x)
    gate    out[:, t] = g_t * back[:, e·C + q] (fp32; a dropped token's out is +0)

The router is the host's: the logits ``x_r.T @ w_router`` are computed in numpy float32 when
the kernel is traced and the routing becomes the program (DMA addresses), as a host-side router
hands a device its dispatch plan; everything after it runs on the cores. Capacity C =
``ceil(capacity_factor · T / P)`` tokens per (core, expert) pair; tokens past it are dropped
(their output is +0), in token order. Because each output column of a GEMM depends only on its
input column, a token's result is bit for bit the expert's MLP applied to that token on its own
(``tests/kernels/test_kernel_moe.py`` holds it against a single-core run of every expert).

Run it: ``nclite kernel run sim/kernels/moe.py [--on verilator]``, or ``nclite demo --only
moe`` (the RTL, with the share of cycles the collective engine is busy).
"""

from __future__ import annotations

import math

import numpy as np

from golden.isa import ActivationFunc, Dtype

# (absolute imports: `nclite kernel run sim/kernels/moe.py` loads this file as a kernel file)
from sim.kernels import isa as nisa
from sim.kernels import language as nl
from sim.kernels.collectives import all_to_all
from sim.kernels.library import SbufMatrix, Workspace, dense
from sim.kernels.trace import KernelError, Tensor, current

__all__ = ["top1", "slots", "routing", "moe_layer", "CORES", "CONFIG", "D", "H", "T", "inputs",
           "kernel"]


def top1(logits) -> tuple[np.ndarray, np.ndarray]:
    """Each token's expert (argmax of its logits row; the lowest index on a tie) and gate (the
    softmax probability of that expert), in float32."""
    z = np.asarray(logits, dtype=np.float32)
    e = np.argmax(z, axis=1)
    p = np.exp(z - z.max(axis=1, keepdims=True), dtype=np.float32)
    g = (p[np.arange(len(e)), e] / p.sum(axis=1, dtype=np.float32)).astype(np.float32)
    return e, g


def slots(experts, ranks: int, capacity: int) -> list[tuple[int, int] | None]:
    """Each token's slot ``(expert, q)`` in the dispatch tile (q-th token for that expert, in
    token order), or None if its expert already has ``capacity`` tokens (dropped)."""
    used = [0] * ranks
    out = []
    for e in experts:
        e = int(e)
        if not 0 <= e < ranks:
            raise KernelError(f"expert {e} outside 0..{ranks - 1}")
        out.append((e, used[e]) if used[e] < capacity else None)
        used[e] += 1
    return out


def routing(x, router, ranks: int) -> tuple[np.ndarray, np.ndarray, list]:
    """The host's router on a core's tokens ``x`` (d x T) and ``router`` (d x P): each token's
    expert and gate (:func:`top1` of the float32 logits ``x.T @ router``) and its slot
    (:func:`slots`, capacity :func:`capacity` of T tokens)."""
    experts, gates = top1(np.asarray(x).astype(np.float32).T @ router)
    return experts, gates, slots(experts, ranks, capacity(np.asarray(x).shape[1], ranks))


def _bands(m, cols: int, w: int, n: int):
    """The collective buffers of an SBUF matrix of ``cols`` columns: W partitions of each of
    its N-row tiles, one after another (``library.SbufMatrix``'s layout)."""
    for b in range(-(-m.rows // n)):
        for p in range(0, min(n, m.rows - b * n), w):
            yield m.tile[p:p + w, b * cols:(b + 1) * cols]


def moe_layer(ws: Workspace, x: Tensor, route: list, gates, expert: dict, out: Tensor, *,
              capacity: int, zeros: Tensor, pad: Tensor) -> None:
    """One layer on this core (see the module text): ``x`` (d x T bf16 DRAM), ``route`` its
    :func:`slots`, ``gates`` (T float32), ``expert`` this core's ``w1``, ``b1``, ``w2``, ``b2``
    (DRAM: d x h bf16, h x 1 fp32, h x d bf16, d x 1 fp32), ``out`` (d x T fp32 DRAM),
    ``zeros`` (N x 1 fp32 DRAM of +0), ``pad`` (N x ceil(d / N)·P·C bf16 DRAM of +0: the
    dispatch tile's empty slots). ``d`` a multiple of the link width."""
    k = current()
    cfg, p_ranks = k.cfg, k.ranks
    n, w = cfg.n, cfg.link_width
    d, t_count = x.shape
    if d % w or (d > n and n % w):
        raise KernelError(f"the token width d = {d} must be a multiple of the link width {w}")
    cols = p_ranks * capacity
    send = ws.sbuf_matrix(d, cols, Dtype.BF16)
    recv = ws.sbuf_matrix(d, cols, Dtype.BF16)
    if send is None or recv is None:
        raise KernelError(f"the dispatch tiles (d = {d}, {cols} columns) do not fit in SBUF")
    zero = ws.sbuf_matrix(n, 1, Dtype.FP32)  # (SBUF tiles of a kernel using gemm: the ws')
    if zero is None:
        raise KernelError("no SBUF room for the zero column")
    nisa.dma_copy(zero.tile, zeros)
    # Dispatch: +0 in every slot, then each kept token's column at its slot.
    nisa.dma_copy(send.tile, pad)
    for tok, s in enumerate(route):
        if s is not None:
            c = s[0] * capacity + s[1]
            for b in range(-(-d // n)):
                r0, r1 = b * n, min(d, b * n + n)
                nisa.dma_copy(send.tile[0:r1 - r0, b * cols + c:b * cols + c + 1],
                              x[r0:r1, tok:tok + 1])
    for src, dst in zip(_bands(send, cols, w, n), _bands(recv, cols, w, n), strict=True):
        all_to_all(src, dst)
    ws.free(send)
    # The expert on every token it received (padding columns too: their results stay unused).
    h = dense(ws, expert["w1"], recv, expert["b1"], dtype=Dtype.BF16, in_sbuf=True)
    y = dense(ws, expert["w2"], h, expert["b2"], dtype=Dtype.FP32,
              func=ActivationFunc.IDENTITY, in_sbuf=True)
    back = ws.sbuf_matrix(d, cols, Dtype.FP32)
    if not all(isinstance(m, SbufMatrix) for m in (h, y)) or back is None:
        raise KernelError("the expert's activations do not fit in SBUF")
    for src, dst in zip(_bands(y, cols, w, n), _bands(back, cols, w, n), strict=True):
        all_to_all(src, dst)
    # Combine: each token's result scaled by its gate, stored at its column of `out`.
    for tok, s in enumerate(route):
        for b in range(-(-d // n)):
            r0, r1 = b * n, min(d, b * n + n)
            if s is None:
                nisa.dma_copy(out[r0:r1, tok:tok + 1], zero.tile[0:r1 - r0, 0:1])
                continue
            c = b * cols + s[0] * capacity + s[1]
            col = back.tile[0:r1 - r0, c:c + 1]
            nisa.tensor_scalar(col, col, np.multiply, float(gates[tok]))
            nisa.dma_copy(out[r0:r1, tok:tok + 1], col)
    for m in (back, y, h, recv, zero):
        ws.free(m)


# --- The layer as a kernel file (``nclite kernel run sim/kernels/moe.py``) ---------------------

CORES = 4
#: Cores of N = 4 with links four words wide (a token's four features are one link beat), SBUF
#: for the dispatch, expert and combine tiles, 16 KiB of DRAM.
CONFIG = {"n": 4, "sbuf_words": 1024, "psum_banks": 4, "psum_words": 16, "link_width": 4,
          "queue_depth": 64, "te_mul_stages": 1, "te_add_stages": 2, "watchdog_cycles": 1 << 14,
          "dram_bytes": 1 << 14}
D, H, T = 8, 16, 16  #: token width, expert hidden width, tokens per core
CAPACITY_FACTOR = 2


def capacity(tokens: int = T, ranks: int = CORES) -> int:
    return math.ceil(CAPACITY_FACTOR * tokens / ranks)


def inputs(rng, rank):
    """Core ``rank``'s tokens and expert; the router (the same on every core) from a fixed
    seed."""
    shared = np.random.default_rng(2024)
    router = shared.standard_normal((D, CORES)).astype(np.float32)
    return {"x": rng.standard_normal((D, T)).astype(nl.bfloat16), "router": router,
            "w1": (rng.standard_normal((D, H)) / np.sqrt(D)).astype(nl.bfloat16),
            "b1": rng.uniform(-0.5, 0.5, (H, 1)).astype(np.float32),
            "w2": (rng.standard_normal((H, D)) / np.sqrt(H)).astype(nl.bfloat16),
            "b2": rng.uniform(-0.5, 0.5, (D, 1)).astype(np.float32),
            "zeros": np.zeros((CONFIG["n"], 1), np.float32),
            "pad": np.zeros((CONFIG["n"], -(-D // CONFIG["n"]) * CORES * capacity()),
                            nl.bfloat16)}


def host_values(t: Tensor) -> np.ndarray:
    """An input tensor's values as the host wrote them to DRAM (what a host-side router
    reads)."""
    from sim.kernels.run import read_tensor

    return read_tensor(current().dram, t)


def kernel(x, router, w1, b1, w2, b2, zeros, pad):
    d, t_count = x.shape
    ranks = nl.num_programs(0)
    _, gates, route = routing(host_values(x), host_values(router), ranks)
    cap = capacity(t_count, ranks)
    out = nl.ndarray((d, t_count), nl.float32, buffer=nl.shared_hbm)
    moe_layer(Workspace(), x, route, gates,
              {"w1": w1, "b1": b1, "w2": w2, "b2": b2}, out, capacity=cap, zeros=zeros,
              pad=pad)
    return out
