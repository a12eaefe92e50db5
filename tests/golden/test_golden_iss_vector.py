"""The golden ISS's vector-engine commands (TENSOR_TENSOR, TENSOR_SCALAR, TENSOR_REDUCE,
TRANSPOSE) against references built here from the operator models (golden.vector.alu and
reduce_free on widened operands, golden.rounding.round_fp32 for the cast) and numpy indexing
for the transpose; SR draws against ACTIVATE's on the same beats; every error code with no side
effect; and a core without the vector engine rejecting its opcodes. Seed: ``NCLITE_SEED``.
"""

import numpy as np
import pytest

from golden.formats import to_bits, to_fp32_bits
from golden.isa import ActivationFunc, AluOp, Dtype, ErrorCode, Opcode, Rounding, encode
from golden.iss import CoreConfig, NeuronCoreISS
from golden.rounding import round_fp32
from golden.vector import alu, reduce_free
from sim.tb import vectors

CFG = CoreConfig(n=4, sbuf_words=64, psum_banks=2, psum_words=16, vector_engine=True)
NAMES = {d: d.golden_name for d in Dtype}


def _vec(op: Opcode, **fields) -> np.ndarray:
    """A vector command: every field 0 unless given (in0 / in1 SBUF fp32 by default)."""
    from golden.isa import FIELDS

    base = {name: 0 for name, _ in FIELDS[op]}
    base.update({k: 1 for k in ("in0_sbuf", "in1_sbuf") if k in base})
    base.update({k: int(Dtype.FP32) for k in ("in0_dtype", "in1_dtype", "dtype") if k in base})
    base.update(fields)
    return encode(op, **base)


def _iss(rng) -> NeuronCoreISS:
    """An ISS whose SBUF and PSUM hold random values with specials (fp32 words; narrow
    dtypes are read from a word's low bits)."""
    iss = NeuronCoreISS(CFG)
    sp = vectors.special_bits("fp32").astype(np.uint32)
    iss.sbuf[:] = vectors.random_bits("fp32", rng, iss.sbuf.size).reshape(iss.sbuf.shape)
    pick = rng.random(iss.sbuf.shape) < 0.1
    iss.sbuf[pick] = rng.choice(sp, int(pick.sum()))
    iss.te.psum[:] = vectors.random_bits("fp32", rng, iss.te.psum.size).reshape(
        iss.te.psum.shape)
    return iss


def _widened(words, dtype: Dtype) -> np.ndarray:
    narrow = (words & np.uint32((1 << (8 * dtype.nbytes)) - 1)).astype(f"<u{dtype.nbytes}")
    return to_fp32_bits(narrow, NAMES[dtype])


def _cast(y, dtype: Dtype, mode: str, saturate: bool) -> np.ndarray:
    return round_fp32(y, NAMES[dtype], mode, saturate=saturate).astype(np.uint32)


@pytest.mark.parametrize("alu_op", list(AluOp), ids=lambda o: o.name)
@pytest.mark.parametrize("in0_dtype, in1_psum, out", [
    (Dtype.FP32, False, Dtype.FP32), (Dtype.BF16, True, Dtype.BF16),
    (Dtype.FP8_E4M3, False, Dtype.FP8_E5M2), (Dtype.FP16, True, Dtype.FP8_E4M3)])
def test_tensor_tensor(alu_op, in0_dtype, in1_psum, out, seed):
    """SBUF x SBUF or SBUF x PSUM, any input dtype, a cast to each target (RNE): the rows in
    range get ``cast(alu(widen(in0), widen(in1)))``, every other word keeps its value."""
    rng = vectors.seeded_rng("tt", int(alu_op), int(in0_dtype), seed=seed)
    iss = _iss(rng)
    part, rows, cols = 1, 3, 7
    sbuf0, psum0 = iss.sbuf.copy(), iss.te.psum.copy()
    in1 = dict(in1_sbuf=0, in1_bank=1, in1_addr=5) if in1_psum else dict(in1_addr=20)
    cmd = _vec(Opcode.TENSOR_TENSOR, alu=int(alu_op), part=part, rows=rows, cols=cols,
               in0_addr=3, in0_dtype=int(in0_dtype), **in1, dtype=int(out),
               saturate=int(out in (Dtype.FP8_E4M3, Dtype.FP8_E5M2)), dst_addr=40)
    assert iss.run([cmd]) == ErrorCode.OK, iss.error_reason
    a = _widened(sbuf0[part:part + rows, 3:3 + cols], in0_dtype)
    b = (psum0[part:part + rows, 1, 5:5 + cols] if in1_psum
         else sbuf0[part:part + rows, 20:20 + cols])
    want_rows = _cast(alu(alu_op, a, b), out, "rne",
                      out in (Dtype.FP8_E4M3, Dtype.FP8_E5M2))
    want = sbuf0.copy()
    want[part:part + rows, 40:40 + cols] = want_rows
    assert np.array_equal(iss.sbuf, want), f"seed {seed}"
    assert np.array_equal(iss.te.psum, psum0)


@pytest.mark.parametrize("reverse", [0, 1])
def test_tensor_scalar(reverse, seed):
    """``in0 - s`` and ``s - in0`` from PSUM, into bf16 with RTZ, in place of nothing else."""
    rng = vectors.seeded_rng("ts", reverse, seed=seed)
    iss = _iss(rng)
    sbuf0, psum0 = iss.sbuf.copy(), iss.te.psum.copy()
    s = int(to_bits(np.array([0.375]), "fp32")[0])
    cmd = _vec(Opcode.TENSOR_SCALAR, alu=int(AluOp.SUBTRACT), reverse=reverse, part=0, rows=4,
               cols=16, in0_sbuf=0, in0_bank=0, in0_addr=0, scalar=s, dtype=int(Dtype.BF16),
               mode=int(Rounding.RTZ), dst_addr=48)
    assert iss.run([cmd]) == ErrorCode.OK, iss.error_reason
    x = psum0[:, 0, :]
    y = alu(AluOp.SUBTRACT, np.uint32(s), x) if reverse else alu(AluOp.SUBTRACT, x,
                                                                 np.uint32(s))
    want = sbuf0.copy()
    want[:, 48:64] = _cast(y, Dtype.BF16, "rtz", False)
    assert np.array_equal(iss.sbuf, want), f"seed {seed}"


@pytest.mark.parametrize("alu_op", [AluOp.ADD, AluOp.MAX, AluOp.MIN], ids=lambda o: o.name)
def test_tensor_reduce(alu_op, seed):
    """Each partition's row folds into one word (its own source word allowed)."""
    rng = vectors.seeded_rng("tr", int(alu_op), seed=seed)
    iss = _iss(rng)
    sbuf0 = iss.sbuf.copy()
    cmd = _vec(Opcode.TENSOR_REDUCE, alu=int(alu_op), part=2, rows=2, cols=30, in0_addr=10,
               in0_dtype=int(Dtype.BF16), dst_addr=10)
    assert iss.run([cmd]) == ErrorCode.OK, iss.error_reason
    want = sbuf0.copy()
    want[2:4, 10] = reduce_free(alu_op, _widened(sbuf0[2:4, 10:40], Dtype.BF16))
    assert np.array_equal(iss.sbuf, want), f"seed {seed}"


def test_transpose_moves_words(seed):
    """out[m, k] = src[k, m], 32-bit words unchanged, any first partitions; nothing else."""
    rng = vectors.seeded_rng("tp", seed=seed)
    iss = _iss(rng)
    sbuf0 = iss.sbuf.copy()
    progs = [_vec(Opcode.TRANSPOSE, part=1, rows=3, cols=4, src_addr=2, dst_part=0,
                  dst_addr=30),
             _vec(Opcode.TRANSPOSE, part=0, rows=4, cols=2, src_addr=9, dst_part=2,
                  dst_addr=50)]
    assert iss.run(progs) == ErrorCode.OK, iss.error_reason
    want = sbuf0.copy()
    want[0:4, 30:33] = sbuf0[1:4, 2:6].T
    want[2:4, 50:54] = sbuf0[0:4, 9:11].T
    assert np.array_equal(iss.sbuf, want)


def test_stochastic_rounding_draws_as_activate_does(seed):
    """``x * 1.0`` cast with SR is ACTIVATE's identity (scale 1, no bias) cast with SR: the
    same values and the same draws, so two ISSs seeded alike end with the same SBUF."""
    rng = vectors.seeded_rng("sr", seed=seed)
    one = int(to_bits(np.array([1.0]), "fp32")[0])
    a, b = _iss(rng), NeuronCoreISS(CFG)
    b.sbuf[:], b.te.psum[:] = a.sbuf, a.te.psum
    seed_cmd = encode(Opcode.SET_SEED, seed=seed + 99)
    vec = _vec(Opcode.TENSOR_SCALAR, alu=int(AluOp.MULTIPLY), part=1, rows=2, cols=9,
               in0_sbuf=0, in0_bank=1, in0_addr=3, scalar=one, dtype=int(Dtype.FP8_E4M3),
               mode=int(Rounding.SR), saturate=1, dst_addr=33)
    act = encode(Opcode.ACTIVATE, func=int(ActivationFunc.IDENTITY), src_sbuf=0, part=1,
                 rows=2, cols=9, src_bank=1, src_addr=3, bias_en=0, bias_addr=0, scale=one,
                 dtype=int(Dtype.FP8_E4M3), mode=int(Rounding.SR), saturate=1, dst_addr=33)
    assert a.run([seed_cmd, vec, vec]) == b.run([seed_cmd, act, act]) == ErrorCode.OK
    assert np.array_equal(a.sbuf, b.sbuf)


_OK = dict(alu=0, part=0, rows=2, cols=4, in0_addr=0, in1_addr=8, dst_addr=16)
ERRORS = [
    ("reserved alu", Opcode.TENSOR_TENSOR, dict(_OK, alu=6), ErrorCode.BAD_FIELD),
    ("a reduction that subtracts", Opcode.TENSOR_REDUCE,
     dict(alu=int(AluOp.SUBTRACT), rows=1, cols=2, dst_addr=9), ErrorCode.BAD_FIELD),
    ("reserved mode", Opcode.TENSOR_SCALAR, dict(rows=1, cols=1, mode=3, dst_addr=5),
     ErrorCode.BAD_FIELD),
    ("a bf16 PSUM operand", Opcode.TENSOR_TENSOR,
     dict(_OK, in1_sbuf=0, in1_dtype=int(Dtype.BF16)), ErrorCode.BAD_DTYPE),
    ("reserved dtype", Opcode.TENSOR_TENSOR, dict(_OK, dtype=5), ErrorCode.BAD_DTYPE),
    ("no columns", Opcode.TENSOR_TENSOR, dict(_OK, cols=0), ErrorCode.BAD_SHAPE),
    ("no rows", Opcode.TRANSPOSE, dict(rows=0, cols=2, dst_addr=9), ErrorCode.BAD_SHAPE),
    ("partitions beyond N", Opcode.TENSOR_SCALAR, dict(part=3, rows=2, cols=1, dst_addr=9),
     ErrorCode.BAD_RANGE),
    ("PSUM words beyond the bank", Opcode.TENSOR_TENSOR,
     dict(_OK, in1_sbuf=0, in1_addr=14), ErrorCode.BAD_RANGE),
    ("an overlapping SBUF operand", Opcode.TENSOR_TENSOR, dict(_OK, in1_addr=14),
     ErrorCode.BAD_RANGE),
    ("a transpose beyond N partitions", Opcode.TRANSPOSE,
     dict(rows=2, cols=3, dst_part=2, dst_addr=9), ErrorCode.BAD_RANGE),
    ("a transpose onto its source", Opcode.TRANSPOSE,
     dict(rows=4, cols=4, src_addr=0, dst_part=0, dst_addr=3), ErrorCode.BAD_RANGE),
]


@pytest.mark.parametrize("what, op, fields, code", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_change_nothing(what, op, fields, code, seed):
    rng = vectors.seeded_rng("err", seed=seed)
    iss = _iss(rng)
    sbuf0 = iss.sbuf.copy()
    fine = _vec(Opcode.TENSOR_SCALAR, rows=1, cols=1, dst_addr=60)
    assert iss.run([fine, _vec(op, **fields), fine]) == code, (what, iss.error_reason)
    assert iss.error_index == 1 and iss.executed == 1
    sbuf0[0, 60] = iss.sbuf[0, 60]  # the first command's word
    assert np.array_equal(iss.sbuf, sbuf0), what


def test_a_core_without_the_vector_engine_rejects_its_opcodes():
    iss = NeuronCoreISS(CoreConfig(n=4))
    for op in (Opcode.TENSOR_TENSOR, Opcode.TENSOR_SCALAR, Opcode.TENSOR_REDUCE,
               Opcode.TRANSPOSE):
        iss.clear_error()
        assert iss.run([_vec(op, rows=1, cols=1)]) == ErrorCode.BAD_OPCODE
        assert "no vector engine" in iss.error_reason
