"""``hdl.sim_batch`` (players, recorders and the tops built of them) and ``sim.tb.batches``:
cocotb on the emitted Verilog, both simulators (their parameter errors:
tests/hdl/test_params.py)."""

import json

import numpy as np
import pytest

from hdl.sim_batch import CycleReplay, batch_layout
from sim import runner
from sim.tb import batches

REGISTER = "sim.tb.selftest_design:StreamRegister"


@pytest.mark.parametrize("k", [1, 4])  # k = 1: every batch is one beat
def test_played_beats(simulator, k):
    runner.run("hdl.sim_batch:PlayedStreams",
               {"design": REGISTER, "params": {}, "played": ["i"], "k": k},
               "sim.tb.sim_batch", simulator, testcase="played_beats")


def test_played_stream_has_the_timing_of_a_driven_one(simulator, tmp_path):
    """The design sees a played stream as it sees one driven beat by beat from Python."""
    runs = {}
    for label, factory, params in (
            ("driven", REGISTER, {}),
            ("played", "hdl.sim_batch:PlayedStreams",
             {"design": REGISTER, "params": {}, "played": ["i"], "k": 4})):
        out = tmp_path / f"{label}.json"
        runner.run(factory, params, "sim.tb.sim_batch", simulator, testcase="timing",
                   extra_env={"NCLITE_BATCH_OUT": str(out)}, run_tag=label)
        runs[label] = json.loads(out.read_text())
    assert len(runs["driven"]["beats"]) == 14 + 1 + 9
    assert runs["played"] == runs["driven"]


@pytest.mark.parametrize("k", [1, 8])
def test_replay(simulator, k):
    runner.run("hdl.sim_batch:CycleReplay",
               {"design": "sim.tb.selftest_design:InitialisedComb", "params": {}, "k": k},
               "sim.tb.sim_batch", simulator, testcase="replay")


def test_pulse_counter(simulator):
    """Counts per index (3: not a power of two), ``reached`` within the pulse's cycle, ``since``
    (sim/tb/sim_batch.py, ``pulse_counter``)."""
    runner.run("hdl.sim_batch:PulseCounter", {"indices": 3}, "sim.tb.sim_batch", simulator,
               testcase="pulse_counter")


@pytest.mark.parametrize("k", [1, 3, 8])
def test_batches_from_bits_round_trip(k):
    rng = np.random.default_rng(k)
    width = 13
    for n in (1, k, k + 1, 4 * k + 2):
        values = rng.integers(0, 1 << width, n)
        bits = batches.bits_of(values.astype(np.uint64), width)
        packed = batches.batches_from_bits(bits, k)
        assert packed == batches.pack_batches([int(v) for v in values], k, width)
        layout = batch_layout(width, k)
        assert all(v < 1 << layout.size for v in packed)
        # A recorder's batch of c beats holds them in its last c places.
        cb = layout["count"].width
        recorded = [(v & ((1 << cb) - 1)) | (v >> cb) << (cb + width * (k - (v & ((1 << cb) - 1))))
                    for v in packed]
        back = np.concatenate([batches.bits_from_batch(v, k, width) for v in recorded])
        assert (back == bits).all()


def test_layout_bits_and_field_values():
    layout = CycleReplay(design="hdl.pe:PEColumn", params={"rows": 2}).input_layout
    lanes = np.array([[0x1234, 0xFFFF], [0, 0x8000]], dtype=np.uint16)
    bits = batches.layout_bits(layout, 2, en=1, x=lanes, x_swap=np.array([1, 0]))
    assert list(batches.field_values(bits, layout, "en")) == [1, 1]
    assert list(batches.field_values(bits, layout, "x")) == [0xFFFF_1234, 0x8000_0000]
    assert list(batches.field_values(bits, layout, "x_swap")) == [1, 0]
    assert list(batches.field_values(bits, layout, "w_in")) == [0, 0]
