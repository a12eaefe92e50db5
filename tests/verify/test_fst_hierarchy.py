"""sim.verify.fst_hierarchy: a Verilator FST's LZ4 hierarchy block rewritten gzip-compressed,
every other block byte for byte; checked on a dump built here (its blocks made by hand) and on
a real Verilator dump of the tensor engine, which pywellen reads afterwards (its reader misreads
that LZ4 block: tests/verify/test_waves.py's Verilator run failed before the rewrite)."""

import gzip
import struct

import lz4.block
import numpy as np
import pytest

from sim.verify.fst_hierarchy import HIER_GZ, HIER_LZ4, gzip_hierarchy


def _block(kind: int, payload: bytes) -> bytes:
    return bytes([kind]) + struct.pack(">Q", len(payload) + 8) + payload


def test_lz4_hierarchy_becomes_gzip(tmp_path):
    rng = np.random.default_rng(1)
    names = b"".join(b"\x01sig%d [%d:0]\x00" % (i, int(rng.integers(1, 64)))
                     for i in range(5000))
    header, values = _block(0, bytes(range(256)) * 2), _block(8, rng.bytes(999))
    path = tmp_path / "dump.fst"
    lz = struct.pack(">Q", len(names)) + lz4.block.compress(names, store_size=False)
    path.write_bytes(header + values + _block(HIER_LZ4, lz))
    assert gzip_hierarchy(path)
    data = path.read_bytes()
    assert data.startswith(header + values)
    rest = data[len(header + values):]
    assert rest[0] == HIER_GZ and struct.unpack(">Q", rest[1:9])[0] == len(rest) - 1
    assert struct.unpack(">Q", rest[9:17])[0] == len(names)
    assert gzip.decompress(rest[17:]) == names
    assert not gzip_hierarchy(path)  # nothing left to rewrite
    assert path.read_bytes() == data


def test_a_broken_dump_is_an_error(tmp_path):
    path = tmp_path / "dump.fst"
    path.write_bytes(_block(0, b"x" * 20)[:-3])
    with pytest.raises(ValueError, match="past the end"):
        gzip_hierarchy(path)
    path.write_bytes(_block(HIER_LZ4, struct.pack(">Q", 100)
                            + lz4.block.compress(b"y" * 50, store_size=False)))
    with pytest.raises(ValueError, match="LZ4 hierarchy"):  # never a silent rewrite
        gzip_hierarchy(path)
