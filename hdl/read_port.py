"""Read enables that define a memory read port's data register during reset, and the SBUF's
read latency that every SBUF reader is built for."""

from amaranth.hdl import ResetSignal

__all__ = ["read_enable", "SBUF_READ_LATENCY"]

#: Cycles from an SBUF read's enable to its words on the read port: the block RAMs' output
#: registers, then the port's data registers (see ``hdl.core._Sbuf``).
SBUF_READ_LATENCY = 2


def read_enable(en, domain: str = "sync"):
    """The enable of a synchronous memory read port: ``en``, and every cycle ``domain``'s reset
    is held.

    A read port's data register has no reset and no initial value in the emitted Verilog
    (Yosys writes a ``$memrd`` without one), and loads only when enabled: a port whose users
    have not read yet would show X in a 4-state simulator, and whatever the block RAM holds on
    a board. Reading during reset (the address comes from registers the reset defines) puts a
    defined word in it before reset is released; after it, the port reads exactly when ``en``
    says, so users see no change (``tests/hdl/test_x_safety_rtl.py``). In a reset-less domain
    (an FPGA platform's ``sync`` whose flip-flops the device's global set/reset initializes,
    as on the ECP5) it is ``en``.
    """
    return en | ResetSignal(domain, allow_reset_less=True)
