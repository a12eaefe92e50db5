"""``nclite demo``: a 2-layer MLP on one NeuronCore, a data-parallel all-reduce on four and an
expert-parallel mixture-of-experts layer on four, in RTL simulation, every memory checked
against the golden ISS.

The cocotb side is ``sim/tb/demo.py``; these functions build and run it and return its
figures (a dict, also what ``--json`` prints). The cores' DRAM is RTL (``hdl.sim_top``: the
block-RAM memory the FPGA board uses, loaded and read through a VPI backdoor), so the DMA's
AXI4 traffic runs without Python; the host's register accesses (descriptors, STATUS, the debug
reads that compare SBUF and PSUM) still run through cocotbext-axi's AXI4-Lite master.
"""

from __future__ import annotations

import json

from hdl.sim_top import CoreWithDram, RingWithDram
from sim import runner

__all__ = ["CORE_CONFIG", "RING_CONFIG", "run_mlp_demo", "run_ring_demo", "run_moe_demo",
           "run_gemm_bench", "format_demo"]

#: The single core of the demo (the same build as tests/hdl/test_core_rtl.py's programs on
#: hdl.sim_top.CoreWithDram): 256 SBUF words a partition, so that the programs keep B's tiles
#: and double-buffered stationary blocks in SBUF (sim.kernels.library.Workspace.plan); a
#: 64-bit AXI4 bus.
CORE_CONFIG = {"n": 4, "sbuf_words": 256, "psum_banks": 4, "psum_words": 16, "queue_depth": 64,
               "data_width": 64}
#: The ring of the demo (the same build as tests/hdl/test_multicore_rtl.py): its subject is the
#: collectives, so its cores keep shallow PE pipelines (a smaller, faster four-core model).
#: Its link watchdog is short, so that the test of a COLLECTIVE a core never joins ends soon,
#: yet above a debug read's timeout (4095 cycles, which that test also sees) and far above
#: any wait of the demo's programs. Each core's DRAM is 4 KiB, far more than the programs use
#: (the RTL DRAM's initial contents are most of the cost of elaborating a 64 KiB one).
RING_CONFIG = {"ranks": 4, "n": 3, "sbuf_words": 40, "psum_banks": 2, "psum_words": 8,
               "link_width": 2, "queue_depth": 32, "te_mul_stages": 1, "te_add_stages": 2,
               "watchdog_cycles": 6144, "dram_bytes": 4096}


def _run(factory, params, testcase, simulator, seed, env, waves, tag, public) -> dict:
    out = runner.result_file("demo", f"{testcase}-{simulator}-{tag}-{seed}")
    env = {**env, "NCLITE_DEMO_OUT": str(out)}
    result = None
    try:
        result = runner.run(factory, params, "sim.tb.demo", simulator, testcase=testcase,
                            seed=seed, extra_env=env, waves=waves, run_tag=f"{testcase}-{tag}",
                            quiet=True, public=public)
    except runner.SimulationFailed:
        if not out.exists():
            raise
    figures = json.loads(out.read_text())
    out.unlink()
    figures["waves"] = str(result.waves) if result and result.waves else None
    return figures


def run_mlp_demo(*, simulator: str = "verilator", seed: int = 1, d_in: int = 16,
                 d_hidden: int = 12, d_out: int = 8, batch: int = 16,
                 waves: bool = False) -> dict:
    dims = [d_in, d_hidden, d_out, batch]
    return _run("hdl.sim_top:CoreWithDram", CORE_CONFIG, "mlp_demo", simulator, seed,
                {"NCLITE_DEMO_MLP": json.dumps(dims)}, waves, "x".join(map(str, dims)),
                CoreWithDram.public_for(**CORE_CONFIG))


def run_ring_demo(*, simulator: str = "verilator", seed: int = 1, k: int | None = None,
                  waves: bool = False) -> dict:
    k = 4 * RING_CONFIG["n"] if k is None else k
    return _run("hdl.sim_top:RingWithDram", RING_CONFIG, "ring_demo", simulator, seed,
                {"NCLITE_DEMO_K": str(k)}, waves, f"k{k}",
                RingWithDram.public_for(**RING_CONFIG))


def run_moe_demo(*, simulator: str = "verilator", seed: int = 1,
                 waves: bool = False) -> dict:
    """``sim.kernels.moe`` (the kernel ``nclite kernel run sim/kernels/moe.py`` runs) on four
    cores in RTL: its figures, with the tokens kept and dropped and each core's share of busy
    cycles its collective engine was busy (the two all-to-alls)."""
    import numpy as np

    from sim.kernels import moe, run_kernel

    r = run_kernel(moe, on=simulator, seed=seed, waves=waves)
    rng = np.random.default_rng(seed)
    ins = [moe.inputs(rng, rank) for rank in range(moe.CORES)]
    dropped = 0
    for core in ins:
        dropped += sum(s is None for s in moe.routing(core["x"], core["router"], moe.CORES)[2])
    fig = {"simulator": simulator, "seed": seed, "ranks": moe.CORES, "d": moe.D, "h": moe.H,
           "tokens": moe.T, "capacity": moe.capacity(), "dropped": dropped,
           "link_width": moe.CONFIG["link_width"], "commands": r["commands"],
           "bit_exact": r["bit_exact"], "mismatch": r.get("mismatch", ""),
           "waves": r.get("waves")}
    if r["bit_exact"]:
        fig.update(cycles=r["cycles"], perf=r["perf"],
                   comm_share=[p["collective_busy"] / p["busy"] if p["busy"] else 0.0
                               for p in r["perf"]])
    return fig


def _gemm_dram_bytes(shapes) -> int:
    """The smallest power of two of at least 4 KiB that holds the largest of these GEMMs'
    dense A (k x m), B (k x f) and fp32 C (m x f), each at a 64-byte boundary (as
    ``sim.kernels.trace`` places DRAM tensors)."""
    from golden.isa import DTYPE_BYTES, Dtype

    def placed(nbytes: int) -> int:
        return -(-nbytes // 64) * 64

    need = 0
    for m, k, f, *more in shapes:
        size = DTYPE_BYTES[Dtype(more[0]) if more else Dtype.BF16]
        need = max(need, placed(k * m * size) + placed(k * f * size) + placed(m * f * 4))
    return max(4096, 1 << (need - 1).bit_length())


def run_gemm_bench(shapes, *, n: int = 4, simulator: str = "verilator",
                   params: dict | None = None) -> dict:
    """Tiled GEMMs (``(m, k, f)`` or ``(m, k, f, dtype code)``) on a core whose queue holds
    256 descriptors (the host keeps it filled): ``params`` the core's (default: the demo's
    core at this ``n``, with the smallest SBUF the programs take and the smallest DRAM that
    holds a dense GEMM's A, B and C: the testbench compares every DRAM word after each)."""
    if params is None:
        params = {**CORE_CONFIG, "n": n, "sbuf_words": 2 * n + 3 * 16 + 1, "queue_depth": 256,
                  "dram_bytes": _gemm_dram_bytes(shapes)}
    tag = "-".join(f"{k}{v}" for k, v in sorted(params.items()))
    return _run("hdl.sim_top:CoreWithDram", params, "gemm_bench", simulator, 1,
                {"NCLITE_BENCH_GEMMS": json.dumps([list(s) for s in shapes])}, False,
                f"{tag}-" + "-".join("x".join(map(str, s)) for s in shapes),
                CoreWithDram.public_for(**params))


def _engines(perf: dict) -> str:
    return (f"tensor {perf['tensor_busy']}, activation {perf['activation_busy']}, "
            f"DMA {perf['dma_busy']}, collective {perf.get('collective_busy', 0)}")


def format_demo(mlp: dict | None, ring: dict | None, moe: dict | None = None) -> str:
    lines = []
    if mlp is not None:
        (d_in, d_h), (_, d_out) = mlp["layers"]
        verdict = "bit-exact with the golden ISS in DRAM, SBUF and PSUM" if mlp["bit_exact"] \
            else f"MISMATCH: {mlp['mismatch']}"
        p = mlp["perf"]
        lines += [
            f"nclite demo 1: a 2-layer MLP ({d_in} -> {d_h} relu bf16 -> {d_out} fp8-e4m3 SR), "
            f"batch {mlp['batch']}, on one NeuronCore (N = {mlp['n']}) in {mlp['simulator']}",
            f"  result      : {verdict} (seed {mlp['seed']})",
            f"  program     : {mlp['commands']} commands through AXI4-Lite, DRAM on AXI4",
            f"  core busy   : {p['busy']} cycles; busy per engine: {_engines(p)}",
            f"  tensor eng. : {p['moving_columns']} moving columns, {mlp['macs']} useful MACs, "
            f"{100 * mlp['utilization']:.1f} % of the {mlp['n']}x{mlp['n']} array's MAC slots "
            f"while the core is busy",
        ]
    if ring is not None:
        m, k, f = ring["gemm"]
        verdict = "bit-exact with the golden ring ISS on every core" if ring["bit_exact"] \
            else f"MISMATCH: {ring['mismatch']}"
        lines += [
            f"nclite demo 2: data-parallel GEMM on {ring['ranks']} NeuronCores in a ring "
            f"(link width {ring['link_width']}): core r computes its K-slice "
            f"C_r = A_r.T @ B_r ({m}x{k}x{f}), an all-reduce sums the C_r ({ring['words']} "
            f"fp32 words) on every core, in {ring['simulator']}",
            f"  result      : {verdict} (seed {ring['seed']})",
        ]
        for r, (cyc, p) in enumerate(zip(ring["cycles"], ring["perf"], strict=True)):
            lines.append(f"  core {r}      : {cyc} cycles from its first command pushed to idle; "
                         f"busy per engine: {_engines(p)}")
    if moe is not None:
        verdict = "bit-exact with the golden ring ISS on every core" if moe["bit_exact"] \
            else f"MISMATCH: {moe['mismatch']}"
        lines += [
            f"nclite demo 3: an expert-parallel MoE layer on {moe['ranks']} NeuronCores (link "
            f"width {moe['link_width']}): {moe['tokens']} tokens of {moe['d']} features a core, "
            f"top-1 routing, an all-to-all to the expert's core (capacity {moe['capacity']}, "
            f"{moe['dropped']} dropped), the expert's MLP ({moe['d']} -> {moe['h']} relu -> "
            f"{moe['d']}), an all-to-all back, in {moe['simulator']}",
            f"  result      : {verdict} (seed {moe['seed']})",
        ]
        if moe["bit_exact"]:
            for r, (cyc, p, share) in enumerate(zip(moe["cycles"], moe["perf"],
                                                    moe["comm_share"], strict=True)):
                lines.append(f"  core {r}      : {cyc} cycles, busy {p['busy']}; busy per "
                             f"engine: {_engines(p)}; collective {100 * share:.1f} % of busy")
    for fig in (mlp, ring, moe):
        if fig and fig.get("waves"):
            lines.append(f"  waveform    : {runner.shown_path(fig['waves'])}")
    return "\n".join(lines)
