"""Submodules as instances of Verilog modules converted once: for simulation builds.

A design that holds many identical submodules (the n x n PEs of a systolic array, the cores of
a ring) is converted by Amaranth, compiled by Verilator and loaded by Icarus once per copy.
Where each copy is instead an ``Instance`` of one Verilog module, converted on its own, that
work is done once: the same hardware, the same hierarchy and instance names (so every
signal's path, in VPI and in a waveform, is the same), a fraction of the build time.

* :class:`ModuleInstance` stands for a component as an instance of a named Verilog module;
  whoever converts the design must supply that module's Verilog.
* :func:`shared` is what a design calls where it makes such a submodule: inside
  :func:`sharing` (``sim.runner.elaborate`` converts every design inside it) it returns a
  :class:`ModuleInstance` and records the module to supply; elsewhere (Amaranth's simulator,
  formal, a user's own ``verilog.convert``) it returns the component itself.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import re

from amaranth._unused import MustUse
from amaranth.hdl import ClockSignal, Instance, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

__all__ = ["ModuleInstance", "shared", "sharing"]

#: While :func:`sharing` runs: Verilog module name -> (factory, parameters) to convert.
_MODULES: contextvars.ContextVar[dict | None] = contextvars.ContextVar("nclite_shared_modules",
                                                                      default=None)


class ModuleInstance(wiring.Component):
    """``component``'s ports, on an instance of the Verilog module ``module``: ``component``
    converted on its own (``amaranth.back.verilog.convert(component, name=module)``), whose
    ports are named as Amaranth names a top module's (each signature member's path joined by
    ``__``; ``clk`` and ``rst`` of the ``sync`` domain, which a module without registers,
    ``clocked=False``, does not have)."""

    def __init__(self, component: wiring.Component, module: str, *, clocked: bool = True):
        if not isinstance(component, wiring.Component):
            raise TypeError(f"component must be a wiring.Component, not {component!r}")
        if not isinstance(module, str):
            raise TypeError(f"module must be a Verilog identifier, not {module!r}")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", module):
            raise ValueError(f"module must be a Verilog identifier, not {module!r}")
        if not isinstance(clocked, bool):
            raise TypeError(f"clocked must be a bool, not {clocked!r}")
        self._module, self._clocked = module, clocked
        component._MustUse__silence = True  # stands for it: never elaborated here
        super().__init__(component.signature)

    def elaborate(self, platform):
        # The fragment is the instance itself, not a module holding one: the instance takes
        # the submodule's name (pe_0_1, core0), so paths below it are those of the component.
        ports = {}
        for path, member, value in self.signature.flatten(self):
            prefix = "i_" if member.flow == In else "o_"
            ports[prefix + "__".join(str(part) for part in path)] = value
        if self._clocked:
            ports.update(i_clk=ClockSignal(), i_rst=ResetSignal())
        return Instance(self._module, **ports)


@contextlib.contextmanager
def sharing():
    """Within it, :func:`shared` makes instances; yields the modules to supply (name ->
    ``(factory, parameters)``), complete when the design has been converted."""
    modules: dict = {}
    token = _MODULES.set(modules)
    try:
        yield modules
    finally:
        _MODULES.reset(token)


def shared(component: wiring.Component, factory: str, params: dict, *,
           clocked: bool = True) -> wiring.Component:
    """``component``, or within :func:`sharing` an instance of the Verilog module that all
    components ``factory(**params)`` share (``factory`` as ``"hdl.pe:PE"``; ``params`` must
    be those ``component`` was made with; ``clocked``: whether it has registers, as
    :class:`ModuleInstance`'s)."""
    modules = _MODULES.get()
    if modules is None:
        return component
    key = json.dumps({"factory": factory, "params": params}, sort_keys=True, default=repr)
    name = f"{type(component).__name__.lower()}_{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    modules[name] = (factory, dict(params))
    _mark_used(component)
    return ModuleInstance(component, name, clocked=clocked)


def _mark_used(obj, seen=None) -> None:
    """Mark ``obj`` and the elaboratables it holds (its submodules-to-be) as used: an instance
    stands for them, and the copy that is converted is another object. (Amaranth warns
    UnusedElaboratable for each one otherwise, when it is collected.)"""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, MustUse):
        obj._MustUse__used = True
        for v in vars(obj).values():
            _mark_used(v, seen)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _mark_used(v, seen)
    elif isinstance(obj, dict):
        for v in obj.values():
            _mark_used(v, seen)
