"""The kernel API's vector-engine instructions (``nisa.tensor_tensor``, ``tensor_scalar``,
``tensor_reduce``, ``nc_transpose``): a kernel traced on a core with the vector engine and run
on the golden ISS gives what ``golden.vector`` says of its inputs (numpy's statement of each
instruction, widened operands, the cast by ``golden.rounding``); each misuse is a KernelError
that says what is wrong; a core without the vector engine refuses them."""

from __future__ import annotations

import numpy as np
import pytest

from golden.formats import to_fp32_bits
from golden.isa import AluOp, ErrorCode
from golden.iss import CoreConfig, NeuronCoreISS
from golden.rounding import round_fp32
from golden.vector import alu, reduce_free
from sim.kernels import KernelError, nisa, nl
from sim.kernels.trace import Kernel, tracing
from sim.tb import vectors

CFG = CoreConfig(n=4, sbuf_words=128, psum_banks=2, psum_words=16, vector_engine=True)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"<u{a.dtype.itemsize}")


def _run(body, inputs: dict, cfg=CFG):
    """Trace ``body(**dram tensors)`` (returns its output DRAM tensors) and run it on the
    ISS; returns the outputs' bit patterns."""
    k = Kernel(cfg, 0, 1)
    with tracing(k):
        ts = {name: k.dram_tensor(a.shape, a.dtype, name, data=a) for name, a in inputs.items()}
        outs = body(**ts)
    iss = NeuronCoreISS(cfg, dram=k.dram)
    assert iss.run(k.program) == ErrorCode.OK, iss.error_reason
    return [iss.read_dram(t.addr, t.shape[0] * t.shape[1], t.dtype).reshape(t.shape)
            for t in outs]


def _load(t):
    tile = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(tile, t)
    return tile


def _store(tile, name):
    out = nl.ndarray(tile.shape, tile.dtype, buffer=nl.shared_hbm, name=name)
    nisa.dma_copy(out, tile)
    return out


def _inputs(seed):
    rng = vectors.seeded_rng("kernel-vector", seed=seed)
    a = vectors.operands("bf16", rng, (4, 12), 0.1).astype(np.uint16).view(nl.bfloat16)
    b = vectors.operands("fp32", rng, (4, 12), 0.1).astype(np.uint32).view(np.float32)
    return a, b


@pytest.mark.parametrize("op", [nl.add, np.subtract, nl.multiply, np.maximum, nl.minimum,
                                nl.greater], ids=lambda o: getattr(o, "__name__", str(o)))
def test_tensor_tensor_and_scalar(op, seed):
    a, b = _inputs(seed)

    def body(a, b):
        ta, tb = _load(a), _load(b)
        tt = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_tensor(tt, ta, tb, op)
        ts = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(ts, tb, op, -1.5, reverse=True)
        return _store(tt, "tt"), _store(ts, "ts")

    tt, ts = _run(body, {"a": a, "b": b})
    code = op if isinstance(op, AluOp) else {np.subtract: AluOp.SUBTRACT,
                                             np.maximum: AluOp.MAX}[op]
    wa, wb = to_fp32_bits(_bits(a), "bf16"), _bits(b)
    assert np.array_equal(_bits(tt), round_fp32(alu(code, wa, wb), "bf16", "rne",
                                                saturate=False)), f"seed {seed}"
    s = np.uint32(0xBFC00000)  # -1.5
    assert np.array_equal(_bits(ts), alu(code, s, wb)), f"seed {seed}"


def test_reduce_and_transpose(seed):
    a, b = _inputs(seed)

    def body(a, b):
        tb = _load(b)
        r = nl.ndarray((4, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(r, tb, nl.maximum, axis=1)
        ta = _load(a)
        tr = nl.ndarray((4, 4), nl.bfloat16, buffer=nl.sbuf)
        nisa.nc_transpose(tr, ta[:, 2:6])
        return _store(r, "r"), _store(tr, "tr")

    r, tr = _run(body, {"a": a, "b": b})
    assert np.array_equal(_bits(r)[:, 0], reduce_free(AluOp.MAX, _bits(b))), f"seed {seed}"
    assert np.array_equal(_bits(tr), _bits(a)[:, 2:6].T)


MISUSE = {
    "no vector engine": (lambda a, b: nisa.tensor_tensor(a, a, b, nl.add),
                         "which this core does not have"),
    "a reduction that subtracts": (lambda a, b: nisa.tensor_reduce(
        nl.ndarray((4, 1), nl.float32, buffer=nl.sbuf), b, nl.subtract),
        "op must be one of nl.add, nl.maximum, nl.minimum"),
    "an unknown op": (lambda a, b: nisa.tensor_tensor(a, a, b, np.divide), "op must be one of"),
    "an unhashable op": (lambda a, b: nisa.tensor_tensor(a, a, b, [1]), "op must be one of"),
    "shapes differ": (lambda a, b: nisa.tensor_tensor(a, a, b[:, 0:3], nl.add),
                      "shapes differ"),
    "partitions differ": (lambda a, b: nisa.tensor_tensor(a[0:2], a[0:2], b[2:4], nl.add),
                          "same partitions"),
    "dst in PSUM": (lambda a, b: nisa.tensor_scalar(
        nl.ndarray((4, 4), nl.float32, buffer=nl.psum), b, nl.add, 1.0),
        "dst must be in nl.sbuf"),
    "a scalar that is not fp32": (lambda a, b: nisa.tensor_scalar(b, b, nl.add, 0.1),
                                  "is not an fp32 value"),
    "overlapping operands": (lambda a, b: nisa.tensor_tensor(b[:, 1:5], b[:, 0:4], b[:, 0:4],
                                                             nl.add), "overlap"),
    "transpose dtype": (lambda a, b: nisa.nc_transpose(
        nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf), a[:, 0:4]), "data's dtype"),
    "transpose shape": (lambda a, b: nisa.nc_transpose(
        nl.ndarray((4, 4), nl.bfloat16, buffer=nl.sbuf), a[:, 0:3]), "dst must be (3, 4)"),
    "transpose onto itself": (lambda a, b: nisa.nc_transpose(a[:, 0:4], a[:, 2:6]),
                              "shares SBUF words"),
}


@pytest.mark.parametrize("case", list(MISUSE))
def test_misuse_is_a_kernel_error(case):
    call, text = MISUSE[case]
    cfg = CoreConfig(n=4, sbuf_words=128) if case == "no vector engine" else CFG
    k = Kernel(cfg, 0, 1)
    with tracing(k):
        a = nl.ndarray((4, 8), nl.bfloat16, buffer=nl.sbuf)
        b = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        with pytest.raises(KernelError) as info:
            call(a, b)
    assert text in str(info.value), str(info.value)


# --- The library's programs on DRAM matrices ---------------------------------------------------


def _lib_run(build, cfg=CFG):
    from sim.kernels import library

    kern, outs = library.traced(cfg, build)
    iss = NeuronCoreISS(cfg, dram=kern.dram)
    assert iss.run(kern.program) == ErrorCode.OK, iss.error_reason
    return [iss.read_dram(t.addr, t.shape[0] * t.shape[1], t.dtype).reshape(t.shape)
            for t in outs]


@pytest.mark.parametrize("chunk", [None, 5])
def test_library_elementwise_reduce_transpose(chunk, seed):
    """More rows than N and (with chunk) more columns than one load: every element once, in
    the contract's order; reductions fold whole rows; transposes of 9 x 7 in N x N blocks."""
    from golden.isa import Dtype as D
    from sim.kernels import library

    rng = vectors.seeded_rng("library-vector", chunk, seed=seed)
    a = vectors.operands("bf16", rng, (9, 13), 0.1).astype(np.uint16)
    b = vectors.operands("fp32", rng, (9, 13), 0.1).astype(np.uint32)

    def build(kern, ws):
        ta = kern.dram_tensor(a.shape, D.BF16, "a", data=a)
        tb = kern.dram_tensor(b.shape, D.FP32, "b", data=b)
        diff = kern.dram_tensor(a.shape, D.BF16, "diff")
        scaled = kern.dram_tensor(a.shape, D.FP32, "scaled")
        sums = kern.dram_tensor((9, 1), D.FP32, "sums")
        at = kern.dram_tensor((13, 9), D.BF16, "at")
        library.elementwise(ws, nl.subtract, ta, tb, diff, chunk=chunk)
        library.elementwise(ws, nl.multiply, tb, 0.25, scaled, chunk=chunk)
        library.reduce_columns(ws, nl.add, tb, sums)
        library.transpose(ws, ta, at)
        return diff, scaled, sums, at

    diff, scaled, sums, at = _lib_run(build)
    wa = to_fp32_bits(a, "bf16")
    assert np.array_equal(_bits(diff), round_fp32(alu(AluOp.SUBTRACT, wa, b), "bf16", "rne",
                                                  saturate=False)), f"seed {seed}"
    assert np.array_equal(_bits(scaled), alu(AluOp.MULTIPLY, b, np.uint32(0x3E800000)))
    assert np.array_equal(_bits(sums)[:, 0], reduce_free(AluOp.ADD, b))
    assert np.array_equal(_bits(at), a.T)
