"""cocotb tests of ``hdl.register_player.RegisterPlayer`` against cocotbext-axi's
``AxiLiteRam`` (the register file a host would write): writes land in order, a poll holds
the accesses after it until its bits read 0, and ``active`` covers every access.

On the NeuronCore (``hdl.sim_top.CoreWithDram``), ``sim.tb.core``'s ``played_pushes``
checks the same player with the core's registers behind it.
"""

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteRam

from hdl.register_player import pack_access as access
from sim.tb import streams, tbutil
from sim.tb.batches import BatchSource

#: Bytes of the register file behind the player.
RAM_BYTES = 4096


class RegisterPlayerTB:
    """The player, its batch source and an ``AxiLiteRam`` on its bus; counts the reads."""

    def __init__(self, dut):
        self.dut = dut
        self.ram = AxiLiteRam(AxiLiteBus.from_prefix(dut, "bus_"), dut.clk, dut.rst,
                              size=RAM_BYTES)
        self.source = BatchSource(dut, "accesses", k=tbutil.params()["k"], port="batches")
        self.reads = 0
        self.rng = tbutil.rng(0x9E6)

    async def start(self):
        await tbutil.start_clock(self.dut)
        await tbutil.reset(self.dut)
        cocotb.start_soon(self._count_reads())

    async def _count_reads(self):
        dut = self.dut
        while True:
            await RisingEdge(dut.clk)
            if dut.bus__arvalid.value and dut.bus__arready.value:
                self.reads += 1

    def word(self, addr: int) -> int:
        return int.from_bytes(self.ram.read(addr, 4), "little")

    def set_word(self, addr: int, value: int) -> None:
        self.ram.write(addr, int(value).to_bytes(4, "little"))


async def _active_low_cycles(dut, until) -> int:
    """Cycles (sampled mid-cycle) in which ``active`` was low before ``until`` (a task) is
    done."""
    low = 0
    while True:
        await FallingEdge(dut.clk)
        if until.done():
            return low
        low += not dut.active.value


@cocotb.test(**tbutil.timeout(2))
async def writes_in_order(dut):
    """Random writes, some to the same register, while the RAM takes AW and W at random and
    apart (each pauses on its own pattern): each register holds its last write, and
    ``active`` stays high until the last response."""
    tb = RegisterPlayerTB(dut)
    for i, channel in enumerate((tb.ram.write_if.aw_channel, tb.ram.write_if.w_channel)):
        channel.set_pause_generator(streams.pauses(tbutil.rng(0x9E7 + i), 0.4))
    await tb.start()
    addrs = 4 * tb.rng.integers(0, 16, 200)
    values = tb.rng.integers(0, 1 << 32, 200, dtype="u8")
    want = {}
    for a, v in zip(addrs, values, strict=True):
        want[int(a)] = int(v)
    assert not dut.active.value
    tb.source.send(access(False, int(a), int(v)) for a, v in zip(addrs, values, strict=True))
    sent = cocotb.start_soon(tb.source.wait())
    low = await _active_low_cycles(dut, sent)
    assert low == 0, f"active low in {low} cycles while accesses were left"
    await RisingEdge(dut.clk)
    assert not dut.active.value, "active after the last access"
    for a, v in want.items():
        assert tb.word(a) == v, f"register 0x{a:03x}: 0x{tb.word(a):08x}, want 0x{v:08x} " \
            f"(seed {tbutil.seed()})"
    assert tb.reads == 0


@cocotb.test(**tbutil.timeout(2))
async def poll_holds_what_follows(dut):
    """A poll reads again while its bits are set, and the write after it waits; other bits of
    the register do not hold it."""
    tb = RegisterPlayerTB(dut)
    await tb.start()
    status, flag, other, after = 0x008, 0x4, 0x1, 0x020
    tb.set_word(status, flag | other)
    tb.source.send([access(False, 0x010, 0x1234), access(True, status, flag),
                    access(False, after, 0xCAFE)])
    await ClockCycles(dut.clk, 60)
    assert dut.active.value, "the player stopped while the poll's bit was set"
    assert tb.word(0x010) == 0x1234, "the write before the poll was not made"
    assert tb.word(after) == 0, "the write after the poll was made before the bit cleared"
    assert tb.reads > 5, f"the poll read STATUS {tb.reads} times in 60 cycles"
    tb.set_word(status, other)  # the polled bit clears, another stays set
    await tb.source.wait()
    await RisingEdge(dut.clk)
    assert tb.word(after) == 0xCAFE and not dut.active.value
