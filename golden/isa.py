"""The NeuronCore command format: fixed-size descriptors the host writes into the queue.

A descriptor is :data:`DESCRIPTOR_BITS` = 256 bits, written as eight 32-bit words (word 0
first; bit i of the descriptor is bit i % 32 of word i // 32). Bits 0..3 hold the opcode;
the fields of each opcode follow in the order of :data:`FIELDS`, packed from bit 4 up; the
rest is zero. ``hdl/isa.py`` holds the same format as Amaranth ``data.StructLayout`` s, and a
test checks that every field has the same offset and width in both.

Conventions of the fields (the ISS, :mod:`golden.iss`, is their meaning):

* SBUF is N partitions x D words of 32 bits; an element of any dtype takes one word
  (narrow dtypes zero-extended). ``part`` is a first partition, ``rows`` a partition count,
  ``sbuf_addr`` a first word, ``cols`` a word count. PSUM is N partitions x banks x words
  of fp32.
* ``dtype`` codes are ``hdl.formats.Dtype``'s: 0 bf16, 1 fp8-e4m3, 2 fp8-e5m2, 3 fp16,
  4 fp32 (5..7 reserved). ``mode``: 0 RNE, 1 RTZ, 2 SR. ``func``: 0 identity, 1 relu.
* DRAM is byte-addressed, little-endian; an element of dtype d takes ``DTYPE_BYTES[d]``
  bytes.

numpy only.
"""

from __future__ import annotations

import enum

import numpy as np

__all__ = ["DESCRIPTOR_BITS", "DESCRIPTOR_WORDS", "OPCODE_BITS", "Opcode", "ErrorCode",
           "DTYPE_NAMES", "DTYPE_BYTES", "FIELDS", "field_offsets", "encode", "decode"]

DESCRIPTOR_BITS = 256
DESCRIPTOR_WORDS = DESCRIPTOR_BITS // 32
OPCODE_BITS = 4


class Opcode(enum.IntEnum):
    """Command opcodes. 0 and 9..15 are illegal (an all-zero descriptor is an error)."""

    DMA_LOAD = 1  #: DRAM -> SBUF, 2-D strided
    DMA_STORE = 2  #: SBUF -> DRAM, 2-D strided
    LOAD_STATIONARY = 3  #: SBUF -> the tensor engine's stationary tile
    MATMUL = 4  #: SBUF moving tile x stationary -> PSUM (overwrite or accumulate)
    ACTIVATE = 5  #: PSUM or SBUF -> cast(f(x * scale + bias)) -> SBUF
    COLLECTIVE = 6  #: ring all-reduce / reduce-scatter / all-gather of an SBUF region
    BARRIER = 7  #: wait until every engine is idle (ordering only; no data)
    SET_SEED = 8  #: reseed the activation engine's PRNG lanes


class ErrorCode(enum.IntEnum):
    """The error code register. The queue stops at the first failing command.

    Codes 1..6 come from the checks of a descriptor before it runs (the command changes
    nothing); 7 and 8 from an engine while the command runs (it was executed, and counted)."""

    OK = 0
    BAD_OPCODE = 1  #: opcode 0 or 9..15
    BAD_FIELD = 2  #: a reserved func, mode or collective op; a COLLECTIVE without a ring
    BAD_DTYPE = 3  #: a dtype the engine cannot take
    BAD_RANGE = 4  #: a partition, SBUF word, PSUM bank/word or DRAM byte out of range
    BAD_SHAPE = 5  #: a zero size, K or M above N, or a MATMUL whose K is not its
    #: LOAD_STATIONARY's
    BAD_ALIGN = 6  #: a DRAM address or stride not a multiple of the element size
    #: DRAM answered a DMA_LOAD / DMA_STORE with SLVERR or DECERR (on R or B). Reported when
    #: the response arrives; the index is the DMA command's. The command runs to its end (a
    #: load writes what R returned, error or not); commands dispatched after it meanwhile
    #: still run. The ISS's DRAM never fails: it never reports this code.
    BUS_ERROR = 7
    #: a COLLECTIVE made no progress on its links for the collective engine's
    #: ``watchdog_cycles`` (a core of the ring never joined it): the engine abandoned it;
    #: its buffer's contents are undefined (:class:`golden.iss.RingISS` reports this code for
    #: a COLLECTIVE not every core reaches).
    LINK_TIMEOUT = 8


DTYPE_NAMES = {0: "bf16", 1: "fp8_e4m3", 2: "fp8_e5m2", 3: "fp16", 4: "fp32"}
DTYPE_BYTES = {0: 2, 1: 1, 2: 1, 3: 2, 4: 4}

# (name, width) after the opcode, per opcode.
_DMA = [("dtype", 3), ("part", 8), ("rows", 9), ("sbuf_addr", 16), ("cols", 16),
        ("dram_addr", 32), ("dram_stride", 32)]
FIELDS: dict[Opcode, list[tuple[str, int]]] = {
    Opcode.DMA_LOAD: _DMA,
    Opcode.DMA_STORE: _DMA,
    Opcode.LOAD_STATIONARY: [("fmt", 3), ("part", 8), ("k", 9), ("m", 9), ("sbuf_addr", 16)],
    Opcode.MATMUL: [("fmt", 3), ("part", 8), ("k", 9), ("f", 16), ("sbuf_addr", 16),
                    ("bank", 4), ("psum_addr", 16), ("accumulate", 1)],
    Opcode.ACTIVATE: [("func", 2), ("src_sbuf", 1), ("part", 8), ("rows", 9), ("cols", 16),
                      ("src_bank", 4), ("src_addr", 16), ("bias_en", 1), ("bias_addr", 16),
                      ("scale", 32), ("dtype", 3), ("mode", 2), ("saturate", 1),
                      ("dst_addr", 16)],
    Opcode.COLLECTIVE: [("coll_op", 2), ("part", 8), ("rows", 9), ("sbuf_addr", 16),
                        ("cols", 16)],
    Opcode.BARRIER: [],
    Opcode.SET_SEED: [("seed", 64)],
}


def field_offsets(op: Opcode) -> dict[str, tuple[int, int]]:
    """``{name: (offset, width)}`` of ``op``'s fields in the descriptor (opcode included)."""
    out = {"op": (0, OPCODE_BITS)}
    pos = OPCODE_BITS
    for name, width in FIELDS[Opcode(op)]:
        out[name] = (pos, width)
        pos += width
    assert pos <= DESCRIPTOR_BITS
    return out


def encode(op, **fields) -> np.ndarray:
    """The eight uint32 words of a descriptor. Every field of ``op`` must be given (an
    integer that fits its width); unknown fields raise :class:`ValueError`."""
    op = Opcode(op)
    layout = field_offsets(op)
    missing = set(layout) - {"op"} - set(fields)
    extra = set(fields) - set(layout)
    if missing or extra:
        raise ValueError(f"{op.name}: missing fields {sorted(missing)}, unknown fields "
                         f"{sorted(extra)}")
    value = int(op)
    for name, v in fields.items():
        offset, width = layout[name]
        v = int(v)
        if not 0 <= v < 1 << width:
            raise ValueError(f"{op.name}: field {name} must fit {width} bits, not {v}")
        value |= v << offset
    return np.array([(value >> (32 * i)) & 0xFFFFFFFF for i in range(DESCRIPTOR_WORDS)],
                    dtype=np.uint32)


def decode(words) -> tuple[int, dict[str, int]]:
    """``(opcode, fields)`` of a descriptor; an illegal opcode gives ``(code, {})``."""
    w = np.asarray(words, dtype=np.uint32).reshape(DESCRIPTOR_WORDS)
    value = 0
    for i, word in enumerate(w.tolist()):
        value |= int(word) << (32 * i)
    code = value & ((1 << OPCODE_BITS) - 1)
    try:
        op = Opcode(code)
    except ValueError:
        return code, {}
    return int(op), {name: (value >> off) & ((1 << width) - 1)
                     for name, (off, width) in field_offsets(op).items() if name != "op"}
