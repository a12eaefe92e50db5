"""Kernels on the RTL in both simulators (``nclite kernel run --on``), every memory of every
core bit-exact with the golden ISS: the documented examples, on the demo's builds."""

from __future__ import annotations

import pytest

from sim.cli.demo import CORE_CONFIG, RING_CONFIG
from sim.kernels import load_kernel, run_kernel
from sim.kernels.run import DEFAULT_CONFIG


def test_examples_use_the_demos_builds():
    """The kernels' cores are the demo's (one RTL model built for both)."""
    from sim.kernels.run import _params

    assert DEFAULT_CONFIG == CORE_CONFIG
    assert _params(load_kernel("docs/kernels/matmul.py"), 1) == CORE_CONFIG
    assert _params(load_kernel("docs/kernels/data_parallel_matmul.py"), 4) == RING_CONFIG


def test_profile_engines_are_the_cores():
    """The profile names the recorder's bits as the core does."""
    from hdl.core import ACTIVITY_ENGINES
    from sim.kernels.profile import ENGINES

    assert ENGINES == ACTIVITY_ENGINES


@pytest.mark.parametrize("path", ["docs/kernels/matmul.py",
                                  "docs/kernels/data_parallel_matmul.py",
                                  "sim/kernels/moe.py"])
def test_kernel_on_rtl(simulator, path, tmp_path):
    """Bit-exact with the ISS; the same outputs; the core's recorded activity agrees with its
    performance counters (every engine's busy cycles, one dispatch per command), and the
    profile is drawn."""
    import matplotlib.image

    from sim.kernels import profile

    png = tmp_path / "profile.png"
    r = run_kernel(path, on=simulator, seed=5, profile_png=png)
    assert r["bit_exact"], r["mismatch"]
    iss = run_kernel(path, seed=5)
    for name, per_core in r["outputs"].items():
        for got, want in zip(per_core, iss["outputs"][name], strict=True):
            assert got.tobytes() == want.tobytes()
    n = r["config"]["n"]
    for cycles, perf, macs in zip(r["cycles"], r["perf"], r["macs"], strict=True):
        assert 0 < perf["tensor_busy"] <= perf["busy"] <= cycles
        assert perf["moving_columns"] * n * n >= macs  # every MAC in some moving column
    for core, (act, perf, commands) in enumerate(zip(r["activity"], r["perf"], r["commands"],
                                                     strict=True)):
        events = act["events"]
        assert not act["full"] and events, core
        spans = profile.intervals(events, events[-1][0] + 1)
        for engine in profile.ENGINES:
            busy = sum(b - a for a, b in spans[engine])
            assert busy == perf[f"{engine}_busy"], (core, engine, busy, perf)
        assert [i for _, i in profile.dispatches(events)] == list(range(commands)), core
    assert matplotlib.image.imread(png).shape[2] in (3, 4)
