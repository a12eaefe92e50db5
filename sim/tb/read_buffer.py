"""cocotb tests of ``hdl.read_port.ReadBuffer``: a reader that issues reads whenever the
buffer has room (with random gaps of its own), a read port that puts each read's word on
``data`` exactly ``latency`` cycles later and garbage in every other cycle, and a sink that
stalls at random. Every word comes out once, in order, and the stream rules hold (the sink
checks them); a sink that never stalls gets a word a cycle.
"""

import cocotb
from cocotb.triggers import FallingEdge

from sim.tb import streams, tbutil


class ReadBufferTB:
    """The buffer, its reader and read port (one coroutine, on falling edges) and its sink."""

    def __init__(self, dut, *, gaps: float, stalls: float, salt: int):
        self.dut = dut
        p = tbutil.params()
        self.latency, self.width = p["latency"], p["shape"]
        self.rng = tbutil.rng(salt)
        self.gaps = gaps
        self.sink = streams.StreamSink(
            dut, "out", pause=streams.pauses(tbutil.rng(salt + 1), stalls) if stalls else None)
        self.issued: list[int] = []

    async def start(self):
        self.dut.issue.value = 0
        await tbutil.start_clock(self.dut)
        await tbutil.reset(self.dut)

    async def read(self, count: int) -> int:
        """Issue ``count`` reads of random words; returns the cycles until the last one's word
        was shown."""
        dut, lat = self.dut, self.latency
        in_flight = [None] * lat  # the word each of the last `lat` cycles' reads will show
        cycles = 0
        while len(self.issued) < count or any(w is not None for w in in_flight):
            await FallingEdge(dut.clk)
            # This cycle's read (room comes from registers: it is settled mid-cycle).
            word = None
            if len(self.issued) < count and self.rng.random() >= self.gaps and dut.room.value:
                word = int(self.rng.integers(0, 1 << self.width))
                self.issued.append(word)
            dut.issue.value = int(word is not None)
            # The port: the word of the read issued `lat` cycles ago, or garbage.
            shown = in_flight.pop(0)
            in_flight.append(word)
            dut.data.value = (shown if shown is not None
                              else int(self.rng.integers(0, 1 << self.width)))
            cycles += 1
        dut.issue.value = 0
        return cycles

    async def check(self, count: int) -> None:
        got = [await self.sink.recv() for _ in range(count)]
        first = next((i for i, (a, b) in enumerate(zip(got, self.issued, strict=True))
                      if a != b), None)
        assert first is None, (
            f"word {first} out: 0x{got[first]:x}, read 0x{self.issued[first]:x} (out of order "
            f"or lost; seed {tbutil.seed()}, {tbutil.simulator()})")


@cocotb.test(**tbutil.timeout(2))
async def stalls(dut):
    """A reader with gaps, a sink that stalls half the time: 3 000 words, in order."""
    tb = ReadBufferTB(dut, gaps=0.3, stalls=0.5, salt=0x4EAD)
    await tb.start()
    await tb.read(3000)
    await tb.check(3000)
    await FallingEdge(dut.clk)
    assert int(dut.pending.value) == 0, f"pending {int(dut.pending.value)} after the last word"


@cocotb.test(**tbutil.timeout(2))
async def full_rate(dut):
    """A reader without gaps and a sink that never stalls: a read every cycle (``room``
    never falls), so 500 words take 500 + latency cycles."""
    tb = ReadBufferTB(dut, gaps=0.0, stalls=0.0, salt=0x4EAE)
    await tb.start()
    cycles = await tb.read(500)
    await tb.check(500)
    assert cycles == 500 + tb.latency, (
        f"{cycles} cycles for 500 reads at latency {tb.latency}, want {500 + tb.latency} "
        f"(seed {tbutil.seed()}, {tbutil.simulator()})")
