"""The FPGA board top: a NeuronCore, on-chip memory standing in for DRAM, and a UART bridge.

::

    UART pins --> UartAxiLiteBridge --AXI-Lite--> AxiLiteDecoder --+--> NeuronCore.axil
                                                                   |     (registers)
                                                                   +--> AxiMemory.axil
                                                                         (host's view of DRAM)
    NeuronCore.axi (DMA, AXI4) -----------------------------------------> AxiMemory.axi

Address map of the bridge's bus (:data:`BOARD_MAP`): the core's register block
(``hdl.cmdqueue.REGISTERS``) at ``REGS_BASE``; the memory at ``DRAM_BASE``, where byte ``a`` is
the core's DRAM address ``a``. Anything else answers DECERR.

The ``leds`` show: 0 the core busy, 1 a core error, 2 a heartbeat (about 1.5 Hz at 25 MHz),
3 the host is sending (the rx line low), 4 the bridge is answering (the tx line low).

This is plain logic: ``synth.board`` puts it on a real board (pins, clock, reset) and the cocotb
test drives its UART pins directly.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axi_mem import AxiMemory
from .axil_decoder import AxiLiteDecoder
from .core import NeuronCore
from .params import check_power_of_two
from .uart import check_divisor
from .uart_bridge import UartAxiLiteBridge

__all__ = ["BoardTop", "BOARD_MAP"]

#: Where the bridge sees each target (base, size in bytes).
BOARD_MAP = {"REGS_BASE": 0x0000_0000, "REGS_SIZE": 0x1000, "DRAM_BASE": 0x1000_0000}


class BoardTop(wiring.Component):
    """NeuronCore + :class:`~hdl.axi_mem.AxiMemory` (``dram_bytes``) + UART bridge.

    Ports: ``uart_rx`` (from the host), ``uart_tx`` (to the host), ``leds`` (8).

    Parameters
    ----------
    divisor : int
        The bridge's clock cycles per UART bit, at least 4 (default 217: 25 MHz / 115200 baud).
    **core_params
        :class:`~hdl.core.NeuronCore`'s (``n``, ``sbuf_words``, ``psum_banks``,
        ``psum_words``, ``dram_bytes``, ``queue_depth``, ...), whose DRAM is the on-chip
        memory: ``dram_bytes`` must be a power of two, 4 to 2^28 (the DRAM window).

    Raises
    ------
    TypeError
        If ``divisor`` is not an integer; as :class:`~hdl.core.NeuronCore` for the others.
    ValueError
        If ``divisor`` is below 4; if ``dram_bytes`` is not a power of two from 4 to 2^28; as
        :class:`~hdl.core.NeuronCore` for the others.
    """

    uart_rx: In(1)
    uart_tx: Out(1)
    leds: Out(8)

    def __init__(self, *, divisor: int = 217, **core_params):
        self.divisor = check_divisor(divisor)
        self.core_params = dict(core_params)
        self._core = NeuronCore(**core_params)
        self.dram_bytes = check_power_of_two("dram_bytes", self._core.dram_bytes, lo=4,
                                             hi=1 << 28, note="on the board (its block RAM)")
        dram_bits = self.dram_bytes.bit_length() - 1
        self._mem = AxiMemory(size_bytes=self.dram_bytes, axil_addr_width=dram_bits)
        self._bridge = UartAxiLiteBridge(divisor=divisor)
        self._decoder = AxiLiteDecoder(windows=[
            (BOARD_MAP["REGS_BASE"], BOARD_MAP["REGS_SIZE"]),
            (BOARD_MAP["DRAM_BASE"], self.dram_bytes)])
        super().__init__()

    def iss_config(self, **kwargs):
        """The ``golden.iss.CoreConfig`` of the core on the board."""
        return self._core.iss_config(**kwargs)

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self._core
        m.submodules.mem = mem = self._mem
        m.submodules.bridge = bridge = self._bridge
        m.submodules.decoder = decoder = self._decoder

        m.d.comb += [bridge.rx.eq(self.uart_rx), self.uart_tx.eq(bridge.tx)]
        wiring.connect(m, bridge.axil, decoder.bus)
        wiring.connect(m, decoder.sub0, core.axil)
        wiring.connect(m, decoder.sub1, mem.axil)
        wiring.connect(m, core.axi, mem.axi)

        heartbeat = Signal(24)
        m.d.sync += heartbeat.eq(heartbeat + 1)
        m.d.comb += self.leds.eq(Cat(core.busy, core.error, heartbeat[-1], ~self.uart_rx,
                                     ~self.uart_tx))
        return m
