"""The host driver of one NeuronCore, on any bus: registers, programs, memories.

:class:`CoreDriver` drives ``hdl.core.NeuronCore`` only through its register block
(``golden.isa.REGISTER_MAP``) and DRAM, the way software drives the hardware. Programs are
lists of descriptors (``golden.isa``, e.g. from ``sim.host.programs``); :meth:`CoreDriver.run`
pushes them while the queue has room and waits until the core is idle.
:meth:`CoreDriver.read_sbuf` and :meth:`CoreDriver.read_psum` read every word back through the
debug registers, so a caller can compare each memory with ``golden.iss.NeuronCoreISS``.

The buses are passed in: ``sim.host.core.CoreHost`` is this driver in a cocotb simulation
(cocotbext-axi's AXI4-Lite master; DRAM cocotbext-axi's ``AxiRam`` or the RTL memory of
``hdl.sim_top`` through a backdoor); ``sim.host.board`` puts it on the UART bridge of the FPGA board
(real, or the board top simulated in cocotb). No simulator import here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from golden.isa import CORE_ID, REGISTER_MAP, REGISTERS, Ctrl, DebugSpace, ErrorCode, Status

__all__ = ["CoreDriver", "CoreTimeout", "RunResult", "STATUS_BITS"]

R = REGISTERS
#: STATUS bits the driver reads (``golden.isa.Status``), by name.
STATUS_BITS = {m.name.lower(): int(m) for m in (Status.BUSY, Status.ERROR, Status.FULL,
                                                Status.DEBUG_TIMEOUT)}


class CoreTimeout(AssertionError):
    """The core stayed busy longer than the caller allowed (a hang: always a bug)."""


@dataclass
class RunResult:
    error: ErrorCode
    error_index: int | None  # position in the program of the failing command
    executed: int  # commands of this program executed
    cycles: int  # clock cycles from the first push until idle
    perf: dict[str, int]


def _debug_addr(space: int, part: int, word: int, bank: int = 0) -> int:
    return REGISTER_MAP["DBG_ADDR"].pack(space=space, part=part, word=word, bank=bank)


class CoreDriver:
    """One core's host side, on any bus. ``cfg`` is the core's ``golden.iss.CoreConfig``;
    ``perf_names`` the names of its performance counters (``hdl.core.PERF_COUNTERS``).

    ``regs`` reaches the register block: ``async read_dword(addr)`` / ``write_dword(addr,
    value)`` (cocotbext-axi's ``AxiLiteMaster``, or ``sim.host.uart_link.BridgeClient`` through the
    board's UART bridge). ``dram`` reaches the core's DRAM: ``async write(addr, data: bytes)``
    and ``async read(addr, size) -> bytes``. ``wait(cycles)`` is a coroutine that lets about
    that many core clock cycles pass; ``now()`` the current cycle count (or ``None`` where
    there is no cycle clock: then :class:`RunResult` cycles come from the busy counter).
    With ``burst_push``, ``regs`` also has ``async write_words(addr, words)`` (32-bit words)
    and a descriptor is pushed as one burst. ``poll_cycles``: cycles between two STATUS polls
    while waiting for the core. ``until_idle(limit, poll)``, where the core's ``busy`` wire
    can be watched (``sim.host.core``): a coroutine that returns the cycles it waited, once the
    wire is low (at most ``limit`` cycles; about ``poll`` if it was low already); then
    :meth:`wait_idle` reads STATUS only when the wire says the core may be idle, instead of
    every ``poll_cycles``.
    """

    def __init__(self, cfg, regs, dram, *, wait, now, perf_names=(), burst_push=False,
                 poll_cycles: int = 4, until_idle=None):
        self.cfg, self.perf_names = cfg, tuple(perf_names)
        self.regs, self.dram = regs, dram
        self._wait, self._now = wait, now
        self._until_idle = until_idle
        self._burst_push = burst_push
        self.poll_cycles = poll_cycles

    # --- registers ---------------------------------------------------------------------------

    async def read(self, name: str, index: int = 0) -> int:
        return await self.regs.read_dword(R[name] + 4 * index)

    async def write(self, name: str, value: int, index: int = 0) -> None:
        await self.regs.write_dword(R[name] + 4 * index, int(value) & 0xFFFFFFFF)

    async def check_id(self) -> None:
        got = await self.read("ID")
        if got != CORE_ID:
            raise AssertionError(f"ID register reads 0x{got:08x}, not 0x{CORE_ID:08x}")

    async def status(self) -> int:
        return await self.read("STATUS")

    async def error(self) -> tuple[ErrorCode, int]:
        v, reg = await self.read("ERROR"), REGISTER_MAP["ERROR"]
        return ErrorCode(reg.get(v, "code")), reg.get(v, "index")

    async def perf(self) -> dict[str, int]:
        return {name: await self.read("PERF0", i) for i, name in enumerate(self.perf_names)}

    async def clear_error(self) -> None:
        await self.write("CTRL", Ctrl.CLEAR_ERROR)

    async def soft_reset(self, timeout: int = 100_000) -> None:
        await self.write("CTRL", Ctrl.SOFT_RESET)
        await self.wait_idle(timeout)

    # --- programs ----------------------------------------------------------------------------

    async def push(self, words, timeout: int = 1_000_000) -> None:
        """Queue one descriptor, waiting while the queue is full."""
        waited, poll = 0, max(8, self.poll_cycles)
        while await self.status() & Status.FULL:
            await self._wait(poll)
            waited += poll
            if waited > timeout:
                raise CoreTimeout(f"the command queue stayed full for {waited} cycles")
        words = np.asarray(words, dtype=np.uint32).tolist()
        if self._burst_push:
            # DESC0..7 and PUSH are consecutive: one burst where the bus has bursts (the UART
            # bridge), eight frames fewer per descriptor.
            assert R["PUSH"] == R["DESC0"] + 4 * len(words)
            await self.regs.write_words(R["DESC0"], [*words, 0])
            return
        for i, w in enumerate(words):
            await self.write("DESC0", w, i)
        await self.write("PUSH", 0)

    async def push_program(self, program: list, timeout: int = 1_000_000, *,
                           burst: bool = True) -> None:
        """Push every descriptor of ``program`` (what :meth:`run` does before it waits): with
        ``burst``, those that fit while the queue is paused, then the rest as it drains."""
        i = 0
        if burst:
            await self.write("CTRL", Ctrl.PAUSE)
            while i < len(program) and not await self.status() & Status.FULL:
                await self.push(program[i], timeout)
                i += 1
            await self.write("CTRL", 0)
        for words in program[i:]:
            await self.push(words, timeout)

    @staticmethod
    def push_accesses(program: list, room: int | None) -> list[tuple[bool, int, int]]:
        """:meth:`push_program`'s register accesses as data, for a host that plays them
        (``sim.host.core.CoreHost``): ``(wait, byte address, value)``, a write of ``value``
        or (``wait``) a read repeated until the bits set in ``value`` read 0. ``room``: the
        descriptors the queue takes while paused (its free entries: the burst), or None
        for no burst. Each later descriptor waits until STATUS no longer reads FULL, as
        :meth:`push` does. (It spells out :meth:`push` and :meth:`push_program`'s writes
        again: a change to one is a change to the other; ``played_pushes`` in
        ``sim/tb/core.py`` runs both kinds of push.)"""
        out: list[tuple[bool, int, int]] = []

        def push(words, wait: bool) -> None:
            if wait:
                out.append((True, R["STATUS"], int(Status.FULL)))
            out.extend((False, R["DESC0"] + 4 * i, int(w) & 0xFFFFFFFF)
                       for i, w in enumerate(words))
            out.append((False, R["PUSH"], 0))

        first = 0
        if room is not None:
            first = min(room, len(program))
            out.append((False, R["CTRL"], int(Ctrl.PAUSE)))
            for words in program[:first]:
                push(words, False)
            out.append((False, R["CTRL"], 0))
        for words in program[first:]:
            push(words, True)
        return out

    async def wait_idle(self, timeout: int = 1_000_000, poll: int | None = None) -> int:
        """Poll STATUS until the core is not busy; returns the cycles waited."""
        waited, poll = 0, poll or self.poll_cycles
        while await self.status() & Status.BUSY:
            if self._until_idle is not None:
                waited += await self._until_idle(max(timeout + 1 - waited, 1), poll)
            else:
                await self._wait(poll)
                waited += poll
            if waited > timeout:
                raise CoreTimeout(f"the core stayed busy for {waited} cycles (STATUS "
                                  f"0x{await self.status():08x})")
        return waited

    async def run(self, program, timeout: int = 1_000_000, *, burst: bool = True) -> RunResult:
        """Push every descriptor of ``program`` and wait until the core is idle. A program
        that fails stops the queue: its later descriptors are dropped by the core.

        With ``burst`` the queue is paused (``Ctrl.PAUSE``) while it is filled, so the first
        descriptors reach the sequencer back to back, as from a host faster than this bus."""
        start = await self.read("EXECUTED")
        t0 = self._now()
        await self.push_program(list(program), timeout, burst=burst)
        await self.wait_idle(timeout)
        t1 = self._now()
        code, index = await self.error()
        executed = await self.read("EXECUTED") - start
        perf = await self.perf()
        cycles = t1 - t0 if t0 is not None else perf.get("busy")
        return RunResult(code, index - start if code != ErrorCode.OK else None, executed,
                         cycles, perf)

    # --- memories ----------------------------------------------------------------------------

    async def load_dram(self, addr: int, data) -> None:
        """Write bytes (any array, as uint8) into DRAM at ``addr``."""
        await self.dram.write(addr, bytes(np.asarray(data, dtype=np.uint8).reshape(-1)))

    async def fetch_dram(self, addr: int = 0, size: int | None = None) -> np.ndarray:
        """Read ``size`` bytes of DRAM (default: to the end) as uint8."""
        size = self.cfg.dram_bytes - addr if size is None else size
        return np.frombuffer(await self.dram.read(addr, size), dtype=np.uint8).copy()

    async def debug_read(self, space: int, part: int, word: int, bank: int = 0) -> int:
        await self.write("DBG_ADDR", _debug_addr(space, part, word, bank))
        return await self.read("DBG_DATA")

    async def read_sbuf(self) -> np.ndarray:
        c = self.cfg
        out = np.zeros((c.n, c.sbuf_words), dtype=np.uint32)
        for p in range(c.n):
            for w in range(c.sbuf_words):
                out[p, w] = await self.debug_read(DebugSpace.SBUF, p, w)
        await self._check_debug()
        return out

    async def _check_debug(self) -> None:
        if await self.status() & Status.DEBUG_TIMEOUT:
            raise CoreTimeout("a debug read timed out: the port stayed busy (STATUS bit 4)")

    async def read_psum(self) -> np.ndarray:
        c = self.cfg
        out = np.zeros((c.n, c.psum_banks, c.psum_words), dtype=np.uint32)
        for p in range(c.n):
            for b in range(c.psum_banks):
                for w in range(c.psum_words):
                    out[p, b, w] = await self.debug_read(DebugSpace.PSUM, p, w, b)
        await self._check_debug()
        return out
