"""sim.host.uart_link in pure Python: CRC-8, frame encoding and decoding, BridgeClient against a
small Python model of the bridge's protocol, and SerialTransport over pyserial's ``loop://``.
(The hardware bridge is checked against the same client in sim/tb/uart_bridge.py.)"""

import asyncio
import os

import numpy as np
import pytest

from sim.host.uart_link import (
    MAX_WORDS,
    STATUS_COUNTERS,
    BridgeClient,
    BridgeError,
    Command,
    ProtocolError,
    SerialTransport,
    Status,
    crc8,
    decode_response,
    encode_frame,
    encode_read,
    encode_status,
    encode_write,
    response_data_bytes,
)

SEED = int(os.environ.get("NCLITE_SEED", "1"))


def run(coro):
    return asyncio.run(coro)


def test_crc8():
    assert crc8(b"123456789") == 0xF4  # CRC-8/SMBUS check value
    assert crc8(b"") == 0
    rng = np.random.default_rng([SEED, 8])
    for n in (1, 2, 7, 70):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert crc8(data + bytes([crc8(data)])) == 0  # the receiver's check
        assert crc8(data[1:], crc8(data[:1])) == crc8(data)  # incremental


def test_encode():
    assert encode_read(0x12345678, 2) == bytes(
        [0xA5, 0x02, 0x02, 0x78, 0x56, 0x34, 0x12, crc8(bytes.fromhex("020278563412"))])
    w = encode_write(0x40, [0x11223344])
    assert w[:7] == bytes([0xA5, 0x01, 0x01, 0x40, 0, 0, 0])
    assert w[7:11] == bytes([0x44, 0x33, 0x22, 0x11]) and crc8(w[1:]) == 0
    assert encode_status() == bytes([0xA5, 0x03, crc8(b"\x03")]) == bytes([0xA5, 3, 0x09])
    assert len(encode_write(0, range(MAX_WORDS))) == 8 + 4 * MAX_WORDS
    assert encode_frame(7, crc=0x55) == bytes([0xA5, 7, 0x55])  # raw, for malformed frames


@pytest.mark.parametrize("call, param", [
    (lambda: encode_read(0, 0), "count"), (lambda: encode_read(0, MAX_WORDS + 1), "count"),
    (lambda: encode_read(-4), "addr"), (lambda: encode_read(1 << 32), "addr"),
    (lambda: encode_write(0, []), "count"), (lambda: encode_write(0, [1 << 32]), "word"),
    (lambda: encode_write(0, range(MAX_WORDS + 1)), "count"),
    (lambda: BridgeClient(None, max_burst=0), "max_burst")])
def test_bad_arguments(call, param):
    with pytest.raises(ValueError, match=param):
        call()


def _response(status: int, data: bytes = b"") -> bytes:
    body = bytes([status]) + data
    return bytes([0x5A]) + body + bytes([crc8(body)])


def test_decode():
    resp = decode_response(_response(0, bytes(range(8))), Command.READ, 2)
    assert resp.status == Status.OK and resp.words == [0x03020100, 0x07060504]
    resp = decode_response(_response(Status.SLVERR | 5 << 4), Command.READ, 8)
    assert resp.status == Status.SLVERR and resp.beat == 5 and resp.data == b""
    assert response_data_bytes(Command.STATUS, 0, 0) == 4 * len(STATUS_COUNTERS)
    assert response_data_bytes(Command.WRITE, 4, 0) == 0
    assert response_data_bytes(Command.READ, 4, Status.BAD_CRC) == 0
    bad = bytearray(_response(0, bytes(4)))
    bad[3] ^= 1
    with pytest.raises(ProtocolError, match="CRC"):
        decode_response(bytes(bad), Command.READ, 1)
    with pytest.raises(ProtocolError, match="expected"):
        decode_response(_response(0, bytes(4)), Command.READ, 2)
    with pytest.raises(ProtocolError):
        decode_response(b"\xa5\x00\x00", Command.WRITE)


class ModelBridge:
    """A transport that answers like the bridge (whole frames only): a word memory, words
    in ``faults`` answer their AXI code, the counters of frames and AXI errors."""

    def __init__(self, faults=None):
        self.mem: dict[int, int] = {}
        self.faults = faults or {}
        self.out = bytearray()
        self.frames: list[tuple[int, int, int]] = []  # (command, address, count)
        self.counts = dict.fromkeys(STATUS_COUNTERS, 0)
        self.corrupt_next = False

    async def send(self, data: bytes) -> None:
        assert data[0] == 0xA5 and crc8(data[1:]) == 0, data.hex()
        cmd = data[1]
        self.counts["frames"] += 1
        status, payload = 0, b""
        if cmd == Command.STATUS:
            payload = b"".join(self.counts[n].to_bytes(4, "little") for n in STATUS_COUNTERS)
        else:
            count, addr = data[2], int.from_bytes(data[3:7], "little")
            self.frames.append((cmd, addr, count))
            for i in range(count):
                a = addr + 4 * i
                if a in self.faults:
                    status = self.faults[a] | i << 4
                    self.counts["axi_errors"] += 1
                    payload = b""
                    break
                if cmd == Command.WRITE:
                    self.mem[a] = int.from_bytes(data[7 + 4 * i:11 + 4 * i], "little")
                else:
                    payload += self.mem.get(a, 0).to_bytes(4, "little")
        frame = bytearray(_response(status, payload))
        if self.corrupt_next:
            frame[-1] ^= 0xFF
            self.corrupt_next = False
        self.out += frame

    async def recv(self, n: int) -> bytes:
        if len(self.out) < n:
            raise TimeoutError(f"{len(self.out)} of {n} bytes")
        data, self.out = bytes(self.out[:n]), self.out[n:]
        return data


def test_client_bursts_and_words():
    model = ModelBridge()
    client = BridgeClient(model)
    rng = np.random.default_rng([SEED, 9])
    words = [int(w) for w in rng.integers(0, 1 << 32, 40, dtype=np.uint64)]

    async def go():
        await client.write_words(0x100, words)
        assert await client.read_words(0x100, 40) == words
        await client.write_dword(0x8, 0xCAFEF00D)
        assert await client.read_dword(0x8) == 0xCAFEF00D
        assert await client.read_words(0, 0) == []
        return await client.status()

    status = run(go())
    cmds = [(c, a, n) for c, a, n in model.frames]
    assert cmds[:6] == [(Command.WRITE, 0x100, 16), (Command.WRITE, 0x140, 16),
                        (Command.WRITE, 0x180, 8), (Command.READ, 0x100, 16),
                        (Command.READ, 0x140, 16), (Command.READ, 0x180, 8)]
    assert status == {**dict.fromkeys(STATUS_COUNTERS, 0), "frames": 9}
    assert not model.out


def test_client_max_burst():
    model = ModelBridge()
    run(BridgeClient(model, max_burst=3).write_words(0, range(7)))
    assert [n for _, _, n in model.frames] == [3, 3, 1]


def test_client_errors():
    model = ModelBridge(faults={0x20C: Status.DECERR, 0x300: Status.SLVERR})
    client = BridgeClient(model)
    with pytest.raises(BridgeError, match="DECERR at word 3") as exc:
        run(client.read_words(0x200, 8))
    assert exc.value.status == Status.DECERR and exc.value.beat == 3
    with pytest.raises(BridgeError, match="SLVERR at word 0"):
        run(client.write_dword(0x300, 1))
    model.corrupt_next = True
    with pytest.raises(ProtocolError):
        run(client.read_dword(0))
    model.out.clear()
    model.faults = {}

    class Silent(ModelBridge):
        async def send(self, data):
            pass

    with pytest.raises(TimeoutError):
        run(BridgeClient(Silent()).read_dword(0))
    err = BridgeError(Status.BAD_CRC, 0, "read")
    assert "BAD_CRC" in str(err) and "word" not in str(err)


def test_serial_transport_loopback():
    # pyserial's loop:// URL echoes what is written: a frame comes back whole, a recv with
    # nothing there times out.
    async def go():
        with SerialTransport("loop://", 115200, timeout=0.05) as t:
            frame = encode_read(0x1000, 4)
            await t.send(frame)
            assert await t.recv(len(frame)) == frame
            with pytest.raises(TimeoutError, match="0 of 1"):
                await t.recv(1)

    run(go())
