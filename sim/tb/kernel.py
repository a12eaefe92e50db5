"""cocotb testbench: a traced kernel (``sim.kernels``) on one NeuronCore or a ring of them.

``NCLITE_KERNEL`` names an ``.npz`` file with ``program<r>`` (the descriptors of core r, one
row of eight words each) and ``dram<r>`` (core r's DRAM image from byte 0);
``sim.kernels.run`` writes it. On ``hdl.sim_top.CoreWithDram`` (one core, its DRAM never
stalling, so that the cycles are the core's own) the program runs through
:class:`sim.tb.core.CoreTB`; on ``hdl.sim_top.RingWithDram`` through
:class:`sim.tb.multicore.RingTB` (DRAM never stalling, links of latency 1). Either
runs the same programs on the golden ISS and compares every byte of DRAM and every SBUF and
PSUM word of every core, bit for bit. The figures (``bit_exact``, ``mismatch``, ``cycles``
and the performance counters of each core over the kernel) go to ``NCLITE_KERNEL_OUT`` as
JSON.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np

from sim.tb import tbutil
from sim.tb.core import CoreTB
from sim.tb.multicore import RingTB


def _load() -> tuple[list, list]:
    data = np.load(os.environ["NCLITE_KERNEL"])
    cores = sum(1 for key in data.files if key.startswith("program"))
    programs = [list(data[f"program{r}"]) for r in range(cores)]
    drams = [data[f"dram{r}"] for r in range(cores)]
    return programs, drams


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
            await tb.run(programs, "kernel")
            results = tb.last_results
        else:
            tb = CoreTB(dut, dram_pauses=0.0, debug_every=0)
            await tb.start()
            before = [await tb.host.perf()]
            tb.dram(drams[0], 0)
            results = [await tb.run(programs[0], "kernel")]
        figures.update(bit_exact=True, cycles=[res.cycles for res in results],
                       perf=[{key: res.perf[key] - b[key] for key in res.perf}
                             for res, b in zip(results, before, strict=True)])
    except AssertionError as exc:
        figures["mismatch"] = str(exc)
        _write(figures)
        raise
    _write(figures)
