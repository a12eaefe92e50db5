"""The ``nclite`` command line: one entry point for the main jobs.

Errors are one clear line (exit status 1) unless ``--debug`` is given.
"""

from __future__ import annotations

import json
import sys

import click

from sim import toolchain


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            from sim.tools.lab_stub import silence_unused_elaboratables, stub_message

            silence_unused_elaboratables()
            click.echo(f"nclite: error: {stub_message(exc) or exc}", err=True)
            sys.exit(1)


@click.group(cls=_Group)
@click.option("--debug", is_flag=True, help="Show full Python tracebacks on errors.")
@click.pass_context
def main(ctx, debug):
    """nclite: an open, simplified NeuronCore in Amaranth HDL, checked against numpy."""
    ctx.obj = {"debug": debug}


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--quiet", is_flag=True, help="Print only problems (exit status still says).")
def doctor(as_json, quiet):
    """Check every tool nclite uses: version, where it comes from, whether it is good enough.

    Exits with status 1 if a required tool is missing or too old.
    """
    tools = toolchain.check_tools()
    bad = [t for t in tools if t.required and not t.ok]
    if as_json:
        click.echo(json.dumps([t.as_dict() for t in tools], indent=2))
    else:
        for t in tools:
            if quiet and (t.ok or not t.required):
                continue
            status = "ok " if t.ok else ("BAD" if t.required else "-- ")
            click.echo(f"[{status}] {t.name:<20} {t.version or 'missing':<14} "
                       f"{t.source:<26} {t.path or ''}" + (f"  ({t.note})" if t.note else ""))
        if not quiet or bad:
            click.echo(f"{len(tools) - len(bad)} of {len(tools)} tools usable; " + (
                "missing or too old: " + ", ".join(t.name for t in bad) if bad
                else "everything required is present."))
    if bad:
        sys.exit(1)


_waves_option = click.option(
    "--waves", is_flag=True,
    help="Dump waveforms and print the file's path (same as WAVES=1, or `nclite waves CMD`).")
_DTYPES = click.Choice(["bf16", "fp8_e4m3", "fp8_e5m2"])
_SIMS = click.Choice(["verilator", "icarus"])


def _gemm_options(f):
    for opt in reversed([
        click.option("--m", "m", type=click.IntRange(1), default=64, show_default=True,
                     help="Rows of C = columns of the stationary A (K x M)."),
        click.option("--k", "k", type=click.IntRange(1), default=64, show_default=True,
                     help="Contraction length: rows of A and B."),
        click.option("--n", "f", type=click.IntRange(1), default=64, show_default=True,
                     help="Columns of C = columns of the moving B (K x N)."),
        click.option("--dtype", type=_DTYPES, default="bf16", show_default=True,
                     help="Format of A and B."),
        click.option("--a-dtype", type=_DTYPES, default=None,
                     help="Format of A (stationary) if it differs from --dtype."),
        click.option("--b-dtype", type=_DTYPES, default=None,
                     help="Format of B (moving) if it differs from --dtype."),
        click.option("--array", "n", type=click.IntRange(1, 16), default=8, show_default=True,
                     help="Tensor-engine array size N (N x N PEs)."),
        click.option("--sim", "simulator", type=_SIMS, default="verilator", show_default=True,
                     help="Simulator to run the RTL in."),
        click.option("--seed", type=int, default=1, show_default=True, help="Random seed."),
        click.option("--gaps", type=click.FloatRange(0, 0.9), default=0.0, show_default=True,
                     help="Probability of a gap on each input stream per cycle (and of "
                          "back-pressure on the drain)."),
        _waves_option,
        click.option("--json", "as_json", is_flag=True, help="Print the result as JSON."),
    ]):
        f = opt(f)
    return f


_sparsity_option = click.option(
    "--sparsity", type=click.Choice(["2:4", "4:8", "4:12", "4:16"]), default=None,
    help="Prune A to this n:m pattern along K (by magnitude) and run it compressed on a "
         "sparse tensor engine (up to 4x fewer cycles).")


def _run_gemm(m, k, f, dtype, a_dtype, b_dtype, n, simulator, seed, gaps, waves, as_json,
              sparsity=None):
    from sim.cli import gemm as gemm_mod

    result = gemm_mod.run_gemm(m=m, k=k, f=f, a_fmt=a_dtype or dtype, b_fmt=b_dtype or dtype,
                               n=n, simulator=simulator, seed=seed, gaps=gaps,
                               waves=waves or None, sparsity=sparsity)
    click.echo(json.dumps(result, indent=2) if as_json else gemm_mod.format_gemm(result))
    if not result["bit_exact"]:
        sys.exit(1)


@main.command()
@_gemm_options
@_sparsity_option
def gemm(**kw):
    """Run C = A.T @ B through the tensor engine in RTL simulation, bit-exact against golden.

    A is K x M (the stationary operand), B is K x N (moving); the GEMM is tiled to the array
    and PSUM exactly as golden/tensor_engine.py's schedule says. Prints cycles, utilization
    (useful MACs / (N_array^2 x cycles)) and the error against float64. With --sparsity A is
    n:m-sparse along K (golden/sparse.py) and counts as its dense M x K x N MACs.
    """
    _run_gemm(**kw)


@main.command()
@click.option("--sim", "simulator", type=_SIMS, default="verilator", show_default=True,
              help="Simulator to run the RTL in.")
@click.option("--seed", type=int, default=1, show_default=True, help="Random seed (data, SR).")
@click.option("--only", type=click.Choice(["mlp", "ring", "moe"]), default=None,
              help="Run only the one-core MLP, the four-core all-reduce or the four-core "
                   "mixture-of-experts layer.")
@_waves_option
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def demo(simulator, seed, only, waves, as_json):
    """The main job: whole NeuronCore programs in RTL simulation, checked against the ISS.

    1. A 2-layer MLP forward pass on one NeuronCore: the host writes the commands through
    AXI4-Lite, the DMA reads and writes DRAM over AXI4, the tensor engine multiplies, the
    activation engine adds the bias, applies relu and rounds (SR for the fp8 output).
    2. Four NeuronCores in a ring: each computes a partial product, an all-reduce sums them.
    3. An expert-parallel mixture-of-experts layer on four NeuronCores: tokens go to their
    expert's core by an all-to-all, through its MLP, and back by another all-to-all.

    After each program every byte of DRAM and every SBUF and PSUM word is compared with the
    golden instruction-level simulator; the per-engine busy cycles come from the core's
    performance counters. (`nclite gemm` runs a GEMM on the tensor engine alone.)
    """
    from sim.cli import demo as core_demo
    from sim.cli.progress import bar

    mlp = ring = moe = None
    with bar("nclite demo", None) as progress:
        if only in (None, "mlp"):
            progress.status(f"program 1: an MLP on one NeuronCore ({simulator}; the first run "
                            "builds the model)")
            mlp = core_demo.run_mlp_demo(simulator=simulator, seed=seed, waves=waves or None)
        if only in (None, "ring"):
            progress.status(f"program 2: four NeuronCores in a ring ({simulator})")
            ring = core_demo.run_ring_demo(simulator=simulator, seed=seed, waves=waves or None)
        if only in (None, "moe"):
            progress.status(f"program 3: a mixture-of-experts layer on four NeuronCores "
                            f"({simulator})")
            moe = core_demo.run_moe_demo(simulator=simulator, seed=seed, waves=waves or None)
    if as_json:
        click.echo(json.dumps({"mlp": mlp, "ring": ring, "moe": moe}, indent=2))
    else:
        click.echo(core_demo.format_demo(mlp, ring, moe))
    if not all(r["bit_exact"] for r in (mlp, ring, moe) if r is not None):
        sys.exit(1)


@main.command("pe-chain")
@click.option("--sim", "simulator", type=_SIMS, default="verilator", show_default=True,
              help="Simulator to run the RTL in.")
@click.option("-k", "length", type=click.IntRange(1, 64), default=8, show_default=True,
              help="Dot-product length = number of PEs in the chain.")
@click.option("--vectors", type=click.IntRange(1, 100000), default=256, show_default=True,
              help="How many dot products to stream through the chain.")
@click.option("--dtype", type=_DTYPES, default="bf16", show_default=True,
              help="Format of weights and inputs.")
@click.option("--seed", type=int, default=1, show_default=True, help="Random seed.")
@_waves_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def pe_chain(simulator, length, vectors, dtype, seed, waves, as_json):
    """Stream dot products through a chain of PEs (one array column); check against golden."""
    from sim.cli import pe_chain as demo_mod

    result = demo_mod.run_pe_chain_demo(simulator=simulator, length=length, vectors=vectors,
                                        dtype=dtype, seed=seed, waves=waves or None)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(demo_mod.format_result(result))
    if not result["bit_exact"]:
        sys.exit(1)


@main.command("sr-demo")
@click.option("--sim", "simulator", type=_SIMS, default="verilator", show_default=True,
              help="Simulator.")
@click.option("--steps", type=click.IntRange(1, 100_000), default=2000, show_default=True,
              help="Number of additions.")
@click.option("--start", type=float, default=1.0, show_default=True, help="Initial value.")
@click.option("--increment", type=float, default=1e-3, show_default=True,
              help="Added at every step (rounded to fp32 first).")
@click.option("--dtype", "fmt", type=click.Choice(["bf16", "fp16", "fp8_e4m3", "fp8_e5m2"]),
              default="bf16", show_default=True, help="Format the sum is kept in.")
@click.option("--lanes", type=click.IntRange(1, 16), default=4, show_default=True,
              help="SRU lanes: one SR sum per lane, each with its own random stream.")
@click.option("--seed", type=click.IntRange(0, (1 << 64) - 1), default=0, show_default=True,
              help="PRNG seed (0 is the value after reset, as on Neuron).")
@click.option("--random-bits", type=click.IntRange(1, 32), default=16, show_default=True,
              help="r, random bits per SR decision.")
@click.option("--out", "png", default="sr-demo.png", show_default=True,
              help="Where to write the PNG.")
@_waves_option
@click.option("--json", "as_json", is_flag=True,
              help="Print the result (trajectories included) as JSON.")
def sr_demo(simulator, steps, start, increment, fmt, lanes, seed, random_bits, png, waves,
            as_json):
    """Stochastic rounding vs round-to-nearest: a running sum rounded by the SRU's RTL.

    Repeats acc = cast(acc + increment): the fp32 add in the testbench, the cast (RNE, and SR
    in every lane) by the simulated StochasticRounder, each checked bit for bit against
    golden/. RNE stops growing once the increment is below half an ulp; SR follows the fp32
    sum. Writes a PNG of the three and prints the final values.
    """
    from sim.cli import sr_demo as sr_mod

    result = sr_mod.run_sr_demo(simulator=simulator, steps=steps, start=start,
                                increment=increment, lanes=lanes, fmt=fmt, seed=seed,
                                random_bits=random_bits, png=png, waves=waves or None)
    click.echo(json.dumps(result, indent=2) if as_json else sr_mod.format_sr_demo(result))


@main.command()
@click.option("--steps", type=click.IntRange(1, 100_000), default=None,
              help="Training steps (global batches). "
                   "[default: 300 on the ISS, 2 in Verilator, 1 in Icarus]")
@click.option("--rounding", type=click.Choice(["sr", "rne", "fp32", "all"]), default="sr",
              show_default=True, help="The weight update's cast: bf16 weights with stochastic "
              "rounding or round-to-nearest-even, fp32 master weights, or all three runs.")
@click.option("--on", "on", type=click.Choice(["iss", "icarus", "verilator"]), default="iss",
              show_default=True, help="The golden ISS (the whole run), or also the RTL in a "
              "simulator (the same steps, compared with the ISS bit for bit).")
@click.option("--cores", type=click.IntRange(2, 16), default=4, show_default=True,
              help="P, cores in the ring (data-parallel: each takes 8 samples a step).")
@click.option("--lr", type=click.FloatRange(0, 1000, min_open=True), default=None,
              help="Learning rate. [default: 0.5]")
@click.option("--seed", type=click.IntRange(0, (1 << 64) - 1), default=0, show_default=True,
              help="Seed of the split, the initial weights, the batches and the SR bits.")
@click.option("--eval-every", type=click.IntRange(1, 100_000), default=10, show_default=True,
              help="Steps between test-accuracy evaluations.")
@click.option("--plot", "png", type=click.Path(dir_okay=False), default=None,
              help="Draw loss and test accuracy against step into this PNG.")
@_waves_option
@click.option("--json", "as_json", is_flag=True, help="Print the runs (every step) as JSON.")
def train(steps, rounding, on, cores, lr, seed, eval_every, png, waves, as_json):
    """Train an MLP (64 -> 32 -> 10) on scikit-learn's digits, data-parallel on a ring of cores.

    Every step runs on the cores: forward GEMMs, the loss and its gradient, backward GEMMs
    with transposes, the gradients' all-reduce over the collective engines and the SGD
    update w <- cast(w - lr * g) into bf16 weights (SR or RNE) or fp32 master weights. The
    host only feeds batches and evaluates the test accuracy (docs/training.md). On the RTL,
    the steps are checked against the ISS in every byte of DRAM, SBUF and PSUM.
    """
    from sim.cli import train as train_mod
    from sim.cli.progress import bar

    modes = train_mod.modes_of(rounding)
    steps = steps or {"iss": 300, "verilator": 2, "icarus": 1}[on]
    with bar("nclite train", steps * len(modes)) as progress:
        runs = train_mod.run_train(steps=steps, modes=modes, on=on, lr=lr, cores=cores,
                                   seed=seed, eval_every=eval_every, waves=bool(waves),
                                   bar=progress)
    if png:
        runs[0]["plot"] = str(train_mod.plot_runs([runs], png))
    click.echo(json.dumps(runs, indent=2) if as_json else train_mod.format_train(runs))
    if any(r.get("bit_exact") is False or r.get("same_as_iss_run") is False for r in runs):
        sys.exit(1)


@main.command()
@click.option("--ranks", "-p", type=int, default=None,
              help="P, cores in the ring (>= 2).  [default: 4]")
@click.option("--torus", metavar="RxC", default=None,
              help="An R x C torus of engines instead of a ring (all-reduce, all-to-all).")
@click.option("--n", "sizes", type=int, multiple=True,
              help="Words per rank (fp32); repeat for several runs on one build. "
                   "[default: 4096]")
@click.option("--link-width", "-w", type=int, default=1, show_default=True,
              help="fp32 words per link beat: 1, 2 or 4.")
@click.option("--op", type=click.Choice(["all-reduce", "reduce-scatter", "all-gather",
                                        "all-to-all", "permute"]),
              default="all-reduce", show_default=True, help="The collective.")
@click.option("--shift", type=int, default=1, show_default=True,
              help="A permute's shift s: rank r sends to rank (r + s) mod P (1..P-1).")
@click.option("--latency", type=int, default=1, show_default=True,
              help="Link latency in cycles (1..16).")
@click.option("--stall-rate", type=int, default=0, show_default=True,
              help="Random link stalls: probability x 256 per cycle (0..255).")
@click.option("--sim", "simulator", type=_SIMS, default="verilator", show_default=True,
              help="Simulator to run the RTL in.")
@click.option("--seed", type=int, default=1, show_default=True, help="Random seed of the data.")
@_waves_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def allreduce(ranks, torus, sizes, link_width, op, shift, latency, stall_rate, simulator, seed,
              waves, as_json):
    """Run a ring all-reduce (or reduce-scatter, all-gather, all-to-all, permute) on P
    simulated collective engines.

    Every word of every rank is checked bit for bit against golden/collective.py; prints the
    cycles beside the bandwidth-optimal bound (all-reduce: the ring's 2(P-1)/P * n / W) as an
    efficiency ratio, and an all-reduce's error against float64. With --torus RxC, an R x C
    torus of engines runs the torus all-reduce (rows, then columns, then rows) or all-to-all
    (columns, then rows), against the sum of its steps' bounds.
    """
    from sim.cli import allreduce as ar

    shape = None
    if torus is not None:
        parts = torus.lower().split("x")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError(f"torus must be RxC (rows x columns, e.g. 2x4), not {torus!r}")
        shape = (int(parts[0]), int(parts[1]))
    elif ranks is None:
        ranks = 4
    result = ar.run_collectives(ranks=ranks, torus=shape, sizes=list(sizes) or [4096],
                                link_width=link_width, op=op.replace("-", "_"),
                                simulator=simulator, latency=latency, stall_rate=stall_rate,
                                seed=seed, waves=waves or None, shift=shift)
    click.echo(json.dumps(result, indent=2) if as_json else ar.format_collectives(result))


@main.command()
@click.option("--out", default="bench", show_default=True, help="Output directory.")
@click.option("--quick", is_flag=True, help="Smaller runs (for smoke tests).")
@click.option("--only", multiple=True,
              type=click.Choice(["gemm", "pe-chain", "sim-speed", "synth", "core",
                                 "collectives", "sru", "training", "sparsity"]),
              help="Run only this section (repeatable); `make readme` refuses such results.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the results as JSON (the content of results.json).")
def bench(out, quick, only, as_json):
    """Run the benchmarks; write <out>/results.json and <out>/results.md.

    GEMM cycles and utilization per array size, dtype and shape; simulation speed (the model
    alone and with its testbench, build times); Yosys cell counts; SRU area and throughput;
    all-reduce efficiency; GEMM programs on a whole core; training; dense vs sparse GEMMs
    and a sparse engine's area. A progress bar shows the runs (on
    stderr).
    """
    from sim.tools import bench as bench_mod

    path_json, path_md = bench_mod.run_all(out, quick=quick, only=only or None)
    if as_json:
        click.echo(path_json.read_text())
        return
    click.echo(path_md.read_text())
    click.echo(f"wrote {path_json} and {path_md}")


@main.group()
def synth():
    """FPGA synthesis with Yosys and nextpnr from PyPI (ECP5 25F/85F, iCE40 UP5K).

    Results are cached under build/synth/, keyed by the design's Verilog, the tool versions
    and the options: re-running with nothing changed is instant.
    """


def _parse_params(items) -> dict:
    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, not {item!r}", param_hint="--param")
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value
    return params


@synth.command("component")
@click.argument("design")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
              help="A constructor parameter, VALUE as JSON (e.g. -p n=4 -p formats='[\"bf16\"]').")
@click.option("--device", type=click.Choice(["ecp5-25f", "ecp5-85f", "ice40-up5k"]),
              default="ecp5-85f", show_default=True, help="Target part.")
@click.option("--seed", type=int, default=1, show_default=True, help="nextpnr placement seed.")
@click.option("--freq", type=float, default=100.0, show_default=True,
              help="Target clock for nextpnr, MHz.")
@click.option("--area-only", is_flag=True, help="Skip place-and-route (no Fmax).")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
def synth_component(design, params, device, seed, freq, area_only, as_json):
    """Area and Fmax of one component, DESIGN given as hdl.module:Class (e.g. hdl.pe:PE)."""
    from sim.cli.progress import bar
    from synth.fpga import fpga_synth

    with bar(f"synthesis of {design} on {device}", None) as progress:
        progress.status("Yosys" + ("" if area_only else ", then nextpnr in the timing harness"))
        r = fpga_synth(design, _parse_params(params), device=device, seed=seed, freq=freq,
                       timing=not area_only)
    if as_json:
        click.echo(json.dumps(r, indent=2))
        return
    a, t = r["area"], r["timing"] or {}
    click.echo(f"{design} {r['params']} on {r['part']}{' (cached)' if r['cached'] else ''}")
    click.echo(f"  area: {a['luts']} LUTs, {a['ffs']} FFs, {a['dsps']} DSPs, {a['brams']} BRAMs")
    if "skipped" in t:
        click.echo(f"  timing: skipped, {t['skipped']}")
    elif t:
        cp = t["critical_path"] or {}
        click.echo(f"  Fmax: {t['fmax_mhz']} MHz (target {t['target_mhz']:g}, seed {t['seed']})")
        if cp:
            click.echo(f"  critical path: {cp['from']} -> {cp['to']}: {cp['delay_ns']} ns, "
                       f"{cp['logic_levels']} logic levels ({cp['logic_ns']} ns logic, "
                       f"{cp['routing_ns']} ns routing)")


@synth.command("report")
@click.option("--quick", is_flag=True, help="Components and N = 2, 4 only.")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Syntheses run at once.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Output directory (default: synth/).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def synth_report(quick, jobs, out, as_json):
    """Synthesize every design of the report; write report.md, report.json and PNG plots."""
    from pathlib import Path

    from synth import report as rep

    data = rep.collect(quick=quick, workers=jobs)
    paths = rep.write_report(data, Path(out) if out else rep.REPORT_DIR)
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo("wrote " + ", ".join(str(p) for p in paths))
    failed = [r["label"] for r in data["results"] if "error" in r]
    if failed:
        raise click.ClickException("synthesis failed for: " + "; ".join(failed))


@synth.command("sweep")
@click.option("--design", default="tensor_engine", show_default=True,
              help="What to vary: tensor_engine (N x N), pe_column (N rows) or pe (N = 1).")
@click.option("--n", "sizes", default=None, metavar="N,...",
              help="Array sizes.  [default: 1,2; 1 for pe]")
@click.option("--stages", default="5/6,2/3", show_default=True, metavar="MUL/ADD,...",
              help="PE pipeline stages: multiplier / adder.")
@click.option("--formats", default=None, metavar="SET,...",
              help="Input format sets: all, bf16, fp8.  [default: all,bf16; all for pe, "
                   "whose operands arrive decoded]")
@click.option("--device", "devices", default="ecp5-85f", show_default=True, metavar="PART,...",
              help="Parts: ecp5-25f, ecp5-85f, ice40-up5k.")
@click.option("--area-only", is_flag=True, help="Skip place-and-route (no Fmax).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="A running Dask scheduler (tcp://host:8786) whose workers run the jobs; "
                   "default: a local cluster.")
@click.option("--workers", "-j", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Workers of the local cluster.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Output directory (default: synth/).")
@click.option("--json", "as_json", is_flag=True, help="Print the sweep as JSON.")
def synth_sweep(design, sizes, stages, formats, devices, area_only, scheduler, workers, out,
                as_json):
    """Synthesize a grid of designs on Dask; write sweep.md, sweep.json and a Pareto plot.

    Every combination of --n, --stages, --formats and --device is one synthesis (cached as
    the report's are). Example: nclite synth sweep --n 1,2,4 --stages 5/6,3/4,2/3.
    """
    from pathlib import Path

    from synth import sweep as sw

    if sizes is None:
        sizes = "1" if design == "pe" else "1,2"
    if formats is None:
        formats = "all" if design == "pe" else "all,bf16"
    try:
        grid = sw.parse_grid(design=design, sizes=sizes, stages=stages, formats=formats,
                             devices=devices, timing=not area_only)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    result = sw.run_sweep(grid, scheduler=scheduler, workers=workers)
    paths = sw.write_sweep(result, Path(out) if out else sw.REPORT_DIR)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(sw.render_md(result).split("\n\n", 3)[-1].rstrip())
        click.echo("wrote " + ", ".join(str(p) for p in paths))
    failed = [r["label"] for r in result["results"] if "error" in r]
    if failed:
        raise click.ClickException("synthesis failed for: " + "; ".join(failed))


@main.group()
def board():
    """The FPGA board: build its bitstream, run a GEMM on it through the UART bridge."""


_BOARDS = click.Choice(["ulx3s-85f"])


@board.command("build")
@click.option("--board", "board_name", type=_BOARDS, default="ulx3s-85f", show_default=True,
              help="Which board (its platform and core configuration: synth/board.py).")
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
def board_build(board_name, as_json):
    """Build the bitstream (build/board/<board>/nclite.bit) with Yosys, nextpnr and ecppack
    from PyPI; reused while nothing changed."""
    from sim.cli.progress import bar
    from synth.board import build_bitstream

    with bar(f"bitstream {board_name}", None) as progress:
        r = build_bitstream(board_name, progress=progress.status)
    if as_json:
        click.echo(json.dumps(r, indent=2))
        return
    from sim.runner import build_root

    util = ", ".join(f"{c} {v['used']}/{v['available']}" for c, v in r["utilization"].items())
    click.echo(f"{build_root() / 'board' / board_name / r['bitstream']}: "
               f"{r['bitstream_bytes']} bytes{' (cached)' if r['cached'] else ''}")
    click.echo(f"  core {r['core']}, UART {r['baud']} baud")
    click.echo("  Fmax: " + ", ".join(f"{k} {v} MHz" for k, v in r["fmax_mhz"].items())
               + f" (core clock {r['clock_hz'] / 1e6:g} MHz, from the PLL)")
    click.echo(f"  utilization: {util}")


@board.command("gemm")
@click.option("--port", required=True, help="The board's serial port, e.g. /dev/ttyUSB0.")
@click.option("--board", "board_name", type=_BOARDS, default="ulx3s-85f", show_default=True,
              help="Which board (tells the core's configuration).")
@click.option("--baud", type=int, default=None,
              help="UART baud rate (default: the one the bitstream was built for).")
@click.option("-m", type=click.IntRange(1, 256), default=8, show_default=True,
              help="Rows of C (columns of A).")
@click.option("-k", type=click.IntRange(1, 256), default=8, show_default=True,
              help="The reduction dimension.")
@click.option("-f", type=click.IntRange(1, 256), default=8, show_default=True,
              help="Columns of B and C.")
@click.option("--a-dtype", type=click.Choice(["bf16", "fp8_e4m3", "fp8_e5m2"]), default="bf16",
              show_default=True, help="Format of A (stationary).")
@click.option("--b-dtype", type=click.Choice(["bf16", "fp8_e4m3", "fp8_e5m2"]), default="bf16",
              show_default=True, help="Format of B (moving).")
@click.option("--seed", type=int, default=1, show_default=True, help="Random seed of the data.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def board_gemm(port, board_name, baud, m, k, f, a_dtype, b_dtype, seed, as_json):
    """Run C = A.T @ B on the board's NeuronCore and check it bit for bit against golden."""
    from sim.host.board import run_on_board

    r = run_on_board(port, board=board_name, baud=baud, m=m, k=k, f=f, a_dtype=a_dtype,
                     b_dtype=b_dtype, seed=seed,
                     log=None if as_json else (lambda msg: click.echo(msg, err=True)))
    if as_json:
        click.echo(json.dumps(r, indent=2))
    else:
        verdict = "bit-exact with golden" if r["ok"] else f"{r['mismatches']} MISMATCHES"
        click.echo(f"GEMM {m}x{k}x{f} {a_dtype} x {b_dtype} on {board_name} ({port}): "
                   f"{verdict}; {r['commands']} commands, {r['cycles']} busy cycles, "
                   f"{r['seconds']} s")
    if not r["ok"]:
        raise click.ClickException(f"{r['mismatches']} elements differ from golden: "
                                   f"{r['first_mismatches']}")


# Commands that run simulations, and so can dump waveforms.
_SIM_COMMANDS = ("gemm", "demo", "pe-chain", "sr-demo", "allreduce", "train")


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                "help_option_names": []})
@click.argument("command", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def waves(ctx, command, args):
    """Run COMMAND (gemm, demo, pe-chain, sr-demo, allreduce, lab check) with waveform dumps,
    or read a dump: `nclite waves show DUMP SIGNAL...`, `nclite waves list DUMP`.

    \b
    nclite waves gemm --array 2 --m 2 --k 2 --n 4 --sim icarus
    Every simulation of the run writes its waveform (FST), linked as build/waves/<top>.fst,
    and prints that path; for the tensor engine, open it with the save file that shows the
    systolic wavefront:
    gtkwave <dump> docs/waves/tensor_engine.gtkw   (or: surfer <dump>)
    or read it as text, a row per cycle:
    nclite waves show build/waves/tensor_engine.fst mover.meta.valid pe_*.psum_out
    Same as WAVES=1 in the environment, which also works for pytest and make.
    """
    import os

    from sim.cli.waves import READERS

    if command is None or command in ("-h", "--help"):
        click.echo(ctx.get_help())
        return
    if command in READERS:
        reader = READERS[command]
        with reader.make_context(f"waves {command}", list(args),
                                 parent=ctx.parent) as sub_ctx:
            reader.invoke(sub_ctx)
        return
    if command == "lab":
        sub_args = list(args)
    elif command in _SIM_COMMANDS:
        sub_args = [*args, "--waves"]
    else:
        raise click.UsageError(f"{command!r} runs no simulation; waveforms come from "
                               + ", ".join(_SIM_COMMANDS) + " and `lab check`; "
                               "`show` and `list` read a dump")
    cmd = main.get_command(ctx, command)
    saved = os.environ.get("WAVES")
    os.environ["WAVES"] = "1"  # for `lab check`'s pytest, and every simulation of the run
    try:
        with cmd.make_context(command, sub_args, parent=ctx.parent) as sub_ctx:
            cmd.invoke(sub_ctx)
    finally:
        if saved is None:
            os.environ.pop("WAVES", None)
        else:
            os.environ["WAVES"] = saved


@main.group()
def kernel():
    """NKI-style kernels (docs/kernels.md): write one in Python, run it on the ISS or the RTL.

    \b
    nclite kernel run docs/kernels/matmul.py                 # the golden ISS: numbers only
    nclite kernel run docs/kernels/matmul.py --on verilator  # RTL: cycles, bit-exact check
    """


@kernel.command("run")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--on", "on", type=click.Choice(["iss", "icarus", "verilator", "board"]),
              default="iss", show_default=True,
              help="The golden ISS (fast, numbers only), the RTL in a simulator (also cycles, "
                   "per-engine busy cycles, utilization; checked against the ISS), or the FPGA "
                   "board over UART (--port; its outputs checked against the ISS).")
@click.option("--cores", type=int, default=None,
              help="Cores in a ring (default: the file's CORES, else 1).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the inputs.")
@click.option("--profile", "profile_png", type=click.Path(dir_okay=False), default=None,
              help="With --on icarus|verilator: draw each engine's busy intervals and the "
                   "commands against the cycles into this PNG.")
@click.option("--port", default=None, help="With --on board: the serial port (/dev/ttyUSB0).")
@click.option("--board", "board_name", default="ulx3s-85f", show_default=True,
              help="With --on board: which board (its core's configuration).")
@click.option("--baud", type=int, default=None, help="With --on board: the UART's baud rate "
              "(default: the board's).")
@_waves_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def kernel_run(file, on, cores, seed, profile_png, port, board_name, baud, waves, as_json):
    """Trace the kernel in FILE on its inputs and run it.

    FILE defines kernel(**inputs) and inputs(rng) (docs/kernels.md). A statement the core
    cannot run (a shape, dtype, partition count, SBUF or PSUM overflow, a tile used after it
    was freed) is an error naming FILE and its line.
    """
    from sim.kernels.run import format_result, result_json, run_kernel

    r = run_kernel(file, on=on, cores=cores, seed=seed, waves=bool(waves),
                   profile_png=profile_png, port=port, board=board_name, baud=baud)
    click.echo(json.dumps(result_json(r), indent=2) if as_json else format_result(r))
    if r.get("bit_exact") is False:
        sys.exit(1)


@main.group()
def lab():
    """Hardware-course labs (docs/labs/): list them, start one in a scratch copy, check it.

    \b
    nclite lab list
    nclite lab start 3            # build/labs/lab3: the repository with lab 3's exercise stubbed
    cd build/labs/lab3 && make lab3-check
    """


@lab.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the labs as JSON.")
def lab_list(as_json):
    """The labs, their texts, exercises and checks."""
    from sim.tools import labs

    all_labs = labs.labs()
    if as_json:
        click.echo(json.dumps([lab.as_dict() for lab in all_labs.values()], indent=2))
        return
    for n, lab in all_labs.items():
        click.echo(f"lab {n}: {lab.title}  ({lab.path / 'README.md'})")
        for e in lab.exercises:
            click.echo(f"    exercise: {e.file}, region `{e.region}`")


@lab.command("start")
@click.argument("number", type=int)
@click.option("--dir", "dest", type=click.Path(file_okay=False), default=None,
              help="Where to put the scratch copy (default: build/labs/lab<N>).")
@click.option("--force", is_flag=True,
              help="Replace an existing scratch copy (its edits are lost).")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
def lab_start(number, dest, force, as_json):
    """Copy the repository to a scratch directory with lab NUMBER's exercise stubbed out.

    The main tree keeps the reference solution; in the copy, the marked regions
    (`# lab<N> begin: ...` to `# lab<N> end: ...`) hold stubs for you to fill in. The copy
    shares the main tree's .venv.
    """
    from pathlib import Path

    from sim.tools import labs

    r = labs.start(number, Path(dest) if dest else None, force=force)
    if as_json:
        click.echo(json.dumps(r, indent=2))
        return
    click.echo(f"lab {number} ({r['title']}) started in {r['dir']}")
    click.echo(f"  read    : {r['text']}")
    for region in r["regions"]:
        click.echo(f"  edit    : {region}")
    click.echo(f"  check   : {r['check']}")


@lab.command("check")
@click.argument("number", type=int)
@click.option("--dir", "tree", type=click.Path(file_okay=False, exists=True), default=".",
              show_default=True, help="The tree to check: a scratch copy, or the main tree.")
@click.option("--fast", is_flag=True, help="Only the checks that need no simulator build.")
@click.option("--jobs", "-n", default="auto", show_default=True,
              help="pytest-xdist workers.")
@click.option("--verbose", "-v", is_flag=True,
              help="pytest's full output: every traceback, not the short summary.")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
def lab_check(number, tree, fast, jobs, verbose, as_json):
    """Run lab NUMBER's tests (pytest, both simulators) against the code in --dir.

    A failure is summed up in a few lines: what differs (the checks' own diagnosis), the seed
    and how to rerun one test; -v shows pytest's full tracebacks instead.
    """
    import subprocess
    from pathlib import Path

    from sim.tools import labs

    tree = Path(tree).resolve()
    if not (tree / "docs" / "labs").is_dir() or not (tree / "hdl").is_dir():
        raise click.ClickException(f"{tree} is not an nclite tree (run from the scratch copy "
                                   "that `nclite lab start` made, or give --dir)")
    junit = tree / "build" / "lab-check" / f"lab{number}.xml"
    junit.parent.mkdir(parents=True, exist_ok=True)
    junit.unlink(missing_ok=True)
    args = labs.check_args(number, tree, fast=fast, jobs=jobs, verbose=verbose, junit=junit)
    if as_json:
        proc = subprocess.run(args, cwd=tree, capture_output=True, text=True)
        returncode = proc.returncode
    else:
        returncode = _run_filtered(args, tree)
    ok = returncode == 0
    summary = [] if ok or verbose else labs.failure_summary(junit, number, tree=tree)
    if as_json:
        click.echo(json.dumps({"lab": number, "dir": str(tree), "passed": ok,
                               "command": args, "returncode": returncode,
                               "summary": summary}, indent=2))
    elif ok and fast:
        click.echo(f"lab {number}: every fast check passes in {tree} (the simulators' checks "
                   f"did not run: nclite lab check {number}, or make lab{number}-check)")
    elif ok:
        click.echo(f"lab {number}: every check passes in {tree}")
    else:
        click.echo("\n".join(summary))
    if not ok:
        raise click.ClickException(f"lab {number}: checks failed in {tree}")


#: pytest-xdist's start-up line, once per worker at -q: noise in a lab check's output.
_XDIST_NOISE = "bringing up nodes...\n"


def _run_filtered(args, cwd) -> int:
    """Run ``args``, passing its output through as it comes (pytest's progress dots), without
    pytest-xdist's "bringing up nodes..." lines."""
    import codecs
    import os
    import subprocess

    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    pending = ""
    # (incremental: a character split between two reads is decoded whole)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while chunk := os.read(proc.stdout.fileno(), 4096):
        pending += decoder.decode(chunk)
        pending = pending.replace(_XDIST_NOISE, "")
        # Hold back only what may be the start of the noise line (a suffix shorter than it).
        keep = next((len(pending) - i
                     for i in range(max(len(pending) - len(_XDIST_NOISE) + 1, 0), len(pending))
                     if _XDIST_NOISE.startswith(pending[i:])), 0)
        out, pending = pending[:len(pending) - keep], pending[len(pending) - keep:]
        sys.stdout.write(out)
        sys.stdout.flush()
    sys.stdout.write(pending + decoder.decode(b"", final=True))
    proc.stdout.close()
    return proc.wait()


def _lab_copy_root():
    """The root of the lab scratch copy the working directory is in (``nclite lab start``
    marks it), or None."""
    from pathlib import Path

    from sim.tools.labs import MARKER

    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / MARKER).is_file():
            return d
    return None


def entry():
    """The ``nclite`` console script. Inside a lab's scratch copy it runs the copy's code (the
    student's), not the main tree's that the script was installed from."""
    import os
    from pathlib import Path

    lab_root = _lab_copy_root()
    if lab_root is not None and Path(__file__).resolve().parents[2] != lab_root \
            and not os.environ.get("NCLITE_IN_LAB_COPY"):
        env = {**os.environ, "NCLITE_IN_LAB_COPY": str(lab_root),
               "PYTHONPATH": os.pathsep.join([str(lab_root), os.environ.get("PYTHONPATH", "")])}
        os.execve(sys.executable, [sys.executable, "-m", "sim.cli", *sys.argv[1:]], env)
    main()


if __name__ == "__main__":
    main()
