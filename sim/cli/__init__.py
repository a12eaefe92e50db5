"""The ``nclite`` command line: the click application (:mod:`sim.cli.app`) and one module per
command that needs more than a few lines (``demo``, ``pe_chain``, ``gemm``, ``allreduce``,
``sr_demo``; ``progress`` draws their progress bars)."""

from sim.cli.app import entry, main

__all__ = ["main", "entry"]
