"""The host driver in a cocotb simulation: :class:`sim.host.driver.CoreDriver` on the core's buses.

:class:`CoreHost` talks to a NeuronCore only through its buses: the registers
(``golden.isa.REGISTER_MAP``) through cocotbext-axi's ``AxiLiteMaster`` on the ``axil`` port,
and DRAM, which is one of two things (``dram=``):

* ``"axiram"``: cocotbext-axi's ``AxiRam`` on the core's AXI4 master port (``hdl.core.NeuronCore``,
  ``hdl.multicore.CoreRing``), with error responses on demand (:class:`DramFaults`) and random
  pauses on its channels: for the tests whose subject is the bus, its errors or its stalls.
  Python runs for every AXI4 beat. The host polls STATUS while it waits for the core.
* ``"memory"``: the RTL memory of ``hdl.sim_top`` (:class:`~hdl.sim_top.CoreWithDram`,
  :class:`~hdl.sim_top.RingWithDram`), loaded and read through a VPI backdoor
  (:class:`MemoryPort`), its stalls made by ``hdl.sim_top.AxiStalls`` in the RTL: no Python
  per beat. The host waits on the core's ``busy`` wire and reads STATUS when it falls.

Everything else (programs, debug reads, perf counters) is :class:`~sim.host.driver.CoreDriver`'s,
shared with the FPGA board's host tool (``sim.host.board``).

Runs inside a cocotb test.
"""

from __future__ import annotations

import functools
import logging

import numpy as np
from cocotb.handle import Immediate
from cocotb.triggers import ClockCycles, FallingEdge, First, SimTimeoutError, Timer, with_timeout
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam, AxiResp

from golden.isa import REGISTER_MAP
from hdl.register_player import pack_access
from hdl.sim_top import REGISTER_BATCH, core_memories
from sim.host.driver import CoreDriver, CoreTimeout, RunResult
from sim.tb import streams
from sim.tb.batches import BatchSource
from sim.tb.tbutil import CLOCK_PERIOD_NS

__all__ = ["CoreHost", "CoreTimeout", "RunResult", "AxiRamPort", "MemoryPort", "DramFaults",
           "DRAM_BACKENDS", "sim_cycles"]

#: The values of :class:`CoreHost`'s ``dram``.
DRAM_BACKENDS = ("axiram", "memory")


class _DramFault(Exception):
    """Raised inside cocotbext-axi's RAM model: it answers the beat with an error."""


class DramFaults:
    """Error responses from a cocotbext-axi ``AxiRam``, for fault tests.

    While :attr:`window` is a byte range ``(lo, hi)``, every beat of a read burst whose bytes
    meet it is answered with :attr:`resp` on R and zero data, and every write burst with a
    beat whose written bytes meet it is answered with :attr:`resp` on B (those bytes are not
    written; the burst's other beats are). ``resp`` is ``AxiResp.SLVERR`` or
    ``AxiResp.DECERR``. This uses the model's own error path (a failing memory access gives
    SLVERR) and rewrites SLVERR to DECERR on its way out when asked; ``window = None``: a
    good DRAM again."""

    def __init__(self, ram: AxiRam):
        self.window: tuple[int, int] | None = None
        self.resp = AxiResp.SLVERR
        self.hits = {"R": 0, "B": 0}  # error responses given (beats on R, bursts on B)
        rd, wr = ram.read_if, ram.write_if
        read, write = rd._read, wr._write
        r_send, b_send = rd.r_channel.send, wr.b_channel.send

        def hit(address, length):
            return self.window is not None and address < self.window[1] and \
                self.window[0] < address + length

        async def faulty_read(address, length):
            if hit(address, length):
                raise _DramFault(f"read 0x{address:x}")
            return await read(address, length)

        async def faulty_write(address, data):
            if hit(address, len(data)):
                raise _DramFault(f"write 0x{address:x}")
            await write(address, data)

        def remap(tx, field, channel):
            if int(getattr(tx, field)) == AxiResp.SLVERR:
                self.hits[channel] += 1
                setattr(tx, field, self.resp)

        async def send_r(tx):
            remap(tx, "rresp", "R")
            await r_send(tx)

        async def send_b(tx):
            remap(tx, "bresp", "B")
            await b_send(tx)

        rd._read, wr._write = faulty_read, faulty_write
        rd.r_channel.send, wr.b_channel.send = send_r, send_b


class AxiRamPort:
    """cocotbext-axi's ``AxiRam`` seen as the driver's async DRAM port (direct access: the
    testbench writes DRAM without bus cycles, as a host's DMA-coherent buffer would)."""

    def __init__(self, ram: AxiRam):
        self.ram = ram

    async def write(self, addr: int, data: bytes) -> None:
        self.ram.write(addr, data)

    async def read(self, addr: int, size: int) -> bytes:
        return self.ram.read(addr, size)


class MemoryPort:
    """An RTL memory array seen as DRAM: words of B bytes (the array's width), byte ``a`` the
    little-endian byte ``a % B`` of word ``a // B`` (``hdl.sim_top``'s ``mem.ram``), read and
    written word by word through VPI in zero simulated time. ``array`` is the array's cocotb
    handle (``dut.mem.ram``), ``size`` its size in bytes. Writes are immediate, so a read right
    after a write sees it; write only while no DMA runs (the core idle). The driver's async
    DRAM port, and direct access for testbenches (:meth:`write_now`, :meth:`read_now`)."""

    def __init__(self, array, size: int):
        self.array = array
        self._handles: list | None = None
        self.word_bytes = len(array[0]) // 8
        if not isinstance(size, int) or size <= 0 or size % self.word_bytes:
            raise ValueError(f"size must be a positive multiple of {self.word_bytes} bytes, "
                             f"not {size!r}")
        self.size = size

    def _words(self) -> list:
        if self._handles is None:  # (about 5 us a word, once)
            self._handles = [self.array[i] for i in range(self.size // self.word_bytes)]
        return self._handles

    def _check(self, addr: int, size: int) -> None:
        if not (isinstance(addr, int) and 0 <= addr and size >= 0 and addr + size <= self.size):
            raise ValueError(f"addr {addr!r} + {size} bytes lies outside DRAM's "
                             f"{self.size} bytes")

    def _read_words(self, lo: int, hi: int) -> bytes:
        B = self.word_bytes
        return b"".join(w.value.to_unsigned().to_bytes(B, "little")
                        for w in self._words()[lo:hi])

    def write_now(self, addr: int, data: bytes) -> None:
        """Write ``data`` at byte ``addr`` (the other bytes of its first and last words kept)."""
        data = bytes(data)
        self._check(addr, len(data))
        if not data:
            return
        B = self.word_bytes
        end = addr + len(data)
        lo, hi = addr // B, -(-end // B)
        buf = bytearray(B * (hi - lo))
        if addr % B:
            buf[:B] = self._read_words(lo, lo + 1)
        if end % B:
            buf[-B:] = self._read_words(hi - 1, hi)
        buf[addr - B * lo:end - B * lo] = data
        words = self._words()
        for i in range(hi - lo):
            words[lo + i].value = Immediate(int.from_bytes(buf[B * i:B * (i + 1)], "little"))

    def read_now(self, addr: int, size: int) -> bytes:
        """``size`` bytes from byte ``addr``."""
        self._check(addr, size)
        B = self.word_bytes
        lo, hi = addr // B, -(-(addr + size) // B)
        return self._read_words(lo, hi)[addr - B * lo:addr - B * lo + size]

    async def write(self, addr: int, data: bytes) -> None:
        self.write_now(addr, data)

    async def read(self, addr: int, size: int) -> bytes:
        return self.read_now(addr, size)


class _MemoryBackdoor:
    """The SBUF and PSUM arrays of a core (``hdl.sim_top.core_memories``), read through VPI:
    SBUF partition p, word w is row w // L of memory ``sbuf.part<p>_lane<w mod L>``
    (``hdl.core``'s SBUF, L its lanes); PSUM bank b, word w is row b·W + w of
    ``te.psum.mem``, partition p its bits 32p .. 32p + 31 (paths below the core)."""

    def __init__(self, sbuf_arrays, psum_array, cfg):
        self.cfg, self.lanes = cfg, len(sbuf_arrays[0])
        self._sbuf = [[[h[i] for i in range(-(-cfg.sbuf_words // self.lanes))] for h in part]
                      for part in sbuf_arrays]
        self._psum = [psum_array[i] for i in range(cfg.psum_banks * cfg.psum_words)]

    def sbuf(self) -> np.ndarray:
        c, L = self.cfg, self.lanes
        out = np.zeros((c.n, c.sbuf_words), dtype=np.uint32)
        for p, lanes in enumerate(self._sbuf):
            for w in range(c.sbuf_words):
                out[p, w] = lanes[w % L][w // L].value.to_unsigned()
        return out

    def psum(self) -> np.ndarray:
        c = self.cfg
        rows = [h.value.to_unsigned() for h in self._psum]
        out = np.zeros((c.n, c.psum_banks, c.psum_words), dtype=np.uint32)
        for i, row in enumerate(rows):
            b, w = divmod(i, c.psum_words)
            for p in range(c.n):
                out[p, b, w] = (row >> (32 * p)) & 0xFFFF_FFFF
        return out


def _memory_backdoor(dut, cfg, suffix: str) -> _MemoryBackdoor | None:
    """The backdoor of a core whose SBUF and PSUM memories are visible (the paths of
    ``hdl.sim_top.core_memories``), else None: the top itself or its ``core``, or with a
    ``suffix`` r, core r of a ring (``ring.core<r>``, ``core<r>``)."""
    if suffix:
        prefix = f"ring.core{suffix}." if hasattr(dut, "ring") else f"core{suffix}."
    else:
        prefix = "core." if hasattr(dut, "core") else ""
    paths = core_memories(prefix, n=cfg.n, data_width=cfg.data_width)
    try:
        psum, *sbuf = (functools.reduce(getattr, path.split("."), dut) for path in paths)
    except AttributeError:
        return None
    lanes = cfg.data_width // 8
    return _MemoryBackdoor([sbuf[p * lanes:(p + 1) * lanes] for p in range(cfg.n)], psum, cfg)


def _stall_rate(p: float) -> int:
    """A pause probability per cycle as ``hdl.sim_top.AxiStalls``' rate (out of 256)."""
    if not 0 <= p < 1:
        raise ValueError(f"dram_pauses must be a probability in [0, 1), not {p!r}")
    return min(round(256 * p), 255)


class CoreHost(CoreDriver):
    """One core's host side in cocotb. ``cfg`` is the core's ``golden.iss.CoreConfig``;
    ``perf_names`` the names of its performance counters (``hdl.core.PERF_COUNTERS``);
    ``suffix`` picks the core's ports ``axil<suffix>``, ``axi<suffix>``, ``busy<suffix>``, ...
    (``hdl.multicore``, ``hdl.sim_top.RingWithDram``); ``dram_pauses`` the probability of a
    pause on each DRAM channel per cycle, random from ``rng``.

    ``dram`` (:data:`DRAM_BACKENDS`, see the module's text): ``"axiram"`` (cocotbext-axi's
    ``AxiRam`` on ``axi<suffix>``; it answers every access until :attr:`faults`, a
    :class:`DramFaults`, is given a window) or ``"memory"`` (``hdl.sim_top``'s memory
    ``mem<suffix>.ram``, ``dram_pauses`` as its ``dram_stall_rate<suffix>``; :attr:`faults`
    is None). ``None``: ``"memory"`` on a top with a ``dram_stall_rate<suffix>`` port, else
    ``"axiram"``. Both draw the same numbers from ``rng``, so a test's data do not depend on
    the backend.

    ``queue_depth`` (the core's command queue's, on a top of ``hdl.sim_top``): the programs'
    pushes are played by the top's register player (:meth:`push_program`) instead of written
    through cocotbext-axi's master, which still makes every other register access.
    """

    def __init__(self, dut, cfg, perf_names=(), *, dram_pauses: float = 0.0, rng=None,
                 suffix: str = "", dram: str | None = None, queue_depth: int | None = None):
        self.dut = dut
        if dram is None:
            dram = "memory" if hasattr(dut, f"dram_stall_rate{suffix}") else "axiram"
        if dram not in DRAM_BACKENDS:
            raise ValueError(f"dram must be one of {DRAM_BACKENDS}, not {dram!r}")
        self.dram_backend = dram
        regs = AxiLiteMaster(AxiLiteBus.from_prefix(dut, f"axil{suffix}_"), dut.clk, dut.rst)
        # cocotbext-axi logs every register access at INFO: thousands of lines per program,
        # which cost more Python than the accesses. Warnings still show.
        for side in (regs.write_if, regs.read_if):
            side.log.setLevel(logging.WARNING)
        rate = _stall_rate(dram_pauses)
        seeds = []
        if dram_pauses:
            rng = rng if rng is not None else np.random.default_rng(0)
            seeds = [int(rng.integers(1 << 30)) for _ in range(5)]  # one per AXI4 channel

        async def wait(cycles):
            await ClockCycles(dut.clk, cycles)

        async def sleep(cycles):  # a Timer, not ClockCycles: no Python every cycle
            await Timer(cycles * CLOCK_PERIOD_NS, "ns")

        self.ram, self.faults, until_idle = None, None, None
        if dram == "axiram":
            self.ram = AxiRam(AxiBus.from_prefix(dut, f"axi{suffix}_"), dut.clk, dut.rst,
                              size=cfg.dram_bytes)
            port = AxiRamPort(self.ram)
            self.faults = DramFaults(self.ram)
            for ch, seed in zip((self.ram.read_if.ar_channel, self.ram.read_if.r_channel,
                                 self.ram.write_if.aw_channel, self.ram.write_if.w_channel,
                                 self.ram.write_if.b_channel), seeds, strict=False):
                ch.set_pause_generator(streams.pauses(np.random.default_rng(seed), dram_pauses))
        else:
            port = MemoryPort(getattr(dut, f"mem{suffix}").ram, cfg.dram_bytes)
            # The stalls' generator takes its seed at the first clock edge after reset.
            getattr(dut, f"dram_stall_rate{suffix}").value = rate
            getattr(dut, f"dram_stall_seed{suffix}").value = seeds[0] if seeds else 0
            busy = getattr(dut, f"busy{suffix}")

            async def until_idle(limit, poll):
                t0 = sim_cycles()
                if busy.value:
                    await First(FallingEdge(busy), Timer(limit * CLOCK_PERIOD_NS, "ns"))
                else:  # STATUS says busy, the wire not: descriptors wait in the queue
                    await sleep(poll)
                return max(sim_cycles() - t0, 1)

            wait = sleep

        self._suffix = suffix
        self._player, self.last_played = None, None
        has_player = hasattr(dut, f"regs{suffix}_batch__valid")
        if queue_depth is not None:
            if not has_player:
                raise ValueError(f"queue_depth plays the pushes: the top needs the register "
                                 f"player of hdl.sim_top (port regs{suffix}_batch)")
            self._player = BatchSource(dut, f"regs{suffix}", k=REGISTER_BATCH)
            self._queue_depth = queue_depth
        elif has_player:  # idle, so that the port is the master's (not X in Icarus)
            getattr(dut, f"regs{suffix}_batch__valid").value = 0
        self.port = port
        self._backdoor = _memory_backdoor(dut, cfg, suffix)
        super().__init__(cfg, regs, port, wait=wait, now=sim_cycles, perf_names=perf_names,
                         until_idle=until_idle)

    async def push_program(self, program: list, timeout: int = 1_000_000, *,
                           burst: bool = True) -> None:
        """As :meth:`CoreDriver.push_program`; on a host made with ``queue_depth``, the
        accesses (:meth:`CoreDriver.push_accesses`) are played by the top's
        :class:`~hdl.register_player.RegisterPlayer`, with no Python per cycle, and this
        returns once the last is done (:attr:`last_played`: how many accesses, in how many
        cycles). ``timeout``: cycles the played pushes may wait for room in all (not per
        push, as :meth:`CoreDriver.push`'s); past it, :class:`CoreTimeout`, and the register
        port may hold a half-made write (reset the design before using it again)."""
        self.last_played = None
        if self._player is None:
            return await super().push_program(program, timeout, burst=burst)
        room = None
        if burst:
            level = REGISTER_MAP["STATUS"].get(await self.status(), "level")
            room = self._queue_depth - level
        accesses = self.push_accesses(program, room)
        t0 = sim_cycles()
        self._player.send(pack_access(*access) for access in accesses)
        limit = timeout + 16 * len(accesses)  # a played access takes a few cycles
        try:
            await with_timeout(self._player.wait(), limit * CLOCK_PERIOD_NS, "ns")
        except SimTimeoutError:
            self._player.clear()
            raise CoreTimeout(f"the played pushes waited over {timeout} cycles in all for "
                              f"room in the command queue") from None
        self.last_played = (len(accesses), sim_cycles() - t0)

    @property
    def has_backdoor(self) -> bool:
        """Whether :meth:`read_sbuf` and :meth:`read_psum` can read through VPI."""
        return self._backdoor is not None

    async def read_sbuf(self, *, debug: bool = False) -> np.ndarray:
        """Every SBUF word: through VPI where the top made the SBUF's memories visible
        (``hdl.sim_top.core_memories``), in zero time, unless ``debug``; else (and with
        ``debug``) by the debug registers, as software does."""
        if self._backdoor is None or debug:
            return await super().read_sbuf()
        return self._backdoor.sbuf()

    async def read_psum(self, *, debug: bool = False) -> np.ndarray:
        """Every PSUM word, as :meth:`read_sbuf`."""
        if self._backdoor is None or debug:
            return await super().read_psum()
        return self._backdoor.psum()

    def dram_stalls(self) -> int:
        """Cycles the RTL DRAM's stalls held a beat back so far (``"memory"`` only)."""
        if self.dram_backend != "memory":
            raise ValueError("dram_stalls counts the stalls of the RTL memory (dram='memory')")
        return int(getattr(self.dut, f"dram_stalls{self._suffix}").value)

    # Direct (zero-time) DRAM access for testbenches.

    def write_dram(self, addr: int, data) -> None:
        data = bytes(np.asarray(data, dtype=np.uint8).reshape(-1))
        if self.ram is not None:
            self.ram.write(addr, data)
        else:
            self.port.write_now(addr, data)

    def read_dram(self, addr: int = 0, size: int | None = None) -> np.ndarray:
        size = self.cfg.dram_bytes - addr if size is None else size
        raw = self.ram.read(addr, size) if self.ram is not None else self.port.read_now(addr,
                                                                                       size)
        return np.frombuffer(raw, dtype=np.uint8).copy()


def sim_cycles() -> int:
    """Clock cycles of simulated time so far (the testbenches' clock, ``tbutil``)."""
    from cocotb.utils import get_sim_time

    return int(get_sim_time("ns")) // CLOCK_PERIOD_NS
