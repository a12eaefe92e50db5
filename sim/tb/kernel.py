"""cocotb testbench: a traced kernel (``sim.kernels``) on one NeuronCore or a ring of them.

``NCLITE_KERNEL`` names an ``.npz`` file with ``program<r>`` (the descriptors of core r, one
row of eight words each) and ``dram<r>`` (core r's DRAM image from byte 0);
``sim.kernels.run`` writes it. On ``hdl.sim_top.CoreWithDram`` (one core, its DRAM never
stalling, so that the cycles are the core's own) the program runs through
:class:`sim.tb.core.CoreTB`; on ``hdl.sim_top.RingWithDram`` through
:class:`sim.tb.multicore.RingTB` (DRAM never stalling, links of latency 1). Either
runs the same programs on the golden ISS and compares every byte of DRAM and every SBUF and
PSUM word of every core, bit for bit. The figures (``bit_exact``, ``mismatch``, ``cycles``,
the performance counters of each core over the kernel, and ``traces``: each core's activity
recorder entries from the cycle before its first command, for a profile) go to
``NCLITE_KERNEL_OUT`` as JSON.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from sim.tb import tbutil
from sim.tb.core import CoreTB
from sim.tb.multicore import RingTB


def _load() -> tuple[list, list]:
    data = np.load(os.environ["NCLITE_KERNEL"])
    cores = sum(1 for key in data.files if key.startswith("program"))
    programs = [list(data[f"program{r}"]) for r in range(cores)]
    drams = [data[f"dram{r}"] for r in range(cores)]
    return programs, drams


async def _clear_traces(dut, cores: int, ring: bool) -> None:
    """Empty the activity recorders (``hdl.activity``) and enable them: they record from the
    next cycle."""
    sfx = [str(r) if ring else "" for r in range(cores)]
    for s in sfx:
        getattr(dut, f"trace_clear{s}").value = 1
    await RisingEdge(dut.clk)
    for s in sfx:
        getattr(dut, f"trace_clear{s}").value = 0
        getattr(dut, f"trace_enable{s}").value = 1


def _read_traces(dut, cores: int, ring: bool) -> list[dict]:
    """Each core's recorder entries (integers, ``hdl.activity.ActivityEventLayout``), read
    through VPI, and whether it filled up."""
    out = []
    for r in range(cores):
        sfx = str(r) if ring else ""
        count = int(getattr(dut, f"trace_count{sfx}").value)
        events = getattr(dut, f"trace{sfx}").events
        out.append({"entries": [int(events[i].value.to_unsigned()) for i in range(count)],
                    "full": bool(int(getattr(dut, f"trace_full{sfx}").value))})
    return out


def _write(figures: dict) -> None:
    with open(os.environ["NCLITE_KERNEL_OUT"], "w") as fh:
        json.dump(figures, fh, indent=2)


@cocotb.test(**tbutil.timeout(600))
async def run_kernel(dut):
    programs, drams = _load()
    ring = hasattr(dut, "busy1")
    figures = {"simulator": tbutil.simulator(), "bit_exact": False, "mismatch": ""}
    try:
        if ring:
            tb = RingTB(dut, debug_every=0, dram_pauses=0.0, random_links=False)
            await tb.start()
            before = [await h.perf() for h in tb.hosts]
            for r, image in enumerate(drams):
                tb.iss[r].dram[:image.size] = image
                tb.hosts[r].write_dram(0, image)
            await _clear_traces(dut, len(programs), ring)
            await tb.run(programs, "kernel")
            results = tb.last_results
        else:
            tb = CoreTB(dut, dram_pauses=0.0, debug_every=0)
            await tb.start()
            before = [await tb.host.perf()]
            tb.dram(drams[0], 0)
            await _clear_traces(dut, 1, ring)
            results = [await tb.run(programs[0], "kernel")]
        figures["traces"] = _read_traces(dut, len(programs), ring)
        figures.update(bit_exact=True, cycles=[res.cycles for res in results],
                       perf=[{key: res.perf[key] - b[key] for key in res.perf}
                             for res, b in zip(results, before, strict=True)])
    except AssertionError as exc:
        figures["mismatch"] = str(exc)
        _write(figures)
        raise
    _write(figures)
