"""nclite kernels: an NKI-style programming interface over the core's ISA.

Write a kernel as NKI kernels are written and run it on the golden ISS, in Icarus or in
Verilator with the same bits (``nclite kernel run FILE.py``; ``docs/kernels.md``)::

    from sim.kernels import nisa, nl

    def kernel(a, b):                       # DRAM tensors: a (K, M), b (K, F)
        c = nl.ndarray((M, F), nl.float32, buffer=nl.shared_hbm)
        ...
        return c

* :mod:`sim.kernels.language` (``nl``) - allocation, dtypes, the SPMD rank;
* :mod:`sim.kernels.isa` (``nisa``) - the instructions;
* :mod:`sim.kernels.collectives` (``ncc``) - collectives over a ring of cores;
* :mod:`sim.kernels.trace` - how a kernel becomes descriptors, :class:`KernelError`;
* :mod:`sim.kernels.run` - kernel files, :func:`run_kernel`.
"""

from . import collectives as ncc
from . import isa as nisa
from . import language as nl
from .run import load_kernel, run_kernel, trace_kernel
from .trace import KernelError

__all__ = ["nl", "nisa", "ncc", "KernelError", "load_kernel", "trace_kernel", "run_kernel"]
