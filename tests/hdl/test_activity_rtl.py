"""The activity recorder of the simulation tops (``hdl.activity.ActivityRecorder``) in cocotb,
Icarus and Verilator (``sim/tb/activity.py``); on a whole core, ``tests/kernels``' profile
test checks its intervals against the performance counters."""

from sim import runner


def test_activity_recorder(simulator):
    # The memory is in the top module, whose signals a Verilator model makes public anyway.
    runner.run("hdl.activity:ActivityRecorder", {"depth": 64}, "sim.tb.activity", simulator)
