"""The golden ISS (golden/iss.py) running the programs of sim/kernels/library.py, against references
built from the operator models directly: golden.tensor_engine.run_gemm for GEMMs, elementwise
fp32 mul/add, relu and golden.rounding.round_fp32 for the activation, ring_all_reduce for the
multi-core program; DMA against numpy byte slicing; every error code with its command index
and no side effect. Seed: ``NCLITE_SEED``.
"""

import numpy as np
import pytest

from golden.activation import relu_bits
from golden.collective import ring_all_reduce
from golden.fp32 import fp32_add, fp32_mul
from golden.isa import ErrorCode, Opcode, encode
from golden.iss import CoreConfig, NeuronCoreISS, RingISS
from golden.rounding import DEFAULT_SATURATE, round_fp32
from golden.tensor_engine import run_gemm
from sim.host.programs import BF16, FP8_E4M3, FP8_E5M2, FP32, error_programs
from sim.kernels import isa as nisa
from sim.kernels import library
from sim.tb import vectors

CFG = CoreConfig(n=4, sbuf_words=64, psum_banks=3, psum_words=8, dram_bytes=1 << 16)
NAMES = {BF16: "bf16", FP8_E4M3: "fp8_e4m3", FP8_E5M2: "fp8_e5m2", FP32: "fp32"}


def _operands(rng, shape, dtype):
    return vectors.operands(NAMES[dtype], rng, shape, 0.03)


def _run(cfg, build, iss=None):
    """Trace ``build(kern, ws)`` (``sim.kernels.library.traced``) and run it on an ISS loaded
    with its DRAM image: (the ISS, the kernel, what build returned)."""
    kern, out = library.traced(cfg, build)
    iss = iss or NeuronCoreISS(cfg, dram=kern.dram)
    assert iss.run(kern.program) == ErrorCode.OK, iss.error_reason
    return iss, kern, out


def _read(iss, t):
    return iss.read_dram(t.addr, t.shape[0] * t.shape[1], t.dtype).reshape(t.shape)


def _gemm_on_iss(a, a_dt, bm, b_dt, cfg=CFG):
    def build(kern, ws):
        ta = kern.dram_tensor(a.shape, a_dt, "a", data=a)
        tb = kern.dram_tensor(bm.shape, b_dt, "b", data=bm)
        tc = kern.dram_tensor((a.shape[1], bm.shape[1]), FP32, "c")
        library.gemm(ws, ta, tb, tc)
        return tc

    iss, kern, tc = _run(cfg, build)
    return _read(iss, tc), kern


@pytest.mark.parametrize("m, k, f, a_dt, b_dt", [
    (1, 1, 1, BF16, BF16), (4, 4, 8, FP8_E4M3, FP8_E5M2), (6, 9, 19, BF16, FP8_E4M3),
    (9, 13, 30, FP8_E5M2, BF16),  # M > N, K > N, F > one bank and more than all banks
])
def test_gemm_program_matches_run_gemm(m, k, f, a_dt, b_dt, seed):
    rng = np.random.default_rng([seed, m, k, f])
    a, bm = _operands(rng, (k, m), a_dt), _operands(rng, (k, f), b_dt)
    got, kern = _gemm_on_iss(a, a_dt, bm, b_dt)
    want = run_gemm(a, NAMES[a_dt], bm, NAMES[b_dt], n=CFG.n, banks=CFG.psum_banks,
                    bank_words=CFG.psum_words)
    assert np.array_equal(got, want), f"seed {seed}"
    ops = {Opcode(int(w[0]) & 15) for w in kern.program}
    assert {Opcode.DMA_LOAD, Opcode.LOAD_STATIONARY, Opcode.MATMUL, Opcode.ACTIVATE,
            Opcode.DMA_STORE} <= ops


def _dense_reference(c_bits, bias_bits, dtype, mode):
    y = fp32_add(fp32_mul(c_bits, np.uint32(0x3F800000)), bias_bits[:, None])
    return round_fp32(relu_bits(y), NAMES[dtype], mode,
                      saturate=DEFAULT_SATURATE.get(NAMES[dtype], False), r=16,
                      rbits=np.zeros(y.shape, np.uint64) if mode == "sr" else None)


@pytest.mark.parametrize("dtype, mode", [(BF16, 0), (FP8_E4M3, 1), (FP32, 0)])
def test_dense_layer(dtype, mode, seed):
    rng = np.random.default_rng([seed, dtype, mode])
    k, m, f = 7, 6, 10
    w, x = _operands(rng, (k, m), BF16), _operands(rng, (k, f), BF16)
    bias = vectors.operands("fp32", rng, (m, 1), 0.05)

    def build(kern, ws):
        tw = kern.dram_tensor((k, m), BF16, "w", data=w)
        tx = kern.dram_tensor((k, f), BF16, "x", data=x)
        tbias = kern.dram_tensor((m, 1), FP32, "bias", data=bias)
        return library.dense(ws, tw, tx, tbias, dtype=dtype, mode=mode)

    iss, _, ty = _run(CFG, build)
    got = _read(iss, ty)
    c = run_gemm(w, "bf16", x, "bf16", n=CFG.n, banks=CFG.psum_banks, bank_words=CFG.psum_words)
    want = _dense_reference(c, bias.astype(np.uint32).reshape(-1), dtype,
                            ("rne", "rtz", "sr")[mode])
    assert np.array_equal(got, want.astype(got.dtype)), f"seed {seed}"


def test_stochastic_rounding_dense_is_seeded_and_brackets_the_value(seed):
    rng = np.random.default_rng([seed, 99])
    k, m, f = 4, 4, 16
    w = rng.uniform(-1, 1, (k, m)).astype(np.float32).view(np.uint32) >> 16
    x = rng.uniform(-1, 1, (k, f)).astype(np.float32).view(np.uint32) >> 16
    bias = np.zeros((m, 1), np.uint32)

    def run(seed_value):
        def build(kern, ws):
            tw = kern.dram_tensor((k, m), BF16, "w", data=w)
            tx = kern.dram_tensor((k, f), BF16, "x", data=x)
            tb = kern.dram_tensor((m, 1), FP32, "bias", data=bias)
            nisa.set_seed(seed_value)
            return library.dense(ws, tw, tx, tb, dtype=FP8_E4M3, mode=2)

        iss, _, ty = _run(CFG, build)
        return _read(iss, ty).view(np.uint8)

    a, b, c = run(7), run(7), run(8)
    assert np.array_equal(a, b), "the same seed must reproduce SR bit for bit"
    assert not np.array_equal(a, c), "another seed should change some SR decisions"
    exact = run_gemm(w, "bf16", x, "bf16", n=CFG.n, banks=CFG.psum_banks,
                     bank_words=CFG.psum_words)
    r = relu_bits(fp32_add(exact, np.uint32(0x80000000)))  # >= +0: magnitudes = bits
    lo = round_fp32(r, "fp8_e4m3", "rtz", saturate=True).astype(np.uint8)
    assert np.all((a == lo) | (a == lo + 1)), "SR must give the truncation or the next value up"
    assert np.any(a == lo + 1) and np.any((a == lo) & ((r & 0xFFFFF) != 0)), "vacuous SR check"


def test_two_layer_mlp(seed):
    rng = np.random.default_rng([seed, 5])
    k, h, o, f = 6, 5, 3, 9
    w1, x = _operands(rng, (k, h), BF16), _operands(rng, (k, f), BF16)
    w2 = _operands(rng, (h, o), BF16)
    b1, b2 = vectors.operands("fp32", rng, (h, 1), 0.0), vectors.operands("fp32", rng, (o, 1), 0)
    def build(kern, ws):
        tw1 = kern.dram_tensor((k, h), BF16, "w1", data=w1)
        tx = kern.dram_tensor((k, f), BF16, "x", data=x)
        tb1 = kern.dram_tensor((h, 1), FP32, "b1", data=b1)
        tw2 = kern.dram_tensor((h, o), BF16, "w2", data=w2)
        tb2 = kern.dram_tensor((o, 1), FP32, "b2", data=b2)
        # The hidden layer is kept in bf16 (in SBUF); the output layer has no relu, fp32 out.
        return library.mlp(ws, tx, [{"w": tw1, "bias": tb1, "dtype": BF16},
                                    {"w": tw2, "bias": tb2, "dtype": FP32, "func": 0}])

    iss, _, ty = _run(CFG, build)
    kw = {"n": CFG.n, "banks": CFG.psum_banks, "bank_words": CFG.psum_words}
    h_ref = _dense_reference(run_gemm(w1, "bf16", x, "bf16", **kw),
                             b1.astype(np.uint32).reshape(-1), BF16, "rne")
    c2 = run_gemm(w2, "bf16", h_ref, "bf16", **kw)
    y_ref = fp32_add(fp32_mul(c2, np.uint32(0x3F800000)), b2.astype(np.uint32))
    y_ref = round_fp32(y_ref, "fp32", "rne", saturate=False)
    got = _read(iss, ty)
    assert np.array_equal(got, y_ref), f"seed {seed}"


def test_four_cores_all_reduce_partial_products(seed):
    """Data parallel: core r multiplies its K-slice, an all-reduce sums the partial C's."""
    rng = np.random.default_rng([seed, 4])
    cfg = CoreConfig(n=4, sbuf_words=64, psum_banks=2, psum_words=8, link_width=2)
    k, m, f, P = 4, 4, 6, 4  # two bands of W = 2 partitions
    cores, programs, parts = [], [], []
    for r in range(P):
        a, bm = _operands(rng, (k, m), BF16), _operands(rng, (k, f), FP8_E4M3)

        def build(kern, ws, a=a, bm=bm):
            ta = kern.dram_tensor((k, m), BF16, "a", data=a)
            tb = kern.dram_tensor((k, f), FP8_E4M3, "b", data=bm)
            tc = kern.dram_tensor((m, f), FP32, "c")
            library.data_parallel_gemm(ws, ta, tb, tc)
            return tc

        kern, tc = library.traced(cfg, build, rank=r, ranks=P)
        cores.append(NeuronCoreISS(cfg, dram=kern.dram))
        programs.append(kern.program)
        parts.append(run_gemm(a, "bf16", bm, "fp8_e4m3", n=4, banks=2, bank_words=8))
    assert RingISS(cores).run(programs) == [ErrorCode.OK] * P
    # Each band of 2 partitions is one all-reduce of its words, flattened word by word.
    want = np.zeros((P, m, f), dtype=np.uint32)
    for band in (slice(0, 2), slice(2, 4)):
        out = ring_all_reduce([p[band].T.reshape(-1) for p in parts], link_width=2)
        for r in range(P):
            want[r, band] = out[r].reshape(f, 2).T
    for r, core in enumerate(cores):
        got = core.read_dram(tc.addr, m * f, FP32).reshape(m, f)
        assert np.array_equal(got, want[r]), f"core {r}, seed {seed}"
    assert all(np.array_equal(want[0], w) for w in want)


def test_dma_round_trip_preserves_bytes(seed):
    rng = np.random.default_rng([seed, 6])
    iss = NeuronCoreISS(CFG)
    raw = rng.integers(0, 256, 4096, dtype=np.uint8)
    iss.dram[:4096] = raw
    prog = []
    for dt, size in ((BF16, 2), (FP8_E5M2, 1), (FP32, 4)):
        prog.append(encode(Opcode.DMA_LOAD, dtype=dt, part=1, rows=3, sbuf_addr=5, cols=7,
                           dram_addr=64 * size, dram_stride=24 * size))
        prog.append(encode(Opcode.DMA_STORE, dtype=dt, part=1, rows=3, sbuf_addr=5, cols=7,
                           dram_addr=2048 + 64 * size, dram_stride=16 * size))
    # Run each load/store pair and check both ends (a later pair reloads the same words).
    for i, (dt, size) in enumerate(((BF16, 2), (FP8_E5M2, 1), (FP32, 4))):
        assert iss.run(prog[2 * i:2 * i + 2]) == ErrorCode.OK
        for r in range(3):
            src = raw[64 * size + r * 24 * size:][:7 * size]
            dst = 2048 + 64 * size + r * 16 * size
            assert np.array_equal(iss.dram[dst:dst + 7 * size], src), (dt, r)
            assert np.array_equal(iss.sbuf[1 + r, 5:12], src.view(f"<u{size}")), (dt, r)
    iss2 = NeuronCoreISS(CFG, dram=raw)
    iss2.run([encode(Opcode.DMA_LOAD, dtype=FP8_E4M3, part=0, rows=1, sbuf_addr=0, cols=4,
                     dram_addr=3, dram_stride=0)])
    assert iss2.sbuf[0, :4].tolist() == raw[3:7].tolist(), "fp8 zero-extended into words"


def _bad_programs():
    return [(what, prog if len(prog) > 1 else prog[0], code)
            for what, prog, code in error_programs(CFG)]




@pytest.mark.parametrize("what, bad, code", _bad_programs(), ids=lambda v: v
                         if isinstance(v, str) else "")
def test_errors_stop_the_queue_and_change_nothing(what, bad, code, seed):
    rng = np.random.default_rng([seed, 7])
    iss = NeuronCoreISS(CFG)
    iss.sbuf[:] = rng.integers(0, 1 << 32, iss.sbuf.shape, dtype=np.uint64).astype(np.uint32)
    before = iss.sbuf.copy(), iss.dram.copy(), iss.psum.copy()
    after_bad = encode(Opcode.DMA_LOAD, dtype=FP32, part=0, rows=4, sbuf_addr=0, cols=4,
                       dram_addr=0, dram_stride=16)
    setup = bad[:-1] if isinstance(bad, list) else []
    bad = bad[-1] if isinstance(bad, list) else bad
    prog = [encode(Opcode.BARRIER), *setup, bad, after_bad]
    assert iss.run(prog) == code, (what, iss.error_reason)
    if code == ErrorCode.OK:
        return
    assert iss.error_index == 1 + len(setup) and iss.executed == 1 + len(setup), what
    assert np.array_equal(iss.sbuf, before[0]) and np.array_equal(iss.dram, before[1])
    assert np.array_equal(iss.psum, before[2])
    # The queue stays stopped until the error is cleared.
    assert iss.run([after_bad]) == code and iss.executed == 1 + len(setup)
    iss.clear_error()
    assert iss.run([after_bad]) == ErrorCode.OK and iss.executed == 2 + len(setup)


def test_mismatched_collectives_are_undefined():
    cfg = CoreConfig(n=4, sbuf_words=64, psum_banks=2, psum_words=8)
    cores = [NeuronCoreISS(cfg) for _ in range(2)]
    progs = [[encode(Opcode.COLLECTIVE, coll_op=0, part=0, rows=1, sbuf_addr=0, cols=c,
                     dst_addr=0, shift=0)]
             for c in (4, 5)]
    with pytest.raises(RuntimeError, match="mismatched"):
        RingISS(cores).run(progs)


@pytest.mark.parametrize("absent", ["ends", "fails"])
def test_collective_a_core_never_joins_is_a_link_timeout(absent, seed):
    """The cores waiting at a COLLECTIVE another core never reaches (its program ends, or
    stops on an error) report LINK_TIMEOUT at its position, counted as executed; their later
    commands are dropped; the core left out runs normally; after clear_error a COLLECTIVE of
    all cores works."""
    rng = np.random.default_rng([seed, 9])
    cfg = CoreConfig(n=4, sbuf_words=16, psum_banks=1, psum_words=4, link_width=2)
    P = 3
    cores = [NeuronCoreISS(cfg) for _ in range(P)]
    for c in cores:
        c.sbuf[:] = rng.integers(0, 1 << 32, c.sbuf.shape, dtype=np.uint64).astype(np.uint32)
    before = [c.sbuf.copy() for c in cores]
    coll = encode(Opcode.COLLECTIVE, coll_op=0, part=0, rows=2, sbuf_addr=3, cols=5, dst_addr=0,
                  shift=0)
    load = encode(Opcode.DMA_LOAD, dtype=FP32, part=0, rows=1, sbuf_addr=0, cols=2,
                  dram_addr=0, dram_stride=0)
    bad = encode(Opcode.DMA_LOAD, dtype=7, part=0, rows=1, sbuf_addr=0, cols=2, dram_addr=0,
                 dram_stride=0)
    last = [load, bad, coll] if absent == "fails" else [load]
    progs = [[load, coll, load], [load, coll, load], last]
    codes = RingISS(cores).run(progs)
    want_last = ErrorCode.BAD_DTYPE if absent == "fails" else ErrorCode.OK
    assert codes == [ErrorCode.LINK_TIMEOUT] * 2 + [want_last]
    for c in cores[:2]:
        assert c.error_index == 1 and c.executed == 2, (c.error_index, c.executed)
        # The buffer (left as it was here) and the rest: the second load never ran.
        assert np.array_equal(c.sbuf[:, 2:], before[cores.index(c)][:, 2:])
    assert cores[2].executed == 1
    # Stopped until cleared (so the third core, if it can, now waits in vain in its turn);
    # then a COLLECTIVE of every core runs.
    again = ErrorCode.LINK_TIMEOUT if absent == "ends" else ErrorCode.BAD_DTYPE
    assert RingISS(cores).run([[coll]] * P) == [ErrorCode.LINK_TIMEOUT] * 2 + [again]
    for c in cores:
        c.clear_error()
    assert RingISS(cores).run([[coll]] * P) == [ErrorCode.OK] * P
    assert all(np.array_equal(cores[0].sbuf[:2, 3:8], c.sbuf[:2, 3:8]) for c in cores)
