"""sim.verify.latency: the shift between a pipeline's outputs and the expected ones."""

import numpy as np

from sim.verify.latency import shift_hint, shift_of


def test_shift_of_finds_late_and_early_results():
    want = np.random.default_rng(1).integers(0, 1 << 32, 500)
    late = np.concatenate([[0, 0], want[:-2]])  # each result two late
    early = np.concatenate([want[1:], [7]])  # each one early
    assert shift_of(late, want) == 2 and shift_of(early, want) == -1
    assert shift_of(want, want) is None  # (no shift: a check passes, or fails otherwise)
    assert shift_of(want[::-1], want) is None
    assert shift_of(np.concatenate([[0] * 4, want[:-4]]), want) is None  # more than 3
    hint = shift_hint(late, want, 3)
    assert "each product comes 2 enabled cycle(s) late" in hint
    assert "5 registers on the path, not stages = 3" in hint
    assert "early" in shift_hint(early, want, 3) and shift_hint(want[::-1], want, 3) == ""
