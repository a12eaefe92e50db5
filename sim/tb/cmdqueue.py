"""cocotb testbench: ``hdl.cmdqueue.CommandQueue`` through cocotbext-axi's ``AxiLiteMaster``.

A :class:`sim.tb.streams.StreamSink` takes descriptors from ``desc`` with random back-pressure
(the probability of ``ready`` is :attr:`QueueTB.ready_p`) and keeps them, checking that a
stalled descriptor stays on the stream unchanged; a debug responder answers requests on
``dbg_req`` through ``dbg_resp`` (a sink and a :class:`sim.tb.streams.StreamSource`, one request
at a time); the ``soft_reset`` and ``clear_error`` pulses are counted in cycles high. The host
side writes descriptors made by ``golden.isa.encode`` and reads registers.
Test ``registers_and_queue``: the ID; descriptors arrive in order bit for bit; a PUSH to a
full queue is dropped and sets overflow (cleared by CTRL bit 1, which also pulses
``clear_error``); STATUS, ERROR, EXECUTED and PERF show the sequencer's inputs; the staged
words read back; an unmapped address reads 0; CTRL bit 0 pulses ``soft_reset`` and empties
the queue; a DBG_ADDR write waits for the word a responder returns after a random delay,
and DBG_DATA then reads it.

Test ``stall_everything``: random pauses in bursts on all five AXI4-Lite channels of the
master at once (cocotbext-axi pause generators), random back-pressure on ``desc`` and a
random delay on the debug responder; descriptors still arrive in order, bit for bit, and the
registers and debug reads are right.

Test ``reset_midway``: three times, a paused queue holding descriptors, the overflow bit
set, staged words and a host in the middle of more register writes when ``rst`` comes for
1..4 cycles; afterwards no descriptor leaves, STATUS, CTRL and the staged words read 0, and
fresh descriptors pass in order.
"""

import contextlib
import itertools

import cocotb
import numpy as np
from cocotb.triggers import (
    ClockCycles,
    FallingEdge,
    RisingEdge,
    SimTimeoutError,
    with_timeout,
)
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from golden.isa import (
    CORE_ID,
    DESCRIPTOR_WORDS,
    FIELDS,
    REGISTER_MAP,
    REGISTERS,
    Ctrl,
    Opcode,
    Status,
    encode,
)
from sim.tb import streams, tbutil
from sim.tb.streams import StreamSink, StreamSource

R = REGISTERS
_STATUS, _ERROR = REGISTER_MAP["STATUS"], REGISTER_MAP["ERROR"]


class QueueTB:
    def __init__(self, dut):
        self.dut = dut
        self.depth = tbutil.params().get("depth", 8)
        self.got: list[int] = []
        self._ready_p = 1.0
        self.pulses = {"clear_error": 0, "soft_reset": 0}
        self.rng = tbutil.rng(0xC0)
        self.host = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "axil_"), dut.clk, dut.rst)
        self.desc: StreamSink | None = None

    @property
    def ready_p(self) -> float:
        """The probability that ``desc`` is ready in a cycle it shows a descriptor (1: always,
        0: never); draws from :attr:`rng`."""
        return self._ready_p

    @ready_p.setter
    def ready_p(self, p: float) -> None:
        self._ready_p = p
        if self.desc is not None:
            self.desc.set_pause_generator(self._back_pressure())

    def _back_pressure(self):
        return streams.pauses(self.rng, 1.0 - self._ready_p) if self._ready_p < 1 else None

    async def start(self):
        dut = self.dut
        dut.desc__ready.value = 0
        for name in ("busy", "error_code", "error_index", "executed"):
            getattr(dut, name).value = 0
        dut.perf.value = 0
        dut.status_flags.value = 0
        dut.dbg_req__ready.value = 0
        dut.dbg_resp__valid.value = 0
        await tbutil.start_clock(self.dut)
        await tbutil.reset(self.dut)
        self.desc = StreamSink(dut, "desc", pause=self._back_pressure(), on_beat=self._got_desc)
        self.dbg_req = StreamSink(dut, "dbg_req", on_beat=self._debug_request)
        self.dbg_resp = StreamSource(dut, "dbg_resp")
        for name in self.pulses:
            cocotb.start_soon(self._count_pulses(name))

    def _got_desc(self, value: int) -> None:
        self.got.append(value)

    @staticmethod
    def debug_word(addr: int) -> int:
        return (addr * 0x9E3779B1 + 0x1234567) & 0xFFFFFFFF

    def _debug_request(self, addr: int) -> None:
        """A DBG_ADDR request taken: ``dbg_req`` is not ready until it is answered."""
        self.dbg_req.set_pause_generator(itertools.repeat(1))
        cocotb.start_soon(self._answer(addr))

    async def _answer(self, addr: int) -> None:
        """After 0..6 cycles, ``debug_word(addr)`` on ``dbg_resp``; ready for the next."""
        delay = int(self.rng.integers(0, 7))
        if delay:
            await ClockCycles(self.dut.clk, delay)
        self.dbg_resp.send(self.debug_word(addr))
        await self.dbg_resp.wait()
        self.dbg_req.set_pause_generator(None)

    async def _count_pulses(self, name: str) -> None:
        """Add the cycles ``name`` is high to ``pulses[name]`` (a pulse is one cycle)."""
        signal = getattr(self.dut, name)
        while True:
            await RisingEdge(signal)
            rose = get_sim_time("ns")
            await FallingEdge(signal)
            self.pulses[name] += round((get_sim_time("ns") - rose) / tbutil.CLOCK_PERIOD_NS)

    async def push(self, words):
        for i, w in enumerate(words):
            await self.host.write_dword(R["DESC0"] + 4 * i, int(w))
        await self.host.write_dword(R["PUSH"], 0)

    def random_descriptor(self, rng):
        op = Opcode(int(rng.integers(min(Opcode), max(Opcode) + 1)))
        fields = {n: int(rng.integers(0, 1 << min(w, 62))) for n, w in FIELDS[op]}
        words = encode(op, **fields)
        return words, sum(int(w) << (32 * i) for i, w in enumerate(words))


@cocotb.test(timeout_time=2, timeout_unit="ms")
async def registers_and_queue(dut):
    tb = QueueTB(dut)
    await tb.start()
    rng = tbutil.rng(1)
    seed = tbutil.seed()
    assert await tb.host.read_dword(R["ID"]) == CORE_ID
    assert await tb.host.read_dword(0xFFC) == 0, "unmapped addresses read 0"

    # In order, bit for bit, with back-pressure.
    tb.ready_p = 0.5
    want = []
    for _ in range(3 * tb.depth):
        words, value = tb.random_descriptor(rng)
        await tb.push(words)
        want.append(value)
    await ClockCycles(dut.clk, 50)
    assert tb.got == want, f"descriptors lost, reordered or changed (seed {seed})"
    words, _ = tb.random_descriptor(rng)
    for i, w in enumerate(words):
        await tb.host.write_dword(R["DESC0"] + 4 * i, int(w))
    assert [await tb.host.read_dword(R["DESC0"] + 4 * i) for i in range(DESCRIPTOR_WORDS)] == \
        [int(w) for w in words]

    # A full queue: the extra PUSH is dropped and flagged; the first `depth` come out.
    tb.ready_p, tb.got = 0.0, []
    await ClockCycles(dut.clk, 2)
    want = []
    for _ in range(tb.depth + 1):
        words, value = tb.random_descriptor(rng)
        await tb.push(words)
        want.append(value)
    status = await tb.host.read_dword(R["STATUS"])
    full = Status.FULL | Status.OVERFLOW
    assert status & full == full and _STATUS.get(status, "level") == tb.depth, hex(status)
    tb.ready_p = 1.0
    await ClockCycles(dut.clk, tb.depth + 5)
    assert tb.got == want[:tb.depth], f"full-queue behaviour (seed {seed})"
    await tb.host.write_dword(R["CTRL"], Ctrl.CLEAR_ERROR)
    assert (await tb.host.read_dword(R["STATUS"])) & Status.OVERFLOW == 0, "overflow not cleared"
    assert tb.pulses["clear_error"] == 1

    # Registers show the sequencer's inputs.
    await FallingEdge(dut.clk)
    dut.busy.value, dut.error_code.value, dut.error_index.value = 1, 4, 0x1234
    dut.executed.value = 77
    perf = [int(v) for v in rng.integers(0, 1 << 32, len(dut.perf) // 32, dtype=np.uint64)]
    dut.perf.value = sum(v << (32 * i) for i, v in enumerate(perf))
    dut.status_flags.value = 0b1010
    status = await tb.host.read_dword(R["STATUS"])
    busy_error = Status.BUSY | Status.ERROR
    assert status & busy_error == busy_error and _STATUS.get(status, "flags") == 0b1010, \
        hex(status)
    dut.status_flags.value = 0
    assert await tb.host.read_dword(R["ERROR"]) == _ERROR.pack(code=4, index=0x1234)
    assert await tb.host.read_dword(R["EXECUTED"]) == 77
    counters = tbutil.params().get("perf_counters", 4)
    for i in range(counters):
        assert await tb.host.read_dword(R["PERF0"] + 4 * i) == perf[i]

    # Pause (CTRL bit 2, a level): nothing leaves the queue until it is cleared.
    tb.ready_p, tb.got = 1.0, []
    await tb.host.write_dword(R["CTRL"], Ctrl.PAUSE)
    want = []
    for _ in range(2):
        words, value = tb.random_descriptor(rng)
        await tb.push(words)
        want.append(value)
    await ClockCycles(dut.clk, 20)
    assert tb.got == [] and await tb.host.read_dword(R["CTRL"]) == Ctrl.PAUSE, "pause ignored"
    await tb.host.write_dword(R["CTRL"], 0)
    await ClockCycles(dut.clk, 10)
    assert tb.got == want and await tb.host.read_dword(R["CTRL"]) == 0, "pause not released"

    # Debug reads: DBG_DATA holds the word of the DBG_ADDR written just before.
    for _ in range(6):
        addr = int(rng.integers(0, 1 << 32))
        await tb.host.write_dword(R["DBG_ADDR"], addr)
        got = await tb.host.read_dword(R["DBG_DATA"])
        assert got == tb.debug_word(addr), f"DBG_DATA 0x{got:08x} for 0x{addr:08x} (seed {seed})"

    # Soft reset: a pulse, and the queue empties without the sequencer seeing it (so the
    # stalled descriptor leaves ``desc`` untaken: not a broken stream rule here).
    tb.ready_p, tb.got = 0.0, []
    for _ in range(3):
        await tb.push(tb.random_descriptor(rng)[0])
    tb.desc.check_rules = False
    await tb.host.write_dword(R["CTRL"], Ctrl.SOFT_RESET)
    await ClockCycles(dut.clk, 10)
    tb.ready_p = 1.0
    await ClockCycles(dut.clk, 10)
    tb.desc.check_rules = True
    assert tb.pulses["soft_reset"] == 1 and tb.got == [], "soft reset did not empty the queue"
    dut._log.info("command queue: registers and %d-deep queue checked (seed %d)", tb.depth,
                  seed)


async def _wait_for(tb, want, cycles: int, what: str):
    """Until ``tb.got`` holds as many descriptors as ``want`` (at most ``cycles`` cycles);
    then they must be equal."""
    if len(tb.got) < len(want):
        with contextlib.suppress(SimTimeoutError):
            await with_timeout(tb.desc.wait_count(tb.desc.count + len(want) - len(tb.got)),
                               cycles * tbutil.CLOCK_PERIOD_NS, "ns")
    assert tb.got == want, f"{what}: descriptors lost, reordered or changed (seed {tbutil.seed()})"


@cocotb.test(timeout_time=2, timeout_unit="ms")
async def stall_everything(dut):
    tb = QueueTB(dut)
    channels = (tb.host.write_if.aw_channel, tb.host.write_if.w_channel,
                tb.host.write_if.b_channel, tb.host.read_if.ar_channel,
                tb.host.read_if.r_channel)
    for i, ch in enumerate(channels):
        ch.set_pause_generator(streams.pauses(tbutil.rng(0x57A + i), 0.5, max_burst=4))
    await tb.start()
    rng = tbutil.rng(3)
    tb.ready_p = 0.4
    want = []
    for _ in range(2 * tb.depth + 1):
        words, value = tb.random_descriptor(rng)
        await tb.push(words)
        want.append(value)
        if rng.random() < 0.3:
            status = await tb.host.read_dword(R["STATUS"])
            assert status & Status.OVERFLOW == 0, \
                f"overflow under back-pressure (seed {tbutil.seed()})"
            if status & Status.FULL:  # full: let the consumer catch up
                await _wait_for(tb, want[:len(want) - tb.depth + 1], 200, "under stalls")
        assert [await tb.host.read_dword(R["DESC0"] + 4 * i)
                for i in range(DESCRIPTOR_WORDS)] == [int(w) for w in words]
    await _wait_for(tb, want, 500, "under stalls on every channel")
    for _ in range(3):
        addr = int(rng.integers(0, 1 << 32))
        await tb.host.write_dword(R["DBG_ADDR"], addr)
        assert await tb.host.read_dword(R["DBG_DATA"]) == tb.debug_word(addr)
    assert await tb.host.read_dword(R["ID"]) == CORE_ID
    dut._log.info("command queue: %d descriptors under stalls everywhere (seed %d)", len(want),
                  tbutil.seed())


@cocotb.test(timeout_time=2, timeout_unit="ms")
async def reset_midway(dut):
    tb = QueueTB(dut)
    await tb.start()
    rng = tbutil.rng(4)
    for rnd in range(3):
        tb.ready_p, tb.got = 0.0, []
        await tb.host.write_dword(R["CTRL"], Ctrl.PAUSE)  # a level the reset must clear
        for _ in range(tb.depth + 1):  # full, and the extra PUSH sets overflow
            await tb.push(tb.random_descriptor(rng)[0])
        for i, w in enumerate(tb.random_descriptor(rng)[0]):
            await tb.host.write_dword(R["DESC0"] + 4 * i, int(w))
        full = Status.FULL | Status.OVERFLOW
        assert (await tb.host.read_dword(R["STATUS"])) & full == full

        async def more():
            while True:
                await tb.push(tb.random_descriptor(rng)[0])

        task = cocotb.start_soon(more())
        await ClockCycles(dut.clk, int(rng.integers(1, 40)))
        await tbutil.reset_midway(dut, int(rng.integers(1, 5)), tasks=[task],
                                  clear=[tb.desc])
        tb.ready_p = 1.0
        await tbutil.expect_quiet(dut, ["desc__valid", "axil__bvalid", "axil__rvalid", "pause",
                                        "soft_reset", "clear_error", "dbg_req__valid"], 10,
                                  f"(round {rnd})")
        assert tb.got == [], f"round {rnd}: a descriptor left the queue after the reset"
        assert await tb.host.read_dword(R["STATUS"]) == 0, "STATUS not clear after the reset"
        assert await tb.host.read_dword(R["CTRL"]) == 0, "pause survived the reset"
        assert [await tb.host.read_dword(R["DESC0"] + 4 * i)
                for i in range(DESCRIPTOR_WORDS)] == [0] * DESCRIPTOR_WORDS
        tb.ready_p = 0.5
        want = []
        for _ in range(tb.depth):
            words, value = tb.random_descriptor(rng)
            await tb.push(words)
            want.append(value)
        await _wait_for(tb, want, 200, f"after the reset (round {rnd})")
    dut._log.info("command queue: reset in the middle, 3 rounds (seed %d)", tbutil.seed())
