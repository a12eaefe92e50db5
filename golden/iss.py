"""The instruction-level simulator: the NeuronCore's command stream on numpy state.

:class:`NeuronCoreISS` holds one core's state -- SBUF (N partitions x D uint32 words), PSUM
and the stationary tile (:class:`golden.tensor_engine.TensorEngineModel`), the activation engine's
PRNG lanes (:class:`golden.activation.ActivationModel`) and DRAM (bytes) -- and executes
descriptors (:mod:`golden.isa`) one by one, in program order: the result of a program is the
result of running its commands sequentially. (The hardware may overlap engines; it must end
with the same bits.) :class:`RingISS` runs P cores, a ring or an R x C torus, whose programs
meet at COLLECTIVE commands.

Semantics per opcode (fields as in ``golden.isa.FIELDS``):

* ``DMA_LOAD`` - for p < rows, c < cols: the ``DTYPE_BYTES[dtype]``-byte little-endian element
  at DRAM ``dram_addr + p * dram_stride + c * size`` goes, zero-extended, to SBUF partition
  ``part + p``, word ``sbuf_addr + c``. ``DMA_STORE`` - the reverse: the low ``8 * size``
  bits of each SBUF word go to DRAM, rows in increasing p (a later row wins where rows
  overlap). No value changes: the copy preserves the dtype.
* ``LOAD_STATIONARY`` - the K x M tile ``SBUF[part + k, sbuf_addr + m]`` (its low 16 bits for
  bf16, low 8 for fp8) of operand format ``fmt`` (bf16, fp8-e4m3, fp8-e5m2). With
  ``sparsity`` (:class:`golden.isa.Sparsity`; a core with ``sparse`` only) the tile is
  compressed along K (``golden.sparse``): S = slots(K) <= N partitions, each word a kept value
  in its low bits and its tag in bits 16..19; tags that break the pattern are BAD_TAGS (the
  tile is forgotten; the command counts as executed).
* ``MATMUL`` - the K x F moving tile ``SBUF[part + k, sbuf_addr + f]`` of ``fmt`` times the
  stationary tile into PSUM ``bank``, words ``psum_addr ..``, overwrite or accumulate
  (``golden.tensor_engine``). K must be the stationary tile's. After a sparse
  LOAD_STATIONARY (R = m / n of its pattern) the K rows come R to a partition: row k is
  partition ``part + k // R``, word ``sbuf_addr + f * R + k % R``
  (``golden.sparse.moving_layout``), and the product is ``golden.sparse.sparse_matmul_tile``.
* ``ACTIVATE`` - F = ``cols`` beats of N lanes (lane l = partition l): lane l of beat c is
  ``src[l][src_addr + c]`` for partitions ``part .. part + rows - 1`` (src = PSUM bank
  ``src_bank`` or SBUF) and +0 for the others; the bias of lane l is SBUF word ``bias_addr``
  of partition l when ``bias_en``, else −0 (so ``x * scale + (−0)`` is exactly ``x * scale``);
  ``cast(f(x * scale + bias))`` (:class:`golden.activation.ActivationModel`: every lane draws
  on an SR beat) goes to SBUF words ``dst_addr ..`` of the partitions in range. An SBUF source
  holds fp32 words (activations are computed in fp32; narrow data is widened by a MATMUL, not
  here) and may be the destination only exactly (``dst_addr == src_addr``).
* ``COLLECTIVE`` - the rows x cols SBUF region is the buffer of a collective
  (``golden.collective``) over the cores of the sub-ring ``dim`` names
  (``golden.isa.CollectiveDim``; ``golden.collective.torus_groups``): on a ring
  (``CoreConfig.torus_rows`` 1) ROW is the whole ring; on an R x C torus ROW is the C cores
  of the core's row and COLUMN the R cores of its column. P below is that sub-ring's size
  (``CoreConfig.dim_ranks``). ``coll_op``: 0 all-reduce, 1
  reduce-scatter, 2 all-gather, in place; 3 all-to-all, 4 permute by ``shift``, out of place),
  flattened word by word: element i is partition ``part + i % rows``, word
  ``sbuf_addr + i // rows``. ``rows`` must be the ring's link width W (BAD_SHAPE otherwise), so
  each link beat (row) is one SBUF word of W partitions and the buffer is B = ``cols`` rows; a
  wider region takes one COLLECTIVE per band of W partitions. All-to-all and permute write the
  region of the same partitions from word ``dst_addr``, ``golden.collective.out_rows`` words
  (P x ceil(cols / P) for all-to-all, ``cols`` for permute; flattened alike), and leave the
  source as it was; the ring ops ignore ``dst_addr`` and ``shift``. The checks, in this order
  (the sequencer's): BAD_FIELD if ``coll_op`` is reserved (5..7), or ``dim`` is COLUMN on a
  core that is not in a torus (``torus_rows`` 1), or a PERMUTE's ``shift`` is not in 1..P-1
  (P = 0 outside a ring: always); BAD_SHAPE if ``rows`` or ``cols`` is 0, then if ``rows``
  is not W; BAD_RANGE if the source is outside SBUF; then, for all-to-all and permute on a
  core in a ring (P >= 2), BAD_RANGE if ``dst_addr`` + out rows (of P) > ``sbuf_words``,
  then if the destination's words meet the source's. On a core outside a ring a COLLECTIVE
  that passed them is BAD_FIELD.
* ``BARRIER`` - no effect on data. ``SET_SEED`` - reseed every PRNG lane with ``seed``.
* ``TENSOR_TENSOR``, ``TENSOR_SCALAR``, ``TENSOR_REDUCE`` (the vector engine; BAD_OPCODE on a
  core without one) - operand ``in0`` (and ``in1``) is the rows x cols tile from partition
  ``part``: SBUF words from ``in<i>_addr`` holding ``in<i>_dtype`` values (the low bits of
  each word), or (``in<i>_sbuf`` 0) PSUM bank ``in<i>_bank``'s fp32 words (``in<i>_dtype`` must
  be fp32). Widened exactly to fp32, then ``golden.vector``: ``in0 alu in1``, ``in0 alu
  scalar`` (``scalar alu in0`` with ``reverse``), or each partition's row folded along the
  free axis (ADD, MAX, MIN) into one word. The results go out as beats of N lanes (one per
  column; one beat for a reduction; lanes outside the partitions +0), are cast to ``dtype``
  like ACTIVATE's (the same PRNG lanes: every lane draws on an SR beat) and written to SBUF
  words ``dst_addr ..`` of the partitions. An SBUF operand may be the destination only
  exactly (as ACTIVATE's source).
* ``TRANSPOSE`` - the rows (K) x cols (M) SBUF tile from partition ``part``, word
  ``src_addr`` goes to SBUF partitions ``dst_part .. dst_part + M - 1``, words ``dst_addr ..
  dst_addr + K - 1``: ``out[m, k] = src[k, m]``, the 32-bit words moved unchanged. The source
  and the destination must not share a word.

Errors: the first failing check, in the order field values (BAD_FIELD), dtype (BAD_DTYPE),
sizes (BAD_SHAPE), ranges (BAD_RANGE), alignment (BAD_ALIGN), sets ``error`` and
``error_index`` (the command's position) and stops the program; that command changes nothing.
An illegal opcode is BAD_OPCODE. Errors of a running command (counted in ``executed``): the
ISS's DRAM never fails, so it never reports BUS_ERROR; :class:`RingISS` reports LINK_TIMEOUT
for a COLLECTIVE that not every core reaches (the hardware's link watchdog); a sparse
LOAD_STATIONARY whose tags break its pattern is BAD_TAGS (the tile is forgotten).

numpy + ml_dtypes only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from . import sparse, vector
from .activation import ActivationModel
from .collective import ROUTED_OPS, out_rows, route_collective, run_collective, torus_groups
from .isa import (
    DTYPE_BYTES,
    DTYPE_NAMES,
    OPERAND_DTYPES,
    ActivationFunc,
    AluOp,
    CollectiveDim,
    CollectiveOp,
    Dtype,
    ErrorCode,
    Opcode,
    Rounding,
    Sparsity,
    decode,
    is_code,
)
from .tensor_engine import TensorEngineModel

__all__ = ["CoreConfig", "NeuronCoreISS", "RingISS", "CommandError"]


def _meet(p0, rows0, w0, cols0, p1, rows1, w1, cols1) -> bool:
    """Whether two rectangles of partitions x words share a word."""
    return p0 < p1 + rows1 and p1 < p0 + rows0 and w0 < w1 + cols1 and w1 < w0 + cols0


def _out_rows(f: dict, ranks: int) -> int:
    """The destination words (a partition's) of a routed COLLECTIVE: its buffer is ``cols``
    rows of ``rows`` (= W) words, never partial."""
    return out_rows(f["coll_op"], f["rows"] * f["cols"], ranks, f["rows"])


_MASK = {Dtype.BF16: 0xFFFF, Dtype.FP8_E4M3: 0xFF, Dtype.FP8_E5M2: 0xFF}  # OPERAND_DTYPES
_VECTOR_OPS = (Opcode.TENSOR_TENSOR, Opcode.TENSOR_SCALAR, Opcode.TENSOR_REDUCE,
               Opcode.TRANSPOSE)
_UINT = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4")}  # DRAM: little-endian
_NEG_ZERO = 0x80000000


@dataclass(frozen=True)
class CoreConfig:
    """Sizes of one core: ``n`` partitions (= PE rows = activation lanes), ``sbuf_words``
    per partition, PSUM ``psum_banks`` x ``psum_words``, ``dram_bytes``, the activation
    engine's ``random_bits``, the ring's ``link_width``, the DMA's AXI ``data_width``
    (timing only: no result depends on it; programs size their commands by it), and whether
    the core has the vector engine (``vector_engine``: without it, its opcodes 9..12 are
    BAD_OPCODE), whether its tensor engine has the sparse mode (``sparse``: without it, a
    LOAD_STATIONARY's sparsity other than DENSE is BAD_FIELD), and ``ranks``, the size P of
    the ring it is in (0: none; :class:`RingISS` sets it on cores that say 0), which a
    PERMUTE's shift and an all-to-all's destination are checked against, and ``torus_rows``:
    R, the ring's cores forming an R x (ranks / R) torus (rank i·C + j in row i, column j;
    ``golden.collective.torus_groups``); 1, a ring. ``ranks`` must be a multiple of R and,
    on a torus (R >= 2) in a ring (``ranks`` > 0), give rows of at least 2 cores."""

    n: int = 4
    sbuf_words: int = 256
    psum_banks: int = 4
    psum_words: int = 16
    dram_bytes: int = 1 << 16
    random_bits: int = 16
    link_width: int = 1
    data_width: int = 32
    vector_engine: bool = False
    sparse: bool = False
    ranks: int = 0
    torus_rows: int = 1

    def __post_init__(self):
        r = self.torus_rows
        if isinstance(r, bool) or not isinstance(r, int | np.integer) or r < 1:
            raise ValueError(f"torus_rows must be an integer >= 1, not {r!r}")
        if self.ranks % r:
            raise ValueError(f"torus_rows ({r}) must divide ranks ({self.ranks})")
        if r > 1 and self.ranks and self.ranks // r < 2:
            raise ValueError(f"torus_rows ({r}) must leave rows of at least 2 cores: ranks "
                             f"{self.ranks} / torus_rows {r} = {self.ranks // r}")

    def dim_ranks(self, dim) -> int:
        """P of a COLLECTIVE along ``dim`` (:class:`golden.isa.CollectiveDim`): the cores of
        its sub-ring, ranks / torus_rows for ROW, torus_rows for COLUMN; 0 outside a ring."""
        if not self.ranks:
            return 0
        return self.torus_rows if dim == CollectiveDim.COLUMN else self.ranks // self.torus_rows


class CommandError(Exception):
    """A command failed with ``code``; ``counted``: it ran (an error of a running command),
    so the executed count includes it."""

    def __init__(self, code: ErrorCode, reason: str, *, counted: bool = False):
        super().__init__(f"{code.name}: {reason}")
        self.code, self.reason, self.counted = code, reason, counted


def _stationary_rows(sparsity: int, k: int) -> int:
    """The SBUF partitions (stationary rows) of a LOAD_STATIONARY of K = ``k``: K if dense,
    else the slots of its pattern."""
    if sparsity == Sparsity.DENSE:
        return k
    return sparse.pattern(Sparsity(sparsity).pattern).slots(k)


def _check(ok: bool, code: ErrorCode, reason: str) -> None:
    if not ok:
        raise CommandError(code, reason)


class NeuronCoreISS:
    """One core: state plus :meth:`step` / :meth:`run` over descriptors."""

    def __init__(self, cfg: CoreConfig = CoreConfig(), *, dram=None):
        self.cfg = cfg
        self.sbuf = np.zeros((cfg.n, cfg.sbuf_words), dtype=np.uint32)
        self.te = TensorEngineModel(cfg.n, cfg.psum_banks, cfg.psum_words)
        self.act = ActivationModel(cfg.n, random_bits=cfg.random_bits)
        self.dram = np.zeros(cfg.dram_bytes, dtype=np.uint8)
        if dram is not None:
            d = np.asarray(dram, dtype=np.uint8).reshape(-1)
            self.dram[:d.size] = d
        self.error = ErrorCode.OK
        self.error_index: int | None = None
        self.error_reason = ""
        self.executed = 0

    @property
    def psum(self) -> np.ndarray:
        return self.te.psum

    # --- one command ---------------------------------------------------------------------

    def check(self, words) -> tuple[Opcode, dict]:
        """Decode and validate a descriptor; raise :class:`CommandError` if illegal."""
        code, f = decode(words)
        _check(code in Opcode._value2member_map_, ErrorCode.BAD_OPCODE,
               f"opcode {code} is not a command")
        op = Opcode(code)
        c = self.cfg
        _check(c.vector_engine or op not in _VECTOR_OPS, ErrorCode.BAD_OPCODE,
               f"{op.name}: this core has no vector engine")
        if op in (Opcode.DMA_LOAD, Opcode.DMA_STORE):
            _check(f["dtype"] in DTYPE_BYTES, ErrorCode.BAD_DTYPE, f"dtype {f['dtype']}")
            _check(f["rows"] >= 1 and f["cols"] >= 1, ErrorCode.BAD_SHAPE, "rows or cols is 0")
            self._sbuf_range(f["part"], f["rows"], f["sbuf_addr"], f["cols"])
            size = DTYPE_BYTES[f["dtype"]]
            last = f["dram_addr"] + (f["rows"] - 1) * f["dram_stride"] + f["cols"] * size
            _check(last <= c.dram_bytes, ErrorCode.BAD_RANGE,
                   f"DRAM bytes up to {last} beyond {c.dram_bytes}")
            _check(f["dram_addr"] % size == 0 and f["dram_stride"] % size == 0,
                   ErrorCode.BAD_ALIGN, f"address or stride not a multiple of {size} bytes")
        elif op == Opcode.LOAD_STATIONARY:
            _check(is_code(Sparsity, f["sparsity"])
                   and (f["sparsity"] == Sparsity.DENSE or c.sparse),
                   ErrorCode.BAD_FIELD, f"sparsity {f['sparsity']} (reserved, or no sparse "
                                        f"mode in this core)")
            _check(f["fmt"] in OPERAND_DTYPES, ErrorCode.BAD_DTYPE, f"fmt {f['fmt']}")
            rows = _stationary_rows(f["sparsity"], f["k"])
            _check(f["k"] >= 1 and 1 <= rows <= c.n and 1 <= f["m"] <= c.n,
                   ErrorCode.BAD_SHAPE, f"K x M = {f['k']} x {f['m']}: {rows} stationary rows, "
                                        f"M outside 1..{c.n}")
            self._sbuf_range(f["part"], rows, f["sbuf_addr"], f["m"])
        elif op == Opcode.MATMUL:
            _check(f["fmt"] in OPERAND_DTYPES, ErrorCode.BAD_DTYPE, f"fmt {f['fmt']}")
            _check(f["f"] >= 1, ErrorCode.BAD_SHAPE, "F is 0")
            _check(self.te.stationary_shape is not None
                   and f["k"] == self.te.stationary_shape[0], ErrorCode.BAD_SHAPE,
                   f"K = {f['k']} but the stationary tile is {self.te.stationary_shape}")
            r = self._moving_ratio()
            self._sbuf_range(f["part"], -(-f["k"] // r), f["sbuf_addr"], f["f"] * r)
            _check(f["bank"] < c.psum_banks and f["psum_addr"] + f["f"] <= c.psum_words,
                   ErrorCode.BAD_RANGE, "PSUM bank or words out of range")
        elif op == Opcode.ACTIVATE:
            _check(is_code(ActivationFunc, f["func"]) and is_code(Rounding, f["mode"]),
                   ErrorCode.BAD_FIELD,
                   f"func {f['func']} or mode {f['mode']} reserved")
            _check(f["dtype"] in DTYPE_NAMES, ErrorCode.BAD_DTYPE, f"dtype {f['dtype']}")
            _check(f["rows"] >= 1 and f["cols"] >= 1, ErrorCode.BAD_SHAPE, "rows or cols is 0")
            self._sbuf_range(f["part"], f["rows"], f["dst_addr"], f["cols"])
            if f["src_sbuf"]:
                self._sbuf_range(f["part"], f["rows"], f["src_addr"], f["cols"])
                apart = abs(f["src_addr"] - f["dst_addr"])
                _check(apart == 0 or apart >= f["cols"], ErrorCode.BAD_RANGE,
                       "SBUF source and destination overlap without being the same")
            else:
                _check(f["src_bank"] < c.psum_banks
                       and f["src_addr"] + f["cols"] <= c.psum_words, ErrorCode.BAD_RANGE,
                       "PSUM bank or words out of range")
            _check(not f["bias_en"] or f["bias_addr"] < c.sbuf_words, ErrorCode.BAD_RANGE,
                   "bias word out of range")
        elif op in (Opcode.TENSOR_TENSOR, Opcode.TENSOR_SCALAR, Opcode.TENSOR_REDUCE):
            self._check_vector(op, f)
        elif op == Opcode.TRANSPOSE:
            _check(f["rows"] >= 1 and f["cols"] >= 1, ErrorCode.BAD_SHAPE, "rows or cols is 0")
            self._sbuf_range(f["part"], f["rows"], f["src_addr"], f["cols"])
            self._sbuf_range(f["dst_part"], f["cols"], f["dst_addr"], f["rows"])
            _check(not _meet(f["part"], f["rows"], f["src_addr"], f["cols"], f["dst_part"],
                             f["cols"], f["dst_addr"], f["rows"]),
                   ErrorCode.BAD_RANGE, "the source and destination of a TRANSPOSE meet")
        elif op == Opcode.COLLECTIVE:
            self._check_collective(f)
        return op, f

    def _check_collective(self, f: dict) -> None:
        """COLLECTIVE: the checks in the order of the module docstring (the sequencer's)."""
        c = self.cfg
        _check(is_code(CollectiveOp, f["coll_op"]), ErrorCode.BAD_FIELD,
               f"collective op {f['coll_op']}")
        _check(f["dim"] != CollectiveDim.COLUMN or (c.ranks and c.torus_rows > 1),
               ErrorCode.BAD_FIELD,
               "dim COLUMN needs a torus (torus_rows > 1)")
        P = c.dim_ranks(f["dim"])  # the sub-ring's cores
        _check(f["coll_op"] != CollectiveOp.PERMUTE or 1 <= f["shift"] <= P - 1,
               ErrorCode.BAD_FIELD, f"a PERMUTE's shift must be in 1..P-1 = {P - 1} "
                                    f"({CollectiveDim(f['dim']).name}: P = {P}), not "
                                    f"{f['shift']}")
        _check(f["rows"] >= 1 and f["cols"] >= 1, ErrorCode.BAD_SHAPE, "rows or cols is 0")
        _check(f["rows"] == c.link_width, ErrorCode.BAD_SHAPE,
               f"a COLLECTIVE moves {c.link_width} partitions (the link width), not "
               f"{f['rows']}")
        self._sbuf_range(f["part"], f["rows"], f["sbuf_addr"], f["cols"])
        if f["coll_op"] in ROUTED_OPS and P >= 2:
            out = _out_rows(f, P)
            _check(f["dst_addr"] + out <= c.sbuf_words, ErrorCode.BAD_RANGE,
                   f"{CollectiveOp(f['coll_op']).name}: destination words {f['dst_addr']}.."
                   f"{f['dst_addr'] + out - 1} outside {c.sbuf_words}")
            _check(not _meet(0, 1, f["sbuf_addr"], f["cols"], 0, 1, f["dst_addr"], out),
                   ErrorCode.BAD_RANGE,
                   f"{CollectiveOp(f['coll_op']).name}: destination words {f['dst_addr']}.."
                   f"{f['dst_addr'] + out - 1} meet the source's {f['sbuf_addr']}.."
                   f"{f['sbuf_addr'] + f['cols'] - 1}")

    def _check_vector(self, op: Opcode, f: dict) -> None:
        """TENSOR_TENSOR, TENSOR_SCALAR and TENSOR_REDUCE: fields, dtypes, shape, ranges."""
        ins = ["in0"] + (["in1"] if op == Opcode.TENSOR_TENSOR else [])
        alu_ok = (f["alu"] in vector.REDUCE_OPS if op == Opcode.TENSOR_REDUCE
                  else is_code(AluOp, f["alu"]))
        _check(alu_ok and is_code(Rounding, f["mode"]), ErrorCode.BAD_FIELD,
               f"alu {f['alu']} or mode {f['mode']} reserved for {op.name}")
        for i in ins:
            dt = f[f"{i}_dtype"]
            _check(dt in DTYPE_NAMES and (f[f"{i}_sbuf"] or dt == Dtype.FP32),
                   ErrorCode.BAD_DTYPE, f"{i}_dtype {dt} (a PSUM operand is fp32)")
        _check(f["dtype"] in DTYPE_NAMES, ErrorCode.BAD_DTYPE, f"dtype {f['dtype']}")
        _check(f["rows"] >= 1 and f["cols"] >= 1, ErrorCode.BAD_SHAPE, "rows or cols is 0")
        out_cols = 1 if op == Opcode.TENSOR_REDUCE else f["cols"]
        self._sbuf_range(f["part"], f["rows"], f["dst_addr"], out_cols)
        for i in ins:
            self._src_range(i, f[f"{i}_sbuf"], f[f"{i}_bank"], f["part"], f["rows"],
                            f[f"{i}_addr"], f["cols"])
            if f[f"{i}_sbuf"] and op != Opcode.TENSOR_REDUCE:
                apart = abs(f[f"{i}_addr"] - f["dst_addr"])
                _check(apart == 0 or apart >= f["cols"], ErrorCode.BAD_RANGE,
                       f"SBUF {i} and the destination overlap without being the same")

    def _src_range(self, what, sbuf, bank, part, rows, addr, cols):
        """An operand of SBUF words or (``sbuf`` 0) of PSUM ``bank``'s words in range."""
        c = self.cfg
        if sbuf:
            self._sbuf_range(part, rows, addr, cols)
        else:
            _check(bank < c.psum_banks and addr + cols <= c.psum_words
                   and part + rows <= c.n, ErrorCode.BAD_RANGE,
                   f"{what + ' ' if what else ''}PSUM bank or words out of range")

    def _sbuf_range(self, part, rows, addr, cols):
        c = self.cfg
        _check(part + rows <= c.n and addr + cols <= c.sbuf_words, ErrorCode.BAD_RANGE,
               f"SBUF partitions {part}..{part + rows - 1}, words {addr}..{addr + cols - 1} "
               f"outside {c.n} x {c.sbuf_words}")

    def execute(self, op: Opcode, f: dict) -> None:
        """Execute a validated command (COLLECTIVE needs a ring: see :class:`RingISS`)."""
        if op == Opcode.DMA_LOAD:
            size = DTYPE_BYTES[f["dtype"]]
            for p in range(f["rows"]):
                a = f["dram_addr"] + p * f["dram_stride"]
                row = self.dram[a:a + f["cols"] * size].view(_UINT[size])
                self.sbuf[f["part"] + p, f["sbuf_addr"]:f["sbuf_addr"] + f["cols"]] = row
        elif op == Opcode.DMA_STORE:
            size = DTYPE_BYTES[f["dtype"]]
            for p in range(f["rows"]):
                a = f["dram_addr"] + p * f["dram_stride"]
                words = self.sbuf[f["part"] + p, f["sbuf_addr"]:f["sbuf_addr"] + f["cols"]]
                self.dram[a:a + f["cols"] * size] = words.astype(_UINT[size]).view(np.uint8)
        elif op == Opcode.LOAD_STATIONARY:
            rows = _stationary_rows(f["sparsity"], f["k"])
            tile = self.sbuf[f["part"]:f["part"] + rows, f["sbuf_addr"]:f["sbuf_addr"] + f["m"]]
            if f["sparsity"] == Sparsity.DENSE:
                self.te.load_stationary(self._operand(tile, f["fmt"]), DTYPE_NAMES[f["fmt"]])
            else:
                values, tags = sparse.unpack_words(tile, _MASK[f["fmt"]])
                try:
                    self.te.load_stationary_sparse(
                        self._operand(values, f["fmt"]), tags, DTYPE_NAMES[f["fmt"]],
                        Sparsity(f["sparsity"]).pattern, f["k"])
                except ValueError as err:
                    raise CommandError(ErrorCode.BAD_TAGS, str(err), counted=True) from None
        elif op == Opcode.MATMUL:
            r = self._moving_ratio()
            rows = -(-f["k"] // r)
            mv = self.sbuf[f["part"]:f["part"] + rows,
                           f["sbuf_addr"]:f["sbuf_addr"] + f["f"] * r]
            if r > 1:
                mv = sparse.moving_from_layout(mv, self.te.stationary_sparse[2], f["k"])
            self.te.multiply_moving(self._operand(mv, f["fmt"]), DTYPE_NAMES[f["fmt"]],
                                    f["bank"], f["psum_addr"], bool(f["accumulate"]))
        elif op == Opcode.ACTIVATE:
            n, p0, p1 = self.cfg.n, f["part"], f["part"] + f["rows"]
            cols = f["cols"]
            x = np.zeros((cols, n), dtype=np.uint32)
            if f["src_sbuf"]:
                src = self.sbuf[p0:p1, f["src_addr"]:f["src_addr"] + cols]
            else:
                src = self.te.psum[p0:p1, f["src_bank"], f["src_addr"]:f["src_addr"] + cols]
            x[:, p0:p1] = src.T
            bias = (self.sbuf[:, f["bias_addr"]].copy() if f["bias_en"]
                    else np.full(n, _NEG_ZERO, dtype=np.uint32))
            out = self.act.command(x, func=f["func"], scale_bits=f["scale"], bias_bits=bias,
                                   fmt=DTYPE_NAMES[f["dtype"]],
                                   mode=Rounding(f["mode"]).golden_name,
                                   saturate=bool(f["saturate"]))
            self.sbuf[p0:p1, f["dst_addr"]:f["dst_addr"] + cols] = out[:, p0:p1].T
        elif op in (Opcode.TENSOR_TENSOR, Opcode.TENSOR_SCALAR, Opcode.TENSOR_REDUCE):
            self._vector(op, f)
        elif op == Opcode.TRANSPOSE:
            src = self._tile(1, 0, f["part"], f["rows"], f["src_addr"], f["cols"])
            self.sbuf[f["dst_part"]:f["dst_part"] + f["cols"],
                      f["dst_addr"]:f["dst_addr"] + f["rows"]] = vector.transpose(src)
        elif op == Opcode.SET_SEED:
            self.act.reseed(f["seed"])
        elif op == Opcode.COLLECTIVE:
            raise CommandError(ErrorCode.BAD_FIELD, "COLLECTIVE outside a ring")
        # BARRIER: nothing.

    def _moving_ratio(self) -> int:
        """R: the moving rows an SBUF partition holds for the loaded tile (1 if dense)."""
        sp = self.te.stationary_sparse
        return 1 if sp is None else sp[2].ratio

    def _tile(self, sbuf, bank, part, rows, addr, cols) -> np.ndarray:
        """The rows x cols words of an operand (a copy)."""
        if sbuf:
            return self.sbuf[part:part + rows, addr:addr + cols].copy()
        return self.te.psum[part:part + rows, bank, addr:addr + cols].copy()

    def _operand_fp32(self, f: dict, i: str) -> np.ndarray:
        """Vector operand ``i`` (``"in0"``, ``"in1"``) widened to fp32 bits: (rows, cols)."""
        words = self._tile(f[f"{i}_sbuf"], f[f"{i}_bank"], f["part"], f["rows"],
                           f[f"{i}_addr"], f["cols"])
        dt = Dtype(f[f"{i}_dtype"])
        narrow = words & np.uint32((1 << (8 * dt.nbytes)) - 1)
        return vector.widen(narrow.astype(_UINT[dt.nbytes]), dt.golden_name)

    def _vector(self, op: Opcode, f: dict) -> None:
        """TENSOR_TENSOR / TENSOR_SCALAR / TENSOR_REDUCE: beats of N lanes (lane l =
        partition l, +0 outside the command's partitions), cast by the activation engine's
        SRU (every lane draws on an SR beat), written to the partitions in range."""
        n, p0, p1 = self.cfg.n, f["part"], f["part"] + f["rows"]
        a = self._operand_fp32(f, "in0")
        if op == Opcode.TENSOR_TENSOR:
            y = vector.alu(f["alu"], a, self._operand_fp32(f, "in1"))
        elif op == Opcode.TENSOR_SCALAR:
            s = np.uint32(f["scalar"])
            y = vector.alu(f["alu"], s, a) if f["reverse"] else vector.alu(f["alu"], a, s)
        else:
            y = vector.reduce_free(f["alu"], a)[:, None]
        beats = np.zeros((y.shape[1], n), dtype=np.uint32)
        beats[:, p0:p1] = y.T
        count = len(beats)
        out = self.act.sru.run(beats, [DTYPE_NAMES[f["dtype"]]] * count,
                               [Rounding(f["mode"]).golden_name] * count,
                               [bool(f["saturate"])] * count)
        self.sbuf[p0:p1, f["dst_addr"]:f["dst_addr"] + count] = out[:, p0:p1].T

    @staticmethod
    def _operand(words: np.ndarray, fmt: int) -> np.ndarray:
        return (words & np.uint32(_MASK[fmt])).astype(np.uint16 if fmt == Dtype.BF16
                                                      else np.uint8)

    def fail(self, index: int, err: CommandError) -> None:
        self.error, self.error_index, self.error_reason = err.code, index, err.reason

    def step(self, index: int, words) -> bool:
        """Check and execute one descriptor; on an error record it and return False."""
        try:
            op, f = self.check(words)
            self.execute(op, f)
        except CommandError as err:
            self.fail(index, err)
            self.executed += err.counted
            return False
        self.executed += 1
        return True

    def run(self, program) -> ErrorCode:
        """Run descriptors in order until the end or the first error; return the error.
        A core whose queue stopped on an error runs nothing until :meth:`clear_error`."""
        if self.error != ErrorCode.OK:
            return self.error
        for i, words in enumerate(program):
            if not self.step(i, words):
                break
        return self.error

    def clear_error(self) -> None:
        """CTRL bit 1: the error is cleared and the queue runs again; all state is kept."""
        self.error, self.error_index, self.error_reason = ErrorCode.OK, None, ""

    def soft_reset(self) -> None:
        """CTRL bit 0: the error is cleared, the executed count is 0, the tensor engine holds
        no stationary tile (a MATMUL needs a new LOAD_STATIONARY) and every PRNG lane is
        reseeded with 0, as after a reset. SBUF, PSUM and DRAM keep their contents."""
        self.clear_error()
        self.executed = 0
        self.te.forget()
        self.act.reseed(0)

    # --- host views ---------------------------------------------------------------------

    def read_dram(self, addr: int, count: int, dtype: int) -> np.ndarray:
        size = DTYPE_BYTES[dtype]
        return self.dram[addr:addr + count * size].view(_UINT[size]).copy()

    def write_dram(self, addr: int, values, dtype: int) -> None:
        size = DTYPE_BYTES[dtype]
        v = np.asarray(values).astype(_UINT[size]).reshape(-1)
        self.dram[addr:addr + v.size * size] = v.view(np.uint8)


class RingISS:
    """P cores in a ring, or in an R x C torus (``CoreConfig.torus_rows`` R, the same on
    every core; core r is rank r = i·C + j); each runs its own program, and they meet at
    COLLECTIVE commands. A COLLECTIVE joins the sub-ring its ``dim`` names
    (``golden.collective.torus_groups``: on a ring, ROW is every core): each core stops at
    its next COLLECTIVE, and a sub-ring runs one once every member waits at a COLLECTIVE
    along that dim (so on a ring the k-th COLLECTIVE of every core is one collective). The
    members must agree on its op, its buffer size and, for a PERMUTE, its shift, else this
    raises :class:`RuntimeError`: the hardware's outcome is not defined; the addresses may
    differ from core to core. A core whose ``cfg.ranks`` is 0 is given P (its ``cfg``
    replaced; it keeps its ``torus_rows``); any other value but P, ``torus_rows`` that differ,
    or that do not split P into rows of at least 2 cores, is a :class:`ValueError`.

    When no sub-ring can run -- some of its cores' programs ended (or stopped on an error)
    before joining, or wait at a COLLECTIVE along the other dim, so that no sub-ring ever
    completes -- that is the hardware's link timeout: each core waiting fails with
    ``ErrorCode.LINK_TIMEOUT`` at its position, counted as executed (it was dispatched), and
    its buffer's contents become undefined -- here they are left as they were; the hardware
    may have reduced part of them, so a test reloads that region before comparing. The
    cores' later commands are dropped (the queue stopped). While any sub-ring can run, the
    others wait (the ISS takes the link watchdog to outlast them; a program that relies on
    a wait longer than ``watchdog_cycles`` times out on the hardware)."""

    def __init__(self, cores: list[NeuronCoreISS]):
        if len(cores) < 2:
            raise ValueError(f"a ring needs at least 2 cores, not {len(cores)}")
        bad = [c.cfg.ranks for c in cores if c.cfg.ranks not in (0, len(cores))]
        if bad:
            raise ValueError(f"cores configured for rings of {bad} ranks in a ring of "
                             f"{len(cores)}")
        rows = sorted({c.cfg.torus_rows for c in cores})
        if len(rows) != 1:
            raise ValueError(f"cores configured for tori of {rows} rows (torus_rows) in one "
                             f"ring")
        R = rows[0]
        if len(cores) % R or (R > 1 and len(cores) // R < 2):
            raise ValueError(f"torus_rows {R} does not split {len(cores)} cores into rows of "
                             f"at least 2")
        for c in cores:
            if c.cfg.ranks == 0:
                c.cfg = replace(c.cfg, ranks=len(cores))
        self.cores = cores
        self.rows, self.cols = R, len(cores) // R
        dims = (CollectiveDim.ROW,) + ((CollectiveDim.COLUMN,) if R > 1 else ())
        self._groups = [(d, g) for d in dims for g in torus_groups(R, self.cols, d)]

    def _group(self, r: int, dim: int) -> list[int]:
        """The sub-ring of core ``r`` along ``dim``."""
        return next(g for d, g in self._groups if d == dim and r in g)

    def run(self, programs: list) -> list[ErrorCode]:
        P = len(self.cores)
        if len(programs) != P:
            raise ValueError(f"programs: one per core ({P}), not {len(programs)}")
        pc = [0] * P
        waiting: list[dict | None] = [None] * P
        while True:
            for r, core in enumerate(self.cores):
                prog = programs[r]
                while waiting[r] is None and pc[r] < len(prog) and core.error == ErrorCode.OK:
                    try:
                        op, f = core.check(prog[pc[r]])
                        if op == Opcode.COLLECTIVE:
                            waiting[r] = f
                            break
                        core.execute(op, f)
                        core.executed += 1
                    except CommandError as err:
                        core.fail(pc[r], err)
                        core.executed += err.counted
                        break
                    pc[r] += 1
            if all(w is None for w in waiting):
                return [c.error for c in self.cores]
            ready = [(g, [waiting[r] for r in g]) for d, g in self._groups
                     if all(waiting[r] is not None and waiting[r]["dim"] == d for r in g)]
            if not ready:
                # Cores that ended, failed or wait along the other dim never join: the
                # waiting cores' watchdogs fire.
                absent = {r: [q for q in self._group(r, w["dim"])
                              if waiting[q] is None or waiting[q]["dim"] != w["dim"]]
                          for r, w in enumerate(waiting) if w is not None}
                for r, core in enumerate(self.cores):
                    if waiting[r] is not None:
                        core.fail(pc[r], CommandError(
                            ErrorCode.LINK_TIMEOUT,
                            f"cores {absent[r]} never joined this COLLECTIVE"))
                        core.executed += 1
                        pc[r] += 1
                        waiting[r] = None
                continue
            for _, cmds in ready:
                sizes = {(w["coll_op"], w["rows"] * w["cols"],
                          w["shift"] if w["coll_op"] == CollectiveOp.PERMUTE else 0)
                         for w in cmds}
                if len(sizes) != 1:
                    raise RuntimeError(f"mismatched COLLECTIVE commands across cores (op, "
                                       f"words, shift): {sorted(sizes)}")
            for group, cmds in ready:
                self._collective([self.cores[r] for r in group], cmds)
                for r in group:
                    self.cores[r].executed += 1
                    pc[r] += 1
                    waiting[r] = None

    @staticmethod
    def _collective(cores: list[NeuronCoreISS], cmds: list[dict]) -> None:
        """Run one COLLECTIVE on the sub-ring ``cores`` (in ring order; P = their number),
        given their checked fields ``cmds``, which agree."""
        op, w = cmds[0]["coll_op"], cores[0].cfg.link_width

        def region(c, f, addr, cols):  # the cols x W words, word-major (a view)
            return c.sbuf[f["part"]:f["part"] + f["rows"], addr:addr + cols]

        src = [region(c, f, f["sbuf_addr"], f["cols"]).T.reshape(-1)
               for c, f in zip(cores, cmds, strict=True)]
        if op in ROUTED_OPS:
            out = _out_rows(cmds[0], len(cores))
            dst = [region(c, f, f["dst_addr"], out).T.reshape(-1)
                   for c, f in zip(cores, cmds, strict=True)]
            res = route_collective(op, src, dst, w, cmds[0]["shift"])
            for c, f, r in zip(cores, cmds, res, strict=True):
                region(c, f, f["dst_addr"], out)[:] = r.reshape(out, f["rows"]).T
            return
        res = run_collective(op, src, w)
        for c, f, r in zip(cores, cmds, res, strict=True):
            region(c, f, f["sbuf_addr"], f["cols"])[:] = r.reshape(f["cols"], f["rows"]).T
