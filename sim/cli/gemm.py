"""Run one GEMM through the tensor engine in RTL simulation; check it; measure it.

``C = A.T @ B`` with A K×M (stationary) and B K×F (moving), tiled by
``golden.tensor_engine.gemm_schedule``, sent by ``sim/tb/tensor_engine.py`` (test ``gemm``),
every PSUM word drained and compared bit for bit with the golden model. Used by ``nclite gemm``
and the benchmarks.
"""

from __future__ import annotations

import json

import numpy as np

from golden.formats import to_fp32
from golden.sparse import PATTERNS, magnitude_mask, pattern, run_sparse_gemm
from golden.tensor_engine import gemm_schedule
from golden.tensor_engine import run_gemm as golden_gemm
from sim import runner
from sim.host.tensor_engine import EngineConfig

__all__ = ["engine_params", "ideal_cycles", "run_gemm", "format_gemm",
           "error_vs_float64_text"]


#: The engine's input streams that a full-rate GEMM feeds from batches
#: (``hdl.sim_batch.PlayedStreams``, which also counts the ``done`` pulses per bank), and the
#: beats per batch.
PLAYED_STREAMS = ("cmd", "weights", "moving", "drain_req")
PLAYED_BATCH = 64


def engine_params(n: int, *, psum_banks: int = 8, psum_words: int | None = None,
                  sparse: bool = False) -> dict:
    """A tensor engine's build for ``nclite gemm``; ``sparse``: with every pattern (one model
    for all of them)."""
    params = {"n": n, "psum_banks": psum_banks, "psum_words": psum_words or 4 * n}
    if sparse:
        params["sparsity"] = list(PATTERNS)
    return params


def ideal_cycles(m: int, k: int, f: int, n: int, banks: int, words: int,
                 sparsity: str | None = None) -> int:
    """Cycles of a perfect engine: one moving column per multiplication and cycle (a sparse
    GEMM's multiplications cover R·n rows of K each)."""
    k_tile = pattern(sparsity).ratio * n if sparsity else None
    return sum(c.f1 - c.f0 for rnd in gemm_schedule(m, k, f, n=n, banks=banks, bank_words=words,
                                                    k_tile=k_tile)
               for c in rnd.commands if hasattr(c, "f0"))


def _check_shape(m, k, f, n, a_fmt, b_fmt, formats):
    for name, v in (("m", m), ("k", k), ("f", f)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")
    for name, fmt in (("a_fmt", a_fmt), ("b_fmt", b_fmt)):
        if fmt not in formats:
            raise ValueError(f"{name} must be one of {list(formats)}, not {fmt!r}")


def run_gemm(*, m: int, k: int, f: int, a_fmt: str = "bf16", b_fmt: str = "bf16", n: int = 8,
             simulator: str = "verilator", seed: int = 1, gaps: float = 0.0,
             psum_banks: int = 8, psum_words: int | None = None, waves: bool = False,
             error_vs_float64: bool = True, played: bool | None = None,
             sparsity: str | None = None, sparse_engine: bool | None = None) -> dict:
    """Simulate one GEMM; return its figures (cycles, utilization, bit_exact, errors).

    ``sparsity`` (``"4:16"``, …): A is pruned to that pattern by magnitude
    (``golden.sparse.magnitude_mask``) and multiplied compressed on a sparse engine; MACs,
    utilization and ``macs_per_cycle`` count the dense GEMM's M·K·F (dense-equivalent).
    ``sparse_engine``: build the engine with every pattern (default: if ``sparsity``), so
    that a dense GEMM runs on the same engine as the sparse ones.

    ``played``: feed the engine's input streams from batches (``hdl.sim_batch.PlayedStreams``,
    :data:`PLAYED_STREAMS`) instead of beat by beat from Python; the same beats reach the
    engine in the same cycles, only faster. Default: at full rate (``gaps`` = 0) and without
    ``waves`` (a waveform's top is then the engine itself, as a reader expects).
    """
    if sparsity is not None:
        p = pattern(sparsity)
        if n % p.n:
            raise ValueError(f"a {p.name} GEMM needs an array size that is a multiple of "
                             f"{p.n}, not {n}")
    if sparse_engine is None:
        sparse_engine = sparsity is not None
    elif sparsity is not None and not sparse_engine:
        raise ValueError(f"sparsity {sparsity} needs the sparse engine (sparse_engine)")
    params = engine_params(n, psum_banks=psum_banks, psum_words=psum_words,
                           sparse=sparse_engine)
    cfg = EngineConfig.from_params(params)
    played = not gaps and not waves if played is None else played
    if played and gaps:
        raise ValueError(f"played streams run at full rate: gaps must be 0, not {gaps!r}")
    _check_shape(m, k, f, n, a_fmt, b_fmt, cfg.formats)
    tag = (f"gemm-{m}x{k}x{f}-{a_fmt}-{b_fmt}-{seed}-{gaps}" + ("-played" if played else "")
           + (f"-{sparsity.replace(':', 'of')}" if sparsity else ""))
    out = runner.result_file("gemm", f"{simulator}-n{n}-b{cfg.psum_banks}-w{cfg.words}-{tag}"
                             + ("-sparse" if sparse_engine else ""))
    spec = {"m": m, "k": k, "f": f, "a_fmt": a_fmt, "b_fmt": b_fmt, "gaps": gaps,
            "return_data": error_vs_float64, "sparsity": sparsity}
    env = {"NCLITE_GEMM": json.dumps(spec), "NCLITE_GEMM_OUT": str(out)}
    result = None
    try:
        factory, top = "hdl.tensor_engine:TensorEngine", params
        if played:  # the input streams played from batches: no Python per beat
            factory = "hdl.sim_batch:PlayedStreams"
            top = {"design": "hdl.tensor_engine:TensorEngine", "params": params,
                   "played": list(PLAYED_STREAMS), "k": PLAYED_BATCH,
                   "counted": {"done": "done_bank"}}
        result = runner.run(factory, top, "sim.tb.tensor_engine",
                            simulator, testcase="gemm", seed=seed, extra_env=env, waves=waves,
                            run_tag=tag, quiet=True)
    except runner.SimulationFailed:
        if not out.exists():
            raise
    r = json.loads(out.read_text())
    out.unlink()
    r["ideal_cycles"] = ideal_cycles(m, k, f, n, cfg.psum_banks, cfg.words, sparsity)
    r["macs_per_cycle"] = r["macs"] / r["compute_cycles"] if r["compute_cycles"] else 0.0
    r["waves"] = str(result.waves) if result and result.waves else None
    a, b = r.pop("a_bits"), r.pop("b_bits")
    if error_vs_float64 and a is not None:
        a, b = np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)
        banks = {"n": n, "banks": cfg.psum_banks, "bank_words": cfg.words}
        if sparsity:
            mask = magnitude_mask(a, a_fmt, sparsity)
            c = run_sparse_gemm(a, a_fmt, mask, b, b_fmt, sparsity, **banks)
            a = np.where(mask, a, 0)  # the kept products only (B is finite)
        else:
            c = golden_gemm(a, a_fmt, b, b_fmt, **banks)
        c64 = c.astype(np.uint32).view(np.float32).astype(np.float64)
        a64 = to_fp32(a, a_fmt).astype(np.float64)
        b64 = to_fp32(b, b_fmt).astype(np.float64)
        exact = a64.T @ b64
        mag = np.abs(a64).T @ np.abs(b64)
        finite = np.isfinite(c64) & np.isfinite(exact)
        err = np.abs(c64 - exact)[finite]
        u = 2.0 ** -24
        gamma = k * u / (1 - k * u)
        r["max_abs_error"] = float(err.max()) if err.size else 0.0
        r["max_error_over_bound"] = float((err / np.maximum(gamma * mag[finite], 1e-300)).max()
                                          ) if err.size else 0.0
        r["nonfinite_outputs"] = int((~finite).sum())
    return r


def error_vs_float64_text(r: dict, bound: str, what: str) -> str:
    """``max |error| …, at most … of the bound …`` from a result's error figures."""
    return (f"max |error| {r['max_abs_error']:.3g}, at most {r['max_error_over_bound']:.3f} "
            f"of the bound {bound}"
            + (f" ({r['nonfinite_outputs']} non-finite {what} skipped)"
               if r["nonfinite_outputs"] else ""))


def format_gemm(r: dict) -> str:
    verdict = "bit-exact with golden" if r["bit_exact"] else f"MISMATCH: {r['error']}"
    sp = r.get("sparsity")
    a_name = f"A[{r['k']}x{r['m']}]" + (f" ({sp} sparse, magnitude-pruned)" if sp else "")
    lines = [
        f"nclite gemm: C[{r['m']}x{r['f']}] = {a_name}.T @ B[{r['k']}x{r['f']}] "
        f"({r['a_fmt']} x {r['b_fmt']} -> fp32) on a {r['n']}x{r['n']} tensor engine in "
        f"{r['simulator']}",
        f"  result        : {verdict} (seed {r['seed']})",
        f"  compute       : {r['compute_cycles']} cycles (ideal {r['ideal_cycles']}: one moving "
        f"column per cycle), {r['macs']} {'dense-equivalent ' if sp else ''}MACs",
        f"  utilization   : {100 * r['utilization']:.1f} % = MACs / ({r['n']}² x cycles)"
        + (f": {r['macs_per_cycle']:.1f} dense-equivalent MACs per cycle" if sp else ""),
        f"  PSUM drain    : {r['drain_cycles']} cycles",
    ]
    if "max_abs_error" in r:
        lines.append("  vs float64    : " + error_vs_float64_text(r, "gamma_K * sum|a*b|",
                                                                "outputs"))
    lines.append(f"  sim speed     : {r['sim_cycles_per_s']:.0f} simulated cycles per wall second")
    if r.get("waves"):
        from sim.verify.waves import gtkwave_command

        lines.append(f"  waveform      : {runner.shown_path(r['waves'])}")
        lines.append(f"  view with     : {gtkwave_command(r['waves'])}")
    return "\n".join(lines)


