"""The command format: hdl/isa.py's Amaranth layouts and golden/isa.py's field tables agree
field by field (offset and width), and encode/decode round-trip."""

import numpy as np
import pytest

from golden import isa as g
from hdl import isa as h


def test_opcodes_and_error_codes_agree():
    assert {m.name: m.value for m in h.Opcode} == {m.name: m.value for m in g.Opcode}
    assert {m.name: m.value for m in h.ErrorCode} == {m.name: m.value for m in g.ErrorCode}
    assert h.DESCRIPTOR_BITS == g.DESCRIPTOR_BITS == 32 * g.DESCRIPTOR_WORDS


def test_error_codes_of_running_commands():
    """The codes an engine reports while its command runs follow the check codes, and every
    code fits the ERROR register's 4 bits."""
    assert [c.name for c in g.ErrorCode][-2:] == ["BUS_ERROR", "LINK_TIMEOUT"]
    assert (g.ErrorCode.BUS_ERROR, g.ErrorCode.LINK_TIMEOUT) == (7, 8)
    assert max(g.ErrorCode) < 1 << h.ErrorCode.as_shape().width


@pytest.mark.parametrize("op", list(g.Opcode), ids=lambda o: o.name)
def test_fields_agree(op):
    layout = h.descriptor_layout(h.Opcode[op.name])
    assert layout.size == g.DESCRIPTOR_BITS
    want = g.field_offsets(op)
    got = {name: (f.offset, f.width) for name, f in layout if name != "_pad"}
    assert got == want


def test_enum_fields_use_the_engines_codes():
    from golden.activation import ActivationFunc
    from golden.collectives import CollectiveOp
    from hdl.formats import Dtype, Rounding

    assert {d.value: d.golden_name for d in Dtype} == g.DTYPE_NAMES
    assert [m.golden_name for m in Rounding] == ["rne", "rtz", "sr"]
    assert [f.value for f in ActivationFunc] == [0, 1]
    assert [c.value for c in CollectiveOp] == [0, 1, 2]


@pytest.mark.parametrize("op", list(g.Opcode), ids=lambda o: o.name)
def test_encode_decode_round_trip(op, seed):
    rng = np.random.default_rng([seed, int(op)])
    fields = {name: int(rng.integers(0, 1 << min(width, 62))) for name, width in g.FIELDS[op]}
    words = g.encode(op, **fields)
    assert words.dtype == np.uint32 and words.shape == (g.DESCRIPTOR_WORDS,)
    assert g.decode(words) == (int(op), fields)
    # The same bits through the Amaranth layout.
    layout = h.descriptor_layout(h.Opcode[op.name])
    value = sum(int(w) << (32 * i) for i, w in enumerate(words))
    for name in g.field_offsets(op):
        if name != "op":
            assert (value >> layout[name].offset) & ((1 << layout[name].width) - 1) == \
                fields[name]


def test_encode_rejects_bad_fields():
    with pytest.raises(ValueError, match="missing"):
        g.encode(g.Opcode.BARRIER, seed=1)
    with pytest.raises(ValueError, match="fit"):
        g.encode(g.Opcode.SET_SEED, seed=1 << 64)
    assert g.decode(np.zeros(8, np.uint32)) == (0, {})
