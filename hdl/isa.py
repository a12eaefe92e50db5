"""The NeuronCore command format as Amaranth layouts (the encodings are ``golden.isa``'s).

A descriptor is 256 bits: a 4-bit :class:`Opcode` at bit 0, then the opcode's fields packed
upwards (:data:`DESCRIPTOR_LAYOUTS`), the rest zero. ``golden/isa.py`` documents the fields'
meaning and ``golden/iss.py`` executes them; :class:`Opcode` and :class:`ErrorCode` are its
enums as Amaranth enums, and ``tests/golden/test_isa.py`` checks that every field has the same
offset
and width here and there, and that the enums of the fields (``hdl.formats``, ``hdl.activation``,
``hdl.collective``) have ``golden.isa``'s codes.
"""

import types

from amaranth.lib import data, enum

from golden import isa as _golden

from .activation import ActivationFunc, AluOp
from .collective import CollectiveDim, CollectiveOp
from .formats import Dtype, Rounding

__all__ = ["DESCRIPTOR_BITS", "Opcode", "ErrorCode", "Sparsity", "AluOp", "DESCRIPTOR_LAYOUTS",
           "descriptor_layout"]

DESCRIPTOR_BITS = _golden.DESCRIPTOR_BITS


def _amaranth_enum(golden_enum, width: int) -> type:
    """``golden_enum`` (an ``enum.IntEnum`` of ``golden.isa``) as an Amaranth enum of
    ``width`` bits: the same names and values, one source."""
    def body(ns):
        ns["__module__"], ns["__qualname__"] = __name__, golden_enum.__name__
        ns["__doc__"] = golden_enum.__doc__
        for member in golden_enum:
            ns[member.name] = member.value
    return types.new_class(golden_enum.__name__, (enum.Enum,), {"shape": width}, body)


#: ``golden.isa.Opcode`` (0 and 13..15 are illegal: the sequencer reports BAD_OPCODE; so are
#: the vector engine's 9..12 until the core has one).
Opcode = _amaranth_enum(_golden.Opcode, _golden.OPCODE_BITS)

#: ``golden.isa.ErrorCode``: the 4-bit code of the ERROR register.
ErrorCode = _amaranth_enum(_golden.ErrorCode,
                           _golden.REGISTER_MAP["ERROR"].fields["code"][1])


#: ``golden.isa.Sparsity``: LOAD_STATIONARY's 3-bit ``sparsity`` (5..7 reserved).
Sparsity = _amaranth_enum(_golden.Sparsity, 3)


def _layout(fields: dict) -> data.StructLayout:
    head = data.StructLayout({"op": Opcode, **fields})
    return data.StructLayout({"op": Opcode, **fields, "_pad": DESCRIPTOR_BITS - head.size})


_DMA = {"dtype": Dtype, "part": 8, "rows": 9, "sbuf_addr": 16, "cols": 16, "dram_addr": 32,
        "dram_stride": 32}

# A vector operand and a vector result (golden.isa's _IN0, _IN1, _VEC_OUT).
_IN0 = {"in0_sbuf": 1, "in0_bank": 4, "in0_addr": 16, "in0_dtype": Dtype}
_IN1 = {"in1_sbuf": 1, "in1_bank": 4, "in1_addr": 16, "in1_dtype": Dtype}
_VEC_OUT = {"dtype": Dtype, "mode": Rounding, "saturate": 1, "dst_addr": 16}

#: The layout of each opcode's descriptor.
DESCRIPTOR_LAYOUTS = {
    Opcode.DMA_LOAD: _layout(_DMA),
    Opcode.DMA_STORE: _layout(_DMA),
    Opcode.LOAD_STATIONARY: _layout({"fmt": Dtype, "part": 8, "k": 9, "m": 9, "sbuf_addr": 16,
                                     "sparsity": Sparsity}),
    Opcode.MATMUL: _layout({"fmt": Dtype, "part": 8,
                            "k": 9, "f": 16, "sbuf_addr": 16, "bank": 4, "psum_addr": 16,
                            "accumulate": 1}),
    Opcode.ACTIVATE: _layout({"func": ActivationFunc, "src_sbuf": 1, "part": 8, "rows": 9,
                              "cols": 16, "src_bank": 4, "src_addr": 16, "bias_en": 1,
                              "bias_addr": 16, "scale": 32, "dtype": Dtype, "mode": Rounding,
                              "saturate": 1, "dst_addr": 16}),
    Opcode.COLLECTIVE: _layout({"coll_op": CollectiveOp, "part": 8, "rows": 9,
                                "sbuf_addr": 16, "cols": 16, "dst_addr": 16, "shift": 6,
                                "dim": CollectiveDim}),
    Opcode.BARRIER: _layout({}),
    Opcode.SET_SEED: _layout({"seed": 64}),
    Opcode.TENSOR_TENSOR: _layout({"alu": AluOp, "part": 8, "rows": 9, "cols": 16, **_IN0,
                                   **_IN1, **_VEC_OUT}),
    Opcode.TENSOR_SCALAR: _layout({"alu": AluOp, "reverse": 1, "part": 8, "rows": 9,
                                   "cols": 16, **_IN0, "scalar": 32, **_VEC_OUT}),
    Opcode.TENSOR_REDUCE: _layout({"alu": AluOp, "part": 8, "rows": 9, "cols": 16, **_IN0,
                                   **_VEC_OUT}),
    Opcode.TRANSPOSE: _layout({"part": 8, "rows": 9, "cols": 16, "src_addr": 16,
                               "dst_part": 8, "dst_addr": 16}),
}


def descriptor_layout(op: Opcode) -> data.StructLayout:
    return DESCRIPTOR_LAYOUTS[Opcode(op)]
