"""cocotb test: reset held from time zero defines every output and every state register.

A 4-state simulator's view of bring-up (issue 25, "X-safety"): the test drives ``rst`` high
and every input named in ``NCLITE_X_INPUTS`` (a JSON list: the top's input ports but ``clk``
and ``rst``) to 0 at time zero, before the first clock edge, with no reset edge; it holds reset
for ``NCLITE_X_RESET_CYCLES`` cycles, releases it and lets the idle design run
``NCLITE_X_IDLE_CYCLES`` more. Then it walks the whole hierarchy (every signal Icarus shows:
ports, registers, wires, memories word by word) and fails naming each one that holds an X or a
Z bit, at the cycle reset is released and at the end.

The Verilog the test runs may have had its register initialisers removed
(``sim.runner.strip_initialisers``): then only the reset defines a register, as on a flow that
ignores initial values, and a register the reset does not reach (``reset_less``) must take a
defined value from defined inputs while reset is held.
"""

from __future__ import annotations

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.handle import HierarchyArrayObject, HierarchyObject, LogicArrayObject, LogicObject
from cocotb.triggers import ClockCycles, ReadOnly

from sim.tb import tbutil


def undefined(dut) -> list[str]:
    """The full names of every signal (and memory word) below ``dut`` with an X or Z bit."""
    found: list[str] = []

    def walk(handle, depth: int = 0):
        for child in handle:
            if isinstance(child, (LogicObject, LogicArrayObject)):
                if not child.value.is_resolvable:
                    found.append(f"{child._path} = {child.value}")
            elif isinstance(child, (HierarchyObject, HierarchyArrayObject)) and depth < 64:
                walk(child, depth + 1)
            else:  # memories: arrays of words
                try:
                    words = list(child)
                except TypeError:
                    continue
                for word in words:
                    if isinstance(word, (LogicObject, LogicArrayObject)) and \
                            not word.value.is_resolvable:
                        found.append(f"{word._path} = {word.value}")

    walk(dut)
    return found


@cocotb.test()
async def reset_defines_everything(dut):
    inputs = json.loads(os.environ["NCLITE_X_INPUTS"])
    reset_cycles = int(os.environ.get("NCLITE_X_RESET_CYCLES", "4"))
    idle_cycles = int(os.environ.get("NCLITE_X_IDLE_CYCLES", "16"))
    dut.rst.value = 1
    for name in inputs:
        getattr(dut, name).value = 0
    Clock(dut.clk, tbutil.CLOCK_PERIOD_NS, "ns").start(start_high=False)
    await ClockCycles(dut.clk, reset_cycles)
    dut.rst.value = 0
    await ReadOnly()
    at_release = undefined(dut)
    await ClockCycles(dut.clk, idle_cycles)
    await ReadOnly()
    at_end = undefined(dut)
    report = []
    for when, names in (("when reset is released", at_release), (f"{idle_cycles} cycles later",
                                                                   at_end)):
        if names:
            report.append(f"{len(names)} undefined {when}: " + "; ".join(names[:20])
                          + (" ..." if len(names) > 20 else ""))
    assert not report, "\n".join(report)
