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
* ``dtype`` / ``fmt`` codes are :class:`Dtype`'s: 0 bf16, 1 fp8-e4m3, 2 fp8-e5m2, 3 fp16,
  4 fp32 (5..7 reserved). ``mode``: :class:`Rounding`. ``func``: :class:`ActivationFunc`.
  ``coll_op``: :class:`CollectiveOp`; a COLLECTIVE's ``dst_addr`` (the destination's first
  word, same partitions) and ``shift`` (a PERMUTE's: to rank + shift) serve ops 3 and 4 only;
  its ``dim`` (:class:`CollectiveDim`, the last field) is the sub-ring of a torus it runs on
  (ROW, 0, on a ring).
* DRAM is byte-addressed, little-endian; an element of dtype d takes ``DTYPE_BYTES[d]``
  bytes.

This module is the one source of every encoding the hardware and the software share: the
opcodes, error codes, dtypes, rounding modes, activation functions, collective ops and
dimensions, and the register block (:data:`REGISTER_MAP`: offsets, access, fields; the
:class:`Ctrl` and :class:`Status` bits; :data:`CORE_ID`). ``hdl/`` takes them from here or
declares Amaranth enums that ``tests/golden/test_isa.py`` checks against them.

numpy only.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

import numpy as np

__all__ = ["DESCRIPTOR_BITS", "DESCRIPTOR_WORDS", "OPCODE_BITS", "Opcode", "ErrorCode",
           "Dtype", "OPERAND_DTYPES", "FORMAT_CODES", "DTYPE_NAMES", "DTYPE_BYTES", "Rounding",
           "ActivationFunc", "AluOp", "Sparsity", "CollectiveOp", "CollectiveDim", "is_code",
           "CORE_ID", "Ctrl", "Status",
           "DebugSpace", "Register", "REGISTER_MAP", "REGISTERS", "DEBUG_ADDR_FIELDS", "FIELDS",
           "FIELD_DEFAULTS", "field_offsets", "encode", "decode"]

DESCRIPTOR_BITS = 256
DESCRIPTOR_WORDS = DESCRIPTOR_BITS // 32
OPCODE_BITS = 4


class Opcode(enum.IntEnum):
    """Command opcodes. 0 and 13..15 are illegal (an all-zero descriptor is an error); 9..12,
    the vector engine's, are illegal on a core built without one
    (``golden.iss.CoreConfig.vector_engine``)."""

    DMA_LOAD = 1  #: DRAM -> SBUF, 2-D strided
    DMA_STORE = 2  #: SBUF -> DRAM, 2-D strided
    LOAD_STATIONARY = 3  #: SBUF -> the tensor engine's stationary tile
    MATMUL = 4  #: SBUF moving tile x stationary -> PSUM (overwrite or accumulate)
    ACTIVATE = 5  #: PSUM or SBUF -> cast(f(x * scale + bias)) -> SBUF
    #: ring all-reduce / reduce-scatter / all-gather of an SBUF region, or all-to-all /
    #: permute of one into another
    COLLECTIVE = 6
    BARRIER = 7  #: wait until every engine is idle (ordering only; no data)
    SET_SEED = 8  #: reseed the activation engine's PRNG lanes
    TENSOR_TENSOR = 9  #: cast(in0 op in1), elementwise, two tiles -> SBUF
    TENSOR_SCALAR = 10  #: cast(in0 op scalar) or cast(scalar op in0) -> SBUF
    TENSOR_REDUCE = 11  #: cast(fold of each partition's row along the free axis) -> SBUF
    TRANSPOSE = 12  #: SBUF tile (K x M) -> SBUF tile (M x K), bits moved


class ErrorCode(enum.IntEnum):
    """The error code register. The queue stops at the first failing command.

    Codes 1..6 come from the checks of a descriptor before it runs (the command changes
    nothing); 7 and 8 from an engine while the command runs (it was executed, and counted)."""

    OK = 0
    BAD_OPCODE = 1  #: opcode 0 or 13..15 (9..12 on a core without the vector engine)
    #: a reserved func, mode or collective op; a PERMUTE whose shift is not in 1..P-1; a
    #: COLLECTIVE without a ring
    BAD_FIELD = 2
    BAD_DTYPE = 3  #: a dtype the engine cannot take
    #: a partition, SBUF word, PSUM bank/word or DRAM byte out of range; an all-to-all or
    #: permute whose destination meets its source
    BAD_RANGE = 4
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
    #: a sparse LOAD_STATIONARY's tile breaks its pattern: a tag past its group's rows (or
    #: past K), or tags not increasing within a group (``golden.sparse.check_tags``). Found by
    #: the tensor engine as the tile loads; the command counts as executed, the stationary
    #: tile is forgotten (a MATMUL needs a new LOAD_STATIONARY), nothing else changes, and no
    #: later command is dispatched.
    BAD_TAGS = 9


class Dtype(enum.IntEnum):
    """Data type codes: a descriptor's ``dtype`` / ``fmt`` field, ``hdl.formats.Dtype`` (and,
    for the operand dtypes, ``hdl.formats.Fmt``'s 2-bit tag). 5..7 are reserved."""

    BF16 = 0  #: bfloat16
    FP8_E4M3 = 1  #: OCP E4M3FN
    FP8_E5M2 = 2  #: OCP E5M2
    FP16 = 3  #: IEEE binary16 (an output of the cast only)
    FP32 = 4  #: IEEE binary32 (an output of the cast only)

    @property
    def golden_name(self) -> str:
        """The format's name in ``golden.formats`` / ``golden.rounding`` (``"fp8_e4m3"``)."""
        return self.name.lower()

    @property
    def nbytes(self) -> int:
        """Bytes of one element in DRAM."""
        return _DTYPE_BYTES[self]


_DTYPE_BYTES = {Dtype.BF16: 2, Dtype.FP8_E4M3: 1, Dtype.FP8_E5M2: 1, Dtype.FP16: 2, Dtype.FP32: 4}

#: The dtypes the tensor engine's multipliers take (LOAD_STATIONARY / MATMUL ``fmt``): the
#: values of ``hdl.formats.Fmt`` (3 is reserved there).
OPERAND_DTYPES = (Dtype.BF16, Dtype.FP8_E4M3, Dtype.FP8_E5M2)
#: Operand format name (as golden/ spells it) -> its code (the 2-bit tag the hardware takes).
FORMAT_CODES = {d.golden_name: int(d) for d in OPERAND_DTYPES}

DTYPE_NAMES = {int(d): d.golden_name for d in Dtype}
DTYPE_BYTES = {int(d): d.nbytes for d in Dtype}


class Rounding(enum.IntEnum):
    """ACTIVATE's ``mode``: the rounding of the fp32 -> dtype cast (``hdl.formats.Rounding``).
    3 is reserved."""

    RNE = 0  #: round to nearest, ties to even
    RTZ = 1  #: round toward zero
    SR = 2  #: stochastic rounding

    @property
    def golden_name(self) -> str:
        """The mode's name in ``golden.rounding`` (``"rne"``)."""
        return self.name.lower()


class ActivationFunc(enum.IntEnum):
    """ACTIVATE's ``func`` (``hdl.activation.ActivationFunc``); 2, 3 reserved."""

    IDENTITY = 0
    RELU = 1  #: y if y > 0 or y is NaN, else +0


class AluOp(enum.IntEnum):
    """The vector engine's ``alu`` (TENSOR_TENSOR, TENSOR_SCALAR, TENSOR_REDUCE;
    ``golden.vector`` is its meaning); 6, 7 reserved. A reduction takes ADD, MAX and MIN."""

    ADD = 0  #: a + b
    SUBTRACT = 1  #: a - b
    MULTIPLY = 2  #: a * b
    MAX = 3  #: IEEE 754-2019 maximum (NaN if either is NaN; -0 < +0)
    MIN = 4  #: IEEE 754-2019 minimum
    GREATER = 5  #: 1.0 where a > b, else +0.0


class Sparsity(enum.IntEnum):
    """LOAD_STATIONARY's ``sparsity`` (``golden.sparse``): dense, or the n:m pattern of a
    compressed tile along K; 5..7 reserved."""

    DENSE = 0
    S2_4 = 1  #: 2 of every 4 rows
    S4_8 = 2  #: 4 of every 8
    S4_12 = 3  #: 4 of every 12
    S4_16 = 4  #: 4 of every 16

    @property
    def pattern(self) -> str | None:
        """The pattern's name in ``golden.sparse.PATTERNS`` (``"4:16"``); None if dense."""
        return None if self == Sparsity.DENSE else self.name[1:].replace("_", ":")


class CollectiveOp(enum.IntEnum):
    """COLLECTIVE's ``coll_op`` (``hdl.collective.CollectiveOp``); 5..7 reserved.

    0..2 work in place on the region ``sbuf_addr ..`` (``dst_addr`` and ``shift`` ignored);
    3 and 4 read it and write the region ``dst_addr ..`` of the same partitions, which must
    not meet it (``golden.collective.out_rows``: its size)."""

    ALL_REDUCE = 0  #: reduce-scatter then all-gather: every rank ends with the sum
    REDUCE_SCATTER = 1  #: rank r ends with the reduced chunk r
    ALL_GATHER = 2  #: rank r contributes chunk r; every rank ends with all chunks
    #: rank j's destination holds chunk j of every rank i, in slot i
    ALL_TO_ALL = 3
    #: rank (r + shift) mod P's destination holds rank r's whole buffer
    PERMUTE = 4


class CollectiveDim(enum.IntEnum):
    """COLLECTIVE's ``dim``: the sub-ring of an R x C torus a collective runs on
    (``golden.collective.torus_groups``; rank r = i·C + j, i the row, j the column).

    ROW on a ring is the ring itself (a ring of P cores is a 1 x P torus); COLUMN needs a
    torus (R >= 2), else the command is BAD_FIELD."""

    ROW = 0  #: the C cores of my row, sub-rank j; links (i, j) -> (i, (j + 1) mod C)
    COLUMN = 1  #: the R cores of my column, sub-rank i; links (i, j) -> ((i + 1) mod R, j)


def is_code(enum_cls, value: int) -> bool:
    """Whether ``value`` is a defined (not reserved) code of ``enum_cls``."""
    return int(value) in enum_cls._value2member_map_


# --- The register block (hdl/cmdqueue.py), as data. -------------------------------------------

#: The ID register's value: "NCL1".
CORE_ID = 0x4E43_4C31


class Ctrl(enum.IntFlag):
    """CTRL's bits (write; a read shows PAUSE only)."""

    SOFT_RESET = 1 << 0  #: a pulse: the core resets its state, the queue empties
    CLEAR_ERROR = 1 << 1  #: a pulse: clears the error code and STATUS.OVERFLOW
    #: a level, set or cleared by every CTRL write: while set, no descriptor leaves the queue
    #: but one already offered to the sequencer (commands already taken run on)
    PAUSE = 1 << 2


class Status(enum.IntFlag):
    """STATUS's flag bits (read); bits 4..7 are the core's flags, bits 8.. the queue level."""

    BUSY = 1 << 0  #: the sequencer is busy or descriptors wait in the queue
    ERROR = 1 << 1  #: the error code is not OK
    FULL = 1 << 2  #: the queue is full (a PUSH now is dropped)
    OVERFLOW = 1 << 3  #: a PUSH was dropped (sticky; cleared by Ctrl.CLEAR_ERROR)
    DEBUG_TIMEOUT = 1 << 4  #: core flag 0: a debug read timed out (cleared by CLEAR_ERROR)


class DebugSpace(enum.IntEnum):
    """DBG_ADDR's ``space``: the memory a debug read reads."""

    SBUF = 0  #: partition ``part``, word ``word``
    PSUM = 1  #: partition ``part``, bank ``bank``, word ``word``


def _flag_fields(flags) -> dict[str, tuple[int, int]]:
    return {m.name.lower(): (int(m).bit_length() - 1, 1) for m in flags}


@dataclass(frozen=True, eq=False)
class Register:
    """One register of the block: byte ``offset``, ``access`` (``"r"``, ``"w"``, ``"rw"``),
    ``fields`` ``{name: (bit offset, width)}``, ``count`` consecutive 32-bit registers
    (``offset + 4 * i``) and what it does."""

    name: str
    offset: int
    access: str
    fields: dict
    count: int = 1
    doc: str = ""

    def get(self, word: int, field: str) -> int:
        """Field ``field`` of a value of this register."""
        offset, width = self.fields[field]
        return (int(word) >> offset) & ((1 << width) - 1)

    def pack(self, **values) -> int:
        """A value of this register from field values (unnamed fields 0)."""
        word = 0
        for name, v in values.items():
            offset, width = self.fields[name]
            if not 0 <= int(v) < 1 << width:
                raise ValueError(f"{self.name}.{name} must fit {width} bits, not {v}")
            word |= int(v) << offset
        return word


#: The register map of a core (byte offsets on its AXI4-Lite port). DESC0..7 stage a
#: descriptor, PUSH queues it. Every access completes with OKAY; unmapped addresses read 0
#: and ignore writes.
REGISTER_MAP: dict[str, Register] = {r.name: r for r in (
    Register("ID", 0x00, "r", {"id": (0, 32)}, doc="reads CORE_ID"),
    Register("CTRL", 0x04, "rw", _flag_fields(Ctrl), doc="Ctrl's bits; reads PAUSE"),
    Register("STATUS", 0x08, "r", {**_flag_fields(m for m in Status
                                                 if m != Status.DEBUG_TIMEOUT),
                                   "flags": (4, 4), "level": (8, 24)},
             doc="Status's bits; ``flags`` the core's status_flags (bit 0 DEBUG_TIMEOUT), "
                 "``level`` the descriptors in the queue"),
    Register("ERROR", 0x0C, "r", {"code": (0, 4), "index": (8, 24)},
             doc="the ErrorCode and the index (commands since the last soft reset) of the "
                 "failing command"),
    Register("EXECUTED", 0x10, "r", {"count": (0, 32)},
             doc="commands executed since the last soft reset"),
    Register("DESC0", 0x20, "rw", {"word": (0, 32)}, count=DESCRIPTOR_WORDS,
             doc="DESC0..7: the staged descriptor's words"),
    Register("PUSH", 0x40, "w", {}, doc="queue the staged descriptor (dropped, with "
                                        "OVERFLOW, if the queue is full)"),
    Register("DBG_ADDR", 0x44, "w", {"word": (0, 16), "part": (16, 8), "bank": (24, 4),
                                     "space": (31, 1)},
             doc="read one SBUF or PSUM word (DebugSpace) into DBG_DATA; the write's response "
                 "waits until the word is there; a word outside the memories reads 0"),
    Register("DBG_DATA", 0x48, "r", {"data": (0, 32)},
             doc="the word the last DBG_ADDR write fetched"),
    Register("PERF0", 0x80, "r", {"count": (0, 32)}, count=16,
             doc="PERF0.. at 0x80, 0x84, ...: performance counters"),
)}
#: ``{name: byte offset}`` of :data:`REGISTER_MAP`.
REGISTERS = {name: r.offset for name, r in REGISTER_MAP.items()}
#: The fields of a DBG_ADDR write: ``{name: (bit offset, width)}``.
DEBUG_ADDR_FIELDS = REGISTER_MAP["DBG_ADDR"].fields

# (name, width) after the opcode, per opcode.
_DMA = [("dtype", 3), ("part", 8), ("rows", 9), ("sbuf_addr", 16), ("cols", 16),
        ("dram_addr", 32), ("dram_stride", 32)]
# A vector operand: an SBUF tile of ``in<i>_dtype`` words or (``in<i>_sbuf`` 0) a PSUM tile
# (fp32) of bank ``in<i>_bank``, from word ``in<i>_addr``; the output: SBUF words
# ``dst_addr ..`` cast to ``dtype`` with ``mode`` and ``saturate``.
_IN0 = [("in0_sbuf", 1), ("in0_bank", 4), ("in0_addr", 16), ("in0_dtype", 3)]
_IN1 = [("in1_sbuf", 1), ("in1_bank", 4), ("in1_addr", 16), ("in1_dtype", 3)]
_VEC_OUT = [("dtype", 3), ("mode", 2), ("saturate", 1), ("dst_addr", 16)]
FIELDS: dict[Opcode, list[tuple[str, int]]] = {
    Opcode.DMA_LOAD: _DMA,
    Opcode.DMA_STORE: _DMA,
    Opcode.LOAD_STATIONARY: [("fmt", 3), ("part", 8), ("k", 9), ("m", 9), ("sbuf_addr", 16),
                             ("sparsity", 3)],
    Opcode.MATMUL: [("fmt", 3), ("part", 8), ("k", 9), ("f", 16), ("sbuf_addr", 16),
                    ("bank", 4), ("psum_addr", 16), ("accumulate", 1)],
    Opcode.ACTIVATE: [("func", 2), ("src_sbuf", 1), ("part", 8), ("rows", 9), ("cols", 16),
                      ("src_bank", 4), ("src_addr", 16), ("bias_en", 1), ("bias_addr", 16),
                      ("scale", 32), ("dtype", 3), ("mode", 2), ("saturate", 1),
                      ("dst_addr", 16)],
    Opcode.COLLECTIVE: [("coll_op", 3), ("part", 8), ("rows", 9), ("sbuf_addr", 16),
                        ("cols", 16), ("dst_addr", 16), ("shift", 6), ("dim", 1)],
    Opcode.BARRIER: [],
    Opcode.SET_SEED: [("seed", 64)],
    Opcode.TENSOR_TENSOR: [("alu", 3), ("part", 8), ("rows", 9), ("cols", 16), *_IN0, *_IN1,
                           *_VEC_OUT],
    Opcode.TENSOR_SCALAR: [("alu", 3), ("reverse", 1), ("part", 8), ("rows", 9), ("cols", 16),
                           *_IN0, ("scalar", 32), *_VEC_OUT],
    Opcode.TENSOR_REDUCE: [("alu", 3), ("part", 8), ("rows", 9), ("cols", 16), *_IN0,
                           *_VEC_OUT],
    Opcode.TRANSPOSE: [("part", 8), ("rows", 9), ("cols", 16), ("src_addr", 16),
                       ("dst_part", 8), ("dst_addr", 16)],
}


#: Fields :func:`encode` fills with a value when they are not given: fields added after their
#: opcode's format was in use, so that older programs encode the same bits (a COLLECTIVE
#: without ``dim`` runs on ROW, the ring itself).
FIELD_DEFAULTS: dict[Opcode, dict[str, int]] = {Opcode.COLLECTIVE: {"dim": 0}}


def field_offsets(op: Opcode) -> dict[str, tuple[int, int]]:
    """``{name: (offset, width)}`` of ``op``'s fields in the descriptor (opcode included)."""
    return {"op": (0, OPCODE_BITS), **{name: (off, width) for name, off, width in _fields(op)}}


@functools.cache
def _fields(op: int) -> tuple[tuple[str, int, int], ...]:
    """``(name, offset, width)`` of ``op``'s fields but the opcode (computed once per opcode:
    the ISS decodes every command it runs)."""
    out, pos = [], OPCODE_BITS
    for name, width in FIELDS[Opcode(op)]:
        out.append((name, pos, width))
        pos += width
    assert pos <= DESCRIPTOR_BITS
    return tuple(out)


def encode(op, **fields) -> np.ndarray:
    """The eight uint32 words of a descriptor. Every field of ``op`` must be given (an
    integer that fits its width) but those of :data:`FIELD_DEFAULTS`, which default to
    their value there; unknown fields raise :class:`ValueError`."""
    op = Opcode(op)
    layout = field_offsets(op)
    fields = {**FIELD_DEFAULTS.get(op, {}), **fields}
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
    value = int.from_bytes(w.astype("<u4").tobytes(), "little")
    code = value & ((1 << OPCODE_BITS) - 1)
    if code not in Opcode._value2member_map_:
        return code, {}
    return code, {name: (value >> off) & ((1 << width) - 1) for name, off, width in _fields(code)}
