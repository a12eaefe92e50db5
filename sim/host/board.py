"""The host tool of the FPGA board: a GEMM on the board's NeuronCore, checked against golden.

One driver, two transports. :func:`board_gemm` is a coroutine that takes a
:class:`~sim.host.driver.CoreDriver` whose buses are a
:class:`~sim.host.uart_link.BridgeClient`: over
pyserial it is ``nclite board gemm --port /dev/ttyUSB0`` on a real ULX3S; over the cocotb UART
transport it is the cocotb test of ``hdl.board.BoardTop`` (sim/tb/board.py), in Icarus and
Verilator. The same bytes go over the same protocol either way.

The GEMM is the kernel ``sim.kernels.library.gemm`` (tiled for the board's N), its operands are
random with special values (seeded), written into the board's memory through the bridge; the
result is read back and compared **bit for bit** with ``golden.iss.NeuronCoreISS`` running the
same program on the same memory image.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np

from golden.isa import OPERAND_DTYPES, ErrorCode, Status
from golden.iss import NeuronCoreISS
from sim.host.driver import CoreDriver
from sim.host.programs import BF16, FP8_E4M3, FP8_E5M2, FP32

__all__ = ["BridgeDram", "board_driver", "board_gemm", "board_program", "run_on_board",
           "run_program_on_board", "DTYPE_CODES"]

#: Operand dtype name -> its code (``golden.isa.OPERAND_DTYPES``).
DTYPE_CODES = {d.golden_name: d for d in OPERAND_DTYPES}


class BridgeDram:
    """The core's DRAM as the bridge sees it (``hdl.board.BOARD_MAP`` ``DRAM_BASE``): byte
    reads and writes made of 32-bit word accesses (read-modify-write at unaligned edges)."""

    def __init__(self, client, base: int):
        self.client, self.base = client, base

    async def write(self, addr: int, data: bytes) -> None:
        if not data:
            return
        lo, hi = addr & ~3, (addr + len(data) + 3) & ~3
        buf = bytearray(hi - lo)
        first_partial, last_partial = lo != addr, hi != addr + len(data)
        if first_partial:
            buf[0:4] = (await self.client.read_dword(self.base + lo)).to_bytes(4, "little")
        if last_partial and not (first_partial and hi - 4 == lo):
            buf[-4:] = (await self.client.read_dword(self.base + hi - 4)).to_bytes(4, "little")
        buf[addr - lo:addr - lo + len(data)] = data
        words = np.frombuffer(bytes(buf), dtype="<u4").tolist()
        await self.client.write_words(self.base + lo, words)

    async def read(self, addr: int, size: int) -> bytes:
        if size <= 0:
            return b""
        lo, hi = addr & ~3, (addr + size + 3) & ~3
        words = await self.client.read_words(self.base + lo, (hi - lo) // 4)
        raw = np.asarray(words, dtype="<u4").tobytes()
        return raw[addr - lo:addr - lo + size]


def board_driver(client, cfg, *, wait=None, now=None, clock_hz: float | None = None
                 ) -> CoreDriver:
    """A :class:`CoreDriver` on the board's bridge ``client`` (registers and DRAM).

    ``wait``/``now`` as for :class:`CoreDriver`; on a real board leave them out and give the
    core's ``clock_hz``: then waiting for ``n`` cycles sleeps ``n / clock_hz`` seconds, so the
    driver's cycle timeouts are about real core time, and the driver polls once a millisecond.
    """
    from hdl.board import BOARD_MAP
    from hdl.core import PERF_COUNTERS

    class _Regs:
        async def read_dword(self, addr):
            return await client.read_dword(BOARD_MAP["REGS_BASE"] + addr)

        async def write_dword(self, addr, value):
            await client.write_dword(BOARD_MAP["REGS_BASE"] + addr, value)

        async def write_words(self, addr, words):
            await client.write_words(BOARD_MAP["REGS_BASE"] + addr, words)

    async def sleep(cycles):
        await asyncio.sleep(cycles / clock_hz)

    if wait is None and clock_hz is None:
        raise ValueError("board_driver needs either wait (a simulation) or clock_hz (a board)")
    poll = 4 if wait is not None else max(4, int(clock_hz // 1000))
    return CoreDriver(cfg, _Regs(), BridgeDram(client, BOARD_MAP["DRAM_BASE"]),
                      wait=wait or sleep, now=now or (lambda: None),
                      perf_names=PERF_COUNTERS, burst_push=True, poll_cycles=poll)


def _operands(rng, dtype: int, shape) -> np.ndarray:
    """Random operands with special values mixed in, as the element bytes of ``dtype``."""
    import ml_dtypes

    np_dtype = {BF16: ml_dtypes.bfloat16, FP8_E4M3: ml_dtypes.float8_e4m3fn,
                FP8_E5M2: ml_dtypes.float8_e5m2}[dtype]
    x = rng.standard_normal(shape).astype(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -3e-39, 448.0, 2.0 ** -9],
                        dtype=np.float32)
    mask = rng.random(shape) < 0.08
    x[mask] = rng.choice(specials, size=int(mask.sum()))
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(np_dtype)


def compile_gemm(cfg, *, m: int, k: int, f: int, a_dtype: str = "bf16",
                 b_dtype: str = "bf16", seed: int = 1) -> dict:
    """The GEMM's program, operands and golden result, before any hardware is touched (so a
    shape that does not fit the board's DRAM fails here, with a clear message)."""
    for name, v in (("m", m), ("k", k), ("f", f)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")
    for name, v in (("a_dtype", a_dtype), ("b_dtype", b_dtype)):
        if v not in DTYPE_CODES:
            raise ValueError(f"{name} must be one of {', '.join(DTYPE_CODES)}, not {v!r}")
    from sim.kernels import library
    from sim.kernels.trace import KernelError

    rng = np.random.default_rng(seed)
    fa, fb = DTYPE_CODES[a_dtype], DTYPE_CODES[b_dtype]
    a_val, b_val = _operands(rng, fa, (k, m)), _operands(rng, fb, (k, f))

    def build(kern, ws):
        a = kern.dram_tensor((k, m), fa, "A", data=a_val)
        b = kern.dram_tensor((k, f), fb, "B", data=b_val)
        c = kern.dram_tensor((m, f), FP32, "C")
        library.gemm(ws, a, b, c)
        return a, b, c

    try:
        kern, (a, b, c) = library.traced(cfg, build)
    except KernelError as exc:
        where = f"{cfg.dram_bytes} bytes of DRAM" if exc.reason.startswith("DRAM") else "core"
        raise ValueError(f"a {m}x{k}x{f} GEMM does not fit the board's {where} ({exc.reason})"
                         ) from None
    iss = NeuronCoreISS(cfg)
    image = {a.addr: a_val.view(np.uint8).reshape(-1), b.addr: b_val.view(np.uint8).reshape(-1)}
    for addr, data in image.items():
        iss.dram[addr:addr + data.size] = data
    code = iss.run(kern.program)
    if code != ErrorCode.OK:
        raise RuntimeError(f"the golden ISS rejects the program: {code.name} "
                           f"({iss.error_reason})")
    size = m * f * 4
    return {"program": kern.program, "image": image, "c_addr": c.addr, "c_size": size,
            "want": iss.dram[c.addr:c.addr + size].view("<u4").reshape(m, f).copy(),
            "m": m, "k": k, "f": f, "a_dtype": a_dtype, "b_dtype": b_dtype, "seed": seed}


async def board_gemm(driver: CoreDriver, cfg, *, m: int, k: int, f: int, a_dtype: str = "bf16",
                     b_dtype: str = "bf16", seed: int = 1, log=None,
                     compiled: dict | None = None) -> dict:
    """C (M x F, fp32) = A.T @ B with A (K x M) and B (K x F) on the board; bit-exact check.

    The core is soft-reset first (an earlier session's queue and counters are gone), and C's
    memory is overwritten with a poison pattern before the run, so a result left in DRAM by an
    earlier run cannot pass for this one. Returns a dict with ``ok``, ``mismatches``, shapes,
    ``commands``, ``executed``, ``cycles`` (busy cycles of the core) and the engines' busy
    counters. Raises on a core error or a bus error.
    """
    log = log or (lambda msg: None)
    g = compiled or compile_gemm(cfg, m=m, k=k, f=f, a_dtype=a_dtype, b_dtype=b_dtype,
                                 seed=seed)
    m, f = g["m"], g["f"]
    await driver.check_id()
    await driver.soft_reset()
    if await driver.status() & Status.ERROR:
        await driver.clear_error()
    for addr, data in g["image"].items():
        log(f"writing {data.size} bytes at DRAM 0x{addr:x}")
        await driver.load_dram(addr, data)
    await driver.load_dram(g["c_addr"], np.full(g["c_size"], 0xFF, dtype=np.uint8))
    log(f"running {len(g['program'])} commands")
    res = await driver.run(g["program"])
    if res.error != ErrorCode.OK:
        raise RuntimeError(f"the core reports {res.error.name} at command {res.error_index}")
    if res.executed != len(g["program"]):
        raise RuntimeError(f"the core executed {res.executed} of {len(g['program'])} commands")
    log(f"reading {g['c_size']} bytes of C back")
    got = (await driver.fetch_dram(g["c_addr"], g["c_size"])).view("<u4").reshape(m, f)
    want = g["want"]
    got_f, want_f = got.view(np.float32), want.view(np.float32)
    same = (got == want) | (np.isnan(got_f) & np.isnan(want_f))
    bad = np.argwhere(~same)
    return {"ok": bool(same.all()), "mismatches": int(bad.shape[0]),
            "first_mismatches": [{"row": int(i), "col": int(j), "board": f"0x{got[i, j]:08x}",
                                  "golden": f"0x{want[i, j]:08x}"} for i, j in bad[:4]],
            "m": m, "k": g["k"], "f": f, "a_dtype": g["a_dtype"], "b_dtype": g["b_dtype"],
            "seed": g["seed"], "commands": len(g["program"]), "executed": res.executed,
            "cycles": res.cycles, "macs": m * g["k"] * f, "perf": res.perf}


async def board_program(driver: CoreDriver, program, image, outputs, log=None) -> dict:
    """Run a traced kernel's ``program`` on the board: DRAM loaded with ``image`` (bytes from
    address 0), each output range ``outputs`` (``{name: (addr, expected bytes)}``, the golden
    ISS's) poisoned first, then read back and compared with the ISS's bytes, element by element
    (the element size: ``len`` of an expected item's dtype; any NaN matching any NaN).

    Returns ``ok``, per output the number of differing elements (``mismatches``), the run's
    ``cycles``, ``executed`` and performance counters. Raises on a core error."""
    log = log or (lambda msg: None)
    await driver.check_id()
    await driver.soft_reset()
    if await driver.status() & Status.ERROR:
        await driver.clear_error()
    image = np.asarray(image, dtype=np.uint8)
    log(f"writing {image.size} bytes of DRAM")
    await driver.load_dram(0, image)
    for addr, want in outputs.values():
        await driver.load_dram(addr, np.full(want.nbytes, 0xFF, dtype=np.uint8))
    log(f"running {len(program)} commands")
    res = await driver.run(program)
    if res.error != ErrorCode.OK:
        raise RuntimeError(f"the core reports {res.error.name} at command {res.error_index}")
    mismatches = {}
    for name, (addr, want) in outputs.items():
        raw = await driver.fetch_dram(addr, want.nbytes)
        got = raw.view(want.dtype).reshape(want.shape)
        g32, w32 = got.astype(np.float32), want.astype(np.float32)
        same = (raw == want.reshape(-1).view(np.uint8)).reshape(-1, want.dtype.itemsize).all(1)
        same = same.reshape(want.shape) | (np.isnan(g32) & np.isnan(w32))
        mismatches[name] = int((~same).sum())
    return {"ok": not any(mismatches.values()), "mismatches": mismatches,
            "commands": len(program), "executed": res.executed, "cycles": res.cycles,
            "perf": res.perf}


def _connect(port: str, board: str, baud: int | None, timeout: float, run):
    """Open ``port`` and ``run(client, cfg, bcfg)`` (a coroutine) on the board's bridge; the
    board's errors as :class:`BoardError` with a hint."""
    from hdl.board import BoardTop
    from sim.host.driver import CoreTimeout
    from sim.host.uart_link import BridgeClient, BridgeError, ProtocolError, SerialTransport
    from synth.board import board_config

    bcfg = board_config(board)
    cfg = BoardTop(divisor=4, **bcfg["core"]).iss_config()
    baud = baud or bcfg["baud"]
    try:
        transport = SerialTransport(port, baud, timeout)
    except Exception as exc:  # serial.SerialException and OSError alike
        raise BoardError(f"cannot open {port}: {exc}") from exc
    hint = (f"is the board connected on {port}, its bitstream loaded (make bitstream "
            f"BOARD={board}, then your loader), and the baud rate {baud}?")
    try:
        client = BridgeClient(transport)
        driver = board_driver(client, cfg, clock_hz=bcfg["clock_hz"])
        t0 = time.monotonic()
        result = asyncio.run(run(driver, cfg))
        result["seconds"] = round(time.monotonic() - t0, 2)
    except TimeoutError as exc:
        raise BoardError(f"no answer from the bridge ({exc}): {hint}") from exc
    except ProtocolError as exc:
        raise BoardError(f"garbled answer from the bridge ({exc}): {hint}") from exc
    except (BridgeError, CoreTimeout, AssertionError) as exc:
        raise BoardError(f"{exc}") from exc
    finally:
        transport.close()
    return {"board": board, "port": port, "baud": baud, **result}


class BoardError(RuntimeError):
    """The board could not be reached or did not answer as expected (one line, with a hint)."""


def run_on_board(port: str, *, board: str = "ulx3s-85f", baud: int | None = None,
                 timeout: float = 2.0, log=None, **gemm_args) -> dict:
    """:func:`board_gemm` on a real board over pyserial (``port``, e.g. /dev/ttyUSB0)."""
    from hdl.board import BoardTop
    from synth.board import board_config

    cfg = BoardTop(divisor=4, **board_config(board)["core"]).iss_config()
    compiled = compile_gemm(cfg, **gemm_args)  # bad shapes fail before the port is opened
    return _connect(port, board, baud, timeout, lambda driver, cfg: board_gemm(
        driver, cfg, log=log, compiled=compiled, **gemm_args))


def run_program_on_board(port: str, program, image, outputs, *, board: str = "ulx3s-85f",
                         baud: int | None = None, timeout: float = 2.0, log=None) -> dict:
    """:func:`board_program` on a real board over pyserial."""
    return _connect(port, board, baud, timeout, lambda driver, cfg: board_program(
        driver, program, image, outputs, log=log))
