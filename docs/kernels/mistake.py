"""A kernel with a mistake, for docs/kernels.md: the moving tile has 3 partitions (K = 3) but
the stationary tile 4, so nc_matmul cannot multiply them."""

from sim.kernels import nisa, nl


def inputs(rng):
    return {"a": rng.standard_normal((4, 4)).astype(nl.bfloat16),
            "b": rng.standard_normal((3, 8)).astype(nl.bfloat16)}


def kernel(a, b):
    c = nl.ndarray((4, 8), nl.float32, buffer=nl.shared_hbm)
    a_tile = nl.ndarray((4, 4), nl.bfloat16, buffer=nl.sbuf)
    b_tile = nl.ndarray((3, 8), nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(a_tile, a)
    nisa.dma_copy(b_tile, b)
    acc = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, a_tile, b_tile)
    return c
