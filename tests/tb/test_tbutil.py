"""Testbench helpers that run outside the simulator: the stream-rule monitor, pause generators."""

import pytest

from sim.tb import tbutil
from sim.tb.tbutil import StallMonitor


def test_stall_monitor_passes_legal_streams():
    m = StallMonitor("o")
    assert m.sample(True, 5, False) is None
    assert m.sample(True, 5, True) == 5
    assert m.sample(False, None, True) is None
    assert m.sample(True, 6, True) == 6


@pytest.mark.parametrize("second, match", [((True, 9, True), "changed"),
                                           ((False, None, True), "dropped")])
def test_stall_monitor_catches_violations(second, match):
    m = StallMonitor("o")
    m.sample(True, 5, False)
    with pytest.raises(AssertionError, match=match):
        m.sample(*second)


@pytest.mark.parametrize("ms", [1, 2.006, 5 + 1e-4 * 333, 0.0101])
def test_timeout_is_whole_nanoseconds(ms):
    """cocotb refuses a timeout its 1 ps precision cannot represent (2.006 ms as a float is
    not): tbutil.timeout gives whole nanoseconds, never less than asked."""
    t = tbutil.timeout(ms)
    assert t["timeout_unit"] == "ns" and isinstance(t["timeout_time"], int)
    assert 0 <= t["timeout_time"] - ms * 1e6 < 1


def _take(gen, n):
    return [next(gen) for _ in range(n)]


def test_pauses_one_cycle_are_the_bernoulli_draws():
    """``max_burst=1``: one ``rng.random() < p`` a cycle, the pattern the testbenches' private
    copies drew before there was one generator."""
    import numpy as np

    from sim.tb.streams import pauses

    want = [int(x < 0.3) for x in np.random.default_rng(5).random(500)]
    assert _take(pauses(np.random.default_rng(5), 0.3), 500) == want
    assert _take(pauses(np.random.default_rng(5), 0.0), 100) == [0] * 100
    assert _take(pauses(np.random.default_rng(5), 1.0), 100) == [1] * 100


@pytest.mark.parametrize("p, burst", [(0.25, 4), (0.5, 3), (0.7, 2)])
def test_pauses_in_bursts(p, burst):
    """``max_burst`` > 1: pauses in bursts, about a fraction ``p`` of the cycles."""
    import itertools

    import numpy as np

    from sim.tb.streams import pauses

    seq = _take(pauses(np.random.default_rng(1), p, max_burst=burst), 20000)
    runs = [len(list(g)) for v, g in itertools.groupby(seq) if v]
    assert max(runs) > 1  # bursts, not single cycles
    assert abs(sum(seq) / len(seq) - p) < 0.05, sum(seq) / len(seq)
