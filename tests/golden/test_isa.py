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
    assert [c.name for c in g.ErrorCode][-3:] == ["BUS_ERROR", "LINK_TIMEOUT", "BAD_TAGS"]
    assert (g.ErrorCode.BUS_ERROR, g.ErrorCode.LINK_TIMEOUT, g.ErrorCode.BAD_TAGS) == (7, 8, 9)
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
    from golden.collective import CollectiveOp
    from hdl.formats import Dtype, Rounding

    assert {d.value: d.golden_name for d in Dtype} == g.DTYPE_NAMES
    assert [m.golden_name for m in Rounding] == ["rne", "rtz", "sr"]
    assert [f.value for f in ActivationFunc] == [0, 1]
    assert [c.value for c in CollectiveOp] == [0, 1, 2, 3, 4]


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


# --- Every encoding has one source, golden/isa.py: hdl/ agrees with it. -------------------


def _members(enum_cls) -> dict[str, int]:
    return {m.name: int(m.value) for m in enum_cls}


def test_dtype_enums_agree():
    from hdl.formats import Dtype, Fmt

    assert _members(Dtype) == _members(g.Dtype)
    assert _members(Fmt) == {d.name: int(d) for d in g.OPERAND_DTYPES}
    assert {d.golden_name for d in Dtype} == {d.golden_name for d in g.Dtype}
    assert g.FORMAT_CODES == {f.golden_name: f.value for f in Fmt}
    assert g.DTYPE_NAMES == {0: "bf16", 1: "fp8_e4m3", 2: "fp8_e5m2", 3: "fp16", 4: "fp32"}
    assert g.DTYPE_BYTES == {0: 2, 1: 1, 2: 1, 3: 2, 4: 4}
    # The names are golden.formats'; the 3-bit field holds every code (5..7 reserved).
    from golden.formats import FORMATS, INPUT_FORMATS
    from golden.rounding import CAST_FORMATS

    assert set(g.DTYPE_NAMES.values()) == set(CAST_FORMATS) <= set(FORMATS)
    assert tuple(g.FORMAT_CODES) == INPUT_FORMATS
    assert max(g.Dtype) < 1 << Dtype.as_shape().width and max(g.OPERAND_DTYPES) < 3
    assert [FORMATS[d.golden_name].bits // 8 for d in g.Dtype] == [d.nbytes for d in g.Dtype]


def test_field_enums_agree():
    """The codes of ACTIVATE's func and mode, COLLECTIVE's op and the vector engine's alu:
    hdl's Amaranth enums are golden.isa's, golden's modules re-export them, and each fits its
    descriptor field."""
    from golden import activation, collective, rounding, vector
    from hdl.activation import ActivationFunc
    from hdl.collective import CollectiveDim, CollectiveOp
    from hdl.formats import Rounding

    assert _members(Rounding) == _members(g.Rounding) == {"RNE": 0, "RTZ": 1, "SR": 2}
    assert [m.golden_name for m in Rounding] == list(rounding.MODES) == ["rne", "rtz", "sr"]
    assert _members(ActivationFunc) == _members(g.ActivationFunc)
    assert _members(CollectiveOp) == _members(g.CollectiveOp)
    assert _members(CollectiveDim) == _members(g.CollectiveDim) == {"ROW": 0, "COLUMN": 1}
    assert len(g.CollectiveDim) <= 1 << dict(g.FIELDS[g.Opcode.COLLECTIVE])["dim"]
    assert collective.CollectiveDim is g.CollectiveDim
    assert activation.ActivationFunc is g.ActivationFunc
    assert collective.CollectiveOp is g.CollectiveOp
    assert _members(h.AluOp) == _members(g.AluOp)
    assert vector.AluOp is g.AluOp
    widths = (dict(g.FIELDS[g.Opcode.ACTIVATE]) | dict(g.FIELDS[g.Opcode.COLLECTIVE])
              | dict(g.FIELDS[g.Opcode.TENSOR_TENSOR]))
    for enum_cls, field in ((g.Rounding, "mode"), (g.ActivationFunc, "func"),
                            (g.CollectiveOp, "coll_op"), (g.AluOp, "alu")):
        # Codes run from 0 (the sequencer checks ``<= max``); the field has a reserved code.
        assert [int(m) for m in enum_cls] == list(range(len(enum_cls)))
        assert len(enum_cls) < 1 << widths[field]
    assert [int(d) for d in g.Dtype] == list(range(len(g.Dtype)))


def test_hdl_opcodes_are_golden():
    """hdl.isa's enums are made from golden.isa's (names, values, order, width)."""
    assert [(m.name, m.value) for m in h.Opcode] == [(m.name, int(m)) for m in g.Opcode]
    assert [(m.name, m.value) for m in h.ErrorCode] == [(m.name, int(m)) for m in g.ErrorCode]
    assert h.Opcode.as_shape().width == g.OPCODE_BITS
    assert h.ErrorCode.as_shape().width == g.REGISTER_MAP["ERROR"].fields["code"][1]


def test_register_map():
    """The register map as data: the values software was written against, no overlaps, and
    hdl.cmdqueue's map, CORE_ID and DBG_ADDR fields are golden.isa's."""
    from hdl import cmdqueue

    assert g.REGISTERS == {"ID": 0x00, "CTRL": 0x04, "STATUS": 0x08, "ERROR": 0x0C,
                           "EXECUTED": 0x10, "DESC0": 0x20, "PUSH": 0x40, "DBG_ADDR": 0x44,
                           "DBG_DATA": 0x48, "PERF0": 0x80}
    assert g.CORE_ID == 0x4E43_4C31 and g.CORE_ID.to_bytes(4, "big") == b"NCL1"
    assert {m.name: int(m) for m in g.Ctrl} == {"SOFT_RESET": 1, "CLEAR_ERROR": 2, "PAUSE": 4}
    assert {m.name: int(m) for m in g.Status} == {"BUSY": 1, "ERROR": 2, "FULL": 4,
                                                  "OVERFLOW": 8, "DEBUG_TIMEOUT": 16}
    assert g.DEBUG_ADDR_FIELDS == {"word": (0, 16), "part": (16, 8), "bank": (24, 4),
                                   "space": (31, 1)}
    assert [int(s) for s in g.DebugSpace] == [0, 1]
    assert cmdqueue.REGISTERS is g.REGISTERS and cmdqueue.REGISTER_MAP is g.REGISTER_MAP
    assert cmdqueue.CORE_ID == g.CORE_ID and cmdqueue.DEBUG_ADDR_FIELDS is g.DEBUG_ADDR_FIELDS
    spans = []
    for name, reg in g.REGISTER_MAP.items():
        assert reg.name == name and reg.offset % 4 == 0 and reg.access in ("r", "w", "rw")
        spans.append((reg.offset, reg.offset + 4 * reg.count))
        bits = 0
        for field, (offset, width) in reg.fields.items():
            mask = ((1 << width) - 1) << offset
            assert width >= 1 and mask < 1 << 32 and not bits & mask, (name, field)
            bits |= mask
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
    assert max(end for _, end in spans) <= 1 << 12  # the 12-bit AXI4-Lite address
    # DESC0..7 hold a descriptor, PUSH follows (the driver's burst push relies on it).
    assert g.REGISTER_MAP["DESC0"].count == g.DESCRIPTOR_WORDS
    assert g.REGISTERS["PUSH"] == g.REGISTERS["DESC0"] + 4 * g.DESCRIPTOR_WORDS
    # The flag fields are the IntFlags' bits; DEBUG_TIMEOUT is the core's flag 0.
    status, ctrl = g.REGISTER_MAP["STATUS"], g.REGISTER_MAP["CTRL"]
    assert ctrl.fields == {m.name.lower(): (int(m).bit_length() - 1, 1) for m in g.Ctrl}
    for m in g.Status:
        if m != g.Status.DEBUG_TIMEOUT:
            assert status.fields[m.name.lower()] == (int(m).bit_length() - 1, 1)
    assert g.Status.DEBUG_TIMEOUT == 1 << status.fields["flags"][0]
    err = g.REGISTER_MAP["ERROR"]
    assert err.get(err.pack(code=7, index=0xABCDEF), "index") == 0xABCDEF
    assert err.pack(code=4, index=0x1234) == 4 | 0x1234 << 8
    with pytest.raises(ValueError, match="fit"):
        err.pack(code=16)


def test_register_ports_fit_the_map():
    """CommandQueue's ports have the widths of the register fields they show."""
    from hdl.cmdqueue import CommandQueue
    from hdl.sequencer import ERROR_INDEX_BITS

    regs = g.REGISTER_MAP
    q = CommandQueue(perf_counters=regs["PERF0"].count)
    q._MustUse__silence = True  # only its ports are looked at
    assert len(q.error_code) == regs["ERROR"].fields["code"][1]
    assert len(q.error_index) == regs["ERROR"].fields["index"][1] == ERROR_INDEX_BITS
    assert len(q.status_flags) == regs["STATUS"].fields["flags"][1]
    assert len(q.executed) == regs["EXECUTED"].fields["count"][1]
    assert len(q.axil.awaddr) == len(q.axil.araddr) == 12


def test_command_queue_registers_pysim(seed):
    """The RTL's CTRL, STATUS and ERROR bits are the register map's (Amaranth's simulator,
    one AXI4-Lite access at a time)."""
    from amaranth.sim import Simulator

    from hdl.cmdqueue import CommandQueue

    dut = CommandQueue(depth=2, perf_counters=1)
    regs, rng = g.REGISTER_MAP, np.random.default_rng([seed, 0x15A])
    seen = {}

    async def read(ctx, addr):
        ctx.set(dut.axil.araddr, addr)
        ctx.set(dut.axil.arvalid, 1)
        ctx.set(dut.axil.rready, 1)
        await ctx.tick().until(dut.axil.arready)
        ctx.set(dut.axil.arvalid, 0)
        await ctx.tick().until(dut.axil.rvalid)
        return ctx.get(dut.axil.rdata)

    async def write(ctx, addr, value):
        ctx.set(dut.axil.awaddr, addr)
        ctx.set(dut.axil.wdata, int(value))
        ctx.set(dut.axil.awvalid, 1)
        ctx.set(dut.axil.wvalid, 1)
        ctx.set(dut.axil.bready, 1)
        pulses = {"soft_reset": 0, "clear_error": 0}
        for _ in range(8):
            await ctx.tick()
            ctx.set(dut.axil.awvalid, 0)
            ctx.set(dut.axil.wvalid, 0)
            for name in pulses:
                pulses[name] |= ctx.get(getattr(dut, name))
        return pulses

    async def bench(ctx):
        for _ in range(8):
            code, index = int(rng.integers(0, 16)), int(rng.integers(0, 1 << 24))
            busy, flags = int(rng.integers(0, 2)), int(rng.integers(0, 16))
            ctx.set(dut.error_code, code)
            ctx.set(dut.error_index, index)
            ctx.set(dut.busy, busy)
            ctx.set(dut.status_flags, flags)
            assert await read(ctx, g.REGISTERS["ERROR"]) == regs["ERROR"].pack(code=code,
                                                                               index=index)
            assert await read(ctx, g.REGISTERS["STATUS"]) == regs["STATUS"].pack(
                busy=busy, error=int(code != 0), flags=flags)
        for port in (dut.busy, dut.error_code, dut.status_flags):
            ctx.set(port, 0)
        for bit in g.Ctrl:
            seen[bit] = await write(ctx, g.REGISTERS["CTRL"], bit)
            assert await read(ctx, g.REGISTERS["CTRL"]) == (bit & g.Ctrl.PAUSE)
            assert ctx.get(dut.pause) == bool(bit & g.Ctrl.PAUSE)
        await write(ctx, g.REGISTERS["CTRL"], 0)
        # A full queue and a dropped PUSH: FULL, OVERFLOW and the level.
        for _ in range(dut.depth + 1):
            await write(ctx, g.REGISTERS["PUSH"], 0)
        assert await read(ctx, g.REGISTERS["STATUS"]) == regs["STATUS"].pack(
            busy=1, full=1, overflow=1, level=dut.depth)
        assert await read(ctx, g.REGISTERS["ID"]) == g.CORE_ID

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen[g.Ctrl.SOFT_RESET] == {"soft_reset": 1, "clear_error": 0}
    assert seen[g.Ctrl.CLEAR_ERROR] == {"soft_reset": 0, "clear_error": 1}
    assert seen[g.Ctrl.PAUSE] == {"soft_reset": 0, "clear_error": 0}
