"""Data-parallel ``C = A.T @ B`` on a ring of cores: core r holds its own K-slice ``A_r``,
``B_r``, computes the partial product ``C_r = A_r.T @ B_r`` and an all-reduce over the ring sums
the ``C_r``, so every core ends with the same C (the ring's order of fp32 additions).

Run it: ``nclite kernel run docs/kernels/data_parallel_matmul.py [--on verilator]``.
"""

from sim.kernels import ncc, nisa, nl

CORES = 4
#: The cores of `nclite demo`'s ring (sim.cli.demo.RING_CONFIG): N = 3, links 2 words wide
#: (an all-reduce takes a multiple of 2 partitions), two PSUM banks of 8 words, 4 KiB of DRAM.
CONFIG = {"n": 3, "sbuf_words": 40, "psum_banks": 2, "psum_words": 8, "link_width": 2,
          "queue_depth": 32, "te_mul_stages": 1, "te_add_stages": 2, "watchdog_cycles": 6144,
          "dram_bytes": 4096}

K, M, F = 3, 2, 8  # each core's slice: A_r is K x M, B_r is K x F


def inputs(rng, rank):
    return {"a": rng.standard_normal((K, M)).astype(nl.bfloat16),
            "b": rng.standard_normal((K, F)).astype(nl.bfloat16)}


def kernel(a, b):
    c = nl.ndarray((M, F), nl.float32, buffer=nl.shared_hbm)
    a_tile = nl.ndarray((K, M), nl.bfloat16, buffer=nl.sbuf)
    b_tile = nl.ndarray((K, F), nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(a_tile, a)
    nisa.dma_copy(b_tile, b)
    acc = nl.ndarray((M, F), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, a_tile, b_tile)
    part = nl.ndarray((M, F), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(part, acc)
    ncc.all_reduce(part)  # every core: the sum over the ring of the partial products
    nisa.dma_copy(c, part)
    return c
