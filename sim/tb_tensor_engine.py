"""cocotb testbench: ``hdl.tensor_engine.TensorEngine`` against ``golden.tensor``, bit for bit.

One coroutine drives every stream once per cycle (inputs change on the falling edge, handshakes
are read in the ReadOnly phase after it), so the per-cycle Python work stays small. Each input
stream gets random valid gaps and the drain response random back-pressure (``NCLITE_GAPS`` =
probability, default 0.2; 0 for throughput runs). Programs are built by ``sim.te_driver`` and
run phase by phase: send the phase's commands and data, wait until the engine is idle, drain
PSUM words and compare them with the golden model's.

Tests (selected by the runner's ``testcase``):

* ``random_commands`` — random LOAD_STATIONARY / MULTIPLY_MOVING sequences: every dtype pair,
  random K, M, F (1 included, partial tiles), banks, addresses, overwrite and accumulate,
  several multiplications per stationary tile, special values; PSUM drained and compared.
* ``back_to_back`` — no gaps: accumulate read-after-write and load-after-swap hazards.
* ``illegal_commands`` — the engine's own error path: dropped commands, sticky ``error``.
* ``random_gemms`` — tiled GEMMs of random shapes (1 and non-multiples of n included) and
  dtype pairs, back to back without reset.
* ``gemm`` — one GEMM given by ``NCLITE_GEMM`` (JSON: m, k, f, a_fmt, b_fmt, gaps); writes
  its cycle counts to ``NCLITE_GEMM_OUT`` (used by ``nclite gemm``, the demo and the bench).
"""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from golden.formats import to_bits
from sim import tbutil, vectors
from sim.te_driver import EngineConfig, TensorEngineProgram, gemm_program

WATCHDOG_CYCLES = 200_000


class TensorEngineTB:
    """Drives a ``TensorEngine``'s streams; runs :class:`TensorEngineProgram` phases."""

    def __init__(self, dut, gaps: float):
        self.dut = dut
        self.gaps = gaps
        self.rng = tbutil.rng(0x7E)
        self.cycles = 0
        self.compute_cycles = 0
        self.drain_cycles = 0

    async def start(self):
        dut = self.dut
        for name in ("cmd", "weights", "moving", "drain_req"):
            getattr(dut, f"{name}__valid").value = 0
        dut.drain_resp__ready.value = 0
        await tbutil.start_clock(dut)
        await tbutil.reset(dut)

    async def run_phase(self, ph, n: int) -> list[str]:
        """Send a phase's beats, wait for idle, drain and compare; return mismatch texts."""
        dut = self.dut
        sources = [(getattr(dut, f"{s}__valid"), getattr(dut, f"{s}__payload"),
                    getattr(dut, f"{s}__ready"), beats)
                   for s, beats in (("cmd", ph.cmds), ("weights", ph.weights),
                                    ("moving", ph.moving)) if beats]
        pos = [0] * len(sources)
        shown = [False] * len(sources)  # valid is up (and must stay up until the transfer)
        rng, gaps = self.rng, self.gaps
        start = self.cycles
        idle_seen = 0
        while True:
            await FallingEdge(dut.clk)
            self.cycles += 1
            for i, (valid, payload, _, beats) in enumerate(sources):
                if shown[i]:
                    continue  # valid stays up, payload stable, until the transfer
                if pos[i] < len(beats) and not (gaps and rng.random() < gaps):
                    payload.value = beats[pos[i]]
                    valid.value = 1
                    shown[i] = True
                else:
                    valid.value = 0
            await ReadOnly()
            for i, (_valid, _, ready, _beats) in enumerate(sources):
                if shown[i] and ready.value:
                    pos[i] += 1
                    shown[i] = False
            pending = any(p < len(s[3]) for p, s in zip(pos, sources, strict=True))
            if not pending and not dut.busy.value:
                idle_seen += 1
                if idle_seen > 1:
                    break
            if self.cycles - start > WATCHDOG_CYCLES:
                raise AssertionError(
                    f"tensor engine hung: beats sent {pos} of "
                    f"{[len(s[3]) for s in sources]} after {WATCHDOG_CYCLES} cycles "
                    f"(seed {tbutil.seed()})")
        await FallingEdge(dut.clk)
        for valid, *_ in sources:
            valid.value = 0
        self.compute_cycles += self.cycles - start
        return await self._drain(ph, n)

    async def _drain(self, ph, n: int) -> list[str]:
        dut = self.dut
        if not ph.drains:
            return []
        start = self.cycles
        rng, gaps = self.rng, self.gaps
        sent = got = 0
        req_shown = False
        errors: list[str] = []
        mask = (1 << 32) - 1
        while got < len(ph.drains):
            await FallingEdge(dut.clk)
            self.cycles += 1
            if not req_shown and sent < len(ph.drains) and not (gaps and rng.random() < gaps):
                dut.drain_req__payload.value = ph.drains[sent]
                dut.drain_req__valid.value = 1
                req_shown = True
            elif not req_shown:
                dut.drain_req__valid.value = 0
            resp_ready = not (gaps and rng.random() < gaps)
            dut.drain_resp__ready.value = int(resp_ready)
            await ReadOnly()
            if req_shown and dut.drain_req__ready.value:
                sent += 1
                req_shown = False
            if resp_ready and dut.drain_resp__valid.value:
                word = int(dut.drain_resp__payload.value)
                row = np.array([(word >> (32 * i)) & mask for i in range(n)], dtype=np.uint32)
                want = ph.expected[got]
                bad = np.flatnonzero((row != want) & ph.defined[got])
                if bad.size and len(errors) < 6:
                    errors.append(f"{ph.where[got]}: partitions {bad.tolist()} RTL "
                                  f"{tbutil.hexs(row[bad])} golden {tbutil.hexs(want[bad])}")
                got += 1
            if self.cycles - start > WATCHDOG_CYCLES:
                raise AssertionError(f"drain hung after {got} rows (seed {tbutil.seed()})")
        await FallingEdge(dut.clk)
        dut.drain_req__valid.value = 0
        dut.drain_resp__ready.value = 0
        self.drain_cycles += self.cycles - start
        return errors

    async def run(self, prog: TensorEngineProgram, *, expect_error: bool = False) -> None:
        errors: list[str] = []
        for ph in prog.phases:
            errors += await self.run_phase(ph, prog.cfg.n)
            if len(errors) >= 6:
                break
        if int(self.dut.error.value) != expect_error:
            errors.append("the engine flagged a command error" if not expect_error
                          else "the engine did not flag the illegal commands")
        if errors:
            raise AssertionError(f"PSUM differs from golden in {tbutil.simulator()} "
                                 f"(seed {tbutil.seed()}):\n  " + "\n  ".join(errors))


def _config() -> EngineConfig:
    return EngineConfig.from_params(tbutil.params())


def _gaps(default: float = 0.2) -> float:
    return float(os.environ.get("NCLITE_GAPS", default))


@cocotb.test()
async def random_commands(dut):
    cfg = _config()
    rng = tbutil.rng(5)
    n, fmts = cfg.n, list(cfg.formats)
    prog = TensorEngineProgram(cfg, junk=rng)
    count = int(os.environ.get("NCLITE_TE_COMMANDS", "24"))
    pairs = [(a, b) for a in fmts for b in fmts]  # every (stationary, moving) format pair
    for i in range(count):
        # The first commands take the edge shapes: K = 1, M = 1, F = 1, then a full tile.
        k = [1, n, 1, n][i] if i < 4 else int(rng.integers(1, n + 1))
        m = [1, 1, n, n][i] if i < 4 else int(rng.integers(1, n + 1))
        sfmt, mfmt = pairs[i % len(pairs)]
        prog.load_stationary(vectors.operands(sfmt, rng, (k, m), 0.1), sfmt)
        for j in range(int(rng.choice([1, 1, 2, 3]))):  # several MMs per stationary tile
            f = 1 if i < 2 and j == 0 else int(rng.choice(
                [1, int(rng.integers(1, cfg.words + 1))]))
            addr = int(rng.integers(0, cfg.words - f + 1))
            bank = int(rng.integers(0, cfg.psum_banks))
            acc = bool(rng.random() < 0.5)
            prog.multiply_moving(vectors.operands(mfmt, rng, (k, f), 0.1), mfmt, bank=bank,
                                 addr=addr, accumulate=acc)
        if rng.random() < 0.25:  # drain part of PSUM mid-way, then keep going
            bank = int(rng.integers(0, cfg.psum_banks))
            prog.drain(bank, 0, cfg.words, label="mid-way")
    for bank in range(cfg.psum_banks):
        prog.drain(bank, 0, cfg.words, label="final")
    tb = TensorEngineTB(dut, _gaps())
    await tb.start()
    dut._log.info("random commands: n=%d, %d phases, seed %d", n, len(prog.phases),
                  tbutil.seed())
    await tb.run(prog)


@cocotb.test()
async def back_to_back(dut):
    """No gaps, one phase: the hazards only a full-rate stream shows. Accumulating
    multiplications of one or two columns into the words just written (read-after-write
    through the adder), and a LOAD_STATIONARY right after a one-column multiplication (its
    shifts must wait for the swap wavefront to leave the array)."""
    cfg = _config()
    rng = tbutil.rng(8)
    n, fmts = cfg.n, list(cfg.formats)
    prog = TensorEngineProgram(cfg, junk=rng)
    written = []
    for rep in range(6):
        k, m = int(rng.integers(1, n + 1)), int(rng.integers(1, n + 1))
        sfmt, mfmt = str(rng.choice(fmts)), str(rng.choice(fmts))
        prog.load_stationary(vectors.operands(sfmt, rng, (k, m), 0.05), sfmt)
        f = 1 + rep % 2
        bank, addr = rep % cfg.psum_banks, int(rng.integers(0, cfg.words - f + 1))
        for i in range(4):
            prog.multiply_moving(vectors.operands(mfmt, rng, (k, f), 0.05), mfmt, bank=bank,
                                 addr=addr, accumulate=i > 0)
        written.append((bank, addr, f))
    for bank, addr, f in written:
        prog.drain(bank, addr, f, label="back-to-back")
    tb = TensorEngineTB(dut, 0.0)
    await tb.start()
    await tb.run(prog)


@cocotb.test()
async def illegal_commands(dut):
    """Illegal commands (and drain requests outside PSUM) set ``error`` and are dropped without
    taking data: a valid program around them still gives the golden PSUM."""
    cfg = _config()
    rng = tbutil.rng(9)
    n, words, banks = cfg.n, cfg.words, cfg.psum_banks
    prog = TensorEngineProgram(cfg, junk=rng)
    from hdl.tensor_engine import Opcode

    mm = Opcode.MULTIPLY_MOVING
    bad = [prog.raw_command(op=mm, fmt=0, k=1, f=1)]  # before any LOAD_STATIONARY
    prog.phases[-1].cmds += bad
    prog.load_stationary(vectors.operands("bf16", rng, (n, n), 0.0), "bf16")
    prog.phases[-1].cmds += [
        prog.raw_command(k=0, m=1),  # LOAD_STATIONARY with k = 0
        prog.raw_command(k=1, m=0),  # ... m = 0
        prog.raw_command(fmt=3, k=1, m=1),  # reserved format
        prog.raw_command(op=mm, fmt=0, k=max(n - 1, 0), f=1),  # k differs from the LS's
        prog.raw_command(op=mm, fmt=0, k=n, f=0),  # f = 0
        prog.raw_command(op=mm, fmt=0, k=n, f=words, addr=1 if words > 1 else 0,
                         bank=banks if banks & (banks - 1) else 0),  # beyond the bank / PSUM
    ]
    prog.multiply_moving(vectors.operands("bf16", rng, (n, 2), 0.0), "bf16", bank=0, addr=0,
                         accumulate=False)
    prog.drain(0, 0, 2, label="after illegal commands")
    if banks & (banks - 1) or words & (words - 1):  # a request outside PSUM is encodable
        ph = prog.phases[-1]
        ph.drains.append(prog.raw_drain(banks if banks & (banks - 1) else 0,
                                        words if words & (words - 1) else 0))
        ph.expected.append(np.zeros(n, dtype=np.uint32))
        ph.defined.append(np.ones(n, dtype=bool))
        ph.where.append("drain request outside PSUM")
    tb = TensorEngineTB(dut, _gaps())
    await tb.start()
    await tb.run(prog, expect_error=True)


@cocotb.test()
async def random_gemms(dut):
    cfg = _config()
    rng = tbutil.rng(6)
    n, fmts = cfg.n, list(cfg.formats)
    prog = TensorEngineProgram(cfg, junk=rng)
    shapes = [(1, 1, 1), (n + 1, 2 * n + 1, 3), (n, n, cfg.words + 1)]
    for _ in range(int(os.environ.get("NCLITE_TE_GEMMS", "3"))):
        shapes.append(tuple(int(rng.integers(1, 3 * n + 2)) for _ in range(3)))
    for m, k, f in shapes:
        afmt, bfmt = str(rng.choice(fmts)), str(rng.choice(fmts))
        a = vectors.operands(afmt, rng, (k, m), 0.05)
        b = vectors.operands(bfmt, rng, (k, f), 0.05)
        gemm_program(cfg, a, afmt, b, bfmt, prog)
    tb = TensorEngineTB(dut, _gaps())
    await tb.start()
    dut._log.info("GEMMs %s on n=%d, seed %d", shapes, n, tbutil.seed())
    await tb.run(prog)


@cocotb.test()
async def gemm(dut):
    """One GEMM from NCLITE_GEMM; its figures go to NCLITE_GEMM_OUT."""
    spec = json.loads(os.environ.get("NCLITE_GEMM", "{}"))
    cfg = _config()
    rng = tbutil.rng(7)
    m, k, f = spec.get("m", 2 * cfg.n), spec.get("k", 2 * cfg.n), spec.get("f", 4 * cfg.n)
    afmt, bfmt = spec.get("a_fmt", "bf16"), spec.get("b_fmt", "bf16")
    # Data as a GEMM in a model would have it: normally distributed, finite (the special
    # values are the random tests' business).
    a = to_bits(rng.standard_normal((k, m)), afmt).astype(np.int64)
    b = to_bits(rng.standard_normal((k, f)), bfmt).astype(np.int64)
    prog = gemm_program(cfg, a, afmt, b, bfmt)
    tb = TensorEngineTB(dut, float(spec.get("gaps", 0.0)))
    await tb.start()
    t0 = time.perf_counter()
    error = None
    try:
        await tb.run(prog)
    except AssertionError as exc:
        error = str(exc)
    wall = time.perf_counter() - t0
    macs = sum(ph.macs for ph in prog.phases)
    out = {
        "n": cfg.n, "m": m, "k": k, "f": f, "a_fmt": afmt, "b_fmt": bfmt,
        "simulator": tbutil.simulator(), "seed": tbutil.seed(), "bit_exact": error is None,
        "error": error, "macs": macs, "compute_cycles": tb.compute_cycles,
        "drain_cycles": tb.drain_cycles, "cycles": tb.cycles,
        "utilization": macs / (cfg.n ** 2 * tb.compute_cycles),
        "sim_wall_s": wall, "sim_cycles_per_s": tb.cycles / wall,
        "a_bits": a.tolist() if spec.get("return_data") else None,
        "b_bits": b.tolist() if spec.get("return_data") else None,
    }
    with open(os.environ["NCLITE_GEMM_OUT"], "w") as fh:
        json.dump(out, fh)
    assert error is None, error
