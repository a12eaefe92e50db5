# amaranth: UnusedElaboratable=no
"""cocotb test behind ``nclite demo``: stream dot products through a PE column, no stalls.

Loads one weight vector, streams ``NCLITE_DEMO_VECTORS`` input vectors back to back, checks
every result against ``golden.fp32.dot`` bit for bit, and writes the counts to
``NCLITE_DEMO_OUT`` (JSON): cycles, latency, MACs, utilization, simulation speed.
"""

import json
import os
import time

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge

from golden.fp32 import dot
from hdl.pe import PEColumn
from sim import tbutil, vectors


@cocotb.test(**tbutil.timeout(2 + 1e-4 * int(os.environ.get('NCLITE_DEMO_VECTORS', '256'))))
async def demo(dut):
    p = tbutil.params()
    rows = p["rows"]
    latency = PEColumn(**p).latency  # the design's own (not elaborated here)
    assert latency >= 1, "the demo samples results after clock edges: needs latency >= 1"
    n = int(os.environ.get("NCLITE_DEMO_VECTORS", "256"))
    fmt = os.environ.get("NCLITE_DEMO_DTYPE", "bf16")
    rng = tbutil.rng(4)
    w = vectors.random_bits(fmt, rng, rows).astype(np.int64)
    x = vectors.random_bits(fmt, rng, n * rows).astype(np.int64).reshape(n, rows)
    golden = dot(w, fmt, x, fmt)
    packed = [sum(int(v) << (16 * k) for k, v in enumerate(vec)) for vec in x]

    for name in ("en", "w_shift", "w_in", "x", "x_fmt", "x_swap"):
        getattr(dut, name).value = 0
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)
    await FallingEdge(dut.clk)
    start = time.perf_counter()
    cycle = 0
    # LoadStationary: one weight per cycle down the column (the last row's first).
    for k in reversed(range(rows)):
        dut.w_shift.value = 1
        dut.w_in.value = int(w[k]) | tbutil.FORMAT_CODES[fmt] << 16
        await FallingEdge(dut.clk)
        cycle += 1
    dut.w_shift.value = 0
    load_cycles = cycle
    # MultiplyMoving: one vector per cycle; results appear `latency` cycles later.
    dut.en.value = 1
    dut.x_fmt.value = tbutil.FORMAT_CODES[fmt]
    results = []
    issued = 0
    while len(results) < n:
        if issued < n:
            dut.x.value = packed[issued]
            dut.x_swap.value = int(issued == 0)
            issued += 1
        else:
            dut.x_swap.value = 0
        await FallingEdge(dut.clk)
        cycle += 1
        # The vector that entered `latency` edges ago is on `result` now.
        if cycle - load_cycles >= latency:
            results.append(int(dut.result.value))
    wall = time.perf_counter() - start
    got = np.array(results, dtype=np.uint32)
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
