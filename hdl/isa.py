"""The NeuronCore command format as Amaranth layouts (mirrored by ``golden.isa``).

A descriptor is 256 bits: a 4-bit :class:`Opcode` at bit 0, then the opcode's fields packed
upwards (:data:`DESCRIPTOR_LAYOUTS`), the rest zero. ``golden/isa.py`` documents the fields'
meaning and ``golden/iss.py`` executes them; ``tests/test_isa.py`` checks that every field
has the same offset and width here and there.
"""

from amaranth.lib import data, enum

from .activation import ActivationFunc
from .collective import CollectiveOp
from .formats import Dtype, Rounding

__all__ = ["DESCRIPTOR_BITS", "Opcode", "ErrorCode", "DESCRIPTOR_LAYOUTS", "descriptor_layout"]

DESCRIPTOR_BITS = 256


class Opcode(enum.Enum, shape=4):
    DMA_LOAD = 1
    DMA_STORE = 2
    LOAD_STATIONARY = 3
    MATMUL = 4
    ACTIVATE = 5
    COLLECTIVE = 6
    BARRIER = 7
    SET_SEED = 8
    # 0 and 9..15 are illegal: the sequencer reports ErrorCode.BAD_OPCODE.


class ErrorCode(enum.Enum, shape=4):
    OK = 0
    BAD_OPCODE = 1
    BAD_FIELD = 2
    BAD_DTYPE = 3
    BAD_RANGE = 4
    BAD_SHAPE = 5
    BAD_ALIGN = 6
    BUS_ERROR = 7  # DRAM answered SLVERR / DECERR to a DMA_LOAD or DMA_STORE
    LINK_TIMEOUT = 8  # a COLLECTIVE's links made no progress for the watchdog's cycles


def _layout(fields: dict) -> data.StructLayout:
    head = data.StructLayout({"op": Opcode, **fields})
    return data.StructLayout({"op": Opcode, **fields, "_pad": DESCRIPTOR_BITS - head.size})


_DMA = {"dtype": Dtype, "part": 8, "rows": 9, "sbuf_addr": 16, "cols": 16, "dram_addr": 32,
        "dram_stride": 32}

#: The layout of each opcode's descriptor.
DESCRIPTOR_LAYOUTS = {
    Opcode.DMA_LOAD: _layout(_DMA),
    Opcode.DMA_STORE: _layout(_DMA),
    Opcode.LOAD_STATIONARY: _layout({"fmt": Dtype, "part": 8, "k": 9, "m": 9, "sbuf_addr": 16}),
    Opcode.MATMUL: _layout({"fmt": Dtype, "part": 8,
                            "k": 9, "f": 16, "sbuf_addr": 16, "bank": 4, "psum_addr": 16,
                            "accumulate": 1}),
    Opcode.ACTIVATE: _layout({"func": ActivationFunc, "src_sbuf": 1, "part": 8, "rows": 9,
                              "cols": 16, "src_bank": 4, "src_addr": 16, "bias_en": 1,
                              "bias_addr": 16, "scale": 32, "dtype": Dtype, "mode": Rounding,
                              "saturate": 1, "dst_addr": 16}),
    Opcode.COLLECTIVE: _layout({"coll_op": CollectiveOp, "part": 8, "rows": 9,
                                "sbuf_addr": 16, "cols": 16}),
    Opcode.BARRIER: _layout({}),
    Opcode.SET_SEED: _layout({"seed": 64}),
}


def descriptor_layout(op: Opcode) -> data.StructLayout:
    return DESCRIPTOR_LAYOUTS[Opcode(op)]
