"""cocotb programs for ``nclite demo`` and the bench: whole NeuronCore programs whose figures
(cycles, per-engine busy cycles, utilization, bit-exactness) go to the JSON file named by
``NCLITE_DEMO_OUT``.

* ``mlp_demo`` (``hdl.core.NeuronCore``): a 2-layer MLP forward pass (bf16 in, bf16 hidden
  layer with relu, fp8-e4m3 output with SR), sizes from ``NCLITE_DEMO_MLP``.
* ``ring_demo`` (``hdl.multicore.CoreRing``): data-parallel GEMM, each core a K-slice, the
  partial products summed by an all-reduce.
* ``gemm_bench`` (``hdl.core.NeuronCore``): tiled GEMMs (shapes in ``NCLITE_BENCH_GEMMS``)
  with the whole program queued before it starts, so the cycles are the core's own.

Every program is also run on the golden ISS; the result records whether every memory matched
(and the test fails if not). ``sim.cli.demo`` runs them on ``hdl.sim_top``'s tops, whose
DRAM is RTL (for the MLP and the bench without stalls, so that the cycles are the core's own;
the ring's DRAM stalls as in ``sim.tb.multicore``); on ``hdl.core.NeuronCore`` or
``hdl.multicore.CoreRing`` they run with cocotbext-axi's ``AxiRam`` (``sim.host.core.CoreHost``
picks the DRAM by the top). The figures name it (``dram``: ``"memory"`` or ``"axiram"``).
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np

from golden.activation import ActivationFunc
from golden.isa import DTYPE_BYTES, DTYPE_NAMES, Dtype, ErrorCode, Rounding
from golden.sparse import magnitude_mask
from sim.host.programs import BF16, FP8_E4M3, FP32
from sim.kernels import isa as nisa
from sim.kernels import library as lib
from sim.tb import tbutil, vectors
from sim.tb.core import CoreTB
from sim.tb.multicore import RingTB


def _write(figures: dict) -> None:
    out = os.environ.get("NCLITE_DEMO_OUT")
    if out:
        with open(out, "w") as fh:
            json.dump(figures, fh, indent=2)


async def _matches(compare) -> tuple[bool, str]:
    try:
        await compare()
    except AssertionError as exc:
        return False, str(exc)
    return True, ""


@cocotb.test(**tbutil.timeout(200))
async def mlp_demo(dut):
    tb = CoreTB(dut, dram_pauses=0.0, debug_every=0)
    await tb.start()
    n = tb.cfg.n
    d_in, d_h, d_out, batch = json.loads(os.environ.get("NCLITE_DEMO_MLP", "[16, 12, 8, 16]"))
    rng = tb.rng

    def bf16(shape, scale):  # bf16 by truncation: any bf16 will do
        return (rng.standard_normal(shape) * scale).astype(np.float32).view(np.uint32) >> 16

    def build(kern, ws):
        x = kern.dram_tensor((d_in, batch), BF16, "x", data=bf16((d_in, batch), 1.0))
        w1 = kern.dram_tensor((d_in, d_h), BF16, "w1", data=bf16((d_in, d_h), 0.3))
        w2 = kern.dram_tensor((d_h, d_out), BF16, "w2", data=bf16((d_h, d_out), 0.3))
        b1 = kern.dram_tensor((d_h, 1), FP32, "b1", data=tb.fp32((d_h, 1), 0.1))
        b2 = kern.dram_tensor((d_out, 1), FP32, "b2", data=tb.fp32((d_out, 1), 0.1))
        nisa.set_seed(tb.seed)
        return lib.mlp(ws, x, [dict(w=w1, bias=b1, dtype=BF16),
                               dict(w=w2, bias=b2, dtype=FP8_E4M3, mode=Rounding.SR,
                                    func=ActivationFunc.IDENTITY)])

    program = tb.load(build)
    y = tb.last_tensors
    code = tb.iss.run(program)
    res = await tb.host.run(program)
    ok, why = await _matches(lambda: tb.compare("MLP"))
    ok = ok and res.error == code == ErrorCode.OK
    macs = d_in * d_h * batch + d_h * d_out * batch
    busy = res.perf["busy"]
    _write({
        "kind": "mlp", "simulator": tbutil.simulator(), "seed": tb.seed, "n": n,
        "layers": [[d_in, d_h], [d_h, d_out]], "batch": batch, "commands": len(program),
        "dram": tb.host.dram_backend, "bit_exact": ok, "mismatch": why,
        "error": res.error.name, "cycles": res.cycles,
        "perf": res.perf, "macs": macs, "utilization": macs / (n * n * busy) if busy else 0,
        "output": list(y.shape),
    })
    assert ok, why


@cocotb.test(**tbutil.timeout(200))
async def ring_demo(dut):
    tb = RingTB(dut, debug_every=0)
    await tb.start()
    cfg = tb.cfg
    n, w, W = cfg.n, cfg.psum_words, cfg.link_width
    k, m, f = int(os.environ.get("NCLITE_DEMO_K", 4 * n)), W, w
    programs, _ = tb.data_parallel(k, m, f, BF16, BF16, 0.0)
    ok, why = True, ""
    try:
        await tb.run(programs, "data-parallel all-reduce")
        res = tb.last_results
    except AssertionError as exc:
        ok, why, res = False, str(exc), getattr(tb, "last_results", [])
    _write({
        "kind": "ring", "simulator": tbutil.simulator(), "seed": tb.seed, "ranks": tb.P, "n": n,
        "link_width": W, "gemm": [m, k, f], "words": m * f,
        "dram": tb.hosts[0].dram_backend, "bit_exact": ok, "mismatch": why,
        "cycles": [r.cycles for r in res], "perf": [r.perf for r in res],
    })
    assert ok, why


@cocotb.test(**tbutil.timeout(1200))
async def gemm_bench(dut):
    """GEMMs ``C = A.T @ B`` of the shapes and operand dtypes in ``NCLITE_BENCH_GEMMS``
    (``[m, k, f]`` or ``[m, k, f, dtype code]``, bf16 by default), fp32 results: each
    program's cycles and per-engine busy cycles, every memory checked against the ISS. The
    top's register player pushes the programs (the host's cocotbext-axi master would run
    Python for every cycle of every register write)."""
    tb = CoreTB(dut, dram_pauses=0.0, debug_every=0, play=True)
    await tb.start()
    n = tb.cfg.n
    shapes = json.loads(os.environ.get("NCLITE_BENCH_GEMMS", "[[4, 8, 16]]"))
    rows = []
    for m, k, f, *more in shapes:
        dtype = Dtype(more[0]) if more else BF16
        sparsity = more[1] if len(more) > 1 else None
        name = DTYPE_NAMES[dtype]

        def build(kern, ws, dtype=dtype, name=name, m=m, k=k, f=f, sparsity=sparsity):
            a_bits = vectors.operands(name, tb.rng, (k, m), 0.0)
            b_bits = vectors.operands(name, tb.rng, (k, f), 0.0)
            if sparsity:  # A pruned by magnitude, compressed; B in the sparse layout
                a = lib.sparse_matrix(kern, a_bits, dtype,
                                      magnitude_mask(a_bits, name, sparsity), sparsity, "a")
                b = lib.sparse_moving(kern, b_bits, dtype, sparsity, "b")
            else:
                a = kern.dram_tensor((k, m), dtype, "a", data=a_bits)
                b = kern.dram_tensor((k, f), dtype, "b", data=b_bits)
            lib.gemm(ws, a, b, kern.dram_tensor((m, f), FP32, "c"))
            return a, b

        program = tb.load(build)
        a, b = tb.last_tensors
        before = await tb.host.perf()
        res = await tb.run(program, f"GEMM {m}x{k}x{f} {name}" + (f" {sparsity}" if sparsity
                                                                  else ""))
        perf = {key: res.perf[key] - before[key] for key in res.perf}
        macs = m * k * f  # dense-equivalent for a sparse A
        a_t = a.packed if sparsity else a
        dram_bytes = (a_t.shape[0] * a_t.shape[1] * DTYPE_BYTES[a_t.dtype]
                      + b.shape[0] * b.shape[1] * DTYPE_BYTES[dtype] + m * f * 4)
        rows.append({"m": m, "k": k, "f": f, "dtype": name, "sparsity": sparsity,
                     "commands": len(program),
                     "macs": macs, "dram_bytes": dram_bytes, "cycles": perf["busy"],
                     "perf": perf, "utilization": macs / (n * n * perf["busy"]),
                     "tensor_share": perf["tensor_busy"] / perf["busy"]})
    _write({"kind": "gemm_bench", "simulator": tbutil.simulator(), "n": n,
            "data_width": tb.cfg.data_width, "dram": tb.host.dram_backend, "bit_exact": True,
            "rows": rows})
