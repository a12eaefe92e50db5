"""Stream protocol compliance on every ``stream.Signature`` port of the stream components.

For each component (built with its smallest parameters) the harness drives every input
freely and, on every stream port (found from the signature, so ports added later are
covered):

* a stream the component *consumes* is **assumed** to follow the rules: once ``valid`` is
  high while ``ready`` is low, next cycle ``valid`` is still high and ``payload`` unchanged;
* a stream the component *produces* is **asserted** to follow them.

The AXI4 master of the DMA (and the core) and the AXI4-Lite slave of the command queue (and the
core) get the same rules per channel (:func:`axi_rules`), as AMBA AXI requires. Nothing else
is assumed except the run-time settings a component documents as fixed during a
run (listed per component as ``fixed``: e.g. a link's ``latency``, a collective engine's
``rank``). ``ready`` on produced streams, every non-stream input (memory read data, busy
flags, AXI responses...) and all payloads are free in every cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Mux, Signal, Value

from .harness import FormalTop, responses_follow_requests, stream_rule

__all__ = ["ProtocolCase", "PROTOCOL_CASES", "protocol_top", "axi_rules"]


@dataclass
class ProtocolCase:
    """One component's stream-protocol proof: ``build()`` returns the component."""

    name: str
    build: object
    mode: str = "prove"
    depth: int = 2
    fixed: tuple = ()
    fast: bool = True
    engine: str = "boolector"
    note: str = ""
    waive: tuple = ()  # flush / soft-reset signals (see FormalTop)
    env: object = None  # env(m, top): assumptions modelling the component's neighbours


def protocol_top(dut, fixed=(), waive=(), env=None) -> FormalTop:
    """The harness: ``dut`` with free inputs and the stream rules on every stream port."""
    return FormalTop(dut, env, rules=True, fixed=fixed, waive=waive)


class _Channel:
    """An AXI channel seen as a stream: ``valid``, ``ready`` and the payload signals."""

    def __init__(self, bus, prefix: str, fields):
        self.valid = getattr(bus, prefix + "valid")
        self.ready = getattr(bus, prefix + "ready")
        self.payload = Cat(*(getattr(bus, prefix + f) for f in fields))


_AXI_CHANNELS = {  # channel: (payload fields, driven by the master)
    "aw": (("id", "addr", "len", "size", "burst"), True),
    "w": (("data", "strb", "last"), True),
    "b": (("id", "resp"), False),
    "ar": (("id", "addr", "len", "size", "burst"), True),
    "r": (("id", "data", "resp", "last"), False),
}


def axi_rules(m, bus, name: str, *, master: bool) -> None:
    """The AXI4 / AXI4-Lite handshake rules (AMBA AXI A3.2.1: once VALID is high it stays high
    until the handshake, and the payload is stable meanwhile) on every channel of ``bus``:
    asserted on the channels the component drives (``master``: AW, W, AR; else B, R),
    assumed on the others. Fields a channel does not have (AXI4-Lite) are skipped."""
    for ch, (fields, from_master) in _AXI_CHANNELS.items():
        present = tuple(f for f in fields if hasattr(bus, ch + f))
        if not hasattr(bus, ch + "valid"):
            continue
        port = _Channel(bus, ch, present)
        stream_rule(m, port, f"{name}_{ch}", assume=from_master != master)


def _dma_env(m, top):
    axi_rules(m, top.dut.axi, "axi", master=True)


def _cmdqueue_env(m, top):
    axi_rules(m, top.dut.axil, "axil", master=False)


def _core_env(m, top):
    axi_rules(m, top.dut.axi, "axi", master=True)
    axi_rules(m, top.dut.axil, "axil", master=False)


#: The activation feeder's sizes (the SBUF read port's window: 2 words).
_AF = {"n": 2, "words": 4, "banks": 1, "psum_words": 4, "window": 2}


def _activation_feeder_env(m, top):
    """Commands are the engine's (ACTIVATE, TENSOR_TENSOR, TENSOR_SCALAR, TENSOR_REDUCE,
    TRANSPOSE) that passed the sequencer's checks (fields legal, sizes and ranges within the
    memories); the activation engine takes a command's beats only after the command and gives
    one output beat per input beat taken, the tensor engine one drain response per drain
    request. The SBUF port's words stay free in every cycle, as for the tensor feeders: a
    feeder takes a read's words in the cycle they arrive."""
    from amaranth.hdl import Assume
    from amaranth.lib import data

    from golden.isa import AluOp, Rounding
    from hdl.isa import DESCRIPTOR_LAYOUTS, Opcode

    d = top.dut
    payload = top.input("cmd.payload")
    n, words, banks, psum_words = (_AF[k] for k in ("n", "words", "banks", "psum_words"))

    def view(o):
        return data.View(DESCRIPTOR_LAYOUTS[o], payload)

    def src_ok(sbuf, bank, addr, cols):
        return Mux(sbuf, addr + cols <= words, (bank < banks) & (addr + cols <= psum_words))

    def shape_ok(f, out_cols):
        return ((f.rows != 0) & (f.cols != 0) & (f.part + f.rows <= n)
                & (f.dst_addr + out_cols <= words))

    a = view(Opcode.ACTIVATE)
    legal = {Opcode.ACTIVATE: shape_ok(a, a.cols)
             & src_ok(a.src_sbuf, a.src_bank, a.src_addr, a.cols)
             & (~a.bias_en | (a.bias_addr < words))}
    for o in (Opcode.TENSOR_TENSOR, Opcode.TENSOR_SCALAR, Opcode.TENSOR_REDUCE):
        f = view(o)
        reduce = o == Opcode.TENSOR_REDUCE
        alu, mode = (Value.cast(x) for x in (f.alu, f.mode))  # (enum views: their codes)
        ok = shape_ok(f, 1 if reduce else f.cols) & (mode <= max(Rounding))
        ok &= alu <= (AluOp.MIN if reduce else max(AluOp))
        for i in ("in0", "in1") if o == Opcode.TENSOR_TENSOR else ("in0",):
            ok &= src_ok(getattr(f, f"{i}_sbuf"), getattr(f, f"{i}_bank"),
                         getattr(f, f"{i}_addr"), f.cols)
        legal[o] = ok
    t = view(Opcode.TRANSPOSE)
    legal[Opcode.TRANSPOSE] = ((t.rows != 0) & (t.cols != 0) & (t.part + t.rows <= n)
                               & (t.dst_part + t.cols <= n) & (t.src_addr + t.cols <= words)
                               & (t.dst_addr + t.rows <= words))
    op = a.op
    m.d.comb += Assume(~top.input("cmd.valid") | Cat(*[(op == o) & ok for o, ok
                                                        in legal.items()]).any(),
                       "cmd: a legal command of the activation / vector engine")
    # The engine answers each input beat with an output beat, except a reduction: one output
    # beat after its command's last input beat (its other input beats are answered by none).
    from hdl.activation import CommandKind

    reducing = Signal(name="env_reducing")
    count = Signal.like(d.act_cmd.payload.count, name="env_count")
    taken = Signal.like(count, name="env_taken")
    beat_in = d.act_i.valid & d.act_i.ready
    with m.If(d.act_cmd.valid & d.act_cmd.ready):
        m.d.sync += [reducing.eq(d.act_cmd.payload.kind == CommandKind.REDUCE),
                     count.eq(d.act_cmd.payload.count), taken.eq(0)]
    with m.Elif(beat_in):
        m.d.sync += taken.eq(taken + 1)
    # ... and takes a command's beats only after the command (the feeder offers its command
    # from a register and goes on: its first beat may wait for the command to be taken).
    m.d.comb += Assume(~d.act_i.ready | (taken < count), "act: beats of a taken command")
    responses_follow_requests(m, beat_in & (~reducing | (taken + 1 == count)), d.act_o.valid,
                              d.act_o.valid & d.act_o.ready, "act")
    responses_follow_requests(m, d.drain_req.valid & d.drain_req.ready, d.drain_resp.valid,
                              d.drain_resp.valid & d.drain_resp.ready, "drain")


def _sru(stages):
    def build():
        from hdl.sru import StochasticRounder
        return StochasticRounder(lanes=1, stages=stages, random_bits=4)
    return build


def _activation():
    from hdl.activation import ActivationEngine
    return ActivationEngine(lanes=1, random_bits=4)


def _tensor_engine():
    from hdl.tensor_engine import TensorEngine
    return TensorEngine(n=1, psum_banks=1, psum_words=2, formats=("bf16",))


def _dma():
    from hdl.dma import DmaEngine
    return DmaEngine(n=1, words=2, max_burst=2)


def _cmdqueue():
    from hdl.cmdqueue import CommandQueue
    return CommandQueue(depth=2, perf_counters=1)


def _sequencer():
    from hdl.sequencer import Sequencer
    return Sequencer(n=2, sbuf_words=4, psum_banks=1, psum_words=4, dram_bytes=64, ring=True)


def _collective():
    from hdl.collective import CollectiveEngine
    return CollectiveEngine(ranks=2, link_width=1, depth=4, add_stages=1,
                            watchdog_cycles=16)


def _link():
    from hdl.ring import LinkModel
    return LinkModel(link_width=1, max_latency=3)


def _uart_rx():
    from hdl.uart import UartRx
    return UartRx(divisor=4)


def _tensor_feeder(rows: bool):
    from hdl.core import _TensorFeeder
    from hdl.tensor_engine import command_layout
    return _TensorFeeder(n=2, words=4, te_cmd_layout=command_layout(2, 1, 2), rows=rows)


def _activation_feeder():
    from hdl.core import _ActivationFeeder
    from hdl.formats import Dtype
    from hdl.sru import sru_layouts
    _, o_layout = sru_layouts(_AF["n"], tuple(Dtype))
    return _ActivationFeeder(**_AF, o_layout=o_layout)


def _core():
    from hdl.core import NeuronCore
    return NeuronCore(n=1, sbuf_words=2, psum_banks=1, psum_words=2, dram_bytes=64,
                      queue_depth=2, max_burst=2, ranks=2, random_bits=4, watchdog_cycles=16)


#: Every component checked, with its proof mode and depth.
PROTOCOL_CASES = [
    ProtocolCase("sru_stages0", _sru(0)),
    ProtocolCase("sru_stages2", _sru(2)),
    ProtocolCase("activation", _activation),
    ProtocolCase("tensor_engine", _tensor_engine),
    ProtocolCase("dma", _dma, mode="bmc", depth=24, env=_dma_env,
                 note="AXI4 channel rules on axi too (k-induction does not converge)"),
    ProtocolCase("cmdqueue", _cmdqueue, mode="bmc", depth=24, waive=("soft_reset",),
                 env=_cmdqueue_env,
                 note="CTRL.pause included: it once withdrew desc.valid from a stalled "
                      "sequencer (found by this property, fixed in hdl/cmdqueue.py)"),
    ProtocolCase("sequencer", _sequencer),
    ProtocolCase("collective", _collective, fixed=("rank",), waive=("tx_flush",)),
    ProtocolCase("link", _link, fixed=("latency",), waive=("flush",)),
    # UartTx and XorwowSeeder only consume streams (the rules would only be assumed): they
    # have nothing to assert, so they are not listed.
    ProtocolCase("uart_rx", _uart_rx),
    ProtocolCase("core_tensor_feeder", lambda: _tensor_feeder(rows=False)),
    ProtocolCase("core_tensor_feeder_rows", lambda: _tensor_feeder(rows=True)),
    ProtocolCase("core_activation_feeder", _activation_feeder, env=_activation_feeder_env,
                 mode="bmc", depth=20, fast=False),
    ProtocolCase("core", _core, mode="bmc", depth=20, fixed=("rank",), fast=False, env=_core_env,
                 waive=("tx_flush",)),
]
