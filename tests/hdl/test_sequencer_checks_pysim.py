# amaranth: UnusedElaboratable=no
"""The sequencer's checks of DMA, LOAD_STATIONARY, MATMUL (after a LOAD_STATIONARY of K = 2),
ACTIVATE, the vector commands and TRANSPOSE against the ISS's, in Amaranth's simulator: random
descriptors whose fields sit around every limit (partitions past N, words past SBUF or a PSUM
bank, a DMA's last byte around DRAM's end, sources touching, meeting or equal to the
destination, transposes onto their source, every dtype, field, shape and alignment fault); the
error code must be the ISS's, in the ISS's order. The range checks compare sums the slot registers
(``hdl.sequencer._Bounds``), so this pins those sums and their compares to the ISS's arithmetic.
(The whole core runs one case of each check in cocotb: ``sim.host.programs.error_programs``.)"""

from __future__ import annotations

import numpy as np
import pytest
from sequencer_bench import error_codes

from golden.isa import ErrorCode, Opcode, encode
from golden.iss import CommandError, CoreConfig, NeuronCoreISS
from hdl.sequencer import Sequencer

N, WORDS, BANKS, PWORDS, DRAM = 4, 24, 2, 16, 1 << 12


def _near(rng, limit: int) -> int:
    """A value around ``limit`` (0 .. limit + 2), now and then a large one."""
    if rng.random() < 0.05:
        return int(rng.integers(0, 1 << 16))
    return int(rng.integers(0, limit + 3))


def _fields(op: Opcode, rng) -> dict:
    """Random fields for ``op``, mostly legal but for the ranges."""
    def pick(*values):
        return int(rng.choice(values))

    def rare(bad, *good):  # a good value, or now and then ``bad`` (a field or dtype fault)
        return bad if rng.random() < 0.08 else pick(*good)

    part, rows, cols = _near(rng, N) % 256, _near(rng, N) % 512, _near(rng, 8) % (1 << 16)
    if op in (Opcode.DMA_LOAD, Opcode.DMA_STORE):
        if rng.random() < 0.2:  # in range: the alignment decides
            return {"dtype": pick(0, 3, 4), "part": 0, "rows": pick(1, 2), "sbuf_addr": 0,
                    "cols": pick(1, 4), "dram_addr": pick(0, 1, 2, 4, 6),
                    "dram_stride": pick(0, 2, 4, 6)}
        return {"dtype": rare(6, 0, 1, 2, 3, 4), "part": part, "rows": rows,
                "sbuf_addr": _near(rng, WORDS), "cols": cols,
                # the DRAM bound: the last byte around DRAM's end, now and then far past it
                "dram_addr": pick(0, 4, 8, DRAM - 64, DRAM - 32, DRAM - 8, DRAM - 4, DRAM,
                                  (1 << 32) - 4, 2),
                "dram_stride": pick(0, 4, 8, 16, 32, DRAM // 2, DRAM - 4, (1 << 32) - 4, 6)}
    if op == Opcode.MATMUL:
        return {"fmt": rare(3, 0, 1, 2), "part": part, "k": rare(3, 2), "f": _near(rng, 8),
                "sbuf_addr": _near(rng, WORDS), "bank": rare(BANKS, 0, 1),
                "psum_addr": _near(rng, PWORDS), "accumulate": 0}
    if op == Opcode.LOAD_STATIONARY:
        return {"fmt": rare(3, 0, 1, 2), "part": part, "k": _near(rng, N) % 512,
                "m": _near(rng, N) % 512, "sbuf_addr": _near(rng, WORDS), "sparsity": 0}
    if op == Opcode.ACTIVATE:
        return {"func": rare(3, 0, 1), "src_sbuf": pick(0, 1, 1), "part": part,
                "rows": rows, "cols": cols, "src_bank": pick(0, 1, BANKS),
                "src_addr": _near(rng, WORDS), "bias_en": pick(0, 1),
                "bias_addr": _near(rng, WORDS), "scale": 0x3F800000, "dtype": rare(7, 0, 4),
                "mode": rare(3, 0, 1, 2), "saturate": 0, "dst_addr": _near(rng, WORDS)}
    if op == Opcode.TRANSPOSE:
        f = {"part": part, "rows": rows, "cols": _near(rng, N) % (1 << 16),
             "src_addr": _near(rng, WORDS), "dst_part": _near(rng, N) % 256,
             "dst_addr": _near(rng, WORDS)}
        if rng.random() < 0.6:  # in range, the destination at, or touching, the source
            r, c = int(rng.integers(1, N + 1)), int(rng.integers(1, N + 1))
            f |= {"rows": r, "cols": c, "part": int(rng.integers(0, N - r + 1)),
                  "src_addr": int(rng.integers(0, WORDS - c + 1))}
            f["dst_addr"] = max(0, f["src_addr"] + int(rng.integers(-r - 1, c + 2)))
            f["dst_part"] = max(0, f["part"] + int(rng.integers(-c - 1, r + 2)))
        return f
    alu = rare(1, 0, 3, 4) if op == Opcode.TENSOR_REDUCE else rare(6, 0, 1, 2, 5)
    f = {"alu": alu, "part": part, "rows": rows, "cols": cols,
         "dtype": rare(7, 0, 4), "mode": rare(3, 0, 1, 2), "saturate": 0,
         "dst_addr": _near(rng, WORDS)}
    ins = ["in0"] + (["in1"] if op == Opcode.TENSOR_TENSOR else [])
    for i in ins:
        sbuf = pick(0, 1, 1)
        f |= {f"{i}_sbuf": sbuf, f"{i}_bank": pick(0, 1, BANKS),
              f"{i}_addr": _near(rng, PWORDS if not sbuf else WORDS),
              f"{i}_dtype": rare(0, 4) if not sbuf else rare(6, 0, 1, 2, 4)}
        if rng.random() < 0.3:  # the operand at, or touching, the destination
            f[f"{i}_addr"] = max(0, f["dst_addr"] + int(rng.integers(-cols - 1, cols + 2)))
    if op == Opcode.TENSOR_SCALAR:
        f |= {"reverse": 0, "scalar": 0x3F800000}
    return f


OPS = [Opcode.DMA_LOAD, Opcode.DMA_STORE, Opcode.LOAD_STATIONARY, Opcode.MATMUL,
       Opcode.ACTIVATE, Opcode.TENSOR_TENSOR, Opcode.TENSOR_SCALAR, Opcode.TENSOR_REDUCE,
       Opcode.TRANSPOSE]
#: A MATMUL's checks need the tile before it: K = 2 (a dense tile of 2 x 2).
_TILE = encode(Opcode.LOAD_STATIONARY, fmt=0, part=0, k=2, m=2, sbuf_addr=0, sparsity=0)


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_checks_match_the_iss(op):
    seed = 500 + int(op)
    rng = np.random.default_rng(seed)
    cases = [_fields(op, rng) for _ in range(200)]
    seq = Sequencer(n=N, sbuf_words=WORDS, psum_banks=BANKS, psum_words=PWORDS, dram_bytes=DRAM)
    iss = NeuronCoreISS(CoreConfig(n=N, sbuf_words=WORDS, psum_banks=BANKS, psum_words=PWORDS,
                                   dram_bytes=DRAM, vector_engine=True))
    descs = [encode(op, **f) for f in cases]
    first = [_TILE] if op == Opcode.MATMUL else []  # (the ISS executes it, then only checks)
    if first:
        assert iss.step(0, _TILE)
    got_codes = error_codes(seq, first + descs)
    assert got_codes[:len(first)] == [ErrorCode.OK] * len(first)
    got_codes = got_codes[len(first):]
    bad, codes = [], set()
    for f, words, got in zip(cases, descs, got_codes, strict=True):
        try:
            iss.check(words)
            want = ErrorCode.OK
        except CommandError as exc:
            want = exc.code
        codes.add(want)
        if got != want:
            bad.append((f, got.name, want.name))
    assert not bad, f"seed {seed}: {len(bad)} of {len(cases)} differ from the ISS: {bad[:3]}"
    # Not vacuous: both legal commands and range faults occur (and a DMA's alignment faults).
    assert {ErrorCode.OK, ErrorCode.BAD_RANGE} <= codes, (seed, codes)
    if op in (Opcode.DMA_LOAD, Opcode.DMA_STORE):
        assert ErrorCode.BAD_ALIGN in codes, (seed, codes)
