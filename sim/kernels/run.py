"""Running a kernel file: on the golden ISS, in either simulator, with the same bits.

A **kernel file** is a Python file with

* ``kernel(**tensors)`` - the kernel: its parameters are the DRAM tensors named as the inputs,
  it returns its output DRAM tensor(s) (``nl.ndarray(..., buffer=nl.shared_hbm)``): one, a tuple
  (named ``out0``, ``out1``, ...) or a dict;
* ``inputs(rng)`` or ``inputs(rng, rank)`` - the inputs, a dict of 2-D numpy arrays
  (``nl.bfloat16``, ``nl.float8_e4m3``, ``nl.float8_e5m2``, ``nl.float16`` or ``nl.float32``),
  drawn from ``rng`` (a seeded ``numpy.random.Generator``); with ``rank``, each core's own;
* optionally ``CONFIG``, the core's parameters instead of :data:`DEFAULT_CONFIG`
  (``hdl.core.NeuronCore``'s ``n``, ``sbuf_words``, ``psum_banks``, ``psum_words``,
  ``link_width``, ...; those it leaves out take the core's defaults), and ``CORES``, the cores
  it runs on when ``--cores`` is not given.

:func:`run_kernel` traces the kernel once per core (``sim.kernels.trace``), runs the programs
on the ISS (``golden.iss``), and on ``"icarus"`` / ``"verilator"`` also on the RTL
(``hdl.sim_top.CoreWithDram``, or ``RingWithDram`` for P > 1 cores; ``sim/tb/kernel.py``),
where every byte of DRAM and every SBUF and PSUM word of every core is compared with the ISS.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from golden.collective import torus_groups
from golden.isa import DTYPE_BYTES, CollectiveDim, CollectiveOp, ErrorCode, Opcode, decode
from golden.iss import NeuronCoreISS, RingISS

from . import profile
from .trace import NUMPY_DTYPES, Kernel, KernelError, Tensor, dtype_of, tracing

__all__ = ["DEFAULT_CONFIG", "TARGETS", "load_kernel", "core_config", "trace_kernel",
           "run_kernel", "run_iss", "run_traced_rtl", "read_tensor", "TracedKernel",
           "format_result", "result_json"]

#: The core a kernel runs on unless its file says otherwise: the demo's core
#: (``sim.cli.demo.CORE_CONFIG``, so that the RTL model is the one the demo and the tests
#: build): N = 4, 256 SBUF words, 4 PSUM banks of 16 words, 64 KiB of DRAM.
DEFAULT_CONFIG = {"n": 4, "sbuf_words": 256, "psum_banks": 4, "psum_words": 16,
                  "queue_depth": 64, "data_width": 64}
#: Where a kernel runs (``--on``).
TARGETS = ("iss", "icarus", "verilator", "board")


def load_kernel(path) -> object:
    """The kernel file at ``path`` as a module (``kernel`` and ``inputs`` checked)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no kernel file {path}")
    name = f"nclite_kernel_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    for fn in ("kernel", "inputs"):
        if not callable(getattr(module, fn, None)):
            raise ValueError(f"{path}: a kernel file defines {fn}(); this one does not")
    return module


@dataclass
class TracedKernel:
    """A kernel traced for each core: the core parameters (``hdl.core.NeuronCore``'s), the
    :class:`~sim.kernels.trace.Kernel` of each core, and its outputs (name -> DRAM tensor, per
    core)."""

    params: dict
    kernels: list[Kernel]
    outputs: list[dict[str, Tensor]]

    @property
    def cfg(self):
        return self.kernels[0].cfg


def _params(module, cores: int) -> dict:
    params = dict(getattr(module, "CONFIG", DEFAULT_CONFIG))
    if cores > 1:
        params["ranks"] = cores
    return params


def _inputs(module, rng, rank: int) -> dict:
    takes_rank = len(inspect.signature(module.inputs).parameters) >= 2
    ins = module.inputs(rng, rank) if takes_rank else module.inputs(rng)
    if not isinstance(ins, dict):
        raise ValueError(f"inputs() must return a dict of arrays, not {type(ins).__name__}")
    return ins


def _outputs(result, loc) -> dict[str, Tensor]:
    if isinstance(result, Tensor):
        result = {"out": result}
    elif isinstance(result, (tuple, list)):
        result = {f"out{i}": t for i, t in enumerate(result)}
    if not isinstance(result, dict) or not result:
        raise KernelError(f"kernel() must return its output DRAM tensor(s): one, a tuple or a "
                          f"dict, not {result!r}", loc)
    for name, t in result.items():
        if not isinstance(t, Tensor) or t.buffer != "hbm":
            raise KernelError(f"kernel() output {name} must be a DRAM tensor (nl.ndarray(..., "
                              f"buffer=nl.shared_hbm)), not {t!r}", loc)
    return result


def core_config(params: dict):
    """The ``golden.iss.CoreConfig`` of a core of these parameters, as ``hdl.core.NeuronCore``
    derives it (its checks included: a wrong parameter is a ValueError naming it)."""
    return _core_config(json.dumps(params, sort_keys=True))


@functools.lru_cache(maxsize=64)
def _core_config(key: str):
    import gc
    import warnings

    from amaranth.hdl import UnusedElaboratable

    from hdl.core import NeuronCore

    with warnings.catch_warnings():  # the core is asked, never elaborated
        warnings.simplefilter("ignore", UnusedElaboratable)
        core = NeuronCore(**json.loads(key))
        cfg = core.iss_config()
        del core
        gc.collect()
    return cfg


def trace_kernel(module, *, cores: int | None = None, seed: int = 0,
                 params: dict | None = None) -> TracedKernel:
    """Trace ``module``'s kernel on each of ``cores`` cores (default: the file's ``CORES``, else
    1) with inputs from ``seed``. Raises :class:`~sim.kernels.trace.KernelError` at the kernel's
    line for an illegal statement."""
    cores = int(cores or getattr(module, "CORES", 1))
    if cores < 1:
        raise ValueError(f"cores must be a positive integer, not {cores}")
    params = dict(params) if params is not None else _params(module, cores)
    cfg = core_config(params)
    rng = np.random.default_rng(seed)
    kernels, outputs = [], []
    for rank in range(cores):
        ins = _inputs(module, rng, rank)
        k = Kernel(cfg, rank, cores)
        with tracing(k):
            tensors = {}
            for name, arr in ins.items():
                a = np.asarray(arr)
                if a.ndim != 2:
                    raise ValueError(f"input {name} must be a 2-D array, not shape {a.shape}")
                tensors[name] = k.dram_tensor(a.shape, dtype_of(a.dtype, f"input {name}'s dtype"),
                                              name, data=a)
            code = module.kernel.__code__
            outs = _outputs(module.kernel(**tensors), (code.co_filename, code.co_firstlineno))
        kernels.append(k)
        outputs.append(outs)
    _check_collectives(kernels)
    return TracedKernel(params, kernels, outputs)


def _check_collectives(kernels: list[Kernel]) -> None:
    """Every core of a sub-ring (the ring; on a torus, a row or a column:
    ``golden.collective.torus_groups``) issues the same collectives along it in the same
    order, of the same size and, for a permute, the same shift (else the hardware's outcome
    is not defined; the addresses may differ): a KernelError at the first core's line that
    differs from its sub-ring's first core's. (A core that issues fewer is the links' timeout,
    which the ISS reports.)"""
    def collectives(k, dim):
        out = []
        for w, line in zip(k.program, k.lines, strict=True):
            op, f = decode(w)
            if op == Opcode.COLLECTIVE and f["dim"] == dim:
                shift = f["shift"] if f["coll_op"] == CollectiveOp.PERMUTE else 0
                out.append(((f["coll_op"], f["rows"] * f["cols"], shift), line))
        return out

    def show(key):
        op, size, shift = key
        by = f" by {shift}" if op == CollectiveOp.PERMUTE else ""
        return f"{CollectiveOp(op).name.lower()}{by} of {size} words"

    rows = kernels[0].cfg.torus_rows
    if len(kernels) < 2 or len(kernels) % rows:
        return  # (one core, or a torus the ISS rejects)
    dims = [CollectiveDim.ROW] + ([CollectiveDim.COLUMN] if rows > 1 else [])
    for dim in dims:
        along = "" if rows == 1 else f" along its {dim.name.lower()}"
        for group in torus_groups(rows, len(kernels) // rows, dim):
            first = collectives(kernels[group[0]], dim)
            for r in group[1:]:
                for i, ((key0, _), (key, line)) in enumerate(
                        zip(first, collectives(kernels[r], dim), strict=False)):
                    if key != key0:
                        raise KernelError(
                            f"core {r}'s collective {i}{along} is {show(key)}, core "
                            f"{group[0]}'s {show(key0)}: every core must issue the same "
                            f"collectives in the same order", line)


def read_tensor(dram: np.ndarray, t: Tensor) -> np.ndarray:
    """The DRAM tensor ``t``'s values in the byte image ``dram`` (a copy, of its dtype)."""
    size = DTYPE_BYTES[t.dtype]
    raw = dram[t.addr:t.addr + t.shape[0] * t.shape[1] * size].copy()
    return raw.view(NUMPY_DTYPES[t.dtype]).reshape(t.shape)


def run_iss(traced: TracedKernel) -> list[NeuronCoreISS]:
    """Run the traced programs on the golden ISS (a ring of them for P > 1); raises
    :class:`~sim.kernels.trace.KernelError` at the kernel line of a command the core
    rejected."""
    isses = [NeuronCoreISS(k.cfg, dram=k.dram) for k in traced.kernels]
    if len(isses) == 1:
        isses[0].run(traced.kernels[0].program)
    else:
        RingISS(isses).run([k.program for k in traced.kernels])
    for r, (iss, k) in enumerate(zip(isses, traced.kernels, strict=True)):
        if iss.error != ErrorCode.OK:
            who = f"core {r} " if len(isses) > 1 else "the core "
            raise KernelError(f"{who}stopped with {iss.error.name} at command "
                              f"{iss.error_index}: {iss.error_reason}", k.lines[iss.error_index])
    return isses


def run_traced_rtl(traced: TracedKernel, simulator: str, seed: int, waves: bool) -> dict:
    """Run the traced programs on the RTL in ``simulator`` (one core on
    ``hdl.sim_top.CoreWithDram``, P on ``RingWithDram``; ``sim/tb/kernel.py``), which compares
    every byte of DRAM and every SBUF and PSUM word of every core with the ISS. Returns the
    testbench's figures: ``bit_exact``, ``mismatch``, ``cycles``, ``perf``, ``traces``,
    ``waves``."""
    from hdl.sim_top import CoreWithDram, RingWithDram
    from sim import runner

    cores = len(traced.kernels)
    blob = runner.result_file("kernel", "kernel").with_suffix(".npz")
    arrays = {}
    for r, k in enumerate(traced.kernels):
        arrays[f"program{r}"] = np.stack(k.program) if k.program else \
            np.zeros((0, 8), np.uint32)
        arrays[f"dram{r}"] = k.dram[:k.dram_top]
    np.savez(blob, **arrays)
    out = runner.result_file("kernel", "figures")
    params = traced.params
    if cores == 1:
        factory, public = "hdl.sim_top:CoreWithDram", CoreWithDram.public_for(**params)
    else:
        core = {key: v for key, v in params.items() if key != "ranks"}
        factory, public = "hdl.sim_top:RingWithDram", RingWithDram.public_for(cores, **core)
    env = {"NCLITE_KERNEL": str(blob), "NCLITE_KERNEL_OUT": str(out)}
    try:
        res = runner.run(factory, params, "sim.tb.kernel", simulator, testcase="run_kernel",
                         seed=seed, extra_env=env, waves=waves or None, quiet=True,
                         public=public, run_tag=f"kernel-{cores}")
        figures = json.loads(out.read_text())
        figures["waves"] = str(res.waves) if res.waves else None
    except runner.SimulationFailed:
        if not out.exists():
            raise
        figures = json.loads(out.read_text())
    finally:
        blob.unlink(missing_ok=True)
        out.unlink(missing_ok=True)
    return figures


def _draw_profile(png, traced: TracedKernel, r: dict) -> None:
    cores = []
    for k, act in zip(traced.kernels, r["activity"], strict=True):
        events = act["events"]
        cores.append({"events": events, "end": events[-1][0] + 1 if events else 0,
                      "program": k.program, "lines": k.lines})
    u = sum(r["utilization"]) / len(r["utilization"])
    name = os.path.basename(str(r["kernel"]))
    full = any(a["full"] for a in r["activity"])
    title = (f"{name} on {r['on']}: busy {max(p['busy'] for p in r['perf'])} cycles, "
             f"utilization {100 * u:.1f} %{' (mean of the cores)' if len(cores) > 1 else ''}"
             f"{' - the recorder filled up: the end is missing' if full else ''}")
    profile.draw(png, cores, title)


def board_params(module, board: str) -> dict:
    """The core parameters of ``board``'s bitstream (``synth.board.BOARDS``); a kernel file
    whose ``CONFIG`` asks for another core is a ValueError naming the parameter."""
    from synth.board import board_config

    params = dict(board_config(board)["core"])
    for key, value in getattr(module, "CONFIG", {}).items():
        if key in params and params[key] != value:
            raise ValueError(f"the kernel's CONFIG asks for {key} = {value}, the {board}'s core "
                             f"has {params[key]}")
    return params


def board_outputs(traced: TracedKernel, isses) -> dict:
    """``{name: (DRAM address, the ISS's array)}`` of core 0's outputs."""
    return {name: (t.addr, read_tensor(isses[0].dram, t)) for name, t in traced.outputs[0].items()}


def _run_board(traced: TracedKernel, isses, port: str, board: str, baud) -> dict:
    from sim.host.board import run_program_on_board

    k = traced.kernels[0]
    return run_program_on_board(port, k.program, k.dram[:k.dram_top],
                                board_outputs(traced, isses), board=board, baud=baud)


def run_kernel(path, *, on: str = "iss", cores: int | None = None, seed: int = 0,
               waves: bool = False, profile_png=None, port: str | None = None,
               board: str = "ulx3s-85f", baud: int | None = None) -> dict:
    """Trace and run the kernel file at ``path`` (or a module :func:`load_kernel` made) on
    ``on`` (:data:`TARGETS`); returns a dict:
    ``outputs`` (name -> the array of each core), ``commands`` per core, ``macs``, and on the
    RTL ``bit_exact`` (every memory equal to the ISS'), ``cycles``, ``perf`` (the core's
    counters for the kernel), ``utilization`` (MACs / N² / busy cycles) and ``activity`` (the
    core's recorded activity: ``sim.kernels.profile.decode``'s events) per core; with
    ``profile_png`` (an RTL run) the profile drawn there (:mod:`sim.kernels.profile`)."""
    if on not in TARGETS:
        raise ValueError(f"on must be one of {TARGETS}, not {on!r}")
    module = path if hasattr(path, "kernel") else load_kernel(path)
    path = getattr(module, "__file__", path)
    params = None
    if on == "board":
        if not port:
            raise ValueError("--on board needs the board's serial port: --port /dev/ttyUSB0")
        if (cores or getattr(module, "CORES", 1)) != 1:
            raise ValueError("the board carries one core: --cores 1")
        params = board_params(module, board)
    elif profile_png and on == "iss":
        raise ValueError("a profile needs a simulated run: --on icarus or --on verilator")
    traced = trace_kernel(module, cores=cores, seed=seed, params=params)
    isses = run_iss(traced)
    n = traced.cfg.n
    result = {
        "kernel": str(path), "on": on, "cores": len(traced.kernels), "seed": seed,
        "config": traced.params,
        "commands": [len(k.program) for k in traced.kernels],
        "macs": [k.macs for k in traced.kernels],
        "outputs": {name: [read_tensor(iss.dram, outs[name]) for iss, outs in
                           zip(isses, traced.outputs, strict=True)]
                    for name in traced.outputs[0]},
    }
    if on == "board":
        b = _run_board(traced, isses, port, board, baud)
        busy = b["perf"]["busy"]
        result.update(bit_exact=b["ok"], mismatch="" if b["ok"] else
                      f"elements differing from the ISS: {b['mismatches']}",
                      cycles=[b["cycles"]], perf=[b["perf"]],
                      utilization=[traced.kernels[0].macs / (n * n * busy) if busy else 0.0],
                      board=board, port=port, seconds=b["seconds"])
    elif on != "iss":
        fig = run_traced_rtl(traced, on, seed, waves)
        result.update(bit_exact=fig["bit_exact"], mismatch=fig.get("mismatch", ""))
        if fig["bit_exact"]:
            result.update(cycles=fig["cycles"], perf=fig["perf"],
                          utilization=[k.macs / (n * n * p["busy"]) if p["busy"] else 0.0
                                       for k, p in zip(traced.kernels, fig["perf"],
                                                       strict=True)],
                          activity=[{"events": profile.decode(t["entries"]),
                                     "full": t["full"]} for t in fig["traces"]])
            if profile_png:
                _draw_profile(profile_png, traced, result)
                result["profile"] = str(profile_png)
        if fig.get("waves"):
            result["waves"] = fig["waves"]
    return result


def _describe(a: np.ndarray) -> str:
    flat = a.astype(np.float64).ravel()
    head = ", ".join(f"{v:.4g}" for v in flat[:4])
    return f"{a.shape} {a.dtype}: [{head}{', ...' if flat.size > 4 else ''}]"


def format_result(r: dict) -> str:
    """The text ``nclite kernel run`` prints."""
    where = {"iss": "the golden ISS", "board": f"the {r.get('board')} board on {r.get('port')}"
             }.get(r["on"], f"RTL in {r['on']}")
    cores = r["cores"]
    lines = [f"kernel {os.path.relpath(r['kernel'])} on {where}"
             f"{f', {cores} cores in a ring' if cores > 1 else ''} (seed {r['seed']})",
             f"  commands    : {', '.join(map(str, r['commands']))}"
             f"{' (per core)' if cores > 1 else ''}"]
    for name, per_core in r["outputs"].items():
        lines.append(f"  output {name:<5}: {_describe(per_core[0])}"
                     f"{' (core 0)' if cores > 1 else ''}")
    if "bit_exact" in r:
        what = "its outputs" if r["on"] == "board" else "DRAM, SBUF and PSUM"
        verdict = f"bit-exact with the golden ISS in {what}" if r["bit_exact"] \
            else f"MISMATCH: {r['mismatch']}"
        lines.append(f"  result      : {verdict}")
        for c, (cyc, p, u) in enumerate(zip(r.get("cycles", []), r.get("perf", []),
                                            r.get("utilization", []), strict=True)):
            who = f"core {c}" if cores > 1 else "core"
            lines.append(f"  {who:<12}: {cyc} cycles; busy {p['busy']}, tensor "
                         f"{p['tensor_busy']}, activation {p['activation_busy']}, DMA "
                         f"{p['dma_busy']}, collective {p['collective_busy']}; "
                         f"utilization {100 * u:.1f} %")
    if r.get("profile"):
        lines.append(f"  profile     : {r['profile']}")
    if r.get("waves"):
        from sim.runner import shown_path

        lines.append(f"  waveform    : {shown_path(r['waves'])}")
    return "\n".join(lines)


def _json_value(v: float):
    return float(v) if np.isfinite(v) else str(v)


def result_json(r: dict) -> dict:
    """:func:`run_kernel`'s result made JSON: each output as its shape, dtype, values (floats;
    ``"nan"``, ``"inf"``, ``"-inf"`` as strings) and bit patterns (hex), per core."""
    out = dict(r)
    out["outputs"] = {
        name: [{"shape": list(a.shape), "dtype": str(a.dtype),
                "values": [[_json_value(v) for v in row] for row in a.astype(np.float64)],
                "bits": [[f"{int(b):x}" for b in row]
                         for row in a.view(f"u{a.dtype.itemsize}")]}
               for a in per_core]
        for name, per_core in r["outputs"].items()}
    return out
