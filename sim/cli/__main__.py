"""``python -m sim.cli``: the ``nclite`` command."""

from sim.cli import entry

entry()
