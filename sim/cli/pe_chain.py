"""``nclite pe-chain``: dot products through a column of PEs in RTL simulation, checked by golden.

A column of ``length`` PEs (the heart of one systolic-array column) loads a weight vector and
streams ``vectors`` input vectors, one per cycle; every fp32 result is compared bit for bit
with ``golden.fp32.dot``. The column runs inside ``hdl.sim_batch.CycleReplay``, so that the
testbench wakes once per batch of cycles, not once per cycle.
"""

from __future__ import annotations

import json

from sim import runner

__all__ = ["run_pe_chain_demo", "format_result"]

#: Cycles of inputs per batch of the replay top (``hdl.sim_batch.CycleReplay``) that drives
#: the column: one testbench wake-up per this many cycles.
REPLAY_BATCH = 64


def run_pe_chain_demo(*, simulator: str = "verilator", length: int = 8, vectors: int = 256,
                      dtype: str = "bf16", seed: int = 1, waves: bool = False,
                      mul_stages: int = 1, add_stages: int = 2) -> dict:
    """Run the demo; return its figures (see ``sim/tb/pe_chain.py``). Raises on a crash."""
    params = {"rows": length, "mul_stages": mul_stages, "add_stages": add_stages}
    tag = f"demo-{dtype}-{vectors}-{seed}"
    out = runner.result_file("demo", f"{simulator}-{length}-m{mul_stages}-a{add_stages}-{tag}")
    env = {"NCLITE_DEMO_VECTORS": str(vectors), "NCLITE_DEMO_DTYPE": dtype,
           "NCLITE_DEMO_OUT": str(out)}
    try:
        result = runner.run("hdl.sim_batch:CycleReplay",
                            {"design": "hdl.pe:PEColumn", "params": params, "k": REPLAY_BATCH},
                            "sim.tb.pe_chain", simulator, seed=seed,
                            extra_env=env, waves=waves, run_tag=tag, quiet=True)
    except runner.SimulationFailed:
        if not out.exists():
            raise
        result = None
    figures = json.loads(out.read_text())
    out.unlink()
    figures["waves"] = str(result.waves) if result and result.waves else None
    return figures


def format_result(r: dict) -> str:
    verdict = "bit-exact with golden" if r["bit_exact"] else (
        f"MISMATCH: {r['mismatches']} results differ, first {r['first_mismatch']}")
    lines = [
        f"nclite pe-chain: {r['vectors']} dot products of length {r['rows']} ({r['dtype']} x "
        f"{r['dtype']} -> fp32) through a chain of {r['rows']} PEs in {r['simulator']}",
        f"  result       : {verdict} (seed {r['seed']})",
        f"  cycles       : {r['cycles']} = {r['load_cycles']} weight load + "
        f"{r['vectors']} vectors + {r['latency'] - 1} to drain (latency {r['latency']})",
        f"  MACs         : {r['macs']} ({r['rows']} per cycle at full rate)",
        f"  utilization  : {100 * r['utilization']:.1f} % of the chain's MAC slots",
        f"  sim speed    : {r['sim_cycles_per_s']:.0f} simulated cycles per wall second",
    ]
    if r.get("waves"):
        lines.append(f"  waveform     : {runner.shown_path(r['waves'])}")
    return "\n".join(lines)
