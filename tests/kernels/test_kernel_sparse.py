"""The kernel API's sparse matmul (``nisa.compressed``, ``nc_matmul``) and the library's sparse
GEMM (``sim.kernels.library.gemm`` with a ``SparseMatrix``) on the golden ISS: C's bits are
``golden.sparse.run_sparse_gemm``'s; wrong shapes and a dense core are errors at the kernel's
line."""

from __future__ import annotations

import numpy as np
import pytest

from golden.isa import Dtype, ErrorCode, Opcode, decode
from golden.iss import CoreConfig, NeuronCoreISS
from golden.sparse import PATTERNS, magnitude_mask, pattern, run_sparse_gemm
from sim.kernels import isa as nisa
from sim.kernels import language as nl
from sim.kernels import library as lib
from sim.kernels.trace import KernelError
from sim.tb import vectors

CFG = CoreConfig(n=4, sbuf_words=256, psum_banks=4, psum_words=16, data_width=64, sparse=True)


def _sparse_gemm_on_iss(cfg, p, a, fa, b, fb):
    mask = magnitude_mask(a, fa.golden_name, p)

    def build(kern, ws):
        sa = lib.sparse_matrix(kern, a, fa, mask, p, "a")
        sb = lib.sparse_moving(kern, b, fb, p, "b")
        c = kern.dram_tensor((a.shape[1], b.shape[1]), Dtype.FP32, "c")
        lib.gemm(ws, sa, sb, c)
        return c

    kern, c = lib.traced(cfg, build)
    iss = NeuronCoreISS(cfg, dram=kern.dram)
    assert iss.run(kern.program) == ErrorCode.OK, iss.error_reason
    got = iss.read_dram(c.addr, c.shape[0] * c.shape[1], Dtype.FP32).reshape(c.shape)
    want = run_sparse_gemm(a, fa.golden_name, mask, b, fb.golden_name, p, n=cfg.n,
                           banks=cfg.psum_banks, bank_words=cfg.psum_words)
    return kern, got, want


@pytest.mark.parametrize("name", list(PATTERNS))
def test_library_sparse_gemm_is_run_sparse_gemm(name, seed):
    """M past N, K not a multiple of R·N, F past a bank and past the resident plan; specials in
    both operands (pruned by magnitude: NaN counts as largest)."""
    rng = vectors.seeded_rng("kernel-sparse", name, seed=seed)
    p = pattern(name)
    for m, k, f in ((6, 2 * p.ratio * CFG.n + 3, 37), (3, p.m, 5)):
        a = vectors.operands("bf16", rng, (k, m), 0.05)
        b = vectors.operands("fp8_e4m3", rng, (k, f), 0.05)
        kern, got, want = _sparse_gemm_on_iss(CFG, name, a, Dtype.BF16, b, Dtype.FP8_E4M3)
        same = (got == want) | (np.isnan(got.view(np.float32)) & np.isnan(want.view(np.float32)))
        assert same.all(), (name, m, k, f, seed)
        ops = [decode(w)[0] for w in kern.program]
        assert ops.count(Opcode.MATMUL) == -(-m // CFG.n) * -(-k // (p.ratio * CFG.n)) * \
            -(-f // CFG.psum_words)
        assert kern.macs == m * k * f


def _kernel(cfg, body):
    from sim.kernels.trace import Kernel, tracing

    k = Kernel(cfg, 0, 1)
    with tracing(k):
        body(k)
    return k


def test_nc_matmul_sparse_checks():
    def compressed_on_dense(k):
        t = nl.ndarray((2, 2), nl.float32)
        nisa.nc_matmul(nl.ndarray((2, 3), nl.float32, buffer=nl.psum),
                       nisa.compressed(t, "2:4", nl.bfloat16, 4),
                       nl.ndarray((2, 6), nl.bfloat16))

    with pytest.raises(KernelError, match="needs a core with the sparse mode"):
        _kernel(CoreConfig(n=4, sbuf_words=64), compressed_on_dense)

    def bad_moving(k):
        t = nl.ndarray((4, 2), nl.float32)
        nisa.nc_matmul(nl.ndarray((2, 3), nl.float32, buffer=nl.psum),
                       nisa.compressed(t, "4:16", nl.bfloat16, 16),
                       nl.ndarray((3, 12), nl.bfloat16))

    with pytest.raises(KernelError, match=r"is 4 partitions of F x 4 words"):
        _kernel(CFG, bad_moving)

    def bad_rows(k):
        nisa.compressed(nl.ndarray((3, 2), nl.float32), "4:8", nl.bfloat16, 8)

    with pytest.raises(KernelError, match="K = 8 in 4:8 has 4 rows, the tile 3"):
        _kernel(CFG, bad_rows)

    def bad_container(k):
        nisa.compressed(nl.ndarray((4, 2), nl.bfloat16), "4:8", nl.bfloat16, 8)

    with pytest.raises(KernelError, match="float32, not bf16"):
        _kernel(CFG, bad_container)


def test_one_sparse_matmul_emits_a_sparse_load():
    def body(k):
        t = nl.ndarray((4, 3), nl.float32)
        mv = nl.ndarray((4, 10), nl.float8_e5m2)  # K = 8 rows, 2 a partition; F = 5
        ps = nl.ndarray((3, 5), nl.float32, buffer=nl.psum)
        st = nisa.compressed(t, "2:4", nl.float8_e4m3, 8)
        nisa.nc_matmul(ps, st, mv)
        nisa.nc_matmul(ps, st, mv, accumulate=True)  # loaded: no second LOAD_STATIONARY

    k = _kernel(CFG, body)
    ops = [decode(w) for w in k.program]
    assert [o for o, _ in ops] == [Opcode.LOAD_STATIONARY, Opcode.MATMUL, Opcode.MATMUL]
    assert ops[0][1]["sparsity"] == 1 and ops[0][1]["k"] == 8 and ops[0][1]["fmt"] == 1
    assert ops[1][1]["k"] == 8 and ops[1][1]["f"] == 5 and k.macs == 2 * 8 * 3 * 5
