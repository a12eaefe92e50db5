"""Host side of the tensor engine: check commands, encode them and their data as stream beats.

A :class:`TensorEngineProgram` is built from commands (``load_stationary`` /
``multiply_moving`` / ``drain``) and is run twice: on ``golden.tensor_engine.TensorEngineModel``
here, at build time, which gives the expected PSUM rows of every drain; and on the RTL by the
cocotb testbench, which sends the encoded beats. Bad commands (a tile larger than the array or
the bank, a format the engine was not built for, …) raise :class:`ValueError` here, before
any simulation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from golden.sparse import compress, pack_words, pattern
from golden.tensor_engine import LoadStationary, TensorEngineModel, gemm_schedule
from hdl.formats import Fmt
from hdl.sparsity import SPARSITY_CODES, moving_rows, parse_sparsity
from hdl.tensor_engine import Opcode, command_layout, drain_request_layout
from sim.verify import coverage

__all__ = ["EngineConfig", "Phase", "TensorEngineProgram", "gemm_program", "struct_encoder"]

_FMT = {f.golden_name: f for f in Fmt}


@dataclass(frozen=True)
class EngineConfig:
    """The build parameters of a ``TensorEngine`` that the host needs to know."""

    n: int
    psum_banks: int = 8
    psum_words: int | None = None
    formats: tuple[str, ...] = ("bf16", "fp8_e4m3", "fp8_e5m2")
    sparsity: tuple[str, ...] = ()  #: the n:m patterns of a sparse engine

    @classmethod
    def from_params(cls, params: dict) -> EngineConfig:
        n = params["n"]
        return cls(n=n, psum_banks=params.get("psum_banks", 8),
                   psum_words=params.get("psum_words") or 4 * n,
                   formats=tuple(params.get("formats", cls.formats)),
                   sparsity=tuple(params.get("sparsity", ())))

    @property
    def words(self) -> int:
        return self.psum_words or 4 * self.n

    @property
    def moving_rows(self) -> int:
        """Rows of K a moving beat carries (``hdl.tensor_engine.TensorEngine.moving_rows``)."""
        return moving_rows(self.n, parse_sparsity(self.sparsity))


@dataclass
class Phase:
    """Beats to send, then PSUM rows to drain and check: once the engine is idle, or, for a
    ``background`` phase, once the engine has pulsed ``done`` for every MULTIPLY_MOVING of the
    program so far into each bank drained (``done_after``), while later phases compute. A
    phase's beats go out only after every earlier drain of a bank it ``writes``."""

    cmds: list[int] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    moving: list[int] = field(default_factory=list)
    drains: list[int] = field(default_factory=list)  # encoded drain requests
    expected: list[np.ndarray] = field(default_factory=list)  # (n,) uint32 per drain
    # Which partitions of each drained row this program wrote: PSUM is not cleared by reset,
    # so the others hold whatever an earlier program left there and are not compared.
    defined: list[np.ndarray] = field(default_factory=list)  # (n,) bool per drain
    where: list[str] = field(default_factory=list)  # a label per drain, for messages
    macs: int = 0  # useful multiply-accumulates of the phase's commands
    writes: set[int] = field(default_factory=set)  # banks its MULTIPLY_MOVINGs write
    background: bool = False
    done_after: dict[int, int] = field(default_factory=dict)  # bank -> MULTIPLY_MOVINGs so far


def _pack16(values) -> int:
    """Lanes of 16 bits (lane i at bits 16i..16i+15), each value's low 16 bits."""
    lanes = (np.asarray(values, dtype=np.int64) & 0xFFFF).astype("<u2")
    return int.from_bytes(lanes.tobytes(), "little")


def struct_encoder(layout):
    """A fast ``Const.cast(layout.const(values)).value`` for a flat ``StructLayout`` whose
    fields are integers or enums (each value's low bits, as Amaranth's ``const`` keeps
    them)."""
    fields = [(name, f.offset, (1 << f.width) - 1) for name, f in layout]

    def encode(values: dict) -> int:
        word = 0
        for name, offset, mask in fields:
            value = values[name]
            word |= (int(getattr(value, "value", value)) & mask) << offset
        return word
    return encode


_JUNK16 = np.array([0x7F80, 0xFF80, 0x7FC0, 0x007F, 0x00FF, 0x007C, 0x00FC, 0x7E00, 0x3F80],
                   dtype=np.int64)  # bf16 ±inf/NaN, e4m3 NaN, e5m2 ±inf/NaN, …


class TensorEngineProgram:
    """A sequence of phases for one engine configuration, with golden expectations."""

    def __init__(self, cfg: EngineConfig, junk: np.random.Generator | None = None):
        """``junk``: if given, lanes the engine must ignore (beyond K or M) carry random bits,
        NaNs and infinities included, instead of zeros."""
        self.cfg = cfg
        self.junk = junk
        self.model = TensorEngineModel(cfg.n, cfg.psum_banks, cfg.words)
        self._cmd_layout = command_layout(cfg.n, cfg.psum_banks, cfg.words,
                                          cfg.moving_rows if cfg.sparsity else None)
        self._drain_layout = drain_request_layout(cfg.psum_banks, cfg.words)
        self._encode_cmd = struct_encoder(self._cmd_layout)
        self._encode_drain = struct_encoder(self._drain_layout)
        self.phases: list[Phase] = [Phase()]
        self._stationary_k: int | None = None
        self._written = np.zeros((cfg.n, cfg.psum_banks, cfg.words), dtype=bool)
        self._multiplies = [0] * cfg.psum_banks  # MULTIPLY_MOVINGs so far, per bank

    def _beat(self, values, lanes: int, width: int = 16) -> int:
        """One stream beat of ``lanes`` lanes of ``width`` bits: ``values`` in the first
        lanes, the rest zero or junk (a 20-bit lane's junk has random tag bits too)."""
        values = [int(v) for v in values]
        if self.junk is not None and len(values) < lanes:
            pad = self.junk.integers(0, 1 << 16, lanes - len(values))
            specials = self.junk.random(pad.size) < 0.5
            pad[specials] = self.junk.choice(_JUNK16, int(specials.sum()))
            if width > 16:
                pad |= self.junk.integers(0, 1 << (width - 16), pad.size) << 16
            values += pad.tolist()
        if width == 16:
            return _pack16(values)
        mask = (1 << width) - 1
        return sum((v & mask) << (width * i) for i, v in enumerate(values))

    def _beats(self, rows, lanes: int | None = None, width: int = 16) -> list[int]:
        """One beat per row of the 2-D array ``rows``, as :meth:`_beat` makes it (packed
        all at once where no junk is to be drawn); ``lanes`` defaults to n."""
        rows = np.asarray(rows, dtype=np.int64)
        n = lanes or self.cfg.n
        if (self.junk is not None and rows.shape[1] < n) or width != 16:
            return [self._beat(row, n, width) for row in rows]
        lanes = np.zeros((rows.shape[0], n), dtype="<u2")
        lanes[:, :rows.shape[1]] = rows & 0xFFFF
        buf, size = lanes.tobytes(), 2 * n
        return [int.from_bytes(buf[i * size:(i + 1) * size], "little")
                for i in range(rows.shape[0])]

    @property
    def _phase(self) -> Phase:
        return self.phases[-1]

    def _format(self, fmt: str, param: str) -> Fmt:
        if fmt not in self.cfg.formats:
            raise ValueError(f"{param} must be one of the formats the engine was built for "
                             f"{list(self.cfg.formats)}, not {fmt!r}")
        return _FMT[fmt]

    def _cmd(self, **fields) -> int:
        base = {"op": Opcode.LOAD_STATIONARY, "fmt": Fmt.BF16, "k": 0, "m": 0, "f": 0,
                "bank": 0, "addr": 0, "accumulate": 0, "sparsity": 0}
        return self._encode_cmd(base | fields)

    def raw_command(self, **fields) -> int:
        """Encode a command without any check (for tests of the engine's own error path).

        ``fmt`` may be any 2-bit number, the reserved 3 included."""
        fmt = int(fields.pop("fmt", 0))
        field = self._cmd_layout["fmt"]
        word = self._cmd(**fields)
        mask = ((1 << field.width) - 1) << field.offset
        return (word & ~mask) | ((fmt << field.offset) & mask)

    def raw_drain(self, bank: int, addr: int) -> int:
        """Encode a drain request without any check."""
        return self._encode_drain({"bank": bank, "addr": addr})

    def load_stationary(self, tile, fmt: str) -> None:
        """LOAD_STATIONARY of a K×M tile of ``fmt`` bit patterns."""
        tile = np.asarray(tile)
        n = self.cfg.n
        if tile.ndim != 2 or not (1 <= tile.shape[0] <= n and 1 <= tile.shape[1] <= n):
            raise ValueError(f"stationary tile must be K×M with 1 <= K, M <= n = {n}, "
                             f"not shape {tile.shape}")
        code = self._format(fmt, "fmt")
        self.model.load_stationary(tile, fmt)
        coverage.te_stationary(self, tile, fmt)
        k, m = tile.shape
        ph = self._command_phase()
        ph.cmds.append(self._cmd(op=Opcode.LOAD_STATIONARY, fmt=code, k=k, m=m))
        ph.weights += self._beats(tile, width=self._weight_width)
        self._stationary_k = k

    @property
    def _weight_width(self) -> int:
        return 20 if self.cfg.sparsity else 16  # hdl.sparsity.WEIGHT_LANE in a sparse engine

    def load_stationary_sparse(self, values, tags, fmt: str, p: str, k: int, *,
                               check: bool = True) -> None:
        """LOAD_STATIONARY of a compressed tile (``golden.sparse``: S x M ``values`` of ``fmt``
        and their ``tags`` in pattern ``p`` for K = ``k`` rows). ``check=False`` sends tags
        that break the pattern (the engine must flag them; the model forgets its tile)."""
        if p not in self.cfg.sparsity:
            raise ValueError(f"pattern must be one the engine was built for "
                             f"{list(self.cfg.sparsity)}, not {p!r}")
        values, tags = np.asarray(values), np.asarray(tags)
        code = self._format(fmt, "fmt")
        try:
            self.model.load_stationary_sparse(values, tags, fmt, p, k)
        except ValueError:
            if check:
                raise
        ph = self._command_phase()
        ph.cmds.append(self._cmd(op=Opcode.LOAD_STATIONARY, fmt=code, k=k,
                                 m=values.shape[1], sparsity=SPARSITY_CODES[p]))
        ph.weights += self._beats(pack_words(values, tags).astype(np.int64), width=20)
        self._stationary_k = None if self.model.stationary_shape is None else k

    def multiply_moving(self, moving, fmt: str, *, bank: int, addr: int,
                        accumulate: bool) -> None:
        """MULTIPLY_MOVING of a K×F tile of ``fmt`` bit patterns into PSUM (bank, addr)."""
        moving = np.asarray(moving)
        cfg = self.cfg
        if moving.ndim != 2 or not 1 <= moving.shape[1]:
            raise ValueError(f"moving tile must be K×F with F >= 1, not shape {moving.shape}")
        k, f = moving.shape
        if self._stationary_k is None:
            raise ValueError("multiply_moving needs a load_stationary first")
        if k != self._stationary_k:
            raise ValueError(f"moving tile has K = {k} rows but the stationary tile has "
                             f"{self._stationary_k}")
        if not 0 <= bank < cfg.psum_banks:
            raise ValueError(f"bank must be in 0..{cfg.psum_banks - 1}, not {bank}")
        if not (0 <= addr and addr + f <= cfg.words):
            raise ValueError(f"moving tile of F = {f} columns at addr {addr} does not fit the "
                             f"PSUM bank of {cfg.words} words")
        code = self._format(fmt, "fmt")
        self.model.multiply_moving(moving, fmt, bank, addr, accumulate)
        ph = self._command_phase()
        coverage.te_moving(self, ph, moving, fmt, accumulate)
        ph.cmds.append(self._cmd(op=Opcode.MULTIPLY_MOVING, fmt=code, k=k, f=f, bank=bank,
                                 addr=addr, accumulate=int(accumulate)))
        ph.moving += self._beats(moving.T, lanes=cfg.moving_rows)
        ph.macs += k * f * self.model.stationary_shape[1]
        ph.writes.add(bank)
        self._multiplies[bank] += 1
        self._written[:self.model.stationary_shape[1], bank, addr:addr + f] = True

    def drain(self, bank: int, addr: int, count: int, label: str = "", *,
              background: bool = False) -> None:
        """Read ``count`` PSUM words per partition and check them: after the engine is idle,
        or with ``background`` as soon as every MULTIPLY_MOVING so far into ``bank`` is done,
        while the next phases compute (see :class:`Phase`)."""
        ph = self._phase
        if ph.drains and ph.background != background:
            self.phases.append(Phase())
            ph = self._phase
        ph.background = background
        if background:
            ph.done_after[bank] = self._multiplies[bank]
        expected = self.model.drain(bank, addr, count)  # (n, count)
        for j in range(count):
            ph.drains.append(self.raw_drain(bank, addr + j))
            ph.expected.append(expected[:, j].astype(np.uint32))
            ph.defined.append(self._written[:, bank, addr + j].copy())
            ph.where.append(f"{label} bank {bank} word {addr + j}")
        if not background:
            self.phases.append(Phase())

    def _command_phase(self) -> Phase:
        """The phase a command goes to: a new one after a phase's drains."""
        if self._phase.drains:
            self.phases.append(Phase())
        return self._phase


def gemm_program(cfg: EngineConfig, a_bits, a_fmt: str, b_bits, b_fmt: str,
                 prog: TensorEngineProgram | None = None, *, sparsity: str | None = None,
                 mask=None) -> TensorEngineProgram:
    """``C = A.T @ B`` as the golden schedule issues it (``golden.tensor_engine.gemm_schedule``):
    each round's blocks drained in the background, as soon as their banks are done, while the
    next round computes (the schedule's rounds take turns on PSUM's halves). With
    ``sparsity`` (a pattern the engine takes) A is n:m-sparse, keeping ``mask``
    (``golden.sparse.run_sparse_gemm``): k-tiles of R·n rows, each loaded compressed."""
    a_bits, b_bits = np.asarray(a_bits), np.asarray(b_bits)
    if a_bits.ndim != 2 or b_bits.ndim != 2 or a_bits.shape[0] != b_bits.shape[0]:
        raise ValueError(f"A must be K×M and B K×F, not {a_bits.shape} and {b_bits.shape}")
    prog = prog or TensorEngineProgram(cfg)
    (k, m), f = a_bits.shape, b_bits.shape[1]
    k_tile = None
    if sparsity is not None:
        p = pattern(sparsity)
        if cfg.n % p.n:
            raise ValueError(f"a {p.name} GEMM needs n a multiple of {p.n}, not {cfg.n}")
        k_tile, mask = p.ratio * cfg.n, np.asarray(mask)
    for rnd in gemm_schedule(m, k, f, n=cfg.n, banks=cfg.psum_banks, bank_words=cfg.words,
                             k_tile=k_tile):
        for c in rnd.commands:
            if isinstance(c, LoadStationary) and sparsity is not None:
                values, tags = compress(a_bits[c.k0:c.k1, c.m0:c.m1], a_fmt,
                                        mask[c.k0:c.k1, c.m0:c.m1], sparsity)
                prog.load_stationary_sparse(values, tags, a_fmt, sparsity, c.k1 - c.k0)
            elif isinstance(c, LoadStationary):
                prog.load_stationary(a_bits[c.k0:c.k1, c.m0:c.m1], a_fmt)
            else:
                prog.multiply_moving(b_bits[c.k0:c.k1, c.f0:c.f1], b_fmt, bank=c.bank,
                                     addr=c.addr, accumulate=c.accumulate)
        for blk in rnd.blocks:
            prog.drain(blk.bank, blk.addr, blk.f1 - blk.f0,
                       label=f"C[{blk.m0}:{blk.m1}, {blk.f0}:{blk.f1}]", background=True)
    return prog
