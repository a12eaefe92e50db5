"""The host side of the UART-to-AXI4-Lite bridge (``hdl.uart_bridge``, which documents the
byte protocol): frame encoding and decoding, CRC-8, and :class:`BridgeClient`.

``BridgeClient`` works over any *transport*: an object with ``async send(data: bytes)`` and
``async recv(n: int) -> bytes`` (which returns exactly ``n`` bytes or raises
``TimeoutError``). :class:`SerialTransport` is a real serial port (pyserial);
``sim.tb.uart.CocotbUartTransport`` drives the bridge's pins in a cocotb simulation.
``read_dword`` / ``write_dword`` match cocotbext-axi's ``AxiLiteMaster``, so a client can
stand in for one (``sim.host.core.CoreHost``).

Nothing here imports cocotb.
"""

from __future__ import annotations

from dataclasses import dataclass

from hdl.uart_bridge import (
    CRC_POLY,
    MAX_WORDS,
    REQUEST_SYNC,
    RESPONSE_SYNC,
    STATUS_COUNTERS,
    Command,
    Status,
)

__all__ = ["crc8", "encode_frame", "encode_read", "encode_write", "encode_status",
           "response_data_bytes", "decode_response", "Response", "BridgeError",
           "ProtocolError", "BridgeClient", "SerialTransport", "Command", "Status",
           "MAX_WORDS", "STATUS_COUNTERS", "REQUEST_SYNC", "RESPONSE_SYNC"]


def crc8(data: bytes, crc: int = 0) -> int:
    """CRC-8, polynomial 0x07, initial value ``crc`` (0), MSB first, no final XOR
    (CRC-8/SMBUS: ``crc8(b"123456789") == 0xF4``)."""
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = ((crc << 1) ^ (CRC_POLY if crc & 0x80 else 0)) & 0xFF
    return crc


def _check_word(name: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 32:
        raise ValueError(f"{name} must be an integer in 0..2**32-1, not {value!r}")
    return value


def encode_frame(cmd: int, count: int | None = None, addr: int | None = None,
                 data: bytes = b"", *, crc: int | None = None) -> bytes:
    """A raw request frame: sync, ``cmd``, then ``count`` and ``addr`` when given, ``data``,
    and the CRC (computed unless ``crc`` is given). No check of the values: tests use it to
    build malformed frames."""
    body = bytes([cmd])
    if count is not None:
        body += bytes([count])
    if addr is not None:
        body += addr.to_bytes(4, "little")
    body += bytes(data)
    return bytes([REQUEST_SYNC]) + body + bytes([crc8(body) if crc is None else crc])


def _check_burst(addr: int, count: int) -> None:
    _check_word("addr", addr)
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_WORDS:
        raise ValueError(f"count must be an integer between 1 and {MAX_WORDS}, not {count!r}")


def encode_read(addr: int, count: int = 1) -> bytes:
    """A READ request for ``count`` (1..16) words from byte address ``addr``."""
    _check_burst(addr, count)
    return encode_frame(Command.READ, count, addr)


def encode_write(addr: int, words) -> bytes:
    """A WRITE request of ``words`` (1..16 32-bit words) to byte address ``addr``."""
    words = [_check_word("word", int(w)) for w in words]
    _check_burst(addr, len(words))
    return encode_frame(Command.WRITE, len(words), addr,
                        b"".join(w.to_bytes(4, "little") for w in words))


def encode_status() -> bytes:
    """A STATUS request."""
    return encode_frame(Command.STATUS)


def response_data_bytes(cmd: int, count: int, status: int) -> int:
    """How many data bytes follow the status byte of the response to a ``cmd`` request of
    ``count`` words whose response has STATUS byte ``status``."""
    if status != Status.OK:
        return 0
    if cmd == Command.READ:
        return 4 * count
    if cmd == Command.STATUS:
        return 4 * len(STATUS_COUNTERS)
    return 0


class ProtocolError(Exception):
    """A response that breaks the protocol (bad sync byte, bad CRC): the link is corrupt."""


class BridgeError(Exception):
    """The bridge answered a request with an error status (:attr:`status`, :attr:`beat` the
    failing word of an AXI error)."""

    def __init__(self, status: Status | int, beat: int, request: str):
        self.status, self.beat, self.request = status, beat, request
        name = status.name if isinstance(status, Status) else f"unknown status 0x{status:x}"
        where = f" at word {beat}" if status in (Status.EXOKAY, Status.SLVERR,
                                                 Status.DECERR) else ""
        super().__init__(f"UART bridge: {request} failed with {name}{where}")


@dataclass
class Response:
    status: Status | int
    beat: int
    data: bytes

    @property
    def words(self) -> list[int]:
        return [int.from_bytes(self.data[i:i + 4], "little")
                for i in range(0, len(self.data), 4)]


def decode_response(frame: bytes, cmd: int, count: int = 1) -> Response:
    """Decode a whole response frame (sync to CRC) to the request ``cmd`` of ``count`` words;
    raises :class:`ProtocolError` if it is malformed."""
    if len(frame) < 3 or frame[0] != RESPONSE_SYNC:
        raise ProtocolError(f"not a response frame: {frame.hex()}")
    want = 3 + response_data_bytes(cmd, count, frame[1])
    if len(frame) != want:
        raise ProtocolError(f"response of {len(frame)} bytes, expected {want}: {frame.hex()}")
    if crc8(frame[1:]) != 0:
        raise ProtocolError(f"response CRC mismatch: {frame.hex()}")
    code = frame[1] & 0xF
    status = Status(code) if code in Status._value2member_map_ else code
    return Response(status, frame[1] >> 4, bytes(frame[2:-1]))


class BridgeClient:
    """Reads and writes the bridge's AXI4-Lite bus over ``transport`` (one request at a time).

    Errors: :class:`BridgeError` when the bridge answers with an error status (nothing, or
    for an AXI error the words before the failing one, was done), :class:`ProtocolError` for
    a corrupt response, ``TimeoutError`` (from the transport) when no response comes -- e.g.
    a request cut short on the line, which the bridge drops without answering.
    """

    def __init__(self, transport, *, max_burst: int = MAX_WORDS):
        if (not isinstance(max_burst, int) or isinstance(max_burst, bool)
                or not 1 <= max_burst <= MAX_WORDS):
            raise ValueError(f"max_burst must be an integer between 1 and {MAX_WORDS}, not "
                             f"{max_burst!r}")
        self.transport, self.max_burst = transport, max_burst

    async def request(self, frame: bytes, cmd: int, count: int = 1) -> Response:
        """Send a request frame and return its decoded response (any status)."""
        await self.transport.send(frame)
        head = await self.transport.recv(2)
        if head[0] != RESPONSE_SYNC:
            raise ProtocolError(f"response starts with 0x{head[0]:02x}, not the sync byte")
        rest = await self.transport.recv(response_data_bytes(cmd, count, head[1]) + 1)
        return decode_response(head + rest, cmd, count)

    async def _checked(self, frame: bytes, cmd: int, count: int, what: str) -> Response:
        resp = await self.request(frame, cmd, count)
        if resp.status != Status.OK:
            raise BridgeError(resp.status, resp.beat, what)
        return resp

    async def read_words(self, addr: int, count: int) -> list[int]:
        """``count`` words from byte address ``addr`` on (bursts of at most ``max_burst``)."""
        out: list[int] = []
        while len(out) < count:
            n = min(self.max_burst, count - len(out))
            a = addr + 4 * len(out)
            resp = await self._checked(encode_read(a, n), Command.READ, n,
                                       f"read of {n} words at 0x{a:08x}")
            out += resp.words
        return out

    async def write_words(self, addr: int, words) -> None:
        """Write ``words`` from byte address ``addr`` on (bursts of at most ``max_burst``)."""
        words = [int(w) for w in words]
        for i in range(0, len(words), self.max_burst):
            chunk = words[i:i + self.max_burst]
            a = addr + 4 * i
            await self._checked(encode_write(a, chunk), Command.WRITE, len(chunk),
                                f"write of {len(chunk)} words at 0x{a:08x}")

    async def read_dword(self, addr: int) -> int:
        return (await self.read_words(addr, 1))[0]

    async def write_dword(self, addr: int, value: int) -> None:
        await self.write_words(addr, [value])

    async def status(self) -> dict[str, int]:
        """The bridge's counters (``hdl.uart_bridge.STATUS_COUNTERS``)."""
        resp = await self._checked(encode_status(), Command.STATUS, 0, "status request")
        return dict(zip(STATUS_COUNTERS, resp.words, strict=True))


class SerialTransport:
    """A serial port through pyserial (imported here, on first use): ``port`` (a device such
    as ``/dev/ttyUSB0``, or a pyserial URL such as ``loop://``), ``baud``, ``timeout``
    (seconds a :meth:`recv` may wait). Bytes already waiting in the input buffer are
    discarded on opening. The async methods block while the port works."""

    def __init__(self, port: str, baud: int = 115200, timeout: float = 1.0):
        import serial

        self.port = serial.serial_for_url(port, baudrate=baud, timeout=timeout,
                                          write_timeout=timeout)
        self.port.reset_input_buffer()

    async def send(self, data: bytes) -> None:
        self.port.write(bytes(data))
        self.port.flush()

    async def recv(self, n: int) -> bytes:
        data = self.port.read(n)
        if len(data) < n:
            raise TimeoutError(f"{self.port.port}: {len(data)} of {n} bytes arrived within "
                               f"{self.port.timeout} s")
        return bytes(data)

    def close(self) -> None:
        self.port.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
