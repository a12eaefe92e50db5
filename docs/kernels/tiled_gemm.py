"""The tuned tiled GEMM of the demo, the bench and the board tool, ``C = A.T @ B``, as a kernel:
``sim.kernels.library.gemm`` (PSUM ping-pong, B kept in SBUF, double-buffered stationary blocks,
the next tiles' loads and the last tiles' drain spread between the multiplications).

Run it: ``nclite kernel run docs/kernels/tiled_gemm.py --on verilator --profile tiled.png``.
"""

from sim.kernels import library, nl

K, M, F = 16, 16, 64


def inputs(rng):
    return {"a": rng.standard_normal((K, M)).astype(nl.bfloat16),
            "b": rng.standard_normal((K, F)).astype(nl.bfloat16)}


def kernel(a, b):
    c = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.shared_hbm)
    library.gemm(library.Workspace(), a, b, c)
    return c
