"""Run ring collectives on a simulated ring of collective engines; check them; measure them.

A ring of P :class:`~hdl.collective.CollectiveEngine` s (``hdl.ring:CollectiveRing``) runs
all-reduces (or the other collectives) of the given sizes through ``sim/tb/ring.py``
(test ``allreduce_runs``), which checks every word of every rank bit for bit against
``golden.collective``. Each run reports its cycles beside the bandwidth-optimal ring bound
``2·(P − 1)/P · n / W`` (all-reduce; half of it for reduce-scatter and all-gather;
``golden.collective.route_bound_cycles`` for all-to-all and permute: about (P − 1)/2 · n / W
and s · n / W on a one-way ring) as ``efficiency = bound / cycles``, and an all-reduce's error
against the float64 sum of the inputs. Used by ``nclite allreduce`` and the benchmarks.
"""

from __future__ import annotations

import json
import math

import numpy as np

from golden.collective import (
    ROUTED_OPS,
    CollectiveOp,
    check_shift,
    out_rows,
    ring_bound_cycles,
    route_bound_cycles,
    torus_bound_cycles,
)
from hdl.collective import check_link_width, check_ranks, setup_cycles
from hdl.torus import check_torus
from sim import runner
from sim.cli.gemm import error_vs_float64_text

__all__ = ["MAX_WORDS", "ring_params", "run_collectives", "run_torus", "format_collectives"]

#: The largest n the driver builds a ring for (memories of 2^18 rows of W words).
MAX_WORDS = 1 << 18


def ring_params(ranks: int, link_width: int, max_words: int, *, max_latency: int = 16) -> dict:
    """Build parameters of a ring whose memories hold ``max_words`` words (depth rounded up to
    a power of two, at least 64 rows, so that nearby sizes share one build)."""
    rows = -(-max_words // link_width)
    depth = max(64, 1 << (rows - 1).bit_length())
    return {"ranks": ranks, "link_width": link_width, "depth": depth, "max_latency": max_latency}


def _check(ranks, link_width, sizes, latency, stall_rate, max_latency):
    check_ranks(ranks)
    check_link_width(link_width)
    if not sizes:
        raise ValueError("sizes must name at least one n")
    for n in sizes:
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_WORDS:
            raise ValueError(f"n (words per rank) must be an integer between 1 and "
                             f"{MAX_WORDS}, not {n!r}")
    if (not isinstance(latency, int) or isinstance(latency, bool)
            or not 1 <= latency <= max_latency):
        raise ValueError(f"latency must be an integer between 1 and {max_latency}, "
                         f"not {latency!r}")
    if (not isinstance(stall_rate, int) or isinstance(stall_rate, bool)
            or not 0 <= stall_rate <= 255):
        raise ValueError(f"stall_rate must be an integer between 0 and 255 (/256), "
                         f"not {stall_rate!r}")


def run_collectives(*, ranks: int | None = None, sizes: list[int], link_width: int = 1,
                    op: str = "ALL_REDUCE", simulator: str = "verilator", latency: int = 1,
                    stall_rate: int = 0, seed: int = 1, waves: bool = False,
                    error_vs_float64: bool = True, max_latency: int = 16,
                    shift: int = 1, torus: tuple[int, int] | None = None) -> dict:
    """Simulate collectives of each size in ``sizes`` on one ring (one build); return figures.

    Raises ``ValueError`` for bad input (ranks < 2, n < 1, an unsupported link width, ...)
    before anything is simulated, and :class:`runner.SimulationFailed` if a result differs
    from golden or the ring hangs. ``shift``: a permute's (1 .. P - 1; the others ignore it).
    An all-to-all or a permute reads the buffer at row 0 and writes from row ceil(n / W) on.
    ``torus`` = (R, C): an R x C torus of engines instead of a ring (``ranks``, if given, must
    be R·C): its all-reduce or all-to-all (:func:`run_torus`).
    """
    op_code = CollectiveOp[op.upper()] if isinstance(op, str) else CollectiveOp(op)
    if torus is not None:
        return run_torus(torus=torus, ranks=ranks, sizes=sizes, link_width=link_width,
                         op=op_code, simulator=simulator, latency=latency,
                         stall_rate=stall_rate, seed=seed, waves=waves,
                         error_vs_float64=error_vs_float64, max_latency=max_latency)
    if ranks is None:
        raise ValueError("ranks must be given for a ring (or torus for a torus)")
    _check(ranks, link_width, sizes, latency, stall_rate, max_latency)
    routed = op_code in ROUTED_OPS
    if op_code == CollectiveOp.PERMUTE:
        check_shift(shift, ranks)
    else:
        shift = 0
    # A routed op's memory holds the buffer and its destination region.
    words = max(n + out_rows(op_code, n, ranks, link_width) * link_width if routed else n
                for n in sizes)
    params = ring_params(ranks, link_width, words, max_latency=max_latency)
    tag = (f"{op_code.name.lower()}{shift or ''}-{'_'.join(map(str, sizes))[:60]}"
           f"-l{latency}-s{stall_rate}-{seed}")
    out = runner.result_file("allreduce", f"{simulator}-p{ranks}-w{link_width}-{tag}")
    spec = {"sizes": list(sizes), "latency": latency, "stall_rate": stall_rate,
            "op": op_code.name, "shift": shift, "return_data": error_vs_float64}
    r, result = _simulate("hdl.ring:CollectiveRing", params, "sim.tb.ring", "allreduce_runs",
                          simulator, spec, out, tag, seed, waves)
    setup = setup_cycles(ranks, params["depth"])
    for run in r["runs"]:
        n = run["words"]
        run["bound_cycles"] = (route_bound_cycles(op_code, n, ranks, link_width, shift)
                               if routed else ring_bound_cycles(op_code, n, ranks, link_width))
        run["efficiency"] = run["bound_cycles"] / run["cycles"]
        run["overhead_cycles"] = run["cycles"] - run["bound_cycles"]
        inputs, res = run.pop("inputs"), run.pop("result")
        if error_vs_float64 and inputs is not None and op_code == CollectiveOp.ALL_REDUCE:
            run.update(_error_vs_float64(np.array(inputs, dtype=np.uint32),
                                         np.array(res, dtype=np.uint32)))
    r.update({"simulator": simulator, "seed": seed, "depth": params["depth"],
              "setup_cycles": setup, "waves": str(result.waves) if result.waves else None})
    return r


def _simulate(factory, params, tb, testcase, simulator, spec, out, tag, seed, waves):
    """Run ``testcase`` of ``tb`` with the spec ``NCLITE_AR``; (its figures, the run)."""
    result = runner.run(factory, params, tb, simulator, testcase=testcase, seed=seed,
                        waves=waves, run_tag=tag, quiet=True,
                        extra_env={"NCLITE_AR": json.dumps(spec), "NCLITE_AR_OUT": str(out)})
    r = json.loads(out.read_text())
    out.unlink()
    return r, result


def run_torus(*, torus: tuple[int, int], sizes: list[int], ranks: int | None = None,
              link_width: int = 1, op=CollectiveOp.ALL_REDUCE, simulator: str = "verilator",
              latency: int = 1, stall_rate: int = 0, seed: int = 1, waves: bool = False,
              error_vs_float64: bool = True, max_latency: int = 16) -> dict:
    """Simulate torus collectives of each size on one R x C torus of engines
    (``hdl.torus:CollectiveTorus``, ``sim/tb/torus.py``, test ``torus_runs``): an all-reduce
    in place at row 0, or an all-to-all from row 0 through a scratch region to the rows after
    it (n a multiple of R·C·W). Figures as :func:`run_collectives`', the bound being
    ``golden.collective.torus_bound_cycles`` and the cycles those from the first command to
    the last node's idle (every step of the schedule)."""
    op = CollectiveOp[op.upper()] if isinstance(op, str) else CollectiveOp(op)
    if not isinstance(torus, tuple | list) or len(torus) != 2:
        raise ValueError(f"torus must be (rows, cols), not {torus!r}")
    R, C = check_torus(*torus)
    if ranks is not None and ranks != R * C:
        raise ValueError(f"ranks must be rows * cols = {R * C} on a {R}x{C} torus, "
                         f"not {ranks!r}")
    _check(R * C, link_width, sizes, latency, stall_rate, max_latency)
    if op not in (CollectiveOp.ALL_REDUCE, CollectiveOp.ALL_TO_ALL):
        raise ValueError(f"a torus runs all-reduce and all-to-all, not "
                         f"{op.name.lower().replace('_', '-')}")
    routed = op == CollectiveOp.ALL_TO_ALL
    if routed:
        for n in sizes:
            if n % (R * C * link_width):
                raise ValueError(f"a torus all-to-all's n must be a multiple of rows * cols * "
                                 f"link_width = {R * C * link_width}, not {n}")
    params = ring_params(R * C, link_width, 3 * max(sizes) if routed else max(sizes),
                         max_latency=max_latency)
    params = {"rows": R, "cols": C, **{k: v for k, v in params.items() if k != "ranks"}}
    tag = (f"{op.name.lower()}-{'_'.join(map(str, sizes))[:60]}-l{latency}-s{stall_rate}"
           f"-{seed}")
    out = runner.result_file("allreduce", f"{simulator}-t{R}x{C}-w{link_width}-{tag}")
    spec = {"sizes": list(sizes), "latency": latency, "stall_rate": stall_rate, "op": op.name,
            "return_data": error_vs_float64 and not routed}
    r, result = _simulate("hdl.torus:CollectiveTorus", params, "sim.tb.torus", "torus_runs",
                          simulator, spec, out, tag, seed, waves)
    for run in r["runs"]:
        n = run["words"]
        run["bound_cycles"] = torus_bound_cycles(op, n, R, C, link_width)
        run["efficiency"] = run["bound_cycles"] / run["cycles"]
        run["overhead_cycles"] = run["cycles"] - run["bound_cycles"]
        inputs, res = run.pop("inputs"), run.pop("result")
        if error_vs_float64 and inputs is not None and not routed:
            run.update(_error_vs_float64(np.array(inputs, dtype=np.uint32),
                                         np.array(res, dtype=np.uint32)))
    r.update({"ranks": R * C, "torus": [R, C], "shift": 0, "simulator": simulator,
              "seed": seed, "depth": params["depth"],
              "setup_cycles": setup_cycles(max(R, C), params["depth"]),
              "waves": str(result.waves) if result.waves else None})
    return r


def _error_vs_float64(inputs: np.ndarray, result: np.ndarray) -> dict:
    """Largest error of the all-reduce against the exact sum, as a fraction of the bound
    gamma_{P-1} * sum|x| (u = 2^-24); non-finite sums are counted, not compared."""
    x = inputs.view(np.float32).astype(np.float64)
    ranks = x.shape[0]
    got = result.view(np.float32).astype(np.float64)
    exact = np.array([math.fsum(col) for col in x.T])
    mag = np.abs(x).sum(axis=0)
    u = 2.0 ** -24
    gamma = (ranks - 1) * u / (1 - (ranks - 1) * u)
    ok = np.isfinite(got) & np.isfinite(exact) & np.all(np.isfinite(x), axis=0)
    err = np.abs(got - exact)[ok]
    bound = gamma * mag[ok]
    ratio = err / np.maximum(bound, np.finfo(np.float64).tiny)
    return {"max_abs_error": float(err.max()) if err.size else 0.0,
            "max_error_over_bound": float(ratio.max()) if err.size else 0.0,
            "nonfinite_outputs": int((~ok).sum())}


def format_collectives(r: dict) -> str:
    op = r["op"].replace("_", "-").lower()
    bound = {"all-reduce": "2(P-1)/P*n/W", "reduce-scatter": "(P-1)/P*n/W",
             "all-gather": "(P-1)/P*n/W",
             "all-to-all": "(P-1)/2*n/W" if r["ranks"] > 2 else "n/W (the write port)",
             "permute": "shift*n/W"}[op]
    torus = r.get("torus")
    if torus:
        bound = "sum of its steps' ring bounds"
    if op == "permute":
        op = f"permute by {r['shift']}"
    where = f"a {torus[0]}x{torus[1]} torus of" if torus else "a ring of"
    lines = [f"nclite allreduce: {op} on {where} {r['ranks']} engines, {r['link_width']} fp32 "
             f"word(s) per beat, link latency {r['latency']}, stall rate "
             f"{r['stall_rate']}/256 ({r['simulator']}, seed {r['seed']})"]
    for run in r["runs"]:
        lines += [
            f"  n = {run['words']} words per rank",
            "    result      : every word of every rank bit-exact with golden, ranks identical"
            if op in ("all-reduce", "all-gather") else
            "    result      : every word of every rank bit-exact with golden",
            f"    cycles      : {run['cycles']} ({'torus' if torus else 'ring'} bound {bound}"
            f" = {run['bound_cycles']:.0f}; setup {r['setup_cycles']}"
            f"{' per step' if torus else ''})",
            f"    efficiency  : {run['efficiency']:.3f} of the schedule's bandwidth bound "
            "(one link pair per node at a time)" if torus else
            f"    efficiency  : {run['efficiency']:.3f} of the bandwidth-optimal ring"
            if op in ("all-reduce", "reduce-scatter", "all-gather") else
            f"    efficiency  : {run['efficiency']:.3f} of the bandwidth bound (links and write "
            "ports)",
        ]
        if "max_abs_error" in run:
            lines.append("    vs float64  : " + error_vs_float64_text(
                run, "gamma_(P-1) * sum|x|", "sums"))
    if r.get("waves"):
        lines.append(f"  waveform      : {runner.shown_path(r['waves'])}")
    return "\n".join(lines)
