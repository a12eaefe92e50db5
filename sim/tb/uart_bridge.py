"""cocotb testbench: ``hdl.uart_bridge.UartAxiLiteBridge`` through its UART pins.

The host is ``sim.host.uart_link.BridgeClient`` over ``sim.tb.uart.CocotbUartTransport``
(cocotbext-uart); the AXI4-Lite slave is cocotbext-axi's ``AxiLiteRam`` (``RAM_BYTES`` at
address 0, answering OKAY everywhere and wrapping addresses modulo its size) with hooks that
log every access and let a test make chosen words answer EXOKAY / SLVERR / DECERR. A bus
monitor checks the master's side of AXI4-Lite every cycle (valid held with its payload until
ready, ``wstrb`` all ones, one transaction at a time) and counts the handshakes, so a test
can tell that a frame caused no access. A Python copy of the RAM is the reference.

Tests: ``reads_and_writes`` (random single and burst reads and writes, light back-pressure);
``backpressure`` (heavy random pauses on all five channels); ``axi_errors`` (the first
failing beat's code and index; earlier beats done, later ones never issued);
``malformed_frames`` (bad CRC, unknown command, bad count, unaligned or out-of-range
address, a frame cut short, garbage before the sync byte, bytes sent during a response, a
UART framing error: each rejected or dropped as the protocol says, counted, without any AXI
access, and the bridge works afterwards); ``garbage_burst`` (line noise: random levels for
random times, glitches shorter than a bit, then random bytes with sync bytes among them:
any response is dropped, no AXI access, the errors show in the counters, and a normal
write and read work afterwards); ``reset_midway`` (``rst`` for 1..4 cycles while a frame is
half received, while a burst's AXI beats are under way with heavy back-pressure, and while
a response is being sent: no response or AXI access follows, only a prefix of a write's
words lands, the counters read 0, and the bridge works afterwards).

Every test has a cocotb timeout (simulated time, about ten times what it needs).
"""

from __future__ import annotations

import collections

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, First, ReadOnly, RisingEdge, Timer
from cocotbext.axi import AxiLiteBus, AxiLiteRam, AxiResp

from hdl.uart_bridge import MAX_WORDS, STATUS_COUNTERS, Command, Status
from sim.host.uart_link import (
    BridgeClient,
    BridgeError,
    crc8,
    decode_response,
    encode_frame,
    encode_read,
    encode_write,
)
from sim.tb import streams, tbutil
from sim.tb.uart import CocotbUartTransport

RAM_BYTES = 0x1000


class BridgeTB:
    def __init__(self, dut):
        self.dut = dut
        prm = tbutil.params()
        self.divisor = prm["divisor"]
        self.timeout = prm.get("timeout", 10_000)
        self.addr_width = prm.get("addr_width", 32)
        self.bit_ns = self.divisor * tbutil.CLOCK_PERIOD_NS
        self.seed = tbutil.seed()
        self.rng = tbutil.rng(0xB41D)
        self.model = bytearray(self.rng.integers(0, 256, RAM_BYTES, dtype=np.uint8).tobytes())
        self.ram = AxiLiteRam(AxiLiteBus.from_prefix(dut, "axil_"), dut.clk, dut.rst,
                              size=RAM_BYTES)
        self.ram.write(0, bytes(self.model))
        self.faults: dict[int, AxiResp] = {}  # word address -> the response it gives
        self.accesses: list[tuple[str, int]] = []  # (read / write, address) as the slave saw
        self._hook_ram()
        self.handshakes = collections.Counter()
        self.expect = collections.Counter()  # the bridge's counters, as they should be

    def _hook_ram(self):
        """Log the slave's accesses; a word in ``faults`` answers its response, untouched."""
        for kind, iface, channel, field in (
                ("read", self.ram.read_if, self.ram.read_if.r_channel, "rresp"),
                ("write", self.ram.write_if, self.ram.write_if.b_channel, "bresp")):
            op = iface._read if kind == "read" else iface._write
            send = channel.send
            pending = []

            async def hooked_op(address, arg, op=op, kind=kind, pending=pending):
                self.accesses.append((kind, address))
                resp = self.faults.get(address, AxiResp.OKAY)
                pending.append(resp)
                if resp == AxiResp.OKAY:
                    return await op(address, arg)
                return bytes(arg) if kind == "read" else None

            async def hooked_send(txn, send=send, field=field, pending=pending):
                if pending:
                    resp = pending.pop()
                    if resp != AxiResp.OKAY:
                        setattr(txn, field, resp)
                await send(txn)

            if kind == "read":
                iface._read = hooked_op
            else:
                iface._write = hooked_op
            channel.send = hooked_send

    def set_pauses(self, p: float):
        for ch in (self.ram.read_if.ar_channel, self.ram.read_if.r_channel,
                   self.ram.write_if.aw_channel, self.ram.write_if.w_channel,
                   self.ram.write_if.b_channel):
            ch.set_pause_generator(
                streams.pauses(np.random.default_rng(int(self.rng.integers(1 << 30))), p)
                if p else None)

    async def start(self):
        dut = self.dut
        dut.rx.value = 1
        for name in ("awready", "wready", "bvalid", "arready", "rvalid"):
            getattr(dut, f"axil__{name}").value = 0
        await tbutil.start_clock(dut)
        await tbutil.reset(dut)
        self.link = CocotbUartTransport(dut.tx, dut.rx, self.bit_ns,
                                        timeout_ns=(self.timeout + 1000) * self.bit_ns)
        self.client = BridgeClient(self.link)
        cocotb.start_soon(self._monitor())

    async def _monitor(self):
        """Samples the bus every cycle while a transaction is offered or open; sleeps until
        a valid rises otherwise (the UART keeps the bus idle most of the time)."""
        dut = self.dut
        stall = {ch: tbutil.StallMonitor(f"axil.{ch}") for ch in ("aw", "w", "ar")}
        starts = [getattr(dut, f"axil__{ch}valid") for ch in ("aw", "w", "ar")]
        open_writes = open_reads = 0
        busy = False
        while True:
            if not busy:
                await First(*(RisingEdge(s) for s in starts))
            await FallingEdge(dut.clk)
            await ReadOnly()
            if dut.rst.value:  # a reset ends every transaction (reset_midway)
                stall = {ch: tbutil.StallMonitor(f"axil.{ch}") for ch in ("aw", "w", "ar")}
                open_writes = open_reads = 0
                busy = True
                continue
            v = {n: int(getattr(dut, f"axil__{n}").value) for n in (
                "awvalid", "awready", "awaddr", "wvalid", "wready", "wdata", "wstrb",
                "bvalid", "bready", "arvalid", "arready", "araddr", "rvalid", "rready")}
            for ch, payload in (("aw", v["awaddr"]), ("w", (v["wdata"], v["wstrb"])),
                                ("ar", v["araddr"])):
                if stall[ch].sample(bool(v[f"{ch}valid"]), payload, bool(v[f"{ch}ready"])) \
                        is not None:
                    self.handshakes[ch] += 1
            if v["wvalid"]:
                assert v["wstrb"] == 0xF, f"wstrb 0x{v['wstrb']:x} (seed {self.seed})"
            if v["awvalid"] or v["wvalid"]:
                assert open_reads == 0 and not v["arvalid"], "a write while a read is open"
            if v["arvalid"]:
                assert open_writes == 0 and open_reads == 0, "a read while another is open"
            if v["awvalid"] and v["awready"]:
                assert open_writes == 0, "a second write before B"
                open_writes += 1
            if v["arvalid"] and v["arready"]:
                open_reads += 1
            if v["bvalid"] and v["bready"]:
                self.handshakes["b"] += 1
                open_writes -= 1
            if v["rvalid"] and v["rready"]:
                self.handshakes["r"] += 1
                open_reads -= 1
            # A write is open from its AW handshake to B (W may still be offered).
            busy = bool(open_writes or open_reads or v["awvalid"] or v["wvalid"]
                        or v["arvalid"] or v["bvalid"] or v["rvalid"])

    # --- Helpers. --------------------------------------------------------------------------
    def random_words(self, n: int) -> list[int]:
        return [int(w) for w in self.rng.integers(0, 1 << 32, n, dtype=np.uint64)]

    def random_span(self, max_words: int = MAX_WORDS + 8) -> tuple[int, int]:
        n = int(self.rng.integers(1, max_words + 1))
        return 4 * int(self.rng.integers(0, RAM_BYTES // 4 - n + 1)), n

    def model_words(self, addr: int, n: int) -> list[int]:
        return [int.from_bytes(self.model[a:a + 4], "little") for a in range(addr, addr + 4 * n, 4)]

    def model_write(self, addr: int, words) -> None:
        for i, w in enumerate(words):
            self.model[addr + 4 * i:addr + 4 * i + 4] = int(w).to_bytes(4, "little")

    def bursts(self, n: int) -> int:
        return -(-n // MAX_WORDS)

    async def write(self, addr: int, words) -> None:
        await self.client.write_words(addr, words)
        self.model_write(addr, words)
        self.expect["frames"] += self.bursts(len(words))

    async def read_check(self, addr: int, n: int) -> None:
        got = await self.client.read_words(addr, n)
        self.expect["frames"] += self.bursts(n)
        want = self.model_words(addr, n)
        assert got == want, (f"read of {n} words at 0x{addr:x}: {tbutil.hexs(got)} != "
                             f"{tbutil.hexs(want)} (seed {self.seed})")

    async def check_counters(self) -> None:
        self.expect["frames"] += 1  # the STATUS request counts itself
        got = await self.client.status()
        want = {name: self.expect[name] for name in STATUS_COUNTERS}
        assert got == want, f"counters {got} != {want} (seed {self.seed})"

    def check_ram(self) -> None:
        assert bytes(self.ram.read(0, RAM_BYTES)) == bytes(self.model), \
            f"RAM differs from the reference (seed {self.seed})"

    async def random_traffic(self, ops: int) -> None:
        for _ in range(ops):
            addr, n = self.random_span()
            if self.rng.random() < 0.3:
                n = 1
            if self.rng.random() < 0.5:
                await self.write(addr, self.random_words(n))
            else:
                await self.read_check(addr, n)
        self.check_ram()

    async def sanity(self) -> None:
        """A write and a read still work."""
        addr, n = self.random_span(2)
        await self.write(addr, self.random_words(n))
        await self.read_check(addr, n)

    def quiet(self, handshakes_before, accesses_before: int, what: str) -> None:
        assert self.handshakes == handshakes_before and len(self.accesses) == accesses_before, \
            f"{what} caused AXI traffic {self.handshakes - handshakes_before} (seed {self.seed})"


@cocotb.test(timeout_time=10, timeout_unit="ms")
async def reads_and_writes(dut):
    tb = BridgeTB(dut)
    tb.set_pauses(0.1)
    await tb.start()
    # Single words through the AxiLiteMaster-like calls first.
    for _ in range(4):
        addr = 4 * int(tb.rng.integers(0, RAM_BYTES // 4))
        assert await tb.client.read_dword(addr) == tb.model_words(addr, 1)[0]
        value = tb.random_words(1)[0]
        await tb.client.write_dword(addr, value)
        tb.model_write(addr, [value])
        assert await tb.client.read_dword(addr) == value
        tb.expect["frames"] += 3
    # Full bursts, at both ends of the RAM.
    for addr in (0, RAM_BYTES - 4 * MAX_WORDS):
        await tb.write(addr, tb.random_words(MAX_WORDS))
        await tb.read_check(addr, MAX_WORDS)
    await tb.random_traffic(14)
    assert tb.handshakes["aw"] == tb.handshakes["w"] == tb.handshakes["b"]
    assert tb.handshakes["ar"] == tb.handshakes["r"]
    await tb.check_counters()
    dut._log.info("reads and writes: %d AXI beats checked (seed %d)",
                  tb.handshakes["b"] + tb.handshakes["r"], tb.seed)


@cocotb.test(timeout_time=10, timeout_unit="ms")
async def backpressure(dut):
    tb = BridgeTB(dut)
    tb.set_pauses(0.7)
    await tb.start()
    await tb.random_traffic(8)
    await tb.check_counters()


@cocotb.test(timeout_time=10, timeout_unit="ms")
async def axi_errors(dut):
    tb = BridgeTB(dut)
    tb.set_pauses(0.2)
    await tb.start()
    codes = [AxiResp.SLVERR, AxiResp.DECERR, AxiResp.EXOKAY]
    for i in range(8):
        addr, n = tb.random_span(MAX_WORDS)
        bad = int(tb.rng.integers(0, n))
        resp = codes[i % len(codes)]
        tb.faults = {addr + 4 * bad: resp}
        before = collections.Counter(tb.handshakes)
        write = i % 2 == 0
        words = tb.random_words(n)
        try:
            if write:
                await tb.client.write_words(addr, words)
            else:
                await tb.client.read_words(addr, n)
        except BridgeError as exc:
            assert exc.status == Status(int(resp)) and exc.beat == bad, \
                f"{exc} for a fault at word {bad} of {n}, {resp.name} (seed {tb.seed})"
            assert resp.name in str(exc)
        else:
            raise AssertionError(f"no error for {resp.name} at word {bad} (seed {tb.seed})")
        beats = tb.handshakes - before
        ch = ("aw", "w", "b") if write else ("ar", "r")
        assert beats == {c: bad + 1 for c in ch}, \
            f"{dict(beats)} for a fault at word {bad} (seed {tb.seed})"
        if write:
            tb.model_write(addr, words[:bad])
        tb.expect["frames"] += 1
        tb.expect["axi_errors"] += 1
        tb.faults = {}
        tb.check_ram()
    await tb.sanity()
    await tb.check_counters()


@cocotb.test(timeout_time=10, timeout_unit="ms")
async def malformed_frames(dut):
    tb = BridgeTB(dut)
    await tb.start()
    link, client, rng = tb.link, tb.client, tb.rng
    quiet_bits = tb.timeout + 30  # longer than the bridge waits on a silent line

    async def rejected(frame: bytes, status: Status, what: str, dropped: int = 0):
        before, accesses = collections.Counter(tb.handshakes), len(tb.accesses)
        resp = await client.request(frame, frame[1] if len(frame) > 1 else 0)
        assert resp.status == status and resp.data == b"", \
            f"{what}: {resp} instead of {status.name} (seed {tb.seed})"
        await link.idle(quiet_bits)
        assert link.pending() == 0, f"{what}: more than one response (seed {tb.seed})"
        tb.quiet(before, accesses, what)
        tb.expect["rejected"] += 1
        tb.expect["bad_crc" if status == Status.BAD_CRC else "bad_command"] += 1
        tb.expect["dropped_bytes"] += dropped
        await tb.sanity()

    addr, n = tb.random_span(MAX_WORDS)
    good_write = encode_write(addr, tb.random_words(n))
    # Bad CRC (one flipped bit: CRC-8 catches every one): in the CRC byte, in the address
    # (bits 8..15, so it stays aligned and in range), in the data; a read; a status request.
    for pos in (len(good_write) - 1, 4, 7, len(good_write) - 2):
        frame = bytearray(good_write)
        frame[pos] ^= 1 << int(rng.integers(0, 8))
        await rejected(bytes(frame), Status.BAD_CRC, f"a bad CRC (byte {pos})")
    frame = encode_read(addr, n)
    await rejected(frame[:-1] + bytes([frame[-1] ^ 0x80]), Status.BAD_CRC, "a bad read CRC")
    await rejected(bytes([0xA5, Command.STATUS, 0x00]), Status.BAD_CRC, "a bad status CRC")

    # Unknown commands: the rest of the frame is drained, even a whole request inside it.
    inner = encode_write(addr, [0xDEADBEEF])
    for cmd in (0x00, 0x04, 0x7F, 0xA5, 0xFF):
        tail = encode_frame(0, 1, addr)[2:] + inner
        await rejected(bytes([0xA5, cmd]) + tail, Status.BAD_COMMAND,
                       f"command 0x{cmd:02x}", dropped=len(tail))
    # Bad counts.
    for count in (0, MAX_WORDS + 1, 0xFF):
        frame = encode_frame(Command.READ, count, addr)
        await rejected(frame, Status.BAD_COUNT, f"count {count}", dropped=len(frame) - 3)
        frame = encode_frame(Command.WRITE, count, addr, bytes(8))
        await rejected(frame, Status.BAD_COUNT, f"count {count}", dropped=len(frame) - 3)
    # Unaligned or out-of-range addresses.
    top = 1 << tb.addr_width
    bad_addrs = [(addr + 1, 1), (addr + 2, 2), (addr + 3, MAX_WORDS), (top - 4, 2),
                 (top - 4 * MAX_WORDS + 4, MAX_WORDS)]
    if top < 1 << 32:
        bad_addrs += [(top, 1), ((1 << 32) - 4, 1)]
    for a, c in bad_addrs:
        frame = encode_frame(Command.WRITE, c, a, bytes(4 * c))
        await rejected(frame, Status.BAD_COMMAND, f"write at 0x{a:x}", len(frame) - 7)
        frame = encode_frame(Command.READ, c, a)
        await rejected(frame, Status.BAD_COMMAND, f"read at 0x{a:x}", len(frame) - 7)
    # A burst that ends exactly at the top of the address space is fine (the RAM wraps).
    got = await client.read_words(top - 4 * MAX_WORDS, MAX_WORDS)
    assert got == tb.model_words(RAM_BYTES - 4 * MAX_WORDS, MAX_WORDS), f"seed {tb.seed}"
    tb.expect["frames"] += 1
    await tb.check_counters()

    # Frames cut short: no response, counted, nothing done; then the bridge works.
    for cut in (1, 2, 5, 7, 10, len(good_write) - 1):
        before, accesses = collections.Counter(tb.handshakes), len(tb.accesses)
        await link.send(good_write[:cut])
        await link.idle(quiet_bits)
        assert link.pending() == 0, f"a response to a frame cut at {cut} (seed {tb.seed})"
        tb.quiet(before, accesses, f"a frame cut at {cut}")
        tb.expect["rejected"] += 1
        tb.expect["timeouts"] += 1
        await tb.sanity()
    # A gap inside a frame: the first part times out, the rest (with no sync byte in it) is
    # hunted through and dropped.
    read = encode_read(addr, n)
    while 0xA5 in read[4:]:
        read = encode_read(*tb.random_span(MAX_WORDS))
    await link.send(read[:4])
    await link.idle(quiet_bits)
    await link.send(read[4:])
    await link.idle(quiet_bits)
    assert link.pending() == 0, f"a response to a frame with a gap (seed {tb.seed})"
    tb.expect["rejected"] += 1
    tb.expect["timeouts"] += 1
    tb.expect["dropped_bytes"] += len(read) - 4
    await tb.check_counters()

    # Garbage before the sync byte is dropped; bytes sent during a response are dropped.
    garbage = bytes(int(b) for b in rng.integers(0, 256, 23) if b != 0xA5)
    addr2, n2 = tb.random_span(MAX_WORDS)
    words = tb.random_words(n2)
    await link.send(garbage + encode_write(addr2, words))
    resp = await link.recv(3)
    assert resp == bytes([0x5A, 0, 0]), f"write after garbage: {resp.hex()} (seed {tb.seed})"
    tb.model_write(addr2, words)
    tb.expect["dropped_bytes"] += len(garbage)
    tb.expect["frames"] += 1
    extra = encode_read(addr2, 1)  # a whole request, sent while the bridge answers
    addr16 = min(addr2, RAM_BYTES - 4 * MAX_WORDS)
    await link.send(encode_read(addr16, MAX_WORDS) + extra)
    resp = decode_response(await link.recv(3 + 4 * MAX_WORDS), Command.READ, MAX_WORDS)
    assert resp.status == Status.OK and resp.words == tb.model_words(addr16, MAX_WORDS), \
        f"{resp} (seed {tb.seed})"
    await link.idle(quiet_bits)
    assert link.pending() == 0, "a request sent during a response was answered"
    tb.expect["frames"] += 1
    tb.expect["dropped_bytes"] += len(extra)
    await tb.check_counters()

    # A UART framing error (stop bit 0), then a break: each counted once, nothing else.
    before, accesses = collections.Counter(tb.handshakes), len(tb.accesses)
    for byte, stop_bits_low in ((0xA5, 1), (0x00, 25)):
        bits = [0] + [(byte >> i) & 1 for i in range(8)] + [0] * stop_bits_low
        for b in bits:
            dut.rx.value = b
            await Timer(tb.bit_ns, "ns")
        dut.rx.value = 1
        await link.idle(quiet_bits)
        tb.expect["uart_errors"] += 1
    assert link.pending() == 0
    tb.quiet(before, accesses, "UART framing errors")
    await tb.sanity()
    await tb.check_counters()
    tb.check_ram()
    dut._log.info("malformed frames: all rejected and counted (seed %d)", tb.seed)


def _break_valid_frames(junk: bytearray) -> None:
    """Make sure no request frame hidden in ``junk`` passes its CRC (about 1 in 256 would:
    then the bridge rightly executes it, and garbage_burst's "nothing accepted" would fail on
    some seeds): every 0xA5 is taken as a frame start, whatever the parser's state, and a
    matching CRC byte is changed, until none matches."""
    changed = True
    while changed:
        changed = False
        for i in range(len(junk) - 1):
            if junk[i] != 0xA5 or junk[i + 1] not in (Command.WRITE, Command.READ,
                                                        Command.STATUS):
                continue
            cmd = junk[i + 1]
            if cmd == Command.STATUS:
                end = i + 2
            elif i + 2 < len(junk):  # WRITE, READ: COUNT, ADDR[4], the WRITE's data
                end = i + 7 + (4 * junk[i + 2] if cmd == Command.WRITE else 0)
            else:
                continue
            if end < len(junk) and junk[end] == crc8(bytes(junk[i + 1:end])):
                junk[end] ^= 0x5A if junk[end] ^ 0x5A != 0xA5 else 0x3C
                changed = True


@cocotb.test(timeout_time=4, timeout_unit="ms")
async def garbage_burst(dut):
    tb = BridgeTB(dut)
    await tb.start()
    link, rng = tb.link, tb.rng
    quiet_bits = tb.timeout + 30
    clk_ns = tbutil.CLOCK_PERIOD_NS
    for rnd in range(3):
        before, accesses = collections.Counter(tb.handshakes), len(tb.accesses)
        start = await tb.client.status()
        # Noise: random levels held for 1 cycle .. 3 bit times (glitches, broken bytes,
        # framing errors), now and then a break of 2..3 byte times.
        for _ in range(int(rng.integers(20, 60))):
            dut.rx.value = int(rng.integers(0, 2))
            await Timer(int(rng.integers(1, 3 * tb.divisor + 1)) * clk_ns, "ns")
        if rng.random() < 0.5:
            dut.rx.value = 0
            await Timer(int(rng.integers(20, 31)) * tb.bit_ns, "ns")
        dut.rx.value = 1
        await Timer(int(rng.integers(1, 12)) * tb.bit_ns, "ns")
        # Random bytes with request sync bytes and frame starts among them.
        junk = bytearray(int(b) for b in rng.integers(0, 256, int(rng.integers(10, 40))))
        for _ in range(4):
            at = int(rng.integers(0, len(junk)))
            junk[at:at] = bytes([0xA5, int(rng.choice([0x01, 0x02, 0x03, 0xA5]))])
        _break_valid_frames(junk)
        await link.send(bytes(junk))
        # Whatever frame the junk started times out or is drained and answered; then quiet.
        await link.idle(2 * quiet_bits)
        link.clear()
        await link.idle(quiet_bits)
        assert link.pending() == 0, f"round {rnd}: the bridge kept talking (seed {tb.seed})"
        tb.quiet(before, accesses, f"garbage burst {rnd}")
        end = await tb.client.status()
        delta = {k: end[k] - start[k] for k in STATUS_COUNTERS}
        assert delta["frames"] == 1 and delta["axi_errors"] == 0, \
            f"round {rnd}: {delta} (seed {tb.seed})"
        assert delta["uart_errors"] + delta["dropped_bytes"] + delta["rejected"] > 0, \
            f"round {rnd}: the garbage left no trace in the counters {delta} (seed {tb.seed})"
        assert delta["rejected"] == delta["bad_crc"] + delta["bad_command"] + delta["timeouts"]
        await tb.sanity()
    tb.check_ram()
    dut._log.info("garbage bursts: 3 rejected, bridge fine (seed %d)", tb.seed)


@cocotb.test(timeout_time=4, timeout_unit="ms")
async def reset_midway(dut):
    tb = BridgeTB(dut)
    tb.set_pauses(0.7)
    await tb.start()
    link, rng = tb.link, tb.rng
    quiet_bits = tb.timeout + 30

    async def wait_until(cond):
        while not cond():
            await FallingEdge(dut.clk)

    for where in ("a frame half received", "an AXI burst", "a response"):
        await tb.sanity()  # counters are not 0 before the reset
        n = int(rng.integers(4, MAX_WORDS + 1))
        addr = 4 * int(rng.integers(0, RAM_BYTES // 4 - n + 1))
        words = tb.random_words(n)
        hold = int(rng.integers(1, 5))
        before = collections.Counter(tb.handshakes)
        if where == "a frame half received":
            frame = encode_write(addr, words)
            cut = int(rng.integers(1, len(frame)))
            send = cocotb.start_soon(link.send(frame[:cut]))
            # rst rises inside the last byte sent, and is held to its end.
            await Timer((10 * (cut - 1) + int(rng.integers(1, 10))) * tb.bit_ns, "ns")
            dut.rst.value = 1
            await send
            await ClockCycles(dut.clk, hold)
            dut.rst.value = 0
        elif where == "an AXI burst":
            task = cocotb.start_soon(tb.client.write_words(addr, words))
            target = before["b"] + int(rng.integers(1, n))
            await wait_until(lambda target=target: tb.handshakes["b"] >= target)
            await tbutil.reset_midway(dut, hold, tasks=[task])
        else:
            await link.send(encode_read(addr, n))  # no client: the bytes stay pending
            got = int(rng.integers(1, 3 + 4 * n))
            await wait_until(lambda got=got: link.pending() >= got)
            await Timer(int(rng.integers(1, 10)) * tb.bit_ns, "ns")  # inside the next byte
            await tbutil.reset_midway(dut, hold)
        after = collections.Counter(tb.handshakes)
        await link.idle(quiet_bits)
        if where == "a response":
            link.clear()  # the cut response (its last byte may be garbled)
            await link.idle(quiet_bits)
        assert link.pending() == 0, f"{where}: bytes sent after the reset (seed {tb.seed})"
        assert tb.handshakes == after, \
            f"{where}: AXI traffic after the reset {tb.handshakes - after} (seed {tb.seed})"
        if where == "an AXI burst":  # a prefix of the words (those B answered, maybe one more)
            done = after["b"] - before["b"]
            ram = bytes(tb.ram.read(addr, 4 * n))
            prefix = [i for i in (done, done + 1) if i <= n and ram == b"".join(
                w.to_bytes(4, "little") for w in words[:i]) + bytes(tb.model[addr + 4 * i:
                                                                            addr + 4 * n])]
            assert prefix, f"{where}: not a prefix of the burst in RAM (seed {tb.seed})"
            tb.model_write(addr, words[:prefix[0]])
        tb.check_ram()
        tb.expect.clear()  # the reset clears every counter
        await tb.check_counters()
        await tb.sanity()
        await tb.check_counters()
    dut._log.info("reset in the middle of a frame, a burst and a response (seed %d)", tb.seed)
