# amaranth: UnusedElaboratable=no
"""cocotb test behind ``nclite pe-chain``: stream dot products through a PE column, no stalls.

The column runs inside :class:`hdl.sim_batch.CycleReplay`, which plays the inputs of every
cycle from batches (``sim.tb.batches.replay``), so no Python runs per cycle. Loads one weight
vector, streams ``NCLITE_DEMO_VECTORS`` input vectors back to back, checks
every result against ``golden.fp32.dot`` bit for bit, and writes the counts to
``NCLITE_DEMO_OUT`` (JSON): cycles, latency, MACs, utilization, simulation speed.
"""

import json
import os
import time

import cocotb
import numpy as np

from golden.fp32 import dot
from hdl.sim_batch import CycleReplay
from sim.tb import batches, tbutil, vectors


@cocotb.test(**tbutil.timeout(2 + 1e-4 * int(os.environ.get('NCLITE_DEMO_VECTORS', '256'))))
async def demo(dut):
    top = tbutil.params()
    p, k = top["params"], top["k"]
    replay_top = CycleReplay(**top)  # not elaborated: its layouts and the column's latency
    rows = p["rows"]
    latency = replay_top.design.latency
    assert latency >= 1, "the demo samples results after clock edges: needs latency >= 1"
    n = int(os.environ.get("NCLITE_DEMO_VECTORS", "256"))
    fmt = os.environ.get("NCLITE_DEMO_DTYPE", "bf16")
    rng = tbutil.rng(4)
    w = vectors.random_bits(fmt, rng, rows).astype(np.int64)
    x = vectors.random_bits(fmt, rng, n * rows).astype(np.int64).reshape(n, rows)
    golden = dot(w, fmt, x, fmt)

    # The inputs of every cycle, played one set per cycle by the replay top (no Python per
    # cycle): LoadStationary, one weight per cycle down the column (the last row's first);
    # then MultiplyMoving, one vector per cycle; then `latency - 1` cycles to drain, the last
    # vector held on `x`.
    layout = replay_top.input_layout
    code = tbutil.FORMAT_CODES[fmt]
    load_cycles = rows
    load = batches.layout_bits(layout, rows, w_shift=1,
                               w_in=w[::-1].astype(np.uint64) | code << 16)
    lanes = x.astype(np.uint16)
    lanes = np.concatenate([lanes, np.repeat(lanes[-1:], latency - 1, axis=0)])
    swap = np.zeros(len(lanes), dtype=np.uint64)
    swap[0] = 1
    stream = batches.layout_bits(layout, len(lanes), en=1, x_fmt=code, x=lanes, x_swap=swap)
    inputs = np.concatenate([load, stream])

    dut.inputs__valid.value = 0
    dut.outputs__ready.value = 1
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    start = time.perf_counter()
    samples = await batches.replay(dut, inputs, k=k)
    wall = time.perf_counter() - start
    cycle = len(inputs)
    results = batches.field_values(samples, replay_top.output_layout, "result")
    # Sample j is `result` after the edge that ends cycle j; the vector of cycle
    # load_cycles + i is on `result` `latency` edges later, in sample load_cycles + latency
    # - 1 + i.
    first = load_cycles + latency - 1
    got = results[first:first + n].astype(np.uint32)
    bad = np.flatnonzero(got != golden)
    out = {
        "simulator": tbutil.simulator(), "rows": rows, "dtype": fmt, "vectors": n,
        "seed": tbutil.seed(), "latency": latency, "load_cycles": load_cycles,
        "cycles": cycle, "macs": n * rows,
        "utilization": n * rows / (rows * cycle),
        "bit_exact": bool(bad.size == 0), "mismatches": int(bad.size),
        "first_mismatch": None if bad.size == 0 else {
            "index": int(bad[0]), "rtl": f"0x{int(got[bad[0]]):08x}",
            "golden": f"0x{int(golden[bad[0]]):08x}"},
        "sim_wall_s": wall, "sim_cycles_per_s": cycle / wall,
    }
    with open(os.environ["NCLITE_DEMO_OUT"], "w") as f:
        json.dump(out, f)
    assert bad.size == 0, f"{bad.size} of {n} dot products differ from golden: " \
        f"{out['first_mismatch']} (seed {tbutil.seed()})"
