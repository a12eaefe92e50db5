"""SBUF and PSUM of a simulated core compared with its ISS: :class:`MemoryCheck`, shared by the
single-core and the ring testbenches (``sim.tb.core``, ``sim.tb.multicore``)."""

from __future__ import annotations

from golden.iss import NeuronCoreISS
from sim.host.core import CoreHost
from sim.tb import tbutil

__all__ = ["DEBUG_READ_EVERY", "MemoryCheck"]

#: One in this many comparisons of SBUF and PSUM reads them through the debug registers.
DEBUG_READ_EVERY = 4


class MemoryCheck:
    """Compares one core's SBUF and PSUM with its ISS' (``await check(what)``).

    Through VPI where the testbench made the memories public (``hdl.sim_top.core_memories``;
    zero simulated time, where a debug read costs a register write and a read, about ten
    cycles, for each of hundreds of words), except the first of every
    :data:`DEBUG_READ_EVERY` comparisons, which reads through the debug registers as software
    does: that path stays checked in every test and in both simulators."""

    def __init__(self, host: CoreHost, iss: NeuronCoreISS, seed: int):
        self.host, self.iss, self.seed = host, iss, seed
        self.count = 0

    async def __call__(self, what: str) -> None:
        self.count += 1
        debug = self.count % DEBUG_READ_EVERY == 1
        via = "debug registers" if debug or not self.host.has_backdoor else "VPI"
        for name, got, want in (("SBUF", await self.host.read_sbuf(debug=debug), self.iss.sbuf),
                                ("PSUM", await self.host.read_psum(debug=debug), self.iss.psum)):
            msg = tbutil.mismatch(name, got, want)
            assert msg is None, f"{what}: {msg} (read through {via}; seed {self.seed})"
