"""A dense layer, ``Y = bf16(relu(W.T @ X + b))`` with stochastic rounding: W (K x M) and X
(K x F) bf16, the bias b (M x 1) fp32, Y (M x F) bf16. Every output row m is one partition of
the activation engine, so b is a one-column tile: lane m adds b[m].

Run it: ``nclite kernel run docs/kernels/dense.py [--on verilator]``.
"""

from sim.kernels import nisa, nl

K, M, F = 8, 4, 16
SEED = 2024  # the PRNG lanes' seed: the same SR bits on the ISS and the RTL


def inputs(rng):
    return {"w": (rng.standard_normal((K, M)) * 0.5).astype(nl.bfloat16),
            "x": rng.standard_normal((K, F)).astype(nl.bfloat16),
            "b": (rng.standard_normal((M, 1)) * 0.1).astype(nl.float32)}


def kernel(w, x, b):
    n = nl.tile_size.pmax
    y = nl.ndarray((M, F), nl.bfloat16, buffer=nl.shared_hbm)
    bias = nl.ndarray((M, 1), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(bias, b)
    acc = nl.ndarray((M, F), nl.float32, buffer=nl.psum)
    for k0 in range(0, K, n):  # K in tiles of N rows, accumulated in PSUM
        w_tile = nl.ndarray((n, M), nl.bfloat16, buffer=nl.sbuf)
        x_tile = nl.ndarray((n, F), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(w_tile, w[k0:k0 + n])
        nisa.dma_copy(x_tile, x[k0:k0 + n])
        nisa.nc_matmul(acc, w_tile, x_tile, accumulate=k0 > 0)
    nisa.set_seed(SEED)
    out = nl.ndarray((M, F), nl.bfloat16, buffer=nl.sbuf)
    nisa.activation(out, nl.relu, acc, bias=bias, rounding="sr")
    nisa.dma_copy(y, out)
    return y
