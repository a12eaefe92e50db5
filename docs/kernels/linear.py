"""A linear layer ``Y = relu(W.T @ X + b)`` that moves every operand once: W (K x M) and X
(K x F) bf16, the bias b (M x 1) fp32, Y (M x F) fp32.

X stays in SBUF (its K tiles, loaded once); each N x N tile of W is loaded once and stays in the
array while every F piece of X streams through it (``nc_matmul`` skips LOAD_STATIONARY when the
stationary tile is the one loaded), the products of one M tile accumulating over K in PSUM tiles
one bank wide. (Lab 6 has you write this kernel: docs/labs/lab6-kernels/README.md.)

Run it: ``nclite kernel run docs/kernels/linear.py [--on verilator --profile linear.png]``.
"""

from sim.kernels import nisa, nl

K, M, F = 16, 8, 32


def inputs(rng):
    return {"w": (rng.standard_normal((K, M)) * 0.5).astype(nl.bfloat16),
            "x": rng.standard_normal((K, F)).astype(nl.bfloat16),
            "b": (rng.standard_normal((M, 1)) * 0.1).astype(nl.float32)}


def kernel(w, x, b):
    n, width = nl.tile_size.pmax, nl.tile_size.psum_fmax
    k_total, m_total = w.shape
    f_total = x.shape[1]
    y = nl.ndarray((m_total, f_total), nl.float32, buffer=nl.shared_hbm)
    k_tiles = [(k0, min(k0 + n, k_total)) for k0 in range(0, k_total, n)]
    f_pieces = [(f0, min(f0 + width, f_total)) for f0 in range(0, f_total, width)]
    # lab6 begin: kernel
    x_tiles = []
    for k0, k1 in k_tiles:
        t = nl.ndarray((k1 - k0, f_total), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(t, x[k0:k1])
        x_tiles.append(t)
    for m0 in range(0, m_total, n):
        m1 = min(m0 + n, m_total)
        accs = [nl.ndarray((m1 - m0, f1 - f0), nl.float32, buffer=nl.psum)
                for f0, f1 in f_pieces]
        for j, (k0, k1) in enumerate(k_tiles):
            w_tile = nl.ndarray((k1 - k0, m1 - m0), nl.bfloat16, buffer=nl.sbuf)
            nisa.dma_copy(w_tile, w[k0:k1, m0:m1])
            for acc, (f0, f1) in zip(accs, f_pieces, strict=True):
                nisa.nc_matmul(acc, w_tile, x_tiles[j][:, f0:f1], accumulate=j > 0)
        bias = nl.ndarray((m1 - m0, 1), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(bias, b[m0:m1])
        for acc, (f0, f1) in zip(accs, f_pieces, strict=True):
            out = nl.ndarray((m1 - m0, f1 - f0), nl.float32, buffer=nl.sbuf)
            nisa.activation(out, nl.relu, acc, bias=bias)
            nisa.dma_copy(y[m0:m1, f0:f1], out)
        del accs, acc  # free all PSUM tiles, the loop variable's too, for the next M tile
    # lab6 end: kernel
    return y
