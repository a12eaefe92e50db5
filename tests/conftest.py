"""pytest wiring shared by every test: the simulator parametrisation and the seed."""

import os

import pytest

# The suite's Verilator models compile with g++ -O0 unless told otherwise: its runs are short
# (75 s of Verilator simulation in all, against some 450 CPU s of builds at -O1), and -O0 builds
# in less than half the time for about 20 % slower runs (measured on the ring of cores: 96 ->
# 52 s build, the core's error test 7.7 -> 8.6 s run). `nclite demo` and `make bench` keep
# sim/toolchain.py's -O1. Set before sim.runner activates the toolchain.
os.environ.setdefault("NCLITE_VERILATOR_OPT", "-O0")

from sim.runner import SIMULATORS  # noqa: E402


def pytest_generate_tests(metafunc):
    # Every test that takes a `simulator` argument runs once per simulator: Icarus and Verilator.
    if "simulator" in metafunc.fixturenames:
        metafunc.parametrize("simulator", SIMULATORS)


@pytest.fixture
def seed() -> int:
    """The random seed of this run (NCLITE_SEED, default 1); failure messages include it."""
    return int(os.environ.get("NCLITE_SEED", "1"))
