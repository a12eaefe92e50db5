"""Simulation harnesses that feed a design ``k`` beats per testbench wake-up.

A cocotb testbench that drives a stream one beat per cycle wakes up in Python every cycle,
and that wake-up (a few microseconds) costs more than a cycle of the model in Verilator. These
tops move the per-cycle work into the simulator: the testbench writes *batches* of up to ``k``
beats into a wide port, and a small player inside the top hands them to the design one per
cycle; outputs come back the same way, ``k`` samples per batch.

* :class:`BeatPlayer` — a batch stream in, a stream of beats out, no bubble between batches;
* :class:`BeatRecorder` — a stream of beats in, batches out;
* :class:`PulseCounter` — counts a pulse per index and says when the counts reach targets, so
  that a testbench waiting for the n-th pulse wakes once, not at every pulse;
* :class:`PlayedStreams` — a design whose chosen input streams are fed by players and whose
  chosen pulses are counted, every other port passed through unchanged
  (``hdl.tensor_engine`` in ``sim/tb/tensor_engine.py``);
* :class:`CycleReplay` — a design with plain ports only, whose inputs are played one set per
  cycle from batches and whose outputs are recorded every such cycle (``hdl.pe.PEColumn`` in
  ``sim/tb/pe_chain.py``).

They exist for simulation only (a testbench on the other side of the wide ports); the designs
inside them are the ones the tests check, unchanged.
"""

import importlib

from amaranth.hdl import Array, Cat, Module, Mux, Shape, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .params import check_int

__all__ = ["batch_layout", "BeatPlayer", "BeatRecorder", "PulseCounter", "PlayedStreams",
           "CycleReplay"]

#: The most beats one batch may carry.
MAX_BATCH = 1024
#: Bits of each count of a :class:`PulseCounter` (and of its ``since``).
COUNT_BITS = 32
#: The most counts one :class:`PulseCounter` keeps.
MAX_INDICES = 256


def _check_batch(k) -> int:
    return check_int("k", k, lo=1, hi=MAX_BATCH)


def batch_layout(shape, k: int) -> data.StructLayout:
    """Up to ``k`` beats of ``shape``: ``count`` (how many are meaningful, beats 0 .. count - 1)
    then ``beats`` (beat i at bits ``bits(count) + i * width`` of the flattened value).

    The batch ports carry it as a plain vector of ``batch_layout(shape, k).size`` bits (see
    :func:`_batch_stream`)."""
    return data.StructLayout({"count": range(_check_batch(k) + 1),
                              "beats": data.ArrayLayout(shape, k)})


def _batch_stream(shape, k: int) -> stream.Signature:
    # A plain vector, not a signal of the layout: Amaranth names a wire for every field of
    # every beat of a layout signal, and Verilator then computes all of them whenever an
    # input may have changed (measured: the 8-PE column fed in batches of 256 beats ran 9x
    # slower so). Views over the vector give the fields without naming them.
    return stream.Signature(batch_layout(shape, k).size)


def _resolve_design(design):
    """``"package.module:Class"`` -> the class (imported by name, at elaboration)."""
    if not isinstance(design, str) or design.count(":") != 1 or not design.split(":")[0]:
        raise ValueError(f"design must look like 'hdl.module:Class', not {design!r}")
    module, attr = design.split(":")
    return getattr(importlib.import_module(module), attr)


def _is_output(member, width: int | None = None) -> bool:
    """Whether ``member`` is a plain output port (of ``width`` bits, if given)."""
    return (member is not None and member.is_port and member.flow == Out
            and (width is None or Shape.cast(member.shape).width == width))


def _input_stream_shape(member):
    """The payload shape of an input stream member (``In(stream.Signature(...))``), else None."""
    if not (member.is_signature and member.flow == In):
        return None
    signature = member.signature.flip()  # an In member's signature is seen flipped
    if not isinstance(signature, stream.Signature):
        return None
    return signature.members["payload"].shape


class BeatPlayer(wiring.Component):
    """Plays batches (``batches``, :func:`batch_layout`) out as a stream of beats (``beats``),
    in order, beat 0 of each batch first.

    The player holds no copy of a batch: it plays the offered batch's beats straight from
    ``batches.payload`` and takes the batch (``batches.ready``) in the cycle its last beat is
    taken (a batch of 0 beats at once). So the testbench, which shows its next batch right
    after that clock edge, leaves no bubble between batches; the first beat of a batch
    reaches the design in the cycle the batch is offered, as from a testbench that drives the
    stream itself; and a testbench learns that every beat is in the design at the clock edge
    that takes its last batch. ``batches.ready`` depends combinationally on ``beats.ready``.
    """

    def __init__(self, shape, k: int):
        self._shape, self._k = shape, _check_batch(k)
        super().__init__({
            "batches": In(_batch_stream(shape, k)),
            "beats": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform):
        m = Module()
        k = self._k
        batches, beats = self.batches, self.beats
        offered = batch_layout(self._shape, k)(batches.payload)
        # Design note. No storage, so nothing of a batch's thousands of bits is copied or
        # recomputed per cycle: a simulator spends per cycle one index and one case statement
        # (an Array, not a shift of the whole batch, which would cost its width every cycle).
        at = Signal(range(max(k, 2)))  # the offered batch's next beat
        places = Array(Value.cast(offered.beats[i]) for i in range(k))
        m.d.comb += [
            beats.valid.eq(batches.valid & (at < offered.count)),
            beats.payload.eq(places[at]),
        ]
        taken = beats.valid & beats.ready
        last = at + 1 >= offered.count
        m.d.comb += batches.ready.eq((taken & last) | (offered.count == 0))
        with m.If(taken):
            m.d.sync += at.eq(Mux(last, 0, at + 1))
        return m


class BeatRecorder(wiring.Component):
    """Collects the beats of a stream (``beats``) into batches (``batches``,
    :func:`batch_layout`); a batch of ``count`` beats holds them in its *last* ``count``
    places (beat i of the batch in place ``k - count + i``).

    A batch goes out when it holds ``k`` beats, or at the end of the first cycle without a
    beat (so the last beats of a burst come out one or two cycles after it). ``beats`` is
    always ready while the batch output is taken as soon as it is offered; otherwise a full
    batch holds the stream back.

    A batch's payload stays on ``batches.payload`` after it is taken, until the next batch
    goes out; ``recorded`` counts the batches put out (wrapping at 2**16) and changes at the
    clock edge that shows each one. So a testbench that keeps ``batches.ready`` high may read
    the payload at any time while ``recorded`` holds: one read per ``k`` cycles sees each
    batch of a steady stream once, without waking up for the handshake.
    """

    def __init__(self, shape, k: int):
        self._shape, self._k = shape, _check_batch(k)
        super().__init__({
            "beats": In(stream.Signature(shape)),
            "batches": Out(_batch_stream(shape, k)),
            "recorded": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        k = self._k
        beats, batches = self.beats, self.batches
        # Beats shift in from the top: one wide register, so a simulator updates one signal
        # per cycle (k registers written by index would cost k processes per cycle); a batch
        # of c beats leaves them in its last c places.
        width = Shape.cast(self._shape).width
        acc, acc_n = Signal(width * k), Signal(range(k + 1))
        out = batch_layout(self._shape, k)(batches.payload)
        out_free = ~batches.valid | batches.ready
        taken = beats.valid & beats.ready
        flush = out_free & ((acc_n == k) | ((acc_n != 0) & ~taken))
        m.d.comb += beats.ready.eq((acc_n != k) | out_free)
        with m.If(batches.valid & batches.ready):
            m.d.sync += batches.valid.eq(0)
        with m.If(flush):
            m.d.sync += [out.beats.eq(acc), out.count.eq(acc_n),
                         batches.valid.eq(1), self.recorded.eq(self.recorded + 1)]
        with m.If(taken):
            shifted = Cat(acc[width:], beats.payload)
            m.d.sync += [acc.eq(shifted), acc_n.eq(Mux(flush, 1, acc_n + 1))]
        with m.Elif(flush):
            m.d.sync += acc_n.eq(0)
        return m


class PulseCounter(wiring.Component):
    """Counts the cycles in which ``pulse`` is high, one count per value of ``index``, and says
    when every count has reached its target.

    Ports (count i in bits ``32 i`` .. ``32 i + 31`` of ``counts`` and ``target``):

    * ``pulse``, ``index``: a pulse of the count ``index`` in each cycle ``pulse`` is high;
    * ``counts``: the pulses of each index before this cycle (wrapping at 2**32; 0 after
      reset, so a target set before a reset is reached only after as many new pulses);
    * ``target``: a count per index, set by the testbench;
    * ``reached``: every count, this cycle's pulse included, is at least its target, modulo
      2**32 (a count between the target and 2**31 - 1 past it counts as reached). It is
      combinational: it rises in the cycle of the pulse that reaches the last target, the cycle
      in which a testbench that watched every pulse would have seen it;
    * ``since``: the cycles since the last pulse, 0 in its cycle, 1 in the next (all ones
      until the first pulse after reset, and after 2**32 - 1 cycles without one).

    Parameters
    ----------
    indices : int
        How many counts, 1 .. 256; ``index`` takes values below it.

    Raises
    ------
    TypeError
        If ``indices`` is not an integer.
    ValueError
        If ``indices`` is out of range.
    """

    def __init__(self, *, indices: int = 1):
        self.indices = check_int("indices", indices, lo=1, hi=MAX_INDICES)
        super().__init__({
            "pulse": In(1),
            "index": In(range(max(self.indices, 2))),
            "target": In(data.ArrayLayout(COUNT_BITS, self.indices)),
            "counts": Out(data.ArrayLayout(COUNT_BITS, self.indices)),
            "reached": Out(1),
            "since": Out(COUNT_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        top = 1 << COUNT_BITS
        held = Signal(COUNT_BITS, init=top - 1)  # since, from the next cycle on
        m.d.comb += self.since.eq(Mux(self.pulse, 0, held))
        m.d.sync += held.eq(Mux(self.pulse, 1, Mux(held == top - 1, held, held + 1)))
        reached = []
        for i in range(self.indices):
            count = self.counts[i]
            hit = self.pulse & (self.index == i)
            now = (count + hit)[:COUNT_BITS]
            with m.If(hit):
                m.d.sync += count.eq(now)
            past = (now - self.target[i])[:COUNT_BITS]
            reached.append(~past[-1])
        m.d.comb += self.reached.eq(Cat(*reached).all())
        return m


class PlayedStreams(wiring.Component):
    """``design(**params)`` with each input stream named in ``played`` fed by a
    :class:`BeatPlayer` of ``k`` beats, and each pulse named in ``counted`` counted by a
    :class:`PulseCounter`.

    Ports: for each played stream ``s``, ``s_batch`` (the player's batch stream); for each
    counted pulse ``p``, ``p_counts``, ``p_target``, ``p_reached`` and ``p_since`` (the
    counter's ports); every port of the design but the played streams, as it is.

    Parameters
    ----------
    design : str
        ``"package.module:Class"``, a component (``"hdl.tensor_engine:TensorEngine"``).
    params : dict
        Its keyword arguments.
    played : list of str
        Input streams of the design to feed from batches.
    k : int
        Beats per batch, 1 .. 1024.
    counted : dict
        ``{pulse: index}``: 1-bit outputs of the design whose pulses are counted, each per
        value of the output ``index`` (one count per value its width can hold), or once in all
        (``index`` None).

    Raises
    ------
    TypeError
        If ``k`` is not an integer, or ``counted`` not a dict.
    ValueError
        If ``design`` is not ``"package.module:Class"``, ``k`` is out of range, a name in
        ``played`` is not an input stream of the design, or one in ``counted`` is not a 1-bit
        output (its index: an output of at most 8 bits, for :data:`MAX_INDICES` counts) or
        would give a port a name the design's ports have already.
    """

    def __init__(self, *, design: str, params: dict, played: list, k: int = 16,
                 counted: dict | None = None):
        self.k = _check_batch(k)
        self.design = _resolve_design(design)(**params)
        members = dict(self.design.signature.members.items())
        self.played = list(played)
        if counted is not None and not isinstance(counted, dict):
            raise TypeError(f"counted must be a dict of pulse -> index, not {counted!r}")
        self.counted = {}  # pulse -> (index or None, indices)
        max_width = (MAX_INDICES - 1).bit_length()
        for pulse, index in (counted or {}).items():
            if not _is_output(members.get(pulse), width=1):
                raise ValueError(f"counted must name 1-bit outputs of {design}, not {pulse!r}")
            if index is not None and not _is_output(members.get(index)):
                raise ValueError(f"counted must index {pulse!r} by an output of {design}, not "
                                 f"{index!r}")
            width = 0 if index is None else Shape.cast(members[index].shape).width
            if width > max_width:
                raise ValueError(f"counted must index {pulse!r} by at most {max_width} bits, "
                                 f"not {index!r} of {width}")
            self.counted[pulse] = (index, 1 << width)
        ports = {}
        for name, member in members.items():
            if name in self.played:
                shape = _input_stream_shape(member)
                if shape is None:
                    raise ValueError(f"played must name input streams of {design}, not "
                                     f"{name!r}")
                ports[f"{name}_batch"] = In(_batch_stream(shape, k))
            else:
                ports[name] = member
        unknown = set(self.played) - set(members)
        if unknown:
            raise ValueError(f"played must name input streams of {design}, not "
                             f"{sorted(unknown)!r}")
        self._counters = {pulse: PulseCounter(indices=indices)
                          for pulse, (_, indices) in self.counted.items()}
        for pulse, counter in self._counters.items():
            for port in ("counts", "target", "reached", "since"):
                if f"{pulse}_{port}" in ports:
                    raise ValueError(f"counted must not name {pulse!r}: {design} has a port "
                                     f"{pulse}_{port} already")
                ports[f"{pulse}_{port}"] = counter.signature.members[port]
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        m.submodules.design = design = self.design
        for name, member in design.signature.members.items():
            inner = getattr(design, name)
            if name in self.played:
                shape = _input_stream_shape(member)
                m.submodules[f"{name}_player"] = player = BeatPlayer(shape, self.k)
                wiring.connect(m, wiring.flipped(getattr(self, f"{name}_batch")),
                               player.batches)
                wiring.connect(m, player.beats, inner)
                continue
            outer = getattr(self, name)
            if member.is_signature:
                wiring.connect(m, wiring.flipped(outer), inner)
            elif member.flow == In:
                m.d.comb += inner.eq(outer)
            else:
                m.d.comb += outer.eq(inner)
        for pulse, counter in self._counters.items():
            index = self.counted[pulse][0]
            m.submodules[f"{pulse}_counter"] = counter
            m.d.comb += [counter.pulse.eq(getattr(design, pulse)),
                         counter.target.eq(getattr(self, f"{pulse}_target"))]
            if index is not None:
                m.d.comb += counter.index.eq(getattr(design, index))
            for port in ("counts", "reached", "since"):
                m.d.comb += getattr(self, f"{pulse}_{port}").eq(getattr(counter, port))
        return m


class CycleReplay(wiring.Component):
    """``design(**params)`` (plain ports only) driven one set of inputs per cycle from batches,
    its outputs recorded once per such cycle.

    ``inputs``: batches of input beats (:attr:`input_layout`: every input port of the design,
    by name); each beat is one cycle's inputs. In a cycle without a beat every input is 0.
    ``outputs``: batches of output samples (:attr:`output_layout`: every output port): one
    sample per input beat, taken after the clock edge that the beat's cycle ends with (as a
    testbench that sets the inputs, waits for that edge and reads the outputs sees them).
    ``overrun``: set for good if a sample was lost because the previous batch was not taken
    (a testbench takes ``outputs`` whenever offered, and it never is). ``recorded``: the
    recorder's count of output batches (:class:`BeatRecorder`), by which a testbench that
    reads ``outputs.payload`` once every ``k`` cycles knows a new batch
    (``sim.tb.batches.replay``).

    Parameters
    ----------
    design : str
        ``"package.module:Class"``, a component with plain ports only
        (``"hdl.pe:PEColumn"``).
    params : dict
        Its keyword arguments.
    k : int
        Beats per batch, 1 .. 1024.

    Raises
    ------
    TypeError
        If ``k`` is not an integer.
    ValueError
        If ``design`` is not ``"package.module:Class"``, ``k`` is out of range, or the design has a
        port that is an interface.
    """

    def __init__(self, *, design: str, params: dict, k: int = 32):
        self.k = _check_batch(k)
        self.design = _resolve_design(design)(**params)
        ins, outs = {}, {}
        for name, member in self.design.signature.members.items():
            if not member.is_port:
                raise ValueError(f"design must have plain ports only, not the interface "
                                 f"{name!r} of {design}")
            (ins if member.flow == In else outs)[name] = member.shape
        self.input_layout = data.StructLayout(ins)
        self.output_layout = data.StructLayout(outs)
        super().__init__({
            "inputs": In(_batch_stream(self.input_layout, k)),
            "outputs": Out(_batch_stream(self.output_layout, k)),
            "overrun": Out(1),
            "recorded": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.design = design = self.design
        m.submodules.player = player = BeatPlayer(self.input_layout, self.k)
        m.submodules.recorder = recorder = BeatRecorder(self.output_layout, self.k)
        wiring.connect(m, wiring.flipped(self.inputs), player.batches)
        wiring.connect(m, recorder.batches, wiring.flipped(self.outputs))
        m.d.comb += player.beats.ready.eq(1)
        for name in self.input_layout.members:
            value = getattr(player.beats.payload, name)
            m.d.comb += getattr(design, name).eq(Mux(player.beats.valid, value, 0))
        played = Signal()  # a beat was played in the cycle that the last edge ended
        m.d.sync += played.eq(player.beats.valid)
        m.d.comb += [recorder.beats.valid.eq(played), self.recorded.eq(recorder.recorded)]
        for name in self.output_layout.members:
            m.d.comb += getattr(recorder.beats.payload, name).eq(getattr(design, name))
        with m.If(played & ~recorder.beats.ready):
            m.d.sync += self.overrun.eq(1)
        return m
