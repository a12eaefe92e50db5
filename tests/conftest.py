"""pytest wiring shared by every test: the simulator parametrisation and the seed."""

import os

import pytest

from sim.runner import SIMULATORS


def pytest_generate_tests(metafunc):
    # Every test that takes a `simulator` argument runs once per simulator: Icarus and Verilator.
    if "simulator" in metafunc.fixturenames:
        metafunc.parametrize("simulator", SIMULATORS)


@pytest.fixture
def seed() -> int:
    """The random seed of this run (NCLITE_SEED, default 1); failure messages include it."""
    return int(os.environ.get("NCLITE_SEED", "1"))
