# amaranth: UnusedElaboratable=no
"""The 2-D torus of collective engines in cocotb, Icarus and Verilator, bit-exact against golden.

``sim/tb/torus.py`` on ``hdl.torus:CollectiveTorus`` at 2 x 2 and 2 x 4 (the issue's sizes):
torus all-reduces and all-to-alls (``golden.collective.torus_schedule``) and single sub-ring
commands of every op along either dimension, with random latency, stalls and skew; illegal
commands per dimension. Then the torus all-reduce's and all-to-all's efficiency against their
bandwidth bounds (``golden.collective.torus_bound_cycles``) through ``nclite allreduce
--torus``'s driver.
"""

import os

import pytest

from sim import runner
from sim.cli.allreduce import run_collectives

TORUS = "hdl.torus:CollectiveTorus"
CONFIGS = {
    "2x2-w2": {"rows": 2, "cols": 2, "link_width": 2, "depth": 1024, "max_latency": 8,
               "add_stages": 1, "watchdog_cycles": 2048},
    "2x4-w1": {"rows": 2, "cols": 4, "link_width": 1, "depth": 2048, "max_latency": 8,
               "watchdog_cycles": 4096},
}


@pytest.mark.parametrize("config", [
    # The 2 x 4 torus runs in make test-full (and make bench): make test's budget.
    pytest.param(c, marks=pytest.mark.slow) if c == "2x4-w1" else c for c in CONFIGS])
def test_torus(simulator, config):
    runner.run(TORUS, CONFIGS[config], "sim.tb.torus", simulator,
               testcase="random_torus,illegal_torus,link_timeout_torus", run_tag=config,
               extra_env={"NCLITE_COLLECTIVES": "2"})


@pytest.mark.parametrize("op", ["all_reduce", "all_to_all"])  # test-full: conftest FULL_ONLY
def test_torus_efficiency(simulator, op):
    """n = 16 K words on a 2 x 2 torus of 4-word links, latency 8: >= 0.9 of the schedule's
    bandwidth bound (the issue's target), bit-exact. (Icarus runs n = 4 K in make test: the
    cycle counts are the same in both simulators.)"""
    n = 4096 if simulator == "icarus" and not os.environ.get("NCLITE_FULL") else 16384
    r = run_collectives(torus=(2, 2), sizes=[n], link_width=4, simulator=simulator, latency=8,
                        op=op, error_vs_float64=False)
    (run,) = r["runs"]
    assert run["efficiency"] >= 0.9, run
