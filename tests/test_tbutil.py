"""Testbench helpers that run outside the simulator: the stream-rule monitor."""

import pytest

from sim import tbutil
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


@pytest.mark.parametrize("ms", [1, 2.006, 5 + 1e-4 * 333, 0.0101])
def test_timeout_is_whole_nanoseconds(ms):
    """cocotb refuses a timeout its 1 ps precision cannot represent (2.006 ms as a float is
    not): tbutil.timeout gives whole nanoseconds, never less than asked."""
    t = tbutil.timeout(ms)
    assert t["timeout_unit"] == "ns" and isinstance(t["timeout_time"], int)
    assert 0 <= t["timeout_time"] - ms * 1e6 < 1
