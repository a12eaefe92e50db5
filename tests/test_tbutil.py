"""Testbench helpers that run outside the simulator: the stream-rule monitor."""

import pytest

from sim.tbutil import StallMonitor


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
