"""Testbench side of ``hdl.sim_batch``: beats written ``k`` at a time, no Python per cycle.

* :class:`BatchSource` drives a played stream of a :class:`~hdl.sim_batch.PlayedStreams` top
  (port ``<name>_batch``) with the API of
  :class:`sim.tb.streams.StreamSource` (``send``, ``wait``, ``pending``, ``idle``, ``clear``):
  a testbench swaps one for the other, and at full rate (no pause generator) the design sees
  the same beats in the same cycles.
* :func:`replay` plays a list of per-cycle inputs through a :class:`~hdl.sim_batch.CycleReplay`
  top and returns the outputs sampled after each of those cycles.

Both pack beats into the flattened :func:`hdl.sim_batch.batch_layout`: ``count`` in the low
bits, then beat i at bit ``bits(count) + i * width``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from cocotb.triggers import FallingEdge, Timer

from sim.tb.streams import StreamSource
from sim.tb.tbutil import CLOCK_PERIOD_NS

__all__ = ["BatchSource", "pack_batches", "bits_of", "layout_bits", "field_values",
           "batches_from_bits", "bits_from_batch", "replay"]


def _count_bits(k: int) -> int:
    return k.bit_length()  # bits of range(k + 1)


def _beat_width(handle, k: int) -> int:
    width = len(handle) - _count_bits(k)
    if width <= 0 or width % k:
        raise ValueError(f"{handle._name}: {len(handle)} bits is not a batch of {k} beats")
    return width // k


def pack_batches(beats: list[int], k: int, width: int) -> list[int]:
    """The flattened batches that carry ``beats`` (integers of ``width`` bits), in order."""
    cb = _count_bits(k)
    out = []
    for i in range(0, len(beats), k):
        chunk = beats[i:i + k]
        word = 0
        for beat in reversed(chunk):
            word = (word << width) | beat
        out.append(len(chunk) | word << cb)
    return out


def bits_of(values, width: int) -> np.ndarray:
    """The ``width`` low bits, least significant first, of each of ``n`` values: an
    ``(n, width)`` array of 0/1 (uint8). ``values``: a 1-D array of integers below 2**64, or a
    2-D array of ``n`` rows of unsigned lanes (lane 0 in the lowest bits)."""
    a = np.asarray(values)
    if a.ndim == 1:
        a = a.astype("<u8")[:, None]
    elif a.dtype.kind != "u":
        raise ValueError(f"lanes must be unsigned, not {a.dtype}")
    a = np.ascontiguousarray(a.astype(a.dtype.newbyteorder("<")))
    bits = np.unpackbits(a.view(np.uint8).reshape(len(a), -1), axis=1, bitorder="little")
    if bits.shape[1] < width:
        bits = np.pad(bits, ((0, 0), (0, width - bits.shape[1])))
    return bits[:, :width]


def layout_bits(layout, n: int, **fields) -> np.ndarray:
    """``n`` beats of a ``data.StructLayout`` as an ``(n, layout.size)`` bit array: each field
    named in ``fields`` given as one integer for every beat or as per-beat values (see
    :func:`bits_of`); the other fields 0."""
    out = np.zeros((n, layout.size), dtype=np.uint8)
    for name, value in fields.items():
        f = layout[name]
        if np.ndim(value) == 0:
            value = np.full(n, value, dtype=np.uint64)
        out[:, f.offset:f.offset + f.width] = bits_of(value, f.width)
    return out


def field_values(bits: np.ndarray, layout, name: str) -> np.ndarray:
    """The field ``name`` (at most 64 bits) of each row of a bit array of ``layout``."""
    f = layout[name]
    if f.width > 64:
        raise ValueError(f"{name}: {f.width} bits do not fit in 64")
    cols = np.zeros((len(bits), 64), dtype=np.uint8)
    cols[:, :f.width] = bits[:, f.offset:f.offset + f.width]
    return np.packbits(cols, axis=1, bitorder="little").view("<u8")[:, 0]


def _bits_to_int(bits: np.ndarray) -> int:
    return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")


def batches_from_bits(bits: np.ndarray, k: int) -> list[int]:
    """The flattened batches (as :func:`pack_batches`) of the beats in the rows of the bit
    array ``bits`` (``(n, width)``, :func:`layout_bits`)."""
    n = len(bits)
    count = bits_of(np.array([k]), _count_bits(k))[0]
    full = n // k
    rows = np.concatenate([np.broadcast_to(count, (full, len(count))),
                           bits[:full * k].reshape(full, k * bits.shape[1])], axis=1)
    packed = np.packbits(rows, axis=1, bitorder="little")
    out = [int.from_bytes(row.tobytes(), "little") for row in packed]
    if n % k:
        tail = bits[full * k:]
        out.append(len(tail) | _bits_to_int(tail.reshape(-1)) << _count_bits(k))
    return out


def bits_from_batch(value: int, k: int, width: int) -> np.ndarray:
    """The beats of one flattened batch from a ``BeatRecorder`` (its last ``count``
    places) as a ``(count, width)`` bit array."""
    cb = _count_bits(k)
    count = value & ((1 << cb) - 1)
    size = cb + k * width
    raw = np.frombuffer(value.to_bytes((size + 7) // 8, "little"), dtype=np.uint8)
    bits = np.unpackbits(raw, bitorder="little")[cb + width * (k - count):size]
    return bits.reshape(count, width)


class BatchSource:
    """Feeds the played input stream ``name`` of a ``PlayedStreams`` top, ``k`` beats per
    batch, through its port ``<name>_batch`` (or the batch port ``port``: a player's own,
    ``batches``). Full rate only: the beats go out back to back as far as the design takes
    them."""

    def __init__(self, dut, name: str, *, k: int, port: str | None = None):
        self.name, self.k = name, k
        self._batches = StreamSource(dut, port or f"{name}_batch")
        self._width = _beat_width(self._batches.payload, k)

    def send(self, payloads: int | Iterable[int]) -> None:
        """Queue one payload or several; they go out in order."""
        beats = ([int(payloads)] if isinstance(payloads, int | np.integer)
                 else [int(p) for p in payloads])
        self._batches.send(pack_batches(beats, self.k, self._width))

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing shown."""
        return self._batches.idle

    @property
    def pending(self) -> int:
        """Batches not yet taken whole by the player."""
        return self._batches.pending

    async def wait(self) -> None:
        """Until every queued beat has been taken by the design: returns at the clock edge
        that takes the last one, as :meth:`StreamSource.wait` does (the player takes a batch
        with its last beat)."""
        await self._batches.wait()

    def clear(self) -> None:
        self._batches.clear()


async def replay(dut, inputs: np.ndarray, *, k: int,
                 period_ns: int = CLOCK_PERIOD_NS) -> np.ndarray:
    """Play ``inputs`` (an ``(n, width)`` bit array of input beats, :func:`layout_bits` of
    the top's ``input_layout``; one beat per cycle, back to back) through a ``CycleReplay``
    top; return the output sample of each of those cycles as an ``(n, out_width)`` bit array
    (:func:`field_values` takes a port out of it). Starts at the next falling edge of
    ``clk`` (call it after reset, outside the ReadOnly phase); returns once every sample is
    in, ``inputs.valid`` low, so that replays may follow one another (the design keeps its
    state between them, and sees inputs of 0 in the cycles between them).

    No handshake wakes the testbench: the top takes a whole batch in ``k`` cycles (its
    player never stalls), so this writes batch i + 1 half a cycle after the clock edge that
    takes batch i's last beat, one timer per batch; at each wake it reads the recorder's
    last batch if its count ``recorded`` moved on (``outputs.ready`` is kept high, and a
    batch's payload stays until the next: ``hdl.sim_batch.BeatRecorder``), and fails if
    it moved on by more than one (a batch unread). After the last input batch it reads every
    cycle until the samples are in. ``period_ns``: the clock's period (``tbutil.start_clock``'s
    default): the timers count cycles by it."""
    width = _beat_width(dut.inputs__payload, k)
    if inputs.shape[1] != width:
        raise ValueError(f"inputs have {inputs.shape[1]} bits a beat, the top {width}")
    out_width = _beat_width(dut.outputs__payload, k)
    count_mask = (1 << _count_bits(k)) - 1
    valid, payload = dut.inputs__valid, dut.inputs__payload
    out_payload, recorded = dut.outputs__payload, dut.recorded
    samples: list[np.ndarray] = []
    got, seen = 0, None

    def read() -> None:
        nonlocal got, seen
        now = int(recorded.value)
        new = (now - seen) % (1 << len(recorded))
        if new > 1:
            raise AssertionError(f"replay: {new} output batches were recorded between two "
                                 f"reads, {new - 1} unread")
        if new:
            samples.append(bits_from_batch(int(out_payload.value), k, out_width))
            got += len(samples[-1])
        seen = now

    await FallingEdge(dut.clk)  # mid-cycle: what is written now is there at the next edge
    dut.outputs__ready.value = 1
    seen = int(recorded.value)
    for batch in batches_from_bits(inputs, k):
        payload.value = batch
        valid.value = 1
        await Timer((batch & count_mask) * period_ns, "ns")  # its beats are played
        read()
    valid.value = 0
    for _ in range(4 * k + 16):  # the last samples: at most 2 cycles after the last batch
        if got >= len(inputs):
            break
        await Timer(period_ns, "ns")
        read()
    if got < len(inputs):
        raise AssertionError(f"replay: {got} of {len(inputs)} samples recorded")
    if int(dut.overrun.value):
        raise AssertionError("CycleReplay lost output samples (overrun)")
    return np.concatenate(samples)[:len(inputs)]
