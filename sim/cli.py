"""The ``nclite`` command line: one entry point for the main jobs.

Errors are one clear line (exit status 1) unless ``--debug`` is given.
"""

from __future__ import annotations

import json
import sys

import click

from . import toolchain


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"nclite: error: {exc}", err=True)
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


@main.command()
@click.option("--sim", "simulator", type=click.Choice(["verilator", "icarus"]),
              default="verilator", show_default=True, help="Simulator to run the RTL in.")
@click.option("-k", "length", type=click.IntRange(1, 64), default=8, show_default=True,
              help="Dot-product length = number of PEs in the chain.")
@click.option("--vectors", type=click.IntRange(1, 100000), default=256, show_default=True,
              help="How many dot products to stream through the chain.")
@click.option("--dtype", type=click.Choice(["bf16", "fp8_e4m3", "fp8_e5m2"]), default="bf16",
              show_default=True, help="Format of weights and inputs.")
@click.option("--seed", type=int, default=1, show_default=True, help="Random seed.")
@click.option("--waves", is_flag=True,
              help="Write a waveform (VCD from Verilator, FST from Icarus); print its path.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def demo(simulator, length, vectors, dtype, seed, waves, as_json):
    """Stream dot products through a chain of PEs in RTL simulation; check them against golden.

    Prints the cycle count, the throughput and the MAC utilization of the chain.
    """
    from . import demo as demo_mod

    result = demo_mod.run_pe_chain_demo(simulator=simulator, length=length, vectors=vectors,
                                        dtype=dtype, seed=seed, waves=waves)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(demo_mod.format_result(result))
    if not result["bit_exact"]:
        sys.exit(1)


@main.command()
@click.option("--out", default="bench", show_default=True, help="Output directory.")
@click.option("--quick", is_flag=True, help="Smaller runs (for smoke tests).")
def bench(out, quick):
    """Run the benchmarks; write <out>/results.json and <out>/results.md."""
    from . import bench as bench_mod

    path_json, path_md = bench_mod.run_all(out, quick=quick)
    click.echo(path_md.read_text())
    click.echo(f"wrote {path_json} and {path_md}")


if __name__ == "__main__":
    main()
