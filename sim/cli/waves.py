"""``nclite waves show`` and ``nclite waves list``: a dump read as text, no viewer needed."""

from __future__ import annotations

import click

from sim.verify import wave_table

_DUMP = click.Path(dir_okay=False)  # a missing dump: one line from waves.open_dump


@click.command("show")
@click.argument("dump", type=_DUMP)
@click.argument("signals", nargs=-1, required=True)
@click.option("--from", "start", type=int, default=None,
              help="First cycle shown (with --clock none: a time in the dump's unit, ps).")
@click.option("--to", "stop", type=int, default=None, help="Last cycle shown.")
@click.option("--clock", default="clk", show_default=True,
              help="The clock whose rising edges number the cycles; `none`: a row per change "
                   "at the dump's times.")
@click.option("--radix", type=click.Choice(wave_table.RADICES), default="hex",
              show_default=True, help="Values in hex, decimal, signed decimal (two's "
                                      "complement), binary, or as floats (32-bit signals as "
                                      "fp32, 16-bit ones as bf16).")
@click.option("--every", is_flag=True, help="A row for every cycle, not only for changes.")
def show(dump, signals, start, stop, clock, radix, every):
    """Print SIGNALS of DUMP (FST or VCD) cycle by cycle, as a table.

    \b
    nclite waves show build/waves/tensor_engine.fst mover.meta.valid pe_*.psum_out --to 30
    A SIGNAL is a full name, its end after a dot (psum_out: every PE's), or a glob.
    Cycle c is the clock's rising edge c (the first is 0), each value as that edge samples it.
    Rows are shown where a value changed (--every: all).
    """
    click.echo(wave_table.table(dump, signals, clock=None if clock == "none" else clock,
                                start=start, stop=stop, radix=radix, every=every))


@click.command("list")
@click.argument("dump", type=_DUMP)
@click.argument("patterns", nargs=-1)
def list_(dump, patterns):
    """List the signals of DUMP (those PATTERNS select; all by default) with their widths."""
    for name, width in wave_table.list_signals(dump, patterns):
        click.echo(f"{name}  [{width}]")


#: The subcommands of `nclite waves` that read a dump instead of running a simulation.
READERS = {"show": show, "list": list_}
