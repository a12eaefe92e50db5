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
    cycles, for each of hundreds of words), except the first of every ``debug_every``
    comparisons (:data:`DEBUG_READ_EVERY` in the tests), which reads through the debug
    registers as software does: that path stays checked in every test and in both simulators.
    ``debug_every=0``: never (the demo and the bench, whose SBUFs hold thousands of words).
    Without the backdoor every comparison reads through the debug registers."""

    def __init__(self, host: CoreHost, iss: NeuronCoreISS, seed: int, *,
                 debug_every: int = DEBUG_READ_EVERY):
        if not isinstance(debug_every, int) or debug_every < 0:
            raise ValueError(f"debug_every must be a non-negative integer, not {debug_every!r}")
        self.host, self.iss, self.seed, self.debug_every = host, iss, seed, debug_every
        self.count = 0

    async def __call__(self, what: str) -> None:
        self.count += 1
        debug = bool(self.debug_every) and (self.count - 1) % self.debug_every == 0
        via = "debug registers" if debug or not self.host.has_backdoor else "VPI"
        for name, got, want in (("SBUF", await self.host.read_sbuf(debug=debug), self.iss.sbuf),
                                ("PSUM", await self.host.read_psum(debug=debug), self.iss.psum)):
            msg = tbutil.mismatch(name, got, want)
            assert msg is None, f"{what}: {msg} (read through {via}; seed {self.seed})"
