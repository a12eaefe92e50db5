# amaranth: UnusedElaboratable=no
"""The stochastic-rounding unit in cocotb, Icarus and Verilator: bit-exact against golden.sru.

Configurations: the default (all targets, r = 16, 4 stages) with 4 lanes runs every target x
mode x saturation with 10^4 random values each plus all specials, under random input gaps and
output back-pressure, and the re-seed reproducibility test; smaller runs cover 3 lanes (not a
power of two) with 0 and 3 stages, r = 1 and r = 32, and builds with only some targets (the
others' beats come back ``invalid``). Throughput is checked at full rate: n beats in
n + latency cycles.
"""

import json
import os

import pytest

from sim import runner

SRU = "hdl.sru:StochasticRounder"
CONFIGS = {
    "l4": ({"lanes": 4}, "10000"),
    "l3-s0-r1": ({"lanes": 3, "stages": 0, "random_bits": 1}, "1500"),
    "l3-s3-r32": ({"lanes": 3, "stages": 3, "random_bits": 32}, "1500"),
    "l2-fp8": ({"lanes": 2, "stages": 1, "random_bits": 8,
                "targets": ["fp8_e4m3", "fp8_e5m2"]}, "1500"),
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_sru(simulator, config):
    params, vectors = CONFIGS[config]
    if simulator == "icarus" and not os.environ.get("NCLITE_FULL"):
        # Icarus simulates ~30x slower: a quarter of the vectors in make test
        vectors = str(max(1500, int(vectors) // 4))
    runner.run(SRU, params, "sim.tb.sru", simulator,
               testcase="random_beats,reseed,pass_while_seeding,reset_midstream", run_tag=config,
               extra_env={"NCLITE_VECTORS": vectors})


def test_sru_throughput(simulator, tmp_path):
    out = tmp_path / "sru.json"
    runner.run(SRU, {"lanes": 4, "stages": 4}, "sim.tb.sru", simulator, testcase="throughput",
               run_tag="throughput", extra_env={"NCLITE_VECTORS": "500",
                                                "NCLITE_SRU_OUT": str(out)})
    r = json.loads(out.read_text())
    assert r["beats"] == 500 and r["cycles"] <= 500 + 3, r
