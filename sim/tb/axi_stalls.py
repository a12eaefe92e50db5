"""cocotb testbench: ``hdl.sim_top.AxiStalls`` between cocotbext-axi's ``AxiMaster`` (on ``up``)
and ``AxiRam`` (on ``down``), against a bytearray model of the memory.

* ``random_traffic``: random reads and writes from two coroutines at once (random offsets
  and lengths, full and narrow AxSIZE, INCR bursts up to 64 beats, on ranges no other access in
  flight touches), pauses on the master's and the RAM's channels too, the stalls at a random
  rate. On every channel, at the side that receives it, a monitor checks the stream rule
  (a beat shown stays shown, payload unchanged, until taken). Every read returns the model's
  bytes; afterwards the RAM equals the model and ``stalled`` counted stalls.
* ``pass_through``: at rate 0 each channel is a wire (the receiver's ``valid`` is the
  sender's, the sender's ``ready`` the receiver's, every cycle), ``stalled`` stays 0; then, at
  rate 255, beats still get through (each stall lets a shown beat go).
"""

from __future__ import annotations

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge
from cocotbext.axi import AxiBus, AxiMaster, AxiRam

from hdl.sim_top import AXI_CHANNELS
from sim.tb import streams, tbutil

RAM_BYTES = 4096


async def _start(dut, rate: int, seed: int):
    """Valids and readies the models drive held low from time 0, the stalls' rate and seed
    set, then clock and reset (the seed is taken after reset)."""
    for ch in ("aw", "w", "ar"):
        getattr(dut, f"up__{ch}valid").value = 0
        getattr(dut, f"down__{ch}ready").value = 0
    for ch in ("b", "r"):
        getattr(dut, f"up__{ch}ready").value = 0
        getattr(dut, f"down__{ch}valid").value = 0
    dut.stall_rate.value = rate
    dut.seed.value = seed
    dut.rst.value = 1
    await tbutil.start_clock(dut)
    await tbutil.reset(dut)


def _sides(name: str, from_master: bool) -> tuple[str, str]:
    """(sender, receiver) prefixes of channel ``name``."""
    return ("up", "down") if from_master else ("down", "up")


class _Monitor:
    """Samples every channel once per cycle (ReadOnly after the rising edge): the stream rule at
    the receiver, and with ``wire`` that the receiver sees exactly what the sender shows."""

    def __init__(self, dut, wire: bool = False):
        self.dut, self.wire = dut, wire
        self.rules = {name: tbutil.StallMonitor(f"{_sides(name, m)[1]}.{name}")
                      for name, _, m in AXI_CHANNELS}
        self.cycles = 0
        self.beats = dict.fromkeys(self.rules, 0)
        self.task = cocotb.start_soon(self._run())

    async def _run(self):
        dut = self.dut
        chans = []
        for name, members, from_master in AXI_CHANNELS:
            snd, rcv = _sides(name, from_master)
            chans.append((name, getattr(dut, f"{rcv}__{name}valid"),
                          getattr(dut, f"{rcv}__{name}ready"),
                          [getattr(dut, f"{rcv}__{k}") for k in members],
                          getattr(dut, f"{snd}__{name}valid"),
                          getattr(dut, f"{snd}__{name}ready")))
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            self.cycles += 1
            for name, valid, ready, payload, s_valid, s_ready in chans:
                v, r = int(valid.value), int(ready.value)
                if self.wire:
                    assert (v, r) == (int(s_valid.value), int(s_ready.value)), \
                        f"{name}: not a wire at rate 0 (seed {tbutil.seed()})"
                got = self.rules[name].sample(
                    bool(v), tuple(int(p.value) for p in payload) if v else None, bool(r))
                self.beats[name] += got is not None


def _models(dut, rng, pauses: float):
    master = AxiMaster(AxiBus.from_prefix(dut, "up_"), dut.clk, dut.rst)
    ram = AxiRam(AxiBus.from_prefix(dut, "down_"), dut.clk, dut.rst, size=RAM_BYTES)
    for side in (master.write_if, master.read_if, ram.write_if, ram.read_if):
        side.log.setLevel("WARNING")
    if pauses:
        for ch in (master.write_if.aw_channel, master.write_if.w_channel,
                   master.write_if.b_channel, master.read_if.ar_channel,
                   master.read_if.r_channel, ram.write_if.aw_channel, ram.write_if.w_channel,
                   ram.write_if.b_channel, ram.read_if.ar_channel, ram.read_if.r_channel):
            ch.set_pause_generator(streams.pauses(tbutil.rng(int(rng.integers(1 << 30))),
                                                  pauses))
    return master, ram


@cocotb.test(**tbutil.timeout(10))
async def random_traffic(dut):
    rng = tbutil.rng(0x57A11)
    rate = int(rng.integers(32, 200))
    await _start(dut, rate, int(rng.integers(1, 1 << 32)))
    master, ram = _models(dut, rng, 0.2)
    mon = _Monitor(dut)
    model = bytearray(rng.integers(0, 256, RAM_BYTES, dtype="u1").tobytes())
    ram.write(0, bytes(model))
    half = RAM_BYTES // 2

    async def worker(base: int, salt: int):
        r = tbutil.rng(salt)
        for _ in range(60):
            size = int(r.integers(0, 3))  # AxSIZE: 1, 2 or 4 bytes a beat
            length = int(r.integers(1, (64 << size) + 1))
            addr = base + int(r.integers(0, half - length + 1))
            if r.random() < 0.5:
                data = r.integers(0, 256, length, dtype="u1").tobytes()
                await master.write(addr, data, size=size)
                model[addr:addr + length] = data
            else:
                got = await master.read(addr, length, size=size)
                assert bytes(got.data) == bytes(model[addr:addr + length]), \
                    f"read of {length} bytes at 0x{addr:x} differs (seed {tbutil.seed()})"

    tasks = [cocotb.start_soon(worker(0, 1)), cocotb.start_soon(worker(half, 2))]
    for t in tasks:
        await t
    mon.task.cancel()
    assert ram.read(0, RAM_BYTES) == bytes(model), f"RAM differs (seed {tbutil.seed()})"
    stalled = int(dut.stalled.value)
    assert 0 < stalled < mon.cycles, f"stalled {stalled} of {mon.cycles} cycles at rate {rate}"
    assert all(mon.beats.values()), mon.beats
    dut._log.info("rate %d: %d of %d cycles stalled; beats %s", rate, stalled, mon.cycles,
                  mon.beats)


@cocotb.test(**tbutil.timeout(5))
async def pass_through(dut):
    rng = tbutil.rng(0x9A55)
    await _start(dut, 0, int(rng.integers(0, 1 << 32)))
    master, ram = _models(dut, rng, 0.3)
    mon = _Monitor(dut, wire=True)
    data = rng.integers(0, 256, 512, dtype="u1").tobytes()
    await master.write(64, data)
    assert bytes((await master.read(64, len(data))).data) == data
    assert int(dut.stalled.value) == 0, "stalled counted at rate 0"
    mon.task.cancel()
    dut.stall_rate.value = 255
    mon = _Monitor(dut)
    await master.write(1024, data[:64])
    assert bytes((await master.read(1024, 64)).data) == data[:64]
    mon.task.cancel()
    assert int(dut.stalled.value) > 0
