"""Verilator's FST dumps made readable by pywellen: the hierarchy block gzip-compressed.

Verilator's FST writer (``fstcpp``) compresses a dump's hierarchy (its scopes and signal names)
as one LZ4 block (FST block type 6). The FST reader inside pywellen (the ``fst-reader`` crate,
0.17) decodes some valid LZ4 blocks short and panics ("assertion `left == right` failed"), so
whether a dump opens depended on the design's signal names: the tensor engine's did not after a
change that added four signals. :func:`gzip_hierarchy` rewrites that block as the format's
gzip-compressed hierarchy (block type 4, what GTKWave's own writer emits), which every reader
handles; the values and every other block stay byte for byte. ``sim.runner`` applies it to each
Verilator FST dump as the run ends. LZ4 is decoded with the ``lz4`` package.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

__all__ = ["gzip_hierarchy", "HIER_GZ", "HIER_LZ4"]

#: FST block types (GTKWave's fstapi.h: FST_BL_HIER, FST_BL_HIER_LZ4).
HIER_GZ, HIER_LZ4 = 4, 6


def _blocks(data: bytes) -> list[tuple[int, bytes]]:
    """The dump's blocks: (type, payload after the 8-byte length, which counts itself)."""
    out, i = [], 0
    while i < len(data):
        if i + 9 > len(data):
            raise ValueError(f"a truncated FST block at byte {i}")
        kind = data[i]
        length = struct.unpack(">Q", data[i + 1:i + 9])[0]
        if length < 8 or i + 1 + length > len(data):
            raise ValueError(f"FST block {kind} at byte {i} has length {length}, past the end")
        out.append((kind, data[i + 9:i + 1 + length]))
        i += 1 + length
    return out


def gzip_hierarchy(path: Path | str) -> bool:
    """Rewrite ``path``'s LZ4 hierarchy block as a gzip one, in place.

    Returns whether it changed the file (False: no LZ4 hierarchy block, e.g. an Icarus dump).

    Raises
    ------
    ValueError
        If the file's blocks do not tile it, or the LZ4 block does not decode to its stated
        length.
    """
    import lz4.block

    path = Path(path)
    blocks = _blocks(path.read_bytes())
    if not any(kind == HIER_LZ4 for kind, _ in blocks):
        return False
    out = bytearray()
    for kind, payload in blocks:
        if kind == HIER_LZ4:
            size = struct.unpack(">Q", payload[:8])[0]
            try:
                text = lz4.block.decompress(payload[8:], uncompressed_size=size)
            except lz4.block.LZ4BlockError as exc:
                raise ValueError(f"{path}: the LZ4 hierarchy does not decode: {exc}") from exc
            if len(text) != size:
                raise ValueError(f"{path}: the LZ4 hierarchy decodes to {len(text)} bytes, "
                                 f"not {size}")
            kind, payload = HIER_GZ, struct.pack(">Q", size) + gzip.compress(text, mtime=0)
        out += bytes([kind]) + struct.pack(">Q", len(payload) + 8) + payload
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(out)
    tmp.replace(path)
    return True
