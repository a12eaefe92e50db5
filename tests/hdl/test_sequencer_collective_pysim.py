# amaranth: UnusedElaboratable=no
"""The sequencer's COLLECTIVE checks against the ISS's, in Amaranth's simulator: random
descriptors (reserved ops, every shift, destinations past SBUF, meeting or touching the source)
on cores in rings of 2 to 6 (the non-power-of-two P·⌈cols/P⌉ too), in tori of 2 x 2, 2 x 3 and
3 x 2 (``dim`` at random: P is the sub-ring's) and outside a ring; the error code must be the
ISS's, in the ISS's order. (The whole core runs the same checks on its error
programs in cocotb; those cores are outside a ring or in a ring of 4.)"""

from __future__ import annotations

import numpy as np
import pytest
from sequencer_bench import error_codes

from golden.isa import ErrorCode, Opcode, encode
from golden.iss import CommandError, CoreConfig, NeuronCoreISS
from hdl.sequencer import Sequencer

WORDS = 24


def _cases(rng, w: int, count: int) -> list[dict]:
    out = []
    for _ in range(count):
        op = int(rng.integers(0, 8)) if rng.random() < 0.3 else int(rng.choice([3, 4]))
        out.append({"coll_op": op, "part": int(rng.integers(0, 3)),
                    "rows": int(rng.choice([0, w, w, w, w + 1])),
                    "sbuf_addr": int(rng.integers(0, WORDS + 2)),
                    "cols": int(rng.integers(0, 14)),
                    "dst_addr": int(rng.integers(0, WORDS + 2)) if rng.random() < 0.9
                    else int(rng.integers(0, 1 << 16)),
                    "shift": int(rng.integers(0, 8)) if rng.random() < 0.95
                    else int(rng.integers(0, 64)),
                    "dim": int(rng.integers(0, 2)) if rng.random() < 0.5 else 0})
    return out


@pytest.mark.parametrize("link_width, ranks, torus_rows",
                         [(1, 3, 1), (2, 4, 1), (1, 5, 1), (4, 6, 1), (1, 2, 1), (1, 0, 1),
                          (2, 4, 2), (1, 6, 2), (1, 6, 3)])
def test_collective_checks_match_the_iss(link_width, ranks, torus_rows):
    seed = 100 + 7 * ranks + link_width + 1000 * (torus_rows - 1)
    cases = _cases(np.random.default_rng(seed), link_width, 150)
    ring = ranks != 0
    seq = Sequencer(n=8, sbuf_words=WORDS, psum_banks=2, psum_words=16, dram_bytes=1 << 12,
                    ring=ring, ranks=ranks if ring else 2, link_width=link_width,
                    torus_rows=torus_rows)
    iss = NeuronCoreISS(CoreConfig(n=8, sbuf_words=WORDS, psum_banks=2, psum_words=16,
                                   dram_bytes=1 << 12, link_width=link_width, ranks=ranks,
                                   torus_rows=torus_rows))
    descs = [encode(Opcode.COLLECTIVE, **f) for f in cases]
    bad = []
    for f, words, got in zip(cases, descs, error_codes(seq, descs), strict=True):
        try:
            iss.check(words)
            want = ErrorCode.OK if ring else ErrorCode.BAD_FIELD  # (executing: no ring)
        except CommandError as exc:
            want = exc.code
        if got != want:
            bad.append((f, got.name, want.name))
    assert not bad, f"seed {seed}: {len(bad)} of {len(cases)} differ from the ISS: {bad[:4]}"
