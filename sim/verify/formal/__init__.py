"""Formal verification of nclite's RTL with yowasp-sby (``python -m sim.verify.formal``,
``make formal``).

Each property is an Amaranth harness (:mod:`sim.verify.formal.harness`) around a real component of
``hdl/`` built with small parameters; :mod:`sim.verify.formal.flow` writes its RTLIL and .sby file
into ``build/formal/<name>/`` and runs yowasp-sby. The groups:

* :mod:`sim.verify.formal.sru` -- the SRU's RNE/RTZ fp32 -> bf16 against a reference on the bits;
* :mod:`sim.verify.formal.streams` -- stream protocol compliance on every stream port;
* :mod:`sim.verify.formal.fifos` -- no FIFO overflow or underflow;
* :mod:`sim.verify.formal.sequencer` -- the sequencer never deadlocks;
* :mod:`sim.verify.formal.mutants` -- broken designs whose proofs must fail.

``registry.PROPERTIES`` / ``registry.MUTANTS`` list them with their mode and depth.
"""

from .flow import FormalProperty, FormalResult, run_property

__all__ = ["FormalProperty", "FormalResult", "run_property"]
