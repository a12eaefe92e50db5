"""Shift-register delay lines, shared by the pipelined components."""

from amaranth.hdl import Signal

__all__ = ["delay"]


def delay(m, value, cycles: int, *, name: str, en=None):
    """``value`` delayed by ``cycles`` registers in ``m``'s ``sync`` domain (0: ``value``).

    The registers advance only while ``en`` is 1 (always, if ``en`` is None). They are named
    ``{name}_d1``, ``{name}_d2``, … so that waveforms show the pipeline.
    """
    # lab5 begin: delay
    for i in range(cycles):
        reg = Signal.like(value, name=f"{name}_d{i + 1}")
        if en is None:
            m.d.sync += reg.eq(value)
        else:
            with m.If(en):
                m.d.sync += reg.eq(value)
        value = reg
    return value
    # lab5 end: delay
