"""A tiled matrix multiply, ``C = A.T @ B``: A (K x M) and B (K x F) bf16 in DRAM, C fp32.

K is cut into N-row tiles whose products accumulate in one PSUM tile, as NKI's tutorial matmul
does; M into N columns (the stationary tile) and F into PSUM-bank-wide pieces.
Run it: ``nclite kernel run docs/kernels/matmul.py [--on verilator]``.
"""

import numpy as np

from sim.kernels import nisa, nl

K, M, F = 12, 8, 24


def inputs(rng):
    a = rng.standard_normal((K, M)).astype(nl.bfloat16)
    b = rng.standard_normal((K, F)).astype(nl.bfloat16)
    return {"a": a, "b": b}


def kernel(a, b):
    n, w = nl.tile_size.pmax, nl.tile_size.psum_fmax
    k_total, m_total = a.shape
    f_total = b.shape[1]
    c = nl.ndarray((m_total, f_total), nl.float32, buffer=nl.shared_hbm)
    for m0 in range(0, m_total, n):
        m1 = min(m0 + n, m_total)
        for f0 in range(0, f_total, w):
            f1 = min(f0 + w, f_total)
            acc = nl.ndarray((m1 - m0, f1 - f0), nl.float32, buffer=nl.psum)
            for k0 in range(0, k_total, n):
                k1 = min(k0 + n, k_total)
                a_tile = nl.ndarray((k1 - k0, m1 - m0), nl.bfloat16, buffer=nl.sbuf)
                b_tile = nl.ndarray((k1 - k0, f1 - f0), nl.bfloat16, buffer=nl.sbuf)
                nisa.dma_copy(a_tile, a[k0:k1, m0:m1])
                nisa.dma_copy(b_tile, b[k0:k1, f0:f1])
                nisa.nc_matmul(acc, a_tile, b_tile, accumulate=k0 > 0)
            out = nl.ndarray((m1 - m0, f1 - f0), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(out, acc)
            nisa.dma_copy(c[m0:m1, f0:f1], out)
    return c


def reference(a, b):
    """What the kernel means, in numpy (float64: the kernel's fp32 sums round differently)."""
    return a.astype(np.float64).T @ b.astype(np.float64)
