# amaranth: UnusedElaboratable=no
"""UartTx, UartRx and the bridge's CRC-8 network in amaranth.sim (fast unit tests).

UartTx: random bytes with random gaps, decoded from ``tx`` by an independent software
receiver (mid-bit sampling), stop bits high, back-to-back bytes 10 bit times apart. UartRx:
a bit-banged line with random phase (and a +-3 % baud mismatch at a larger divisor), a stop
bit of 0 (one ``frame_error``, no byte), a break (one ``frame_error``), a short low glitch
(ignored), an overrun (the waiting byte kept, the new one dropped, one ``overrun``).
``hdl.uart_bridge.crc8_update`` equals ``sim.host.uart_link.crc8``. The cocotb testbench
(``sim/tb/uart_bridge.py``) checks the whole bridge in Icarus and Verilator.
Seed: ``NCLITE_SEED`` (default 1).
"""

import os

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from hdl.uart import UartRx, UartTx
from hdl.uart_bridge import crc8_update
from sim.host.uart_link import crc8
from sim.tb import tbutil

SEED = int(os.environ.get("NCLITE_SEED", "1"))



@pytest.mark.parametrize("divisor", [4, 5, 9])
def test_tx(divisor):
    rng = tbutil.rng(divisor)
    data = [int(b) for b in rng.integers(0, 256, 24)]
    gaps = [int(g) if rng.random() < 0.5 else 0 for g in rng.integers(0, 3 * divisor, 24)]
    dut = UartTx(divisor=divisor)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    line: list[int] = []
    taken: list[int] = []  # the cycle each byte was taken

    async def feed(ctx):
        cycle = 0
        for b, gap in zip(data, gaps, strict=True):
            for _ in range(gap):
                await ctx.tick()
                cycle += 1
            ctx.set(dut.data.payload, b)
            ctx.set(dut.data.valid, 1)
            while not ctx.get(dut.data.ready):
                await ctx.tick()
                cycle += 1
            await ctx.tick()
            taken.append(cycle)
            cycle += 1
            ctx.set(dut.data.valid, 0)
        await ctx.tick().repeat(12 * divisor)

    async def watch(ctx):
        while True:
            await ctx.tick()
            line.append(ctx.get(dut.tx))

    sim.add_testbench(feed)
    sim.add_testbench(watch, background=True)
    sim.run()
    # A software receiver: a falling edge starts a frame; sample mid-bit.
    got, i = [], 0
    assert all(line[:taken[0]]), "tx not idle high before the first byte"
    while i < len(line):
        if line[i] == 0:
            bits = [line[i + divisor // 2 + k * divisor] for k in range(10)]
            assert bits[0] == 0 and bits[9] == 1, f"start/stop bits {bits} at cycle {i}"
            got.append(sum(b << k for k, b in enumerate(bits[1:9])))
            i += 10 * divisor
        else:
            i += 1
    assert got == data
    for a, b, gap in zip(taken, taken[1:], gaps[1:], strict=False):
        if gap == 0:
            assert b - a == 10 * divisor, "back-to-back bytes not 10 bit times apart"


def _rx_sim(divisor, waveform, ready=None):
    """Run UartRx on ``waveform`` (a list of (level, cycles)); returns the bytes it delivered
    (with the cycle), and the cycles of frame_error and overrun pulses. ``ready``: a function
    cycle -> bool for ``data.ready`` (default always)."""
    dut = UartRx(divisor=divisor)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    out = {"bytes": [], "frame_error": [], "overrun": []}
    total = sum(n for _, n in waveform) + 12 * divisor

    async def drive(ctx):
        for level, cycles in waveform:
            ctx.set(dut.rx, level)
            await ctx.tick().repeat(cycles)
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(12 * divisor)

    async def watch(ctx):
        for cycle in range(total):
            r = ready is None or ready(cycle)
            ctx.set(dut.data.ready, r)
            if ctx.get(dut.data.valid) and r:  # taken on the coming edge
                out["bytes"].append(ctx.get(dut.data.payload))
            for name in ("frame_error", "overrun"):
                if ctx.get(getattr(dut, name)):
                    out[name].append(cycle)
            await ctx.tick()

    sim.add_testbench(drive)
    sim.add_testbench(watch)
    sim.run()
    return out


def _frame(byte, bit, stop=1):
    levels = [0] + [(byte >> k) & 1 for k in range(8)] + [stop]
    return [(lv, bit) for lv in levels]


@pytest.mark.parametrize("divisor, bit", [(4, 4), (5, 5), (8, 8), (32, 31), (32, 33)],
                         ids=["d4", "d5", "d8", "d32-fast", "d32-slow"])
def test_rx(divisor, bit):
    rng = tbutil.rng(100 + divisor + bit)
    data = [int(b) for b in rng.integers(0, 256, 12)]
    wave = [(1, int(rng.integers(1, 3 * divisor)))]
    for b in data:
        wave += _frame(b, bit)
        if rng.random() < 0.5:
            wave.append((1, int(rng.integers(1, 2 * divisor))))
    out = _rx_sim(divisor, wave)
    assert out["bytes"] == data and not out["frame_error"] and not out["overrun"]


def test_rx_errors():
    d = 6
    wave = [(1, 10)]
    wave += _frame(0x5A, d, stop=0) + [(1, 3 * d)]  # framing error: no byte
    wave += [(0, 30 * d), (1, 3 * d)]  # a break: one framing error
    wave += [(0, d // 2 - 1), (1, 3 * d)]  # a glitch shorter than half a bit: ignored
    wave += _frame(0x3C, d) + [(1, d)]
    out = _rx_sim(d, wave)
    assert out["bytes"] == [0x3C] and len(out["frame_error"]) == 2 and not out["overrun"]


def test_rx_overrun():
    d = 4
    wave = [(1, 5)] + _frame(0x11, d) + _frame(0x22, d) + [(1, 3 * d)] + _frame(0x33, d)
    stall_until = 25 * d  # the consumer starts taking bytes in the idle gap
    out = _rx_sim(d, wave, ready=lambda cycle: cycle >= stall_until)
    assert out["bytes"] == [0x11, 0x33] and len(out["overrun"]) == 1
    assert not out["frame_error"]


def test_crc8_network():
    crc_in, byte_in = Signal(8), Signal(8)
    out = Signal(8)
    m = Module()
    m.d.comb += out.eq(crc8_update(crc_in, byte_in))
    sim = Simulator(m)
    rng = tbutil.rng(7)
    cases = [(int(c), b) for c in [0, 0xFF, *rng.integers(0, 256, 2)] for b in range(256)]

    async def tb(ctx):
        for c, b in cases:
            ctx.set(crc_in, c)
            ctx.set(byte_in, b)
            assert ctx.get(out) == crc8(bytes([b]), c), (c, b)

    sim.add_testbench(tb)
    sim.run()


@pytest.mark.parametrize("cls", [UartTx, UartRx])
@pytest.mark.parametrize("divisor, exc", [(3, ValueError), (0, ValueError), (4.0, TypeError),
                                          (True, TypeError), (None, TypeError)])
def test_bad_divisor(cls, divisor, exc):
    with pytest.raises(exc, match="divisor"):
        cls(divisor=divisor)
